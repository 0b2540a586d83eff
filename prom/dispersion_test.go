package prom

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// dispersionStep is the spacing of the backfilled counter samples: three per one-minute
// rate window, so that Prometheus 2.x's rate over a closed [t−1m, t] window on minute-aligned
// samples is exactly (c(t) − c(t−1m)) ÷ 60.
const dispersionStep = 20 * time.Second

// poissonCounts returns the cumulative count at each of times of a Poisson process whose
// rate (per second) at time t is rate(t) ≤ peak, by thinning a peak-rate process.
func poissonCounts(rng *rand.Rand, times []time.Time, peak float64, rate func(time.Time) float64) []int {
	out := make([]int, len(times))
	t := times[0]
	n := 0
	next := func() time.Time { return t.Add(time.Duration(rng.ExpFloat64() / peak * float64(time.Second))) }
	a := next()
	for i, ts := range times {
		for !a.After(ts) {
			if rng.Float64()*peak < rate(a) {
				n++
			}
			t = a
			a = next()
		}
		out[i] = n
	}
	return out
}

// wantDispersion is the preset's I computed here from the counts, independently of PromQL:
// at evaluation time at (not minute-aligned), the ten minute-aligned steps t in
// (at − 10m, at], r(t) = (c(t) − c(t−1m)) ÷ 60, I = 30 · median((r(t) − r(t−1m))²) ÷
// (0.4549 · mean r(t)), the median of ten interpolating the middle two.
func wantDispersion(times []time.Time, counts []int, at time.Time) float64 {
	c := func(t time.Time) float64 {
		i := slices.IndexFunc(times, func(x time.Time) bool { return x.Equal(t) })
		if i < 0 {
			panic(fmt.Sprintf("no sample at %v", t))
		}
		return float64(counts[i])
	}
	r := func(t time.Time) float64 { return (c(t) - c(t.Add(-time.Minute))) / 60 }
	var sq []float64
	var mean float64
	for k := range 10 {
		t := at.Truncate(time.Minute).Add(-time.Duration(k) * time.Minute)
		d := r(t) - r(t.Add(-time.Minute))
		sq = append(sq, d*d)
		mean += r(t) / 10
	}
	slices.Sort(sq)
	return 30 * (sq[4] + sq[5]) / 2 / (DispersionMedianChi2 * mean)
}

// The preset against a real Prometheus, on 23 minutes of backfilled counters of three
// pools: steady Poisson arrivals at 20/s, a step from 0 to 20/s (Poisson), and on/off
// bursts (Poisson at 40/s in odd minutes, nothing in even ones).
//
// Tolerance for the steady pool: for independent Poisson minute counts of mean 1,200 this
// estimator's central 99% range is [0.093, 5.09] (median 1.04; 200,000 simulated spans of 11
// counts, normal approximation), so 0.09 ≤ I ≤ 5.1 fails with probability about 1% for an
// arbitrary seed and never for this fixed one; the exact check against wantDispersion is
// what tests the PromQL. The old estimator (variance ÷ mean of the counts) read hundreds
// after the step; the new one must stay within the steady pool's range at every minute.
func TestDispersionPresetAgainstPrometheus(t *testing.T) {
	now := time.Now().Truncate(time.Minute)
	base := now.Add(-25 * time.Minute)
	var times []time.Time
	for ts := base; !ts.After(base.Add(23 * time.Minute)); ts = ts.Add(dispersionStep) {
		times = append(times, ts)
	}
	step := base.Add(12 * time.Minute)
	rng := rand.New(rand.NewPCG(7, 11))
	counts := map[string][]int{
		"steady": poissonCounts(rng, times, 20, func(time.Time) float64 { return 20 }),
		"step": poissonCounts(rng, times, 20, func(ts time.Time) float64 {
			if ts.After(step) {
				return 20
			}
			return 0
		}),
		"bursty": poissonCounts(rng, times, 40, func(ts time.Time) float64 {
			if ts.Sub(base)/time.Minute%2 == 1 {
				return 40
			}
			return 0
		}),
	}
	tc := &timedExporter{times: times}
	for _, m := range slices.Sorted(maps.Keys(counts)) {
		f := make([]float64, len(times))
		for i, c := range counts[m] {
			f[i] = float64(c)
		}
		tc.add("nv_inference_request_success", "counter", m, f)
	}
	for _, m := range slices.Sorted(maps.Keys(counts)) {
		tc.add("nv_inference_request_failure", "counter", m, make([]float64, len(times)))
	}
	srv := tc.prometheus(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitBackfilled(ctx, t, srv, `nv_inference_request_failure{model="bursty"}`, times[len(times)-1], len(times))

	q, err := PresetQuery(EngineTriton, KindDispersion, testLabels)
	if err != nil {
		t.Fatal(err)
	}
	rate, err := PresetQuery(EngineTriton, KindRate, testLabels)
	if err != nil {
		t.Fatal(err)
	}
	old := fmt.Sprintf("60 * stddev_over_time((%s)[10m:1m]) ^ 2 / avg_over_time((%s)[10m:1m])", rate, rate)
	eval := evalModel(ctx, t, srv)
	same := func(got, want float64) bool {
		return math.IsNaN(got) && math.IsNaN(want) || math.Abs(got-want) <= 1e-9*math.Abs(want)
	}

	at := base.Add(22*time.Minute + 30*time.Second)
	steady, want := eval(q, "steady", at), wantDispersion(times, counts["steady"], at)
	if !same(steady, want) {
		t.Errorf("steady: Prometheus I = %v, the counts give %v", steady, want)
	}
	if steady < 0.09 || steady > 5.1 {
		t.Errorf("steady Poisson: I = %.3f, want within [0.09, 5.1]", steady)
	}
	bursty, want := eval(q, "bursty", at), wantDispersion(times, counts["bursty"], at)
	if !same(bursty, want) {
		t.Errorf("bursty: Prometheus I = %v, the counts give %v", bursty, want)
	}
	if bursty < 1000 { // counts alternating 0 and ~2,400: I ≈ 2400² ÷ (0.4549 · 2 · 1200) ≈ 5,300
		t.Errorf("on/off bursts: I = %.1f, want > 1000", bursty)
	}
	t.Logf("steady I = %.3f, bursty I = %.1f", steady, bursty)

	// The step, read every minute for ten minutes after it (the scaler's case: the old
	// estimator read ~600 throughout). Before the step the pool is idle: 0/0, NaN, which the
	// decision treats as no sample (I = 1).
	oldMax := 0.0
	for j := range 11 {
		at := step.Add(time.Duration(j)*time.Minute + 30*time.Second)
		got, want := eval(q, "step", at), wantDispersion(times, counts["step"], at)
		if !same(got, want) {
			t.Errorf("step +%dm: Prometheus I = %v, the counts give %v", j, got, want)
		}
		if j == 0 && !math.IsNaN(got) {
			t.Errorf("step +0m (idle span): I = %v, want NaN", got)
		}
		if j > 0 && (got < 0 || got > 5.1) {
			t.Errorf("step +%dm: I = %.3f, want within [0, 5.1] (at most the steady pool's range)", j, got)
		}
		o := eval(old, "step", at)
		oldMax = max(oldMax, o)
		t.Logf("step +%dm: I = %.3f (variance ÷ mean: %.1f)", j, got, o)
	}
	if oldMax < 100 {
		t.Errorf("the old variance ÷ mean estimator read at most %.1f after the step; the test no longer reproduces the defect", oldMax)
	}
}
