package residency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pmodel "github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/internal/promtest"
	"github.com/inferscale/inferscale/prom"
)

// countingProxy forwards to target and counts instant queries (/api/v1/query).
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/query" {
			n.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestPromDemandAgainstPrometheus reads two models' request rates from a real Prometheus that
// scrapes Triton-like and gateway-like counters growing at 10 and 4 req/s in wall time, and
// checks that one refresh issues exactly one query for both models.
func TestPromDemandAgainstPrometheus(t *testing.T) {
	exp := promtest.NewExporter(t)
	start := time.Now()
	counter := func(name, ns, model, pod string, rps float64) {
		exp.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: name, Help: "a request counter",
			ConstLabels: prometheus.Labels{"namespace": ns, "model": model, "pod": pod, "version": "1"},
		}, func() float64 { return rps * time.Since(start).Seconds() }))
	}
	counter("nv_inference_request_success", "ml", "chat", "triton-1", 10)
	counter("nv_inference_request_success", "ml", "code", "triton-2", 4)
	// Triton exports the failure counter next to the success counter (the preset adds them).
	counter("nv_inference_request_failure", "ml", "chat", "triton-1", 0)
	counter("nv_inference_request_failure", "ml", "code", "triton-2", 0)
	counter("gateway_requests_total", "ml", "chat", "gw-1", 10)
	counter("gateway_requests_total", "ml", "code", "gw-1", 4)
	// The same models in another namespace, much busier, must not leak in.
	counter("nv_inference_request_success", "other", "chat", "triton-9", 100)
	counter("gateway_requests_total", "other", "chat", "gw-9", 100)
	counter("gateway_requests_total", "other", "code", "gw-9", 100)
	srv := promtest.Start(t, exp.Target())
	srv.WaitFor(t, `sum(rate(gateway_requests_total{namespace="ml"}[5s]))`, func(v pmodel.Vector) bool {
		return len(v) == 1 && v[0].Value > 12 && v[0].Value < 16
	}, 60*time.Second)

	tests := []struct {
		tmpl string
		// want rate ranges per model, req/s
		min, max map[string]float64
	}{
		// Triton's preset: rate over [1m], which a Prometheus only seconds old underestimates
		// (never overestimates); anything near the other namespace's 100 req/s would be a
		// confinement leak, and chat ≤ code would be a mixed-up split.
		{tmpl: "", min: map[string]float64{"chat": 0.5, "code": 0.2}, max: map[string]float64{"chat": 12, "code": 5}},
		{tmpl: `sum(rate(gateway_requests_total{model="$model"}[5s]))`,
			min: map[string]float64{"chat": 8, "code": 3}, max: map[string]float64{"chat": 12, "code": 5}},
	}
	for _, tt := range tests {
		addr, queries := countingProxy(t, srv.URL())
		cfg := prom.DefaultConfig()
		cfg.DefaultAddress = addr
		p, err := prom.NewPoller(cfg, prometheus.NewRegistry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := NewPromDemand(p, "ml", tt.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		models := []string{"chat", "code", "absent"}
		if got, err := d.Rates(ctx, models); err != nil || len(got) != 0 {
			t.Fatalf("template %q before the first refresh: %v, %v; want nothing yet", tt.tmpl, got, err)
		}
		if n := p.Queries(); n != 1 {
			t.Errorf("template %q: %d distinct queries subscribed for 3 models, want 1", tt.tmpl, n)
		}
		for refresh := 1; refresh <= 2; refresh++ {
			before := queries.Load()
			p.Refresh(ctx)
			if n := queries.Load() - before; n != 1 {
				t.Errorf("template %q, refresh %d: %d queries sent to Prometheus, want 1 for all models", tt.tmpl, refresh, n)
			}
			got, err := d.Rates(ctx, models)
			if err != nil {
				t.Fatal(err)
			}
			for m, lo := range tt.min {
				if r, ok := got[m]; !ok || r < lo || r > tt.max[m] {
					t.Errorf("template %q: rate of %s = %v (present %v), want in [%v, %v] req/s", tt.tmpl, m, r, ok, lo, tt.max[m])
				}
			}
			if _, ok := got["absent"]; ok {
				t.Errorf("template %q: a model without series got a rate: %v", tt.tmpl, got)
			}
		}
	}
}

func TestNewPromDemandRefuses(t *testing.T) {
	p, err := prom.NewPoller(prom.DefaultConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range []string{
		"sum(rate(x[1m]))", // no placeholder
		`sum(rate(x{model="$model"}[1m])) / sum(rate(y[1m]))`, // a selector not narrowed to one model
	} {
		if _, err := NewPromDemand(p, "ml", tmpl); err == nil {
			t.Errorf("template %q was accepted; it cannot be grouped by model", tmpl)
		}
	}
	if _, err := NewPromDemand(p, "", ""); err == nil {
		t.Error("an empty namespace was accepted")
	}
}
