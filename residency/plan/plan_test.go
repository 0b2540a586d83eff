package plan_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/plan/plantest"
)

// The shared fixtures (residency/plan/plantest) under the short names the tests use.
var (
	t0      = plantest.T0
	model   = plantest.Model
	catalog = plantest.Catalog
	ready   = plantest.Ready
)

const (
	gi   = plantest.Gi
	dgA  = plantest.DigestA
	dgB  = plantest.DigestB
	prof = plantest.Profile
)

func TestDecide(t *testing.T) {
	old := t0.Add(-time.Hour)
	budget10 := plan.Budget{Profile: prof, TotalBytes: 10 * gi}
	// new wants a slot held by fast (2 s load, busier) or slow (30 s load).
	fastSlow := catalog(model("new", plan.TierP1, 4, 10*time.Second), model("fast", plan.TierP1, 4, 2*time.Second), model("slow", plan.TierP1, 4, 30*time.Second))
	fastSlowReady := map[string]plan.ModelStatus{"fast": ready(old, t0), "slow": ready(old, t0)}
	fastSlowDemand := plan.Demand{"new": 2, "fast": 0.5, "slow": 0.05}
	// withReserve is catalog(ms...) keeping reserve bytes back.
	withReserve := func(reserve int64, ms ...plan.Model) plan.Catalog {
		c := catalog(ms...)
		c.ReserveBytes = reserve
		return c
	}
	// a (6 GiB, READY) and b (3 GiB) behind a 2 GiB reserve: b outranks a by value whenever
	// its rate is over half a's, and needs 1 GiB of a's.
	reserveAB := withReserve(2*gi, model("a", plan.TierP1, 6, 10*time.Second), model("b", plan.TierP1, 3, 10*time.Second))
	aReady := plan.Observed{Models: map[string]plan.ModelStatus{"a": ready(old, t0)}}
	tests := []decideCase{
		{
			name:   "cold start loads P0 first, then demand; P2 without demand stays out",
			cat:    catalog(model("b-p1", plan.TierP1, 3, 10*time.Second), model("z-p0", plan.TierP0, 2, 10*time.Second), model("c-p2", plan.TierP2, 1, time.Second)),
			budget: budget10,
			demand: plan.Demand{"b-p1": 1},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "z-p0", Cause: plan.CausePinned, At: t0, AccountedBytes: 2 * gi, PeakBytes: 2 * gi, Digest: dgA, Reason: "load: P0 pinned; needs 2.00GiB"},
				{Kind: plan.ActionLoad, Model: "b-p1", Cause: plan.CauseDemand, At: t0, AccountedBytes: 5 * gi, PeakBytes: 5 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 3.33; needs 3.00GiB"},
			},
		},
		{
			name:   "unload before load: lowest-value victim makes room",
			cat:    catalog(model("hot", plan.TierP1, 4, 20*time.Second), model("warm", plan.TierP1, 4, 10*time.Second), model("cold", plan.TierP1, 4, 10*time.Second)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"warm": ready(old, t0), "cold": ready(old, t0)}},
			demand: plan.Demand{"hot": 2, "warm": 1, "cold": 0.5},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "cold", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P1 value 1.25 lowest; need 4.00GiB for hot"},
				{Kind: plan.ActionLoad, Model: "hot", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 10; needs 4.00GiB"},
			},
		},
		{
			name:   "without a load wait the fast-loading model is the cheaper memory to free",
			cat:    fastSlow,
			budget: budget10,
			obs:    plan.Observed{Models: fastSlowReady},
			demand: fastSlowDemand,
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "fast", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P1 value 0.25 lowest; need 4.00GiB for new"},
				{Kind: plan.ActionLoad, Model: "new", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 5; needs 4.00GiB"},
			},
		},
		{
			// Worth = rate × (20 s + load time): fast 0.5 × 22 = 11, slow 0.05 × 50 = 2.5.
			name:   "a measured load wait counts in every miss: the busier fast-loading model stays",
			cat:    fastSlow,
			budget: budget10,
			obs:    plan.Observed{Models: fastSlowReady, LoadWait: 20 * time.Second},
			demand: fastSlowDemand,
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "slow", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P1 value 0.625 lowest; need 4.00GiB for new"},
				{Kind: plan.ActionLoad, Model: "new", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 15; needs 4.00GiB"},
			},
		},
		{
			name:   "P2 is evicted before a P1 of lower value",
			cat:    catalog(model("new", plan.TierP1, 4, 10*time.Second), model("p1", plan.TierP1, 4, 10*time.Second), model("p2", plan.TierP2, 4, 10*time.Second)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"p1": ready(old, t0), "p2": ready(old, t0)}},
			demand: plan.Demand{"new": 2, "p1": 0.1, "p2": 1},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "p2", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P2 value 2.5 lowest; need 4.00GiB for new"},
				{Kind: plan.ActionLoad, Model: "new", Cause: plan.CauseDemand, At: t0, AccountedBytes: 8 * gi, PeakBytes: 8 * gi, Digest: dgA, Reason: "load: P1 demand 2 req/s, value 5; needs 4.00GiB"},
			},
		},
		{
			name:        "P0 and young models are never victims: the load is refused",
			cat:         catalog(model("pin", plan.TierP0, 5, time.Second), model("young", plan.TierP2, 4, time.Second), model("want", plan.TierP1, 4, time.Minute)),
			budget:      budget10,
			obs:         plan.Observed{Models: map[string]plan.ModelStatus{"pin": ready(old, old), "young": ready(t0.Add(-time.Minute), t0)}},
			demand:      plan.Demand{"want": 5},
			wantRefused: []string{"want: refused: needs 4.00GiB; fixed 9.00GiB + higher-ranked 0.0MiB leave 1.00GiB of 10.00GiB"},
		},
		{
			name:   "with freeIdle, idle P1/P2 unloaded after the idle timeout; P0 and busy models stay",
			cat:    catalog(model("pin", plan.TierP0, 1, time.Second), model("idle", plan.TierP1, 1, time.Second), model("recent", plan.TierP2, 1, time.Second), model("busy", plan.TierP2, 1, time.Second)),
			budget: plan.Budget{Profile: prof, TotalBytes: 10 * gi, FreeIdle: true},
			obs: plan.Observed{Models: map[string]plan.ModelStatus{
				"pin": ready(old, old), "idle": ready(old, t0.Add(-11*time.Minute)),
				"recent": ready(old, t0.Add(-9*time.Minute)), "busy": ready(old, old)}},
			demand: plan.Demand{"busy": 0.01},
			want: []plan.Action{{Kind: plan.ActionUnload, Model: "idle", Cause: plan.CauseIdle, At: t0, AccountedBytes: 3 * gi, PeakBytes: 4 * gi,
				Reason: "idle: P1 idle, unused for 11m0s ≥ idle timeout 10m0s (freeIdle)"}},
		},
		{
			name:   "without freeIdle an idle model keeps memory nobody else wants",
			cat:    catalog(model("idle", plan.TierP1, 1, time.Second)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"idle": ready(old, old)}},
		},
		{
			name:   "with freeIdle the idle timeout is at least the load time (anti-thrash)",
			cat:    catalog(model("slow", plan.TierP1, 1, 20*time.Minute)),
			budget: plan.Budget{Profile: prof, TotalBytes: 10 * gi, FreeIdle: true},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"slow": ready(old, t0.Add(-15*time.Minute))}},
		},
		{
			name:   "a model with one executing and three queued requests is never a victim; the refusal names it",
			cat:    catalog(model("busy", plan.TierP2, 6, 10*time.Second), model("want", plan.TierP1, 6, time.Minute)),
			budget: budget10,
			obs: plan.Observed{Models: map[string]plan.ModelStatus{"busy": {State: plan.StateReady, LoadedSince: old, LastUsed: old,
				Queued: 3, Executing: 1}}},
			demand: plan.Demand{"want": 5, "busy": 0},
			wantRefused: []string{"want: refused: needs 6.00GiB; fixed 6.00GiB + higher-ranked 0.0MiB leave 4.00GiB of 10.00GiB; " +
				"waiting for busy models, never evicted with work in flight: busy (3 queued, 1 executing, 6.00GiB)"},
		},
		{
			name:   "the same model once idle is evicted for the waiting load",
			cat:    catalog(model("busy", plan.TierP2, 6, 10*time.Second), model("want", plan.TierP1, 6, time.Minute)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"busy": ready(old, t0)}},
			demand: plan.Demand{"want": 5},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "busy", Cause: plan.CauseEvict, At: t0, AccountedBytes: 0, PeakBytes: 6 * gi, Reason: "evict: P2 value 0 lowest; need 6.00GiB for want"},
				{Kind: plan.ActionLoad, Model: "want", Cause: plan.CauseDemand, At: t0, AccountedBytes: 6 * gi, PeakBytes: 6 * gi, Digest: dgA, Reason: "load: P1 demand 5 req/s, value 50; needs 6.00GiB"},
			},
		},
		{
			name: "admission pays for itself: a denser load that evicts more worth than it brings waits",
			// small (1 req/s × 10 s = worth 10 on 1 GiB) outranks big1 and big2 (0.4 req/s × 10 s =
			// worth 4 each on 5 GiB); its 1 GiB comes from one eviction, big2, worth 4 < 10.
			cat:    catalog(model("small", plan.TierP1, 1, 10*time.Second), model("big1", plan.TierP1, 5, 10*time.Second), model("big2", plan.TierP1, 5, 10*time.Second)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"big1": ready(old, t0), "big2": ready(old, t0)}},
			demand: plan.Demand{"small": 1, "big1": 0.4, "big2": 0.4},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "big2", Cause: plan.CauseEvict, At: t0, AccountedBytes: 5 * gi, PeakBytes: 10 * gi, Reason: "evict: P1 value 0.8 lowest; need 1.00GiB for small"},
				{Kind: plan.ActionLoad, Model: "small", Cause: plan.CauseDemand, At: t0, AccountedBytes: 6 * gi, PeakBytes: 6 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 10; needs 1.00GiB"},
			},
		},
		{
			name: "waiting work ages: one request held 10 min outranks two just held (no starvation)",
			cat:  catalog(model("old", plan.TierP1, 6, 10*time.Second), model("new", plan.TierP1, 6, 10*time.Second)),
			// old: 1 held + 600 s / 10 s = worth 61; new: 2 held = worth 2. Only one fits.
			budget: budget10,
			obs: plan.Observed{Models: map[string]plan.ModelStatus{
				"old": {State: plan.StateUnavailable, Queued: 1, WaitingSince: t0.Add(-10 * time.Minute)},
				"new": {State: plan.StateUnavailable, Queued: 2, WaitingSince: t0}}},
			want: []plan.Action{{Kind: plan.ActionLoad, Model: "old", Cause: plan.CauseDemand, At: t0, AccountedBytes: 6 * gi, PeakBytes: 6 * gi, Digest: dgA,
				Reason: "load: P1 demand 0 req/s, value 10.2; needs 6.00GiB"}},
			wantRefused: []string{"new: refused: needs 6.00GiB; fixed 0.0MiB + higher-ranked 6.00GiB leave 4.00GiB of 10.00GiB"},
		},
		{
			name:        "a load worth less than its victim is refused, and says so",
			cat:         catalog(model("tiny", plan.TierP1, 0.5, 10*time.Second), model("big", plan.TierP1, 9.75, 10*time.Second)),
			budget:      budget10,
			obs:         plan.Observed{Models: map[string]plan.ModelStatus{"big": ready(old, t0)}},
			demand:      plan.Demand{"tiny": 0.3, "big": 0.4},
			wantRefused: []string{"tiny: refused: worth 3 does not exceed 4 of big, which it would evict"},
		},
		{
			// Worth ÷ load time, Smith's rule: x 1 req/s × 10 s = 10 over 10 s (1/s), y 3 req/s × 2 s = 6
			// over 2 s (3/s). x ranks first by value (10 ÷ 2 GiB against 6 ÷ 2 GiB), y loads first.
			name:   "loads run in Smith's order, worth ÷ load time, not in value order",
			cat:    catalog(model("x", plan.TierP1, 2, 10*time.Second), model("y", plan.TierP1, 2, 2*time.Second)),
			budget: budget10,
			demand: plan.Demand{"x": 1, "y": 3},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "y", Cause: plan.CauseDemand, At: t0, AccountedBytes: 2 * gi, PeakBytes: 2 * gi, Digest: dgA, Reason: "load: P1 demand 3 req/s, value 3; needs 2.00GiB"},
				{Kind: plan.ActionLoad, Model: "x", Cause: plan.CauseDemand, At: t0, AccountedBytes: 4 * gi, PeakBytes: 4 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 5; needs 2.00GiB"},
			},
		},
		{
			// b (3 GiB, 0.3 req/s × 10 s = worth 3) outranks a (6 GiB, 0.5 × 10 = 5) by value; the
			// reserve leaves 10 − 2 − 6 = 2 GiB free, so b's third GiB is a's, worth more.
			name:        "admission counts the reserve: the free memory is the budget less the fixed",
			cat:         reserveAB,
			budget:      budget10,
			obs:         aReady,
			demand:      plan.Demand{"a": 0.5, "b": 0.3},
			wantRefused: []string{"b: refused: worth 3 does not exceed 5 of a, which it would evict"},
		},
		{
			name:        "a load worth exactly its victim's does not pay for itself",
			cat:         reserveAB,
			budget:      budget10,
			obs:         aReady,
			demand:      plan.Demand{"a": 0.5, "b": 0.5},
			wantRefused: []string{"b: refused: worth 5 does not exceed 5 of a, which it would evict"},
		},
		{
			// Reserve 1 + c 3 + y 4 + a 5 = 13 GiB of 10: the first 3 GiB of the lowest-ranked
			// victim, a (0.4 req/s × 10 s = worth 4 on 5 GiB), must go whatever is loaded and are
			// nobody's cost. b (worth 4 on 3 GiB) takes a's other 2 GiB at no cost and its third
			// from y (worth 3.5): 4 > 3.5, so b pays for itself. Charged for a whole (4 ≤ 4), it
			// would be refused.
			name: "an eviction the over-budget start needs anyway is no load's cost",
			cat: withReserve(gi, model("a", plan.TierP1, 5, 10*time.Second), model("b", plan.TierP1, 3, 10*time.Second),
				model("c", plan.TierP1, 3, 10*time.Second), model("y", plan.TierP1, 4, 10*time.Second)),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"a": ready(old, t0), "c": ready(old, t0), "y": ready(old, t0)}},
			demand: plan.Demand{"a": 0.4, "b": 0.4, "c": 2, "y": 0.35},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "a", Cause: plan.CauseEvict, At: t0, AccountedBytes: 8 * gi, PeakBytes: 13 * gi, Reason: "evict: P1 value 0.8 lowest; over budget: fixed 1.00GiB + higher-ranked models leave no room for 5.00GiB within 10.00GiB"},
				{Kind: plan.ActionUnload, Model: "y", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi, Reason: "evict: P1 value 0.875 lowest; need 3.00GiB for b"},
				{Kind: plan.ActionLoad, Model: "b", Cause: plan.CauseDemand, At: t0, AccountedBytes: 7 * gi, PeakBytes: 7 * gi, Digest: dgA, Reason: "load: P1 demand 0.4 req/s, value 1.33; needs 3.00GiB"},
			},
		},
		{
			name:   "a load that fills the budget exactly evicts nothing",
			cat:    withReserve(2*gi, model("a", plan.TierP1, 4, 10*time.Second), model("b", plan.TierP1, 4, 10*time.Second)),
			budget: budget10,
			obs:    aReady,
			demand: plan.Demand{"a": 1, "b": 0.1},
			want: []plan.Action{
				{Kind: plan.ActionLoad, Model: "b", Cause: plan.CauseDemand, At: t0, AccountedBytes: 10 * gi, PeakBytes: 10 * gi, Digest: dgA, Reason: "load: P1 demand 0.1 req/s, value 0.25; needs 4.00GiB"},
			},
		},
		{
			name:   "no entry for the profile: never loaded",
			cat:    catalog(plan.Model{Name: "other", Digest: dgA, Tier: plan.TierP0, LoadTime: time.Second, PeakMemoryBytes: map[string]int64{"2g.20gb": gi}}),
			budget: budget10,
		},
		{
			name:   "quarantined and backing-off models are not loaded; an expired backoff is",
			cat:    catalog(model("q", plan.TierP0, 1, time.Second), model("b", plan.TierP0, 1, time.Second), model("done", plan.TierP0, 1, time.Second)),
			budget: budget10,
			obs: plan.Observed{Models: map[string]plan.ModelStatus{
				"q": {State: plan.StateUnavailable, Quarantined: true}, "b": {State: plan.StateUnavailable, BackoffUntil: t0.Add(time.Second)},
				"done": {State: plan.StateUnavailable, BackoffUntil: t0}}},
			want: []plan.Action{{Kind: plan.ActionLoad, Model: "done", Cause: plan.CausePinned, At: t0, AccountedBytes: gi, PeakBytes: gi, Digest: dgA, Reason: "load: P0 pinned; needs 1.00GiB"}},
		},
		{
			name: "a READY model whose digest changed is reloaded, holding its swap overhead meanwhile",
			cat: catalog(func() plan.Model {
				m := model("swap", plan.TierP0, 3, time.Second)
				m.SwapOverheadBytes = 2 * gi
				return m
			}()),
			budget: budget10,
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"swap": {State: plan.StateReady, LoadedSince: old, Digest: dgB}}},
			want: []plan.Action{{Kind: plan.ActionLoad, Model: "swap", Cause: plan.CauseDigest, At: t0, AccountedBytes: 3 * gi, PeakBytes: 5 * gi, Digest: dgA,
				Reason: "reload: digest sha256:bbbbbbbbbbbb → sha256:aaaaaaaaaaaa; the swap holds 2.00GiB more"}},
		},
		{
			name:        "memory not returned by an unload blocks a load; reserve counts",
			cat:         plan.Catalog{ReserveBytes: gi, IdleTimeout: time.Minute, Models: []plan.Model{model("m", plan.TierP0, 4, time.Second)}},
			budget:      budget10,
			obs:         plan.Observed{UnaccountedBytes: 6 * gi},
			wantRefused: []string{"m: refused: needs 4.00GiB; fixed 7.00GiB + higher-ranked 0.0MiB leave 3.00GiB of 10.00GiB"},
		},
		{
			name:        "measured above peak is accounted at the measurement",
			cat:         catalog(model("big", plan.TierP0, 2, time.Second), model("p1", plan.TierP1, 4, time.Second)),
			budget:      budget10,
			obs:         plan.Observed{Models: map[string]plan.ModelStatus{"big": {State: plan.StateReady, MeasuredBytes: 7 * gi, OverPeak: true}}},
			demand:      plan.Demand{"p1": 1},
			wantRefused: []string{"p1: refused: needs 4.00GiB; fixed 7.00GiB + higher-ranked 0.0MiB leave 3.00GiB of 10.00GiB"},
		},
		{
			name:   "over budget (budget shrank): evict lowest until within",
			cat:    catalog(model("a", plan.TierP1, 4, time.Second), model("b", plan.TierP2, 4, time.Second)),
			budget: plan.Budget{Profile: prof, TotalBytes: 6 * gi},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"a": ready(old, t0), "b": ready(old, t0)}},
			demand: plan.Demand{"a": 1, "b": 1},
			want: []plan.Action{{Kind: plan.ActionUnload, Model: "b", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi,
				Reason: "evict: P2 value 0.25 lowest; over budget: fixed 0.0MiB + higher-ranked models leave no room for 4.00GiB within 6.00GiB"}},
		},
		{
			// b does not fit beside a even without c's load (4 + 4 > 6 GiB), so the reason is
			// the shrunken budget, not c.
			name:   "over budget (budget shrank) with a load ranked above the victim",
			cat:    catalog(model("a", plan.TierP1, 4, time.Second), model("b", plan.TierP2, 4, time.Second), model("c", plan.TierP1, 1, time.Second)),
			budget: plan.Budget{Profile: prof, TotalBytes: 6 * gi},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"a": ready(old, t0), "b": ready(old, t0)}},
			demand: plan.Demand{"a": 1, "b": 1, "c": 1},
			want: []plan.Action{{Kind: plan.ActionUnload, Model: "b", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi,
				Reason: "evict: P2 value 0.25 lowest; over budget: fixed 0.0MiB + higher-ranked models leave no room for 4.00GiB within 6.00GiB"},
				{Kind: plan.ActionLoad, Model: "c", Cause: plan.CauseDemand, At: t0, AccountedBytes: 5 * gi, PeakBytes: 5 * gi, Digest: dgA, Reason: "load: P1 demand 1 req/s, value 1; needs 1.00GiB"}},
		},
		{
			// l's load pushes out r, ranked above v, so r is not among the models kept above v;
			// with nothing loaded r (4) stays and v (4) still does not fit in 6 GiB: v goes for
			// the budget, r for l.
			name: "over budget with a load that also evicts a model ranked above the victim",
			cat: catalog(model("l", plan.TierP1, 3, time.Second), model("r", plan.TierP1, 4, time.Second),
				model("v", plan.TierP2, 4, time.Second)),
			budget: plan.Budget{Profile: prof, TotalBytes: 6 * gi},
			obs:    plan.Observed{Models: map[string]plan.ModelStatus{"r": ready(old, t0), "v": ready(old, t0)}},
			demand: plan.Demand{"l": 10, "r": 1, "v": 1},
			want: []plan.Action{
				{Kind: plan.ActionUnload, Model: "v", Cause: plan.CauseEvict, At: t0, AccountedBytes: 4 * gi, PeakBytes: 8 * gi,
					Reason: "evict: P2 value 0.25 lowest; over budget: fixed 0.0MiB + higher-ranked models leave no room for 4.00GiB within 6.00GiB"},
				{Kind: plan.ActionUnload, Model: "r", Cause: plan.CauseEvict, At: t0, AccountedBytes: 0, PeakBytes: 4 * gi,
					Reason: "evict: P1 value 0.25 lowest; need 3.00GiB for l"},
				{Kind: plan.ActionLoad, Model: "l", Cause: plan.CauseDemand, At: t0, AccountedBytes: 3 * gi, PeakBytes: 3 * gi, Digest: dgA,
					Reason: "load: P1 demand 10 req/s, value 3.33; needs 3.00GiB"},
			},
		},
		{
			name:        "models outside the catalog are counted at their measurement and left alone",
			cat:         catalog(model("m", plan.TierP0, 4, time.Second)),
			budget:      budget10,
			obs:         plan.Observed{Models: map[string]plan.ModelStatus{"foreign": {State: plan.StateReady, MeasuredBytes: 7 * gi}}},
			wantRefused: []string{"m: refused: needs 4.00GiB; fixed 7.00GiB + higher-ranked 0.0MiB leave 3.00GiB of 10.00GiB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t)
		})
	}
}

