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
// Cut the trace into windows of L whole seconds, (K+1)·L + SLO ≤ C (C the
// shortest cold start, K ≥ 1). Let R_w be the largest number of ready
// replicas a schedule has during window w's span [w·L, (w+1)·L + SLO].
//
//  1. Misses. A request arriving in window w that meets the SLO starts
//     within the span, on a slot of a ready replica. Under FIFO dispatch a
//     request's start never gets later when servers are added or earlier
//     work is removed (the Kiefer–Wolfowitz workload recursion is
//     monotone), so the window's requests replayed alone, on R_w replicas
//     ready throughout and idle at w·L, miss the SLO no more often than in
//     the schedule: misses ≥ Σ_w m_w(R_w), m_w(R) that isolated replay's
//     miss count.
//  2. Cost. A replica ready at some τ in the span started at or before
//     τ − C and is billed from its start, so at least R_w replicas are
//     billed throughout [(w+1)·L + SLO − C, w·L] ⊇ ((w−K)·L, w·L]. The
//     piece ((v−1)·L, v·L] therefore bills at least max(R_v, …, R_{v+K−1})
//     replicas: billed replica-time ≥ Σ_{v≥1} L·max(R_v, …, R_{v+K−1}).
//  3. Before C nothing new is ready: R_w ≤ InitialReplicas for every
//     window whose span ends before C.
//
// So GPU-time ≥ min over R of Σ_v L·max(R_v…R_{v+K−1}) subject to
// Σ_w m_w(R_w) ≤ (1 − q)·N. Its Lagrangian dual,
// max over λ ≥ 0 of [min over R of Σ_v L·max(…) + λ·Σ_w m_w(R_w)] − λ(1 − q)N,
// computed exactly by dynamic programming over windows (state: the last
// K−1 counts), is a lower bound on that minimum; so is Σ service ÷ slots
// (every request is served on one slot). The bound is the largest of these
// over K = 1, 2, 3 (K = 2, 3 only where the state space is small). In
// binned mode m_w is the fluid model's miss count, monotone the same way.

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
	// cand are the counts worth considering: 0 and lo..min(cap, lo+len).
	cand []int
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
	// WindowS is L, seconds, and K the pieces per span; WindowS 0 when the
	// cold start is too short for the coverage argument (then only the
	// work bound applies).
	WindowS float64
	K       int
	// ReplicaSeconds is the bound; WorkReplicaSeconds the Σ service ÷ slots
	// part, CoverReplicaSeconds the dual part.
	ReplicaSeconds, WorkReplicaSeconds, CoverReplicaSeconds float64
	// Lambda is the dual's maximiser, replica-seconds per miss.
	Lambda float64
	// Unreachable is set when no schedule within the pool's bounds can meet
	// the SLO: even with every window at its largest allowed count
	// (MaxReplicas, and the initial pool before the first cold start ends)
	// the isolated replays miss MinMisses > (1 − q)·N requests, a lower
	// bound on any schedule's misses (fact 1). The constrained minimum is
	// then over no schedule and the dual grows without limit, so the bound
	// is the work bound alone (ReplicaSeconds = WorkReplicaSeconds,
	// CoverReplicaSeconds 0). MissBudget is (1 − q)·N.
	Unreachable           bool
	MinMisses, MissBudget float64
	// dual is the dual's best value, replica-seconds (CoverReplicaSeconds
	// but when Unreachable); bestBound keeps the K with the largest.
	dual   float64
	tables []windowTable
}

// missFunc replays window w alone on r replicas and counts misses.
type missFunc func(w, r int) float64

// coldMin is the shortest cold start, seconds.
func coldMin(cfg PoolConfig) float64 {
	if len(cfg.ColdStartSamples) > 0 {
		return slices.Min(cfg.ColdStartSamples).Seconds()
	}
	return cfg.ColdStart.Seconds()
}

