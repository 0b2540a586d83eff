package specfile

import (
	"errors"
	"strings"
	"testing"
)

// TestNumberFields: go.yaml.in/yaml/v3 read readyReplicas: 1.5 as 1 without a word, and
// refused pricePerHour: 1e400 with "cannot unmarshal !!str `1e400` into float64", naming
// neither the field nor its range. Each is now an error naming the file, line, field and, out
// of range, the range Validate accepts; whole numbers in other notations still decode.
func TestNumberFields(t *testing.T) {
	const nodes = "nodes:\n  - name: a\n    pricePerHour: PRICE\n    gpus: [{product: A100-SXM4-80GB}]\n"
	spec := func(price, ready string) string {
		return strings.Replace(nodes, "PRICE", price, 1) + "services:\n  - name: s\n    tier: P2\n    profile: 1g.10gb\n    readyReplicas: " + ready + "\n"
	}
	tests := []struct {
		name, give, want string
	}{
		{"fraction of a replica", spec("1", "1.5"), "x.yaml:9: services[0].readyReplicas: 1.5: want a whole number"},
		{"fraction below float64 precision", spec("1", "1.0000000000000000001"), "x.yaml:9: services[0].readyReplicas: 1.0000000000000000001: want a whole number"},
		{"negative exponent fraction", spec("1", "15e-1"), "x.yaml:9: services[0].readyReplicas: 15e-1: want a whole number"},
		{"replicas past float64", spec("1", "1e400"), "x.yaml:9: services[0].readyReplicas: 1e400 is outside [0, 100000]"},
		{"replicas past int64", spec("1", "1e19"), "x.yaml:9: services[0].readyReplicas: 1e19 is outside [0, 100000]"},
		{"price past float64", spec("1e400", "1"), "x.yaml:3: nodes[0].pricePerHour: 1e400 is outside [0, 1e6] USD per hour"},
		{"negative price past float64", spec("-1e400", "1"), "x.yaml:3: nodes[0].pricePerHour: -1e400 is outside [0, 1e6] USD per hour"},
		{"both reported", spec("1e400", "0.5"), "x.yaml:3: nodes[0].pricePerHour: 1e400 is outside [0, 1e6] USD per hour\nx.yaml:9: services[0].readyReplicas: 0.5: want a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give), "x.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse = %v\nwant %s", err, tt.want)
			}
		})
	}
	for _, ready := range []string{"2", "2.0", "2e0", "0.2e1", "20e-1"} {
		s, err := Parse([]byte(spec("3.5", ready)), "x.yaml")
		if err != nil {
			t.Errorf("readyReplicas: %s: %v", ready, err)
			continue
		}
		if got := *s.Services[0].ReadyReplicas; got != 2 || s.Nodes[0].PricePerHour != 3.5 {
			t.Errorf("readyReplicas: %s decoded as %d, price %v; want 2, 3.5", ready, got, s.Nodes[0].PricePerHour)
		}
	}
}

// TestNodeErrorsKeepServices: errors about the nodes alone (which `ledger --live` replaces and
// ignores) no longer stop the services from being read; before, Parse returned an empty spec
// with them, and a live run saw no services at all, every node releasable. Each such error is
// still reported, once, naming its field.
func TestNodeErrorsKeepServices(t *testing.T) {
	const services = "services:\n  - name: s\n    tier: P2\n    profile: 1g.10gb\n    safeRPSPerReplica: 5\n    peakRPS: 10\n"
	tests := []struct {
		name, nodes, want string
	}{
		{"price past float64", "nodes:\n  - name: a\n    pricePerHour: 1e400\n    gpus: [{product: A100-SXM4-80GB}]\n",
			"x.yaml:3: nodes[0].pricePerHour: 1e400 is outside [0, 1e6] USD per hour"},
		{"price not a number", "nodes:\n  - name: a\n    pricePerHour: 5O\n    gpus: [{product: A100-SXM4-80GB}]\n",
			`x.yaml:3: nodes[0].pricePerHour: "5O": want a number in [0, 1e6] USD per hour`},
		{"unknown node field", "nodes:\n  - name: a\n    pricePerHuor: 5\n    gpus: [{product: A100-SXM4-80GB}]\n",
			"x.yaml:3: nodes[0].pricePerHuor: unknown field; want one of name, failureDomain, pricePerHour, gpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := Parse([]byte(tt.nodes+services), "x.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse error = %v\nwant %s", err, tt.want)
			}
			if !AboutNodes([]error{err}) {
				t.Errorf("AboutNodes(%v) = false, want true (a live run ignores it)", err)
			}
			if len(spec.Services) != 1 || spec.Services[0].Name != "s" || spec.Services[0].PeakRPS != 10 {
				t.Errorf("services = %+v, want service s with peakRPS 10", spec.Services)
			}
		})
	}
	// A service's own error is not about nodes: a live run refuses it.
	_, err := Parse([]byte("nodes: []\nservices:\n  - name: s\n    tier: P2\n    profile: 1g.10gb\n    peakRPS: lots\n"), "x.yaml")
	if err == nil || AboutNodes([]error{err}) {
		t.Errorf("service error %v: AboutNodes true, want false", err)
	}
}

