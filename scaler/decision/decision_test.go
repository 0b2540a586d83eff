package decision

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// queuePolicy makes N_raw equal the queue value: μ = ρ = 1, D = 1 s, no
// rate signal, so N_drain = ⌈Q⌉. Windows are the scenario's parameters.
func queuePolicy() Policy {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://prometheus:9090"
	p.QueueQuery = "sum(queue)"
	p.ReplicaThroughput, p.TargetUtilization, p.DrainSeconds = 1, 1, 1
	return p
}

func val(v float64, at time.Time) Sample { return Sample{Value: v, EvaluatedAt: at} }

func obsQueue(q float64, at time.Time) Observation {
	var o Observation
	o.Samples[SignalQueue] = val(q, at)
	return o
}

func TestRecommendFormulas(t *testing.T) {
	type want struct {
		Replicas, Raw, NSLO, NDrain, NCap, NOcc, NAct, Warm int32
		Term, Limit                                         Term
	}
	base := DefaultPolicy()
	base.PrometheusAddress = "http://p:9090"
	with := func(f func(*Policy)) Policy { p := base; f(&p); return p }
	obs := func(f func(*Observation)) Observation {
		var o Observation
		f(&o)
		return o
	}
	// Expected N_slo and P(wait > T) were computed independently with
	// 50-digit arithmetic from the Erlang C sum formula
	// C = (aᶜ/c!·c/(c−a)) / (Σ_{n<c} aⁿ/n! + aᶜ/c!·c/(c−a)).
	tests := []struct {
		name  string
		p     Policy
		obs   Observation
		want  want
		pwait float64 // predicted P(wait > T) at Replicas; -1 not computed
	}{
		{
			name:  "N_slo, M/M/c: a = 7 Erlangs (λ 7/s, S = 1/μ = 1 s), T 2 s: 9 servers (P 0.00705; 8 give 0.0860)",
			p:     with(func(p *Policy) { p.RateQuery, p.ReplicaThroughput = "r", 1 }),
			obs:   obs(func(o *Observation) { o.Samples[SignalRate] = val(7, t0) }),
			want:  want{Replicas: 9, Raw: 9, NSLO: 9, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLO},
			pwait: 0.0070505519678429,
		},
		{
			name: "pooled slots: λ 30/s, S 0.5 s measured, k 4: 5 replicas = 20 servers (16 give 0.0134)",
			p:    with(func(p *Policy) { p.RateQuery, p.ServiceTimeQuery, p.ReplicaConcurrency = "r", "s", 4 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalServiceTime] = val(30, t0), val(0.5, t0)
			}),
			want:  want{Replicas: 5, Raw: 5, NSLO: 5, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLO},
			pwait: 3.3066961301999e-10,
		},
		{
			name: "bursty arrivals, I = 3 (β = 2): a = 7 needs 11 servers, not 9",
			p:    with(func(p *Policy) { p.RateQuery, p.DispersionQuery, p.ReplicaThroughput = "r", "i", 1 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalDispersion] = val(7, t0), val(3, t0)
			}),
			want:  want{Replicas: 11, Raw: 11, NSLO: 11, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLO},
			pwait: 0.0022181749211608,
		},
		{
			name: "running requests are offered load: 10 running at λ 2/s, S 1 s: 12 servers, term slo-running",
			p:    with(func(p *Policy) { p.RateQuery, p.RunningQuery, p.ReplicaThroughput = "r", "run", 1 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalRunning] = val(2, t0), val(10, t0)
			}),
			want:  want{Replicas: 12, Raw: 12, NSLO: 12, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLORunning},
			pwait: 0.0082308324370966,
		},
		{
			name: "N_drain = ⌈(12·0.2 + 90·0.2/30)/1⌉ = 3 beside N_slo(a = 2.4, S = 0.2) = 3; then warm",
			p: with(func(p *Policy) {
				p.RateQuery, p.QueueQuery, p.ReplicaThroughput, p.DrainSeconds, p.WarmReplicas = "r", "q", 5, 30, 1
			}),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalQueue] = val(12, t0), val(90, t0)
			}),
			want:  want{Replicas: 4, Raw: 4, NSLO: 3, NDrain: 3, NCap: -1, NOcc: -1, NAct: -1, Warm: 1, Term: TermSLO},
			pwait: -2, // checked by the ordering only: 4 servers beat 3's 0.0016
		},
		{
			name: "N_drain wins with a backlog: ⌈(7·1 + 90·1/10)/1⌉ = 16",
			p:    with(func(p *Policy) { p.RateQuery, p.QueueQuery, p.ReplicaThroughput, p.DrainSeconds = "r", "q", 1, 10 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalQueue] = val(7, t0), val(90, t0)
			}),
			want:  want{Replicas: 16, Raw: 16, NSLO: 9, NDrain: 16, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermDrain},
			pwait: -2,
		},
		{
			name: "a growing backlog: Q_H = 30 + (7 − 3·1/1)·60 = 270 when replicas ordered now are ready; ⌈(7 + 270/10)/1⌉ = 34",
			p:    with(func(p *Policy) { p.RateQuery, p.QueueQuery, p.ReplicaThroughput, p.DrainSeconds = "r", "q", 1, 10 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalQueue] = val(7, t0), val(30, t0)
				o.ReadyReplicas, o.ReadyKnown = 3, true
			}),
			want:  want{Replicas: 34, Raw: 34, NSLO: 9, NDrain: 34, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermDrain},
			pwait: -2,
		},
		{
			name: "a growing backlog with k = 2, S = 0.5 s, ρ 0.8: Q_H = 40 + (20 − 3·2/0.5)·60 = 520; ⌈(20·0.5 + 520·0.5/10)/(2·0.8)⌉ = ⌈22.5⌉ = 23",
			p: with(func(p *Policy) {
				p.RateQuery, p.QueueQuery, p.ServiceTimeQuery = "r", "q", "s"
				p.ReplicaConcurrency, p.TargetUtilization, p.DrainSeconds = 2, 0.8, 10
			}),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalQueue], o.Samples[SignalServiceTime] = val(20, t0), val(40, t0), val(0.5, t0)
				o.ReadyReplicas, o.ReadyKnown = 3, true
			}),
			// N_slo: a = 10 Erlangs needs 6 replicas, 12 servers (P 1.5e-4; 5 replicas are 10 servers, no headroom); N_cap ⌈10/1.6⌉ = 7.
			want:  want{Replicas: 23, Raw: 23, NSLO: 6, NDrain: 23, NCap: 7, NOcc: -1, NAct: -1, Warm: 0, Term: TermDrain},
			pwait: -2,
		},
		{
			name:  "targetUtilization caps the offered load: ⌈7/(1·0.5)⌉ = 14 over N_slo 9",
			p:     with(func(p *Policy) { p.RateQuery, p.ReplicaThroughput, p.TargetUtilization = "r", 1, 0.5 }),
			obs:   obs(func(o *Observation) { o.Samples[SignalRate] = val(7, t0) }),
			want:  want{Replicas: 14, Raw: 14, NSLO: 9, NDrain: -1, NCap: 14, NOcc: -1, NAct: -1, Warm: 0, Term: TermCap},
			pwait: -2,
		},
		{
			name: "no service time at all: occupancy ⌈(5 running + 3 waiting)/2⌉ = 4",
			p:    with(func(p *Policy) { p.QueueQuery, p.RunningQuery, p.ReplicaConcurrency = "q", "run", 2 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalQueue], o.Samples[SignalRunning] = val(3, t0), val(5, t0)
			}),
			want:  want{Replicas: 4, Raw: 4, NSLO: -1, NDrain: -1, NCap: -1, NOcc: 4, NAct: -1, Warm: 0, Term: TermOccupancy},
			pwait: -1,
		},
		{
			name: "activity as the only signal sizes: ⌈4 · (0.30/0.33) / 0.7⌉ = ⌈5.19⌉",
			p:    with(func(p *Policy) { p.ActivityQuery, p.ActivityCeiling = "a", 0.33 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalActivity] = val(0.30, t0)
				o.ReadyReplicas, o.ReadyKnown = 4, true
			}),
			want:  want{Replicas: 6, Raw: 6, NSLO: -1, NDrain: -1, NCap: -1, NOcc: -1, NAct: 6, Warm: 0, Term: TermActivity},
			pwait: -1,
		},
		{
			name: "activity beside a load term does not size: N_slo 9 wins, N_act not computed",
			p:    with(func(p *Policy) { p.RateQuery, p.ActivityQuery, p.ReplicaThroughput = "r", "a", 1 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate], o.Samples[SignalActivity] = val(7, t0), val(0.9, t0)
				o.ReadyReplicas, o.ReadyKnown = 30, true
			}),
			want:  want{Replicas: 30, Raw: 9, NSLO: 9, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLO, Limit: TermSeed},
			pwait: -2,
		},
		{
			name:  "clamped to max: N_slo reads max + 1",
			p:     with(func(p *Policy) { p.RateQuery, p.ReplicaThroughput, p.MaxReplicas = "r", 1, 12 }),
			obs:   obs(func(o *Observation) { o.Samples[SignalRate] = val(1e6, t0) }),
			want:  want{Replicas: 12, Raw: 12, NSLO: 13, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLO, Limit: TermMax},
			pwait: 1,
		},
		{
			name: "bounds from Kubernetes override metadata",
			p:    with(func(p *Policy) { p.RateQuery, p.ReplicaThroughput, p.MinReplicas = "r", 1, 0 }),
			obs: obs(func(o *Observation) {
				o.Samples[SignalRate] = val(0, t0)
				o.MinReplicas, o.MaxReplicas, o.BoundsKnown = 3, 9, true
			}),
			want:  want{Replicas: 3, Raw: 3, NSLO: 0, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: 0, Term: TermSLO, Limit: TermMin},
			pwait: 0,
		},
		{
			name: "triton preset at zero replicas: empty per-pod series read as zero, warm pool answers",
			p: with(func(p *Policy) {
				p.Engine, p.Model, p.ReplicaThroughput, p.WarmReplicas = EngineTriton, "m", 10, 1
			}),
			obs: obs(func(o *Observation) {
				for _, s := range []Signal{SignalQueue, SignalRate, SignalActivity} {
					o.Samples[s] = Sample{Empty: true, EvaluatedAt: t0}
				}
				o.ReadyKnown = true
			}),
			want:  want{Replicas: 1, Raw: 1, NSLO: 0, NDrain: 0, NCap: -1, NOcc: -1, NAct: -1, Warm: 1, Term: TermWarm},
			pwait: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _ := Recommend(tt.p, tt.obs, State{}, t0)
			if rec.Err != nil {
				t.Fatalf("Recommend: %v", rec.Err)
			}
			got := want{rec.Replicas, rec.Raw, rec.NSLO, rec.NDrain, rec.NCap, rec.NOcc, rec.NAct, rec.Warm, rec.Term, rec.Limit}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("recommendation (-want +got):\n%s\nreason: %s", diff, rec.Reason)
			}
			if tt.pwait != -2 && math.Abs(rec.PWait-tt.pwait) > 1e-9*math.Max(1e-3, tt.pwait) {
				t.Errorf("PWait = %.15g, want %.15g (%s)", rec.PWait, tt.pwait, rec.Reason)
			}
		})
	}
}