// TestPlanScenario walks demand moving between models on one 1g.10gb slice.
func TestPlanScenario(t *testing.T) {
	cat := catalog(model("pin", plan.TierP0, 2, 5*time.Second), model("chat", plan.TierP1, 3, 30*time.Second),
		model("embed", plan.TierP1, 3, 10*time.Second), model("vision", plan.TierP1, 3.5, 20*time.Second))
	cat.ReserveBytes = gi / 2
	b := plan.Budget{Profile: prof, TotalBytes: 9856 << 20} // 1g.10gb as NVML reports it
	obs := plan.Observed{}
	type step struct {
		at     time.Duration
		demand plan.Demand
		want   []string // "Load x" / "Unload x"
	}
	steps := []step{
		{at: 0, demand: plan.Demand{"chat": 3}, want: []string{"Load pin", "Load chat"}},
		{at: 10 * time.Second, demand: plan.Demand{"chat": 3, "embed": 1}, want: []string{"Load embed"}},
		// vision needs 3.5 GiB: 0.5+2+3+3 = 8.5 GiB used of 9.625; embed (value 3.33/GiB) is
		// lowest but only 50 s old, so vision is refused.
		{at: time.Minute, demand: plan.Demand{"chat": 3, "embed": 1, "vision": 2}, want: nil},
		// Past minResidency embed (3.33) is below vision (11.4): evicted.
		{at: 3 * time.Minute, demand: plan.Demand{"chat": 3, "embed": 1, "vision": 2}, want: []string{"Unload embed", "Load vision"}},
		// Demand flips back within vision's minimum residency: no thrash.
		{at: 4 * time.Minute, demand: plan.Demand{"chat": 3, "embed": 5, "vision": 0.1}, want: nil},
		// Later vision is evictable and below embed.
		{at: 6 * time.Minute, demand: plan.Demand{"chat": 3, "embed": 5, "vision": 0.1}, want: []string{"Unload vision", "Load embed"}},
		// Everything but the pinned model goes idle: nobody else wants the memory, so it stays
		// (Budget.FreeIdle is off).
		{at: 20 * time.Minute, demand: plan.Demand{}, want: nil},
		// New demand takes the memory of the idle models by value.
		{at: 21 * time.Minute, demand: plan.Demand{"vision": 1}, want: []string{"Unload embed", "Load vision"}},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		acts := plan.Plan(cat, b, obs, s.demand, now)
		var got []string
		for _, a := range acts {
			got = append(got, string(a.Kind)+" "+a.Model)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Fatalf("t0+%s (-want +got):\n%s", s.at, diff)
		}
		checkPlan(t, cat, b, obs, s.demand, now, acts)
		obs = plan.Apply(obs, acts)
		// A minute of use for everything in demand.
		for name := range s.demand {
			if st, ok := obs.Models[name]; ok && st.State == plan.StateReady && s.demand[name] > 0 {
				st.LastUsed = now
				obs.Models[name] = st
			}
		}
	}
}

