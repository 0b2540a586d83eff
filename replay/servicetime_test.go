package replay

import (
	"math"
	"testing"
	"time"

	"github.com/inferscale/inferscale/prom"
)

// TestServiceTimeMatchesPreset: the replay computes S with the preset's n₀.
func TestServiceTimeMatchesPreset(t *testing.T) {
	if serviceTimePriorCompletions != prom.ServiceTimePriorCompletions {
		t.Errorf("replay n₀ = %d, the preset's = %d", serviceTimePriorCompletions, prom.ServiceTimePriorCompletions)
	}
}

func TestServiceTimeEstimate(t *testing.T) {
	tests := []struct {
		name                 string
		svc1, n1, svc10, n10 float64
		want                 float64
	}{
		// 600 one-second requests in ten minutes, then one of 24 s alone in the
		// last minute: (24 + 4 × 624/601) ÷ 5, not 24.
		{"lone long completion", 24, 1, 624, 601, (24 + 4*624.0/601) / 5},
		// A busy minute follows itself: 1,200 completions of 2 s against a
		// 10-minute mean of 1 s read 2 − 4/1204 s.
		{"busy minute", 2400, 1200, 6000, 6000, (2400 + 4*1.0) / 1204},
		// Nothing completed in the last minute: the ten minutes' mean.
		{"quiet minute", 0, 0, 90, 30, 3},
		// Nothing in ten minutes: the preset's 0/0, missing.
		{"idle", 0, 0, 0, 0, 0},
		{"NaN", math.NaN(), 1, 10, 10, 0},
	}
	for _, tt := range tests {
		if got := serviceTime(tt.svc1, tt.n1, tt.svc10, tt.n10); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: serviceTime = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// recordCtl keeps every decision's signals and holds one replica.
type recordCtl struct{ got []Signals }

func (c *recordCtl) Interval() time.Duration { return 15 * time.Second }
func (c *recordCtl) Desired(s Signals) int {
	c.got = append(c.got, s)
	return 1
}

// TestServiceTimeCountedAtCompletion: the engine's duration counters count a
// request when it ends, so a 100 s request started at t = 0 is not in S
// until t = 100 s. The simulator had counted it when it started (S read
// 100 s at t = 15 s), a signal no engine gives.
func TestServiceTimeCountedAtCompletion(t *testing.T) {
	w := &Workload{ArrivalS: []float64{0, 1, 110}, ServiceS: []float64{100, 2, 1}}
	ctl := &recordCtl{}
	simulateRequests(testPool(4), w, ctl, runOptions{initial: 1, sampleStepS: 60, maxOverrunS: 200})
	at := func(d time.Duration) float64 {
		for _, s := range ctl.got {
			if s.Now == d {
				return s.ServiceTime
			}
		}
		t.Fatalf("no decision at %v", d)
		return 0
	}
	// Only the 2 s request (1–3 s) has completed by 15 s and 90 s.
	for _, d := range []time.Duration{15 * time.Second, 90 * time.Second} {
		if got := at(d); got != 2 {
			t.Errorf("S at %v = %v, want 2 (the 100 s request has not completed)", d, got)
		}
	}
	// At 105 s the minute (45–105 s] holds the 100 s request alone and the ten
	// minutes both: (100 + 4 × 102/2) ÷ 5 = 60.8.
	if got := at(105 * time.Second); math.Abs(got-60.8) > 1e-9 {
		t.Errorf("S at 105 s = %v, want 60.8", got)
	}
}
