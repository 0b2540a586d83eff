package specfile

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/ledger"
)

// TestNumbersAndSizesAreBounded: the hostile-input trial found that 1_000 and 0x10 were read
// as 1000 and 16, that an empty spec passed with exit 0, and that a spec of 200,000 services
// (15 MB, under the size limit) ran for minutes. Each is now bad input naming the field.
func TestNumbersAndSizesAreBounded(t *testing.T) {
	node := "nodes:\n  - {name: a, gpus: [{product: A100-SXM4-80GB}]}\n"
	svc := func(peak string) string {
		return node + "services:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: " + peak + "\n    safeRPSPerReplica: 40\n"
	}
	var many strings.Builder
	many.WriteString(node + "services:\n")
	for i := range ledger.MaxServices + 1 {
		fmt.Fprintf(&many, "  - {name: s%d, tier: P2, profile: 1g.10gb}\n", i)
	}
	tests := []struct {
		name, give, want string
	}{
		{"underscore", svc("1_000"), `x.yaml:7: services[0].peakRPS: "1_000": write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3); want a number in [0, 1e+09]`},
		{"hex", svc("0x10"), `x.yaml:7: services[0].peakRPS: "0x10": write numbers in plain decimal`},
		{"empty spec", "nodes: []\nservices: []\n", "spec: no nodes and no services"},
		{"too many services", many.String(), fmt.Sprintf("services: %d services; at most %d", ledger.MaxServices+1, ledger.MaxServices)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give), "x.yaml")
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v; want a *FieldError containing %q", err, tt.want)
			}
		})
	}
	if _, err := Parse([]byte(svc("1000")), "x.yaml"); err != nil {
		t.Errorf("plain 1000: %v", err)
	}
	if _, err := Parse([]byte(svc("1e3")), "x.yaml"); err != nil {
		t.Errorf("exponent 1e3: %v", err)
	}
}
