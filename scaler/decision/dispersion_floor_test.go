package decision

import "testing"

// TestDispersionBelowOneCountsAsPoisson: the differenced dispersion preset reads 0 while most
// of its span was idle (a pool just woken from zero) and below 1 for half of all Poisson
// spans; the rule corrects only for arrivals burstier than Poisson, so such a reading sizes
// the pool exactly as I = 1 does, while a bursty reading still adds replicas.
func TestDispersionBelowOneCountsAsPoisson(t *testing.T) {
	p := DefaultPolicy()
	p.RateQuery, p.DispersionQuery, p.ReplicaThroughput = "r", "i", 0.5 // S = 2 s = T, k = 1: the tail term decides
	size := func(disp float64) (int32, float64) {
		var o Observation
		o.Samples[SignalRate], o.Samples[SignalDispersion] = val(2, t0), val(disp, t0)
		o.MinReplicas, o.MaxReplicas, o.BoundsKnown = 0, 1000, true
		rec, _ := Recommend(p, o, State{}, t0)
		return rec.Replicas, rec.Dispersion
	}
	poisson, usedP := size(1)
	tests := []struct {
		name     string
		give     float64
		wantUsed float64
	}{
		{"idle span reads 0", 0, 1},
		{"below Poisson", 0.3, 1},
		{"Poisson", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, used := size(tt.give)
			if n != poisson || used != tt.wantUsed {
				t.Errorf("I = %g: %d replicas with I used %g, want %d (as I = 1, used %g) with %g", tt.give, n, used, poisson, usedP, tt.wantUsed)
			}
		})
	}
	if n, used := size(50); n <= poisson || used != 50 {
		t.Errorf("I = 50: %d replicas (I used %g), want more than Poisson's %d", n, used, poisson)
	}
}
