package scaler

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/inferscale/inferscale/prom"
)

// TestRestartSeedsFromSpecReplicas: a scaler (re)started while the HPA holds the Deployment
// at spec.replicas 5, of which 2 are ready, seeds the new trigger's history with 5 read from
// the informer cache (DESIGN.md: a restart never scales down before one down-window has
// passed), although the queue alone asks for 1. Without spec.replicas the seed would be the
// 2 ready replicas and the first answer 2.
func TestRestartSeedsFromSpecReplicas(t *testing.T) {
	objs := clusterObjects("team-a", 10, 2)
	dep := objs[1].(*unstructured.Unstructured)
	if err := unstructured.SetNestedField(dep.Object, int64(5), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, fakeCluster(t, "", objs...))
	r := ref("team-a", "pool", queueMeta("scaleDownWindow", "60s"))
	// queue 1: N_drain = ⌈(0 + 1/1) / (1·1)⌉ = 1 = N_raw (no warm pool).
	steps := []struct {
		at   time.Duration
		want int64
	}{
		{0, 5},                 // seed 5 = max over the down-window {raw 1, seed 5}
		{55 * time.Second, 5},  // the seed (t0) is still within the 60 s down-window
		{65 * time.Second, 3},  // seed out: down to raw 1, bounded by the step: 5 − max(1, ⌊5·0.5⌋) = 3
		{130 * time.Second, 2}, // 60 s later: highest answer in the period 3, 3 − max(1, ⌊3·0.5⌋) = 2
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 1, EvaluatedAt: now})
		h.clock.set(now)
		if s.at > 0 {
			h.srv.Refresh(now)
		}
		mv, err := h.metrics(t, r)
		if err != nil {
			t.Fatalf("t0+%v: %v", s.at, err)
		}
		if mv.MetricValue != s.want {
			t.Errorf("t0+%v: GetMetrics = %d, want %d", s.at, mv.MetricValue, s.want)
		}
	}
}
