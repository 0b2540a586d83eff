package sidecar

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// modelsAB are catalog entries for two P1 models of 6 GiB on 1g.10gb (a budget that holds one):
// a loads in 100 ms, b in 300 ms.
const modelsAB = `  - name: a
    digest: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    tier: P1
    peakMemoryBytes: {1g.10gb: 6Gi}
    loadTime: 100ms
  - name: b
    digest: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
    tier: P1
    peakMemoryBytes: {1g.10gb: 6Gi}
    loadTime: 300ms
`

// TestRunLoadsWhenVictimGoesIdle: the whole sidecar before tritontest, on a budget that holds
// one of two 6 GiB models. "a" is READY with one request executing and four queued (busy: never
// a victim), and a request for "b" is held; the plan refuses b's load while a is busy. When a's
// last request ends the front wakes the loop (OnIdle), which evicts a and loads b at once; b's
// request is served well inside the 20 s loop interval, which it waited for before, and none
// of a's requests fails.
func TestRunLoadsWhenVictimGoesIdle(t *testing.T) {
	const service = 600 * time.Millisecond
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		StartupModels: []string{"a"},
		Models: []tritontest.Model{
			{Name: "a", MemoryBytes: 6 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: service, Concurrency: 1},
			{Name: "b", MemoryBytes: 6 << 30, LoadTime: 300 * time.Millisecond, ServiceTime: time.Millisecond, Concurrency: 1},
		}})
	cfg, client := startSidecar(t, ts, "models:\n"+modelsAB, func(cfg *residency.Config) {
		cfg.ListenAddress, cfg.PropagationDelay, cfg.DrainTimeout = "127.0.0.1:0", 0, time.Second
		cfg.LoopInterval = 20 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Let the first loops see a READY before it gets work (a model younger than its minimum
	// residency, 100 ms here, is not a victim either).
	time.Sleep(500 * time.Millisecond)

	var wg sync.WaitGroup
	for i := range 5 { // 3 s of work for a: one executing, four queued
		wg.Go(func() {
			if _, err := client.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "a", Id: strconv.Itoa(i)}); err != nil {
				t.Errorf("request %d for a: %v", i, err)
			}
		})
	}
	time.Sleep(service) // a's queue is on Triton's pending gauge
	start := time.Now()
	resp, err := client.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "b", Id: "b"})
	waited := time.Since(start)
	wg.Wait()
	if err != nil || resp.GetId() != "b" {
		t.Fatalf("request for b: %v, %v", resp, err)
	}
	t.Logf("b waited %s (a's work about %s, loop interval %s)", waited, 4*service, cfg.LoopInterval)
	if waited < 3*service {
		t.Errorf("b waited %s: less than a's remaining work (%s), so a was evicted while busy", waited, 3*service)
	}
	if waited >= cfg.LoopInterval/2 {
		t.Errorf("b waited %s, want < %s: the end of a's last request wakes the loop", waited, cfg.LoopInterval/2)
	}
	if st, _ := ts.Model("b"); st.Loads != 1 {
		t.Errorf("loads of b = %d, want 1", st.Loads)
	}
}
