package plan_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
)

// The tests in this file pin the planner's comparisons at their exact boundaries: each case
// sits on the value where a < and a ≤ (or a > and a ≥) part, with its expected result derived
// from the rule in docs/residency.md and the package documentation.

// TestDecideBoundaries: Decide at the edges of its comparisons. All load times are 10 s unless
// a case says otherwise, so Worth = rate × 10 and value = Worth ÷ peak GiB; the plantest
// catalog has minResidency 2m and idleTimeout 10m.
func TestDecideBoundaries(t *testing.T) {
	old := t0.Add(-time.Hour)
	const L = 10 * time.Second
	budget10 := plan.Budget{Profile: prof, TotalBytes: 10 * gi}
	tests := []decideCase{
		{
			// young is age < MinResidency: a model resident exactly max(2m, 1 × 10 s) = 2m has
			// served its minimum residency ("never evicted before it has been resident
			// max(minResidency, k × load time)") and may go for new (worth 20 > old's 5).
			name:   "resident exactly its minimum residency: evictable",
			cat:    catalog(model("new", plan.TierP1, 6, L), model("old", plan.TierP1, 6, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"old": ready(t0.Add(-2*time.Minute), t0)}},
			demand: plan.Demand{"new": 2, "old": 0.5},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "old", Cause: plan.CauseEvict, At: t0, AccountedBytes: 0, PeakBytes: 6 * gi, Reason: "evict: P1 value 0.833 lowest; need 6.00GiB for new"},
				{Kind: plan.ActionLoad, Model: "new", Cause: plan.CauseDemand, At: t0, AccountedBytes: 6 * gi, PeakBytes: 6 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 3.33; needs 6.00GiB"},
			},
		},
		{
			// The other side of the same edge: 1 ns short of 2m, old is young, hence fixed.
			name:        "resident 1 ns short of its minimum residency: fixed",
			cat:         catalog(model("new", plan.TierP1, 6, L), model("old", plan.TierP1, 6, L)),
			budget:      budget10,
			obs:         plan.Observed{Models: map[string]plan.ModelStatus{"old": ready(t0.Add(-2*time.Minute+1), t0)}},
			demand:      plan.Demand{"new": 2, "old": 0.5},
			wantRefused: []string{"new: refused: needs 6.00GiB; fixed 6.00GiB + higher-ranked 0.0MiB leave 4.00GiB of 10.00GiB"},
		},
		{
			// With freeIdle a model goes once unused ≥ its idle timeout (the reason says ≥):
			// unused exactly max(10m, 1 × 1 s) = 10m is unloaded.
			name:   "with freeIdle, unused exactly the idle timeout: unloaded",
			cat:    catalog(model("idle", plan.TierP1, 1, time.Second)),
			budget: plan.Budget{Profile: prof, TotalBytes: 10 * gi, FreeIdle: true},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"idle": ready(old, t0.Add(-10*time.Minute))}},
			want: []plan.Action{{Kind: plan.ActionUnload, Model: "idle", Cause: plan.CauseIdle, At: t0, AccountedBytes: 0, PeakBytes: gi,
				Reason: "idle: P1 idle, unused for 10m0s ≥ idle timeout 10m0s (freeIdle)"}},
		},
		{
			name:   "with freeIdle, unused 1 ns short of the idle timeout: kept",
			cat:    catalog(model("idle", plan.TierP1, 1, time.Second)),
			budget: plan.Budget{Profile: prof, TotalBytes: 10 * gi, FreeIdle: true},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"idle": ready(old, t0.Add(-10*time.Minute+1))}},
		},
		{
			// Waiting work ages only while there is work: a WaitingSince left 10 min ago with no
			// request queued adds nothing, so Worth is 1 req/s × 10 s = 10 on 1 GiB: value 10
			// (aging would add 600 s ÷ 10 s = 60).
			name:   "a WaitingSince without work in flight does not age",
			cat:    catalog(model("m", plan.TierP1, 1, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"m": {State: plan.StateUnavailable, WaitingSince: t0.Add(-10 * time.Minute)}}},
			demand: plan.Demand{"m": 1},
			want: []plan.Action{{Kind: plan.ActionLoad, Model: "m", Cause: plan.CauseDemand, At: t0, AccountedBytes: gi, PeakBytes: gi, Digest: dgA,
				Reason: "load: P1 demand 1 req/s, value 10; needs 1.00GiB"}},
		},
		{
			// One queued request: 10 + 1 in flight + 600 s ÷ 10 s aging = 71.
			name:   "the same WaitingSince with one request queued ages it",
			cat:    catalog(model("m", plan.TierP1, 1, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"m": {State: plan.StateUnavailable, Queued: 1, WaitingSince: t0.Add(-10 * time.Minute)}}},
			demand: plan.Demand{"m": 1},
			want: []plan.Action{{Kind: plan.ActionLoad, Model: "m", Cause: plan.CauseDemand, At: t0, AccountedBytes: gi, PeakBytes: gi, Digest: dgA,
				Reason: "load: P1 demand 1 req/s, value 71; needs 1.00GiB"}},
		},
		{
			// The victims are every ranked resident left out, down to rank 0: here r is the only
			// contender (pin is P0, fixed) and does not fit beside pin's 6 GiB in 10, so it goes
			// for the over-budget start. r: 1 req/s × 10 s ÷ 6 GiB = 1.67.
			name:   "the top-ranked contender is a victim when the fixed memory leaves it no room",
			cat:    catalog(model("pin", plan.TierP0, 6, time.Second), model("r", plan.TierP1, 6, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"pin": ready(old, old), "r": ready(old, t0)}},
			demand: plan.Demand{"r": 1},
			want: []plan.Action{{Kind: plan.ActionUnload, Model: "r", Cause: plan.CauseEvict, At: t0, AccountedBytes: 6 * gi, PeakBytes: 12 * gi,
				Reason: "evict: P1 value 1.67 lowest; over budget: fixed 6.00GiB + higher-ranked models leave no room for 6.00GiB within 10.00GiB"}},
		},
		{
			// A reload runs when its swap overhead fits: 3 GiB accounted + 2 GiB swap = the 5 GiB
			// budget exactly, within it ("every step stays within budget": PeakBytes ≤ TotalBytes).
			name:   "a reload whose swap fills the budget exactly runs",
			cat:    catalog(swapModel()),
			budget: plan.Budget{Profile: prof, TotalBytes: 5 * gi},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"swap": {State: plan.StateReady, LoadedSince: old, Digest: dgB}}},
			want: []plan.Action{{Kind: plan.ActionLoad, Model: "swap", Cause: plan.CauseDigest, At: t0, AccountedBytes: 3 * gi, PeakBytes: 5 * gi, Digest: dgA,
				Reason: "reload: digest sha256:bbbbbbbbbbbb → sha256:aaaaaaaaaaaa; the swap holds 2.00GiB more"}},
		},
		{
			// One byte less and the swap would pass the budget: deferred (FormatBytes rounds the
			// 5 GiB − 1 byte budget and the 2 GiB − 1 byte left to 5.00GiB and 2.00GiB).
			name:        "a reload whose swap passes the budget by one byte is deferred",
			cat:         catalog(swapModel()),
			budget:      plan.Budget{Profile: prof, TotalBytes: 5*gi - 1},
			obs:         plan.Observed{Models: map[string]plan.ModelStatus{"swap": {State: plan.StateReady, LoadedSince: old, Digest: dgB}}},
			wantRefused: []string{"swap: reload deferred: the swap needs 2.00GiB more; accounted 3.00GiB leaves 2.00GiB of 5.00GiB"},
		},
		{
			// k 100 on 4 GiB (value 25), y 2 on 1 (2), x 5 on 3 (1.67), v 3 on 4 (0.75), budget
			// 8 GiB = k + v: nothing free. In rank order y takes v first and is charged v's worth
			// 3 ≥ its 2: unworthy. Without y, x (5 > 3) evicts v and uses 3 of its 4 GiB: k 4 +
			// x 3 = 7, and y's 1 GiB fits the 8 exactly, so y is admitted after all ("when it fits
			// in what the plan frees anyway"). Loads in Smith's order: x (0.5/s) before y (0.2/s).
			name: "an unworthy load that fits exactly in what the plan frees anyway is admitted",
			cat: catalog(model("k", plan.TierP1, 4, L), model("v", plan.TierP1, 4, L),
				model("x", plan.TierP1, 3, L), model("y", plan.TierP1, 1, L)),
			budget: plan.Budget{Profile: prof, TotalBytes: 8 * gi},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"k": ready(old, t0), "v": ready(old, t0)}},
			demand: plan.Demand{"k": 10, "v": 0.3, "x": 0.5, "y": 0.2},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P1 value 0.75 lowest; need 4.00GiB for y, x"},
				{Kind: plan.ActionLoad, Model: "x", Cause: plan.CauseDemand, At: t0, AccountedBytes: 7 * gi, PeakBytes: 7 * gi, Digest: dgA, Reason: "load: P1 demand 0.5 req/s, value 1.67; needs 3.00GiB"},
				{Kind: plan.ActionLoad, Model: "y", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 0.2 req/s, value 2; needs 1.00GiB"},
			},
		},
		{
			// Smith's rule orders by worth ÷ load time. p: 1 req/s × 10 s = 10 over 10 s (1/s),
			// value 10; q: 2 req/s × 0.5 s = 1 over 0.5 s (2/s), value 1. p ranks first, q loads
			// first. With a load time under a second, worth × load time (0.5) would order the
			// other way: this pins the division.
			name:   "Smith's order with a load time under a second",
			cat:    catalog(model("p", plan.TierP1, 1, L), model("q", plan.TierP1, 1, 500*time.Millisecond)),
			budget: budget10,
			demand: plan.Demand{"p": 1, "q": 2},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "q", Cause: plan.CauseDemand, At: t0, AccountedBytes: gi, PeakBytes: gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 1; needs 1.00GiB"},
				{Kind: plan.ActionLoad, Model: "p", Cause: plan.CauseDemand, At: t0, AccountedBytes: 2 * gi, PeakBytes: 2 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 10; needs 1.00GiB"},
			},
		},
		{
			// Within budget at the start (8 of 10 GiB), no eviction runs up front: each load is
			// preceded by just the evictions it needs ("a model is unloaded only when its memory
			// is about to be used"). a (worth 20, 2/s) needs 2 GiB beyond the 2 free: vlow, the
			// lowest; then b needs vhigh. Values: a 5, b 2.5, vhigh 0.5, vlow 0.25 (P2).
			name: "a start within budget evicts nothing before the first load that needs it",
			cat: catalog(model("a", plan.TierP1, 4, L), model("b", plan.TierP1, 4, L),
				model("vhigh", plan.TierP2, 4, L), model("vlow", plan.TierP2, 4, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"vhigh": ready(old, t0), "vlow": ready(old, t0)}},
			demand: plan.Demand{"a": 2, "b": 1, "vhigh": 0.2, "vlow": 0.1},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "vlow", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P2 value 0.25 lowest; need 8.00GiB for a, b"},
				{Kind: plan.ActionLoad, Model: "a", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 5; needs 4.00GiB"},
				{Kind: plan.ActionUnload, Model: "vhigh", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P2 value 0.5 lowest; need 8.00GiB for a, b"},
				{Kind: plan.ActionLoad, Model: "b", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 2.5; needs 4.00GiB"},
			},
		},
		{
			// A load that brings the accounted memory to the budget exactly needs no eviction:
			// k 4 + v 4 + x 2 = 10. x (2/s) loads first, then v goes for y (1/s).
			name: "a load that fills the budget exactly while a victim waits evicts nothing first",
			cat: catalog(model("k", plan.TierP1, 4, L), model("v", plan.TierP2, 4, L),
				model("x", plan.TierP1, 2, L), model("y", plan.TierP1, 4, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"k": ready(old, t0), "v": ready(old, t0)}},
			demand: plan.Demand{"k": 5, "v": 1, "x": 2, "y": 1},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "x", Cause: plan.CauseDemand, At: t0, AccountedBytes: 10 * gi, PeakBytes: 10 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 10; needs 2.00GiB"},
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 6 * gi, PeakBytes: 10 * gi, Reason: "evict: P2 value 2.5 lowest; need 6.00GiB for x, y"},
				{Kind: plan.ActionLoad, Model: "y", Cause: plan.CauseDemand, At: t0, AccountedBytes: 10 * gi, PeakBytes: 10 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 2.5; needs 4.00GiB"},
			},
		},
		{
			// "each takes free memory first": k 1 + v 1 + w 4 leave 4 GiB free. x (worth 2 on
			// 1 GiB, value 2) ranks first and takes 1 GiB of it, evicting nothing; y (worth 5 on
			// 4, value 1.25) takes the other 3 and 1 GiB of w (worth 3 on 4, value 0.75): 5 > 3,
			// y pays for itself. Charged w instead of the free memory, x (2 ≤ 3) would be refused.
			// y (0.5/s) loads first, filling the 10 GiB exactly; w then goes for x (0.2/s).
			name: "a load that fits in free memory is charged no victim",
			cat: catalog(model("k", plan.TierP1, 1, L), model("v", plan.TierP1, 1, L), model("w", plan.TierP1, 4, L),
				model("x", plan.TierP1, 1, L), model("y", plan.TierP1, 4, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"k": ready(old, t0), "v": ready(old, t0), "w": ready(old, t0)}},
			demand: plan.Demand{"k": 10, "v": 0.1, "w": 0.3, "x": 0.2, "y": 0.5},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "y", Cause: plan.CauseDemand, At: t0, AccountedBytes: 10 * gi, PeakBytes: 10 * gi, Digest: dgA, Reason: "load: P1 demand 0.5 req/s, value 1.25; needs 4.00GiB"},
				{Kind: plan.ActionUnload, Model: "w", Cause: plan.CauseEvict, At: t0, AccountedBytes: 6 * gi, PeakBytes: 10 * gi, Reason: "evict: P1 value 0.75 lowest; need 5.00GiB for x, y"},
				{Kind: plan.ActionLoad, Model: "x", Cause: plan.CauseDemand, At: t0, AccountedBytes: 7 * gi, PeakBytes: 7 * gi, Digest: dgA, Reason: "load: P1 demand 0.2 req/s, value 2; needs 1.00GiB"},
			},
		},
		{
			// A load is refused as unworthy only against victims of its own tier ("a lower
			// tier always yields"): z's worth is exactly 0 (5e-324 req/s × 0.5 s rounds to 0),
			// and the 0 it is compared with is the worth of no P1 victim, not a victim's. w
			// (P2, 1 req/s × 10 s ÷ 9.5 GiB = 1.05) yields its memory.
			name:   "a load of worth 0 that evicts only a lower tier is not refused as unworthy",
			cat:    catalog(model("w", plan.TierP2, 9.5, L), model("z", plan.TierP1, 1, 500*time.Millisecond)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"w": ready(old, t0)}},
			demand: plan.Demand{"w": 1, "z": 5e-324},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "w", Cause: plan.CauseEvict, At: t0, AccountedBytes: 0, PeakBytes: 19 * gi / 2, Reason: "evict: P2 value 1.05 lowest; need 1.00GiB for z"},
				{Kind: plan.ActionLoad, Model: "z", Cause: plan.CauseDemand, At: t0, AccountedBytes: gi, PeakBytes: gi, Digest: dgA, Reason: "load: P1 demand 4.94e-324 req/s, value 0; needs 1.00GiB"},
			},
		},
		{
			// The eviction reason: a victim that would not fit even with nothing loaded goes for
			// the over-budget start. Ranks l (30), r1 (10), r2 (5), v (P2); start 14 of 10 GiB.
			// With nothing loaded r1 6 + r2 4 fill the 10 GiB exactly and are both kept, so v (4)
			// has no room: over budget. r2 goes for l (30 > r2's 20).
			name: "with nothing loaded the residents above fill the budget exactly: the victim below is over budget",
			cat: catalog(model("l", plan.TierP1, 1, L), model("r1", plan.TierP1, 6, L), model("r2", plan.TierP1, 4, L),
				model("v", plan.TierP2, 4, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"r1": ready(old, t0), "r2": ready(old, t0), "v": ready(old, t0)}},
			demand: plan.Demand{"l": 3, "r1": 6, "r2": 2, "v": 1},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 10 * gi, PeakBytes: 14 * gi,
					Reason: "evict: P2 value 2.5 lowest; over budget: fixed 0.0MiB + higher-ranked models leave no room for 4.00GiB within 10.00GiB"},
				{Kind: plan.ActionUnload, Model: "r2", Cause: plan.CauseEvict, At: t0, AccountedBytes: 6 * gi, PeakBytes: 10 * gi, Reason: "evict: P1 value 5 lowest; need 1.00GiB for l"},
				{Kind: plan.ActionLoad, Model: "l", Cause: plan.CauseDemand, At: t0, AccountedBytes: 7 * gi, PeakBytes: 7 * gi, Digest: dgA, Reason: "load: P1 demand 3 req/s, value 30; needs 1.00GiB"},
			},
		},
		{
			// The same reason when a resident above does not fit with nothing loaded: b 8 is
			// kept, r 4 is not (12 > 10) and goes for the budget; v (2) fits beside b (10), so
			// it is l's load (1 + 8 + 2 > 10) that evicts v. Ranks l (50), b (5), r (2.5), v (P2, 5).
			name: "a resident above that does not fit with nothing loaded is not counted as kept",
			cat: catalog(model("l", plan.TierP1, 1, L), model("b", plan.TierP1, 8, L), model("r", plan.TierP1, 4, L),
				model("v", plan.TierP2, 2, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"b": ready(old, t0), "r": ready(old, t0), "v": ready(old, t0)}},
			demand: plan.Demand{"l": 5, "b": 4, "r": 1, "v": 1},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 12 * gi, PeakBytes: 14 * gi, Reason: "evict: P2 value 5 lowest; need 1.00GiB for l"},
				{Kind: plan.ActionUnload, Model: "r", Cause: plan.CauseEvict, At: t0, AccountedBytes: 8 * gi, PeakBytes: 12 * gi,
					Reason: "evict: P1 value 2.5 lowest; over budget: fixed 0.0MiB + higher-ranked models leave no room for 4.00GiB within 10.00GiB"},
				{Kind: plan.ActionLoad, Model: "l", Cause: plan.CauseDemand, At: t0, AccountedBytes: 9 * gi, PeakBytes: 9 * gi, Digest: dgA, Reason: "load: P1 demand 5 req/s, value 50; needs 1.00GiB"},
			},
		},
		{
			// An eviction reason names up to three loads, then "and n more": exactly three are
			// all named. a, b, c (2 GiB each; values 15, 12.5, 10) load in Smith's order; k 2 +
			// a + b fill 10 GiB, so v (P2, 4 GiB) goes for c.
			name: "an eviction for exactly three loads names all three",
			cat: catalog(model("a", plan.TierP1, 2, L), model("b", plan.TierP1, 2, L), model("c", plan.TierP1, 2, L),
				model("k", plan.TierP1, 2, L), model("v", plan.TierP2, 4, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"k": ready(old, t0), "v": ready(old, t0)}},
			demand: plan.Demand{"a": 3, "b": 2.5, "c": 2, "k": 1, "v": 1},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "a", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 3 req/s, value 15; needs 2.00GiB"},
				{Kind: plan.ActionLoad, Model: "b", Cause: plan.CauseDemand, At: t0, AccountedBytes: 10 * gi, PeakBytes: 10 * gi, Digest: dgA, Reason: "load: P1 demand 2.5 req/s, value 12.5; needs 2.00GiB"},
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 6 * gi, PeakBytes: 10 * gi, Reason: "evict: P2 value 2.5 lowest; need 6.00GiB for a, b, c"},
				{Kind: plan.ActionLoad, Model: "c", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 10; needs 2.00GiB"},
			},
		},
		{
			// Four loads: three named and "1 more" (4 − 3). d (value 7.5) is the fourth.
			name: "an eviction for four loads names three and 1 more",
			cat: catalog(model("a", plan.TierP1, 2, L), model("b", plan.TierP1, 2, L), model("c", plan.TierP1, 2, L),
				model("d", plan.TierP1, 2, L), model("v", plan.TierP2, 4, L)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"v": ready(old, t0)}},
			demand: plan.Demand{"a": 3, "b": 2.5, "c": 2, "d": 1.5, "v": 1},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "a", Cause: plan.CauseDemand, At: t0, AccountedBytes: 6 * gi, PeakBytes: 6 * gi, Digest: dgA, Reason: "load: P1 demand 3 req/s, value 15; needs 2.00GiB"},
				{Kind: plan.ActionLoad, Model: "b", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2.5 req/s, value 12.5; needs 2.00GiB"},
				{Kind: plan.ActionLoad, Model: "c", Cause: plan.CauseDemand, At: t0, AccountedBytes: 10 * gi, PeakBytes: 10 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 10; needs 2.00GiB"},
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 6 * gi, PeakBytes: 10 * gi, Reason: "evict: P2 value 2.5 lowest; need 8.00GiB for a, b, c and 1 more"},
				{Kind: plan.ActionLoad, Model: "d", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 1.5 req/s, value 7.5; needs 2.00GiB"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t)
		})
	}
}

