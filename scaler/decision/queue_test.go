package decision

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The expected values were computed independently with 50-digit
// arithmetic (mpmath) from the Erlang C sum formula, not from the
// recurrence under test.
func TestLeastReplicasErlangC(t *testing.T) {
	logEps := math.Log(0.01)
	tests := []struct {
		name              string
		a, tOverSBeta     float64
		k                 int64
		wantN             float64
		wantTail, prevTal float64 // P(W > T) at wantN and at wantN − 1
	}{
		{"a 7, S 1 s, T 2 s", 7, 2, 1, 9, 0.0070505519678429, 0.085980673178049},
		{"a 10, S 1 s", 10, 2, 1, 12, 0.0082308324370966, 0.092314660432481},
		{"a 7, β 2 (I = 3)", 7, 1, 1, 11, 0.0022181749211608, 0.011039347204497},
		{"a 800 (Halfin–Whitt start)", 800, 2, 1, 803, 0.0021677542787515, 0.016758576552428},
		{"a 15, k 4: 20 servers", 15, 4, 4, 5, 3.3066961301999e-10, 0.013371807664604},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := queueModel{a: tt.a, theta: tt.tOverSBeta, k: tt.k}
			n, tail := m.leastReplicas(logEps, 10000)
			if n != tt.wantN || math.Abs(tail-tt.wantTail) > 1e-9*tt.wantTail {
				t.Errorf("leastReplicas = %v, %.15g; want %v, %.15g", n, tail, tt.wantN, tt.wantTail)
			}
			if got := m.tail(int64(tt.wantN) - 1); math.Abs(got-tt.prevTal) > 1e-9*tt.prevTal {
				t.Errorf("tail(%v) = %.15g, want %.15g", tt.wantN-1, got, tt.prevTal)
			}
		})
	}
}

