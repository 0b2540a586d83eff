package gpu

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrNoProfileMatch is wrapped by ResolveProfile when no catalog profile has the reported MIG
// slice's geometry and a memory size within MemoryTolerance of it.
var ErrNoProfileMatch = errors.New("no catalog profile matches the device's MIG profile")

// MemoryTolerance is the largest ratio between the memory figures of a reported MIG profile
// name and a catalog profile name that ResolveProfile treats as the same slice. The figure in
// NVML's name is the slice's memory rounded to GB, and it drifts with the card's total memory
// across products and drivers of one generation: 1g.10gb on H100 80GB, 1g.12gb on H100 94GB
// and 96GB, 1g.18gb on H200 141GB (ratios up to 1.2 among the 80–96 GB cards). Distinct
// profiles with the same compute slices on one card differ by at least 2× in memory (1g.10gb
// and 1g.20gb; 3g.40gb and 7g.80gb differ in compute), so 1.25 accepts the drift and never
// confuses two real profiles.
const MemoryTolerance = 1.25

// ProfileMatch is how ResolveProfile resolved a reported MIG profile name.
type ProfileMatch struct {
	// Reported is the profile as NVML named it ("1g.12gb").
	Reported string
	// Profile is the catalog's name for the same slice ("1g.10gb"); the budget and every
	// model's peakMemoryBytes entry use it.
	Profile string
	// Exact is true when the catalog names the reported profile itself.
	Exact bool
}

// profileGeometry is a MIG profile name taken apart: "[<c>c.]<g>g.<mem>gb[+attrs|-attrs]".
type profileGeometry struct {
	compute int     // compute-instance slices (the optional "<c>c." prefix); 0 when absent
	slices  int     // GPU-instance compute slices, the "g" count
	memGB   float64 // the memory figure of the name, GB
	attrs   string  // "+me", "-me", "+gfx", …; "" when none
}

func parseProfile(name string) (profileGeometry, bool) {
	var g profileGeometry
	rest := strings.ToLower(strings.TrimSpace(name))
	if i := strings.IndexAny(rest, "+-"); i >= 0 {
		rest, g.attrs = rest[:i], rest[i:]
	}
	parts := strings.Split(rest, ".")
	if len(parts) == 3 {
		c, ok := strings.CutSuffix(parts[0], "c")
		n, err := strconv.Atoi(c)
		if !ok || err != nil || n < 1 {
			return g, false
		}
		g.compute, parts = n, parts[1:]
	}
	if len(parts) != 2 {
		return g, false
	}
	s, ok := strings.CutSuffix(parts[0], "g")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 1 {
		return g, false
	}
	m, ok := strings.CutSuffix(parts[1], "gb")
	mem, err := strconv.ParseFloat(m, 64)
	if !ok || err != nil || !(mem > 0) || math.IsInf(mem, 0) {
		return g, false
	}
	g.slices, g.memGB = n, mem
	return g, true
}

// ResolveProfile returns the catalog's name for the MIG slice NVML reports as reported: the
// profile itself when catalog names it, otherwise the catalog profile with the same compute
// geometry (the "<g>g" count and any "<c>c." compute-instance prefix) whose memory figure is
// nearest the reported one, within a ratio of MemoryTolerance; a profile with the same
// attributes ("+me", …) is preferred over a nearer one without, and equal candidates resolve
// to the first in lexical order. Errors wrap ErrNoProfileMatch, naming the reported profile
// and the catalog's, when nothing matches or reported is not a MIG profile name.
//
// Catalog profiles are bare names (peakMemoryBytes keys): they do not say which GPU product a
// peak was measured on, and neither does a name itself (1g.10gb exists on A100 40GB, A100 80GB
// and H100 80GB alike). So ResolveProfile matches across products by design: an H200's 1g.18gb
// slice borrows a catalog's 1g.20gb entry measured on an H100 or A100 80GB (ratio 1.11), as an
// exact name is shared by every product that has it. What this risks is bounded: the budget
// stays the device's own memory (NVML), so a borrowed peak larger than the smaller slice makes
// the model unplaceable (plan.Catalog.Unfit; a P0 one fails CheckPinned) instead of loading it; a peak measured on the larger slice can differ
// from the model's on this one (allocator and context overhead), which only a catalog entry
// for the reported name (measured on this product) removes — and an exact entry always wins.
func ResolveProfile(reported string, catalog []string) (ProfileMatch, error) {
	if slices.Contains(catalog, reported) {
		return ProfileMatch{Reported: reported, Profile: reported, Exact: true}, nil
	}
	want, ok := parseProfile(reported)
	if !ok {
		return ProfileMatch{}, fmt.Errorf("%w: %q is not a MIG profile name ([<c>c.]<g>g.<mem>gb[+attrs]); catalog profiles: %v",
			ErrNoProfileMatch, reported, catalog)
	}
	best, bestRatio, bestAttrs := "", math.Inf(1), false
	for _, name := range slices.Sorted(slices.Values(catalog)) {
		g, ok := parseProfile(name)
		if !ok || g.slices != want.slices || g.compute != want.compute {
			continue
		}
		ratio := max(g.memGB, want.memGB) / min(g.memGB, want.memGB)
		if ratio > MemoryTolerance {
			continue
		}
		sameAttrs := g.attrs == want.attrs
		if best == "" || sameAttrs && !bestAttrs || sameAttrs == bestAttrs && ratio < bestRatio {
			best, bestRatio, bestAttrs = name, ratio, sameAttrs
		}
	}
	if best == "" {
		return ProfileMatch{}, fmt.Errorf("%w: the device reports %q and no catalog profile has %dg slices and memory within %v× of %vgb; catalog profiles: %v",
			ErrNoProfileMatch, reported, want.slices, MemoryTolerance, want.memGB, catalog)
	}
	return ProfileMatch{Reported: reported, Profile: best}, nil
}
