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
//
// Triton's fake clock stands still until all five of a's requests are at Triton, however long
// they take to arrive (CI's race run is several times slower), then runs at real speed: a has
// its whole 3 s of work when b's request comes.
func TestRunLoadsWhenVictimGoesIdle(t *testing.T) {
	const service = 600 * time.Millisecond
	clock := tritontest.NewFakeClock(time.Unix(0, 0))
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30, Clock: clock,
		StartupModels: []string{"a"},
		Models: []tritontest.Model{
			{Name: "a", MemoryBytes: 6 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: service, Concurrency: 1},
			{Name: "b", MemoryBytes: 6 << 30, LoadTime: 300 * time.Millisecond, ServiceTime: time.Millisecond, Concurrency: 1},
		}})
	runClock := clockAtRealSpeed(t, clock)
	cfg, client := startSidecar(t, ts, "models:\n"+modelsAB, func(cfg *residency.Config) {
		cfg.ListenAddress, cfg.PropagationDelay, cfg.DrainTimeout = "127.0.0.1:0", 0, time.Second
		cfg.LoopInterval = 20 * time.Second
	})
	t.Cleanup(runClock)
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
	// a's queue is on Triton's pending gauge: one request executing, four queued.
	awaitCtx, awaitCancel := context.WithTimeout(ctx, time.Minute)
	err := ts.Await(awaitCtx, func() bool { st, _ := ts.Model("a"); return st.Executing == 1 && st.Pending == 4 })
	awaitCancel()
	if err != nil {
		st, _ := ts.Model("a")
		t.Fatalf("a: %d executing, %d queued after a minute; want 1 and 4: %v", st.Executing, st.Pending, err)
	}
	runClock()
	start := time.Now()
	resp, err := client.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "b", Id: "b"})
	waited := time.Since(start)
	wg.Wait()
	if err != nil || resp.GetId() != "b" {
		t.Fatalf("request for b: %v, %v", resp, err)
	}
	t.Logf("b waited %s (a's work about %s, loop interval %s)", waited, 5*service, cfg.LoopInterval)
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
