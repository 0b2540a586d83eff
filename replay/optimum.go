package replay

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"
)

// The bound and the optimum (docs/replay.md, "Bound and optimum").
//
// Cut the trace into windows of L seconds, 2L + SLO ≤ C (C the shortest
// cold start). Let R_w be the largest number of ready replicas any
// schedule has during [w·L, (w+1)·L + SLO]. Three facts:
//
//  1. Misses. A request arriving in window w that meets the SLO starts
//     within that span, on a slot of a ready replica. Under FIFO dispatch
//     a request's start time never decreases when servers are added or
//     earlier work is removed (the Kiefer–Wolfowitz workload recursion is
//     monotone), so the window's requests replayed alone, on R_w replicas
//     that are ready throughout and idle at w·L, miss the SLO no more
//     often than in the schedule: misses ≥ Σ_w m_w(R_w), where m_w(R) is
//     that isolated replay's miss count.
//  2. Cost. A replica ready at some τ in the span was started at or
//     before τ − C and is billed from its start, so at least R_w replicas
//     are billed throughout [(w+1)·L + SLO − C, w·L] ⊇ (w·L − L, w·L].
//     These intervals are disjoint across windows, so billed replica-time
//     ≥ Σ_w R_w·L_w with L_w = min(L, w·L).
//  3. Before C nothing new is ready: R_w ≤ InitialReplicas for every
//     window whose span ends before C.
//
// So GPU-time ≥ min Σ_w R_w·L_w subject to Σ_w m_w(R_w) ≤ (1 − q)·N. Its
// Lagrangian dual, max over λ ≥ 0 of Σ_w min_R (R·L_w + λ·m_w(R)) − λ(1 − q)N,
// is a lower bound of that minimum; so is Σ service ÷ slots (every
// request is served on one slot). The bound is the larger of the two.
// In binned mode m_w is the fluid model's miss count, which is monotone
// in the same way.

// boundScanDepth limits the replica counts below the smallest miss-free
// count at which m_w is computed; below them m_w is taken as its value at
// the lowest count computed, an underestimate, so the bound stays valid.
const boundScanDepth = 64

// windowTable is one window's isolated miss counts m(R) for R in
// [lo, lo+len(miss)); m(R < lo) is taken as miss[0] and m(R ≥ lo+len) as 0.
type windowTable struct {
	lo   int
	miss []float64
	n    float64 // arrivals
	cap  int     // largest allowed R (fact 3 and MaxReplicas)
}

func (t *windowTable) m(r int) float64 {
	switch {
	case r < t.lo:
		if len(t.miss) == 0 {
			return 0
		}
		return t.miss[0]
	case r-t.lo < len(t.miss):
		return t.miss[r-t.lo]
	}
	return 0
}

// Bound is the proven lower bound and what the optimum search needs from it.
type Bound struct {
	// WindowS is L, seconds; 0 when the cold start is too short for the
	// coverage argument (then only the work bound applies).
	WindowS float64
	// ReplicaSeconds is the bound; WorkReplicaSeconds the Σ service ÷ slots
	// part, CoverReplicaSeconds the dual part.
	ReplicaSeconds, WorkReplicaSeconds, CoverReplicaSeconds float64
	// Lambda is the dual's maximiser, replica-seconds per miss.
	Lambda float64
	tables []windowTable
}

// missFunc replays window w alone on r replicas and counts misses.
type missFunc func(w, r int) float64

// boundWindow is L for the pool: ⌊(C − SLO)/2⌋ s, at most 60 s.
func boundWindow(cfg PoolConfig) float64 {
	c := cfg.ColdStart
	if len(cfg.ColdStartSamples) > 0 {
		c = slices.Min(cfg.ColdStartSamples)
	}
	return math.Min(60, math.Floor((c.Seconds()-cfg.SLO.Seconds())/2))
}

