package ledger

import (
	"errors"
	"fmt"
)

// ErrTooLarge is returned by AuditExact for a spec beyond exhaustive search.
var ErrTooLarge = errors.New("spec too large for the exact audit")

// Exact search bounds: nodes, GPUs, and search steps (layout choices and
// replica allocations tried) before AuditExact gives up with ErrTooLarge.
const (
	ExactMaxNodes = 10
	ExactMaxGPUs  = 12
	ExactMaxSteps = 20_000_000
)

// option is one layout choice for a GPU in the exact search: a layout of
// the product's table (maximal over the profiles services use), or whole.
type option struct {
	layout int16
	whole  bool
}

// AuditExact answers the same question as Audit by exhaustive search, for
// small specs: for each kept-node count k from 1 up, every k-subset of the
// nodes, every combination of per-GPU layouts maximal over the profiles
// the services use (symmetric GPUs in non-decreasing order), and every
// allocation of replicas to failure domains that leaves ⌈peak/safe⌉
// replicas after any domain's loss (only minimal allocations: removing
// any replica would break the condition). It returns the fewest kept
// nodes, cheapest among equals. Errors: ErrTooLarge.
func AuditExact(spec Spec) (AuditResult, error) {
	gpus := 0
	for _, n := range spec.Nodes {
		gpus += len(n.GPUs)
	}
	if len(spec.Nodes) > ExactMaxNodes || gpus > ExactMaxGPUs {
		return AuditResult{}, fmt.Errorf("%w: %d nodes, %d GPUs (at most %d and %d)", ErrTooLarge, len(spec.Nodes), gpus, ExactMaxNodes, ExactMaxGPUs)
	}
	e := &exact{spec: spec, ns: needs(spec), kind: map[string]int{}, vectors: map[[3]int][][]int8{}}
	for _, n := range e.ns {
		if _, ok := e.kind[n.s.Profile]; !ok {
			e.kind[n.s.Profile] = len(e.kind)
		}
	}
	e.options = map[*Product][]option{}
	for i := range Products {
		e.options[&Products[i]] = e.productOptions(&Products[i])
	}
	N := len(spec.Nodes)
	for k := 1; k <= N; k++ {
		var bestSol *exactSol
		bestPrice := 0.0
		subset := make([]int, k)
		var rec func(pos, from int) error
		rec = func(pos, from int) error {
			if pos == k {
				sol, err := e.feasible(subset)
				if err != nil {
					return err
				}
				if sol == nil {
					return nil
				}
				price := 0.0
				for _, ni := range subset {
					price += spec.Nodes[ni].PricePerHour
				}
				if bestSol == nil || price < bestPrice-1e-9 {
					bestSol, bestPrice = sol, price
				}
				return nil
			}
			for i := from; i <= N-(k-pos); i++ {
				subset[pos] = i
				if err := rec(pos+1, i+1); err != nil {
					return err
				}
			}
			return nil
		}
		if err := rec(0, 0); err != nil {
			return AuditResult{}, err
		}
		if bestSol != nil {
			r := e.packFrom(bestSol)
			keep := map[int]string{}
			for ni := range r.usedNodes() {
				keep[ni] = fmt.Sprintf("kept: no set of %d nodes hosts every service with every check holding (exact search)", k-1)
			}
			res := finish(spec, r, r.usedNodes(), keep, "")
			res.Exact = true
			return res, nil
		}
	}
	res := finish(spec, packResult{}, nil, nil, "kept: not even every node together hosts every service with every check holding (exact search)")
	res.Exact = true
	return res, nil
}

type exact struct {
	spec    Spec
	ns      []svcNeed
	kind    map[string]int // service profile → kind index
	options map[*Product][]option
	vectors map[[3]int][][]int8 // (domains, m, r) → minimal allocations
	steps   int
}

// exactSol is a feasible choice: per subset GPU its option, per service
// (index into ns) its replicas per domain.
type exactSol struct {
	gpus  []exactGPU
	alloc [][]int8
	doms  int
}

type exactGPU struct {
	node, gpu, dom int
	prod           *Product
	opt            option
}

