package front_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// bigInfer sends one ModelInfer for model with a raw input of size bytes.
func bigInfer(ctx context.Context, c inference.GRPCInferenceServiceClient, model string, size int, trailer *metadata.MD) error {
	if trailer == nil {
		trailer = new(metadata.MD)
	}
	_, err := c.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: model,
		Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, int64(size / 4)}}},
		RawInputContents: [][]byte{make([]byte, size)}}, grpc.Trailer(trailer))
	return err
}

// TestForwardedRequestsKeptWithinBudget: forwarded requests are kept for a re-hold only within
// --retain-max-total-bytes. Before, every forwarded request stayed in the front's memory until
// Triton answered it: 16 concurrent 3 MiB requests executing for 3 s added 48.4 MiB to the
// heap beside the same requests sent straight to Triton, their whole bytes (measured with the
// budget at 1 GiB). Now one is kept (the budget is 4 MiB): +3.2 to +3.3 MiB. Small requests were kept
// by grpc-go itself, whatever the budget: its replay buffer held every request up to 256 KiB
// until the answer (64 × 128 KiB with nothing to keep: +8.5 MiB, all their bytes).
func TestForwardedRequestsKeptWithinBudget(t *testing.T) {
	for _, c := range []struct {
		name    string
		n, size int
		budget  int64
		keptMin float64 // retained bytes while they execute, at least
		keptMax float64 // and at most
	}{
		{"16 × 3 MiB, 4 MiB kept", 16, 3 << 20, 4 << 20, 3 << 20, 4 << 20},
		{"64 × 128 KiB, none kept", 64, 128 << 10, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc := tritontest.DefaultConfig()
			// The fake clock holds every request executing until the test has read the heap,
			// however slowly they arrive (the race detector slows sending them severalfold).
			clock := tritontest.NewFakeClock(time.Unix(0, 0))
			tc.Clock = clock
			tc.Models = []tritontest.Model{{Name: "hot", MemoryBytes: 1 << 30, ServiceTime: 3 * time.Second, Concurrency: c.n}}
			tc.StartupModels = []string{"hot"}
			cfg := testConfig()
			cfg.MaxRetainedBytes = c.budget
			h := start(t, tc, cfg, false, "hot")
			h.ready.set("hot", front.Ready)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // every wait below ends
			defer cancel()
			heapDuring := func(cl inference.GRPCInferenceServiceClient, during func()) int64 {
				runtime.GC()
				runtime.GC()
				var before, mid runtime.MemStats
				runtime.ReadMemStats(&before)
				var wg sync.WaitGroup
				for range c.n {
					wg.Go(func() {
						if err := bigInfer(ctx, cl, "hot", c.size, nil); err != nil {
							t.Error(err)
						}
					})
				}
				// All sent, all executing: they wait on the fake clock for their 3 s.
				awaitCtx, cancel := context.WithTimeout(ctx, time.Minute)
				err := h.triton.Await(awaitCtx, func() bool { m, _ := h.triton.Model("hot"); return m.Executing == c.n })
				cancel()
				if err != nil {
					t.Fatalf("waiting for %d requests executing: %v", c.n, err)
				}
				if during != nil {
					during()
				}
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&mid)
				clock.Advance(3 * time.Second)
				wg.Wait()
				return int64(mid.HeapInuse) - int64(before.HeapInuse)
			}
			direct := heapDuring(h.direct, nil)
			var kept float64
			through := heapDuring(h.client, func() { kept = testutil.ToFloat64(h.m.RetainedBytes) })
			if kept < c.keptMin || kept > c.keptMax {
				t.Errorf("retained bytes while %d requests of %d bytes execute = %.0f, want in [%.0f, %.0f]", c.n, c.size, kept, c.keptMin, c.keptMax)
			}
			if got := testutil.ToFloat64(h.m.RetainedBytes); got != 0 {
				t.Errorf("retained bytes after every answer = %.0f, want 0", got)
			}
			extra := through - direct
			t.Logf("heap while %d × %d KiB requests execute: direct %.1f MiB, through the front %.1f MiB (+%.1f MiB)", c.n, c.size>>10, float64(direct)/(1<<20), float64(through)/(1<<20), float64(extra)/(1<<20))
			if limit := c.budget + int64(c.n*c.size/4); extra > limit {
				t.Errorf("the front added %.1f MiB to the heap for %d requests of %d KiB, want at most %.1f MiB (its budget and a quarter of their bytes)", float64(extra)/(1<<20), c.n, c.size>>10, float64(limit)/(1<<20))
			}
		})
	}
}

// TestStaleReadyNotKeptUnavailable: a request past --retain-max-total-bytes (0 here: none is
// kept) that Triton answers NOT_FOUND for a model unloaded since the front's view is answered
// UNAVAILABLE with the pushback, which a client's retry policy retries and the front then
// holds, never Triton's NOT_FOUND, which clients do not retry; the planner is woken at once
// (Deps.OnHold), so that its view is right before the retry comes.
func TestStaleReadyNotKeptUnavailable(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRetainedBytes = 0
	h := start(t, oneModel("evicted", 200*time.Millisecond), cfg, true, "evicted")
	h.ready.set("evicted", front.Ready) // stale: tritontest has not loaded it
	var tr metadata.MD
	_, err := infer(context.Background(), h.client, "evicted", "7", &tr)
	if status.Code(err) != codes.Unavailable || len(tr.Get(front.PushbackKey)) != 1 {
		t.Fatalf("stale READY, nothing kept: %v, trailer %v; want Unavailable with the pushback", err, tr)
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("evicted", "unloaded")); got != 1 {
		t.Errorf("fast_failed{reason=unloaded} = %v, want 1", got)
	}
	h.mu.Lock()
	holds := slices.Clone(h.holds)
	h.mu.Unlock()
	if !slices.Equal(holds, []string{"evicted"}) {
		t.Errorf("planner woken for %q, want [evicted]: its view, and the front's, must be right before the retry", holds)
	}
	// The client's retry, with the front's view now right, is held through the load.
	h.ready.set("evicted", front.NotReady)
	if resp, err := infer(context.Background(), h.client, "evicted", "8", nil); err != nil || resp.GetId() != "8" {
		t.Errorf("retry: %v, %v; want id 8 served after the load", resp, err)
	}
}