// computeBound builds the window tables and maximises the dual.
func computeBound(cfg PoolConfig, nWin int, arrivals func(w int) float64, miss missFunc, totalWorkS, requests float64) *Bound {
	b := &Bound{WorkReplicaSeconds: totalWorkS / float64(cfg.Slots)}
	b.ReplicaSeconds = b.WorkReplicaSeconds
	L := boundWindow(cfg)
	if L < 1 {
		return b
	}
	b.WindowS = L
	cmin := cfg.ColdStart.Seconds()
	if len(cfg.ColdStartSamples) > 0 {
		cmin = slices.Min(cfg.ColdStartSamples).Seconds()
	}
	slo := cfg.SLO.Seconds()
	b.tables = make([]windowTable, nWin)
	for w := range nWin {
		t := &b.tables[w]
		t.n = arrivals(w)
		t.cap = cfg.MaxReplicas
		if float64(w+1)*L+slo < cmin {
			t.cap = max(cfg.InitialReplicas, cfg.MinReplicas)
		}
		if t.n == 0 {
			continue
		}
		// Smallest miss-free count, by doubling then bisection.
		hi := 1
		for hi < cfg.MaxReplicas && miss(w, hi) > 0 {
			hi = min(cfg.MaxReplicas, 2*hi)
		}
		lo := hi / 2
		for lo+1 < hi {
			mid := (lo + hi) / 2
			if miss(w, mid) > 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
		if miss(w, hi) > 0 { // even MaxReplicas misses
			hi++
		}
		t.lo = max(0, hi-boundScanDepth)
		for r := t.lo; r < hi; r++ {
			t.miss = append(t.miss, miss(w, r))
		}
	}
	budget := (1 - cfg.SLOTarget) * requests
	dual := func(lambda float64) (float64, float64) {
		var v, m float64
		for w := range b.tables {
			t := &b.tables[w]
			cov := math.Min(L, float64(w)*L)
			best, bm := math.Inf(1), 0.0
			top := min(t.cap, t.lo+len(t.miss))
			for r := 0; r <= top; r++ {
				if c := float64(r)*cov + lambda*t.m(r); c < best {
					best, bm = c, t.m(r)
				}
			}
			v += best
			m += bm
		}
		return v - lambda*budget, m - budget
	}
	lo, hi := math.Log(1e-9), math.Log(1e9)
	bestV, bestL := 0.0, 0.0
	for range 80 {
		mid := (lo + hi) / 2
		v, g := dual(math.Exp(mid))
		if v > bestV {
			bestV, bestL = v, math.Exp(mid)
		}
		if g > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	b.CoverReplicaSeconds, b.Lambda = bestV, bestL
	b.ReplicaSeconds = math.Max(b.WorkReplicaSeconds, bestV)
	return b
}

// choose returns the per-window counts minimising R·L_w + λ·m_w(R).
func (b *Bound) choose(lambda float64) []int {
	out := make([]int, len(b.tables))
	for w := range b.tables {
		t := &b.tables[w]
		cov := math.Max(1, math.Min(b.WindowS, float64(w)*b.WindowS))
		best := math.Inf(1)
		top := min(t.cap, t.lo+len(t.miss))
		for r := 0; r <= top; r++ {
			if c := float64(r)*cov + lambda*t.m(r); c < best {
				best, out[w] = c, r
			}
		}
	}
	return out
}

// requestMiss is m_w(R) for per-request mode: the window's requests on
// R·slots FIFO servers, idle at the window start.
func requestMiss(cfg PoolConfig, w *Workload, L float64) (int, func(int) float64, missFunc) {
	nWin := int(w.DurationS()/L) + 1
	start := make([]int, nWin+1)
	k := 0
	for i := range nWin {
		for k < len(w.ArrivalS) && w.ArrivalS[k] < float64(i)*L {
			k++
		}
		start[i] = k
	}
	start[nWin] = len(w.ArrivalS)
	slo := cfg.SLO.Seconds()
	var h floatHeap
	miss := func(win, r int) float64 {
		lo, hi := start[win], start[win+1]
		c := r * cfg.Slots
		if c <= 0 {
			return float64(hi - lo)
		}
		if c >= hi-lo {
			return 0
		}
		h = h[:0]
		for range c {
			h = append(h, 0)
		}
		var m float64
		for i := lo; i < hi; i++ {
			a := w.ArrivalS[i]
			s := math.Max(a, h[0])
			if s-a > slo {
				m++
			}
			h[0] = s + w.ServiceS[i]
			heap.Fix(&h, 0)
		}
		return m
	}
	return nWin, func(i int) float64 { return float64(start[i+1] - start[i]) }, miss
}

// binnedMiss is m_w(R) for binned mode: simulateBinned's wait rule on a
// constant R·slots capacity from an empty backlog.
func binnedMiss(cfg PoolConfig, b *Binned, L float64) (int, func(int) float64, missFunc) {
	l := int(L)
	nWin := len(b.Arrivals)/l + 1
	slo := cfg.SLO.Seconds()
	arr := func(w int) float64 {
		var n float64
		for s := w * l; s < min(len(b.Arrivals), (w+1)*l); s++ {
			n += b.Arrivals[s]
		}
		return n
	}
	miss := func(w, r int) float64 {
		capS := float64(r * cfg.Slots)
		var backlog, m float64
		for s := w * l; s < min(len(b.Arrivals), (w+1)*l); s++ {
			a, wk := b.Arrivals[s], b.WorkS[s]
			if a > 0 && (capS == 0 || math.Max(0, backlog+wk/2-capS/2)/capS > slo) {
				m += a
			}
			backlog += wk - math.Min(backlog+wk, capS)
		}
		return m
	}
	return nWin, arr, miss
}

type floatHeap []float64

func (h floatHeap) Len() int           { return len(h) }
func (h floatHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h floatHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *floatHeap) Push(x any)        { *h = append(*h, x.(float64)) }
func (h *floatHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// scheduleCtl replays a per-second replica plan.
type scheduleCtl struct{ spec []int }

func (c *scheduleCtl) Interval() time.Duration { return time.Second }
func (c *scheduleCtl) Desired(s Signals) int {
	t := int(s.Now / time.Second)
	if t < len(c.spec) {
		return c.spec[t]
	}
	if s.Queue > 0 || s.Concurrency6s > 0 {
		return max(1, s.Current)
	}
	return 0
}

// planFromWindows turns ready counts per window into a per-second spec:
// at t, the largest count of any window whose span [w·L, (w+1)·L + SLO]
// meets [t, t + lead], so each replica is asked for one cold start before
// its window and kept through gaps shorter than a cold start.
func planFromWindows(r []int, L, slo, lead float64, seconds int) []int {
	spec := make([]int, seconds)
	for w, n := range r {
		if n == 0 {
			continue
		}
		from := max(0, int(math.Floor(float64(w)*L-lead)))
		to := min(seconds, int(math.Ceil(float64(w+1)*L+slo)))
		for t := from; t < to; t++ {
			spec[t] = max(spec[t], n)
		}
	}
	return spec
}

// searchOptimum looks for the cheapest plan meeting the SLO: plans from
// the bound's per-window choice at λ·f for growing f (more replicas where
// misses cost more), the first that meets the SLO refined by bisection on
// f; if none does, the largest plan is repaired by adding a replica to
// every window (and the one before it) that still misses, up to 40 times.
// Each plan is replayed through the same simulator as the policies.
func searchOptimum(cfg PoolConfig, b *Bound, run func(Controller, runOptions) Result, opt runOptions, seconds int) (Result, int) {
	lead := cfg.ColdStart.Seconds()
	if len(cfg.ColdStartSamples) > 0 {
		lead = slices.Max(cfg.ColdStartSamples).Seconds()
	}
	slo := cfg.SLO.Seconds()
	runs := 0
	var bestR, cur []int
	eval := func(r []int) Result {
		runs++
		cur = r
		o := opt
		o.windowS = b.WindowS
		res := run(&scheduleCtl{spec: planFromWindows(r, b.WindowS, slo, lead, seconds)}, o)
		return res
	}
	var best Result
	found := false
	consider := func(res Result, setting string) {
		res.Policy, res.Setting = "optimum", setting
		if res.MeetsSLO && (!found || res.ReplicaSeconds < best.ReplicaSeconds) {
			best, found = res, true
			bestR = slices.Clone(cur)
		} else if !found && (best.Policy == "" || res.Attainment() > best.Attainment()) {
			best = res
		}
	}
	lambda := math.Max(b.Lambda, 1e-6)
	prevF, hitF := 0.0, 0.0
	var lastR []int
	for k := range 40 {
		f := math.Pow(1.5, float64(k))
		r := b.choose(lambda * f)
		lastR = r
		res := eval(r)
		consider(res, fmt.Sprintf("offline plan, L=%gs, λ×%.3g", b.WindowS, f))
		if res.MeetsSLO {
			hitF = f
			break
		}
		prevF = f
	}
	if hitF > 0 && prevF > 0 {
		lo, hi := prevF, hitF
		for range 6 {
			mid := math.Sqrt(lo * hi)
			res := eval(b.choose(lambda * mid))
			consider(res, fmt.Sprintf("offline plan, L=%gs, λ×%.3g", b.WindowS, mid))
			if res.MeetsSLO {
				hi = mid
			} else {
				lo = mid
			}
		}
	}
	if !found {
		r := slices.Clone(lastR)
		for it := range 40 {
			res := eval(r)
			consider(res, fmt.Sprintf("offline plan, L=%gs, repaired ×%d", b.WindowS, it))
			if res.MeetsSLO {
				break
			}
			for w := range r {
				if w < len(res.windowArrivals) && res.windowArrivals[w]-res.windowMet[w] > 0 {
					r[w]++
					if w > 0 {
						r[w-1] = max(r[w-1], r[w])
					}
				}
			}
		}
	}
	// Local search: lower one window at a time, largest counts first,
	// keeping a change while the plan still meets the SLO; at most
	// localSearchRuns replays.
	if found {
		r := slices.Clone(bestR)
		order := make([]int, len(r))
		for i := range order {
			order[i] = i
		}
		for pass := 0; pass < 3 && runs < localSearchRuns; pass++ {
			slices.SortStableFunc(order, func(a, b int) int { return r[b] - r[a] })
			improved := false
			for _, w := range order {
				if r[w] == 0 || runs >= localSearchRuns {
					continue
				}
				r[w]--
				res := eval(r)
				if res.MeetsSLO && res.ReplicaSeconds < best.ReplicaSeconds {
					consider(res, fmt.Sprintf("offline plan, L=%gs, local search", b.WindowS))
					improved = true
				} else {
					r[w]++
				}
			}
			if !improved {
				break
			}
		}
	}
	return best, runs
}

// localSearchRuns caps the replays of the optimum's local search.
const localSearchRuns = 400
