package specfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/ledger"
)

// countReads makes recordRead count the reads of each path until the test ends.
func countReads(t *testing.T) map[string]int {
	t.Helper()
	reads := map[string]int{}
	t.Cleanup(func() { recordRead = record.Read })
	recordRead = func(path string) (record.Record, error) {
		reads[path]++
		return record.Read(path)
	}
	return reads
}

const oneNode = "nodes:\n  - {name: a, gpus: [{product: A100-SXM4-80GB}]}\n"

// TestServiceLimitBeforeRecords: a spec past ledger.MaxServices is refused on the count
// alone, before any record is read — 240,000 services naming /dev/zero took 230 s, 1.7 GB
// and printed 240,000 errors — so a record that does not exist is not reported.
func TestServiceLimitBeforeRecords(t *testing.T) {
	reads := countReads(t)
	var b strings.Builder
	b.WriteString(oneNode + "services:\n")
	for i := range ledger.MaxServices + 1 {
		fmt.Fprintf(&b, "  - {name: s%d, tier: P2, profile: 1g.10gb, record: missing-%d.yaml}\n", i, i)
	}
	spec := b.String()
	_, err := Parse([]byte(spec), filepath.Join(t.TempDir(), "x.yaml"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "services" || fe.Line != 3 || fe.Msg != "5001 services; at most 5000" || strings.Contains(err.Error(), "\n") {
		t.Errorf("Parse = %v; want the one error services: 5001 services; at most 5000 (line 3)", err)
	}
	if len(reads) != 0 {
		t.Errorf("records read: %v; want none past the service limit", reads)
	}
	// The same list given through a merge key is still counted first.
	merged := strings.ReplaceAll(strings.Replace(spec, "services:\n", "<<:\n  services:\n", 1), "\n  - {name: s", "\n    - {name: s")
	_, err = Parse([]byte(merged), filepath.Join(t.TempDir(), "x.yaml"))
	if err == nil || !strings.Contains(err.Error(), "5001 services; at most 5000") || strings.Contains(err.Error(), "missing-") {
		t.Errorf("merged services: Parse = %.300v; want the service count alone", err)
	}
	if len(reads) != 0 {
		t.Errorf("merged services: records read: %v; want none", reads)
	}
}

// TestRecordReadOncePerPath: services naming one record, in any spelling of its path, read it
// once per spec (it was read and parsed again for every service: 200 services on one 1 MB
// record took 77 s); each service takes its figures.
func TestRecordReadOncePerPath(t *testing.T) {
	reads := countReads(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "r.yaml"), []byte("model: s\nprofile: 1g.10gb\nsloThroughputRPS: 25\nverdict: {allowed: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	give := oneNode + "services:\n" +
		"  - {name: s1, tier: P1, profile: 1g.10gb, peakRPS: 5, record: r.yaml}\n" +
		"  - {name: s2, tier: P1, profile: 1g.10gb, peakRPS: 5, record: ./r.yaml}\n" +
		"  - {name: s3, tier: P1, profile: 1g.10gb, peakRPS: 5, record: sub/../r.yaml}\n" +
		"  - {name: s4, tier: P1, profile: 1g.10gb, peakRPS: 5, record: " + filepath.Join(dir, "r.yaml") + "}\n" +
		"  - {name: s5, tier: P1, profile: 1g.10gb, peakRPS: 5, record: missing.yaml}\n" +
		"  - {name: s6, tier: P1, profile: 1g.10gb, peakRPS: 5, record: ./missing.yaml}\n"
	spec, err := Parse([]byte(give), filepath.Join(dir, "spec.yaml"))
	want := map[string]int{filepath.Join(dir, "r.yaml"): 1, filepath.Join(dir, "missing.yaml"): 1}
	if fmt.Sprint(reads) != fmt.Sprint(want) {
		t.Errorf("reads %v, want %v", reads, want)
	}
	for _, w := range []string{"spec.yaml:8: services[4].record: admission record: ", "spec.yaml:9: services[5].record: admission record: "} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v; want it to contain %q", err, w)
		}
	}
	for _, s := range spec.Services[:4] {
		if s.SafeRPSPerReplica != 25 {
			t.Errorf("%s: safeRPSPerReplica %v from the record, want 25", s.Name, s.SafeRPSPerReplica)
		}
	}
}

// TestErrorsBounded: at most MaxErrors errors, then one saying how many more; when the ones
// left out are all about nodes (which the live mode replaces), that one says so in its field.
func TestErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(oneNode + "services:\n")
	for i := range MaxErrors + 50 {
		fmt.Fprintf(&b, "  - {name: s%d, tier: P9, profile: 1g.10gb}\n", i)
	}
	_, err := Parse([]byte(b.String()), "x.yaml")
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != MaxErrors+1 {
		t.Fatalf("%d errors; want %d", len(lines), MaxErrors+1)
	}
	if got, want := lines[MaxErrors-1], `x.yaml:103: services[99].tier: "P9" is not one of P0, P1, P2`; got != want {
		t.Errorf("error %d = %q, want %q", MaxErrors, got, want)
	}
	if got, want := lines[MaxErrors], "x.yaml: spec: 50 more errors not shown (at most 100 are reported)"; got != want {
		t.Errorf("last = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v does not wrap ErrInvalid", err)
	}

	b.Reset()
	b.WriteString("nodes:\n")
	for i := range MaxErrors + 3 {
		fmt.Fprintf(&b, "  - {name: N%d, gpus: [{product: A100-SXM4-80GB}]}\n", i)
	}
	b.WriteString("services: []\n")
	_, err = Parse([]byte(b.String()), "x.yaml")
	lines = strings.Split(fmt.Sprint(err), "\n")
	if got, want := lines[len(lines)-1], "x.yaml: nodes: 3 more errors not shown (at most 100 are reported)"; len(lines) != MaxErrors+1 || got != want {
		t.Errorf("%d errors, last %q; want %d, last %q", len(lines), got, MaxErrors+1, want)
	}
}

