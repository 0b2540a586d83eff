package ledger

import "sync"

// layoutTable enumerates every valid MIG layout of one product (as
// instance counts) and, per layout and profile, the layout one more
// instance of that profile leads to (−1 where that is not valid). The
// audit packs replicas by walking it; layout 0 is the empty GPU.
type layoutTable struct {
	layouts []counts
	next    [][8]int16
	// maximal[i] is true when no profile can be added to layouts[i].
	maximal []bool
}

var (
	tablesOnce sync.Once
	tables     map[*Product]*layoutTable
)

// tableFor returns the product's layout table, built once for all products.
func tableFor(p *Product) *layoutTable {
	tablesOnce.Do(func() {
		tables = map[*Product]*layoutTable{}
		for i := range Products {
			tables[&Products[i]] = buildTable(&Products[i])
		}
	})
	return tables[p]
}

func buildTable(p *Product) *layoutTable {
	t := &layoutTable{}
	index := map[counts]int16{}
	add := func(c counts) int16 {
		if i, ok := index[c]; ok {
			return i
		}
		i := int16(len(t.layouts))
		index[c] = i
		t.layouts = append(t.layouts, c)
		t.next = append(t.next, [8]int16{-1, -1, -1, -1, -1, -1, -1, -1})
		return i
	}
	add(counts{})
	for i := 0; i < len(t.layouts); i++ { // breadth first; the slice grows
		for k := range p.Profiles {
			c := t.layouts[i]
			c[k]++
			if ok, _ := p.checkCounts(c); ok {
				j := add(c)
				t.next[i][k] = j
			}
		}
	}
	t.maximal = make([]bool, len(t.layouts))
	for i := range t.layouts {
		t.maximal[i] = true
		for k := range p.Profiles {
			if t.next[i][k] >= 0 {
				t.maximal[i] = false
			}
		}
	}
	return t
}
