package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// HoursPerMonth converts an hourly price to a monthly one: 365 × 24 / 12.
const HoursPerMonth = 730

// NodeRelease is the audit's answer for one node.
type NodeRelease struct {
	Node    string `json:"node"`
	Release bool   `json:"release"`
	// Reason says why the node can go, or the check that keeps it.
	Reason string `json:"reason"`
	// SavingsPerMonth = pricePerHour × 730 for a released node, else 0 (USD).
	SavingsPerMonth float64 `json:"savingsPerMonth"`
}

// AuditResult is the release audit of a spec.
type AuditResult struct {
	// Release has one row per node, in spec order.
	Release []NodeRelease
	// Released counts released nodes; SavingsPerMonth sums their savings.
	Released        int
	SavingsPerMonth float64
	// Feasible is false when not even every node together can host every
	// service with every check holding; then nothing is released.
	Feasible bool
	// Proposal is the spec after the release: kept nodes with their
	// proposed layouts, every service with its replicas placed. Check
	// passes on it whenever Feasible is true.
	Proposal Spec
	// Exact is true when the result comes from the exhaustive search.
	Exact bool
}

// AuditOptions tune the heuristic audit.
type AuditOptions struct {
	// MaxRetries bounds the improvement pass: how many kept nodes are
	// re-tried for release after the first packing (each retry packs the
	// whole spec again). 0 re-tries every kept node.
	MaxRetries int
	// MaxRetryWork bounds the retries' work in GPU × service pairs (see the constant
	// MaxRetryWork); 0 means MaxRetryWork.
	MaxRetryWork int
	// noBound skips the slice bound that settles a retry without packing (tests compare
	// the two).
	noBound bool
}

// svcNeed is what the packing must give one service.
type svcNeed struct {
	idx   int
	s     Service
	whole *Product // non-nil for a whole-GPU service
	m     int      // replicas that must survive any single loss
	r     int      // replicas at least (P2)
	size  int      // memory slices of the profile, for ordering
	// kidx[productPos(p)] is the profile's index in p.Profiles, −1 where p
	// lacks it: canAdd runs for every GPU a replica passes, so the name is
	// looked up once per service, not once per GPU.
	kidx []int8
}

// productPos is p's index in Products, −1 for nil.
func productPos(p *Product) int {
	for i := range Products {
		if &Products[i] == p {
			return i
		}
	}
	return -1
}

func needs(spec Spec) []svcNeed {
	out := make([]svcNeed, len(spec.Services))
	for i, s := range spec.Services {
		n := svcNeed{idx: i, s: s, m: minReplicasAfterLoss(s), kidx: make([]int8, len(Products))}
		for j := range Products {
			n.kidx[j] = int8(Products[j].profileIndex(s.Profile))
		}
		if p, ok := LookupProduct(s.Profile); ok {
			n.whole, n.size = p, 100
		} else {
			for _, p := range Products {
				if k := p.profileIndex(s.Profile); k >= 0 {
					n.size = p.Profiles[k].MemorySlices*10 + p.Profiles[k].ComputeSlices
					break
				}
			}
		}
		n.r = 1 // every service is hosted
		if s.Tier == P2 && s.ReadyReplicas != nil && *s.ReadyReplicas > 0 {
			n.r = *s.ReadyReplicas
		}
		out[i] = n
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].size != out[b].size {
			return out[a].size > out[b].size
		}
		return out[a].s.Tier < out[b].s.Tier
	})
	return out
}

// packGPU is one GPU during packing.
type packGPU struct {
	node, gpu int
	prod      *Product
	pos       int // productPos(prod)
	tab       *layoutTable
	layout    int16
	whole     bool // taken by a whole-GPU service
	used      int  // replicas on it
	free      int  // freeMemory(), kept up to date by add
}

func (g *packGPU) canAdd(n *svcNeed) bool {
	if g.whole || g.prod == nil {
		return false
	}
	if n.whole != nil {
		return g.used == 0 && g.prod == n.whole
	}
	k := n.kidx[g.pos]
	return k >= 0 && g.tab.next[g.layout][k] >= 0
}

