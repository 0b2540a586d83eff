package strictyaml

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mergeBomb is keys _x0…_x<n>, each mapping merging the one before twice (the last names 2^n
// copies of {name: a}), then last.
func mergeBomb(n int, last string) string {
	var b strings.Builder
	b.WriteString("_x0: &a0 {name: a}\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "_x%d: &a%d {<<: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	return b.String() + last
}

// TestMergeBomb: a mapping that merge keys name 2^40 times is worked out once, so the
// document decodes to what it says ({name: a} each) instead of running without end (pairs
// recursed once per copy: an admission record built so hung the ledger and the catalog).
func TestMergeBomb(t *testing.T) {
	var got map[string]any
	if err := Unmarshal([]byte(mergeBomb(40, "m: {<<: [*a40, *a40], count: 2}\n")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"m": map[string]any{"name": "a", "count": float64(2)}}
	for i := range 41 {
		want[fmt.Sprintf("_x%d", i)] = map[string]any{"name": "a"}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}

	// Into a struct, the bomb's keys are unknown fields, each named once.
	var m struct {
		Model model `json:"model"`
	}
	err := Unmarshal([]byte(mergeBomb(40, "model: {<<: [*a40, *a40], count: 2, size: 1}\n")), &m)
	if err == nil || !strings.HasPrefix(err.Error(), "_x0: unknown field (line 1)\n_x1: unknown field (line 2)\n") ||
		!strings.HasSuffix(err.Error(), "\nmodel.size: unknown field (line 42)") {
		t.Errorf("err = %.400v; want each _x key and model.size unknown", err)
	}
}

// TestMergeCopiesBounded: every pair a merge key copies counts towards MaxNodes, so a small
// document whose merges copy a mapping more than MaxNodes pairs' worth is refused at the line
// where it passed the bound, naming it (110 mappings each merging a 100-key mapping 100
// times: 1.1 million pairs copied, for 11,000 values).
func TestMergeCopiesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("base: &m {")
	for i := range 100 {
		fmt.Fprintf(&b, "k%d: 1, ", i)
	}
	b.WriteString("k: 1}\nitems:\n")
	refs := strings.TrimSuffix(strings.Repeat("*m, ", 100), ", ")
	for range 110 {
		b.WriteString("  - {<<: [" + refs + "]}\n")
	}
	var v map[string]any
	err := Unmarshal([]byte(b.String()), &v)
	want := fmt.Sprintf(`["items"][102]: document expands to more than %d nodes through aliases and merge keys (<<) (strictyaml.MaxNodes) (line 105)`, MaxNodes)
	if err == nil || err.Error() != want {
		t.Errorf("err = %.300v\nwant %s", err, want)
	}
}

// TestExactKeys: with Options.ExactKeys a key names a field only as written, and a key that
// differs in case alone is an unknown field naming the field meant; without it, as before,
// encoding/json's case-insensitive match.
func TestExactKeys(t *testing.T) {
	give := []byte("models:\n  - Name: a\n    COUNT: 2\n")
	var got file
	err := UnmarshalWith(give, &got, Options{ExactKeys: true})
	want := "models[0].Name: unknown field; keys are case-sensitive: want name (line 2)\n" +
		"models[0].COUNT: unknown field; keys are case-sensitive: want count (line 3)"
	if err == nil || err.Error() != want {
		t.Errorf("ExactKeys: err = %v\nwant %s", err, want)
	}
	got = file{}
	if err := Unmarshal(give, &got); err != nil || len(got.Models) != 1 || got.Models[0].Name != "a" || got.Models[0].Count != 2 {
		t.Errorf("Unmarshal = %+v, %v; want name a, count 2", got, err)
	}
}