// decideCase is one case of a Decide table: the plan at t0 from cat, budget, obs and demand.
type decideCase struct {
	name        string
	cat         plan.Catalog
	budget      plan.Budget
	obs         plan.Observed
	demand      plan.Demand
	want        []plan.Action
	wantRefused []string // "model: reason"
}

// check plans at t0 and compares the actions and the refusals ("model: reason") with want,
// then checks the plan's invariants (checkPlan).
func (c decideCase) check(t *testing.T) {
	t.Helper()
	got := plan.Decide(c.cat, c.budget, c.obs, c.demand, t0)
	if diff := cmp.Diff(c.want, got.Actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	var refused []string
	for _, r := range got.Refused {
		refused = append(refused, r.Model+": "+r.Reason())
	}
	if diff := cmp.Diff(c.wantRefused, refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	checkPlan(t, c.cat, c.budget, c.obs, c.demand, t0, got.Actions)
}

// checkPlan asserts the planner's invariants for a plan made from a start within budget: every
// step within budget and accounted as stated, no P0, young or busy model unloaded, no idle
// unload without FreeIdle, no model acted on twice, and planning again after applying yields
// nothing.
func checkPlan(t *testing.T, cat plan.Catalog, b plan.Budget, obs plan.Observed, d plan.Demand, now time.Time, acts []plan.Action) {
	t.Helper()
	start := plan.Accounted(cat, b, obs)
	if start > b.TotalBytes {
		return
	}
	cur := obs
	seen := map[string]bool{}
	for i, a := range acts {
		if seen[a.Model] {
			t.Fatalf("step %d: %s acted on twice: %+v", i, a.Model, acts)
		}
		seen[a.Model] = true
		if a.Kind == plan.ActionUnload {
			m, _ := cat.Model(a.Model)
			st := obs.Models[a.Model]
			if m.Tier == plan.TierP0 {
				t.Fatalf("step %d unloads P0 model %s", i, a.Model)
			}
			if min := plan.MinResidency(cat, m); !st.LoadedSince.IsZero() && now.Sub(st.LoadedSince) < min {
				t.Fatalf("step %d unloads %s loaded %s ago < its minimum residency %s", i, a.Model, now.Sub(st.LoadedSince), min)
			}
			if st.Busy() {
				t.Fatalf("step %d unloads %s with work in flight (%d queued, %d executing)", i, a.Model, st.Queued, st.Executing)
			}
			if a.Cause == plan.CauseIdle && !b.FreeIdle {
				t.Fatalf("step %d unloads %s for idleness without FreeIdle", i, a.Model)
			}
		}
		before := plan.Accounted(cat, b, cur)
		cur = plan.Apply(cur, acts[i:i+1])
		got := plan.Accounted(cat, b, cur)
		if a.PeakBytes < max(before, got) || a.PeakBytes > b.TotalBytes {
			t.Fatalf("step %d (%s %s): PeakBytes %d; accounted %d before, %d after, budget %d", i, a.Kind, a.Model, a.PeakBytes, before, got, b.TotalBytes)
		}
		if got != a.AccountedBytes {
			t.Fatalf("step %d (%s %s): AccountedBytes %d, recomputed %d", i, a.Kind, a.Model, a.AccountedBytes, got)
		}
		if got > b.TotalBytes {
			t.Fatalf("step %d (%s %s): accounted %d > budget %d", i, a.Kind, a.Model, got, b.TotalBytes)
		}
	}
	if again := plan.Plan(cat, b, cur, d, now); len(again) != 0 {
		t.Fatalf("not idempotent: planning again yields %+v\nafter %+v", again, acts)
	}
}

// randomCase builds a random catalog, budget, state and demand from r.
func randomCase(r *rand.Rand) (plan.Catalog, plan.Budget, plan.Observed, plan.Demand, time.Time) {
	n := 1 + r.IntN(14)
	cat := plan.Catalog{
		ReserveBytes: int64(r.IntN(3)) * gi / 2,
		IdleTimeout:  time.Duration(1+r.IntN(20)) * time.Minute,
		MinResidency: time.Duration(r.IntN(5)) * time.Minute,
	}
	tiers := []plan.Tier{plan.TierP0, plan.TierP1, plan.TierP2}
	obs := plan.Observed{Models: map[string]plan.ModelStatus{}}
	d := plan.Demand{}
	now := t0
	for i := range n {
		m := plan.Model{Name: fmt.Sprintf("m%02d", i), Digest: dgA, Tier: tiers[r.IntN(3)],
			LoadTime: time.Duration(1+r.IntN(60)) * time.Second, PeakMemoryBytes: map[string]int64{},
			SwapOverheadBytes: int64(r.IntN(3)) * gi}
		if r.IntN(8) != 0 {
			m.PeakMemoryBytes[prof] = int64(1+r.IntN(16)) * gi / 4
		} else {
			m.PeakMemoryBytes["2g.20gb"] = gi
		}
		cat.Models = append(cat.Models, m)
		st := plan.ModelStatus{State: []plan.State{plan.StateReady, plan.StateReady, plan.StateUnavailable, plan.StateUnavailable, plan.StateLoading, plan.StateUnloading}[r.IntN(6)]}
		if r.IntN(2) == 0 {
			st.LoadedSince = now.Add(-time.Duration(r.IntN(600)) * time.Second)
		}
		if r.IntN(2) == 0 {
			st.LastUsed = now.Add(-time.Duration(r.IntN(1800)) * time.Second)
		}
		if r.IntN(6) == 0 {
			st.MeasuredBytes = int64(r.IntN(20)) * gi / 4
		}
		if st.State == plan.StateReady {
			st.Digest = []string{"", dgA, dgB}[r.IntN(3)] // the catalog has dgA: dgB is stale
		}
		st.Quarantined = r.IntN(10) == 0
		if r.IntN(5) == 0 {
			st.Queued, st.Executing = r.IntN(4), r.IntN(2)
			if r.IntN(2) == 0 {
				st.WaitingSince = now.Add(-time.Duration(r.IntN(900)) * time.Second)
			}
		}
		if r.IntN(6) == 0 {
			st.BackoffUntil = now.Add(time.Duration(r.IntN(120)-60) * time.Second)
		}
		if r.IntN(8) != 0 {
			obs.Models[m.Name] = st
		}
		switch r.IntN(4) {
		case 0:
		case 1:
			d[m.Name] = float64(r.IntN(4))
		default:
			d[m.Name] = r.Float64() * 10
		}
	}
	if r.IntN(4) == 0 {
		obs.Models["foreign"] = plan.ModelStatus{State: plan.StateReady, MeasuredBytes: int64(r.IntN(4)) * gi}
	}
	if r.IntN(4) == 0 {
		obs.UnaccountedBytes = int64(r.IntN(4)) * gi / 2
	}
	slices.SortFunc(cat.Models, func(a, b plan.Model) int { return strings.Compare(a.Name, b.Name) })
	b := plan.Budget{Profile: prof, TotalBytes: int64(2+r.IntN(40)) * gi / 2, FreeIdle: r.IntN(3) == 0}
	return cat, b, obs, d, now
}

func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	within, acted := 0, 0
	for i := range 5000 {
		cat, b, obs, d, now := randomCase(r)
		acts := plan.Plan(cat, b, obs, d, now)
		if diff := cmp.Diff(acts, plan.Plan(cat, b, obs, d, now)); diff != "" {
			t.Fatalf("case %d not deterministic:\n%s", i, diff)
		}
		if plan.Accounted(cat, b, obs) <= b.TotalBytes {
			within++
			if len(acts) > 0 {
				acted++
			}
		}
		t.Run("", func(t *testing.T) { checkPlan(t, cat, b, obs, d, now, acts) })
		if t.Failed() {
			t.Fatalf("case %d: cat=%+v budget=%+v obs=%+v demand=%v", i, cat, b, obs, d)
		}
	}
	// The generator must exercise the interesting cases, not only trivial ones.
	if within < 1000 || acted < 500 {
		t.Fatalf("generator too weak: %d within budget, %d with actions", within, acted)
	}
}

func FuzzPlan(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(42), uint64(7))
	// Regressions of issue 16: a load refused while busy models (queued or executing) hold the
	// memory it needs, and a load refused because it would evict more worth than it brings.
	f.Add(uint64(9), uint64(9))
	f.Add(uint64(25), uint64(25))
	f.Add(uint64(43), uint64(43))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		cat, b, obs, d, now := randomCase(rand.New(rand.NewPCG(s1, s2)))
		checkPlan(t, cat, b, obs, d, now, plan.Plan(cat, b, obs, d, now))
	})
}