func TestLeastReplicasSaturates(t *testing.T) {
	logEps := math.Log(0.01)
	tests := []struct {
		name string
		m    queueModel
		maxN int64
		want float64
	}{
		{"infinite load", queueModel{a: math.Inf(1), theta: 2, k: 1}, 100, 101},
		{"load beyond the bound", queueModel{a: 1e308, theta: 2, k: 8}, 100, 101},
		// θ = 0 (dispersion +Inf): the tail is P(wait > 0); C(12, 5) = 0.00588, C(11, 5) = 0.0151.
		{"no headroom exponent: Erlang C alone", queueModel{a: 5, theta: 0, k: 1}, 1 << 30, 12},
		{"no load", queueModel{a: 0, theta: 2, k: 1}, 100, 0},
		// Past maxQueueSteps (a 10¹³ starts 3·10⁷ steps below) the closed
		// form answers ⌈(10¹³ + 1 + ⌈ln 100 / 2⌉)/10⁴⌉ = 10⁹ + 1.
		{"huge pool: closed-form bound", queueModel{a: 1e13, theta: 2, k: 1e4}, 1 << 40, 1e9 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := tt.m.leastReplicas(logEps, tt.maxN); got != tt.want {
				t.Errorf("leastReplicas = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestForecastRate(t *testing.T) {
	now := t0.Add(time.Hour)
	pts := func(rates ...float64) []RatePoint {
		out := make([]RatePoint, len(rates))
		for i, r := range rates {
			out[i] = RatePoint{AtUnixNano: now.Add(-time.Duration(len(rates)-1-i) * 15 * time.Second).UnixNano(), Rate: r}
		}
		return out
	}
	samePoint := func(rates ...float64) []RatePoint {
		out := make([]RatePoint, len(rates))
		for i, r := range rates {
			out[i] = RatePoint{AtUnixNano: now.UnixNano(), Rate: r}
		}
		return out
	}
	z := normalQuantile(0.99)
	tests := []struct {
		name string
		hist []RatePoint
		want float64
	}{
		{"no history: persistence", nil, 10},
		{"flat, no spread: λ_now", pts(10, 10, 10, 10, 10), 10},
		// Slope 1/15 per s over a perfect line: +60 s · 1/15 = +4, no spread.
		{"rising line: λ_now + H·b", pts(6, 7, 8, 9, 10), 14},
		{"falling line: never below λ_now", pts(14, 13, 12, 11, 10), 10},
		// Earlier samples 9, 11, 9, 11 at x = −60, −45, −30, −15 s: slope
		// 30/1125 per s, residuals −0.4, 1.2, −1.2, 0.4 → s = √(3.2/2);
		// x̄ = −37.5, Sxx = 1125, x_H = 60 s. The slope over all five
		// (9, 11, 9, 11, 10) is 30/2250 = 1/75 per s, +0.8 over 60 s.
		{"noisy: prediction bound of the earlier samples", pts(9, 11, 9, 11, 10),
			10 + 60*(1.0/75) + z*math.Sqrt(3.2/2)*math.Sqrt(1+1.0/4+97.5*97.5/1125)},
		{"overflowing history: +Inf, not NaN", pts(1e308, 1.7e308, 1e308, 1.7e308, 10), math.Inf(1)},
		// Two samples are a trend: slope 4/15 per s, +16 over 60 s.
		{"two samples: λ_now + H·b", pts(6, 10), 26},
		// Four samples, so three earlier (9, 11, 9 at x = −45, −30, −15 s): slope 0,
		// residuals −2/3, 4/3, −2/3 → s = √(8/3 ÷ 1); x̄ = −30, Sxx = 450, x_H = 60 s. The
		// slope over all four (9, 11, 9, 10) is 7.5/1125 = 1/150 per s, +0.4 over 60 s.
		{"three earlier samples: the least with a prediction bound", pts(9, 11, 9, 10),
			10 + 0.4 + z*math.Sqrt(8.0/3)*math.Sqrt(1+1.0/3+90*90/450.0)},
		{"every sample at one time: no trend, no spread", samePoint(9, 11, 9, 11, 10), 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := forecastRate(tt.hist, now, 10, time.Minute, z)
			if !(math.Abs(got-tt.want) <= 1e-9*math.Abs(tt.want)) && got != tt.want {
				t.Errorf("forecastRate = %.12g, want %.12g", got, tt.want)
			}
		})
	}
}

// ratePolicy is a pool sized by rate, queue, running, activity, service time
// and dispersion signals, k = 4, μ as the service-time fallback.
func ratePolicy() Policy {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.QueueQuery, p.RateQuery, p.ActivityQuery, p.RunningQuery = "q", "r", "a", "run"
	p.ServiceTimeQuery, p.DispersionQuery = "s", "i"
	p.ReplicaThroughput, p.ReplicaConcurrency = 2, 4
	p.MaxReplicas = 40
	return p
}

// Regression seeds of issue 12: a finite but huge signal drove the
// decision to NaN, which the clamp turned into the minimum.
func TestHugeSignalsSaturate(t *testing.T) {
	p := ratePolicy()
	steady := func(at time.Time) Observation {
		var o Observation
		o.Samples[SignalQueue] = val(0, at)
		o.Samples[SignalRate] = val(10, at)
		o.Samples[SignalRunning] = val(5, at)
		o.Samples[SignalServiceTime] = val(2, at)
		o.Samples[SignalDispersion] = val(1, at)
		o.Samples[SignalActivity] = val(0.5, at)
		o.ReadyReplicas, o.ReadyKnown = 20, true
		o.CurrentReplicas, o.CurrentKnown = 20, true
		return o
	}
	var st State // a pool held at 20 for 7.5 minutes, past the first down-window
	for i := range 30 {
		now := t0.Add(time.Duration(i) * 15 * time.Second)
		_, st = Recommend(p, steady(now), st, now)
	}
	now := t0.Add(30 * 15 * time.Second)
	tests := []struct {
		name string
		set  func(o *Observation)
	}{
		{"rate 1.7e308", func(o *Observation) { o.Samples[SignalRate] = val(1.7e308, now) }},
		{"queue 1e308", func(o *Observation) { o.Samples[SignalQueue] = val(1e308, now) }},
		{"running 1e308", func(o *Observation) { o.Samples[SignalRunning] = val(1e308, now) }},
		{"service time 1e308", func(o *Observation) { o.Samples[SignalServiceTime] = val(1e308, now) }},
		{"queue and service time 1e308", func(o *Observation) {
			o.Samples[SignalQueue], o.Samples[SignalServiceTime] = val(1e308, now), val(1e308, now)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := steady(now)
			tt.set(&o)
			rec, _ := Recommend(p, o, st, now)
			if rec.Replicas != p.MaxReplicas || rec.Raw != p.MaxReplicas || rec.Limit != TermMax {
				t.Errorf("replicas %d raw %d limit %q, want maxReplicas %d (%s)", rec.Replicas, rec.Raw, rec.Limit, p.MaxReplicas, rec.Reason)
			}
			if math.IsNaN(rec.PWait) || math.IsNaN(rec.LambdaH) || math.IsNaN(rec.Load) {
				t.Errorf("NaN in PWait %v, LambdaH %v, Load %v", rec.PWait, rec.LambdaH, rec.Load)
			}
		})
	}
}

func TestSaturationGuard(t *testing.T) {
	p := ratePolicy()
	p.ScaleDownWindow, p.ScaleDownPeriod = 30*time.Second, 15*time.Second
	p.ScaleDownMaxFraction = 1
	obs := func(at time.Time, rate, activity float64) Observation {
		var o Observation
		o.Samples[SignalRate] = val(rate, at)
		o.Samples[SignalServiceTime] = val(2, at)
		o.Samples[SignalActivity] = val(activity, at)
		o.ReadyReplicas, o.ReadyKnown = 10, true
		return o
	}
	var st State
	var rec Recommendation
	// λ 15/s, S 2 s: 30 Erlangs, N_slo ⌈·/4⌉ replicas; then λ falls to 1/s.
	for i := range 4 {
		now := t0.Add(time.Duration(i) * 15 * time.Second)
		rec, st = Recommend(p, obs(now, 15, 0.5), st, now)
	}
	high := rec.Replicas
	now := t0.Add(120 * time.Second)
	sat, _ := Recommend(p, obs(now, 1, 1.0), st, now)
	if sat.Replicas != high || sat.Limit != TermSaturated || !sat.Saturated || !strings.Contains(sat.Reason, "saturated") {
		t.Errorf("saturated: replicas %d limit %q, want %d held by %q (%s)", sat.Replicas, sat.Limit, high, TermSaturated, sat.Reason)
	}
	free, _ := Recommend(p, obs(now, 1, 0.9), st, now)
	if free.Replicas >= high || free.Saturated {
		t.Errorf("below the ceiling: replicas %d, want a scale-down from %d (%s)", free.Replicas, high, free.Reason)
	}
}

// TestServiceTimeMissing: S falls back to k/μ; without μ, the occupancy
// term sizes and S out while idle is not degradation.
func TestServiceTimeMissing(t *testing.T) {
	p := ratePolicy()
	p.StaleAfter = 20 * time.Second
	o := func(at time.Time, s Sample, rate float64) Observation {
		var o Observation
		o.Samples[SignalRate] = val(rate, at)
		o.Samples[SignalQueue] = val(0, at)
		o.Samples[SignalRunning] = val(rate, at)
		o.Samples[SignalServiceTime] = s
		o.ReadyReplicas, o.ReadyKnown = 2, true
		return o
	}
	failed := func(at time.Time) Sample { return Sample{Empty: true, EvaluatedAt: at} }
	var st State
	rec, st := Recommend(p, o(t0, val(1, t0), 4), st, t0)
	if rec.ServiceSource != "measured" || rec.ServiceTime != 1 {
		t.Fatalf("S %v from %q, want 1 measured", rec.ServiceTime, rec.ServiceSource)
	}
	now := t0.Add(60 * time.Second)
	rec, _ = Recommend(p, o(now, failed(now), 4), st, now)
	if rec.ServiceSource != "replicaThroughput" || rec.ServiceTime != 2 || rec.Degraded {
		t.Errorf("S %v from %q degraded %v, want k/μ = 2 from replicaThroughput, not degraded (%s)",
			rec.ServiceTime, rec.ServiceSource, rec.Degraded, rec.Reason)
	}
	pn := p
	pn.ReplicaThroughput = 0
	rec, _ = Recommend(pn, o(now, failed(now), 4), st, now)
	if !rec.Degraded || rec.Term != TermOccupancy || rec.NOcc != 1 {
		t.Errorf("no μ, S out under load: degraded %v term %q N_occ %d, want degraded occupancy ⌈4/4⌉ = 1 (%s)",
			rec.Degraded, rec.Term, rec.NOcc, rec.Reason)
	}
	rec, _ = Recommend(pn, o(now, failed(now), 0), st, now)
	if rec.Degraded || rec.Replicas != 2 {
		t.Errorf("no μ, S out while idle: degraded %v replicas %d, want not degraded (%s)", rec.Degraded, rec.Replicas, rec.Reason)
	}
}

func TestColdStartHorizon(t *testing.T) {
	p := ratePolicy()
	var o Observation
	o.Samples[SignalRate] = val(1, t0)
	o.ColdStart, o.ColdStartKnown = 95*time.Second, true
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.Horizon != 95*time.Second || rec.HorizonSource != "measured" {
		t.Errorf("H %v from %q, want 95s measured", rec.Horizon, rec.HorizonSource)
	}
	p.ColdStart = 30 * time.Second
	rec, _ = Recommend(p, o, State{}, t0)
	if rec.Horizon != 30*time.Second || rec.HorizonSource != "coldStart" {
		t.Errorf("H %v from %q, want 30s from coldStart", rec.Horizon, rec.HorizonSource)
	}
	rec, _ = Recommend(ratePolicy(), Observation{Samples: o.Samples}, State{}, t0)
	if rec.Horizon != DefaultColdStart || rec.HorizonSource != "default" {
		t.Errorf("H %v from %q, want the 60s default", rec.Horizon, rec.HorizonSource)
	}
}

// FuzzRecommendMonotone asserts, over the whole input space, that more
// queue, more rate, more running requests and more activity (within [0, 1]) never yield
// fewer replicas, all else (history included) equal; that a huge value
// saturates at maxReplicas (raw at once; the answer too unless an
// up-window delays it); and that no answer is NaN-driven (within bounds,
// PWait a probability).
func FuzzRecommendMonotone(f *testing.F) {
	f.Add(3.0, 10.0, 5.0, 0.5, 2.0, 1.0, 7.0, 20.0, uint8(20), uint8(12), uint8(4))
	f.Add(1e308, 1.7e308, 1e308, 1.0, 1e308, 1e308, 1e308, 1e308, uint8(20), uint8(3), uint8(1))
	f.Add(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, uint8(0), uint8(0), uint8(0))
	f.Add(0.0, 1e-300, 0.0, 0.99, 1e-300, 3.0, 1e-310, 0.0, uint8(1), uint8(40), uint8(255))
	f.Fuzz(func(t *testing.T, q, r, run, a, s, disp, dq, dr float64, ready, n, k uint8) {
		p := ratePolicy()
		p.ReplicaConcurrency = int32(k%16) + 1
		if k >= 128 {
			p.ScaleUpWindow = 30 * time.Second
		}
		nonneg := func(x float64) float64 {
			if math.IsNaN(x) || x < 0 {
				return 0
			}
			return math.Min(x, math.MaxFloat64)
		}
		q, r, run, a, s, disp, dq, dr = nonneg(q), nonneg(r), nonneg(run), nonneg(a), nonneg(s), nonneg(disp), nonneg(dq), nonneg(dr)
		a = math.Min(a, 1) // activity is a fraction of time: above 1 is an invalid sample (MaxActivity)
		obs := func(at time.Time, q, r, run, a float64) Observation {
			var o Observation
			o.Samples[SignalQueue] = val(q, at)
			o.Samples[SignalRate] = val(r, at)
			o.Samples[SignalRunning] = val(run, at)
			o.Samples[SignalActivity] = val(a, at)
			o.Samples[SignalServiceTime] = val(s, at)
			o.Samples[SignalDispersion] = val(disp, at)
			o.ReadyReplicas, o.ReadyKnown = int32(ready%50), true
			return o
		}
		var st State
		for i := range int(n % 24) {
			at := t0.Add(time.Duration(i) * 15 * time.Second)
			f := float64(i%5) / 4
			_, st = Recommend(p, obs(at, q*f, r*f, run*f, a), st, at)
		}
		now := t0.Add(time.Duration(n%24) * 15 * time.Second)
		base, _ := Recommend(p, obs(now, q, r, run, a), st, now)
		if base.Replicas < p.MinReplicas || base.Replicas > p.MaxReplicas || math.IsNaN(base.PWait) || base.PWait > 1 {
			t.Fatalf("base: replicas %d PWait %v (%s)", base.Replicas, base.PWait, base.Reason)
		}
		up := func(x, d float64) float64 { return math.Min(x+d, math.MaxFloat64) }
		for _, tt := range []struct {
			name string
			o    Observation
		}{
			{"more queue", obs(now, up(q, dq), r, run, a)},
			{"more rate", obs(now, q, up(r, dr), run, a)},
			{"more running", obs(now, q, r, up(run, dq), a)},
			{"more activity", obs(now, q, r, run, math.Min(up(a, dr), 1))},
		} {
			got, _ := Recommend(p, tt.o, st, now)
			if got.Replicas < base.Replicas {
				t.Fatalf("%s: %d replicas < %d\nmore: %s\nbase: %s", tt.name, got.Replicas, base.Replicas, got.Reason, base.Reason)
			}
		}
		for _, tt := range []struct {
			name string
			o    Observation
		}{
			{"rate 1.7e308", obs(now, q, 1.7e308, run, a)},
			{"queue 1e308", obs(now, 1e308, r, run, a)},
			{"running 1e308", obs(now, q, r, 1e308, a)},
		} {
			if tt.name == "rate 1.7e308" && s > 0 && s < 1e-6 {
				continue // a sub-microsecond service time makes even this rate a small load
			}
			got, _ := Recommend(p, tt.o, st, now)
			if got.Raw != p.MaxReplicas || got.Replicas < base.Replicas || (p.ScaleUpWindow == 0 && got.Replicas != p.MaxReplicas) {
				t.Fatalf("%s: raw %d, %d replicas, want maxReplicas %d (%s)", tt.name, got.Raw, got.Replicas, p.MaxReplicas, got.Reason)
			}
		}
	})
}

// Issue 14: retries do not buy replicas.
func TestRetryCap(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.UniqueRateQuery, p.ReplicaThroughput, p.StaleAfter = "r", "u", 1, 20*time.Second
	obs := func(at time.Time, rate float64, unique Sample) Observation {
		var o Observation
		o.Samples[SignalRate], o.Samples[SignalUniqueRate] = val(rate, at), unique
		return o
	}
	// Rate 30/s of which 10/s unique, retryBudget 1.2: sized for 12/s, a = 12 Erlangs at
	// S = 1 s: 14 servers (Erlang C, independent computation: P = 0.00882); 30/s would need 33.
	rec, st := Recommend(p, obs(t0, 30, val(10, t0)), State{}, t0)
	if rec.Replicas != 14 || !rec.RetryCapped || rec.Amplification != 3 || !strings.Contains(rec.Reason, "retry-capped") {
		t.Fatalf("replicas %d capped %v amplification %v, want 14, capped, 3 (%s)", rec.Replicas, rec.RetryCapped, rec.Amplification, rec.Reason)
	}
	// Within the budget (12/s of 10/s unique): no cap.
	if r, _ := Recommend(p, obs(t0, 12, val(10, t0)), State{}, t0); r.RetryCapped || r.Replicas != 14 {
		t.Errorf("amplification 1.2: replicas %d capped %v, want 14 uncapped", r.Replicas, r.RetryCapped)
	}
	// The unique rate goes missing while the rate is healthy: no cap, degraded once out,
	// and never below the last good answer.
	later := t0.Add(time.Minute)
	gone := Sample{Empty: true, EvaluatedAt: later}
	rec, _ = Recommend(p, obs(later, 30, gone), st, later)
	if rec.RetryCapped || !rec.Degraded || rec.Replicas < 14 || rec.Amplification != -1 {
		t.Errorf("unique rate out: replicas %d capped %v degraded %v, want ≥ 14, uncapped, degraded (%s)", rec.Replicas, rec.RetryCapped, rec.Degraded, rec.Reason)
	}
	rec, _ = Recommend(p, obs(later, 3, gone), st, later)
	if rec.Replicas != 14 || rec.Limit != TermDegraded && rec.Limit != TermDownWindow {
		t.Errorf("unique rate out, rate falls: replicas %d limit %q, want held at 14 (%s)", rec.Replicas, rec.Limit, rec.Reason)
	}
}

// TestNormalQuantile: Φ⁻¹(p) against tabulated values of the standard normal quantile
// (Abramowitz and Stegun, Table 26.5), to 1e-6.
func TestNormalQuantile(t *testing.T) {
	for _, c := range []struct{ p, want float64 }{
		{0.5, 0}, {0.9, 1.281552}, {0.975, 1.959964}, {0.99, 2.326348}, {0.9999, 3.719016}, {0.01, -2.326348},
	} {
		if got := normalQuantile(c.p); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("normalQuantile(%v) = %.7f, want %.6f", c.p, got, c.want)
		}
	}
}
