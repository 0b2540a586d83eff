package residency

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/capacity/record"
)

// writeRecord writes an allowed admission record for model on 1g.10gb under dir/records.
func writeRecord(t *testing.T, dir, model string, peak, swapPeak int64, load float64) {
	t.Helper()
	b, err := record.Marshal(record.Record{Model: model, Digest: dgA, Profile: "1g.10gb", SLOThroughputRPS: 37.5, SuccessRate: 1,
		Memory: record.Memory{SteadyBytes: peak, PeakBytes: peak, SwapPeakBytes: swapPeak}, LoadTimeSeconds: load,
		Verdict: record.Verdict{Allowed: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "records"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "records", record.FileName(model, "1g.10gb")), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCatalogRecord: a model entry referencing its admission record (relative to the catalog
// file) takes the record's peak, swap overhead (swap peak − peak) and load time; a hand-typed
// value that differs is an error naming both.
func TestCatalogRecord(t *testing.T) {
	dir := t.TempDir()
	writeRecord(t, dir, "classifier-v5", 1100<<20, 2200<<20, 3.5)
	path := filepath.Join(dir, "catalog.yaml")
	write := func(extra string) {
		t.Helper()
		y := "models:\n  - name: classifier-v5\n    digest: " + dgA + "\n    tier: P1\n    record: records/classifier-v5.1g.10gb.yaml\n" + extra
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	c, err := LoadCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Model("classifier-v5")
	if m.PeakMemoryBytes["1g.10gb"] != 1100<<20 || m.SwapOverheadBytes != 1100<<20 || m.LoadTime != 3500*time.Millisecond {
		t.Errorf("model = %+v, want the record's peak 1100 MiB, swap overhead 1100 MiB, load time 3.5s", m)
	}

	write("    peakMemoryBytes: {1g.10gb: 1Gi}\n    loadTime: 3s\n")
	_, err = LoadCatalog(path)
	for _, want := range []string{
		`models[0].peakMemoryBytes["1g.10gb"]: 1073741824 typed, record records/classifier-v5.1g.10gb.yaml measured 1153433600`,
		"models[0].loadTime: 3s typed, record records/classifier-v5.1g.10gb.yaml measured 3.5s",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}

	// Only the conflict: the record holds the peak the entry leaves out, so "peakMemoryBytes:
	// empty" is not added to it (docs/capacity.md's example).
	write("    loadTime: 3s\n")
	_, err = LoadCatalog(path)
	if want := path + ": invalid catalog: models[0].loadTime: 3s typed, record records/classifier-v5.1g.10gb.yaml measured 3.5s; remove one"; err == nil || err.Error() != want {
		t.Errorf("loadTime typed beside record: err = %v, want exactly %q", err, want)
	}

	if _, err := ParseCatalog([]byte("models: [{name: a, digest: " + dgA + ", tier: P1, record: r.yaml}]")); err == nil || !strings.Contains(err.Error(), `models[0].record: "r.yaml" needs the catalog file's directory`) {
		t.Errorf("record without a reader: err = %v", err)
	}
}

// TestCatalogNamesAsWritten (issue 12): a model named on, y or no keeps its name, and a
// profile key stays as written.
func TestCatalogNamesAsWritten(t *testing.T) {
	c, err := ParseCatalog([]byte("models:\n  - {name: on, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.10gb: 1Gi}}\n  - {name: y, digest: " + dgA + ", tier: P1, peakMemoryBytes: {1g.10gb: 1Gi}}\n  - {name: no, digest: " + dgA + ", tier: P2, peakMemoryBytes: {1g.10gb: 1Gi}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range c.Models {
		names = append(names, m.Name)
	}
	if strings.Join(names, ",") != "no,on,y" {
		t.Errorf("names = %v, want no, on, y as written", names)
	}
}

// TestCatalogAbsoluteRecordAsWritten: the record cache's key is the path the reader opens, so
// two absolute paths that clean to one string but resolve apart through a symlink are two
// records (one model was handed the other's before).
func TestCatalogAbsoluteRecordAsWritten(t *testing.T) {
	dir := t.TempDir()
	writeRecord(t, dir, "alpha", 1<<30, 2<<30, 2)
	writeRecord(t, filepath.Join(dir, "a"), "beta", 2<<30, 4<<30, 3)
	if err := os.MkdirAll(filepath.Join(dir, "a", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "a", "sub"), filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	// records/alpha… under dir, and the same name under a/records/, reached as lnk/../records/.
	if err := os.Rename(filepath.Join(dir, "a", "records", record.FileName("beta", "1g.10gb")), filepath.Join(dir, "a", "records", record.FileName("alpha", "1g.10gb"))); err != nil {
		t.Fatal(err)
	}
	name := record.FileName("alpha", "1g.10gb")
	y := "models:\n  - {name: alpha, digest: " + dgA + ", tier: P1, record: " + filepath.Join(dir, "records", name) + "}\n" +
		"  - {name: beta, digest: " + dgA + ", tier: P1, record: " + dir + "/lnk/../records/" + name + "}\n"
	c, err := ParseCatalog([]byte(y), record.Reader(dir))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Model("alpha")
	b, _ := c.Model("beta")
	if a.PeakMemoryBytes["1g.10gb"] != 1<<30 || b.PeakMemoryBytes["1g.10gb"] != 2<<30 {
		t.Errorf("peaks alpha %d, beta %d; want 1 GiB and 2 GiB, each from its own record", a.PeakMemoryBytes["1g.10gb"], b.PeakMemoryBytes["1g.10gb"])
	}
}

// TestCatalogUnmeasuredRecord: a record cmd/capacity wrote with --skip-memory (memorySource
// none; peak, swap peak and load time 0 for unknown) gives the model no memory figures. With a
// typed peak and load time the entry keeps them; without a typed peak the error says the record
// measured no memory (it said "peakMemoryBytes["1g.10gb"]: 0 out of range", or with a typed
// peak "1073741824 typed, record measured 0; remove one").
func TestCatalogUnmeasuredRecord(t *testing.T) {
	dir := t.TempDir()
	b, err := record.Marshal(record.Record{Model: "embedding-v3", Digest: dgA, Profile: "1g.10gb", SLOThroughputRPS: 40, SuccessRate: 1,
		Runtime: record.Runtime{MemorySource: "none"}, Verdict: record.Verdict{Allowed: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "records"), 0o755); err != nil {
		t.Fatal(err)
	}
	ref := "records/" + record.FileName("embedding-v3", "1g.10gb")
	if err := os.WriteFile(filepath.Join(dir, ref), b, 0o644); err != nil {
		t.Fatal(err)
	}
	entry := "models:\n  - {name: embedding-v3, digest: " + dgA + ", tier: P1, record: " + ref
	c, err := ParseCatalog([]byte(entry+", peakMemoryBytes: {1g.10gb: 1Gi}, loadTime: 4s}\n"), record.Reader(dir))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Model("embedding-v3")
	if m.PeakMemoryBytes["1g.10gb"] != 1<<30 || m.SwapOverheadBytes != 0 || m.LoadTime != 4*time.Second {
		t.Errorf("model = %+v, want the typed peak 1 GiB, swap overhead 0, load time 4s", m)
	}
	_, err = ParseCatalog([]byte(entry+"}\n"), record.Reader(dir))
	want := "models[0].record: " + ref + " measured no memory (memorySource none: cmd/capacity --skip-memory or an OpenAI-compatible server), so it gives no peak for profile 1g.10gb"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("no typed peak: err = %v, want it to contain %q", err, want)
	}
}

// TestCatalogNullRefused: a null is refused naming its path and line (idleTimeout: null took
// the 10m default without a word; peakMemoryBytes {1g.10gb: null} was "0 out of range", a 0
// nobody wrote).
func TestCatalogNullRefused(t *testing.T) {
	model := "models:\n  - name: a\n    digest: " + dgA + "\n    tier: P1\n"
	tests := []struct{ name, yaml, want string }{
		{"idleTimeout", "idleTimeout: null\n" + model + "    peakMemoryBytes: {1g.10gb: 1Gi}\n",
			"idleTimeout: null: remove the key to take its default, or give a value (line 1)"},
		{"a peak", model + "    peakMemoryBytes: {1g.10gb: ~}\n",
			`models[0].peakMemoryBytes["1g.10gb"]: null: remove the key to take its default, or give a value (line 5)`},
		{"loadTime", model + "    peakMemoryBytes: {1g.10gb: 1Gi}\n    loadTime:\n",
			"models[0].loadTime: null: remove the key to take its default, or give a value (line 6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCatalog([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