func (e *exact) productOptions(p *Product) []option {
	relevant := make([]bool, len(p.Profiles))
	whole := false
	for _, n := range e.ns {
		if n.whole == p {
			whole = true
		}
		if k := p.profileIndex(n.s.Profile); k >= 0 && n.whole == nil {
			relevant[k] = true
		}
	}
	t := tableFor(p)
	var out []option
	for i, c := range t.layouts {
		onlyRelevant, extendable := true, false
		for k, v := range c {
			if k < len(relevant) && v > 0 && !relevant[k] {
				onlyRelevant = false
			}
		}
		for k := range p.Profiles {
			if relevant[k] && t.next[i][k] >= 0 {
				extendable = true
			}
		}
		if onlyRelevant && !extendable {
			out = append(out, option{layout: int16(i)})
		}
	}
	if whole {
		out = append(out, option{whole: true})
	}
	return out
}

func (e *exact) step() error {
	e.steps++
	if e.steps > ExactMaxSteps {
		return fmt.Errorf("%w: more than %d search steps", ErrTooLarge, ExactMaxSteps)
	}
	return nil
}

// feasible searches layouts and allocations for the kept subset.
func (e *exact) feasible(subset []int) (*exactSol, error) {
	domainOf := map[string]int{}
	var gs []exactGPU
	single := map[int]bool{} // domains holding exactly one node
	domNodes := map[int]int{}
	for _, ni := range subset {
		n := e.spec.Nodes[ni]
		d, ok := domainOf[n.Domain()]
		if !ok {
			d = len(domainOf)
			domainOf[n.Domain()] = d
		}
		domNodes[d]++
		for j, g := range n.GPUs {
			p, _ := LookupProduct(g.Product)
			gs = append(gs, exactGPU{node: ni, gpu: j, dom: d, prod: p})
		}
	}
	for d, c := range domNodes {
		single[d] = c == 1
	}
	D := len(domainOf)
	K := len(e.kind)
	// symmetric[i]: GPU i may not take an option below GPU i−1's.
	symmetric := make([]bool, len(gs))
	for i := 1; i < len(gs); i++ {
		a, b := gs[i-1], gs[i]
		if a.prod != b.prod {
			continue
		}
		oneGPU := func(x exactGPU) bool { return len(e.spec.Nodes[x.node].GPUs) == 1 && single[x.dom] }
		symmetric[i] = a.node == b.node || (oneGPU(a) && oneGPU(b))
	}
	slots := make([][]int, D)
	for d := range slots {
		slots[d] = make([]int, K)
	}
	choice := make([]int, len(gs))
	var sol *exactSol
	var rec func(i int) error
	rec = func(i int) error {
		if sol != nil {
			return nil
		}
		if err := e.step(); err != nil {
			return err
		}
		if i == len(gs) {
			alloc, err := e.allocate(slots, D)
			if err != nil || alloc == nil {
				return err
			}
			sol = &exactSol{gpus: append([]exactGPU(nil), gs...), alloc: alloc, doms: D}
			return nil
		}
		g := gs[i]
		if g.prod == nil {
			return rec(i + 1)
		}
		opts := e.options[g.prod]
		from := 0
		if symmetric[i] {
			from = choice[i-1]
		}
		for oi := from; oi < len(opts); oi++ {
			choice[i] = oi
			gs[i].opt = opts[oi]
			e.addSlots(slots[g.dom], g.prod, opts[oi], +1)
			err := rec(i + 1)
			e.addSlots(slots[g.dom], g.prod, opts[oi], -1)
			if err != nil || sol != nil {
				return err
			}
		}
		return nil
	}
	if err := rec(0); err != nil {
		return nil, err
	}
	return sol, nil
}

// slotsOf returns how many replicas of kind k one option hosts.
func (e *exact) slotsOf(p *Product, o option, profile string) int {
	if o.whole {
		if q, ok := LookupProduct(profile); ok && q == p {
			return 1
		}
		return 0
	}
	if _, ok := LookupProduct(profile); ok {
		return 0
	}
	k := p.profileIndex(profile)
	if k < 0 {
		return 0
	}
	return int(tableFor(p).layouts[o.layout][k])
}

func (e *exact) addSlots(dst []int, p *Product, o option, sign int) {
	for profile, k := range e.kind {
		dst[k] += sign * e.slotsOf(p, o, profile)
	}
}

