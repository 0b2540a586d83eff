package decision

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The tests in this file pin the comparisons of Recommend at their exact
// boundary values: each case puts one input exactly on a boundary (a sample
// exactly staleAfter old, a point exactly one window old, a tie between two
// loads, a zero in a clause printed for values ≥ 0) and checks the result that
// the documented semantics give there, derived by hand in its comment.

// TestBoundaryDecision checks one decision from a fresh State.
func TestBoundaryDecision(t *testing.T) {
	type decided struct {
		Replicas, Raw int32
		Term, Limit   Term
		NSLO, NCap    int32
		Load          float64
		Saturated     bool
		Queue         SignalStatus
	}
	rateRunning := func(rate, running float64) Observation {
		var o Observation
		o.Samples[SignalRate], o.Samples[SignalRunning] = val(rate, t0), val(running, t0)
		return o
	}
	seeded := func(current, ready int32) Observation {
		o := obsQueue(0, t0)
		o.CurrentReplicas, o.CurrentKnown = current, true
		o.ReadyReplicas, o.ReadyKnown = ready, true
		return o
	}
	tests := []struct {
		name string
		p    Policy
		obs  Observation
		now  time.Time
		want decided
	}{
		{
			// The seed is the larger of spec.replicas and the ready replicas
			// (docs/scaler.md, "Restarts"): spec 6 with 3 ready seeds 6, and the seed
			// holds the answer through the first down-window (raw ⌈Q⌉ = 0).
			name: "seed: spec.replicas 6 above ready 3 seeds 6",
			p:    queuePolicy(),
			obs:  seeded(6, 3),
			now:  t0,
			want: decided{Replicas: 6, Raw: 0, Term: TermDrain, Limit: TermSeed, NSLO: -1, NCap: -1, Load: -1, Queue: StatusFresh},
		},
		{
			// The other order: ready 6 above spec.replicas 3 seeds 6 (r > seed picks r).
			name: "seed: ready 6 above spec.replicas 3 seeds 6",
			p:    queuePolicy(),
			obs:  seeded(3, 6),
			now:  t0,
			want: decided{Replicas: 6, Raw: 0, Term: TermDrain, Limit: TermSeed, NSLO: -1, NCap: -1, Load: -1, Queue: StatusFresh},
		},
		{
			// targetUtilization ρ is in (0, 1]: ρ = 1 is a cap, so N_cap = ⌈a/(k·ρ)⌉ =
			// ⌈7/1⌉ = 7 is computed (not -1) beside N_slo(a = 7) = 9 (TestRecommendFormulas).
			name: "targetUtilization exactly 1 is a cap: N_cap = ⌈7/1⌉ = 7",
			p: func() Policy {
				p := DefaultPolicy()
				p.RateQuery, p.ReplicaThroughput, p.TargetUtilization = "r", 1, 1
				return p
			}(),
			obs:  rateRunning(7, 0),
			now:  t0,
			want: decided{Replicas: 9, Raw: 9, Term: TermSLO, NSLO: 9, NCap: 7, Load: 7, Queue: StatusUnconfigured},
		},
		{
			// A usable running count of 0 is an offered load of 0 Erlangs (a = max(λ_H·S,
			// running), no rate configured here): N_slo = 0 is a demand term, so the
			// answer is 0 replicas, not ErrNoData. The load is the running requests'.
			name: "running exactly 0 is a load of 0 Erlangs: N_slo = 0",
			p: func() Policy {
				p := DefaultPolicy()
				p.RunningQuery, p.ReplicaThroughput = "run", 1
				return p
			}(),
			obs: func() Observation {
				var o Observation
				o.Samples[SignalRunning] = val(0, t0)
				return o
			}(),
			now:  t0,
			want: decided{Replicas: 0, Raw: 0, Term: TermSLORunning, NSLO: 0, NCap: -1, Load: 0, Queue: StatusUnconfigured},
		},
		{
			// λ_H·S = 7·1 = 7 Erlangs and 7 running: a tie. The load is the rate's own;
			// the running requests name the term (slo-running) only when they raise
			// the load above λ_H·S (as take keeps the earlier term at a tie).
			name: "running equal to λ_H·S: the term stays slo",
			p: func() Policy {
				p := DefaultPolicy()
				p.RateQuery, p.RunningQuery, p.ReplicaThroughput = "r", "run", 1
				return p
			}(),
			obs:  rateRunning(7, 7),
			now:  t0,
			want: decided{Replicas: 9, Raw: 9, Term: TermSLO, NSLO: 9, NCap: -1, Load: 7, Queue: StatusUnconfigured},
		},
		{
			// A sample exactly staleAfter (60 s) old is still fresh ("a valid sample
			// within staleAfter", as a last good value exactly staleAfter old is still
			// held): queue 5 sizes N_drain = ⌈5⌉ = 5.
			name: "a sample exactly staleAfter old is fresh",
			p:    queuePolicy(),
			obs:  obsQueue(5, t0),
			now:  t0.Add(60 * time.Second),
			want: decided{Replicas: 5, Raw: 5, Term: TermDrain, NSLO: -1, NCap: -1, Load: -1, Queue: StatusFresh},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := Recommend(tt.p, tt.obs, State{}, tt.now)
			if rec.Err != nil {
				t.Fatalf("Recommend: %v", rec.Err)
			}
			got := decided{rec.Replicas, rec.Raw, rec.Term, rec.Limit, rec.NSLO, rec.NCap, rec.Load, rec.Saturated, rec.Status[SignalQueue]}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s\nreason: %s", diff, rec.Reason)
			}
		})
	}
}

