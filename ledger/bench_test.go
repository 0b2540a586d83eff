package ledger

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// synthetic builds a seeded cluster: nodes × gpus GPUs in racks of
// rackSize nodes (rackSize 1: every node its own failure domain), A100
// 80 GB and H100 80 GB nodes with one of mig-parted's stock layouts per
// GPU, and services with profiles of those products, tiers P0:P1:P2 =
// 1:3:1, safe throughput 10–100 RPS and peak 1–6 × safe. Prices are
// list-like round numbers (not tuned to anything): $4/GPU-hour for A100,
// $8 for H100.
func synthetic(seed uint64, nodes, gpus, services, rackSize int) Spec {
	r := rand.New(rand.NewPCG(seed, 7))
	layouts := [][]string{
		nil, // whole GPU
		{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"},
		{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"},
		{"2g.20gb", "2g.20gb", "2g.20gb"},
		{"3g.40gb", "3g.40gb"},
		{"4g.40gb"},
	}
	var s Spec
	for i := range nodes {
		product, price := "A100-SXM4-80GB", 4.0
		if r.IntN(4) == 0 {
			product, price = "H100-80GB-HBM3", 8.0
		}
		n := Node{Name: fmt.Sprintf("node-%04d", i), PricePerHour: price * float64(gpus)}
		if rackSize > 1 {
			n.FailureDomain = fmt.Sprintf("rack-%03d", i/rackSize)
		}
		for range gpus {
			n.GPUs = append(n.GPUs, GPU{Product: product, MIG: layouts[r.IntN(len(layouts))]})
		}
		s.Nodes = append(s.Nodes, n)
	}
	profiles := []string{"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"}
	tiers := []Tier{P0, P1, P1, P1, P2}
	for i := range services {
		safe := float64(10 + r.IntN(91))
		sv := Service{
			Name: fmt.Sprintf("svc-%03d", i), Tier: tiers[r.IntN(len(tiers))], Profile: profiles[r.IntN(len(profiles))],
			SafeRPSPerReplica: safe, PeakRPS: safe * (1 + 5*r.Float64()),
		}
		s.Services = append(s.Services, sv)
	}
	return s
}

// specPass is the baseline: one pass over the spec touching every GPU's
// product and every service, the least any check must do.
func specPass(s Spec) (slices int, peak float64) {
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			if p, ok := LookupProduct(g.Product); ok {
				slices += p.ComputeSlices + len(g.MIG)
			}
		}
	}
	for _, sv := range s.Services {
		peak += sv.PeakRPS
	}
	return slices, peak
}

var sink any

func BenchmarkSpecPass(b *testing.B) {
	s := synthetic(1, 1000, 8, 500, 20)
	for b.Loop() {
		sink, _ = specPass(s)
	}
}

func BenchmarkCheck(b *testing.B) {
	s := synthetic(1, 1000, 8, 500, 20)
	if errs := s.Validate(); errs != nil {
		b.Fatal(errs)
	}
	for b.Loop() {
		sink = Check(s)
	}
}

func BenchmarkAudit(b *testing.B) {
	s := synthetic(1, 1000, 8, 500, 20)
	var a AuditResult
	for b.Loop() {
		a = Audit(s, AuditOptions{})
	}
	b.ReportMetric(float64(a.Released), "released")
	b.ReportMetric(float64(len(s.Nodes)-a.Released), "kept")
}

// BenchmarkAuditNoRetry is the first packing alone (MaxRetries 1 ≈ none).
func BenchmarkAuditNoRetry(b *testing.B) {
	s := synthetic(1, 1000, 8, 500, 20)
	var a AuditResult
	for b.Loop() {
		a = Audit(s, AuditOptions{MaxRetries: 1})
	}
	b.ReportMetric(float64(a.Released), "released")
}

// smallCount is how many seeded small instances the comparison uses.
var smallCount = 40

