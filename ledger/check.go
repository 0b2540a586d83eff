package ledger

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Verdicts of a service row.
const (
	VerdictPass   = "pass"
	VerdictFail   = "fail"
	VerdictExempt = "exempt"
)

// ServiceResult is one row of the ledger.
type ServiceResult struct {
	Name    string `json:"name"`
	Tier    Tier   `json:"tier"`
	Profile string `json:"profile"`
	// PeakRPS is the demand to meet, requests per second.
	PeakRPS float64 `json:"peakRPS"`
	// CapacityRPS = replicas × safeRPSPerReplica.
	CapacityRPS float64 `json:"capacityRPS"`
	// CapacityAfterWorstLossRPS = (replicas − replicas in the worst failure
	// domain or node) × safeRPSPerReplica.
	CapacityAfterWorstLossRPS float64 `json:"capacityAfterWorstLossRPS"`
	// WorstLoss names the failure domain or node whose loss leaves the
	// least capacity; empty when the service has no replicas.
	WorstLoss string `json:"worstLoss"`
	// Verdict is pass, fail (a check broke; see Reasons) or exempt (P2).
	Verdict string `json:"verdict"`

	// Replicas placed, and the distinct nodes and GPUs they sit on.
	Replicas int `json:"-"`
	Nodes    int `json:"-"`
	GPUs     int `json:"-"`
	// RollingRPS is the capacity while one replica is replaced,
	// (replicas − 1) × safeRPSPerReplica.
	RollingRPS float64 `json:"-"`
	// Surge is true when a free slice could take a surged replica instead.
	Surge bool `json:"-"`
	// Reasons name each failed check with its numbers.
	Reasons []string `json:"-"`
	// Where lists the node of each replica.
	Where []string `json:"-"`
}

// LayoutResult is the MIG layout check of one GPU.
type LayoutResult struct {
	Node   string   `json:"node"`
	GPU    int      `json:"gpu"`
	Valid  bool     `json:"valid"`
	Reason string   `json:"reason"`
	MIG    []string `json:"-"`
	// Product is the canonical product name ("" if unknown).
	Product string `json:"-"`
}

// CheckResult is the ledger of the spec as it stands.
type CheckResult struct {
	// OK is true when every layout is valid and no P0/P1 service fails.
	OK       bool
	Services []ServiceResult
	Layouts  []LayoutResult
}

// rpsEpsilon absorbs float rounding in capacity ≥ peak (e.g. 3 × 0.1).
const rpsEpsilon = 1e-9

func meets(capacity, peak float64) bool {
	return capacity >= peak-rpsEpsilon*math.Max(1, peak)
}

// minReplicasAfterLoss is the fewest replicas that must survive any loss:
// ⌈peak / safe⌉, at least 1 for P0 (a pinned service is never lost with a
// failure domain), 0 for P2; at most maxReplicaNeed.
func minReplicasAfterLoss(s Service) int {
	if s.Tier == P2 {
		return 0
	}
	m := 0
	if s.PeakRPS > 0 && s.SafeRPSPerReplica > 0 {
		ratio := math.Ceil(s.PeakRPS/s.SafeRPSPerReplica - rpsEpsilon)
		if !(ratio < maxReplicaNeed) { // past int (or +Inf): as unmeetable as the cap
			return maxReplicaNeed
		}
		m = int(ratio)
		if !meets(float64(m)*s.SafeRPSPerReplica, s.PeakRPS) {
			m++
		}
	}
	if s.Tier == P0 && m < 1 {
		m = 1
	}
	return m
}

// slot is one MIG instance or whole GPU of the current layout.
type slot struct {
	node, gpu int
	profile   string   // MIG profile, or "" for a whole GPU
	product   *Product // the GPU's product
	used      bool
}

// need is what one replica of a service asks of a slot: a MIG profile, or a
// whole GPU of a product. Check looks the product up once per service, not once
// per slot it passes.
type need struct {
	profile string
	whole   *Product // non-nil: a whole GPU of this product
}

func needOf(s Service) need {
	if p, ok := LookupProduct(s.Profile); ok {
		return need{whole: p} // one key per product, however the name is spelled
	}
	return need{profile: s.Profile}
}