// boundWindow is L for K: ⌊(C − SLO)/(K+1)⌋ s, at most 60 s.
func boundWindow(cfg PoolConfig, k int) float64 {
	return math.Min(60, math.Floor((coldMin(cfg)-cfg.SLO.Seconds())/float64(k+1)))
}

// bestBound computes the bound for K = 1, 2, 3 and keeps the largest. When
// any K shows that the SLO cannot be met (Bound.Unreachable), the bound is
// the work bound; the windows of the largest dual value are kept to seed
// the optimum's search.
func bestBound(cfg PoolConfig, windows func(L float64) (int, func(int) float64, missFunc), totalWorkS, requests float64) *Bound {
	best := &Bound{WorkReplicaSeconds: totalWorkS / float64(cfg.Slots)}
	best.ReplicaSeconds = best.WorkReplicaSeconds
	var unreachable *Bound
	for k := 1; k <= 3; k++ {
		L := boundWindow(cfg, k)
		if L < 1 {
			break
		}
		n, arr, miss := windows(L)
		b := computeBound(cfg, k, L, n, arr, miss, totalWorkS, requests)
		if b == nil {
			break
		}
		if b.Unreachable && (unreachable == nil || b.MinMisses > unreachable.MinMisses) {
			unreachable = b
		}
		if b.dual > best.dual {
			best = b
		}
	}
	if unreachable != nil {
		best.Unreachable, best.MinMisses, best.MissBudget = true, unreachable.MinMisses, unreachable.MissBudget
		best.CoverReplicaSeconds, best.ReplicaSeconds = 0, best.WorkReplicaSeconds
	}
	return best
}

// dpStates caps Σ_w (candidates)^K, the dynamic programme's work per λ.
const dpStates = 4_000_000

