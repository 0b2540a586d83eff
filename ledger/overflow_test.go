package ledger

import (
	"fmt"
	"testing"
)

// demandPastInt is a P1 service whose ⌈peakRPS / safeRPSPerReplica⌉, both in range, is past
// int (1e9 / 1e-300 overflows float64 to +Inf; 1e9 / 1e-200 is 1e209) or too large for the
// exact search's tables (1e9 / 1e-3 is 10^12 replicas), on two A100s in two racks: no layout
// meets it.
func demandPastInt(safe float64) Spec {
	return Spec{
		Nodes: []Node{
			{Name: "gpu-a", FailureDomain: "rack-1", PricePerHour: 3.67, GPUs: []GPU{{Product: "A100-SXM4-80GB"}}},
			{Name: "gpu-b", FailureDomain: "rack-2", PricePerHour: 3.67, GPUs: []GPU{{Product: "A100-SXM4-80GB"}}},
		},
		Services: []Service{{Name: "a", Tier: P1, Profile: "1g.10gb", PeakRPS: 1e9, SafeRPSPerReplica: safe}},
	}
}

// TestReplicaNeedPastInt: ⌈1e9 / 1e-300⌉ converted to int was math.MinInt64 on amd64, so the
// audit needed no replica to survive a loss, proposed one, released gpu-a "with every check
// holding" and a mig-parted config for the rest, while the proposal failed capacity. And
// --audit=exact gave up (exit 2, bad input) on a two-node spec: "1 failure domains with
// 1000000000000 replicas each". Now neither audit releases anything, both say the spec is
// infeasible, and the reason names the need without a wrapped number.
func TestReplicaNeedPastInt(t *testing.T) {
	for _, safe := range []float64{1e-300, 1e-200, 1e-3} {
		spec := demandPastInt(safe)
		if errs := spec.Validate(); errs != nil {
			t.Fatal(errs)
		}
		wantNeed, wantText := maxReplicaNeed, "> 1099511627776 1g.10gb slices"
		if safe == 1e-3 {
			wantNeed, wantText = 1_000_000_000_000, "= 1000000000000 1g.10gb slices"
		}
		if got := minReplicasAfterLoss(spec.Services[0]); got != wantNeed {
			t.Errorf("safe %g: minReplicasAfterLoss = %d, want %d", safe, got, wantNeed)
		}
		exact, err := AuditExact(spec)
		if err != nil {
			t.Errorf("safe %g: AuditExact: %v, want an infeasible result", safe, err)
		}
		for name, a := range map[string]AuditResult{"exact": exact, "heuristic": Audit(spec, AuditOptions{})} {
			if a.Feasible || a.Released != 0 || a.SavingsPerMonth != 0 {
				t.Errorf("safe %g, %s audit: feasible %v, released %d, savings %v; want infeasible, nothing released", safe, name, a.Feasible, a.Released, a.SavingsPerMonth)
			}
		}
		h := Audit(spec, AuditOptions{})
		want := fmt.Sprintf("kept: not even every node together hosts every service with every check holding: capacity: a needs ⌈1e+09/%g⌉ %s and more for N+1; only 14 fit", safe, wantText)
		if r := h.Release[0].Reason; r != want {
			t.Errorf("safe %g: heuristic reason\n%q, want\n%q", safe, r, want)
		}
	}
	// 25 million replicas: no error either, the exact audit finds it infeasible.
	if a, err := AuditExact(demandPastInt(40)); err != nil || a.Feasible {
		t.Errorf("AuditExact(25 million replicas on two GPUs) = feasible %v, %v; want infeasible, no error", a.Feasible, err)
	}
}
