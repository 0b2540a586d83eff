package residency

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
	held := map[string]plan.Held{}
	h.ctl.deps.Held = func() map[string]plan.Held { return held }
	if h.step() || h.state("ondemand") == triton.StateReady {
		t.Fatalf("acted with nothing held: ondemand %q", h.state("ondemand"))
	}
	held["ondemand"] = plan.Held{Requests: 3}
	held["notincatalog"] = plan.Held{Requests: 9} // ignored
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

// TestLoadWaitMeasured: the oldest held request's arrival is the model's WaitingSince, and a load
// started for held requests adds its wait — from that arrival to the load's start — to the
// decayed mean the next plan reads as Observed.LoadWait (and /metrics as load_wait_seconds).
func TestLoadWaitMeasured(t *testing.T) {
	cat := catalog(model("a", plan.TierP2, 2, time.Second), model("b", plan.TierP2, 2, time.Second))
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("a", 2), fakeModel("b", 2)}}
	h := newHarness(t, fake, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	held := map[string]plan.Held{"a": {Requests: 2, Since: t0.Add(-30 * time.Second)}, "b": {Requests: 1, Since: t0.Add(-10 * time.Second)}}
	h.ctl.deps.Held = func() map[string]plan.Held { return held }
	if !h.step() {
		t.Fatal("did not load the held models")
	}
	st := h.ctl.Status()
	if got := st.Observed.Models["a"].WaitingSince; !got.Equal(t0.Add(-30 * time.Second)) {
		t.Errorf("a WaitingSince = %v, want t0 − 30 s", got)
	}
	if st.Observed.LoadWait != 0 {
		t.Errorf("first plan's LoadWait = %v, want 0 (nothing measured before it)", st.Observed.LoadWait)
	}
	// One load a step (MaxConcurrentLoads 1): a first (more waiting work), waiting 30 s.
	if h.state("a") != triton.StateReady || h.state("b") == triton.StateReady {
		t.Fatalf("a %q, b %q; want a READY, b not yet", h.state("a"), h.state("b"))
	}
	if got := testutil.ToFloat64(h.m.LoadWait); got != 30 {
		t.Errorf("load_wait_seconds = %g after a's load, want 30", got)
	}
	delete(held, "a")
	if !h.step() || h.state("b") != triton.StateReady {
		t.Fatalf("b %q, want READY", h.state("b"))
	}
	// Both loads started at t0: waits 30 s and 10 s, mean 20 s.
	if got := testutil.ToFloat64(h.m.LoadWait); got != 20 {
		t.Errorf("load_wait_seconds = %g, want 20", got)
	}
	clear(held)
	h.clock.Advance(time.Second)
	h.step()
	if got := h.ctl.Status().Observed.LoadWait; got != 20*time.Second {
		t.Errorf("next plan's LoadWait = %v, want 20s", got)
	}
}

// TestLoadWaitFailedLoad: a load that fails records no wait, so a load retried after its backoff
// counts once, when it succeeds.
func TestLoadWaitFailedLoad(t *testing.T) {
	cat := catalog(model("broken", plan.TierP2, 2, time.Second))
	bad := fakeModel("broken", 2)
	bad.Fault = tritontest.Fault{FailLoad: "Internal: CUDA error"}
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi, Models: []tritontest.Model{bad}}
	h := newHarness(t, fake, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.ctl.deps.Held = func() map[string]plan.Held {
		return map[string]plan.Held{"broken": {Requests: 1, Since: t0.Add(-30 * time.Second)}}
	}
	h.step()
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); got != 1 {
		t.Fatalf("failed loads = %g, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.LoadWait); got != 0 {
		t.Errorf("load_wait_seconds = %g after a failed load, want 0", got)
	}
}

// TestWakeRunsLoopNow: Wake starts the next loop without waiting for the loop interval (the
// fake clock never advances here).
func TestWakeRunsLoopNow(t *testing.T) {
	cat := catalog(model("ondemand", plan.TierP2, 2, time.Second))
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("ondemand", 2)}}
	h := newHarness(t, fake, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	held := make(chan map[string]plan.Held, 1)
	held <- map[string]plan.Held{}
	h.ctl.deps.Held = func() map[string]plan.Held { m := <-held; held <- m; return m }
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
	held <- map[string]plan.Held{"ondemand": {Requests: 1}}
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

// TestForwardedRequestsAreExecutingWork: a READY model with one request the front has
// forwarded and Triton has not answered (Deps.Forwarding) and nothing queued is busy — Triton's
// statistics do not count a request until it completes, nor its pending gauge one executing —
// so a load held for another model that needs its memory is refused, naming it, and proceeds
// (a is evicted) once the front forwards nothing to it.
func TestForwardedRequestsAreExecutingWork(t *testing.T) {
	cat := catalog(model("a", plan.TierP1, 6, time.Second), model("b", plan.TierP1, 6, time.Second))
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		StartupModels: []string{"a"}, Models: []tritontest.Model{fakeModel("a", 6), fakeModel("b", 6)}}
	h := newHarness(t, fake, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.step()                         // a is first seen READY now
	h.clock.Advance(5 * time.Minute) // past its minimum residency (the catalog's 2 min)
	forwarding := map[string]int{"a": 1}
	h.ctl.deps.Forwarding = func() map[string]int { return forwarding }
	h.ctl.deps.Held = func() map[string]plan.Held { return map[string]plan.Held{"b": {Requests: 1, Since: h.clock.Now()}} }
	if h.step() || h.state("a") != triton.StateReady {
		t.Fatalf("evicted a with a forwarded request in flight: a %q", h.state("a"))
	}
	st := h.ctl.Status()
	if got := st.Observed.Models["a"].Executing; got != 1 {
		t.Errorf("a Executing = %d, want 1 (the forwarded request)", got)
	}
	var refusal string
	for _, r := range st.Result.Refused {
		if r.Model == "b" {
			refusal = r.Reason()
		}
	}
	if !strings.HasSuffix(refusal, "never evicted with work in flight: a (0 queued, 1 executing, 6.00GiB)") {
		t.Errorf("b's refusal %q: want it to name the busy model a", refusal)
	}
	forwarding = map[string]int{}
	if !h.step() || h.state("a") == triton.StateReady {
		t.Fatalf("with nothing forwarded to a: a %q, want it evicted for b", h.state("a"))
	}
}
