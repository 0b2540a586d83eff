package scaler

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
)

// TestActivityAloneNeedsReady: a custom trigger sized by activity alone, without Kubernetes
// and without readyQuery, answers Unavailable saying that the ready replicas are missing.
// Before, the message was "no usable signal data: activity=0.5 fresh": a fresh signal named
// as the reason there was no data.
func TestActivityAloneNeedsReady(t *testing.T) {
	h := newHarness(t, nil)
	h.sig.set("team-a", prom.KindActivity, prom.Result{Value: 0.5, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindReady, prom.Result{Value: 2, EvaluatedAt: t0})
	ctx := context.Background()

	_, err := h.client.IsActive(ctx, ref("team-a", "act", map[string]string{"activityQuery": "avg(engine_active)"}))
	const want = "ScaledObject team-a/act: no usable signal data: activity=0.5 fresh; activity sizes the pool only with the ready replicas known (readyQuery, or the ScaledObject and its Deployment or StatefulSet in Kubernetes)"
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != want {
		t.Errorf("activity alone: %v %q, want Unavailable %q", st.Code(), st.Message(), want)
	}

	// With readyQuery: N_act = ⌈R·A/A_target⌉ = ⌈2 · 0.5 / 0.7⌉ = 2.
	r := ref("team-a", "act", map[string]string{"activityQuery": "avg(engine_active)", "readyQuery": "count(up)"})
	v, err := h.metrics(t, r)
	if err != nil || v.MetricValue != 2 {
		t.Errorf("activity with readyQuery: %v, %v; want 2", v, err)
	}
}
