package residency

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/residency/plan"
)

func TestParseCatalog(t *testing.T) {
	give := `
reserveBytes: 512Mi
idleTimeout: 15m
minResidency: 90s
models:
  - name: zeta
    digest: ` + dgB + `
    tier: P2
    peakMemoryBytes: {"1g.10gb": 3221225472}
  - name: alpha
    digest: ` + dgA + `
    tier: P0
    peakMemoryBytes:
      1g.10gb: 2Gi
      2g.20gb: 2.5Gi
    swapOverheadBytes: 1Gi
    loadTime: 30s
`
	got, err := ParseCatalog([]byte(give))
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Catalog{
		ReserveBytes: 512 << 20,
		IdleTimeout:  15 * time.Minute,
		MinResidency: 90 * time.Second,
		Models: []plan.Model{
			{Name: "alpha", Digest: dgA, Tier: plan.TierP0, PeakMemoryBytes: map[string]int64{"1g.10gb": 2 << 30, "2g.20gb": 5 << 29}, SwapOverheadBytes: 1 << 30, LoadTime: 30 * time.Second},
			{Name: "zeta", Digest: dgB, Tier: plan.TierP2, PeakMemoryBytes: map[string]int64{"1g.10gb": 3 << 30}, LoadTime: plan.DefaultLoadTime},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseCatalog (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"zeta"}, got.Unplaceable("2g.20gb")); diff != "" {
		t.Errorf("Unplaceable (-want +got):\n%s", diff)
	}
	m, ok := got.Model("zeta")
	if !ok || m.Tier != plan.TierP2 {
		t.Errorf("Model(zeta) = %+v, %v", m, ok)
	}
	if _, ok := got.Model("nope"); ok {
		t.Error("Model(nope) found")
	}
}

func TestParseCatalogDefaults(t *testing.T) {
	got, err := ParseCatalog([]byte("models: [{name: m, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.5gb: 1}}]"))
	if err != nil {
		t.Fatal(err)
	}
	want := plan.Catalog{IdleTimeout: plan.DefaultIdleTimeout, MinResidency: plan.DefaultMinResidency, Models: []plan.Model{
		{Name: "m", Digest: dgA, Tier: plan.TierP1, PeakMemoryBytes: map[string]int64{"1g.5gb": 1}, LoadTime: plan.DefaultLoadTime},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseCatalogErrors(t *testing.T) {
	ok := "{name: m, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.5gb: 1}}"
	tests := []struct {
		name string
		give string
		want []string // substrings every one of which must appear
	}{
		{name: "unknown top-level field", give: "model: []", want: []string{"model: unknown field (line 1)"}},
		{name: "unknown model field", give: "models: [{name: m, tierr: P0}]", want: []string{"models[0].tierr: unknown field (line 1)"}},
		{name: "misspelled field, on its line", give: "models:\n  - " + strings.ReplaceAll(ok[1:len(ok)-1], ", ", "\n    ") + "\n  - name: n\n    peakMemoryBytez: {1g.10gb: 2Gi}\n",
			want: []string{"models[1].peakMemoryBytez: unknown field (line 7)"}},
		{name: "bad duration, on its line", give: "models:\n  - name: m\n    loadTime: banana\n",
			want: []string{`models[0].loadTime: time: invalid duration "banana" (line 3)`}},
		{name: "bad quantity", give: "reserveBytes: 1Zi\nmodels: [" + ok + "]", want: []string{"reserveBytes: quantities must match", "(line 1)"}},
		{name: "empty", give: "", want: []string{"models: empty; want 1 to 10000 models"}},
		{name: "bad tier", give: "models: [{name: m, digest: " + dgA + ", tier: P3, peakMemoryBytes: {1g.5gb: 1}}]",
			want: []string{`models[0].tier: "P3"; want one of P0, P1, P2`}},
		{name: "bad digest", give: "models: [{name: m, digest: sha256:abc, tier: P0, peakMemoryBytes: {1g.5gb: 1}}]",
			want: []string{`models[0].digest: "sha256:abc"`, "sha256:<64 hex digits>"}},
		{name: "missing digest", give: "models: [{name: m, tier: P0, peakMemoryBytes: {1g.5gb: 1}}]",
			want: []string{"models[0].digest: empty"}},
		{name: "every violation reported", give: "idleTimeout: 0s\nminResidency: -1s\nreserveBytes: -1\nmodels: [" + ok + ", {name: m, digest: " + dgA + ", tier: P0, peakMemoryBytes: {1g.5gb: 0, BIG: 5}, loadTime: 2h, swapOverheadBytes: -3}]",
			want: []string{
				"idleTimeout: 0s out of range [1s, 168h0m0s]",
				"minResidency: -1s out of range [0s, 24h0m0s]",
				"reserveBytes: -1 out of range [0, 1125899906842624]",
				`models[1].name: "m" duplicates models[0].name`,
				`models[1].peakMemoryBytes["1g.5gb"]: 0 out of range [1, 1125899906842624]`,
				`models[1].peakMemoryBytes: profile "BIG" is not a profile name`,
				"models[1].loadTime: 2h0m0s out of range (0s, 1h0m0s]",
				"models[1].swapOverheadBytes: -3 out of range [0, 1125899906842624]",
			}},
		{name: "no profiles", give: "models: [{name: m, digest: " + dgA + ", tier: P1}]", want: []string{"models[0].peakMemoryBytes: empty"}},
		{name: "fractional bytes", give: "models: [{name: m, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.5gb: 1.5}}]",
			want: []string{`models[0].peakMemoryBytes["1g.5gb"]: "1.5" is not a whole number of bytes in [1, 1125899906842624]`}},
		{name: "bad name", give: "models: [{name: ../x, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.5gb: 1}}]",
			want: []string{`models[0].name: "../x" is not a Triton model name`}},
		// It said `"5": want a string`: a Go duration, with its unit.
		{name: "duration as number", give: "idleTimeout: 5\nmodels: [" + ok + "]", want: []string{`idleTimeout: "5": want a Go duration with its unit, such as "5s" (s, m, h, ms) (line 1)`}},
		{name: "load time as number", give: "models:\n  - name: m\n    loadTime: 3\n", want: []string{`models[0].loadTime: "3": want a Go duration with its unit, such as "3s" (s, m, h, ms) (line 3)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tt.give))
			if !errors.Is(err, plan.ErrCatalog) {
				t.Fatalf("err = %v, want ErrCatalog", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestLoadCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("models: [{name: m, digest: "+dgA+", tier: P1, peakMemoryBytes: {1g.5gb: 7}}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadCatalog(path)
	if err != nil || c.Models[0].PeakMemoryBytes["1g.5gb"] != 7 {
		t.Fatalf("LoadCatalog = %+v, %v", c, err)
	}
	if err := os.WriteFile(path, []byte("models:\n  - name: m\n    peakMemoryBytez: {1g.10gb: 20Gi}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCatalog(path); err == nil || err.Error() != path+": invalid catalog: models[0].peakMemoryBytez: unknown field (line 3)" {
		t.Errorf("misspelled field: err = %v, want the file, the field path and the line", err)
	}
	if _, err := LoadCatalog(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, plan.ErrCatalog) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrCatalog and ErrNotExist", err)
	}
	// An endless device is read no further than the bound.
	if _, err := LoadCatalog("/dev/zero"); !errors.Is(err, plan.ErrCatalog) || !errors.Is(err, boundedfile.ErrTooLarge) ||
		err.Error() != "invalid catalog: read /dev/zero: file too large: /dev/zero: larger than 16777216 bytes" {
		t.Errorf("/dev/zero: err = %v, want ErrCatalog wrapping ErrTooLarge", err)
	}
}

func TestExampleCatalogIsValid(t *testing.T) {
	if _, err := LoadCatalog("../cmd/residency/example-catalog.yaml"); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseCatalog(f *testing.F) {
	f.Add([]byte("models: [{name: m, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.5gb: 1Gi}}]"))
	f.Add([]byte("reserveBytes: 1e3\nidleTimeout: 1m\nmodels: [{name: a, tier: P0}, {name: a}]"))
	f.Add([]byte("models: [{peakMemoryBytes: {x: -1}, loadTime: -5s}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCatalog(data)
		if err != nil {
			if !errors.Is(err, plan.ErrCatalog) {
				t.Fatalf("error does not wrap ErrCatalog: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseCatalog accepted a catalog Validate rejects: %v", err)
		}
		for i := 1; i < len(c.Models); i++ {
			if c.Models[i-1].Name >= c.Models[i].Name {
				t.Fatalf("models not sorted and unique at %d", i)
			}
		}
	})
}

// TestCatalogBytesPastInt64: a byte count is compared as the quantity written, never through
// q.Value(), which wraps past int64 (2^64+1 read as 1 byte, 10E and 1e30 as 0, 2^63 as
// -2^63); the error names the value as written and the field's range.
func TestCatalogBytesPastInt64(t *testing.T) {
	model := func(extra string) string {
		return "models: [{name: m, digest: " + dgA + ", tier: P1" + extra + "}]"
	}
	tests := []struct{ give, want string }{
		{model(", peakMemoryBytes: {1g.10gb: 18446744073709551617}"),
			`invalid catalog: models[0].peakMemoryBytes["1g.10gb"]: 18446744073709551617 out of range [1, 1125899906842624]`},
		{model(", peakMemoryBytes: {1g.10gb: 18446744073709551616}"),
			`invalid catalog: models[0].peakMemoryBytes["1g.10gb"]: 18446744073709551616 out of range [1, 1125899906842624]`},
		{"reserveBytes: 10E\n" + model(", peakMemoryBytes: {1g.10gb: 1}"),
			"invalid catalog: reserveBytes: 10E out of range [0, 1125899906842624]"},
		{"reserveBytes: 1e30\n" + model(", peakMemoryBytes: {1g.10gb: 1}"),
			"invalid catalog: reserveBytes: 1e30 out of range [0, 1125899906842624]"},
		{model(", peakMemoryBytes: {1g.10gb: 1}, swapOverheadBytes: 9.3E"),
			"invalid catalog: models[0].swapOverheadBytes: 9.3E out of range [0, 1125899906842624]"},
		{model(", peakMemoryBytes: {1g.10gb: 1}, swapOverheadBytes: 9223372036854775808"),
			"invalid catalog: models[0].swapOverheadBytes: 9223372036854775808 out of range [0, 1125899906842624]"},
		{model(", peakMemoryBytes: {1g.10gb: 2Pi}"),
			`invalid catalog: models[0].peakMemoryBytes["1g.10gb"]: 2Pi out of range [1, 1125899906842624]`},
		{model(", peakMemoryBytes: {1g.10gb: -18446744073709551615}"),
			`invalid catalog: models[0].peakMemoryBytes["1g.10gb"]: -18446744073709551615 out of range [1, 1125899906842624]`},
		{model(", peakMemoryBytes: {1g.10gb: 1.5}"),
			`invalid catalog: models[0].peakMemoryBytes["1g.10gb"]: "1.5" is not a whole number of bytes in [1, 1125899906842624]`},
	}
	for _, tt := range tests {
		_, err := ParseCatalog([]byte(tt.give))
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseCatalog(%q) = %v\nwant %s", tt.give, err, tt.want)
		}
	}
	// The limit itself is accepted.
	c, err := ParseCatalog([]byte("reserveBytes: 1Pi\n" + model(", peakMemoryBytes: {1g.10gb: 1125899906842624}")))
	if err != nil || c.ReserveBytes != 1<<50 || c.Models[0].PeakMemoryBytes["1g.10gb"] != 1<<50 {
		t.Errorf("1Pi and 2^50: %+v, %v; want both accepted as 2^50", c, err)
	}
}

// TestCatalogByteCountText: resource.ParseQuantity's work grows with a quantity's exponent,
// and a twelve-byte 1e-999999999 ran for minutes at 1.8 GB (the catalog watch stalled with
// it); the text is bounded before it is parsed, the error naming the field and the bounds, in
// microseconds. Every count in range still fits: 1e15, 0.5e1, the 64-character limit.
func TestCatalogByteCountText(t *testing.T) {
	model := func(peak string) string {
		return "models: [{name: m, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.10gb: " + peak + "}}]"
	}
	const want = `: want a byte count of at most 1125899906842624 written in at most 64 characters, an exponent within ±100 (an integer, or a quantity such as 9Gi or 512Mi)`
	for _, give := range []string{"1e-999999999", "1e999999999", "0e999999999", "5E101", "1e-101", `"1e-999999999"`, strings.Repeat("1", 65)} {
		_, err := ParseCatalog([]byte(model(give)))
		if err == nil || !strings.Contains(err.Error(), `models[0].peakMemoryBytes["1g.10gb"]: `) || !strings.Contains(err.Error(), want) {
			t.Errorf("peak %s: %v\nwant the field and%s", give, err, want)
		}
	}
	_, err := ParseCatalog([]byte("reserveBytes: 1e-999999999\n" + model("1")))
	if err == nil || !strings.Contains(err.Error(), "reserveBytes: ") || !strings.Contains(err.Error(), want) {
		t.Errorf("reserveBytes 1e-999999999: %v", err)
	}
	for give, bytes := range map[string]int64{"1e15": 1e15, "0.5e1": 5, "1e+2": 100, strings.Repeat("0", 63) + "7": 7} {
		c, err := ParseCatalog([]byte(model(give)))
		if err != nil || c.Models[0].PeakMemoryBytes["1g.10gb"] != bytes {
			t.Errorf("peak %s: %v, %v; want %d bytes", give, c.Models, err, bytes)
		}
	}
}

// TestCatalogFieldSpellings: a field written twice in two spellings (encoding/json matches
// keys case-insensitively) is a duplicate naming both, not decoded last-wins (name: a then
// Name: b read as b, tier: P1 then TIER: P0 as P0).
func TestCatalogFieldSpellings(t *testing.T) {
	_, err := ParseCatalog([]byte("models:\n  - name: a\n    Name: b\n    digest: " + dgA + "\n    tier: P1\n    TIER: P0\n    peakMemoryBytes: {1g.10gb: 1}\n"))
	want := `invalid catalog: models[0].Name: duplicate field (first at line 2 as "name"; keys name fields case-insensitively) (line 3)` + "\n" +
		`models[0].TIER: duplicate field (first at line 5 as "tier"; keys name fields case-insensitively) (line 6)`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// TestCatalogModelLimitBeforeRecords: more than plan.MaxModels models is refused on the count
// alone, before any record is read (each model naming a record that does not exist: none is
// read, none reported).
func TestCatalogModelLimitBeforeRecords(t *testing.T) {
	var b strings.Builder
	b.WriteString("models:\n")
	for i := range plan.MaxModels + 1 {
		fmt.Fprintf(&b, "  - {name: m%d, digest: %s, tier: P2, record: missing-%d.yaml}\n", i, dgA, i)
	}
	reads := 0
	count := func(ref string) (plan.Admission, error) {
		reads++
		return record.Reader(t.TempDir())(ref)
	}
	_, err := ParseCatalog([]byte(b.String()), count)
	if want := "invalid catalog: models: 10001 models; want at most 10000"; err == nil || err.Error() != want {
		t.Errorf("err = %.300v\nwant %s", err, want)
	}
	if reads != 0 {
		t.Errorf("%d records read; want none past the model limit", reads)
	}
}

// TestCatalogRecordReadOnce: models naming one record (in any spelling of its path) read it
// once per catalog read; each error names the path as its entry wrote it.
func TestCatalogRecordReadOnce(t *testing.T) {
	dir := t.TempDir()
	writeRecord(t, dir, "a", 1<<30, 1<<30, 2)
	reads := 0
	count := func(ref string) (plan.Admission, error) {
		reads++
		return record.Reader(dir)(ref)
	}
	const r = "records/a.1g.10gb.yaml"
	give := "models:\n  - {name: a, digest: " + dgA + ", tier: P1, record: " + r + "}\n" +
		"  - {name: b, digest: " + dgA + ", tier: P1, record: ./" + r + "}\n" +
		"  - {name: c, digest: " + dgA + ", tier: P1, record: records//a.1g.10gb.yaml}\n" +
		"  - {name: d, digest: " + dgA + ", tier: P1, record: missing.yaml}\n" +
		"  - {name: e, digest: " + dgA + ", tier: P1, record: ./missing.yaml}\n"
	_, err := ParseCatalog([]byte(give), count)
	if reads != 2 {
		t.Errorf("%d record reads; want 2 (one per distinct path)", reads)
	}
	for _, want := range []string{
		`models[1].record: ./records/a.1g.10gb.yaml is the record of model "a", not "b"`,
		`models[2].record: records//a.1g.10gb.yaml is the record of model "a", not "c"`,
		"models[3].record: ", "models[4].record: ",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to contain %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "models[0]") {
		t.Errorf("err = %v; models[0] is its record's model", err)
	}
}

// TestCatalogErrorsBounded: a catalog with more violations than MaxCatalogErrors lists the
// first MaxCatalogErrors and says how many more there were.
func TestCatalogErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("models:\n")
	for i := range MaxCatalogErrors + 50 {
		fmt.Fprintf(&b, "  - {name: m%d, digest: %s, tier: P9, peakMemoryBytes: {1g.10gb: 1}}\n", i, dgA)
	}
	_, err := ParseCatalog([]byte(b.String()))
	if !errors.Is(err, plan.ErrCatalog) {
		t.Fatalf("err = %v, want ErrCatalog", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxCatalogErrors+1 {
		t.Errorf("%d lines; want %d", len(lines), MaxCatalogErrors+1)
	}
	if got, want := lines[len(lines)-1], "… and 50 more errors (at most 100 are listed)"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	if got, want := lines[99], `models[99].tier: "P9"; want one of P0, P1, P2`; got != want {
		t.Errorf("line 100 %q, want %q", got, want)
	}
}
