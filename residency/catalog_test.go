package residency

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
			want: []string{`models[0].peakMemoryBytes["1g.5gb"]: "1500m" is not a whole number of bytes`}},
		{name: "bad name", give: "models: [{name: ../x, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.5gb: 1}}]",
			want: []string{`models[0].name: "../x" is not a Triton model name`}},
		{name: "duration as number", give: "idleTimeout: 5\nmodels: [" + ok + "]", want: []string{"idleTimeout"}},
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
