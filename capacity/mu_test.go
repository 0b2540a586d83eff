package capacity

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/capacity/record"
)

// TestMuIsServedAtHighestPass: the quick start against the fake Triton printed a passing
// level "754.22 req/s offered: 729.67 served" and recorded μ 754.2 req/s, the offered rate,
// while every overloaded level served about 730: a level passes while completions are within
// the keep-up tolerance of arrivals, so the offered rate can be above what the replica
// completed. Here every level serves at most 729.67 req/s and passes up to 760 req/s offered
// (within 10 % of its arrivals); μ, in the result and in the record, is the highest passing
// level's served rate, 729.67, not its 760 offered.
func TestMuIsServedAtHighestPass(t *testing.T) {
	const served, passUpTo = 729.67, 760.0
	measure := func(_ context.Context, r float64) (Level, error) {
		return Level{OfferedRPS: r, ThroughputRPS: min(r, served), P50: 0.007, P95: 0.02, P99: 0.04, SuccessRate: 1,
			Stable: true, KeepsUp: true, MeetsSLO: r <= passUpTo}, nil
	}
	res, err := Search(context.Background(), SearchConfig{StartRPS: 10, StepFactor: 2, Precision: 0.05, MaxRPS: 1e5, MinRPS: 0.1}, measure)
	if err != nil {
		t.Fatal(err)
	}
	type mu struct{ BestOffered, BestServed, Mu float64 }
	if diff := cmp.Diff(mu{BestOffered: 760, BestServed: served, Mu: served}, mu{res.Best.OfferedRPS, res.Best.ThroughputRPS, res.MuRPS}); diff != "" {
		t.Errorf("search (-want +got):\n%s", diff)
	}
	var rec record.Record
	fillFromSearch(&rec, res)
	if rec.SLOThroughputRPS != served {
		t.Errorf("record sloThroughputRPS = %v, want the served %v (not the offered 760)", rec.SLOThroughputRPS, served)
	}
	w := Written{Record: rec, Best: res.Best}
	if got, want := w.MuNote(), " (served at the highest passing level: 760 req/s offered, 729.7 served)"; got != want {
		t.Errorf("MuNote() = %q, want %q", got, want)
	}
	if got := ScaledObjectMetadata(rec); !strings.Contains(got, `replicaThroughput: "729.7"`) {
		t.Errorf("metadata %q does not give replicaThroughput 729.7", got)
	}
}

// TestMuFromLevel: μ is min(offered, served): a level served below its rate gives the served
// rate; one whose windows held more arrivals than the rate (Poisson noise: 10.9 served at 10
// offered) gives no more than the rate asked for.
func TestMuFromLevel(t *testing.T) {
	tests := []struct {
		name            string
		offered, served float64
		want            float64
	}{
		{name: "served below offered", offered: 754.22, served: 729.67, want: 729.67},
		{name: "served above offered", offered: 10, served: 10.9, want: 10},
		{name: "equal", offered: 100, served: 100, want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MuFromLevel(Level{OfferedRPS: tt.offered, ThroughputRPS: tt.served}); got != tt.want {
				t.Errorf("MuFromLevel(offered %v, served %v) = %v, want %v", tt.offered, tt.served, got, tt.want)
			}
		})
	}
}
