package ledger

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func ptr(i int) *int { return &i }

// sourceServices are the source material's five services.
func sourceServices() []Service {
	return []Service{
		{Name: "embedding", Tier: P0, Profile: "1g.10gb", PeakRPS: 60, SafeRPSPerReplica: 40, ReadyReplicas: ptr(3)},
		{Name: "classifier", Tier: P1, Profile: "1g.10gb", PeakRPS: 18, SafeRPSPerReplica: 30, ReadyReplicas: ptr(2)},
		{Name: "asr", Tier: P1, Profile: "2g.20gb", PeakRPS: 50, SafeRPSPerReplica: 35, ReadyReplicas: ptr(3)},
		{Name: "chat", Tier: P1, Profile: "3g.40gb", PeakRPS: 24, SafeRPSPerReplica: 12, ReadyReplicas: ptr(3)},
		{Name: "document-extraction", Tier: P2, Profile: "1g.10gb"},
	}
}

// sourceCase: three nodes in separate racks, one A100 80 GB each laid out
// as 3g.40gb + 2g.20gb + 2 × 1g.10gb.
func sourceCase() Spec {
	var s Spec
	for i, n := range []string{"gpu-a", "gpu-b", "gpu-c"} {
		s.Nodes = append(s.Nodes, Node{
			Name: n, FailureDomain: fmt.Sprintf("rack-%d", i+1), PricePerHour: 3.67,
			GPUs: []GPU{{Product: "A100-SXM4-80GB", MIG: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}}},
		})
	}
	s.Services = sourceServices()
	return s
}