// smallInstances are the seeded specs small enough for AuditExact.
func smallInstances() []Spec {
	var out []Spec
	for seed := range uint64(smallCount) {
		r := rand.New(rand.NewPCG(seed, 11))
		nodes := 4 + r.IntN(5)    // 4–8 nodes
		services := 2 + r.IntN(3) // 2–4 services
		rack := 1
		if seed%4 == 3 {
			rack = 2 // some with two-node racks
		}
		s := synthetic(seed, nodes, 1, services, rack)
		for i := range s.Services {
			// Keep peaks small enough that a few GPUs can host them.
			s.Services[i].PeakRPS = s.Services[i].SafeRPSPerReplica * (0.5 + 1.5*r.Float64())
		}
		out = append(out, s)
	}
	return out
}

// TestHeuristicNearExact compares the heuristic audit with the exact
// optimum on the small instances: never more released than the optimum
// (which would mean a wrong check), both proposals pass every check, and
// in total within 5 % of the optimum's released nodes.
func TestHeuristicNearExact(t *testing.T) {
	heur, opt, worst := 0, 0, 1.0
	for i, s := range smallInstances() {
		h := Audit(s, AuditOptions{})
		e, err := AuditExact(s)
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		if h.Feasible != e.Feasible {
			t.Errorf("instance %d: heuristic feasible %v, exact %v", i, h.Feasible, e.Feasible)
		}
		if h.Released > e.Released {
			t.Errorf("instance %d: heuristic releases %d > exact optimum %d", i, h.Released, e.Released)
		}
		for name, a := range map[string]AuditResult{"heuristic": h, "exact": e} {
			if a.Feasible && !Check(a.Proposal).OK {
				t.Errorf("instance %d: %s proposal fails its checks", i, name)
			}
		}
		heur, opt = heur+h.Released, opt+e.Released
		if e.Released > 0 {
			worst = min(worst, float64(h.Released)/float64(e.Released))
		}
	}
	ratio := float64(heur) / float64(opt)
	t.Logf("released: heuristic %d, exact %d over %d instances; ratio %.3f, worst instance %.3f", heur, opt, smallCount, ratio, worst)
	if opt == 0 || ratio < 0.95 {
		t.Errorf("heuristic releases %d of the optimum's %d (ratio %.3f), want ≥ 0.95", heur, opt, ratio)
	}
}

func BenchmarkAuditExactSmall(b *testing.B) {
	specs := smallInstances()
	for b.Loop() {
		for _, s := range specs {
			sink, _ = AuditExact(s)
		}
	}
}

func BenchmarkAuditSmall(b *testing.B) {
	specs := smallInstances()
	for b.Loop() {
		for _, s := range specs {
			sink = Audit(s, AuditOptions{})
		}
	}
}

// limits is a seeded spec at MaxNodes × 8 GPUs and MaxServices, racks of 20 nodes.
func limits() Spec { return synthetic(1, MaxNodes, 8, MaxServices, 20) }

// BenchmarkSpecPassAtLimits is the baseline for the two below: one pass over the spec.
func BenchmarkSpecPassAtLimits(b *testing.B) {
	s := limits()
	for b.Loop() {
		sink, _ = specPass(s)
	}
}

func BenchmarkCheckAtLimits(b *testing.B) {
	s := limits()
	for b.Loop() {
		sink = Check(s)
	}
}

// BenchmarkAuditAtLimits: the retries' slice bound settles nearly every retry here.
func BenchmarkAuditAtLimits(b *testing.B) {
	s := limits()
	var a AuditResult
	for b.Loop() {
		a = Audit(s, AuditOptions{})
	}
	b.ReportMetric(float64(a.Released), "released")
}

// BenchmarkAuditAtLimitsNoBound is the same audit with every retry packed until the work
// bound (MaxRetryWork) stops them: the cost the bound caps when slices do not decide.
func BenchmarkAuditAtLimitsNoBound(b *testing.B) {
	s := limits()
	for i := range s.Services {
		s.Services[i].Profile = "4g.40gb"
	}
	var a AuditResult
	for b.Loop() {
		a = Audit(s, AuditOptions{noBound: true})
	}
	b.ReportMetric(float64(a.Released), "released")
}
