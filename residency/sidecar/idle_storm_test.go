package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestIdleWakesArePaced: while the front holds a request for b, whose load is refused (the
// only victim, a, is younger than its minimum residency), a client sends requests for c one at
// a time, so c goes idle at the end of each. The loop (each one scrapes Triton's metrics) runs
// at most once per Config.Settle, not once per request: it ran ~850 times in 2 s when every
// OnIdle woke it.
func TestIdleWakesArePaced(t *testing.T) {
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		StartupModels: []string{"a", "c"},
		Models: []tritontest.Model{
			{Name: "a", MemoryBytes: 6 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: time.Millisecond, Concurrency: 1},
			{Name: "b", MemoryBytes: 6 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: time.Millisecond, Concurrency: 1},
			{Name: "c", MemoryBytes: 1 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: time.Millisecond, Concurrency: 1},
		}})
	var scrapes atomic.Int64
	metrics := ts.MetricsHandler()
	ms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapes.Add(1)
		metrics.ServeHTTP(w, r)
	}))
	defer ms.Close()
	cfg, client := startSidecar(t, ts, "minResidency: 1h\nmodels:\n"+modelsAB+`  - name: c
    digest: sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc
    tier: P1
    peakMemoryBytes: {1g.10gb: 1Gi}
    loadTime: 100ms
`, func(cfg *residency.Config) {
		cfg.ListenAddress, cfg.PropagationDelay, cfg.DrainTimeout = freeAddr(t), 0, time.Second
		cfg.LoopInterval = 20 * time.Second
		cfg.TritonMetricsURL = ms.URL + "/metrics"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The first loop has seen a and c READY (its scrapes are over when it records them).
	metric := func(name, model string) float64 { return sidecarMetric(t, cfg.ListenAddress, name, model) }
	awaitCond(t, func() bool { return metric("inferscale_residency_resident_models", "") == 2 },
		func() string {
			return fmt.Sprintf("resident_models %v, want 2 (a and c)", metric("inferscale_residency_resident_models", ""))
		})

	heldCtx, stopHeld := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() {
		_, err := client.ModelInfer(heldCtx, &inference.ModelInferRequest{ModelName: "b", Id: "b"})
		held <- err
	}()
	// b is held, and its wake's loop has run: it refused b's load (a is younger than its
	// minimum residency), after its scrapes.
	awaitCond(t, func() bool {
		return metric("inferscale_front_held_requests", "b") == 1 && metric("inferscale_residency_refused_loads_total", "") >= 1
	}, func() string {
		return fmt.Sprintf("held for b %v, refused loads %v; want 1 and at least 1",
			metric("inferscale_front_held_requests", "b"), metric("inferscale_residency_refused_loads_total", ""))
	})
	const window = 2 * time.Second
	before := scrapes.Load()
	start := time.Now()
	n := 0
	for ; time.Since(start) < window; n++ {
		if _, err := client.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "c", Id: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	got := scrapes.Load() - before
	elapsed := time.Since(start)
	stopHeld()
	if err := <-held; err == nil {
		t.Error("request for b: answered, want it held until its client gave up")
	}
	// A loop reads the metrics at most twice (queue lengths, memory probe); one wake may be
	// pending at each end of the window.
	limit := 2 * (int64(elapsed/residency.DefaultConfig().Settle()) + 3)
	t.Logf("%d requests for c in %s; metrics scrapes meanwhile: %d (limit %d)", n, elapsed, got, limit)
	if got > limit {
		t.Errorf("metrics scraped %d times in %s of one-at-a-time requests, want ≤ %d: each idle wake ran a loop", got, elapsed, limit)
	}
}