func TestApplyDoesNotModifyInput(t *testing.T) {
	obs := plan.Observed{Models: map[string]plan.ModelStatus{"a": {State: plan.StateReady}}}
	got := plan.Apply(obs, []plan.Action{{Kind: plan.ActionUnload, Model: "a"}, {Kind: plan.ActionLoad, Model: "b", At: t0}})
	want := plan.Observed{Models: map[string]plan.ModelStatus{"a": {State: plan.StateUnavailable, Reason: "unloaded"}, "b": {State: plan.StateReady, LoadedSince: t0}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if obs.Models["a"].State != plan.StateReady {
		t.Error("Apply modified its input")
	}
}

func TestProfileBytes(t *testing.T) {
	got, ok := plan.ProfileBytes("1g.10gb")
	if !ok || got != 9856<<20 {
		t.Errorf("ProfileBytes(1g.10gb) = %d, %v; want %d (go-nvml A100 mock)", got, ok, 9856<<20)
	}
	if _, ok := plan.ProfileBytes("9g.1tb"); ok {
		t.Error("unknown profile found")
	}
	if !slices.Contains(plan.Profiles(), "7g.141gb") {
		t.Error("H200 profiles missing")
	}
}

// benchCase is a 500-model catalog on an H200 7g.141gb budget: P0/P1/P2 mixed, models resident
// (long enough ago) until 90% of the budget is used, half of all models in demand.
func benchCase(n int) (plan.Catalog, plan.Budget, plan.Observed, plan.Demand) {
	r := rand.New(rand.NewPCG(7, 7))
	cat := plan.Catalog{IdleTimeout: 10 * time.Minute, MinResidency: 2 * time.Minute}
	b := plan.Budget{Profile: "7g.141gb", TotalBytes: 138880 << 20}
	obs := plan.Observed{Models: map[string]plan.ModelStatus{}}
	d := plan.Demand{}
	var used int64
	for i := range n {
		m := plan.Model{Name: fmt.Sprintf("model-%03d", i), Digest: dgA, Tier: []plan.Tier{plan.TierP0, plan.TierP1, plan.TierP1, plan.TierP2, plan.TierP2}[i%5],
			LoadTime: time.Duration(1+r.IntN(60)) * time.Second, PeakMemoryBytes: map[string]int64{b.Profile: int64(1+r.IntN(8)) * gi / 4}}
		if m.Tier == plan.TierP0 && i > 20 {
			m.Tier = plan.TierP1
		}
		cat.Models = append(cat.Models, m)
		if peak := m.PeakMemoryBytes[b.Profile]; r.IntN(3) == 0 && used+peak <= b.TotalBytes*9/10 {
			used += peak
			obs.Models[m.Name] = ready(t0.Add(-time.Hour), t0.Add(-time.Duration(r.IntN(900))*time.Second))
		}
		if r.IntN(2) == 0 {
			d[m.Name] = r.Float64() * 20
		}
	}
	return cat, b, obs, d
}

// BenchmarkPlan500 plans for a 500-model catalog whose state is within budget but far from the
// plan's fixed point (about 200 loads, evictions and idle unloads).
func BenchmarkPlan500(b *testing.B) {
	cat, bud, obs, d := benchCase(500)
	b.ReportAllocs()
	for b.Loop() {
		plan.Plan(cat, bud, obs, d, t0)
	}
}

// BenchmarkPlan500Steady plans for the same catalog at its fixed point (the common loop: no
// actions).
func BenchmarkPlan500Steady(b *testing.B) {
	cat, bud, obs, d := benchCase(500)
	obs = plan.Apply(obs, plan.Plan(cat, bud, obs, d, t0))
	b.ReportAllocs()
	for b.Loop() {
		if len(plan.Plan(cat, bud, obs, d, t0)) != 0 {
			b.Fatal("not at the fixed point")
		}
	}
}

// BenchmarkSortBaseline500 is the floor to compare BenchmarkPlan500 with: sorting the same 500
// models by value once.
func BenchmarkSortBaseline500(b *testing.B) {
	cat, bud, _, d := benchCase(500)
	ms := make([]plan.Model, len(cat.Models))
	b.ReportAllocs()
	for b.Loop() {
		copy(ms, cat.Models)
		slices.SortFunc(ms, func(x, y plan.Model) int {
			vx, vy := plan.Value(x, bud.Profile, d[x.Name], 0), plan.Value(y, bud.Profile, d[y.Name], 0)
			switch {
			case vx > vy:
				return -1
			case vx < vy:
				return 1
			}
			return strings.Compare(x.Name, y.Name)
		})
	}
}

func TestModelStatusInFlight(t *testing.T) {
	tests := []struct {
		queued, executing, want int
		busy                    bool
	}{
		{3, 1, 4, true}, {0, 2, 2, true}, {5, 0, 5, true}, {0, 0, 0, false}, {-2, 1, 1, true}, {2, -5, 2, true}, {-1, -1, 0, false},
	}
	for _, tt := range tests {
		st := plan.ModelStatus{Queued: tt.queued, Executing: tt.executing}
		if got := st.InFlight(); got != tt.want || st.Busy() != tt.busy {
			t.Errorf("queued %d executing %d: InFlight %d Busy %v, want %d %v", tt.queued, tt.executing, got, st.Busy(), tt.want, tt.busy)
		}
	}
}