func TestSourceCase(t *testing.T) {
	spec := sourceCase()
	if errs := spec.Validate(); errs != nil {
		t.Fatal(errs)
	}
	res := Check(spec)
	if !res.OK {
		t.Fatalf("checks failed: %+v", res.Services)
	}
	type row struct {
		Name                string
		Capacity, AfterLoss float64
		Verdict             string
		Replicas, Nodes     int
	}
	var got []row
	for _, s := range res.Services {
		got = append(got, row{s.Name, s.CapacityRPS, s.CapacityAfterWorstLossRPS, s.Verdict, s.Replicas, s.Nodes})
	}
	want := []row{
		{"embedding", 120, 80, VerdictPass, 3, 3},
		{"classifier", 60, 30, VerdictPass, 2, 2},
		{"asr", 105, 70, VerdictPass, 3, 3},
		{"chat", 36, 24, VerdictPass, 3, 3},
		{"document-extraction", 0, 0, VerdictExempt, 1, 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ledger (-want +got):\n%s", d)
	}
	for _, l := range res.Layouts {
		if !l.Valid {
			t.Errorf("layout %s/%d refused: %s", l.Node, l.GPU, l.Reason)
		}
	}
	// Every node is full and needed: the audit releases none.
	a := Audit(spec, AuditOptions{})
	if a.Released != 0 {
		t.Errorf("released %d nodes, want 0: %+v", a.Released, a.Release)
	}
}

// eightWhole: the same services on eight whole A100 80 GB nodes, one per team.
func eightWhole() Spec {
	var s Spec
	for i := range 8 {
		s.Nodes = append(s.Nodes, Node{
			Name: fmt.Sprintf("team-%d", i+1), PricePerHour: 3.67,
			GPUs: []GPU{{Product: "A100-SXM4-80GB"}},
		})
	}
	s.Services = sourceServices()
	for i := range s.Services {
		s.Services[i].ReadyReplicas = nil
	}
	return s
}

func TestEightWholeNodesReleaseFive(t *testing.T) {
	spec := eightWhole()
	for _, tt := range []struct {
		name  string
		audit func(Spec) (AuditResult, error)
	}{
		{"heuristic", func(s Spec) (AuditResult, error) { return Audit(s, AuditOptions{}), nil }},
		{"exact", AuditExact},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := tt.audit(spec)
			if err != nil {
				t.Fatal(err)
			}
			if a.Released != 5 {
				t.Fatalf("released %d, want 5: %+v", a.Released, a.Release)
			}
			if want := 5 * 3.67 * 730; a.SavingsPerMonth < want-1e-6 || a.SavingsPerMonth > want+1e-6 {
				t.Errorf("savings %v per month, want %v", a.SavingsPerMonth, want)
			}
			if len(a.Proposal.Nodes) != 3 {
				t.Fatalf("proposal keeps %d nodes, want 3", len(a.Proposal.Nodes))
			}
			if errs := a.Proposal.Validate(); errs != nil {
				t.Fatal(errs)
			}
			c := Check(a.Proposal)
			if !c.OK {
				t.Fatalf("the proposal fails its checks: %+v %+v", c.Services, c.Layouts)
			}
			for _, n := range a.Proposal.Nodes {
				got := strings.Join(n.GPUs[0].MIG, "+")
				if got != "3g.40gb+2g.20gb+1g.10gb+1g.10gb" {
					t.Errorf("%s layout %s, want 3g.40gb+2g.20gb+1g.10gb+1g.10gb", n.Name, got)
				}
			}
			var cfg struct {
				Version    string `yaml:"version"`
				MigConfigs map[string][]struct {
					Devices    []int          `yaml:"devices"`
					MigEnabled bool           `yaml:"mig-enabled"`
					MigDevices map[string]int `yaml:"mig-devices"`
				} `yaml:"mig-configs"`
			}
			if err := yaml.Unmarshal([]byte(MigPartedConfig(a.Proposal)), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.Version != "v1" || len(cfg.MigConfigs) != 3 {
				t.Fatalf("mig-parted config: %+v", cfg)
			}
			for name, devs := range cfg.MigConfigs {
				want := map[string]int{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
				if len(devs) != 1 || !devs[0].MigEnabled || cmp.Diff(want, devs[0].MigDevices) != "" {
					t.Errorf("%s: %+v, want one device with %v", name, devs, want)
				}
			}
		})
	}
}

func TestInvalidLayoutsRefused(t *testing.T) {
	tests := []struct {
		name    string
		product string
		mig     []string
		valid   bool
		reason  string
	}{
		{"two 4g.40gb", "A100-SXM4-80GB", []string{"4g.40gb", "4g.40gb"}, false, "compute slices: the layout needs 8, A100-SXM4-80GB has 7"},
		{"3g+3g+1g", "A100-SXM4-80GB", []string{"3g.40gb", "3g.40gb", "1g.10gb"}, false, "memory slices: the layout needs 9, A100-SXM4-80GB has 8"},
		{"1g.5gb on 80GB", "A100-SXM4-80GB", []string{"1g.5gb"}, false, "profile 1g.5gb does not exist on A100-SXM4-80GB (it is a profile of A100-SXM4-40GB)"},
		{"balanced", "A100-SXM4-80GB", []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, true, ""},
		{"seven 1g", "NVIDIA-A100-SXM4-80GB", []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}, true, ""},
		{"4g+3g", "H100-80GB-HBM3", []string{"4g.40gb", "3g.40gb"}, true, ""},
		{"two +me", "A100-SXM4-40GB", []string{"1g.5gb+me", "1g.5gb+me"}, false, "instances: 2 × 1g.5gb+me, A100-SXM4-40GB allows 1"},
		// 3g at 4 (slices 4–7) leaves 0–3; a 2-slice 1g.20gb fits at 0 or 2,
		// but two of them plus a 2g.20gb need six slices of those four.
		{"3g+2g+1g.20gb+1g.20gb", "A100-SXM4-80GB", []string{"3g.40gb", "2g.20gb", "1g.20gb", "1g.20gb"}, false, "memory slices: the layout needs 10, A100-SXM4-80GB has 8"},
		// 4 × 1g.20gb take every even start (0,2,4,6); the 1g.10gb has no
		// slice left: memory 9 > 8.
		{"H200 4×1g.35gb+1g.18gb", "H200", []string{"1g.35gb", "1g.35gb", "1g.35gb", "1g.35gb", "1g.18gb"}, false, "memory slices: the layout needs 9, H200-141GB-HBM3E has 8"},
		// 4g at 0 (slices 0–3), 2g at 4 (4–5), 1g.20gb at 6 (6–7).
		{"4g+2g+1g.20gb", "A100-SXM4-80GB", []string{"4g.40gb", "2g.20gb", "1g.20gb"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := LookupProduct(tt.product)
			if !ok {
				t.Fatalf("unknown product %s", tt.product)
			}
			valid, reason := p.CheckLayout(tt.mig)
			if valid != tt.valid || reason != tt.reason {
				t.Errorf("CheckLayout(%v) = %v, %q; want %v, %q", tt.mig, valid, reason, tt.valid, tt.reason)
			}
		})
	}
}

