package scaler

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inferscale/inferscale/prom"
)

// TestObjectMetricsBound: per-ScaledObject series appear while the registered triggers are at
// most maxTriggers (or the bound is 0), never when perObject is off or over the bound; the
// aggregates are always there and count real states.
func TestObjectMetricsBound(t *testing.T) {
	h := newHarness(t, nil)
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 6, EvaluatedAt: t0})
	for _, name := range []string{"pool-1", "pool-2"} {
		if _, err := h.metrics(t, ref("team-a", name, queueMeta())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.metrics(t, ref("team-b", "no-data", queueMeta())); err == nil {
		t.Fatal("team-b has no queue data; GetMetrics answered")
	}
	const aggregates = `
# HELP inferscale_scaler_triggers Registered ScaledObject triggers.
# TYPE inferscale_scaler_triggers gauge
inferscale_scaler_triggers 3
# HELP inferscale_scaler_triggers_active Triggers whose IsActive answer is true.
# TYPE inferscale_scaler_triggers_active gauge
inferscale_scaler_triggers_active 2
# HELP inferscale_scaler_triggers_no_data Triggers with no usable signal (RPCs answer Unavailable).
# TYPE inferscale_scaler_triggers_no_data gauge
inferscale_scaler_triggers_no_data 1
`
	tests := []struct {
		name       string
		perObject  bool
		max        int
		wantSeries int // inferscale_scaler_desired_replicas series
		exported   string
	}{
		{"under the bound", true, 3, 3, "1"},
		{"no bound", true, 0, 3, "1"},
		{"over the bound", true, 2, 0, "0"},
		{"off", false, 0, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newDecisionCollector(h.srv)
			c.perObject, c.maxTriggers = tt.perObject, tt.max
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			want := aggregates + `
# HELP inferscale_scaler_object_metrics 1 when this scrape carries per-ScaledObject series; 0 when --object-metrics is off or more than --object-metrics-max-triggers triggers are registered.
# TYPE inferscale_scaler_object_metrics gauge
inferscale_scaler_object_metrics ` + tt.exported + "\n"
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inferscale_scaler_triggers", "inferscale_scaler_triggers_active",
				"inferscale_scaler_triggers_no_data", "inferscale_scaler_object_metrics"); err != nil {
				t.Error(err)
			}
			n, err := testutil.GatherAndCount(reg, "inferscale_scaler_desired_replicas")
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantSeries {
				t.Errorf("%d desired_replicas series, want %d", n, tt.wantSeries)
			}
		})
	}
}