// fits reports whether a replica of w can run in the slot, and whether the
// match is exact (a MIG service in a whole GPU fits, but is not exact).
func (sl *slot) fits(w need) (ok, exact bool) {
	if sl.profile != "" {
		return sl.profile == w.profile, true
	}
	if w.whole != nil {
		return w.whole == sl.product, true
	}
	return sl.product.HasProfile(w.profile), false
}

// Check evaluates the spec as it stands: every GPU's MIG layout, and per
// service capacity, N+1 over each node and each failure domain, P0 spread,
// and release headroom. Services without placement are placed by the
// ledger (P0 first, spread across failure domains). The spec must pass
// Validate. Check does no I/O.
func Check(spec Spec) CheckResult {
	res := CheckResult{OK: true}
	var slots []*slot
	byNode := make([][]*slot, len(spec.Nodes))
	nodeIndex := map[string]int{}
	domainIndex := map[string]int{}
	nodeDomain := make([]int, len(spec.Nodes))
	for i, n := range spec.Nodes {
		nodeIndex[n.Name] = i
		d, ok := domainIndex[n.Domain()]
		if !ok {
			d = len(domainIndex)
			domainIndex[n.Domain()] = d
		}
		nodeDomain[i] = d
		for j, g := range n.GPUs {
			lr := LayoutResult{Node: n.Name, GPU: j, MIG: g.MIG}
			p, ok := LookupProduct(g.Product)
			if !ok {
				lr.Reason = fmt.Sprintf("unknown product %q", g.Product)
			} else {
				lr.Product = p.Name
				lr.Valid, lr.Reason = p.CheckLayout(g.MIG)
			}
			if !lr.Valid {
				res.OK = false
			}
			res.Layouts = append(res.Layouts, lr)
			if !lr.Valid {
				continue // an invalid layout hosts nothing
			}
			if len(g.MIG) == 0 {
				sl := &slot{node: i, gpu: j, product: p}
				slots, byNode[i] = append(slots, sl), append(byNode[i], sl)
			}
			for _, m := range g.MIG {
				sl := &slot{node: i, gpu: j, profile: m, product: p}
				slots, byNode[i] = append(slots, sl), append(byNode[i], sl)
			}
		}
	}
	domainNames := make([]string, len(domainIndex))
	for name, d := range domainIndex {
		domainNames[d] = name
	}

	// Pinned placements first, then the ledger places the rest by tier.
	order := make([]int, len(spec.Services))
	for i := range order {
		order[i] = i
	}
	tierRank := map[Tier]int{P0: 0, P1: 1, P2: 2}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := spec.Services[order[a]], spec.Services[order[b]]
		pa, pb := len(sa.Placement) > 0, len(sb.Placement) > 0
		if pa != pb {
			return pa
		}
		return tierRank[sa.Tier] < tierRank[sb.Tier]
	})
	take := func(node int, s need) *slot {
		var loose *slot
		// Used slots stay used: drop them from the node's list as they are passed.
		l, j := byNode[node], 0
		defer func() { byNode[node] = l[:j] }()
		for i, sl := range l {
			if sl.used {
				continue
			}
			l[j] = sl
			j++
			if ok, exact := sl.fits(s); ok {
				if exact {
					j += copy(l[j:], l[i+1:])
					return sl
				}
				if loose == nil {
					loose = sl
				}
			}
		}
		return loose
	}
	// fitNodes[w] lists, in spec order, the nodes that may still have a free slot for w:
	// slots only get used, so a node without one never gets one again and is dropped
	// when a scan finds so.
	fitNodes := map[need][]int{}
	nodesFor := func(w need) []int {
		l, ok := fitNodes[w]
		if !ok {
			l = make([]int, len(spec.Nodes))
			for i := range l {
				l[i] = i
			}
		}
		return l
	}
	placed := make([][]*slot, len(spec.Services))
	var reasons = make([][]string, len(spec.Services))
	// perDomain and perNode count the current service's replicas; touched lists
	// what to reset before the next service.
	perDomain := make([]int, len(domainIndex))
	perNode := make([]int, len(spec.Nodes))
	var touched []int
	for _, si := range order {
		s := spec.Services[si]
		w := needOf(s)
		if len(s.Placement) > 0 {
			for _, name := range s.Placement {
				sl := take(nodeIndex[name], w)
				if sl == nil {
					reasons[si] = append(reasons[si], fmt.Sprintf("placement: no free %s slice on %s", s.Profile, name))
					continue
				}
				sl.used = true
				placed[si] = append(placed[si], sl)
			}
			continue
		}
		want := -1 // until the checks hold
		if s.ReadyReplicas != nil {
			want = *s.ReadyReplicas
		} else if s.Tier == P2 {
			want = 1
		}
		m := minReplicasAfterLoss(s)
		for _, i := range touched {
			perNode[i], perDomain[nodeDomain[i]] = 0, 0
		}
		touched = touched[:0]
		maxDomain, nodesUsed := 0, 0
		for {
			n := len(placed[si])
			if want >= 0 && n >= want {
				break
			}
			if want < 0 && n > 0 && n-maxDomain >= m && (s.Tier != P0 || nodesUsed >= 2) {
				break
			}
			var best *slot
			bd, bn := math.MaxInt, math.MaxInt
			cand := nodesFor(w)
			j := 0 // cand[:j]: the nodes that may still fit w
			for _, i := range cand {
				d := nodeDomain[i]
				cd, cn := perDomain[d], perNode[i]
				if cd > bd || (cd == bd && cn >= bn) {
					cand[j] = i
					j++
					continue
				}
				if sl := take(i, w); sl != nil {
					best, bd, bn = sl, cd, cn
					cand[j] = i
					j++
				}
			}
			fitNodes[w] = cand[:j]
			if best == nil {
				if want >= 0 {
					reasons[si] = append(reasons[si], fmt.Sprintf("placement: only %d of %d replicas have a free %s slice", n, want, s.Profile))
				}
				break
			}
			best.used = true
			placed[si] = append(placed[si], best)
			if perNode[best.node] == 0 {
				nodesUsed++
				touched = append(touched, best.node)
			}
			perDomain[nodeDomain[best.node]]++
			perNode[best.node]++
			maxDomain = max(maxDomain, perDomain[nodeDomain[best.node]])
		}
	}

	inSpec := map[*Product]bool{} // the products of the spec's GPUs, whatever their layout
	for _, n := range spec.Nodes {
		for _, g := range n.GPUs {
			if p, ok := LookupProduct(g.Product); ok {
				inSpec[p] = true
			}
		}
	}
	// Whether a free slot fits depends only on the need: one scan per distinct need.
	freeFor := map[need]bool{}
	free := func(s Service) bool {
		w := needOf(s)
		if f, ok := freeFor[w]; ok {
			return f
		}
		f := false
		for _, sl := range slots {
			if ok, _ := sl.fits(w); ok && !sl.used {
				f = true
				break
			}
		}
		freeFor[w] = f
		return f
	}
	for si, s := range spec.Services {
		r := ServiceResult{Name: s.Name, Tier: s.Tier, Profile: s.Profile, PeakRPS: s.PeakRPS, Reasons: reasons[si]}
		if why := unoffered(s.Profile, inSpec); why != "" { // the root cause first: no layout can host it
			r.Reasons = append([]string{why}, r.Reasons...)
		}
		perDomain, perNode, perGPU := map[int]int{}, map[int]int{}, map[[2]int]int{}
		for _, sl := range placed[si] {
			perDomain[nodeDomain[sl.node]]++
			perNode[sl.node]++
			perGPU[[2]int{sl.node, sl.gpu}]++
			r.Where = append(r.Where, spec.Nodes[sl.node].Name)
		}
		n := len(placed[si])
		mu := s.SafeRPSPerReplica
		r.Replicas, r.Nodes, r.GPUs = n, len(perNode), len(perGPU)
		r.CapacityRPS = float64(n) * mu
		r.CapacityAfterWorstLossRPS = r.CapacityRPS
		// The worst loss: the fullest failure domain (the first in spec order on a
		// tie), then a node only if it holds more (a domain holds its nodes).
		worst, wd := -1, -1
		for d, c := range perDomain {
			if c > worst || c == worst && d < wd {
				worst, wd = c, d
			}
		}
		if wd >= 0 {
			r.WorstLoss = domainNames[wd]
		}
		wn := -1
		for i, c := range perNode {
			if c > worst || wn >= 0 && c == worst && i < wn {
				worst, wn = c, i
			}
		}
		if wn >= 0 {
			r.WorstLoss = spec.Nodes[wn].Name
		}
		if worst > 0 {
			r.CapacityAfterWorstLossRPS = float64(n-worst) * mu
		}
		if n > 0 {
			r.RollingRPS = float64(n-1) * mu
		}
		r.Surge = free(s)
		if s.Tier == P2 {
			r.Verdict = VerdictExempt
			if n == 0 {
				r.Reasons = append(r.Reasons, fmt.Sprintf("hosted nowhere: no free %s slice", s.Profile))
			}
			res.Services = append(res.Services, r)
			continue
		}
		if s.Refused {
			r.Reasons = append(r.Reasons, "admission: the admission record's verdict does not allow this model on "+s.Profile)
		}
		if !meets(r.CapacityRPS, s.PeakRPS) {
			r.Reasons = append(r.Reasons, fmt.Sprintf("capacity: %d × %g = %g RPS < peak %g", n, mu, r.CapacityRPS, s.PeakRPS))
		}
		if n > 0 && !meets(r.CapacityAfterWorstLossRPS, s.PeakRPS) {
			r.Reasons = append(r.Reasons, fmt.Sprintf("N+1: losing %s leaves %d × %g = %g RPS < peak %g", r.WorstLoss, n-worst, mu, r.CapacityAfterWorstLossRPS, s.PeakRPS))
		}
		if s.Tier == P0 && n > 0 {
			switch {
			case r.GPUs < 2:
				r.Reasons = append(r.Reasons, fmt.Sprintf("P0 spread: all %d replicas on one GPU of %s", n, r.Where[0]))
			case r.Nodes < 2:
				r.Reasons = append(r.Reasons, fmt.Sprintf("P0 spread: all %d replicas on node %s", n, r.Where[0]))
			}
		}
		if n > 0 && !meets(r.RollingRPS, s.PeakRPS) && !r.Surge {
			r.Reasons = append(r.Reasons, fmt.Sprintf("headroom: a rolling update leaves %d × %g = %g RPS < peak %g and no free %s slice to surge into", n-1, mu, r.RollingRPS, s.PeakRPS, s.Profile))
		}
		r.Verdict = VerdictPass
		if len(r.Reasons) > 0 {
			r.Verdict = VerdictFail
			res.OK = false
		}
		res.Services = append(res.Services, r)
	}
	return res
}