// TestRecordFieldSpellings: an admission record's keys are exact, case included (docs/capacity.md:
// its keys are fixed). SLOTHROUGHPUTRPS alone was read as sloThroughputRPS, and a second
// spelling beside the first was a "duplicate"; both are now an unknown field naming the key
// meant.
func TestRecordFieldSpellings(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, give, want string }{
		{"other spelling alone", "model: s\nprofile: 1g.10gb\nSLOTHROUGHPUTRPS: 4000\nverdict: {allowed: true}\n",
			`SLOTHROUGHPUTRPS: unknown field; keys are case-sensitive: want sloThroughputRPS (line 3)`},
		{"two spellings", "model: s\nprofile: 1g.10gb\nsloThroughputRPS: 40\nSLOThroughputRPS: 4000\nverdict: {allowed: true}\n",
			`SLOThroughputRPS: unknown field; keys are case-sensitive: want sloThroughputRPS (line 4)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, "r.yaml"), []byte(tt.give), 0o600); err != nil {
				t.Fatal(err)
			}
			give := oneNode + "services:\n  - {name: s, tier: P1, profile: 1g.10gb, peakRPS: 5, record: r.yaml}\n"
			spec, err := Parse([]byte(give), filepath.Join(dir, "spec.yaml"))
			want := filepath.Join(dir, "spec.yaml") + ":4: services[0].record: admission record: " + filepath.Join(dir, "r.yaml") +
				": invalid admission record: " + tt.want
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("err = %v\nwant it to begin %s", err, want)
			}
			if got := spec.Services[0].SafeRPSPerReplica; got != 0 {
				t.Errorf("safeRPSPerReplica %v; want none taken from the refused record", got)
			}
		})
	}
}

// TestAbsoluteRecordPathAsWritten: an absolute record path is read as written, as the OS
// resolves it: through a symlink, lnk/../r.yaml is not r.yaml (filepath.Clean would say it is).
func TestAbsoluteRecordPathAsWritten(t *testing.T) {
	dir := t.TempDir()
	rec := func(path string, rps int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(fmt.Sprintf("model: s\nprofile: 1g.10gb\nsloThroughputRPS: %d\nverdict: {allowed: true}\n", rps)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rec(filepath.Join(dir, "r.yaml"), 25)
	rec(filepath.Join(dir, "a", "r.yaml"), 40)
	if err := os.MkdirAll(filepath.Join(dir, "a", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "a", "sub"), filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	give := oneNode + "services:\n" +
		"  - {name: s1, tier: P1, profile: 1g.10gb, peakRPS: 5, record: " + filepath.Join(dir, "r.yaml") + "}\n" +
		"  - {name: s2, tier: P1, profile: 1g.10gb, peakRPS: 5, record: " + dir + "/lnk/../r.yaml}\n"
	spec, err := Parse([]byte(give), filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := []float64{spec.Services[0].SafeRPSPerReplica, spec.Services[1].SafeRPSPerReplica}; got[0] != 25 || got[1] != 40 {
		t.Errorf("safeRPSPerReplica %v, want [25 40]: lnk/../r.yaml is a/r.yaml", got)
	}
}

// TestYAMLErrorsBounded: yaml.v3 reports every type failure in one error, a line each; past
// MaxErrors lines the rest is one line saying how many more.
func TestYAMLErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := range MaxErrors + 30 {
		fmt.Fprintf(&b, "  - {name: n%d, gpus: 5}\n", i)
	}
	b.WriteString("services: []\n")
	_, err := Parse([]byte(b.String()), "x.yaml")
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != MaxErrors+2 || lines[len(lines)-1] != "  30 more not shown (at most 100 are reported)" {
		t.Errorf("%d lines, last %q; want %d (the header, %d failures) and then how many more", len(lines), lines[len(lines)-1], MaxErrors+2, MaxErrors)
	}
}

// TestBadRecordIsOneError: a record that cannot be read is one error, on the record: line;
// each also came with "services[0].safeRPSPerReplica: required for P1 (> 0, or record: an
// admission record)" at the service's first line, though the service gave a record.
func TestBadRecordIsOneError(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "x.yaml")
	for _, tt := range []struct{ record, want string }{
		{"/dev/zero", ":4: services[0].record: admission record: invalid admission record: /dev/zero: larger than 1048576 bytes"},
		{"missing.yaml", ":4: services[0].record: admission record: invalid admission record: open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"},
	} {
		data := oneNode + "services:\n  - {name: s, tier: P1, profile: 1g.10gb, peakRPS: 10, record: " + tt.record + "}\n"
		_, err := Parse([]byte(data), spec)
		if err == nil || err.Error() != spec+tt.want {
			t.Errorf("record %s: Parse = %v\nwant %s", tt.record, err, spec+tt.want)
		}
	}
}

// TestNegativeSafeRPSIsOneError: a negative safeRPSPerReplica of a P1 service is one error on
// its line, naming the field and the range a P1 service accepts; it also came with
// "services[0].safeRPSPerReplica: required for P1" for the same value.
func TestNegativeSafeRPSIsOneError(t *testing.T) {
	data := oneNode + "services:\n  - name: s\n    tier: P1\n    profile: 1g.10gb\n    peakRPS: 10\n    safeRPSPerReplica: -5\n"
	_, err := Parse([]byte(data), "x.yaml")
	if _, one := err.(*FieldError); !one { // Parse returns a single error as it is, several joined
		t.Fatalf("Parse = %v; want one *FieldError", err)
	}
	if want := "x.yaml:8: services[0].safeRPSPerReplica: -5 is outside (0, 1e+09], required for P1 (or record: an admission record)"; err.Error() != want {
		t.Errorf("Parse = %v\nwant %s", err, want)
	}
}
