package plan_test

import (
	"math"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
)

func TestDecayedRate(t *testing.T) {
	const h = 10 * time.Minute
	// A steady 2 req/s (one batch of 2 a second): after one hour (6 half-lives) the estimate
	// is 2 × (1 − 2^-6); after three hours, 2 (the discrete batches add ln 2/600 ≈ 0.001).
	var d plan.DecayedRate
	for s := range 3 * 3600 {
		d = d.Add(2, t0.Add(time.Duration(s)*time.Second), h)
		if s == 3599 {
			if got, want := d.Rate(t0.Add(3599*time.Second), h), 2*(1-1.0/64); math.Abs(got-want) > 0.005 {
				t.Errorf("steady 2 req/s for an hour: Rate = %.4f, want %.4f ± 0.005", got, want)
			}
		}
	}
	end := t0.Add(3*3600*time.Second - time.Second)
	if got := d.Rate(end, h); math.Abs(got-2) > 0.005 {
		t.Errorf("steady 2 req/s for three hours: Rate = %.4f, want 2 ± 0.005", got)
	}
	// Then silence: one half-life halves it, two quarter it.
	if got, want := d.Rate(end.Add(h), h), d.Rate(end, h)/2; math.Abs(got-want) > 1e-9 {
		t.Errorf("after one half-life: %.6f, want %.6f", got, want)
	}
	if got, want := d.Rate(end.Add(2*h), h), d.Rate(end, h)/4; math.Abs(got-want) > 1e-9 {
		t.Errorf("after two half-lives: %.6f, want %.6f", got, want)
	}
	// One request now is worth ln 2 / H req/s.
	one := plan.DecayedRate{}.Add(1, t0, h)
	if got, want := one.Rate(t0, h), math.Ln2/600; math.Abs(got-want) > 1e-12 {
		t.Errorf("one request: %g, want %g", got, want)
	}
	// A clock that steps back ages nothing and loses nothing.
	back := one.Add(1, t0.Add(-time.Minute), h)
	if back.CRF != 2 || !back.At.Equal(t0) {
		t.Errorf("stepped-back add: %+v, want CRF 2 at t0", back)
	}
	if got := (plan.DecayedRate{}).Rate(t0, h); got != 0 {
		t.Errorf("zero value rate %g, want 0", got)
	}
}

func TestDecayedMean(t *testing.T) {
	const h = 10 * time.Minute
	var d plan.DecayedMean
	if d.Mean() != 0 {
		t.Fatalf("zero value mean %g, want 0", d.Mean())
	}
	// 10 at t0, then 40 one half-life later: weights 1/2 and 1, mean (5 + 40) ÷ 1.5 = 30.
	d = d.Add(10, t0, h).Add(40, t0.Add(h), h)
	if got := d.Mean(); math.Abs(got-30) > 1e-9 {
		t.Errorf("mean %g, want 30", got)
	}
	// Equal samples at once weigh alike.
	if got := (plan.DecayedMean{}).Add(30, t0, h).Add(10, t0, h).Mean(); got != 20 {
		t.Errorf("two samples at t0: mean %g, want 20", got)
	}
	// NaN, infinite, negative and too-large samples are ignored; a clock that steps back decays
	// nothing.
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 2 * plan.MaxDecayedSample} {
		if got := d.Add(v, t0.Add(2*h), h); got != d {
			t.Errorf("Add(%g) changed the mean: %+v, want %+v", v, got, d)
		}
	}
	back := (plan.DecayedMean{}).Add(10, t0, h).Add(30, t0.Add(-h), h)
	if back.Mean() != 20 || !back.At.Equal(t0) {
		t.Errorf("stepped-back add: mean %g at %v, want 20 at t0", back.Mean(), back.At)
	}
}

