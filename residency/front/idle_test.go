package front_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestOnIdleWhileHeld: the front calls OnIdle when the last request it forwards for a model
// ends while it holds a request for another model (a load that waits for memory may now have
// a victim: the planner never evicts a model with work in flight), once per time the model
// goes idle, and never when nothing is held. A unary request's call comes before its answer
// goes on to the client, so each check may read the calls at once.
func TestOnIdleWhileHeld(t *testing.T) {
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{
		{Name: "busy", MemoryBytes: 1 << 30, ServiceTime: time.Second, Concurrency: 4},
		{Name: "waiting", MemoryBytes: 1 << 30, LoadTime: time.Second, ServiceTime: time.Millisecond, Concurrency: 1},
	}
	tc.StartupModels = []string{"busy"}
	h := start(t, tc, testConfig(), false, "busy", "waiting") // nothing loads "waiting": it stays held
	idles := func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(h.idles)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Nothing held: a request for busy ends and no one is told.
	if _, err := infer(ctx, h.client, "busy", "alone", nil); err != nil {
		t.Fatal(err)
	}
	if got := idles(); len(got) != 0 {
		t.Fatalf("OnIdle calls with nothing held: %v, want none", got)
	}

	// A request held for waiting; two for busy in flight together: one call, when the second ends.
	heldCtx, stopHeld := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() {
		_, err := infer(heldCtx, h.client, "waiting", "held", nil)
		held <- err
	}()
	waitHeld(t, h, "waiting", 1)
	var wg sync.WaitGroup
	for _, id := range []string{"b1", "b2"} {
		wg.Go(func() {
			if _, err := infer(ctx, h.client, "busy", id, nil); err != nil {
				t.Errorf("infer busy %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]string{"busy"}, idles()); diff != "" {
		t.Errorf("OnIdle calls (-want +got):\n%s", diff)
	}
	// And again on the next time busy goes idle while the hold lasts.
	if _, err := infer(ctx, h.client, "busy", "b3", nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"busy", "busy"}, idles()); diff != "" {
		t.Errorf("OnIdle calls after b3 (-want +got):\n%s", diff)
	}
	stopHeld()
	if err := <-held; err == nil {
		t.Error("held request: nil error after its client gave up")
	}
	if got := h.front.Forwarding(); len(got) != 0 {
		t.Errorf("Forwarding after every answer = %v, want empty", got)
	}
}
