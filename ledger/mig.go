package ledger

import (
	"fmt"
	"sort"
	"strings"
)

// The MIG tables below are NVIDIA's, from the Multi-Instance GPU User Guide,
// chapter "Supported MIG Profiles"
// (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html):
// per product, each GPU instance profile's fraction of compute (of 7 slices)
// and memory (of 8 slices), the number of instances the product allows, and
// the memory-slice indices at which an instance may start (the guide's
// placement diagrams; `nvidia-smi mig -lgipp` prints the same start:size
// pairs). A100 40 GB and 80 GB, H100 80 GB and H200 141 GB share one geometry:
// 7 compute slices, 8 memory slices, and these placements:
//
//	1g (1/8 memory)  start 0..6   size 1   at most 7 (1 for a +me profile)
//	1g (2/8 memory)  start 0,2,4,6 size 2  at most 4
//	2g               start 0,2,4  size 2   at most 3
//	3g               start 0,4    size 4   at most 2
//	4g               start 0      size 4   at most 1
//	7g               start 0      size 8   at most 1
//
// Compute slices follow the memory placement (an instance at memory start s
// uses compute slices s .. s+g−1), so instances whose memory ranges do not
// overlap never share a compute slice either; the compute and memory totals
// are checked first only because they give the clearer reason.

// Profile is one MIG GPU instance profile of one product.
type Profile struct {
	// Name is NVIDIA's profile name, e.g. "1g.10gb".
	Name string
	// ComputeSlices is the number of the product's 7 compute slices it uses.
	ComputeSlices int
	// MemorySlices is the number of the product's 8 memory slices it uses.
	MemorySlices int
	// Starts are the memory-slice indices an instance may start at.
	Starts []int
	// MaxInstances is the most instances of this profile one GPU can hold.
	MaxInstances int
}

// Product is a MIG-capable GPU product and its profiles.
type Product struct {
	// Name is the canonical name used in specs and output, e.g. "A100-SXM4-80GB".
	Name string
	// Aliases are other names of the same part (PCIe variants, GPU Feature
	// Discovery's nvidia.com/gpu.product values without the "NVIDIA-" prefix).
	Aliases []string
	// ComputeSlices and MemorySlices are the totals one GPU has.
	ComputeSlices, MemorySlices int
	// Profiles are the product's GPU instance profiles, smallest first.
	Profiles []Profile
}

var (
	starts1 = []int{0, 1, 2, 3, 4, 5, 6}
	starts2 = []int{0, 2, 4, 6}
	starts3 = []int{0, 2, 4}
	starts4 = []int{0, 4}
	starts0 = []int{0}
)

// geometry builds the shared A100/H100/H200 profile list from the memory
// sizes in the profile names (GB of a 1/8 slice, a 2/8 slice, 4/8, 8/8).
func geometry(m1, m2, m4, m8 string) []Profile {
	return []Profile{
		{Name: "1g." + m1, ComputeSlices: 1, MemorySlices: 1, Starts: starts1, MaxInstances: 7},
		{Name: "1g." + m1 + "+me", ComputeSlices: 1, MemorySlices: 1, Starts: starts1, MaxInstances: 1},
		{Name: "1g." + m2, ComputeSlices: 1, MemorySlices: 2, Starts: starts2, MaxInstances: 4},
		{Name: "2g." + m2, ComputeSlices: 2, MemorySlices: 2, Starts: starts3, MaxInstances: 3},
		{Name: "3g." + m4, ComputeSlices: 3, MemorySlices: 4, Starts: starts4, MaxInstances: 2},
		{Name: "4g." + m4, ComputeSlices: 4, MemorySlices: 4, Starts: starts0, MaxInstances: 1},
		{Name: "7g." + m8, ComputeSlices: 7, MemorySlices: 8, Starts: starts0, MaxInstances: 1},
	}
}

// Products are the GPUs the ledger knows, from the MIG User Guide's tables
// (A100-SXM4-40GB table; "for A100-SXM4-80GB the profile names change
// according to the memory proportion"; the H100 80GB and H200 141GB tables).
var Products = []Product{
	{Name: "A100-SXM4-40GB", Aliases: []string{"A100-PCIE-40GB", "A100-40GB"},
		ComputeSlices: 7, MemorySlices: 8, Profiles: geometry("5gb", "10gb", "20gb", "40gb")},
	{Name: "A100-SXM4-80GB", Aliases: []string{"A100-80GB-PCIE", "A100-PCIE-80GB", "A100-80GB"},
		ComputeSlices: 7, MemorySlices: 8, Profiles: geometry("10gb", "20gb", "40gb", "80gb")},
	{Name: "H100-80GB-HBM3", Aliases: []string{"H100-SXM5-80GB", "H100-PCIE", "H100-PCIE-80GB", "H100-80GB"},
		ComputeSlices: 7, MemorySlices: 8, Profiles: geometry("10gb", "20gb", "40gb", "80gb")},
	{Name: "H200-141GB-HBM3E", Aliases: []string{"H200", "H200-141GB", "H200-SXM-141GB"},
		ComputeSlices: 7, MemorySlices: 8, Profiles: geometry("18gb", "35gb", "71gb", "141gb")},
}