func TestMinResidencyAndIdleTimeout(t *testing.T) {
	cat := catalog(model("fast", plan.TierP1, 1, 5*time.Second), model("slow", plan.TierP1, 1, 5*time.Minute))
	cat.MinResidency, cat.IdleTimeout = 0, 10*time.Minute
	fast, _ := cat.Model("fast")
	slow, _ := cat.Model("slow")
	for _, tt := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"fast model: k × 5 s", plan.MinResidency(cat, fast), 5 * time.Second},
		{"slow model: k × 5 m", plan.MinResidency(cat, slow), 5 * time.Minute},
		{"idle timeout: the catalog's when longer", plan.IdleTimeout(cat, slow), 10 * time.Minute},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	cat.MinResidency = time.Minute // an operator's floor
	if got := plan.MinResidency(cat, fast); got != time.Minute {
		t.Errorf("catalog floor: %v, want 1m", got)
	}
}

// TestAlternatingDemandLoadsBounded: two models, each taking most of a one-model budget, whose
// requests (1 req/s) alternate every 30 s for an hour. The plan runs every second; a load
// takes L = 20 s; requests for a model that is not READY wait (held, as a gateway holds them).
// An unprotected cache would load on every switch: 120 loads per hour. The anti-thrash rule
// (a model stays at least AntiThrashFactor × L) bounds one slot to 3600 s ÷ ((1 + k)·L) = 90
// loads per hour whatever the estimates do; every request is served (at most the last phase's
// still waits at the end).
func TestAlternatingDemandLoadsBounded(t *testing.T) {
	const load = 20 * time.Second
	cat := plan.Catalog{IdleTimeout: 10 * time.Minute, Models: []plan.Model{
		model("a", plan.TierP1, 6, load), model("b", plan.TierP1, 6, load)}}
	b := plan.Budget{Profile: prof, TotalBytes: 10 * gi}
	obs := plan.Observed{Models: map[string]plan.ModelStatus{}}
	est := map[string]plan.DecayedRate{}
	held := map[string]int{}
	loadingUntil := map[string]time.Time{}
	loads, served := 0, 0
	for s := range 3600 {
		now := t0.Add(time.Duration(s) * time.Second)
		for name, until := range loadingUntil {
			if !now.Before(until) {
				st := obs.Models[name]
				st.State, st.LoadedSince = plan.StateReady, now
				obs.Models[name] = st
				delete(loadingUntil, name)
				loads++
				served += held[name]
				held[name] = 0
			}
		}
		name := "a"
		if (s/30)%2 == 1 {
			name = "b"
		}
		est[name] = est[name].Add(1, now, plan.DefaultHalfLife)
		if st := obs.Models[name]; st.State == plan.StateReady {
			st.LastUsed = now
			obs.Models[name] = st
			served++
		} else {
			held[name]++
		}
		d := plan.Demand{}
		for _, m := range []string{"a", "b"} {
			st := obs.Models[m]
			st.Queued = 0
			if st.State != plan.StateReady {
				st.Queued = held[m]
			}
			obs.Models[m] = st
			d[m] = est[m].Rate(now, plan.DefaultHalfLife)
		}
		for _, a := range plan.Plan(cat, b, obs, d, now) {
			st := obs.Models[a.Model]
			if a.Kind == plan.ActionUnload {
				st.State = plan.StateUnavailable
			} else {
				st.State = plan.StateLoading
				loadingUntil[a.Model] = now.Add(load)
			}
			obs.Models[a.Model] = st
		}
	}
	bound := int(time.Hour / ((1 + plan.AntiThrashFactor) * load))
	if loads > bound || loads < 2 {
		t.Errorf("loads in an hour = %d, want 2..%d (3600 s ÷ ((1 + k) × %s))", loads, bound, load)
	}
	if pending := held["a"] + held["b"]; served+pending != 3600 || pending > 60 {
		t.Errorf("served %d, still waiting %d of 3600", served, pending)
	}
	t.Logf("loads per hour: %d (bound %d, unprotected 120)", loads, bound)
}