// freeMemory is the number of memory slices the GPU's layout leaves free.
func (g *packGPU) freeMemory() int {
	if g.whole || g.prod == nil {
		return 0
	}
	free := g.prod.MemorySlices
	for k, c := range g.tab.layouts[g.layout][:len(g.prod.Profiles)] {
		free -= int(c) * g.prod.Profiles[k].MemorySlices
	}
	return free
}

func (g *packGPU) add(n *svcNeed) {
	g.used++
	if n.whole != nil {
		g.whole = true
		g.free = 0
		return
	}
	g.layout = g.tab.next[g.layout][n.kidx[g.pos]]
	g.free = g.freeMemory()
}

type packResult struct {
	ok     bool
	reason string
	gpus   []packGPU
	// where[service] lists GPU indices (into gpus), one per replica.
	where [][]int
}

// usedNodes returns the spec indices of nodes that host a replica.
func (r *packResult) usedNodes() map[int]bool {
	u := map[int]bool{}
	for _, g := range r.gpus {
		if g.used > 0 {
			u[g.node] = true
		}
	}
	return u
}

// pack places every service on the given nodes (spec indices, most
// preferred first): largest profiles first; each replica goes to the
// failure domain holding the fewest replicas of its service (the earliest
// such domain in preference order, so that load gathers on preferred
// nodes), onto a GPU that already hosts something where one can take it;
// a service gets replicas until it has at least r and the loss of its
// fullest failure domain leaves at least m. Failure domains contain their
// nodes, so surviving any domain's loss implies surviving any node's.
//
// mode says how a GPU is chosen within the domain (see packMode); Audit
// tries the other modes when consolidating fails.
func pack(spec Spec, ns []svcNeed, nodes []int, mode packMode) packResult {
	res := packResult{where: make([][]int, len(spec.Services))}
	domainOf := map[string]int{}
	var domGPUs [][]int
	for _, ni := range nodes {
		n := spec.Nodes[ni]
		d, ok := domainOf[n.Domain()]
		if !ok {
			d = len(domGPUs)
			domainOf[n.Domain()] = d
			domGPUs = append(domGPUs, nil)
		}
		for j, g := range n.GPUs {
			p, _ := LookupProduct(g.Product)
			pg := packGPU{node: ni, gpu: j, prod: p, pos: productPos(p)}
			if p != nil {
				pg.tab = tableFor(p)
			}
			pg.free = pg.freeMemory()
			domGPUs[d] = append(domGPUs[d], len(res.gpus))
			res.gpus = append(res.gpus, pg)
		}
	}
	D := len(domGPUs)
	cnt := make([]int, D)
	domFree := make([]int, D) // free memory slices per domain (packBalance)
	for d, gs := range domGPUs {
		for _, gi := range gs {
			domFree[d] += res.gpus[gi].free
		}
	}
	// fits[profile][d] lists the GPUs of domain d that can still take a replica of profile,
	// in domain order. Whether a GPU can take a profile only goes from yes to no as replicas
	// are added (a layout with one more instance never frees room; a whole GPU once taken
	// stays taken), so a GPU that fails once is dropped for good and every scan after it
	// passes only GPUs that fit: a GPU is dropped at most once per profile per packing.
	fits := map[string][][]int{}
	built := map[string][]bool{}
	candidates := func(d int, n *svcNeed) []int {
		byDomain, ok := fits[n.s.Profile]
		if !ok {
			byDomain = make([][]int, D)
			fits[n.s.Profile] = byDomain
			built[n.s.Profile] = make([]bool, D)
		}
		if b := built[n.s.Profile]; !b[d] {
			b[d] = true
			byDomain[d] = append([]int(nil), domGPUs[d]...)
		}
		return byDomain[d]
	}
	firstRoom := map[string]int{}
	onNode := make([]int, len(spec.Nodes)) // replicas of the current service per node
	onGPU := make([]int, len(res.gpus))
	var onTouched []int // GPUs whose onGPU (and node's onNode) to reset
	room := func(d int, n *svcNeed) int {
		l := candidates(d, n)
		j := 0 // l[:j] are the GPUs kept so far
		best := -1
		switch mode {
		case packBalance:
			bfree := -1
			for _, gi := range l {
				g := &res.gpus[gi]
				if !g.canAdd(n) {
					continue
				}
				l[j] = gi
				j++
				if g.free > bfree {
					best, bfree = gi, g.free
				}
			}
		case packSpread:
			bn, bg, bused := 0, 0, false
			for _, gi := range l {
				g := &res.gpus[gi]
				if !g.canAdd(n) {
					continue
				}
				l[j] = gi
				j++
				cn, cg, used := onNode[g.node], onGPU[gi], g.used > 0
				if best < 0 || cn < bn || cn == bn && (cg < bg || cg == bg && used && !bused) {
					best, bn, bg, bused = gi, cn, cg, used
				}
			}
		default:
			for i, gi := range l {
				g := &res.gpus[gi]
				if !g.canAdd(n) {
					continue
				}
				if g.used > 0 {
					// The first used GPU that fits: keep the rest unscanned.
					j += copy(l[j:], l[i:])
					fits[n.s.Profile][d] = l[:j]
					return gi
				}
				l[j] = gi
				j++
				if best < 0 {
					best = gi
				}
			}
		}
		fits[n.s.Profile][d] = l[:j]
		return best
	}
	for k := range ns {
		n := &ns[k]
		var touched []int
		for _, gi := range onTouched {
			onGPU[gi], onNode[res.gpus[gi].node] = 0, 0
		}
		onTouched = onTouched[:0]
		placed, maxc := 0, 0
		ptr := firstRoom[n.s.Profile]
		for placed < n.r || placed-maxc < n.m {
			best, bestCnt, bestGPU, bestFree := -1, int(^uint(0)>>1), -1, -1
			for d := ptr; d < D; d++ {
				balance := mode == packBalance && cnt[d] == bestCnt
				if cnt[d] > bestCnt || cnt[d] == bestCnt && (!balance || domFree[d] <= bestFree) {
					continue
				}
				gi := room(d, n)
				if gi < 0 {
					if d == ptr {
						ptr++
					}
					continue
				}
				if mode == packBalance {
					// Among the least-loaded domains, the one with the most room.
					bestFree = domFree[d]
				}
				best, bestCnt, bestGPU = d, cnt[d], gi
				if bestCnt == 0 && mode != packBalance {
					break
				}
			}
			if best < 0 {
				mu := n.s.SafeRPSPerReplica
				switch {
				case n.s.Tier == P2:
					res.reason = fmt.Sprintf("hosting: no free %s slice for %s (P2)", n.s.Profile, n.s.Name)
				case float64(placed)*mu < n.s.PeakRPS:
					eq := fmt.Sprintf("= %d", n.m)
					if n.m >= maxReplicaNeed {
						eq = fmt.Sprintf("> %d", maxReplicaNeed)
					}
					res.reason = fmt.Sprintf("capacity: %s needs ⌈%g/%g⌉ %s %s slices and more for N+1; only %d fit", n.s.Name, n.s.PeakRPS, mu, eq, n.s.Profile, placed)
				default:
					res.reason = fmt.Sprintf("N+1: %s needs %d %s replicas left after losing any failure domain; the free %s slices span too few failure domains (%d replicas placed, %d in the fullest domain)", n.s.Name, n.m, n.s.Profile, n.s.Profile, placed, maxc)
				}
				for _, d := range touched {
					cnt[d] = 0
				}
				return res
			}
			if cnt[best] == 0 {
				touched = append(touched, best)
			}
			cnt[best]++
			maxc = max(maxc, cnt[best])
			before := res.gpus[bestGPU].free
			res.gpus[bestGPU].add(n)
			domFree[best] -= before - res.gpus[bestGPU].free
			onNode[res.gpus[bestGPU].node]++
			onGPU[bestGPU]++
			onTouched = append(onTouched, bestGPU)
			res.where[n.idx] = append(res.where[n.idx], bestGPU)
			placed++
		}
		firstRoom[n.s.Profile] = ptr
		for _, d := range touched {
			cnt[d] = 0
		}
	}
	res.ok = true
	return res
}

