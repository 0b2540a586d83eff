package replay

import (
	"fmt"
	"math"
)

// GridSteps are the timestamp grids, seconds, that SpreadCoarse looks for,
// coarsest first: a trace whose every arrival is a multiple of one of them
// and in which several requests share an instant was recorded at that
// resolution (GenTD26's gmt_create has whole seconds), not sent in
// synchronized bursts.
var GridSteps = []float64{60, 10, 1, 0.1, 0.01, 0.001}

// Grid describes coarse timestamps that SpreadCoarse found and spread.
type Grid struct {
	// StepS is the grid step, seconds; 0 when the timestamps are not on a
	// coarse grid (or no instant is shared).
	StepS float64
	// Shared is the number of requests that shared their timestamp with
	// another before spreading.
	Shared int
}

// String is the run header's sentence about the grid.
func (g Grid) String() string {
	if g.StepS == 0 {
		return ""
	}
	return fmt.Sprintf("Timestamps lie on a %gs grid: the %d requests sharing a timestamp were spread evenly over each %gs step (the k-th of n at t + k·%gs/n).", g.StepS, g.Shared, g.StepS, g.StepS)
}

// SpreadCoarse detects arrivals on a coarse grid (the largest step of
// GridSteps of which every arrival is a multiple, within 1 µs, when at
// least two requests share an instant) and spreads the n requests stamped
// t evenly over [t, t+step): the k-th (k = 0..n−1, in trace order) arrives
// at t + k·step/n. Order and service times are kept; the spread is
// deterministic. w.ArrivalS must be sorted.
func SpreadCoarse(w *Workload) Grid {
	a := w.ArrivalS
	shared := 0
	for i := 1; i < len(a); i++ {
		if a[i] == a[i-1] {
			shared++
			if i == 1 || a[i-1] != a[i-2] {
				shared++
			}
		}
	}
	if shared == 0 {
		return Grid{}
	}
	step := 0.0
	for _, g := range GridSteps {
		on := true
		for _, t := range a {
			if math.Abs(t/g-math.Round(t/g))*g > 1e-6 {
				on = false
				break
			}
		}
		if on {
			step = g
			break
		}
	}
	if step == 0 {
		return Grid{}
	}
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j] == a[i] {
			j++
		}
		if n := j - i; n > 1 {
			t := a[i]
			for k := range n {
				a[i+k] = t + float64(k)*step/float64(n)
			}
		}
		i = j
	}
	return Grid{StepS: step, Shared: shared}
}
