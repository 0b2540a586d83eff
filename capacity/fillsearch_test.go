package capacity

import (
	"testing"

	"github.com/inferscale/inferscale/capacity/record"
)

// TestFillFromSearchLoadShape: the record's S is the lowest level's median latency and k is
// Little's law at saturation, round(max throughput × S), at least 1; μ and the figures at μ come
// from the search's result, and every level is kept in the curve.
func TestFillFromSearchLoadShape(t *testing.T) {
	for _, tt := range []struct {
		name  string
		curve []Level
		wantS float64
		wantK int
	}{
		// S = 0.1 s (the first level's p50, not the 0.3 s of the saturated one); the most
		// served is 38.7 req/s: k = round(3.87) = 4.
		{"four slots", []Level{
			{OfferedRPS: 10, ThroughputRPS: 10, P50: 0.1},
			{OfferedRPS: 40, ThroughputRPS: 38.7, P50: 0.12},
			{OfferedRPS: 80, ThroughputRPS: 35, P50: 0.3},
		}, 0.1, 4},
		// 2 req/s × 0.2 s = 0.4 rounds to 0: a replica serves at least one.
		{"at least one", []Level{{OfferedRPS: 2, ThroughputRPS: 2, P50: 0.2}}, 0.2, 1},
		// 5 req/s × 0.5 s = 2.5 rounds half away from zero: 3.
		{"rounded half up", []Level{{OfferedRPS: 5, ThroughputRPS: 5, P50: 0.5}}, 0.5, 3},
	} {
		best := tt.curve[0]
		var rec record.Record
		fillFromSearch(&rec, Result{MuRPS: best.ThroughputRPS, Best: best, Curve: tt.curve})
		if rec.LoadShape.ServiceTimeSeconds != tt.wantS || rec.LoadShape.ReplicaConcurrency != tt.wantK {
			t.Errorf("%s: S %v s, k %d; want %v s, %d", tt.name, rec.LoadShape.ServiceTimeSeconds, rec.LoadShape.ReplicaConcurrency, tt.wantS, tt.wantK)
		}
		if rec.SLOThroughputRPS != best.ThroughputRPS || rec.LatencySeconds.P50 != best.P50 || len(rec.Curve) != len(tt.curve) {
			t.Errorf("%s: μ %v, p50 %v, %d curve points; want %v, %v, %d", tt.name, rec.SLOThroughputRPS, rec.LatencySeconds.P50,
				len(rec.Curve), best.ThroughputRPS, best.P50, len(tt.curve))
		}
	}
	// No level measured: no load shape.
	var rec record.Record
	fillFromSearch(&rec, Result{})
	if rec.LoadShape.ReplicaConcurrency != 0 || rec.LoadShape.ServiceTimeSeconds != 0 || rec.Curve != nil {
		t.Errorf("empty search: %+v, want no load shape and no curve", rec.LoadShape)
	}
}
