package ledger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSplitLayoutLinear: the uneven split checks only layouts short enough to take one more
// instance, on a copy of at most 8 names; it copied the growing layout for every instance
// placed, 16 s for 100 profiles of 447 instances on 2 GPUs (44,700 instances). The layout it
// gives is checked here, its time by BenchmarkSplitLayout.
func TestSplitLayoutLinear(t *testing.T) {
	p, _ := LookupProduct("A100-SXM4-80GB")
	inst := map[string]int{}
	for i := range 100 {
		inst[fmt.Sprintf("x%d", i)] = 447
	}
	out := SplitLayout(p, inst, 2) // its time: BenchmarkSplitLayout
	// x… is no profile of the product, so no layout takes one: the first 7 go to the last
	// GPU, the next 7 to the one before it, and the rest to the last GPU again.
	if len(out) != 2 || len(out[0]) != 7 || len(out[1]) != 44700-7 {
		t.Fatalf("layout sizes %d and %d, want 7 and 44693", len(out[0]), len(out[1]))
	}
	if out[1][0] != "x0" || out[0][0] != "x0" || out[1][len(out[1])-1] != "x99" {
		t.Errorf("order: %v… and %v…", out[0][:2], out[1][:2])
	}
}

// TestSplitLayoutMisfitsSpread: instances that fit no GPU go to the last GPU holding fewer
// than 7, so a node whose counts total at most 7 per GPU never has a GPU with more than 7
// (which live mode reported as bad input naming nodes[0].gpus[1] instead of an invalid
// layout): 13 × 7g.80gb on 2 GPUs put 12 on the last one.
func TestSplitLayoutMisfitsSpread(t *testing.T) {
	p, _ := LookupProduct("A100-SXM4-80GB")
	out := SplitLayout(p, map[string]int{"7g.80gb": 13}, 2)
	want := [][]string{strings.Fields(strings.Repeat("7g.80gb ", 6)), strings.Fields(strings.Repeat("7g.80gb ", 7))}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if ok, reason := p.CheckLayout(out[1]); ok || reason != "compute slices: the layout needs 49, A100-SXM4-80GB has 7" {
		t.Errorf("CheckLayout = %v, %q", ok, reason)
	}
	// Instances that fit are still laid out first fit, largest first.
	out = SplitLayout(p, map[string]int{"3g.40gb": 3, "1g.10gb": 1}, 2)
	want = [][]string{{"3g.40gb", "3g.40gb"}, {"3g.40gb", "1g.10gb"}}
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// BenchmarkSplitLayout: the uneven split of n profiles of 447 instances on 2 GPUs (figures in
// BENCHMARKS.md, against the layout copied per instance).
func BenchmarkSplitLayout(b *testing.B) {
	p, _ := LookupProduct("A100-SXM4-80GB")
	for _, n := range []int{10, 100} {
		inst := map[string]int{}
		for i := range n {
			inst[fmt.Sprintf("x%d", i)] = 447
		}
		b.Run(fmt.Sprintf("profiles=%d", n), func(b *testing.B) {
			for b.Loop() {
				SplitLayout(p, inst, 2)
			}
		})
	}
}