// swapModel is a P0 model of 3 GiB whose reload holds 2 GiB more.
func swapModel() plan.Model {
	m := model("swap", plan.TierP0, 3, time.Second)
	m.SwapOverheadBytes = 2 * gi
	return m
}

// TestAccountedAndValueBoundaries: the accounted memory adds the unaccounted device memory to
// the reserve, and a peak of 0 is worth 0, not a division by zero.
func TestAccountedAndValueBoundaries(t *testing.T) {
	cat := catalog(model("m", plan.TierP1, 3, time.Second))
	cat.ReserveBytes = gi
	b := plan.Budget{Profile: prof, TotalBytes: 10 * gi, ReserveBytes: gi / 2}
	zeroPeak := plan.Model{Name: "z", Digest: dgA, Tier: plan.TierP1, LoadTime: time.Second, PeakMemoryBytes: map[string]int64{prof: 0}}
	tests := []struct {
		name      string
		got, want float64
	}{
		// max(reserve 1, budget reserve 0.5) + unaccounted 2 + m's 3 GiB = 6 GiB.
		{"reserve + unaccounted + models", float64(plan.Accounted(cat, b, plan.Observed{UnaccountedBytes: 2 * gi,
			Models: map[string]plan.ModelStatus{"m": {State: plan.StateReady}}})), float64(6 * gi)},
		// The same as Decide's StartBytes.
		{"Decide's StartBytes", float64(plan.Decide(cat, b, plan.Observed{UnaccountedBytes: 2 * gi,
			Models: map[string]plan.ModelStatus{"m": {State: plan.StateReady}}}, nil, t0).StartBytes), float64(6 * gi)},
		// density's peak ≤ 0 guard: value 0 like a model without a peak (it would be 10 ÷ 0 = +Inf).
		{"a peak of 0 is worth 0", plan.Value(zeroPeak, prof, 10, 0), 0},
		{"a peak of 1 byte is worth Worth ÷ 2^-30 GiB", plan.Value(plan.Model{LoadTime: time.Second, PeakMemoryBytes: map[string]int64{prof: 1}}, prof, 1, 0), 1 << 30},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %g, want %g", tt.name, tt.got, tt.want)
		}
	}
}