// packMode is how pack picks a GPU within a failure domain.
type packMode int

const (
	// packConsolidate prefers a GPU that already hosts something.
	packConsolidate packMode = iota
	// packSpread prefers the node, then the GPU, with the fewest replicas
	// of the same service.
	packSpread
	// packBalance sends a replica, among the domains with the fewest
	// replicas of its service, to the one with the most free memory
	// slices, and within it to the GPU with the most, so that small
	// profiles still find room in many domains.
	packBalance
)

// packEither packs consolidating first, then spreading, then balancing,
// and returns the first that succeeds (or the first failure).
func packEither(spec Spec, ns []svcNeed, nodes []int) packResult {
	first := pack(spec, ns, nodes, packConsolidate)
	if first.ok {
		return first
	}
	for _, m := range []packMode{packSpread, packBalance} {
		if r := pack(spec, ns, nodes, m); r.ok {
			return r
		}
	}
	return first
}

// preferenceOrder ranks nodes for keeping: most compute slices first, then
// cheapest, then spec order — so the packing fills big cheap nodes and
// leaves the rest empty.
func preferenceOrder(spec Spec) []int {
	order := make([]int, len(spec.Nodes))
	slices := make([]int, len(spec.Nodes))
	for i, n := range spec.Nodes {
		order[i] = i
		for _, g := range n.GPUs {
			if p, ok := LookupProduct(g.Product); ok {
				slices[i] += p.ComputeSlices
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		na, nb := order[a], order[b]
		if slices[na] != slices[nb] {
			return slices[na] > slices[nb]
		}
		return spec.Nodes[na].PricePerHour < spec.Nodes[nb].PricePerHour
	})
	return order
}

// Audit finds a large set of nodes that can stop billing: the remaining
// nodes, re-sliced into valid MIG layouts, host every service with
// capacity, N+1 (per node and per failure domain), P0 spread and rolling
// update headroom holding. It packs every service onto the nodes in
// preference order (see pack), releases the nodes left empty, then tries
// to release each kept node in turn, least preferred first, by packing
// again without it — unless the other kept GPUs lack the slices every
// service needs (demandBound), which settles the retry without packing, and
// until the retries have spent opt.MaxRetryWork (MaxRetryWork). A heuristic:
// AuditExact solves small specs exactly. The spec must pass Validate. Audit
// does no I/O.
func Audit(spec Spec, opt AuditOptions) AuditResult {
	ns := needs(spec)
	order := preferenceOrder(spec)
	best := packEither(spec, ns, order)
	keepReason := map[int]string{}
	if !best.ok {
		return finish(spec, best, nil, map[int]string{}, "kept: not even every node together hosts every service with every check holding: "+best.reason)
	}
	used := best.usedNodes()
	kept := make([]int, 0, len(used))
	for _, ni := range order {
		if used[ni] {
			kept = append(kept, ni)
		}
	}
	need := demandBound(ns)
	have := supplyOf(spec, kept)
	tries, work := 0, 0
	maxWork := opt.MaxRetryWork
	if maxWork <= 0 {
		maxWork = MaxRetryWork
	}
	for i := len(kept) - 1; i >= 0; i-- {
		if opt.MaxRetries > 0 && tries >= opt.MaxRetries {
			break
		}
		tries++
		cand := kept[i]
		// A packing without cand takes at least need (demandBound); when the other kept GPUs
		// offer less, no packing exists and none is tried. After a tight first packing this
		// settles most retries at no cost (at 10,000 nodes × 5,000 services, all but a few).
		if why := need.exceeds(have.minus(supplyOf(spec, []int{cand}))); why != "" && !opt.noBound {
			keepReason[cand] = "kept: without it " + why
			continue
		}
		// Each retry packs every service onto the trial's GPUs, up to three times: its work
		// grows with GPUs × services, and past MaxRetryWork in all the rest are kept unretried.
		cost := (have.gpus - len(spec.Nodes[cand].GPUs)) * len(ns)
		if work+cost > maxWork {
			for _, ni := range kept[:i+1] {
				if keepReason[ni] == "" {
					keepReason[ni] = fmt.Sprintf("kept: not re-tried: the release audit's retries spent their work bound (%g GPU × service pairs, ledger.MaxRetryWork)", float64(maxWork))
				}
			}
			break
		}
		work += cost
		trial := make([]int, 0, len(kept)-1)
		for _, ni := range kept {
			if ni != cand {
				trial = append(trial, ni)
			}
		}
		r := packEither(spec, ns, trial)
		if !r.ok {
			keepReason[cand] = "kept: without it, " + r.reason
			continue
		}
		best = r
		u := r.usedNodes()
		next := trial[:0]
		for _, ni := range trial {
			if u[ni] {
				next = append(next, ni)
			}
		}
		kept = next
		have = supplyOf(spec, kept)
		if i > len(kept) {
			i = len(kept)
		}
	}
	return finish(spec, best, best.usedNodes(), keepReason, "")
}

// MaxRetryWork bounds the release audit's improvement pass: the retries stop once they have
// packed this many GPU × service pairs in all (each retry counts the trial's GPUs × the
// services). The first packing is never cut; a node not re-tried is kept, with that reason.
// Retries cost up to about 3.5 ns per pair on the shared 2-core development machine, so 4e9
// is about 15 s (docs/ledger.md has the measurements). A retry of the seeded 1,000 nodes ×
// 8 GPUs × 500 services packs the ~80 kept nodes' 640 GPUs × 500 = 3.2e5 pairs, so such specs
// stay far below it.
const MaxRetryWork = 4e9

// slices sums what replicas take or GPUs offer: compute and memory slices, and atLeast[c],
// the number of instances of c or more compute slices (c in 1…7).
type slices struct {
	compute, memory, gpus int
	atLeast               [8]int
}

func (a slices) minus(b slices) slices {
	a.compute, a.memory, a.gpus = a.compute-b.compute, a.memory-b.memory, a.gpus-b.gpus
	for c := range a.atLeast {
		a.atLeast[c] -= b.atLeast[c]
	}
	return a
}

// exceeds says why the demand d cannot fit the supply s, or "" when no bound rules it out.
func (d slices) exceeds(s slices) string {
	switch {
	case d.compute > s.compute:
		return fmt.Sprintf("the kept GPUs have %d compute slices; the services need at least %d (the replicas N+1 and hosting require, at their profiles' slices)", s.compute, d.compute)
	case d.memory > s.memory:
		return fmt.Sprintf("the kept GPUs have %d memory slices; the services need at least %d (the replicas N+1 and hosting require, at their profiles' slices)", s.memory, d.memory)
	}
	for c := 2; c < len(d.atLeast); c++ {
		if d.atLeast[c] > s.atLeast[c] {
			return fmt.Sprintf("the kept GPUs hold at most %d instances of %d or more compute slices (⌊7/%d⌋ per GPU); the services need at least %d", s.atLeast[c], c, c, d.atLeast[c])
		}
	}
	return ""
}

// demandBound is the least a packing of ns takes: each service needs at least r replicas
// and, with m > 0, m + 1 (the loss of its fullest failure domain must leave m), each taking
// its profile's compute slices (the g count, the same on every product) and at least the
// fewest memory slices any product gives the profile; a whole-GPU replica takes its
// product's whole GPU. A GPU of C compute slices holds at most ⌊C/c⌋ instances of c or more,
// which bounds the large profiles (one 4g.40gb per GPU) where the sums alone do not.
func demandBound(ns []svcNeed) slices {
	var d slices
	for _, n := range ns {
		r := n.r
		if n.m > 0 {
			r = max(r, n.m+1)
		}
		c, m := 0, 0
		if n.whole != nil {
			c, m = n.whole.ComputeSlices, n.whole.MemorySlices
		} else {
			for i := range Products {
				if k := n.kidx[i]; k >= 0 {
					pr := Products[i].Profiles[k]
					if c == 0 || pr.MemorySlices < m {
						m = pr.MemorySlices
					}
					c = pr.ComputeSlices
				}
			}
		}
		d.compute += r * c
		d.memory += r * m
		for k := 1; k <= c && k < len(d.atLeast); k++ {
			d.atLeast[k] += r
		}
	}
	return d
}

// supplyOf is what the nodes' GPUs of known products offer.
func supplyOf(spec Spec, nodes []int) slices {
	var s slices
	for _, ni := range nodes {
		for _, g := range spec.Nodes[ni].GPUs {
			if p, ok := LookupProduct(g.Product); ok {
				s.compute += p.ComputeSlices
				s.memory += p.MemorySlices
				s.gpus++
				for c := 1; c < len(s.atLeast); c++ {
					s.atLeast[c] += p.ComputeSlices / c
				}
			}
		}
	}
	return s
}

// finish turns a packing into the audit's rows and proposal. used == nil
// means the packing failed and every node is kept with failReason.
func finish(spec Spec, best packResult, used map[int]bool, keepReason map[int]string, failReason string) AuditResult {
	res := AuditResult{Feasible: used != nil}
	for i, n := range spec.Nodes {
		row := NodeRelease{Node: n.Name}
		switch {
		case used == nil:
			row.Reason = failReason
		case !used[i]:
			row.Release = true
			row.SavingsPerMonth = n.PricePerHour * HoursPerMonth
			row.Reason = "released: the kept nodes host every service with every check holding"
			res.Released++
			res.SavingsPerMonth += row.SavingsPerMonth
		case keepReason[i] != "":
			row.Reason = keepReason[i]
		default:
			row.Reason = "kept: hosts " + joinNames(hostedOn(spec, best, i))
		}
		res.Release = append(res.Release, row)
	}
	if used == nil {
		return res
	}
	res.Proposal = proposal(spec, best, used)
	return res
}

func hostedOn(spec Spec, r packResult, node int) []string {
	var names []string
	for si, gs := range r.where {
		for _, gi := range gs {
			if r.gpus[gi].node == node {
				names = append(names, spec.Services[si].Name)
				break
			}
		}
	}
	return names
}

// proposal builds the post-release spec from a packing: each kept GPU with
// the layout the packing gave it (an unused GPU whole, MIG disabled), each
// service with readyReplicas and placement set.
func proposal(spec Spec, r packResult, used map[int]bool) Spec {
	var out Spec
	gpuAt := map[[2]int]*packGPU{}
	for i := range r.gpus {
		g := &r.gpus[i]
		gpuAt[[2]int{g.node, g.gpu}] = g
	}
	for i, n := range spec.Nodes {
		if !used[i] {
			continue
		}
		nn := Node{Name: n.Name, FailureDomain: n.FailureDomain, PricePerHour: n.PricePerHour}
		for j, g := range n.GPUs {
			pg := gpuAt[[2]int{i, j}]
			ng := GPU{Product: g.Product}
			if pg != nil && pg.prod != nil && !pg.whole && pg.used > 0 {
				ng.MIG = pg.prod.layoutNames(pg.tab.layouts[pg.layout])
			}
			nn.GPUs = append(nn.GPUs, ng)
		}
		out.Nodes = append(out.Nodes, nn)
	}
	for si, s := range spec.Services {
		ns := s
		ns.Placement = nil
		for _, gi := range r.where[si] {
			ns.Placement = append(ns.Placement, spec.Nodes[r.gpus[gi].node].Name)
		}
		k := len(ns.Placement)
		ns.ReadyReplicas = &k
		out.Services = append(out.Services, ns)
	}
	return out
}

// MigConfigName is the mig-parted config name of a node's proposed layout,
// also the value of its nvidia.com/mig.config label: "ledger-<node>", or,
// where that exceeds a label value's 63 characters (Kubernetes' limit; a
// node name may have 253), "ledger-" + the name's first 46 characters + "-"
// + the first 8 hex digits of the name's SHA-256, so distinct nodes keep
// distinct configs.
func MigConfigName(node string) string {
	const maxLabelValue = 63
	name := "ledger-" + node
	if len(name) <= maxLabelValue {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	return "ledger-" + node[:maxLabelValue-len("ledger-")-9] + "-" + hex.EncodeToString(sum[:4])
}

// MigPartedConfig renders the proposal's layouts as a mig-parted
// configuration file (NVIDIA's `version: v1` / `mig-configs:` format): one
// config per kept node, named MigConfigName(node) ("ledger-<node>"), with
// one device entry per GPU. Select it on a node with the label
// nvidia.com/mig.config=<that name>.
func MigPartedConfig(p Spec) string {
	var b strings.Builder
	b.WriteString("version: v1\nmig-configs:\n")
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "  %q:\n", MigConfigName(n.Name))
		for j, g := range n.GPUs {
			fmt.Fprintf(&b, "    - devices: [%d]\n", j)
			if len(g.MIG) == 0 {
				b.WriteString("      mig-enabled: false\n")
				continue
			}
			b.WriteString("      mig-enabled: true\n      mig-devices:\n")
			c := map[string]int{}
			var names []string
			for _, m := range g.MIG {
				if c[m] == 0 {
					names = append(names, m)
				}
				c[m]++
			}
			for _, m := range names {
				fmt.Fprintf(&b, "        %q: %d\n", m, c[m])
			}
		}
	}
	return b.String()
}