// TestPlacementSearchMatchesBruteForce checks the layout table (built
// with CheckLayout's rules) against a brute force over NVIDIA's start
// indices: the same set of layouts must come out.
func TestPlacementSearchMatchesBruteForce(t *testing.T) {
	for _, p := range []*Product{&Products[0], &Products[1], &Products[3]} {
		t.Run(p.Name, func(t *testing.T) {
			tab := tableFor(p)
			valid := map[counts]bool{}
			for _, c := range tab.layouts {
				valid[c] = true
			}
			// Brute force: every assignment of starts to at most 7 instances.
			found := map[counts]bool{}
			var rec func(used uint16, c counts, compute int, minProfile, minStart int)
			rec = func(used uint16, c counts, compute int, minProfile, minStart int) {
				found[c] = true
				for k := minProfile; k < len(p.Profiles); k++ {
					pr := p.Profiles[k]
					if int(c[k]) >= pr.MaxInstances || compute+pr.ComputeSlices > p.ComputeSlices {
						continue
					}
					for _, s := range pr.Starts {
						if k == minProfile && s < minStart {
							continue
						}
						mask := uint16((1<<pr.MemorySlices)-1) << s
						if s+pr.MemorySlices > 8 || used&mask != 0 {
							continue
						}
						c2 := c
						c2[k]++
						rec(used|mask, c2, compute+pr.ComputeSlices, k, s+1)
					}
				}
			}
			rec(0, counts{}, 0, 0, 0)
			if len(found) != len(valid) {
				t.Errorf("brute force finds %d layouts, the table %d", len(found), len(valid))
			}
			for c := range found {
				if !valid[c] {
					t.Errorf("layout %v placeable by brute force, missing from the table", p.layoutNames(c))
				}
			}
		})
	}
}

func TestP0OnOneNodeFailsNPlusOne(t *testing.T) {
	spec := sourceCase()
	// Capacity suffices (3 × 40 = 120 ≥ 60) but all on gpu-a: give gpu-a
	// seven 1g.10gb so the replicas fit there.
	spec.Nodes[0].GPUs[0].MIG = []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}
	spec.Services = []Service{{Name: "embedding", Tier: P0, Profile: "1g.10gb", PeakRPS: 60, SafeRPSPerReplica: 40,
		ReadyReplicas: ptr(3), Placement: []string{"gpu-a", "gpu-a", "gpu-a"}}}
	res := Check(spec)
	if res.OK {
		t.Fatal("checks pass; want N+1 to fail")
	}
	s := res.Services[0]
	if s.CapacityRPS != 120 || s.CapacityAfterWorstLossRPS != 0 || s.WorstLoss != "rack-1" || s.Verdict != VerdictFail {
		t.Errorf("got capacity %v, after loss %v (%s), %s; want 120, 0 (rack-1), fail", s.CapacityRPS, s.CapacityAfterWorstLossRPS, s.WorstLoss, s.Verdict)
	}
	want := []string{
		"N+1: losing rack-1 leaves 0 × 40 = 0 RPS < peak 60",
		"P0 spread: all 3 replicas on one GPU of gpu-a",
	}
	if d := cmp.Diff(want, s.Reasons); d != "" {
		t.Errorf("reasons (-want +got):\n%s", d)
	}
}

