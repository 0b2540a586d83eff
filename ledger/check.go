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
// failure domain), 0 for P2.
func minReplicasAfterLoss(s Service) int {
	if s.Tier == P2 {
		return 0
	}
	m := 0
	if s.PeakRPS > 0 && s.SafeRPSPerReplica > 0 {
		m = int(math.Ceil(s.PeakRPS/s.SafeRPSPerReplica - rpsEpsilon))
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

// fits reports whether a replica of s can run in the slot, and whether the
// match is exact (a MIG service in a whole GPU fits, but is not exact).
func (sl *slot) fits(s Service) (ok, exact bool) {
	if sl.profile != "" {
		return sl.profile == s.Profile, true
	}
	if p, whole := LookupProduct(s.Profile); whole {
		return p == sl.product, true
	}
	return sl.product.HasProfile(s.Profile), false
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
	take := func(node int, s Service) *slot {
		var loose *slot
		for _, sl := range byNode[node] {
			if sl.used {
				continue
			}
			if ok, exact := sl.fits(s); ok {
				if exact {
					return sl
				}
				if loose == nil {
					loose = sl
				}
			}
		}
		return loose
	}
	placed := make([][]*slot, len(spec.Services))
	var reasons = make([][]string, len(spec.Services))
	for _, si := range order {
		s := spec.Services[si]
		if len(s.Placement) > 0 {
			for _, name := range s.Placement {
				sl := take(nodeIndex[name], s)
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
		perDomain := map[int]int{}
		perNode := map[int]int{}
		for {
			n := len(placed[si])
			if want >= 0 && n >= want {
				break
			}
			if want < 0 && n > 0 && n-maxCount(perDomain) >= m && (s.Tier != P0 || len(perNode) >= 2) {
				break
			}
			var best *slot
			bd, bn := math.MaxInt, math.MaxInt
			for i := range spec.Nodes {
				d := nodeDomain[i]
				cd, cn := perDomain[d], perNode[i]
				if cd > bd || (cd == bd && cn >= bn) {
					continue
				}
				if sl := take(i, s); sl != nil {
					best, bd, bn = sl, cd, cn
				}
			}
			if best == nil {
				if want >= 0 {
					reasons[si] = append(reasons[si], fmt.Sprintf("placement: only %d of %d replicas have a free %s slice", n, want, s.Profile))
				}
				break
			}
			best.used = true
			placed[si] = append(placed[si], best)
			perDomain[nodeDomain[best.node]]++
			perNode[best.node]++
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
	free := func(s Service) bool {
		for _, sl := range slots {
			if ok, _ := sl.fits(s); ok && !sl.used {
				return true
			}
		}
		return false
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
		worst := -1
		for d := range domainNames { // failure domains first: a domain holds its nodes
			if c := perDomain[d]; c > worst && c > 0 {
				worst, r.WorstLoss = c, domainNames[d]
			}
		}
		for i, nd := range spec.Nodes {
			if c := perNode[i]; c > worst && c > 0 {
				worst, r.WorstLoss = c, nd.Name
			}
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

func maxCount(m map[int]int) int {
	best := 0
	for _, c := range m {
		best = max(best, c)
	}
	return best
}

// joinNames lists names for a reason, at most five then a count.
func joinNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}
