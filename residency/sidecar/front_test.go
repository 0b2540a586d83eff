package sidecar

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/plan/plantest"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestReadinessVerdicts: the front's verdicts follow the controller's catalog, observation and
// quarantine against a real (fake) Triton: before the first loop from the catalog read at
// start, then READY, not ready, quarantined after a failed load, unplaceable, unknown.
func TestReadinessVerdicts(t *testing.T) {
	huge := plantest.Model("huge", plan.TierP2, 1, time.Second)
	huge.PeakMemoryBytes = map[string]int64{"7g.80gb": plantest.Gi} // no peak for this pod's profile
	cat := plantest.Catalog(plantest.Model("pinned", plan.TierP0, 1, time.Second),
		plantest.Model("ondemand", plan.TierP2, 1, time.Second), plantest.Model("broken", plan.TierP2, 1, time.Second), huge)
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 8 * plantest.Gi,
		Models: []tritontest.Model{{Name: "pinned", MemoryBytes: plantest.Gi}, {Name: "ondemand", MemoryBytes: plantest.Gi},
			{Name: "broken", MemoryBytes: plantest.Gi, Fault: tritontest.Fault{FailLoad: "Internal: CUDA error"}}, {Name: "huge", MemoryBytes: plantest.Gi}}})
	tc, err := triton.Dial(ts.GRPCAddr(), triton.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	cfg := residency.DefaultConfig()
	cfg.QuarantineAfter = 1
	cfg.TritonMetricsURL = ts.MetricsURL()
	held := map[string]plan.Held{}
	ctl, err := residency.NewController(cfg, cat, plan.Budget{Profile: plantest.Profile, TotalBytes: 8 * plantest.Gi},
		residency.Deps{Triton: tc, Log: slog.New(slog.DiscardHandler), Held: func() map[string]plan.Held { return held }})
	if err != nil {
		t.Fatal(err)
	}
	r := readiness{ctl: ctl, initial: cat}
	verdicts := func() map[string]front.Verdict {
		out := map[string]front.Verdict{}
		for _, m := range []string{"pinned", "ondemand", "broken", "huge", "unknown"} {
			out[m] = r.Verdict(m)
		}
		return out
	}
	check := func(when string, want map[string]front.Verdict) {
		t.Helper()
		if diff := cmp.Diff(want, verdicts()); diff != "" {
			t.Errorf("%s: verdicts (-want +got):\n%s", when, diff)
		}
	}
	check("before the first loop", map[string]front.Verdict{"pinned": front.NotReady, "ondemand": front.NotReady,
		"broken": front.NotReady, "huge": front.NeverFits, "unknown": front.NotInCatalog})
	held["broken"] = plan.Held{Requests: 1} // a held request makes the plan load it; the load fails; quarantined after one failure
	for range 3 {
		if _, err := ctl.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	check("after loading", map[string]front.Verdict{"pinned": front.Ready, "ondemand": front.NotReady,
		"broken": front.Quarantined, "huge": front.NeverFits, "unknown": front.NotInCatalog})
}

// TestReadinessLoading: while the controller's load of a model is under way, its verdict is
// Loading — the controller's last observation, taken before the load, still shows it not loaded
// (Controller.LoadInFlight says otherwise) — and Ready once a later loop observes it READY.
// A drain tells the two apart: it lets the load finish for the requests held for it.
func TestReadinessLoading(t *testing.T) {
	cat := plantest.Catalog(plantest.Model("slow", plan.TierP2, 1, time.Second))
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 8 * plantest.Gi,
		Models: []tritontest.Model{{Name: "slow", MemoryBytes: plantest.Gi, LoadTime: time.Second}}})
	tc, err := triton.Dial(ts.GRPCAddr(), triton.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	cfg := residency.DefaultConfig()
	cfg.TritonMetricsURL = ts.MetricsURL()
	ctl, err := residency.NewController(cfg, cat, plan.Budget{Profile: plantest.Profile, TotalBytes: 8 * plantest.Gi},
		residency.Deps{Triton: tc, Log: slog.New(slog.DiscardHandler), Held: func() map[string]plan.Held {
			return map[string]plan.Held{"slow": {Requests: 1, Since: time.Now()}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	r := readiness{ctl: ctl, initial: cat}
	if v := r.Verdict("slow"); v != front.NotReady {
		t.Fatalf("before any loop: %v, want not_ready", v)
	}
	stepped := make(chan error, 1)
	go func() { _, err := ctl.Step(context.Background()); stepped <- err }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Await(ctx, func() bool { st, _ := ts.Model("slow"); return st.State == "LOADING" }); err != nil {
		t.Fatal(err)
	}
	if v := r.Verdict("slow"); v != front.Loading || !ctl.LoadInFlight("slow") {
		t.Errorf("during the load: %v (LoadInFlight %v), want loading (true)", v, ctl.LoadInFlight("slow"))
	}
	if err := <-stepped; err != nil {
		t.Fatal(err)
	}
	if ctl.LoadInFlight("slow") {
		t.Error("LoadInFlight after the load returned, want false")
	}
	if _, err := ctl.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := r.Verdict("slow"); v != front.Ready {
		t.Errorf("after the next loop: %v, want ready", v)
	}
}