// normalizeProduct upper-cases a product name, drops an "NVIDIA-" or
// "NVIDIA " prefix and a GPU Feature Discovery "-MIG-<profile>" suffix
// (single MIG strategy), and turns spaces into dashes.
func normalizeProduct(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	s = strings.ReplaceAll(s, " ", "-")
	s = strings.TrimPrefix(s, "NVIDIA-")
	if i := strings.Index(s, "-MIG-"); i >= 0 {
		s = s[:i]
	}
	return s
}

// LookupProduct finds a product by its canonical name or an alias,
// case-insensitively and with GPU Feature Discovery's decorations removed.
func LookupProduct(name string) (*Product, bool) {
	n := normalizeProduct(name)
	for i := range Products {
		p := &Products[i]
		if strings.ToUpper(p.Name) == n {
			return p, true
		}
		for _, a := range p.Aliases {
			if strings.ToUpper(a) == n {
				return p, true
			}
		}
	}
	return nil, false
}

// ProductNames lists the canonical product names, for error messages.
func ProductNames() []string {
	out := make([]string, len(Products))
	for i, p := range Products {
		out[i] = p.Name
	}
	return out
}

// profileIndex returns the index of a profile in p.Profiles, or −1.
func (p *Product) profileIndex(name string) int {
	for i, pr := range p.Profiles {
		if pr.Name == name {
			return i
		}
	}
	return -1
}

// HasProfile reports whether the product offers the named MIG profile.
func (p *Product) HasProfile(name string) bool { return p.profileIndex(name) >= 0 }

// productsWithProfile names the products that offer a profile.
func productsWithProfile(name string) []string {
	var out []string
	for _, p := range Products {
		if p.HasProfile(name) {
			out = append(out, p.Name)
		}
	}
	return out
}

// IsProfileName reports whether name is a MIG profile of any known product.
func IsProfileName(name string) bool { return len(productsWithProfile(name)) > 0 }

// counts is a layout as instance counts per profile index of one product.
type counts [8]int8

// layoutCounts turns profile names into counts, or returns the first name
// the product does not offer.
func (p *Product) layoutCounts(profiles []string) (counts, string) {
	var c counts
	for _, name := range profiles {
		i := p.profileIndex(name)
		if i < 0 {
			return c, name
		}
		c[i]++
	}
	return c, ""
}

// CheckLayout reports whether a GPU of product p accepts the MIG instances
// named in profiles (an empty list is a whole GPU with MIG disabled, always
// valid). The reason names the first rule broken, in this order: a profile
// the product does not offer, compute slices, memory slices, per-profile
// instance limits, and finally no valid placement.
func (p *Product) CheckLayout(profiles []string) (ok bool, reason string) {
	if len(profiles) == 0 {
		return true, ""
	}
	c, unknown := p.layoutCounts(profiles)
	if unknown != "" {
		msg := fmt.Sprintf("profile %s does not exist on %s", unknown, p.Name)
		if other := productsWithProfile(unknown); len(other) > 0 {
			msg += fmt.Sprintf(" (it is a profile of %s)", strings.Join(other, ", "))
		}
		return false, msg
	}
	return p.checkCounts(c)
}

func (p *Product) checkCounts(c counts) (bool, string) {
	compute, memory := 0, 0
	for i, n := range c[:len(p.Profiles)] {
		if n == 0 {
			continue
		}
		compute += int(n) * p.Profiles[i].ComputeSlices
		memory += int(n) * p.Profiles[i].MemorySlices
	}
	if compute > p.ComputeSlices {
		return false, fmt.Sprintf("compute slices: the layout needs %d, %s has %d", compute, p.Name, p.ComputeSlices)
	}
	if memory > p.MemorySlices {
		return false, fmt.Sprintf("memory slices: the layout needs %d, %s has %d", memory, p.Name, p.MemorySlices)
	}
	for i, n := range c[:len(p.Profiles)] {
		if int(n) > p.Profiles[i].MaxInstances {
			return false, fmt.Sprintf("instances: %d × %s, %s allows %d", n, p.Profiles[i].Name, p.Name, p.Profiles[i].MaxInstances)
		}
	}
	if !p.placeable(c) {
		return false, "placement: no valid placement of these instances exists (NVIDIA's start indices)"
	}
	return true, ""
}

// placeable searches for non-overlapping memory placements of every
// instance in c, largest profiles first, over NVIDIA's start indices.
func (p *Product) placeable(c counts) bool {
	var order []int
	for i := len(p.Profiles) - 1; i >= 0; i-- {
		for k := int8(0); k < c[i]; k++ {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		return p.Profiles[order[a]].MemorySlices > p.Profiles[order[b]].MemorySlices
	})
	var place func(k int, used uint16, minStart int) bool
	place = func(k int, used uint16, minStart int) bool {
		if k == len(order) {
			return true
		}
		pr := p.Profiles[order[k]]
		for _, s := range pr.Starts {
			// Equal profiles in increasing start order: skips permutations.
			if k > 0 && order[k-1] == order[k] && s < minStart {
				continue
			}
			mask := uint16((1<<pr.MemorySlices)-1) << s
			if s+pr.MemorySlices > p.MemorySlices || used&mask != 0 {
				continue
			}
			if place(k+1, used|mask, s+1) {
				return true
			}
		}
		return false
	}
	return place(0, 0, 0)
}

// layoutNames expands counts back into profile names, largest first.
func (p *Product) layoutNames(c counts) []string {
	var out []string
	for i := len(p.Profiles) - 1; i >= 0; i-- {
		for k := int8(0); k < c[i]; k++ {
			out = append(out, p.Profiles[i].Name)
		}
	}
	return out
}
