package residency

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pmodel "github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/internal/promtest"
	"github.com/inferscale/inferscale/scaler/prom"
)

// TestPromDemandAgainstPrometheus reads a model's request rate from a real Prometheus that
// scrapes a Triton-like counter growing at 10 req/s in wall time.
func TestPromDemandAgainstPrometheus(t *testing.T) {
	exp := promtest.NewExporter(t)
	start := time.Now()
	exp.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "nv_inference_request_success", Help: "Triton's success counter",
		ConstLabels: prometheus.Labels{"namespace": "ml", "model": "chat", "pod": "triton-1", "version": "1"},
	}, func() float64 { return 10 * time.Since(start).Seconds() }))
	// Triton exports the failure counter next to the success counter (the preset adds them).
	exp.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "nv_inference_request_failure", Help: "Triton's failure counter",
		ConstLabels: prometheus.Labels{"namespace": "ml", "model": "chat", "pod": "triton-1", "version": "1"},
	}, func() float64 { return 0 }))
	// The same model in another namespace, much busier, must not leak in.
	exp.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "nv_inference_request_success", Help: "Triton's success counter",
		ConstLabels: prometheus.Labels{"namespace": "other", "model": "chat", "pod": "triton-9", "version": "1"},
	}, func() float64 { return 100 * time.Since(start).Seconds() }))
	srv := promtest.Start(t, exp.Target())
	srv.WaitFor(t, `sum(rate(nv_inference_request_success{namespace="ml"}[5s]))`, func(v pmodel.Vector) bool {
		return len(v) == 1 && v[0].Value > 8 && v[0].Value < 12
	}, 60*time.Second)

	cfg := prom.DefaultConfig()
	cfg.DefaultAddress = srv.URL()
	p, err := prom.NewPoller(cfg, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tmpl     string
		min, max float64
	}{
		// Triton's preset: rate over [1m], which a Prometheus only seconds old underestimates;
		// anything near the other namespace's 100 req/s would be a confinement leak.
		{tmpl: "", min: 0.5, max: 12},
		{tmpl: `sum(rate(nv_inference_request_success{model="$model"}[5s]))`, min: 8, max: 12},
	}
	for _, tt := range tests {
		tmpl := tt.tmpl
		d, err := NewPromDemand(p, "ml", tmpl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if got, err := d.Rates(ctx, []string{"chat", "absent"}); err != nil || len(got) != 0 {
			t.Fatalf("template %q before the first refresh: %v, %v; want nothing yet", tmpl, got, err)
		}
		p.Refresh(ctx)
		got, err := d.Rates(ctx, []string{"chat", "absent"})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := got["chat"]; !ok || r < tt.min || r > tt.max {
			t.Errorf("template %q: rate of chat = %v (present %v), want in [%v, %v] req/s", tmpl, r, ok, tt.min, tt.max)
		}
		if _, ok := got["absent"]; ok {
			t.Errorf("template %q: a model without series got a rate: %v", tmpl, got)
		}
	}
	if _, err := NewPromDemand(p, "ml", "sum(rate(x[1m]))"); err == nil {
		t.Error("a template without $model was accepted")
	}
}
