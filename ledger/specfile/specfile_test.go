package specfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/ledger"
)

func TestLoadSourceCase(t *testing.T) {
	spec, err := Load("testdata/source-case.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Nodes) != 3 || len(spec.Services) != 5 {
		t.Fatalf("got %d nodes, %d services; want 3, 5", len(spec.Nodes), len(spec.Services))
	}
	// The embedding service's throughput comes from its admission record.
	if got := spec.Services[0].SafeRPSPerReplica; got != 40 {
		t.Errorf("embedding safeRPSPerReplica %v from the record, want 40", got)
	}
	res := ledger.Check(spec)
	if !res.OK {
		t.Fatalf("checks fail: %+v", res.Services)
	}
	var after []float64
	for _, s := range res.Services[:4] {
		after = append(after, s.CapacityAfterWorstLossRPS)
	}
	if want := []float64{80, 30, 70, 24}; !equal(after, want) {
		t.Errorf("capacity after losing one node %v, want %v", after, want)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseErrorsNameFieldAndLine(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string // substrings, one per error
	}{
		{"unknown key", "nodes:\n  - name: a\n    gpuz: []\nservices: []\n",
			[]string{"x.yaml:3: nodes[0].gpuz: unknown field; want one of name, failureDomain, pricePerHour, gpus"}},
		{"wrong type", "nodes: []\nservices:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: lots\n",
			[]string{`x.yaml:6: services[0].peakRPS: "lots": want a number in [0, 1e+09]`}},
		{"validation", "nodes:\n  - name: a\n    gpus:\n      - product: V100\nservices:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: -3\n    safeRPSPerReplica: 10\n",
			[]string{"x.yaml:4: nodes[0].gpus[0].product: unknown product \"V100\"", "x.yaml:9: services[0].peakRPS: -3 is outside [0, 1e+09]"}},
		{"missing required", "nodes: []\nservices:\n  - name: s\n    tier: P0\n    profile: 1g.10gb\n    peakRPS: 5\n",
			[]string{"x.yaml:3: services[0].safeRPSPerReplica: required for P0"}},
		{"empty", "", []string{"x.yaml: spec: empty file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give), "x.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("refused.yaml", "model: s\nprofile: 1g.10gb\nsloThroughputRPS: 25\nverdict: {allowed: false}\n")
	write("other.yaml", "model: s\nprofile: 2g.20gb\nsloThroughputRPS: 25\nverdict: {allowed: true}\n")
	write("partial.yaml", "model: s\nprofile: 1g.10gb\n")
	write("unknown-key.yaml", "model: s\nprofile: 1g.10gb\nsloThroughputRPS: 25\nmemoryPeakBytes: 1\n")
	svc := func(record string) string {
		return "nodes: []\nservices:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: 5\n    record: " + record + "\n"
	}
	spec, err := Parse([]byte(svc("refused.yaml")), filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s := spec.Services[0]; s.SafeRPSPerReplica != 25 || !s.Refused {
		t.Errorf("got safe %v refused %v, want 25 true", s.SafeRPSPerReplica, s.Refused)
	}
	for give, want := range map[string]string{
		"other.yaml":       `spec.yaml:7: services[0].record: the record measured profile "2g.20gb", the service asks for "1g.10gb"`,
		"partial.yaml":     "sloThroughputRPS: missing (cmd/capacity writes it; absent, it would read as 0 or false)",
		"unknown-key.yaml": "memoryPeakBytes",
		"absent.yaml":      "no such file",
	} {
		_, err := Parse([]byte(svc(give)), filepath.Join(dir, "spec.yaml"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to contain %q", give, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"source-case.yaml", "eight-whole.yaml", "invalid-layouts.yaml", "p0-one-node.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse(data, filepath.Join(t.TempDir(), "spec.yaml"))
		if err != nil {
			return
		}
		// A spec that parses must check and audit without panicking, and
		// a feasible audit's proposal must pass its own checks.
		ledger.Check(spec)
		if len(spec.Nodes) <= 16 {
			a := ledger.Audit(spec, ledger.AuditOptions{})
			if a.Feasible && !ledger.Check(a.Proposal).OK {
				t.Errorf("proposal fails its checks: %+v", a.Proposal)
			}
		}
	})
}
