package ledger

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUnofferedProfile: a MIG profile no GPU in the spec offers is named, with the node or the
// service that names it. A node's GPU laid out with it fails its layout (the node's row names
// the profile and the products that have it); a service that needs it fails with the profile
// as its first reason, before the capacity and placement reasons it causes.
func TestUnofferedProfile(t *testing.T) {
	spec := Spec{
		Nodes: []Node{
			{Name: "h100-a", GPUs: []GPU{{Product: "H100-SXM5-80GB", MIG: []string{"1g.18gb", "1g.10gb"}}}},
			{Name: "h100-b", GPUs: []GPU{{Product: "H100-SXM5-80GB", MIG: []string{"1g.10gb", "1g.10gb"}}}},
		},
		Services: []Service{
			{Name: "embed", Tier: P0, Profile: "1g.18gb", PeakRPS: 60, SafeRPSPerReplica: 40},
			{Name: "batch", Tier: P2, Profile: "1g.18gb"},
			{Name: "whole", Tier: P1, Profile: "H200-141GB-HBM3E", PeakRPS: 10, SafeRPSPerReplica: 40},
			{Name: "small", Tier: P1, Profile: "1g.10gb", PeakRPS: 10, SafeRPSPerReplica: 40},
		},
	}
	if errs := spec.Validate(); errs != nil {
		t.Fatalf("Validate: %v", errs)
	}
	res := Check(spec)

	type layout struct{ Node, Reason string }
	var layouts []layout
	for _, l := range res.Layouts {
		layouts = append(layouts, layout{l.Node, l.Reason})
	}
	wantLayouts := []layout{
		{"h100-a", "profile 1g.18gb does not exist on H100-80GB-HBM3 (it is a profile of H200-141GB-HBM3E)"},
		{"h100-b", ""},
	}
	if diff := cmp.Diff(wantLayouts, layouts); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}

	const unoffered = "profile: no GPU in the spec offers MIG profile 1g.18gb (a profile of H200-141GB-HBM3E; the spec's GPUs: H100-80GB-HBM3)"
	first := map[string]string{}
	for _, s := range res.Services {
		if len(s.Reasons) > 0 {
			first[s.Name] = s.Reasons[0]
		}
	}
	want := map[string]string{
		"embed": unoffered,
		"batch": unoffered,
		"whole": "profile: no GPU in the spec is a H200-141GB-HBM3E (the spec's GPUs: H100-80GB-HBM3)",
		// small is hosted on h100-b, but one node cannot survive its loss: a reason of its
		// own, not about the profile.
		"small": "N+1: losing h100-b leaves 0 × 40 = 0 RPS < peak 10",
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first reason per service (-want +got):\n%s", diff)
	}
}