// TestFormatBytesBoundaries: MiB with one decimal strictly inside ±1 GiB, GiB with two from
// ±1 GiB on, the same on both signs.
func TestFormatBytesBoundaries(t *testing.T) {
	tests := []struct {
		b    int64
		want string
	}{
		{0, "0.0MiB"},
		{512 << 20, "512.0MiB"}, // 512 MiB: bytes ÷ 2^20
		{-512 << 20, "-512.0MiB"},
		{1023 << 20, "1023.0MiB"},
		{-1023 << 20, "-1023.0MiB"},
		{gi, "1.00GiB"},   // 1 GiB is not below 1 GiB
		{-gi, "-1.00GiB"}, // nor is −1 GiB inside (−1 GiB, 1 GiB)
		{3 * gi / 2, "1.50GiB"},
	}
	for _, tt := range tests {
		if got := plan.FormatBytes(tt.b); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.b, got, tt.want)
		}
	}
}

// TestDecayedBoundaries: the samples a DecayedMean accepts at the ends of [0,
// MaxDecayedSample], and a half-life of 0 read as no decay (the guard against dividing by it),
// the same as a negative one.
func TestDecayedBoundaries(t *testing.T) {
	const h = 10 * time.Minute
	minute := t0.Add(time.Minute)
	tests := []struct {
		name      string
		got, want float64
	}{
		// 0 is a valid sample (a load that started at once): mean (10 + 0) ÷ 2.
		{"a sample of 0 counts", plan.DecayedMean{}.Add(10, t0, h).Add(0, t0, h).Mean(), 5},
		{"a sample of MaxDecayedSample counts", plan.DecayedMean{}.Add(plan.MaxDecayedSample, t0, h).Mean(), plan.MaxDecayedSample},
		// No decay with H = 0: (10 + 30) ÷ 2, as with H < 0; decaying by 2^(−60/0) = 0 would
		// leave 30.
		{"mean, half-life 0", plan.DecayedMean{}.Add(10, t0, 0).Add(30, minute, 0).Mean(), 20},
		{"mean, half-life −1ns", plan.DecayedMean{}.Add(10, t0, -1).Add(30, minute, -1).Mean(), 20},
		// Add with H = 0 ages nothing: CRF 3 + 1.
		{"rate CRF, half-life 0", plan.DecayedRate{CRF: 3, At: t0}.Add(1, minute, 0).CRF, 4},
		{"rate CRF, half-life −1ns", plan.DecayedRate{CRF: 3, At: t0}.Add(1, minute, -1).CRF, 4},
		// Rate = CRF · ln 2 ÷ H has no value at H = 0: 0, not +Inf.
		{"rate, half-life 0", plan.DecayedRate{CRF: 3, At: t0}.Rate(minute, 0), 0},
		{"rate, half-life −1ns", plan.DecayedRate{CRF: 3, At: t0}.Rate(minute, -1), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %g, want %g", tt.name, tt.got, tt.want)
		}
	}
}

