package replay

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestProbeThroughputValues: the probe gives, to the last bit, what it gave
// when it replayed each rate through simulateRequests, one step per
// simulated second (the 1 h mix took 77 s of CPU then; 10 h ran past
// 120 s). The wants were printed by that version.
func TestProbeThroughputValues(t *testing.T) {
	wide := DefaultPoolConfig()
	wide.ProbeReplicas, wide.Slots, wide.SLO = 3, 8, 500*time.Millisecond
	tests := []struct {
		name string
		cfg  PoolConfig
		mix  []float64
		want float64
	}{
		{"1 s requests", DefaultPoolConfig(), []float64{1}, 3.053587567061186},
		{"mixed", DefaultPoolConfig(), []float64{0.5, 2, 7}, 0.4160868141211962},
		{"1 h and 30 min requests", DefaultPoolConfig(), []float64{3600, 1800}, 0.00029688538776503665},
		{"3 replicas × 8 slots, SLO 0.5 s", wide, []float64{1, 3}, 2.920639503747225},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ProbeThroughput(tt.cfg, tt.mix); got != tt.want {
				t.Errorf("ProbeThroughput = %v req/s, want %v", got, tt.want)
			}
		})
	}
	// 10 h requests, which ran past 120 s: a value, at the cost of any
	// other mix. Not the 1 h mix's ÷ 10: the 2 s SLO is a smaller share of
	// the service time.
	if got := ProbeThroughput(DefaultPoolConfig(), []float64{36000, 18000}); got != 2.9673693770611735e-05 {
		t.Errorf("10 h and 5 h requests: μ = %v req/s, want 2.9673693770611735e-05", got)
	}
}

// TestProbeAttainmentOverrun: one slot, 10 s requests every 0.25 s from
// 0.25 s to 100 s. Request i starts at 0.25 + 10·i, within the 2 h SLO for
// all 400, but only those starting by floor(100 + 3,600) = 3,700 s count
// (i ≤ 369): 370 of 400.
func TestProbeAttainmentOverrun(t *testing.T) {
	cfg := DefaultPoolConfig()
	cfg.Slots, cfg.SLO = 1, 2*time.Hour
	arr, svc := make([]float64, 400), make([]float64, 400)
	for i := range arr {
		arr[i], svc[i] = 0.25*float64(i+1), 10
	}
	if got := probeAttainment(cfg, 1, arr, svc, nil); got != 0.925 {
		t.Errorf("attainment %v, want 0.925 (370 of 400)", got)
	}
}

// TestProbeAttainmentMatchesSimulator: probeAttainment equals the
// attainment simulateRequests gives a static pool of the same slots,
// exactly, with ties (integer arrival seconds, equal service times) and
// with a backlog that outlasts the hour the simulator replays past the last
// arrival.
func TestProbeAttainmentMatchesSimulator(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	tests := []struct {
		name            string
		replicas, slots int
		slo             time.Duration
		n               int
		gap, svc        func() float64
	}{
		{"1 slot, exponential", 1, 1, 2 * time.Second, 3000, func() float64 { return rng.ExpFloat64() * 1.2 }, func() float64 { return rng.ExpFloat64() }},
		{"2 × 4 slots, ties", 2, 4, time.Second, 3000, func() float64 { return float64(rng.IntN(2)) }, func() float64 { return float64(1 + rng.IntN(3)) }},
		{"4 slots, heavy tail", 1, 4, 5 * time.Second, 3000, func() float64 { return rng.ExpFloat64() * 0.6 }, func() float64 { return math.Pow(rng.Float64(), -1.5) }},
		// 4,000 s of work arriving in 100 s: the last requests would start
		// past last arrival + 3,600 s, and count as misses.
		{"backlog past the overrun", 1, 1, 2 * time.Hour, 400, func() float64 { return 0.25 }, func() float64 { return 10 }},
		{"more slots than requests", 100, 4, 10 * time.Millisecond, 300, func() float64 { return rng.ExpFloat64() }, func() float64 { return 50 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultPoolConfig()
			cfg.Slots, cfg.SLO, cfg.MinReplicas, cfg.MaxReplicas = tt.slots, tt.slo, tt.replicas, tt.replicas
			w := &Workload{ArrivalS: make([]float64, tt.n), ServiceS: make([]float64, tt.n)}
			at := 0.0
			for i := range tt.n {
				at += tt.gap()
				w.ArrivalS[i], w.ServiceS[i] = at, tt.svc()
			}
			sim := simulateRequests(cfg, w, &staticCtl{n: tt.replicas}, runOptions{initial: tt.replicas, sampleStepS: 60, maxOverrunS: probeOverrunS, noSeries: true})
			got := probeAttainment(cfg, tt.replicas*tt.slots, w.ArrivalS, w.ServiceS, nil)
			if want := sim.Attainment(); got != want {
				t.Errorf("probeAttainment = %v, simulateRequests %v", got, want)
			}
		})
	}
}
