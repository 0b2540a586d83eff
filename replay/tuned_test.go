package replay

import (
	"strings"
	"testing"
)

// TestInferscaleTunedRow: the defaults row is inferscale's DefaultPolicy, run
// once (not a sweep's best), and the tuned row is the cheapest setting of
// the ρ × activityTarget grid that meets the SLO, as for the baselines.
func TestInferscaleTunedRow(t *testing.T) {
	c := demoCompare(t)
	var defaults, tuned *Result
	for i := range c.Best {
		switch c.Best[i].Policy {
		case FamilyInferscale:
			defaults = &c.Best[i]
		case InferscaleTuned:
			tuned = &c.Best[i]
		}
	}
	if defaults == nil || tuned == nil {
		t.Fatalf("rows: defaults %v, tuned %v; want both", defaults != nil, tuned != nil)
	}
	if !strings.HasPrefix(defaults.Setting, "defaults, ") {
		t.Errorf("defaults row setting %q, want the untuned defaults", defaults.Setting)
	}
	plain := 0
	for _, r := range c.All {
		if r.Policy == FamilyInferscale {
			plain++
		}
	}
	if plain != 1 {
		t.Errorf("%d runs named %q, want 1: the defaults row is one run, never swept", plain, FamilyInferscale)
	}

	runs, cheapest := 0, -1.0
	for _, r := range c.All {
		if r.Policy != InferscaleTuned {
			continue
		}
		runs++
		if r.MeetsSLO && (cheapest < 0 || r.ReplicaSeconds < cheapest) {
			cheapest = r.ReplicaSeconds
		}
	}
	if want := len(InferscaleTargetUtilizations) * len(InferscaleActivityTargets); runs != want {
		t.Errorf("%d tuned runs, want the %d-point grid", runs, want)
	}
	// On the demo trace some grid point meets the SLO (the defaults do not:
	// 93.7 %), so the tuned row must meet it, at the grid's cheapest.
	if !tuned.MeetsSLO || tuned.ReplicaSeconds != cheapest {
		t.Errorf("tuned row %q: meets SLO %v, %g replica-s; want the cheapest meeting grid point, %g replica-s", tuned.Setting, tuned.MeetsSLO, tuned.ReplicaSeconds, cheapest)
	}
	if defaults.MeetsSLO {
		t.Errorf("defaults now meet the SLO on the demo trace (%s): update docs/replay.md \"Not met\"", defaults.Setting)
	}
}
