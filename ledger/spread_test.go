package ledger

import (
	"strings"
	"testing"
)

// TestUnpinnedPlacementCounts: a service without readyReplicas gets the fewest replicas that pass
// its checks, spread over failure domains: N+1 needs peak ÷ safe replicas left after losing the
// fullest domain, so ⌈30/40⌉ = 1 needs 2 replicas in 2 racks and ⌈50/40⌉ = 2 needs 3 in 3 racks;
// a P0 service is on at least 2 nodes even where its peak needs no replica after a loss (P0
// keeps at least one). The fullest failure domain is avoided first, then the fullest node.
func TestUnpinnedPlacementCounts(t *testing.T) {
	tests := []struct {
		name                string
		tier                Tier
		peak                float64
		wantReplicas, nodes int
		racks               []string // the three nodes' failure domains; nil: rack-1, rack-2, rack-3
		where               []string
		ready               *int
	}{
		{"P1, one replica after a loss", P1, 30, 2, 2, nil, []string{"gpu-a", "gpu-b"}, nil},
		{"P1, two replicas after a loss", P1, 50, 3, 3, nil, []string{"gpu-a", "gpu-b", "gpu-c"}, nil},
		{"P0, one replica after a loss", P0, 30, 2, 2, nil, []string{"gpu-a", "gpu-b"}, nil},
		{"P1, no demand", P1, 0, 1, 1, nil, []string{"gpu-a"}, nil},
		{"P0, no demand: still two nodes", P0, 0, 2, 2, nil, []string{"gpu-a", "gpu-b"}, nil},
		{"the emptier failure domain before the emptier node", P1, 30, 2, 2, []string{"rack-1", "rack-1", "rack-2"}, []string{"gpu-a", "gpu-c"}, nil},
		{"one failure domain: the emptier node", P2, 0, 2, 2, []string{"rack-1", "rack-1", "rack-1"}, []string{"gpu-a", "gpu-b"}, ptr(2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := sourceCase()
			for i, r := range tt.racks {
				spec.Nodes[i].FailureDomain = r
			}
			spec.Services = []Service{{Name: "svc", Tier: tt.tier, Profile: "1g.10gb", PeakRPS: tt.peak, SafeRPSPerReplica: 40, ReadyReplicas: tt.ready}}
			res := Check(spec)
			s := res.Services[0]
			verdict := VerdictPass
			if tt.tier == P2 {
				verdict = VerdictExempt
			}
			if s.Replicas != tt.wantReplicas || s.Nodes != tt.nodes || s.Verdict != verdict || strings.Join(s.Where, ",") != strings.Join(tt.where, ",") {
				t.Errorf("replicas %d on %d nodes %v, verdict %s (%v); want %d on %d %v, %s",
					s.Replicas, s.Nodes, s.Where, s.Verdict, s.Reasons, tt.wantReplicas, tt.nodes, tt.where, verdict)
			}
		})
	}
}
