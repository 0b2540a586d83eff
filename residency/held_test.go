package residency

import (
	"context"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestHeldRequestsAreQueuedWork: requests the inference front holds for a P2 model that is not
// loaded (Deps.Held) make the plan load it, with no demand from Prometheus; without them the
// model stays unloaded. Status carries the catalog and observation the front reads.
func TestHeldRequestsAreQueuedWork(t *testing.T) {
	cat := catalog(model("ondemand", plan.TierP2, 2, time.Second))
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("ondemand", 2)}}
	h := newHarness(t, fake, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	held := map[string]int{}
	h.ctl.deps.Held = func() map[string]int { return held }
	if h.step() || h.state("ondemand") == triton.StateReady {
		t.Fatalf("acted with nothing held: ondemand %q", h.state("ondemand"))
	}
	held["ondemand"] = 3
	held["notincatalog"] = 9 // ignored
	if !h.step() || h.state("ondemand") != triton.StateReady {
		t.Fatalf("with 3 held: ondemand %q, want READY", h.state("ondemand"))
	}
	st := h.ctl.Status()
	if _, ok := st.Catalog.Model("ondemand"); !ok {
		t.Errorf("Status.Catalog lacks ondemand: %+v", st.Catalog)
	}
	if got := st.Observed.Models["ondemand"].Queued; got != 3 {
		t.Errorf("Status.Observed ondemand Queued = %d, want 3 (the held requests)", got)
	}
}

// TestWakeRunsLoopNow: Wake starts the next loop without waiting for the loop interval (the
// fake clock never advances here).
func TestWakeRunsLoopNow(t *testing.T) {
	cat := catalog(model("ondemand", plan.TierP2, 2, time.Second))
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("ondemand", 2)}}
	h := newHarness(t, fake, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	held := make(chan map[string]int, 1)
	held <- map[string]int{}
	h.ctl.deps.Held = func() map[string]int { m := <-held; held <- m; return m }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.ctl.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	// The first loop ran and waits for the clock.
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	<-held
	held <- map[string]int{"ondemand": 1}
	h.ctl.Wake()
	// The woken loop loads the model (instantly, in the fake) and waits on the clock again: a
	// second waiter. Without Wake the first wait would never end.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := h.clock.BlockUntil(wctx, 2); err != nil {
		t.Fatalf("no second loop after Wake: %v", err)
	}
	if err := h.srv.Await(wctx, func() bool { st, _ := h.srv.Model("ondemand"); return st.State == triton.StateReady }); err != nil {
		t.Fatalf("ondemand not loaded after Wake: %v", err)
	}
}