// allocate finds replicas per domain for every service within the slots.
func (e *exact) allocate(slots [][]int, D int) ([][]int8, error) {
	rem := make([][]int, D)
	for d := range rem {
		rem[d] = append([]int(nil), slots[d]...)
	}
	alloc := make([][]int8, len(e.ns))
	var rec func(i int) (bool, error)
	rec = func(i int) (bool, error) {
		if i == len(e.ns) {
			return true, nil
		}
		n := e.ns[i]
		k := e.kind[n.s.Profile]
		// Fewer slots left than the replicas the service needs (r, and m + 1 for N+1): no
		// allocation fits, and its tables are not built (10^12 replicas gave up with
		// ErrTooLarge on a two-node spec; entries past 127 wrapped in int8).
		free := 0
		for d := range rem {
			free += rem[d][k]
		}
		need := n.r
		if n.m > 0 {
			need = max(need, n.m+1)
		}
		if free < need {
			return false, nil
		}
		vs, err := e.minimalVectors(D, n.m, n.r)
		if err != nil {
			return false, err
		}
	next:
		for _, v := range vs {
			if err := e.step(); err != nil {
				return false, err
			}
			for d, c := range v {
				if int(c) > rem[d][k] {
					continue next
				}
			}
			for d, c := range v {
				rem[d][k] -= int(c)
			}
			alloc[i] = v
			ok, err := rec(i + 1)
			for d, c := range v {
				rem[d][k] += int(c)
			}
			if ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	}
	ok, err := rec(0)
	if !ok || err != nil {
		return nil, err
	}
	return alloc, nil
}

// minimalVectors lists every replicas-per-domain vector over D domains
// with at least r replicas and at least m left after removing any one
// domain's, such that removing any single replica breaks one of the two.
// No entry exceeds max(m, r): more in one domain never helps.
func (e *exact) minimalVectors(D, m, r int) ([][]int8, error) {
	key := [3]int{D, m, r}
	if v, ok := e.vectors[key]; ok {
		return v, nil
	}
	limit := max(m, r)
	total := 1
	for range D {
		total *= limit + 1
		if total > 4_000_000 {
			return nil, fmt.Errorf("%w: %d failure domains with %d replicas each", ErrTooLarge, D, limit)
		}
	}
	holds := func(v []int8) bool {
		sum, mx := 0, 0
		for _, c := range v {
			sum += int(c)
			mx = max(mx, int(c))
		}
		return sum >= r && sum-mx >= m
	}
	var out [][]int8
	v := make([]int8, D)
	var rec func(d int)
	rec = func(d int) {
		if d == D {
			if !holds(v) {
				return
			}
			for i := range v {
				if v[i] == 0 {
					continue
				}
				v[i]--
				still := holds(v)
				v[i]++
				if still {
					return
				}
			}
			out = append(out, append([]int8(nil), v...))
			return
		}
		for c := 0; c <= limit; c++ {
			v[d] = int8(c)
			rec(d + 1)
		}
		v[d] = 0
	}
	rec(0)
	e.vectors[key] = out
	return out, nil
}

// packFrom turns an exact solution into a packResult for finish.
func (e *exact) packFrom(sol *exactSol) packResult {
	res := packResult{where: make([][]int, len(e.spec.Services))}
	// free[g][kind] slots left on subset GPU g.
	free := make([]map[string]int, len(sol.gpus))
	for gi, g := range sol.gpus {
		pg := packGPU{node: g.node, gpu: g.gpu, prod: g.prod, pos: productPos(g.prod)}
		free[gi] = map[string]int{}
		if g.prod != nil {
			pg.tab = tableFor(g.prod)
			pg.layout, pg.whole = g.opt.layout, g.opt.whole
			for profile := range e.kind {
				free[gi][profile] = e.slotsOf(g.prod, g.opt, profile)
			}
		}
		res.gpus = append(res.gpus, pg)
	}
	for i, n := range e.ns {
		for d, c := range sol.alloc[i] {
			for range c {
				for gi, g := range sol.gpus {
					if g.dom == d && free[gi][n.s.Profile] > 0 {
						free[gi][n.s.Profile]--
						res.gpus[gi].used++
						res.where[n.idx] = append(res.where[n.idx], gi)
						break
					}
				}
			}
		}
	}
	res.ok = true
	return res
}