// unoffered explains why no GPU of the spec's products (inSpec) can ever host a replica of
// profile — a MIG profile none of them offers, or a whole GPU of a product the spec lacks —
// naming the products that would; "" when one of them can, in some layout.
func unoffered(profile string, inSpec map[*Product]bool) string {
	if want, whole := LookupProduct(profile); whole {
		if inSpec[want] {
			return ""
		}
		return fmt.Sprintf("profile: no GPU in the spec is a %s (the spec's GPUs: %s)", want.Name, productList(inSpec))
	}
	for p := range inSpec {
		if p.HasProfile(profile) {
			return ""
		}
	}
	return fmt.Sprintf("profile: no GPU in the spec offers MIG profile %s (a profile of %s; the spec's GPUs: %s)",
		profile, strings.Join(productsWithProfile(profile), ", "), productList(inSpec))
}

// productList names the products, sorted; "none" for none.
func productList(ps map[*Product]bool) string {
	names := make([]string, 0, len(ps))
	for p := range ps {
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// joinNames lists names for a reason, at most five then a count.
func joinNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

// maxReplicaNeed caps minReplicasAfterLoss: ⌈peakRPS / safeRPSPerReplica⌉ of two in-range
// figures reaches 10^309 (+Inf), which converted to int wrapped to math.MinInt64 and needed
// no replica at all. 2^40 is past any spec's slices (MaxNodes × 64 GPUs × 7 instances is
// under 5·10^6), so a capped need is as unmeetable as the true one, and sums of it over
// MaxServices services stay far inside int64.
const maxReplicaNeed = 1 << 40