func TestCheckFailures(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Spec)
		service string
		reasons []string
	}{
		{"capacity short", func(s *Spec) { s.Services[3].PeakRPS = 40 }, "chat",
			[]string{"capacity: 3 × 12 = 36 RPS < peak 40", "N+1: losing rack-1 leaves 2 × 12 = 24 RPS < peak 40", "headroom: a rolling update leaves 2 × 12 = 24 RPS < peak 40 and no free 3g.40gb slice to surge into"}},
		{"refused record", func(s *Spec) { s.Services[1].Refused = true }, "classifier",
			[]string{"admission: the admission record's verdict does not allow this model on 1g.10gb"}},
		{"pinned slice missing", func(s *Spec) {
			s.Services[3].Placement = []string{"gpu-a", "gpu-a", "gpu-b"}
		}, "chat", []string{"placement: no free 3g.40gb slice on gpu-a", "N+1: losing rack-1 leaves 1 × 12 = 12 RPS < peak 24"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := sourceCase()
			tt.edit(&spec)
			res := Check(spec)
			if res.OK {
				t.Fatal("checks pass")
			}
			for _, s := range res.Services {
				if s.Name == tt.service {
					if d := cmp.Diff(tt.reasons, s.Reasons); d != "" {
						t.Errorf("reasons (-want +got):\n%s", d)
					}
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	spec := sourceCase()
	spec.Nodes[1].Name = "gpu-a"
	spec.Nodes[2].GPUs[0].Product = "V100"
	spec.Services[0].Tier = "P9"
	spec.Services[1].SafeRPSPerReplica = 0
	spec.Services[2].Placement = []string{"gpu-x"}
	got := spec.Validate()
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path)
	}
	want := []string{"nodes[1].name", "nodes[2].gpus[0].product", "services[0].tier", "services[1].safeRPSPerReplica", "services[2].placement", "services[2].placement[0]"}
	if d := cmp.Diff(want, paths); d != "" {
		t.Errorf("paths (-want +got):\n%s\n%v", d, got)
	}
}

func TestOwnerConflicts(t *testing.T) {
	got := OwnerConflicts([]Autoscaler{
		{Namespace: "ml", Kind: "ScaledObject", Name: "chat", TargetKind: "Deployment", TargetName: "chat"},
		{Namespace: "ml", Kind: "HorizontalPodAutoscaler", Name: "chat-cpu", TargetKind: "Deployment", TargetName: "chat"},
		{Namespace: "ml", Kind: "ScaledObject", Name: "asr", TargetKind: "Deployment", TargetName: "asr"},
		{Namespace: "other", Kind: "HorizontalPodAutoscaler", Name: "chat", TargetKind: "Deployment", TargetName: "chat"},
	})
	want := []OwnerConflict{{Namespace: "ml", TargetKind: "Deployment", TargetName: "chat", Owners: []string{"HorizontalPodAutoscaler/chat-cpu", "ScaledObject/chat"}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestValidateSafeRPSOneError: a safeRPSPerReplica out of range is one error naming the field
// and the range the service's tier accepts; a negative value of a P0 or P1 service was also
// reported as missing ("required for P1"), two errors for one fault.
func TestValidateSafeRPSOneError(t *testing.T) {
	const path = "services[0].safeRPSPerReplica"
	tests := []struct {
		name string
		tier Tier
		give float64
		want []FieldError
	}{
		{"P1 negative", P1, -5, []FieldError{{path, "-5 is outside (0, 1e+09], required for P1 (or record: an admission record)"}}},
		{"P0 NaN", P0, math.NaN(), []FieldError{{path, "NaN is outside (0, 1e+09], required for P0 (or record: an admission record)"}}},
		{"P0 past MaxRPS", P0, 2e9, []FieldError{{path, "2e+09 is outside (0, 1e+09], required for P0 (or record: an admission record)"}}},
		{"P0 zero", P0, 0, []FieldError{{path, "required for P0 (> 0, or record: an admission record)"}}},
		{"P2 negative", P2, -5, []FieldError{{path, "-5 is outside [0, 1e+09]"}}},
		{"P2 zero", P2, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := Spec{Services: []Service{{Name: "s", Tier: tt.tier, Profile: "1g.10gb", PeakRPS: 10, SafeRPSPerReplica: tt.give}}}
			if d := cmp.Diff(tt.want, spec.Validate()); d != "" {
				t.Errorf("Validate (-want +got):\n%s", d)
			}
		})
	}
}
