package ledger

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRetryBoundReason: a retry that the kept GPUs' slices cannot satisfy is settled without
// packing, and the node's reason gives the figures. Two replicas of 4g.40gb (4 of 7 compute
// slices each) cannot share one GPU.
func TestRetryBoundReason(t *testing.T) {
	two := 2
	gpu := []GPU{{Product: "A100-SXM4-80GB"}}
	spec := Spec{
		Nodes: []Node{{Name: "a", GPUs: gpu}, {Name: "b", GPUs: gpu}, {Name: "c", GPUs: gpu}},
		Services: []Service{
			{Name: "batch", Tier: P2, Profile: "4g.40gb", ReadyReplicas: &two},
		},
	}
	wantBoundKeepsAB(t, spec, "kept: without it the kept GPUs have 7 compute slices; the services need at least 8 (the replicas N+1 and hosting require, at their profiles' slices)")
	// Three 4g.40gb replicas on three GPUs: compute (12 ≤ 14 without a node) and memory
	// (12 ≤ 16) allow dropping one, the one-per-GPU count does not.
	three := 3
	spec.Services[0].ReadyReplicas = &three
	spec.Nodes = append(spec.Nodes, Node{Name: "d", GPUs: gpu})
	got := Audit(spec, AuditOptions{})
	const perGPU = "kept: without it the kept GPUs hold at most 2 instances of 4 or more compute slices (⌊7/4⌋ per GPU); the services need at least 3"
	if got.Release[0].Reason != perGPU || got.Released != 1 {
		t.Errorf("a: %q, released %d; want %q, 1", got.Release[0].Reason, got.Released, perGPU)
	}
}

// TestRetryBoundSameRelease: the bound only settles retries that packing would fail, so the
// audit releases the same nodes and proposes the same spec with it as without it, on seeded
// specs with mixed profiles and on all-4g.40gb ones (where the one-per-GPU count decides);
// and it does settle retries there.
func TestRetryBoundSameRelease(t *testing.T) {
	settled := 0
	for seed := range uint64(6) {
		s := synthetic(seed, 60+20*int(seed), 4, 40+10*int(seed), 1+int(seed%3)*3)
		if seed%2 == 1 {
			for i := range s.Services {
				s.Services[i].Profile = "4g.40gb"
			}
		}
		with, without := Audit(s, AuditOptions{}), Audit(s, AuditOptions{noBound: true})
		if with.Released != without.Released || with.Feasible != without.Feasible {
			t.Errorf("seed %d: released %d (feasible %v) with the bound, %d (%v) without", seed, with.Released, with.Feasible, without.Released, without.Feasible)
		}
		if diff := cmp.Diff(without.Proposal, with.Proposal); diff != "" {
			t.Errorf("seed %d: proposal (-without +with):\n%s", seed, diff)
		}
		for _, r := range with.Release {
			if strings.HasPrefix(r.Reason, "kept: without it the kept GPUs") {
				settled++
			}
		}
	}
	if settled == 0 {
		t.Error("the bound settled no retry")
	}
}

// TestRetryWorkBound: past MaxRetryWork the retries stop; the nodes not re-tried are kept
// with that reason, and the proposal still passes every check.
func TestRetryWorkBound(t *testing.T) {
	s := synthetic(1, 200, 4, 100, 4)
	for i := range s.Services {
		s.Services[i].Profile = "4g.40gb"
	}
	full := Audit(s, AuditOptions{noBound: true})
	cut := Audit(s, AuditOptions{noBound: true, MaxRetryWork: 1})
	const why = "kept: not re-tried: the release audit's retries spent their work bound (1 GPU × service pairs, ledger.MaxRetryWork)"
	kept, notTried := 0, 0
	for _, r := range cut.Release {
		if !r.Release {
			kept++
		}
		if r.Reason == why {
			notTried++
		}
	}
	if notTried == 0 || notTried != kept {
		t.Errorf("%d of %d kept nodes say %q; want all", notTried, kept, why)
	}
	if !cut.Feasible || !Check(cut.Proposal).OK {
		t.Errorf("the cut audit's proposal fails its checks")
	}
	if cut.Released > full.Released {
		t.Errorf("cut audit releases %d > full %d", cut.Released, full.Released)
	}
	t.Logf("released: %d with every retry, %d with none", full.Released, cut.Released)
}

// TestRetryBoundMemory: the bound's memory slices. Five 1g.20gb replicas take 5 compute and 10
// memory slices (two each); one A100 80 GB offers 7 and 8, so the compute sum allows one GPU and
// the memory sum does not.
func TestRetryBoundMemory(t *testing.T) {
	five := 5
	gpu := []GPU{{Product: "A100-SXM4-80GB"}}
	spec := Spec{
		Nodes:    []Node{{Name: "a", GPUs: gpu}, {Name: "b", GPUs: gpu}, {Name: "c", GPUs: gpu}},
		Services: []Service{{Name: "batch", Tier: P2, Profile: "1g.20gb", ReadyReplicas: &five}},
	}
	wantBoundKeepsAB(t, spec, "kept: without it the kept GPUs have 8 memory slices; the services need at least 10 (the replicas N+1 and hosting require, at their profiles' slices)")
}

// wantBoundKeepsAB audits spec (nodes a, b, c) and wants a and b kept by the bound, for reason
// bound, and c released.
func wantBoundKeepsAB(t *testing.T, spec Spec, bound string) {
	t.Helper()
	want := []NodeRelease{
		{Node: "a", Reason: bound},
		{Node: "b", Reason: bound},
		{Node: "c", Release: true, Reason: "released: the kept nodes host every service with every check holding"},
	}
	if diff := cmp.Diff(want, Audit(spec, AuditOptions{}).Release); diff != "" {
		t.Errorf("release (-want +got):\n%s", diff)
	}
}
