package replay

import (
	"container/heap"
	"math"
)

// probeOverrunS is how long past the last arrival the probe's pool goes on
// serving; a request that would start later counts as missing the SLO. It
// is the overrun simulateRequests ran the probe with.
const probeOverrunS = 3600

// probeAttainment is the share of requests (arrival seconds arr, sorted,
// service seconds svc) that start service within cfg.SLO on a fixed pool of
// slots slots served first come, first served: request i starts at
// max(arr[i], the earliest time a slot is free), the slot then busy until
// that start plus svc[i]. It is what simulateRequests gives for a static
// pool of the same slots started ready (the same float operations: start =
// the previous request's start + its service), without its per-second ticks:
// a request counts only if it starts by floor(last arrival + probeOverrunS),
// the last second that simulator replays. free is scratch space.
func probeAttainment(cfg PoolConfig, slots int, arr, svc []float64, free freeTimes) float64 {
	if len(arr) == 0 {
		return 1
	}
	slo := cfg.SLO.Seconds()
	cutoff := math.Floor(arr[len(arr)-1] + probeOverrunS)
	free = free[:0]
	met := 0
	for i, a := range arr {
		start := a
		switch {
		case len(free) < slots:
			// A slot never used yet is free from t = 0.
			heap.Push(&free, a+svc[i])
		case free[0] <= a:
			free[0] = a + svc[i]
			heap.Fix(&free, 0)
		default:
			start = free[0]
			free[0] = start + svc[i]
			heap.Fix(&free, 0)
		}
		if start-a <= slo && start <= cutoff {
			met++
		}
	}
	return float64(met) / float64(len(arr))
}

// freeTimes is a min-heap of the times slots become free, seconds.
type freeTimes []float64

func (h freeTimes) Len() int           { return len(h) }
func (h freeTimes) Less(i, j int) bool { return h[i] < h[j] }
func (h freeTimes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *freeTimes) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *freeTimes) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