// TestCheckPinnedBoundaries: P0 models together fit while their peaks + the reserve ≤ the
// budget; the error lists up to maxListed (20) names.
func TestCheckPinnedBoundaries(t *testing.T) {
	budget := plan.Budget{Profile: prof, TotalBytes: 10 * gi}
	p0s := func(n int, peakGiB float64) []plan.Model {
		var ms []plan.Model
		for i := range n {
			ms = append(ms, model(fmt.Sprintf("p%02d", i), plan.TierP0, peakGiB, time.Second))
		}
		return ms
	}
	var twenty []string
	for i := range 20 {
		twenty = append(twenty, fmt.Sprintf("p%02d", i))
	}
	tests := []struct {
		name    string
		reserve int64
		models  []plan.Model
		wantErr string // the whole error; "" means nil
	}{
		// 4 + 5 GiB + reserve 1 = the 10 GiB budget exactly: they fit.
		{name: "peaks + reserve = budget: fit", reserve: gi,
			models: []plan.Model{model("a", plan.TierP0, 4, time.Second), model("b", plan.TierP0, 5, time.Second)}},
		// 5 + 5 + reserve 1 = 11 > 10, though each fits alone (5 + 1 ≤ 10).
		{name: "peaks + reserve one GiB over the budget", reserve: gi,
			models:  []plan.Model{model("a", plan.TierP0, 5, time.Second), model("b", plan.TierP0, 5, time.Second)},
			wantErr: "pinned model can never fit the budget: P0 models a, b together: peaks 10.00GiB + reserve 1.00GiB = 11.00GiB exceed the budget 10.00GiB of profile 1g.10gb; they can never all be loaded and the pod would never be ready"},
		// Exactly 20 names: all listed, no "and 0 more".
		{name: "exactly maxListed P0 models are all named", models: p0s(20, 1),
			wantErr: "pinned model can never fit the budget: P0 models " + strings.Join(twenty, ", ") + " together: peaks 20.00GiB + reserve 0.0MiB = 20.00GiB exceed the budget 10.00GiB of profile 1g.10gb; they can never all be loaded and the pod would never be ready"},
		{name: "one more than maxListed", models: p0s(21, 1),
			wantErr: "pinned model can never fit the budget: P0 models " + strings.Join(twenty, ", ") + " and 1 more together: peaks 21.00GiB + reserve 0.0MiB = 21.00GiB exceed the budget 10.00GiB of profile 1g.10gb; they can never all be loaded and the pod would never be ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := plan.Catalog{ReserveBytes: tt.reserve, IdleTimeout: time.Minute, Models: tt.models}
			err := cat.CheckPinned(budget)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("CheckPinned = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, plan.ErrNeverFits) || err.Error() != tt.wantErr {
				t.Errorf("CheckPinned = %v\nwant ErrNeverFits: %s", err, tt.wantErr)
			}
		})
	}
}