// TestMergedNumbersChecked: a value merged in with << is checked like one written in place
// (readyReplicas: 1.5 merged was read as 1 without a word).
func TestMergedNumbersChecked(t *testing.T) {
	const head = "nodes:\n  - {name: a, gpus: [{product: A100-SXM4-80GB}]}\nservices:\n"
	tests := []struct{ name, give, want string }{
		{"merged mapping", head + "  - name: s\n    tier: P2\n    profile: 1g.10gb\n    <<: {readyReplicas: 1.5}\n",
			"x.yaml:7: services[0].readyReplicas: 1.5: want a whole number"},
		{"merged alias", "base: &b {readyReplicas: 2.5}\n" + head + "  - name: s\n    tier: P2\n    profile: 1g.10gb\n    <<: *b\n",
			"x.yaml:1: base: unknown field; want one of nodes, services\nx.yaml:1: services[0].readyReplicas: 2.5: want a whole number"},
		{"merged list", "nodes: []\nservices:\n  - &s0 {name: s, tier: P2, profile: 1g.10gb, peakRPS: 1, safeRPSPerReplica: 1}\n  - name: t\n    <<: [*s0, {readyReplicas: 0.5}]\n",
			"x.yaml:5: services[1].readyReplicas: 0.5: want a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give), "x.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestEveryFaultInOnePass: a value numberWalk reports (a leading zero, a fraction of a
// replica) no longer hides the range and cross-field faults elsewhere until it is fixed (the
// docs promise one error per fault; safeRPSPerReplica: -12 came only on the second run). The
// values reported read as null for the rest of the pass, so they cause no second error: a
// placement of two nodes beside readyReplicas: 1.5 is not "readyReplicas is 0". A misspelt
// key still stops there, as its field would only be reported missing.
func TestEveryFaultInOnePass(t *testing.T) {
	const base = "nodes:\n  - name: a\n    pricePerHour: 0367\n    gpus: [{product: A100-SXM4-80GB}]\n  - name: b\n    gpus: [{product: A100-SXM4-80GB}]\n" +
		"services:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: 10\n    safeRPSPerReplica: -12\n    readyReplicas: 1.5\n    placement: [a, b]\n  - name: t\n    tier: P7\n    profile: 1g.10gb\n    peakRPS: 1e400\n"
	_, err := Parse([]byte(base), "x.yaml")
	want := "x.yaml:3: nodes[0].pricePerHour: 0367 has a leading zero, which yaml.v3 reads as octal; want a plain decimal number in [0, 1e6] USD per hour (0 and 0.5 are fine)\n" +
		"x.yaml:13: services[0].readyReplicas: 1.5: want a whole number\n" +
		"x.yaml:18: services[1].peakRPS: 1e400 is outside [0, 1e+09]\n" +
		"x.yaml:12: services[0].safeRPSPerReplica: -12 is outside (0, 1e+09], required for P1 (or record: an admission record)\n" +
		"x.yaml:16: services[1].tier: \"P7\" is not one of P0, P1, P2"
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v\nwant %s", err, want)
	}
	misspelt := strings.Replace(base, "safeRPSPerReplica", "safeRPSperReplica", 1)
	_, err = Parse([]byte(misspelt), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "services[0].safeRPSperReplica: unknown field") || strings.Contains(err.Error(), "required for") || strings.Contains(err.Error(), "P7") {
		t.Errorf("misspelt key: Parse = %v\nwant the unknown field alone beside the number errors, no required or later error", err)
	}
}

// TestOnePassWithAliases: with an alias in the document, a number error is reported alone, as
// before the one-pass reading: a bad value under an anchor set to null was null wherever it was
// merged (services[2].safeRPSPerReplica read "required" though the file gives it), and an
// unknown key in an aliased mapping was skipped, reported as an empty tier and profile.
func TestOnePassWithAliases(t *testing.T) {
	merged := "services:\n  - &base {name: s, tier: P1, profile: 1g.10gb, peakRPS: 10, safeRPSPerReplica: 012}\n  - {<<: *base, name: t}\n  - {<<: *base, name: u}\n"
	_, err := Parse([]byte(merged), "x.yaml")
	if err == nil || strings.Contains(err.Error(), "required") || !strings.Contains(err.Error(), "safeRPSPerReplica: 012 has a leading zero") {
		t.Errorf("merged bad value: %v; want the leading zero alone, no required", err)
	}
	aliased := "nodes:\n  - &n {name: a, gpus: [{product: A100-SXM4-80GB}]}\nservices:\n  - {name: s, tier: P2, profile: 1g.10gb, readyReplicas: 1.5}\n  - *n\n"
	_, err = Parse([]byte(aliased), "x.yaml")
	if err == nil || err.Error() != "x.yaml:4: services[0].readyReplicas: 1.5: want a whole number" {
		t.Errorf("aliased node as a service: %v; want the 1.5 alone (the unknown gpus key is reported once it is fixed)", err)
	}
}

// TestNotationNamesFieldBesideOtherFaults: a number in a YAML 1.1 or Go literal form (1_000,
// 0x10, which yaml.v3 reads as 1000 and 16) was reported as field "number", with no range, and
// alone: the other faults of the spec came only once it was fixed. Each is now reported at its
// field's path and line with the field's range, beside every other fault, in one pass. A string
// field keeps such text as written (name: 0x10 is the name "0x10"), so it is no fault there.
func TestNotationNamesFieldBesideOtherFaults(t *testing.T) {
	const spec = "nodes:\n  - name: 0x10\n    pricePerHour: 2\n    gpus: [{product: A100-SXM4-80GB}]\n" +
		"  - name: b\n    pricePerHour: 1_000\n    gpus: [{product: A100-SXM4-80GB}]\n" +
		"services:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: 0x10\n    safeRPSPerReplica: -12\n    readyReplicas: 0b11\n" +
		"  - name: t\n    tier: P7\n    profile: 1g.10gb\n    peakRPS: -0o17\n"
	const notation = "write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3)"
	want := `x.yaml:6: nodes[1].pricePerHour: "1_000": ` + notation + "; want a number in [0, 1e6] USD per hour\n" +
		`x.yaml:12: services[0].peakRPS: "0x10": ` + notation + "; want a number in [0, 1e+09]\n" +
		`x.yaml:14: services[0].readyReplicas: "0b11": ` + notation + "; want a number in [0, 100000]\n" +
		`x.yaml:18: services[1].peakRPS: "-0o17": ` + notation + "; want a number in [0, 1e+09]\n" +
		"x.yaml:13: services[0].safeRPSPerReplica: -12 is outside (0, 1e+09], required for P1 (or record: an admission record)\n" +
		"x.yaml:16: services[1].tier: \"P7\" is not one of P0, P1, P2"
	_, err := Parse([]byte(spec), "x.yaml")
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v\nwant %s", err, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("Parse = %v, want it to wrap ErrInvalid (exit 2)", err)
	}
	// The notation alone, on a node: still about the nodes only (`ledger --live` replaces them).
	_, err = Parse([]byte(strings.Replace(spec[:strings.Index(spec, "services:")], "0x10", "a", 1)+
		"services:\n  - {name: s, tier: P2, profile: 1g.10gb, peakRPS: 1}\n"), "x.yaml")
	if want := `x.yaml:6: nodes[1].pricePerHour: "1_000": ` + notation + "; want a number in [0, 1e6] USD per hour"; err == nil || err.Error() != want || !AboutNodes([]error{err}) {
		t.Errorf("node notation alone: Parse = %v (AboutNodes %v)\nwant %s (AboutNodes true)", err, AboutNodes([]error{err}), want)
	}
	// A string field keeps the text: the node is named "0x10" in failure domain "1_000", the
	// service "0x1f".
	s, err := Parse([]byte("nodes:\n  - name: 0x10\n    failureDomain: 1_000\n    gpus: [{product: A100-SXM4-80GB}]\nservices:\n  - {name: 0x1f, tier: P2, profile: 1g.10gb, peakRPS: 1}\n"), "x.yaml")
	if err != nil || s.Nodes[0].Name != "0x10" || s.Nodes[0].FailureDomain != "1_000" || s.Services[0].Name != "0x1f" {
		t.Errorf("strings 0x10, 1_000 and 0x1f: %v, nodes %+v, services %+v; want no error, the names as written", err, s.Nodes, s.Services)
	}
}
