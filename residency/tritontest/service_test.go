package tritontest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestServiceTimeMoments draws 200 000 service times per distribution and checks the sample
// mean and coefficient of variation against the specified ones (2 % and 0.03 absolute: the
// standard error of the mean is CV/√n ≈ 0.2 % here, of the CV a few times that).
func TestServiceTimeMoments(t *testing.T) {
	tests := []struct {
		name   string
		dist   Distribution
		cv     float64
		wantCV float64
	}{
		{name: "deterministic", dist: Deterministic, wantCV: 0},
		{name: "default is deterministic", dist: "", wantCV: 0},
		{name: "exponential", dist: Exponential, wantCV: 1},
		{name: "lognormal cv 0.5", dist: Lognormal, cv: 0.5, wantCV: 0.5},
		{name: "lognormal cv 2", dist: Lognormal, cv: 2, wantCV: 2},
	}
	const n = 200000
	mean := 100 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &model{spec: Model{ServiceTime: mean, ServiceDistribution: tt.dist, ServiceCV: tt.cv}, rng: rand.New(rand.NewPCG(1, 0))}
			var sum, sum2 float64
			for range n {
				d := float64(m.serviceTime())
				sum += d
				sum2 += d * d
			}
			gotMean := sum / n
			gotCV := math.Sqrt(max(0, sum2/n-gotMean*gotMean)) / gotMean
			if math.Abs(gotMean/float64(mean)-1) > 0.02 {
				t.Errorf("mean = %v, want %v ± 2 %%", time.Duration(gotMean), mean)
			}
			tol := 0.03 * max(1, tt.wantCV*2) // the lognormal's sample CV converges slowly
			if math.Abs(gotCV-tt.wantCV) > tol {
				t.Errorf("CV = %.3f, want %.2f ± %.2f", gotCV, tt.wantCV, tol)
			}
		})
	}
}

func TestServiceTimeSeeded(t *testing.T) {
	draw := func(seed uint64) []time.Duration {
		m := &model{spec: Model{ServiceTime: time.Second, ServiceDistribution: Exponential}, rng: rand.New(rand.NewPCG(seed, 3))}
		out := make([]time.Duration, 5)
		for i := range out {
			out[i] = m.serviceTime()
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, draw %d: %v != %v", i, a[i], b[i])
		}
	}
	if a[0] == c[0] && a[1] == c[1] {
		t.Errorf("seeds 7 and 8 drew the same times %v", a[:2])
	}
}

// TestAddServiceTime: a request's time saturates at time.Duration's largest value instead of
// wrapping negative (2562047h + 2562047h had been about -292 years: an instant answer).
func TestAddServiceTime(t *testing.T) {
	const huge = 2562047 * time.Hour
	tests := []struct{ service, extra, want time.Duration }{
		{time.Second, 0, time.Second},
		{time.Hour, time.Hour, 2 * time.Hour},
		{huge, huge, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := addServiceTime(tt.service, tt.extra); got != tt.want {
			t.Errorf("addServiceTime(%v, %v) = %v, want %v", tt.service, tt.extra, got, tt.want)
		}
	}
	// A deterministic ServiceTime is held to MaxServiceTime as a draw is.
	m := &model{spec: Model{ServiceTime: huge}}
	if got := m.serviceTime(); got != MaxServiceTime {
		t.Errorf("deterministic serviceTime of %v = %v, want %v", huge, got, MaxServiceTime)
	}
}