// TestViolationsBoundaries: each range Validate checks, at its ends and one step past them.
func TestViolationsBoundaries(t *testing.T) {
	valid := func() plan.Catalog {
		return plan.Catalog{IdleTimeout: time.Minute, Models: []plan.Model{model("m", plan.TierP1, 1, time.Second)}}
	}
	withModel := func(f func(*plan.Model)) func(*plan.Catalog) {
		return func(c *plan.Catalog) { f(&c.Models[0]) }
	}
	tests := []struct {
		name    string
		edit    func(*plan.Catalog)
		wantErr string // the whole error; "" means valid
	}{
		{"idleTimeout 1s, the lower end of [1s, 168h]", func(c *plan.Catalog) { c.IdleTimeout = time.Second }, ""},
		{"idleTimeout 1ns under 1s", func(c *plan.Catalog) { c.IdleTimeout = time.Second - 1 }, "idleTimeout: 999.999999ms out of range [1s, 168h0m0s]"},
		{"idleTimeout 168h, the upper end", func(c *plan.Catalog) { c.IdleTimeout = plan.MaxIdleTimeout }, ""},
		{"idleTimeout 1ns over 168h", func(c *plan.Catalog) { c.IdleTimeout = plan.MaxIdleTimeout + 1 }, "idleTimeout: 168h0m0.000000001s out of range [1s, 168h0m0s]"},
		{"minResidency 0, the lower end of [0s, 24h]", func(c *plan.Catalog) { c.MinResidency = 0 }, ""},
		{"minResidency 24h, the upper end", func(c *plan.Catalog) { c.MinResidency = plan.MaxMinResidency }, ""},
		{"minResidency 1ns over 24h", func(c *plan.Catalog) { c.MinResidency = plan.MaxMinResidency + 1 }, "minResidency: 24h0m0.000000001s out of range [0s, 24h0m0s]"},
		{"reserveBytes 2^50, the upper end", func(c *plan.Catalog) { c.ReserveBytes = plan.MaxMemoryBytes }, ""},
		{"MaxModels models", func(c *plan.Catalog) { c.Models = manyModels(plan.MaxModels) }, ""},
		{"MaxModels + 1 models", func(c *plan.Catalog) { c.Models = manyModels(plan.MaxModels + 1) }, "models: 10001 models; want at most 10000"},
		{"peak 2^50, the upper end of [1, 2^50]", withModel(func(m *plan.Model) { m.PeakMemoryBytes[prof] = plan.MaxMemoryBytes }), ""},
		{"peak 1, the lower end", withModel(func(m *plan.Model) { m.PeakMemoryBytes[prof] = 1 }), ""},
		{"swapOverheadBytes 2^50, the upper end of [0, 2^50]", withModel(func(m *plan.Model) { m.SwapOverheadBytes = plan.MaxMemoryBytes }), ""},
		{"swapOverheadBytes 1 over 2^50", withModel(func(m *plan.Model) { m.SwapOverheadBytes = plan.MaxMemoryBytes + 1 }),
			"models[0].swapOverheadBytes: 1125899906842625 out of range [0, 1125899906842624]"},
		{"swapOverheadBytes 0, the lower end", withModel(func(m *plan.Model) { m.SwapOverheadBytes = 0 }), ""},
		// loadTime is in (0s, 1h]: 0 is out, 1ns in.
		{"loadTime 0, outside (0s, 1h]", withModel(func(m *plan.Model) { m.LoadTime = 0 }), "models[0].loadTime: 0s out of range (0s, 1h0m0s]"},
		{"loadTime 1ns", withModel(func(m *plan.Model) { m.LoadTime = 1 }), ""},
		{"loadTime 1h, the upper end", withModel(func(m *plan.Model) { m.LoadTime = plan.MaxLoadTime }), ""},
		{"loadTime 1ns over 1h", withModel(func(m *plan.Model) { m.LoadTime = plan.MaxLoadTime + 1 }), "models[0].loadTime: 1h0m0.000000001s out of range (0s, 1h0m0s]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.edit(&c)
			err := c.Violations()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Violations = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("Violations = %v\nwant %s", err, tt.wantErr)
			}
		})
	}
}

// manyModels is n valid P2 models named m00000, m00001, ….
func manyModels(n int) []plan.Model {
	ms := make([]plan.Model, n)
	for i := range ms {
		ms[i] = model(fmt.Sprintf("m%05d", i), plan.TierP2, 1, time.Second)
	}
	return ms
}