// TestBoundaryShaping runs short scenarios through the windows, the burst, the
// step-down bound and the saturation guard. queuePolicy makes raw = ⌈Q⌉; with
// no ready or current replica count (and in most cases scaleDownWindow 0) no
// seed takes part.
func TestBoundaryShaping(t *testing.T) {
	type tick struct {
		at       time.Duration
		obs      Observation
		edit     func(p *Policy) // policy changes from this tick on (a ScaledObject edited); nil: none
		replicas int32
		limit    Term
	}
	q := func(at time.Duration, queue float64) Observation { return obsQueue(queue, t0.Add(at)) }
	qr := func(at time.Duration, queue float64, ready int32) Observation {
		o := obsQueue(queue, t0.Add(at))
		o.ReadyReplicas, o.ReadyKnown = ready, true
		return o
	}
	qa := func(at time.Duration, queue float64, ready int32, activity float64) Observation {
		o := qr(at, queue, ready)
		o.Samples[SignalActivity] = val(activity, t0.Add(at))
		return o
	}
	s := time.Second
	tests := []struct {
		name    string
		policy  func(p *Policy)
		ticks   []tick
		history []Point // the final State.History; nil: not checked
	}{
		{
			// The down-window is the last scaleDownWindow, (now − 30 s, now]: 29 s after
			// the raw 8 it still holds the answer at 8 (down-window)...
			name:   "down-window: a raw value 29 s old counts in a 30 s window",
			policy: func(p *Policy) { p.ScaleDownWindow, p.ScaleDownPeriod, p.ScaleDownMaxFraction = 30*s, 60*s, 1 },
			ticks:  []tick{{0, q(0, 8), nil, 8, ""}, {29 * s, q(29*s, 2), nil, 8, TermDownWindow}},
		},
		{
			// ...and exactly 30 s after it the 8 has left the window: the answer falls to
			// the raw 2. The 60 s step-down period keeps the point in the history, so only
			// the window's own boundary excludes it; fraction 1: the step is not bounded.
			name:   "down-window: a raw value exactly 30 s old has left a 30 s window",
			policy: func(p *Policy) { p.ScaleDownWindow, p.ScaleDownPeriod, p.ScaleDownMaxFraction = 30*s, 60*s, 1 },
			ticks:  []tick{{0, q(0, 8), nil, 8, ""}, {30 * s, q(30*s, 2), nil, 2, ""}},
		},
		{
			// A burst needs N_raw > cur. Ready 2, burstFactor 2: the first raw 4 ≥ 2·2
			// bursts past the seed 2; raw 2 is held at 4 by the 60 s down-window; raw 4
			// again equals cur 4, so it is no burst (though 4 ≥ 2·2 and the 30 s
			// up-window's minimum is 2): cur stays, and it is the raw value itself,
			// straight from the formula, so no limit (not "burst").
			name:   "burst: raw equal to cur is no burst",
			policy: func(p *Policy) { p.ScaleUpWindow, p.ScaleDownWindow, p.ScaleDownMaxFraction = 30*s, 60*s, 1 },
			ticks: []tick{
				{0, qr(0, 4, 2), nil, 4, ""},
				{10 * s, qr(10*s, 2, 2), nil, 4, TermDownWindow},
				{20 * s, qr(20*s, 4, 2), nil, 4, ""},
			},
		},
		{
			// Step-down bound, fraction 0.5: from 8 the answer may fall by ⌊0.5·8⌋ = 4 per
			// minute, to 4. Raw 4 is exactly that floor: the bound does not shape the
			// answer, which is raw 4 straight from the formula (no limit).
			name:   "step-down: a fall of exactly the allowed step is not bounded",
			policy: func(p *Policy) { p.ScaleDownWindow = 0 },
			ticks:  []tick{{0, q(0, 8), nil, 8, ""}, {10 * s, q(10*s, 4), nil, 4, ""}},
		},
		{
			// One more replica down (raw 3) is past the floor 4: held at 4 (step-down).
			name:   "step-down: a fall past the allowed step is bounded",
			policy: func(p *Policy) { p.ScaleDownWindow = 0 },
			ticks:  []tick{{0, q(0, 8), nil, 8, ""}, {10 * s, q(10*s, 3), nil, 4, TermStepDown}},
		},
		{
			// The bound limits steps down; it never raises an answer that holds. With
			// fraction 1 the pool falls 10 → 2 at once; then the ScaledObject is edited to
			// fraction 0.5. The highest answer in the last minute is still 10 (floor
			// 10 − 5 = 5), but raw 2 = cur 2 is no step down: the answer stays 2.
			name:   "step-down: a held answer below the floor is not raised",
			policy: func(p *Policy) { p.ScaleDownWindow, p.ScaleDownMaxFraction = 0, 1 },
			ticks: []tick{
				{0, q(0, 10), nil, 10, ""},
				{10 * s, q(10*s, 2), nil, 2, ""},
				{20 * s, q(20*s, 2), func(p *Policy) { p.ScaleDownMaxFraction = 0.5 }, 2, ""},
			},
		},
		{
			// Saturated (activity 1.0 at ceiling 1, 4 ready) with raw 4 = cur 4: the
			// guard forbids a scale-down, and there is none to forbid, so it does not
			// name the answer (no limit).
			name:   "saturation guard: nothing to hold when the answer does not fall",
			policy: func(p *Policy) { p.ActivityQuery, p.ScaleDownWindow = "a", 0 },
			ticks:  []tick{{0, qa(0, 4, 4, 1.0), nil, 4, ""}},
		},
		{
			// With no ready replica no engine is saturated, whatever a lingering
			// activity series reads: 4 → 0 with activity 1.0 at R = 0 scales down
			// (fraction 1: unbounded), not held by the saturation guard.
			name: "saturation guard: no replica ready, no saturation",
			policy: func(p *Policy) {
				p.ActivityQuery, p.ScaleDownWindow, p.ScaleDownMaxFraction = "a", 0, 1
			},
			ticks: []tick{{0, qa(0, 4, 4, 0.5), nil, 4, ""}, {10 * s, qa(10*s, 0, 0, 1.0), nil, 0, ""}},
		},
		{
			// maxReplicas lowered from 100 to 2 (the ScaledObject edited) under a step-down
			// floor of 10 − ⌊0.5·10⌋ = 5: the bound sets the answer, 2, and the limit
			// names it, max, not the step-down it overrode.
			name:   "max: a lowered maxReplicas below the step-down floor is the limit",
			policy: func(p *Policy) { p.ScaleDownWindow = 0 },
			ticks: []tick{
				{0, q(0, 10), nil, 10, ""},
				{10 * s, q(10*s, 10), func(p *Policy) { p.MaxReplicas = 2 }, 2, TermMax},
			},
		},
		{
			// minReplicas raised from 0 to 6 (the ScaledObject edited) while the 30 s
			// up-window still holds the answer at its minimum raw, 2: the bound raises
			// the answer to 6, and the limit names it, min, not the up-window it overrode.
			name:   "min: a raised minReplicas above the up-window's hold is the limit",
			policy: func(p *Policy) { p.ScaleUpWindow, p.ScaleDownWindow = 30*s, 0 },
			ticks: []tick{
				{0, q(0, 2), nil, 2, ""},
				{10 * s, q(10*s, 3), nil, 2, TermUpWindow},
				{20 * s, q(20*s, 3), func(p *Policy) { p.MinReplicas = 6 }, 6, TermMin},
			},
		},
		{
			// History is pruned to the longest window, here 60 s (down-window and
			// step-down period), with the windows' own bound: a point exactly 60 s old
			// is in none of them, so it is dropped. 5 → 3 is within the step
			// (⌊0.5·5⌋ = 2), and the history is the new point alone.
			name:    "history: a point exactly the longest window old is pruned",
			policy:  func(p *Policy) { p.ScaleDownWindow = 60 * s },
			ticks:   []tick{{0, q(0, 5), nil, 5, ""}, {60 * s, q(60*s, 3), nil, 3, ""}},
			history: []Point{{AtUnixNano: t0.Add(60 * s).UnixNano(), Raw: 3, Result: 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := queuePolicy()
			tt.policy(&p)
			var st State
			for _, k := range tt.ticks {
				if k.edit != nil {
					k.edit(&p)
				}
				var rec Recommendation
				rec, st = Recommend(p, k.obs, st, t0.Add(k.at))
				if rec.Err != nil {
					t.Fatalf("t0+%v: %v", k.at, rec.Err)
				}
				if rec.Replicas != k.replicas || rec.Limit != k.limit {
					t.Fatalf("t0+%v: replicas %d limit %q, want %d %q (%s)", k.at, rec.Replicas, rec.Limit, k.replicas, k.limit, rec.Reason)
				}
			}
			if tt.history != nil {
				if diff := cmp.Diff(tt.history, st.History); diff != "" {
					t.Errorf("history (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestBoundarySeedWindowEnd: the seed is the first replica count known within
// the first down-window after first sight, [t0, t0 + scaleDownWindow). First
// seen at t0 with no replica count (no data: no answer), spec.replicas 5 is
// first known Δ later, with the queue at 0.
func TestBoundarySeedWindowEnd(t *testing.T) {
	p := queuePolicy() // scaleDownWindow 5 min
	tests := []struct {
		name         string
		delta        time.Duration
		wantReplicas int32
		wantLimit    Term
		wantActive   bool
		wantSeeded   bool
	}{
		// 1 ns before the window ends: seeded with 5, held at 5 (seed), active
		// (first down-window after first sight).
		{"within the first down-window: seeded", 5*time.Minute - 1, 5, TermSeed, true, true},
		// Exactly at its end the first down-window is over: no seed, the raw 0
		// answers, inactive.
		{"exactly at the end of the first down-window: no seed", 5 * time.Minute, 0, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, st := Recommend(p, Observation{}, State{}, t0)
			if !errors.Is(first.Err, ErrNoData) {
				t.Fatalf("t0: err %v, want ErrNoData", first.Err)
			}
			now := t0.Add(tt.delta)
			o := obsQueue(0, now)
			o.CurrentReplicas, o.CurrentKnown = 5, true
			rec, st := Recommend(p, o, st, now)
			if rec.Err != nil {
				t.Fatal(rec.Err)
			}
			if rec.Replicas != tt.wantReplicas || rec.Limit != tt.wantLimit || rec.Active != tt.wantActive || st.Seeded != tt.wantSeeded {
				t.Errorf("replicas %d limit %q active %v seeded %v, want %d %q %v %v (%s)",
					rec.Replicas, rec.Limit, rec.Active, st.Seeded, tt.wantReplicas, tt.wantLimit, tt.wantActive, tt.wantSeeded, rec.Reason)
			}
		})
	}
}

// TestBoundaryReasonZeroClauses: the reason prints the predicted P(wait > T),
// the load, λ_H and R whenever they were computed (≥ 0), zero included. Rate 0
// with μ = 1 (S = 1 s, k = 1), 0 ready replicas: λ_H = 0 (one point), a = 0
// Erlangs, N_slo = 0 (no load needs no replica), P(wait > 2 s) at 0 replicas
// = 0 (no load). The seed 0 is known, so the first down-window does not make
// the pool active.
func TestBoundaryReasonZeroClauses(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.ReplicaThroughput = "r", 1
	var o Observation
	o.Samples[SignalRate] = val(0, t0)
	o.ReadyReplicas, o.ReadyKnown = 0, true
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.Err != nil {
		t.Fatal(rec.Err)
	}
	const want = "replicas 0; raw 0 = clamp(demand 0 [slo] + warm 0, 0, 100); " +
		"predicted P(wait > 2s) = 0 at 0 replicas (target ≤ 0.01); " +
		"terms slo=0 drain=-1 cap=-1 occupancy=-1 activity=-1; " +
		"load 0 Erlangs, λ_H=0/s over H=1m0s (default), S=1s (replicaThroughput), k=1, I=1; " +
		"rate=0 fresh, R=0; inactive"
	if rec.Reason != want {
		t.Errorf("reason\n got %s\nwant %s", rec.Reason, want)
	}
	if rec.PWait != 0 || rec.Load != 0 || rec.LambdaH != 0 || rec.Ready != 0 {
		t.Errorf("PWait %v load %v λ_H %v R %d, want all 0", rec.PWait, rec.Load, rec.LambdaH, rec.Ready)
	}
}

// TestBoundaryAmplificationZero: rate ÷ unique rate is printed whenever it was
// computed (≥ 0). The smallest positive rate, 5e-324/s, over a unique rate of
// 4/s is 1.2e-324, which rounds to 0 in float64: a computed amplification of 0
// (not -1, "not computed"), within retryBudget (no cap), and the reason says so.
func TestBoundaryAmplificationZero(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.UniqueRateQuery, p.ReplicaThroughput = "r", "u", 1
	var o Observation
	o.Samples[SignalRate], o.Samples[SignalUniqueRate] = val(math.SmallestNonzeroFloat64, t0), val(4, t0)
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.Err != nil {
		t.Fatal(rec.Err)
	}
	if rec.Amplification != 0 || rec.RetryCapped {
		t.Errorf("amplification %v capped %v, want 0, not capped", rec.Amplification, rec.RetryCapped)
	}
	const want = "uniqueRate=4 fresh; amplification 0; active: "
	if !strings.Contains(rec.Reason, want) {
		t.Errorf("reason %q does not contain %q", rec.Reason, want)
	}
}

// TestBoundaryNoDataReason: the no-data reason names signals out past
// staleAfter only when there are some, and calls a never-measured signal's
// value stale only when it is older than staleAfter (queuePolicy: 60 s).
func TestBoundaryNoDataReason(t *testing.T) {
	p := queuePolicy()
	nan := func(at time.Time) Observation {
		var o Observation
		o.Samples[SignalQueue] = Sample{Value: math.NaN(), EvaluatedAt: at}
		return o
	}
	tests := []struct {
		name string
		obs  Observation
		now  time.Time
		want string
	}{
		// Never polled: nothing is out, so no "out past staleAfter" clause.
		{"no sample at all: no out clause", Observation{}, t0, "no usable signal: queue never"},
		// A NaN read exactly staleAfter ago is refused as NaN, not as stale: no note.
		{"NaN exactly staleAfter old: not called stale", nan(t0), t0.Add(60 * time.Second), "no usable signal: queue never"},
		// One second older it is past staleAfter, and the note says so.
		{"NaN 61 s old: called stale", nan(t0), t0.Add(61 * time.Second),
			"no usable signal: queue never; queue stale: its last value was read 1m1s ago, past staleAfter 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := Recommend(p, tt.obs, State{}, tt.now)
			if !errors.Is(rec.Err, ErrNoData) {
				t.Fatalf("err %v, want ErrNoData", rec.Err)
			}
			if rec.Reason != tt.want {
				t.Errorf("reason\n got %q\nwant %q", rec.Reason, tt.want)
			}
		})
	}
}

// TestBoundaryRateHistoryEdge: the rate history keeps the fresh samples of the
// last forecastWindow(H) = max(2H, 2 min) = 2 min (H = 60 s), (now − 2 min,
// now], as its pruning does: a fresh sample (staleAfter 2 min) evaluated
// exactly 2 min ago is not added; 1 ns later it is.
func TestBoundaryRateHistoryEdge(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.ReplicaThroughput, p.StaleAfter = "r", 1, 2*time.Minute
	now := t0.Add(time.Hour)
	tests := []struct {
		name string
		age  time.Duration
		want []RatePoint
	}{
		{"exactly the window old: not added", 2 * time.Minute, []RatePoint{}},
		{"1 ns younger: added", 2*time.Minute - 1, []RatePoint{{AtUnixNano: now.Add(-2*time.Minute + 1).UnixNano(), Rate: 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o Observation
			o.Samples[SignalRate] = val(7, now.Add(-tt.age))
			rec, st := Recommend(p, o, State{}, now)
			if rec.Err != nil || rec.Status[SignalRate] != StatusFresh || rec.LambdaH != 7 {
				t.Fatalf("err %v status %s λ_H %v, want a fresh rate 7 (%s)", rec.Err, rec.Status[SignalRate], rec.LambdaH, rec.Reason)
			}
			if diff := cmp.Diff(tt.want, st.Rates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("rate history (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSignalStringOutOfRange: a Signal outside [0, NumSignals) names its number
// instead of indexing past the names.
func TestSignalStringOutOfRange(t *testing.T) {
	for _, tt := range []struct {
		s    Signal
		want string
	}{
		{-1, "signal(-1)"}, {SignalQueue, "queue"}, {NumSignals - 1, "uniqueRate"}, {NumSignals, fmt.Sprintf("signal(%d)", int(NumSignals))},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Signal(%d).String() = %q, want %q", int(tt.s), got, tt.want)
		}
	}
}
