package front_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestConcurrentHoldsBounded: 300 requests at once for two models that never load, against
// --hold-max-requests 40 per model and a pod budget that fits 60 of them: exactly 60 are held
// (no model above 40), every other one fails at once — UNAVAILABLE queue_full or
// RESOURCE_EXHAUSTED hold_budget, each counted — and cancelling the held ones leaves nothing
// held and no bytes accounted.
func TestConcurrentHoldsBounded(t *testing.T) {
	const perModel, total, n = 40, 60, 300
	cfg := testConfig()
	cfg.MaxHeldRequests = perModel
	const size = 80 << 10 // 60 × 80 KiB = 4.7 MiB: above the 4 MiB minimum budget
	cfg.MaxTotalHeldBytes = total * size
	cfg.MaxHeldBytes = 16 << 20
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "a", MemoryBytes: 1 << 20}, {Name: "b", MemoryBytes: 1 << 20}}
	h := start(t, tc, cfg, false, "a", "b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := make(chan codes.Code, n)
	for i := range n {
		model := "a"
		if i%2 == 1 {
			model = "b"
		}
		req := sizedRequest(t, model, size)
		go func() {
			_, err := h.client.ModelInfer(ctx, req)
			results <- status.Code(err)
		}()
	}
	// The refused ones answer at once; the held ones wait for the cancel below.
	count := map[codes.Code]int{}
	for range n - total {
		select {
		case c := <-results:
			count[c]++
		case <-time.After(30 * time.Second):
			t.Fatalf("answers %v, held %v; want %d refusals", count, h.front.Held(), n-total)
		}
	}
	if count[codes.Unavailable]+count[codes.ResourceExhausted] != n-total {
		t.Errorf("first %d answers %v, want all Unavailable or ResourceExhausted", n-total, count)
	}
	held := h.front.Held()
	if got := held["a"].Requests + held["b"].Requests; got != total || held["a"].Requests > perModel || held["b"].Requests > perModel {
		t.Errorf("held %v, want %d in all, at most %d per model", held, total, perModel)
	}
	var refused float64
	for _, m := range []string{"a", "b"} {
		refused += testutil.ToFloat64(h.m.FastFailed.WithLabelValues(m, "queue_full")) + testutil.ToFloat64(h.m.FastFailed.WithLabelValues(m, "hold_budget"))
	}
	if refused != n-total {
		t.Errorf("fast_failed_total{queue_full|hold_budget} = %v, want %d", refused, n-total)
	}
	cancel()
	for range total {
		if c := <-results; c != codes.Canceled {
			t.Errorf("held request after cancel: %v, want Canceled", c)
		}
	}
	waitHeld(t, h, "a", 0)
	waitHeld(t, h, "b", 0)
	// Everything released: the whole budget is free again.
	h.ready.set("a", front.NotReady)
	done := make(chan error, 1)
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()
	big := sizedRequest(t, "a", total*size-1024)
	go func() { _, err := h.client.ModelInfer(hctx, big); done <- err }()
	waitHeld(t, h, "a", 1)
	hcancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("request filling the budget after the release: %v, want held then Canceled", err)
	}
}