// computeBound builds the window tables for L and maximises the dual; nil
// when the dynamic programme for K would be too large.
func computeBound(cfg PoolConfig, k int, L float64, nWin int, arrivals func(w int) float64, miss missFunc, totalWorkS, requests float64) *Bound {
	b := &Bound{WorkReplicaSeconds: totalWorkS / float64(cfg.Slots), WindowS: L, K: k}
	cmin := coldMin(cfg)
	slo := cfg.SLO.Seconds()
	b.tables = make([]windowTable, nWin)
	for w := range nWin {
		t := &b.tables[w]
		t.n = arrivals(w)
		t.cap = cfg.MaxReplicas
		if float64(w+1)*L+slo < cmin {
			t.cap = max(cfg.InitialReplicas, cfg.MinReplicas)
		}
		if t.n > 0 {
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
		t.cand = []int{0}
		for r := max(1, t.lo); r <= min(t.cap, t.lo+len(t.miss)); r++ {
			t.cand = append(t.cand, r)
		}
	}
	if k > 1 {
		work := 0
		for w := range b.tables {
			work += int(math.Pow(float64(len(b.tables[w].cand)), float64(k)))
			if work > dpStates {
				return nil
			}
		}
	}
	budget := (1 - cfg.SLOTarget) * requests
	// The fewest misses any schedule can have: every window at its largest
	// candidate count (m is non-increasing in R). Above the budget no
	// schedule meets the SLO, and the dual below grows with λ to its
	// search cap (254,947,226 GPU-hours on the coding trace with no
	// replica ready at start and a 10-minute cold start).
	var least float64
	for w := range b.tables {
		t := &b.tables[w]
		least += t.m(t.cand[len(t.cand)-1])
	}
	b.MinMisses, b.MissBudget, b.Unreachable = least, budget, least > budget
	lo, hi := math.Log(1e-9), math.Log(1e9)
	bestV, bestL := 0.0, 0.0
	for range 80 {
		mid := (lo + hi) / 2
		v, m, _ := b.solve(math.Exp(mid), false)
		if v-math.Exp(mid)*budget > bestV {
			bestV, bestL = v-math.Exp(mid)*budget, math.Exp(mid)
		}
		if m > budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	b.CoverReplicaSeconds, b.Lambda, b.dual = bestV, bestL, bestV
	b.ReplicaSeconds = math.Max(b.WorkReplicaSeconds, bestV)
	if b.Unreachable {
		// λ is kept: the optimum's search still starts from these windows.
		b.CoverReplicaSeconds, b.ReplicaSeconds = 0, b.WorkReplicaSeconds
	}
	return b
}

// solve minimises Σ_v L·max(R_v…R_{v+K−1}) + λ·Σ_w m_w(R_w) exactly by
// dynamic programming over windows; it returns the minimum, the misses of
// the minimiser and, with path, the minimiser.
func (b *Bound) solve(lambda float64, path bool) (float64, float64, []int) {
	W := len(b.tables)
	if W == 0 {
		return 0, 0, nil
	}
	L := b.WindowS
	// piece(v, ...) is the cost of piece v ≥ 1 given the counts of windows
	// v..v+K−1; windows past the end count 0.
	switch b.K {
	case 1:
		var v, m float64
		out := make([]int, W)
		for w := range b.tables {
			t := &b.tables[w]
			cov := 0.0
			if w >= 1 {
				cov = L
			}
			best, bm, br := math.Inf(1), 0.0, 0
			for _, r := range t.cand {
				if c := float64(r)*cov + lambda*t.m(r); c < best || c == best && r > br {
					best, bm, br = c, t.m(r), r
				}
			}
			v += best
			m += bm
			out[w] = br
		}
		return v, m, out
	case 2:
		// f[i] = best cost of windows 0..w with R_w = cand[i], pieces
		// 1..w−1 paid (piece v = w−1 needs R_{w−1}, R_w).
		t0 := &b.tables[0]
		f := make([]float64, len(t0.cand))
		mm := make([]float64, len(t0.cand))
		var back [][]int32
		for i, r := range t0.cand {
			f[i], mm[i] = lambda*t0.m(r), t0.m(r)
		}
		for w := 1; w < W; w++ {
			t, tp := &b.tables[w], &b.tables[w-1]
			nf := make([]float64, len(t.cand))
			nm := make([]float64, len(t.cand))
			bk := make([]int32, len(t.cand))
			for i, r := range t.cand {
				best, bj := math.Inf(1), 0
				for j, rp := range tp.cand {
					c := f[j]
					if w-1 >= 1 {
						c += L * float64(max(rp, r))
					}
					if c < best {
						best, bj = c, j
					}
				}
				nf[i], nm[i], bk[i] = best+lambda*t.m(r), mm[bj]+t.m(r), int32(bj)
			}
			f, mm = nf, nm
			if path {
				back = append(back, bk)
			}
		}
		// Last piece v = W−1 (if ≥ 1) bills R_{W−1}.
		tl := &b.tables[W-1]
		best, bi := math.Inf(1), 0
		for i, r := range tl.cand {
			c := f[i]
			if W-1 >= 1 {
				c += L * float64(r)
			}
			if c < best {
				best, bi = c, i
			}
		}
		miss := mm[bi]
		var out []int
		if path {
			out = make([]int, W)
			i := bi
			for w := W - 1; w >= 0; w-- {
				out[w] = b.tables[w].cand[i]
				if w > 0 {
					i = int(back[w-1][i])
				}
			}
		}
		return best, miss, out
	default: // K = 3: state (R_w, R_{w−1}); piece v = w−2 needs R_{w−2..w}.
		t0 := &b.tables[0]
		if W == 1 {
			best, bm, br := math.Inf(1), 0.0, 0
			for _, r := range t0.cand {
				if c := lambda * t0.m(r); c < best {
					best, bm, br = c, t0.m(r), r
				}
			}
			return best, bm, []int{br}
		}
		t1 := &b.tables[1]
		n0, n1 := len(t0.cand), len(t1.cand)
		// f[i*nPrev+j]: R_w = cand_w[i], R_{w−1} = cand_{w−1}[j].
		f := make([]float64, n1*n0)
		mm := make([]float64, n1*n0)
		for i, r := range t1.cand {
			for j, rp := range t0.cand {
				f[i*n0+j] = lambda * (t0.m(rp) + t1.m(r))
				mm[i*n0+j] = t0.m(rp) + t1.m(r)
			}
		}
		var back [][]int32
		nPrev, nPrev2 := n1, n0
		for w := 2; w < W; w++ {
			t := &b.tables[w]
			tp, tpp := &b.tables[w-1], &b.tables[w-2]
			nc := len(t.cand)
			nf := make([]float64, nc*nPrev)
			nm := make([]float64, nc*nPrev)
			bk := make([]int32, nc*nPrev)
			for i, r := range t.cand {
				for j, rp := range tp.cand {
					best, bl := math.Inf(1), 0
					for l, rpp := range tpp.cand {
						c := f[j*nPrev2+l]
						if w-2 >= 1 {
							c += L * float64(max(rpp, rp, r))
						}
						if c < best {
							best, bl = c, l
						}
					}
					nf[i*nPrev+j] = best + lambda*t.m(r)
					nm[i*nPrev+j] = mm[j*nPrev2+bl] + t.m(r)
					bk[i*nPrev+j] = int32(bl)
				}
			}
			f, mm = nf, nm
			nPrev, nPrev2 = nc, nPrev
			if path {
				back = append(back, bk)
			}
		}
		// Remaining pieces: v = W−2 (R_{W−2}, R_{W−1}) and v = W−1 (R_{W−1}).
		tl, tp := &b.tables[W-1], &b.tables[W-2]
		best, bi, bj := math.Inf(1), 0, 0
		for i, r := range tl.cand {
			for j, rp := range tp.cand {
				c := f[i*nPrev2+j]
				if W-2 >= 1 {
					c += L * float64(max(rp, r))
				}
				c += L * float64(r)
				if c < best {
					best, bi, bj = c, i, j
				}
			}
		}
		miss := mm[bi*nPrev2+bj]
		var out []int
		if path {
			out = make([]int, W)
			i, j := bi, bj
			for w := W - 1; w >= 1; w-- {
				out[w] = b.tables[w].cand[i]
				out[w-1] = b.tables[w-1].cand[j]
				if w >= 2 {
					l := int(back[w-2][i*len(b.tables[w-1].cand)+j])
					i, j = j, l
				}
			}
		}
		return best, miss, out
	}
}

// choose returns the per-window counts minimising the Lagrangian at λ.
func (b *Bound) choose(lambda float64) []int {
	_, _, out := b.solve(lambda, true)
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

// searchOptimum looks for the cheapest plan meeting the SLO. Plans come
// from the bound's per-window choice R_w(λ·f), raised to a headroom δ over
// each window's mean load where needed: R_w = max(R_w(λ·f),
// ⌈(1+δ)·work_w ÷ (L·slots)⌉). First f = 1.5^k (k = 0…39) at δ = 0, until
// a plan meets the SLO, refined by bisection on f; if none does (the
// per-window choice may run a window slightly overloaded, and the backlog
// it leaves carries on), two repairs of the largest plan are tried and the
// cheaper kept: δ doubling from 1 % until a plan meets the SLO, refined by
// bisection on δ; and, up to 20 times, windows that still miss (and the
// one before each) raised by max(1, 1 %). Then a local search. Every plan is replayed through the same
// simulator as the policies. workS is work arriving per second.
func searchOptimum(cfg PoolConfig, b *Bound, run func(Controller, runOptions) Result, opt runOptions, seconds int, workS []float64) (Result, int) {
	lead := cfg.ColdStart.Seconds()
	if len(cfg.ColdStartSamples) > 0 {
		lead = slices.Max(cfg.ColdStartSamples).Seconds()
	}
	slo := cfg.SLO.Seconds()
	L := b.WindowS
	load := make([]float64, len(b.tables))
	for t, v := range workS {
		if w := int(float64(t) / L); w < len(load) {
			load[w] += v / (L * float64(cfg.Slots))
		}
	}
	runs := 0
	var bestR, cur []int
	eval := func(r []int) Result {
		runs++
		cur = r
		o := opt
		o.windowS = b.WindowS
		return run(&scheduleCtl{spec: planFromWindows(r, b.WindowS, slo, lead, seconds)}, o)
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
	plan := func(f, delta float64) []int {
		r := b.choose(math.Max(b.Lambda, 1e-6) * f)
		if delta > 0 {
			for w := range r {
				r[w] = min(b.tables[w].cap, max(r[w], int(math.Ceil((1+delta)*load[w]-1e-9))))
			}
		}
		return r
	}
	name := func(f, delta float64) string {
		return fmt.Sprintf("offline plan, L=%gs, K=%d, λ×%.3g, headroom %g%%", L, b.K, f, 100*delta)
	}
	try := func(f, delta float64) bool {
		res := eval(plan(f, delta))
		consider(res, name(f, delta))
		return res.MeetsSLO
	}
	prevF, hitF := 0.0, 0.0
	for k := range 40 {
		f := math.Pow(1.5, float64(k))
		if try(f, 0) {
			hitF = f
			break
		}
		prevF = f
	}
	if hitF > 0 && prevF > 0 {
		lo, hi := prevF, hitF
		for range 6 {
			mid := math.Sqrt(lo * hi)
			if try(mid, 0) {
				hi = mid
			} else {
				lo = mid
			}
		}
	}
	if !found {
		// Two repairs of the largest plan, both tried, the cheaper kept:
		// headroom δ over every window's mean load, and raising the
		// windows that still miss.
		f := math.Pow(1.5, 39)
		prevD, hitD := 0.0, 0.0
		for d := 0.01; d <= 2.6; d *= 2 {
			if try(f, d) {
				hitD = d
				break
			}
			prevD = d
		}
		if hitD > 0 {
			lo, hi := prevD, hitD
			for range 5 {
				mid := (lo + hi) / 2
				if try(f, mid) {
					hi = mid
				} else {
					lo = mid
				}
			}
		}
		r := plan(f, 0)
		for it := range 20 {
			res := eval(r)
			consider(res, fmt.Sprintf("offline plan, L=%gs, K=%d, repaired ×%d", L, b.K, it))
			if res.MeetsSLO {
				break
			}
			r = slices.Clone(r)
			for w := range r {
				if w < len(res.windowArrivals) && res.windowArrivals[w]-res.windowMet[w] > 0 {
					r[w] = min(b.tables[w].cap, r[w]+max(1, r[w]/100))
					if w > 0 {
						r[w-1] = max(r[w-1], r[w])
					}
				}
			}
		}
	}
	// Local search: lower one window at a time, largest counts first,
	// keeping a change while the plan still meets the SLO; at most
	// localSearchRuns replays, fewer on long traces (localSearchWork).
	limit := runs + min(localSearchRuns, localSearchWork/max(1, seconds))
	if found {
		r := slices.Clone(bestR)
		order := make([]int, len(r))
		for i := range order {
			order[i] = i
		}
		for pass := 0; pass < 3 && runs < limit; pass++ {
			slices.SortStableFunc(order, func(a, b int) int { return r[b] - r[a] })
			improved := false
			for _, w := range order {
				if r[w] == 0 || runs >= limit {
					continue
				}
				r[w]--
				res := eval(r)
				if res.MeetsSLO && res.ReplicaSeconds < best.ReplicaSeconds {
					consider(res, fmt.Sprintf("offline plan, L=%gs, K=%d, local search", L, b.K))
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

// localSearchRuns caps the replays of the optimum's local search;
// localSearchWork ÷ the trace's seconds caps them on long traces (about
// 400 on a 1-hour trace, 30 on a 14-day one).
const (
	localSearchRuns = 400
	localSearchWork = 40_000_000
)