func TestCeilEps(t *testing.T) {
	tests := []struct {
		give float64
		want float64
	}{
		{7 / (1 * 0.7), 10}, {10.0000001, 11}, {1e6 + 1e-4, 1e6}, {1e6 + 1e-2, 1e6 + 1}, {0, 0}, {0.3 / 0.1, 3}, {2.0000000001, 2}, {1e-12, 0}, {3.2, 4},
	}
	for _, tt := range tests {
		if got := ceilEps(tt.give); got != tt.want {
			t.Errorf("ceilEps(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

// step is one instant of a scenario: the observation at t0+at and the answer expected.
type step struct {
	at   time.Duration
	obs  Observation
	want int32
}

func runScenario(t *testing.T, p Policy, st State, steps []step) State {
	t.Helper()
	for _, s := range steps {
		rec, next := Recommend(p, s.obs, st, t0.Add(s.at))
		st = next
		if rec.Err != nil {
			t.Fatalf("t0+%v: %v", s.at, rec.Err)
		}
		if rec.Replicas != s.want {
			t.Fatalf("t0+%v: replicas %d, want %d (%s)", s.at, rec.Replicas, s.want, rec.Reason)
		}
	}
	return st
}

func TestDownWindowHoldsUntil300sAfterLastPeak(t *testing.T) {
	raws := []float64{2, 8, 8, 8}
	// 10 s per evaluation; the last 8 is at t0+30s.
	build := func(p Policy, tail map[time.Duration]int32) []step {
		var steps []step
		want := []int32{2, 8, 8, 8}
		for i, r := range raws {
			at := time.Duration(i) * 10 * time.Second
			steps = append(steps, step{at, obsQueue(r, t0.Add(at)), want[i]})
		}
		for at := 40 * time.Second; at <= 420*time.Second; at += 10 * time.Second {
			steps = append(steps, step{at, obsQueue(3, t0.Add(at)), tail[at]})
		}
		return steps
	}
	t.Run("unbounded step", func(t *testing.T) {
		p := queuePolicy()
		p.ScaleDownWindow, p.ScaleDownMaxFraction = 300*time.Second, 1
		tail := map[time.Duration]int32{}
		for at := 40 * time.Second; at <= 420*time.Second; at += 10 * time.Second {
			tail[at] = 8
			if at >= 330*time.Second { // 300 s after the last 8
				tail[at] = 3
			}
		}
		runScenario(t, p, State{}, build(p, tail))
	})
	t.Run("default step-down: at most half per minute", func(t *testing.T) {
		p := queuePolicy()
		p.ScaleDownWindow = 300 * time.Second
		tail := map[time.Duration]int32{}
		for at := 40 * time.Second; at <= 420*time.Second; at += 10 * time.Second {
			switch {
			case at < 330*time.Second:
				tail[at] = 8
			case at < 380*time.Second: // 8 → 4 at +330 s; 4 → 3 once the last 8 (t0+320s) is a minute old
				tail[at] = 4
			default:
				tail[at] = 3
			}
		}
		runScenario(t, p, State{}, build(p, tail))
	})
}

func TestUpWindow(t *testing.T) {
	p := queuePolicy()
	p.ScaleUpWindow, p.ScaleDownWindow = 30*time.Second, 300*time.Second
	withReady := func(o Observation, r int32) Observation { o.ReadyReplicas, o.ReadyKnown = r, true; return o }

	t.Run("alternating 2, 8 stays at 2", func(t *testing.T) {
		p := p
		p.BurstFactor = 5 // 8 < 5 × 2: no burst
		var steps []step
		for i := 0; i < 30; i++ {
			at := time.Duration(i) * 10 * time.Second
			q := 2.0
			if i%2 == 1 {
				q = 8
			}
			steps = append(steps, step{at, withReady(obsQueue(q, t0.Add(at)), 2), 2})
		}
		runScenario(t, p, State{}, steps)
	})
	t.Run("burst above burstFactor × ready goes up at once", func(t *testing.T) {
		runScenario(t, p, State{}, []step{
			{0, withReady(obsQueue(2, t0), 2), 2},
			{10 * time.Second, withReady(obsQueue(4, t0.Add(10*time.Second)), 2), 4}, // 4 ≥ 2 × 2
		})
	})
	t.Run("below burst the up-window waits 30 s", func(t *testing.T) {
		runScenario(t, p, State{}, []step{
			{0, withReady(obsQueue(2, t0), 2), 2},
			{10 * time.Second, withReady(obsQueue(3, t0.Add(10*time.Second)), 2), 2},
			{20 * time.Second, withReady(obsQueue(3, t0.Add(20*time.Second)), 2), 2},
			{30 * time.Second, withReady(obsQueue(3, t0.Add(30*time.Second)), 2), 3}, // the 2 at t0 left the window
		})
	})
}

func TestMissingData(t *testing.T) {
	p := queuePolicy()
	p.RateQuery = "sum(rate(x[1m]))"
	p.ReplicaThroughput = 1
	p.DrainSeconds = 1
	p.StaleAfter = 60 * time.Second
	p.ScaleDownMaxFraction = 1
	p.ScaleDownWindow = 0 // so that only the degraded floor can hold the answer

	both := func(q, r Sample) Observation {
		var o Observation
		o.Samples[SignalQueue], o.Samples[SignalRate] = q, r
		o.ReadyReplicas, o.ReadyKnown = 3, true
		return o
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	bad := []struct {
		name string
		give Sample
	}{
		{"NaN", Sample{Value: math.NaN(), EvaluatedAt: at(10 * time.Second)}},
		{"+Inf", Sample{Value: math.Inf(1), EvaluatedAt: at(10 * time.Second)}},
		{"-Inf", Sample{Value: math.Inf(-1), EvaluatedAt: at(10 * time.Second)}},
		{"negative", Sample{Value: -4, EvaluatedAt: at(10 * time.Second)}},
		{"empty while replicas are ready", Sample{Empty: true, EvaluatedAt: at(10 * time.Second)}},
		{"poll error", Sample{Err: errors.New("connection refused"), EvaluatedAt: at(10 * time.Second)}},
		{"stale sample", Sample{Value: 1, EvaluatedAt: at(-61 * time.Second)}},
	}
	for _, b := range bad {
		t.Run(b.name+" holds the last good value, then degrades, then fails", func(t *testing.T) {
			// t0: queue 2, rate 3 → N_drain = ⌈3 + 2⌉ = 5.
			rec, st := Recommend(p, both(val(2, t0), val(3, t0)), State{}, t0)
			if rec.Replicas != 5 {
				t.Fatalf("t0: %d (%s)", rec.Replicas, rec.Reason)
			}
			// t0+10s: the rate sample is bad; the last good 3 holds.
			rec, st = Recommend(p, both(val(2, at(10*time.Second)), b.give), st, at(10*time.Second))
			if rec.Status[SignalRate] != StatusHeld || rec.Replicas != 5 || rec.Degraded {
				t.Fatalf("t0+10s: status %s replicas %d degraded %v (%s)", rec.Status[SignalRate], rec.Replicas, rec.Degraded, rec.Reason)
			}
			// t0+61s: the last good rate is past staleAfter: degraded; the
			// queue alone says 1, but missing data may not scale down.
			bad61 := b.give
			if !bad61.EvaluatedAt.Before(t0) {
				bad61.EvaluatedAt = at(61 * time.Second)
			}
			rec, st = Recommend(p, both(val(1, at(61*time.Second)), bad61), st, at(61*time.Second))
			if !rec.Degraded || rec.Replicas != 5 || rec.Limit != TermDegraded || !rec.Active {
				t.Fatalf("t0+61s: degraded %v replicas %d limit %s active %v (%s)", rec.Degraded, rec.Replicas, rec.Limit, rec.Active, rec.Reason)
			}
			// Healthy data may still scale up while degraded: queue 9 → 9.
			rec, st = Recommend(p, both(val(9, at(71*time.Second)), bad61), st, at(71*time.Second))
			if rec.Replicas != 9 || rec.Err != nil {
				t.Fatalf("t0+71s: replicas %d err %v (%s)", rec.Replicas, rec.Err, rec.Reason)
			}
			// Both signals out: ErrNoData, the RPC fails, nothing scales to 0 or max.
			rec, _ = Recommend(p, both(Sample{Err: errors.New("down"), EvaluatedAt: at(200 * time.Second)}, bad61), st, at(200*time.Second))
			if !errors.Is(rec.Err, ErrNoData) {
				t.Fatalf("t0+200s: err %v, want ErrNoData (%s)", rec.Err, rec.Reason)
			}
		})
	}

	t.Run("empty reads as zero with no ready replica for a per-pod preset series", func(t *testing.T) {
		pp := DefaultPolicy()
		pp.Engine, pp.Model, pp.PrometheusAddress, pp.ReplicaThroughput = EngineVLLM, "llama", "http://p:9090", 2
		var o Observation
		for _, s := range []Signal{SignalQueue, SignalRate, SignalActivity} {
			o.Samples[s] = Sample{Empty: true, EvaluatedAt: t0}
		}
		o.ReadyKnown = true
		rec, _ := Recommend(pp, o, State{}, t0)
		if rec.Err != nil || rec.Replicas != 0 || rec.Active {
			t.Fatalf("R=0: replicas %d active %v err %v (%s)", rec.Replicas, rec.Active, rec.Err, rec.Reason)
		}
		o.ReadyReplicas = 2
		rec, _ = Recommend(pp, o, State{}, t0)
		if !errors.Is(rec.Err, ErrNoData) {
			t.Fatalf("R=2: err %v, want ErrNoData: empty is missing while replicas are ready (%s)", rec.Err, rec.Reason)
		}
	})
	t.Run("zeroWhenAbsent makes empty zero even with replicas ready", func(t *testing.T) {
		pz := queuePolicy()
		pz.ZeroWhenAbsent = SignalSet(0).With(SignalQueue)
		o := obsQueue(0, t0)
		o.Samples[SignalQueue].Empty = true
		o.ReadyReplicas, o.ReadyKnown = 4, true
		rec, _ := Recommend(pz, o, State{}, t0)
		if rec.Err != nil || rec.Status[SignalQueue] != StatusZero {
			t.Fatalf("status %s err %v", rec.Status[SignalQueue], rec.Err)
		}
	})
	t.Run("a never-valid signal is reported and left out, not degraded", func(t *testing.T) {
		pa := queuePolicy()
		pa.ActivityQuery = "avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE)"
		o := obsQueue(3, t0)
		o.Samples[SignalActivity] = Sample{Empty: true, EvaluatedAt: t0}
		o.ReadyReplicas, o.ReadyKnown = 2, true
		rec, _ := Recommend(pa, o, State{}, t0)
		if rec.Err != nil || rec.Degraded || rec.Replicas != 3 || rec.Status[SignalActivity] != StatusNever ||
			!strings.Contains(rec.Reason, "left out (never valid): activity") {
			t.Fatalf("replicas %d degraded %v status %s err %v (%s)", rec.Replicas, rec.Degraded, rec.Status[SignalActivity], rec.Err, rec.Reason)
		}
	})
}

func TestRestart(t *testing.T) {
	p := queuePolicy()
	p.ScaleDownWindow = 300 * time.Second
	p.ScaleDownMaxFraction = 1
	cur := func(q float64, d time.Duration, current int32) Observation {
		o := obsQueue(q, t0.Add(d))
		o.CurrentReplicas, o.CurrentKnown = current, true
		o.ReadyReplicas, o.ReadyKnown = current, true
		return o
	}
	t.Run("fresh state holds the seed and stays active for one down-window", func(t *testing.T) {
		st := State{}
		for d := time.Duration(0); d <= 320*time.Second; d += 10 * time.Second {
			rec, next := Recommend(p, cur(0, d, 6), st, t0.Add(d))
			st = next
			wantReplicas, wantActive := int32(6), true
			if d >= 300*time.Second {
				wantReplicas, wantActive = 0, false
			}
			if rec.Replicas != wantReplicas || rec.Active != wantActive {
				t.Fatalf("t0+%v: replicas %d active %v, want %d %v (%s)", d, rec.Replicas, rec.Active, wantReplicas, wantActive, rec.Reason)
			}
		}
	})
	t.Run("a seed of zero may answer inactive at once", func(t *testing.T) {
		rec, _ := Recommend(p, cur(0, 0, 0), State{}, t0)
		if rec.Replicas != 0 || rec.Active {
			t.Fatalf("replicas %d active %v (%s)", rec.Replicas, rec.Active, rec.Reason)
		}
	})
	t.Run("unknown replicas: active through the first down-window, no data no answer", func(t *testing.T) {
		rec, _ := Recommend(p, Observation{}, State{}, t0)
		if !errors.Is(rec.Err, ErrNoData) || !rec.Active {
			t.Fatalf("err %v active %v", rec.Err, rec.Active)
		}
	})
	t.Run("two independent states fed identical data answer identically", func(t *testing.T) {
		var a, b State
		for i := 0; i < 200; i++ {
			d := time.Duration(i) * 5 * time.Second
			q := float64((i * 7919) % 23)
			o := cur(q, d, 4)
			if i%17 == 0 {
				o.Samples[SignalQueue] = Sample{Value: math.NaN(), EvaluatedAt: t0.Add(d)}
			}
			ra, na := Recommend(p, o, a, t0.Add(d))
			rb, nb := Recommend(p, o, b, t0.Add(d))
			a, b = na, nb
			if diff := cmp.Diff(ra, rb, cmp.Comparer(func(x, y error) bool { return fmt.Sprint(x) == fmt.Sprint(y) })); diff != "" {
				t.Fatalf("t0+%v (-a +b):\n%s", d, diff)
			}
		}
	})
}

// TestRecommendDoesNotModifyPrev: Recommend writes its own History. Each later call
// would write into prev.History's array if it reused it: the first (same raw and answer as
// the last point) extends that point's time in place, the second (past the down-window,
// every point pruned) overwrites the first, the others append.
func TestRecommendDoesNotModifyPrev(t *testing.T) {
	p := queuePolicy()
	_, st := Recommend(p, obsQueue(5, t0), State{}, t0)
	_, st = Recommend(p, obsQueue(6, t0.Add(time.Second)), st, t0.Add(time.Second))
	snapshot := append([]Point(nil), st.History...)
	if len(snapshot) != 2 {
		t.Fatalf("history %v, want 2 points to compare", snapshot)
	}
	later := t0.Add(p.ScaleDownWindow + time.Hour)
	Recommend(p, obsQueue(6, t0.Add(2*time.Second)), st, t0.Add(2*time.Second))
	Recommend(p, obsQueue(7, later), st, later)
	Recommend(p, obsQueue(1, t0.Add(2*time.Second)), st, t0.Add(2*time.Second))
	Recommend(p, obsQueue(9, t0.Add(2*time.Second)), st, t0.Add(2*time.Second))
	if diff := cmp.Diff(snapshot, st.History); diff != "" {
		t.Fatalf("prev.History changed (-before +after):\n%s", diff)
	}
}

// FuzzRecommendBounds: whatever the data, the answer stays within [min, max].
func FuzzRecommendBounds(f *testing.F) {
	f.Add(uint8(0), uint8(10), 1.0, 2.0, 0.5, int8(3), int64(5), uint8(3))
	f.Add(uint8(2), uint8(3), math.Inf(1), math.NaN(), -1.0, int8(-1), int64(-70), uint8(1))
	f.Fuzz(func(t *testing.T, lo, hi uint8, q, r, a float64, ready int8, ageSec int64, n uint8) {
		p := DefaultPolicy()
		p.PrometheusAddress = "http://p:9090"
		p.QueueQuery, p.RateQuery, p.ActivityQuery = "q", "r", "a"
		p.ReplicaThroughput = 1.5
		p.WarmReplicas = 1
		p.MinReplicas, p.MaxReplicas = int32(lo), int32(lo)+int32(hi)
		var st State
		for i := 0; i < int(n%40)+1; i++ {
			now := t0.Add(time.Duration(i) * 7 * time.Second)
			at := now.Add(-time.Duration(ageSec%600) * time.Second)
			var o Observation
			o.Samples[SignalQueue] = val(q*float64(i%3), at)
			o.Samples[SignalRate] = val(r, at)
			o.Samples[SignalActivity] = Sample{Value: a, Empty: i%4 == 0, EvaluatedAt: at}
			if ready >= 0 {
				o.ReadyReplicas, o.ReadyKnown = int32(ready), true
			}
			rec, next := Recommend(p, o, st, now)
			st = next
			if rec.Replicas < p.MinReplicas || rec.Replicas > p.MaxReplicas {
				t.Fatalf("replicas %d outside [%d, %d] (%s)", rec.Replicas, p.MinReplicas, p.MaxReplicas, rec.Reason)
			}
			if rec.Err == nil && (rec.Raw < p.MinReplicas || rec.Raw > p.MaxReplicas) {
				t.Fatalf("raw %d outside [%d, %d]", rec.Raw, p.MinReplicas, p.MaxReplicas)
			}
		}
	})
}

// Without Kubernetes, an empty preset pod count is missing data unless the
// trigger opts in with zeroWhenAbsent: ready.
func TestPresetWithoutKubernetesAtZero(t *testing.T) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress, p.ReplicaThroughput = EngineTriton, "m", "http://p:9090", 10
	var o Observation
	for _, s := range AllSignals() {
		o.Samples[s] = Sample{Empty: true, EvaluatedAt: t0}
	}
	if rec, _ := Recommend(p, o, State{}, t0); !errors.Is(rec.Err, ErrNoData) {
		t.Fatalf("err %v, want ErrNoData: vanished metrics must not read as zero pods (%s)", rec.Err, rec.Reason)
	}
	p.ZeroWhenAbsent = SignalSet(0).With(SignalReady)
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.Err != nil || rec.Replicas != 0 || rec.Ready != 0 || rec.Active {
		t.Fatalf("replicas %d ready %d active %v err %v (%s)", rec.Replicas, rec.Ready, rec.Active, rec.Err, rec.Reason)
	}
}

// TestActivityNeverMeasured covers Triton or vLLM without a DCGM exporter: the
// activity query is always empty. The zero read from that empty result while
// no replica is ready is not a sample of the series, so once replicas are
// ready the signal is "never" valid and left out, not out and degraded (which
// would hold the pool at its last good answer forever and never scale down).
func TestActivityNeverMeasured(t *testing.T) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress = EngineTriton, "resnet", "http://prometheus:9090"
	p.ReplicaThroughput, p.TargetUtilization, p.DrainSeconds = 1, 1, 1 // N_drain = ⌈Q + λ⌉
	p.StaleAfter = 20 * time.Second
	p.ScaleDownWindow = 60 * time.Second
	p.ScaleDownMaxFraction = 1 // no step-down bound: only the window and the degraded floor hold
	p.ActivityCeiling, p.ActivityTarget = 1, 0.7

	empty := func(d time.Duration) Sample { return Sample{Empty: true, EvaluatedAt: t0.Add(d)} }
	failed := func(d time.Duration) Sample {
		return Sample{Err: errors.New("connection refused"), EvaluatedAt: t0.Add(d)}
	}
	type tick struct {
		at       time.Duration
		ready    int32
		queue    float64
		activity Sample
		// want
		replicas int32
		status   SignalStatus
		degraded bool
		limit    Term
	}
	run := func(t *testing.T, p Policy, ticks []tick) (Recommendation, State) {
		t.Helper()
		var st State
		var rec Recommendation
		for _, k := range ticks {
			var o Observation
			o.Samples[SignalQueue] = val(k.queue, t0.Add(k.at))
			o.Samples[SignalRate] = val(0, t0.Add(k.at))
			o.Samples[SignalActivity] = k.activity
			o.ReadyReplicas, o.ReadyKnown = k.ready, true
			rec, st = Recommend(p, o, st, t0.Add(k.at))
			if rec.Err != nil || rec.Replicas != k.replicas || rec.Status[SignalActivity] != k.status ||
				rec.Degraded != k.degraded || rec.Limit != k.limit {
				t.Fatalf("t0+%v: replicas %d activity %s degraded %v limit %q err %v, want %d %s %v %q (%s)",
					k.at, rec.Replicas, rec.Status[SignalActivity], rec.Degraded, rec.Limit, rec.Err,
					k.replicas, k.status, k.degraded, k.limit, rec.Reason)
			}
		}
		return rec, st
	}

	t.Run("empty at R=0, then empty with replicas ready: never valid, scales down through the down-window", func(t *testing.T) {
		s := time.Second
		rec, st := run(t, p, []tick{
			{0, 0, 6, empty(0), 6, StatusZero, false, ""},            // scale from zero: burst to N_drain = 6
			{10 * s, 3, 6, empty(10 * s), 6, StatusNever, false, ""}, // no hold: the zero at R=0 was inferred
			{20 * s, 3, 1, empty(20 * s), 6, StatusNever, false, TermDownWindow},
			{30 * s, 3, 1, empty(30 * s), 6, StatusNever, false, TermDownWindow}, // past staleAfter: still not degraded
			{60 * s, 3, 1, empty(60 * s), 6, StatusNever, false, TermDownWindow},
			{70 * s, 3, 1, empty(70 * s), 1, StatusNever, false, ""}, // the raw 6 at t0+10s left the 60 s window
			{200 * s, 3, 1, empty(200 * s), 1, StatusNever, false, ""},
		})
		if !strings.Contains(rec.Reason, "left out (never valid): activity") || strings.Contains(rec.Reason, "degraded") {
			t.Errorf("reason %q: want activity left out as never valid, not degraded", rec.Reason)
		}
		if st.Measured[SignalActivity] || !st.Measured[SignalQueue] {
			t.Errorf("Measured = %v: want queue measured, activity not", st.Measured)
		}
	})
	t.Run("real activity samples that vanish while replicas are ready: held, then degraded at the last good answer", func(t *testing.T) {
		s := time.Second
		rec, _ := run(t, p, []tick{
			{0, 3, 3, val(0.5, t0), 3, StatusFresh, false, ""},                  // N_drain 3; activity only guards
			{10 * s, 3, 1, empty(10 * s), 3, StatusHeld, false, TermDownWindow}, // 0.5 holds, not degraded
			{20 * s, 3, 1, empty(20 * s), 3, StatusHeld, false, TermDownWindow}, // last good exactly staleAfter old
			{30 * s, 3, 1, empty(30 * s), 3, StatusOut, true, TermDownWindow},   // out: degraded
			{200 * s, 3, 1, empty(200 * s), 3, StatusOut, true, TermDegraded},   // raw 1, floor 3
		})
		if !strings.Contains(rec.Reason, "degraded: activity out past staleAfter 20s") {
			t.Errorf("reason %q: want activity degraded", rec.Reason)
		}
	})
	t.Run("measured once, read as zero at R=0, then empty with replicas ready: still degraded", func(t *testing.T) {
		s := time.Second
		run(t, p, []tick{
			{0, 0, 0, val(0.2, t0), 0, StatusFresh, false, ""},
			{10 * s, 0, 0, empty(10 * s), 0, StatusZero, false, ""},
			{20 * s, 3, 4, empty(20 * s), 4, StatusHeld, false, ""}, // the zero at t0+10s holds
			{40 * s, 3, 4, empty(40 * s), 4, StatusOut, true, ""},   // out: the DCGM series existed once
			{200 * s, 3, 1, empty(200 * s), 4, StatusOut, true, TermDegraded},
		})
	})
	t.Run("zeroWhenAbsent: an empty result is a reading of zero and counts as valid", func(t *testing.T) {
		pz := p
		pz.ZeroWhenAbsent = SignalSet(0).With(SignalActivity)
		s := time.Second
		_, st := run(t, pz, []tick{
			{0, 3, 3, empty(0), 3, StatusZero, false, ""},
			{30 * s, 3, 3, empty(30 * s), 3, StatusZero, false, ""}, // past staleAfter: still a fresh zero
			{40 * s, 3, 3, failed(40 * s), 3, StatusHeld, false, ""},
			{70 * s, 3, 1, failed(70 * s), 3, StatusOut, true, TermDownWindow}, // once valid, so out and degraded
			{200 * s, 3, 1, failed(200 * s), 3, StatusOut, true, TermDegraded},
		})
		if !st.Measured[SignalActivity] {
			t.Errorf("Measured[activity] = false: an empty result under zeroWhenAbsent is a valid sample")
		}
	})
}
