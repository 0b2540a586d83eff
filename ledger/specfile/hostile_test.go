package specfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/ledger"
)

// mergeBomb is n+1 mappings, each merging the one before twice: the last names 2^n copies of
// the first. head is written before each anchor's key (a top-level key, or a list item).
func mergeBomb(n int, first, item func(i int) string) string {
	var b strings.Builder
	b.WriteString(first(0) + "\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s &a%d {<<: [*a%d, *a%d]}\n", item(i), i, i-1, i-1)
	}
	return b.String()
}

// TestMergeBombBounded: merge keys naming a mapping 2^40 times are walked once per mapping
// (numberWalk ran 20 s at full CPU and never finished on this 1.2 KB spec), and the spec is
// refused by its own faults: unknown top-level keys, or yaml.v3's alias bound when the anchors
// sit where the spec allows them.
func TestMergeBombBounded(t *testing.T) {
	topLevel := mergeBomb(40, func(int) string { return "x0: &a0 {name: gpu-a}" }, func(i int) string { return fmt.Sprintf("x%d:", i) }) +
		"nodes: [{<<: [*a40, *a40], gpus: [{product: A100-SXM4-80GB}]}]\n"
	inNodes := mergeBomb(40, func(int) string { return "nodes:\n  - &a0 {name: gpu-a, gpus: [{product: A100-SXM4-80GB}]}" }, func(int) string { return "  -" }) +
		"services: []\n"
	tests := []struct{ name, give, want string }{
		{"anchors at the top level", topLevel, "bomb.yaml:1: x0: unknown field; want one of nodes, services"},
		{"anchors in nodes", inNodes, "invalid spec: bomb.yaml: yaml: document contains excessive aliasing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give), "bomb.yaml")
			if err == nil || strings.Split(err.Error(), "\n")[0] != tt.want {
				t.Errorf("Parse = %.300v\nwant first line %s", err, tt.want)
			}
		})
	}
}

// TestLeadingZeroRefused: a number with a leading zero is refused naming the field, its line
// and range: yaml.v3 read pricePerHour: 0367 as octal 247 ($180310/node/month) and
// peakRPS: 012 as 10. 0 and 0.5 are still numbers.
func TestLeadingZeroRefused(t *testing.T) {
	spec := func(price, peak string) string {
		return "nodes:\n  - name: a\n    pricePerHour: " + price + "\n    gpus: [{product: A100-SXM4-80GB}]\n" +
			"services:\n  - {name: s, tier: P1, profile: 1g.10gb, peakRPS: " + peak + ", safeRPSPerReplica: 40}\n"
	}
	_, err := Parse([]byte(spec("0367", "012")), "x.yaml")
	want := "x.yaml:3: nodes[0].pricePerHour: 0367 has a leading zero, which yaml.v3 reads as octal; want a plain decimal number in [0, 1e6] USD per hour (0 and 0.5 are fine)\n" +
		"x.yaml:6: services[0].peakRPS: 012 has a leading zero, which yaml.v3 reads as octal; want a plain decimal number in [0, 1e+09] (0 and 0.5 are fine)"
	if err == nil || err.Error() != want {
		t.Errorf("Parse = %v\nwant %s", err, want)
	}
	got, err := Parse([]byte(spec("0.5", "0")), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got.Nodes[0].PricePerHour != 0.5 || got.Services[0].PeakRPS != 0 {
		t.Errorf("pricePerHour %v peakRPS %v, want 0.5 and 0", got.Nodes[0].PricePerHour, got.Services[0].PeakRPS)
	}
}

// TestPeakRequired: a P0 or P1 service without peakRPS is refused naming the service and the
// field (it was read as peak 0 and passed); peakRPS: 0 is a demand and stays, and a P2 service
// needs none. The error is one `ledger --live` lets through (AboutNodes), since Prometheus may
// supply the peak; the live run validates again after reading it.
func TestPeakRequired(t *testing.T) {
	data, err := os.ReadFile("testdata/source-case.yaml")
	if err != nil {
		t.Fatal(err)
	}
	noPeak := strings.Replace(string(data), "    peakRPS: 18\n", "", 1)
	_, err = Parse([]byte(noPeak), "testdata/source-case.yaml")
	want := `testdata/source-case.yaml:31: services[1].peakRPS: required for P1 service "classifier": the demand to meet, req/s in [0, 1e+09], is not in the spec nor read from Prometheus (ledger --live --prometheus-address reads it from the ScaledObject named "classifier" when that has data)`
	if err == nil || err.Error() != want {
		t.Fatalf("Parse = %v\nwant %s", err, want)
	}
	if !AboutNodes([]error{err}) {
		t.Errorf("AboutNodes(%v) = false; want true (ledger --live may read the peak)", err)
	}
	merged := strings.Replace(string(data), "    peakRPS: 18\n", "    <<: {peakRPS: 18}\n", 1)
	zero := strings.Replace(string(data), "    peakRPS: 18\n", "    peakRPS: 0\n", 1)
	for name, give := range map[string]string{"merged": merged, "zero": zero} {
		if _, err := Parse([]byte(give), "testdata/source-case.yaml"); err != nil {
			t.Errorf("%s: Parse = %v; want no error", name, err)
		}
	}
	spec, err := Parse([]byte(oneNode+"services:\n  - {name: s, tier: P2, profile: 1g.10gb}\n"), "x.yaml")
	if err != nil || spec.Services[0].PeakRPS != 0 {
		t.Errorf("P2 without peakRPS: peak %v, err %v; want 0 and no error", spec.Services[0].PeakRPS, err)
	}
}

// TestRecordReadOncePerFile: absolute spellings of one record's path (/d/././r.yaml, //d/r.yaml)
// read it once: the cache was keyed on the path as written, so a spec naming one big record
// in many spellings parsed it again for each.
func TestRecordReadOncePerFile(t *testing.T) {
	reads := countReads(t)
	dir := t.TempDir()
	r := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(r, []byte("model: s\nprofile: 1g.10gb\nsloThroughputRPS: 25\nverdict: {allowed: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	give := oneNode + "services:\n"
	for i, p := range []string{r, dir + "/./././r.yaml", "/" + dir + "//r.yaml", "r.yaml"} {
		give += fmt.Sprintf("  - {name: s%d, tier: P1, profile: 1g.10gb, peakRPS: 5, record: %q}\n", i, p)
	}
	spec, err := Parse([]byte(give), filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{r: 1}, reads); diff != "" {
		t.Errorf("reads (-want +got):\n%s", diff)
	}
	for _, s := range spec.Services {
		if s.SafeRPSPerReplica != 25 {
			t.Errorf("%s: safeRPSPerReplica %v, want 25", s.Name, s.SafeRPSPerReplica)
		}
	}
}

// TestRefusedRecordFailsAdmission: a record cmd/capacity writes for a refused model
// (sloThroughputRPS: 0, verdict.allowed: false) is not bad input: the service fails its
// admission check. It was refused as "sloThroughputRPS 0 is outside (0, 1e+09]", exit 2.
// An allowed record still needs sloThroughputRPS in (0, 1e9].
func TestRefusedRecordFailsAdmission(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"refused.yaml": "model: s\nprofile: 1g.10gb\nsloThroughputRPS: 0\nverdict: {allowed: false, limits: [no level passed]}\n",
		"zero.yaml":    "model: s\nprofile: 1g.10gb\nsloThroughputRPS: 0\nverdict: {allowed: true}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	svc := func(rec string) string {
		return "nodes:\n  - {name: a, gpus: [{product: A100-SXM4-80GB, mig: [1g.10gb, 1g.10gb]}]}\n  - {name: b, gpus: [{product: A100-SXM4-80GB, mig: [1g.10gb]}]}\n" +
			"services:\n  - {name: s, tier: P1, profile: 1g.10gb, peakRPS: 5, record: " + rec + "}\n"
	}
	spec, err := Parse([]byte(svc("refused.yaml")), filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatalf("Parse = %v; want no error", err)
	}
	res := ledger.Check(spec)
	want := "admission: the admission record's verdict does not allow this model on 1g.10gb"
	if got := res.Services[0].Reasons; res.OK || len(got) == 0 || got[0] != want {
		t.Errorf("Check OK %v, reasons %q; want not OK, first %q", res.OK, got, want)
	}
	_, err = Parse([]byte(svc("zero.yaml")), filepath.Join(dir, "spec.yaml"))
	wantErr := filepath.Join(dir, "spec.yaml") + ":5: services[0].record: admission record " + filepath.Join(dir, "zero.yaml") +
		": sloThroughputRPS 0 is outside (0, 1e+09] (verdict.allowed: true)"
	if err == nil || err.Error() != wantErr {
		t.Errorf("allowed, μ 0: Parse = %v\nwant %s", err, wantErr)
	}
}
