package strictyaml

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type model struct {
	Name     string                       `json:"name"`
	Peak     map[string]resource.Quantity `json:"peakMemoryBytes"`
	LoadTime *metav1.Duration             `json:"loadTime,omitempty"`
	Count    int64                        `json:"count,omitempty"`
	Fault    struct {
		Hang bool `json:"hangLoad,omitempty"`
	} `json:"fault,omitempty"`
}

type file struct {
	Reserve *resource.Quantity `json:"reserveBytes,omitempty"`
	Models  []model            `json:"models"`
}

func TestUnmarshalErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []FieldError
	}{
		{name: "unknown field in a list item", give: `
models:
  - name: a
    peakMemoryBytez: {1g.10gb: 2Gi}
`, want: []FieldError{{Path: "models[0].peakMemoryBytez", Line: 4, Msg: "unknown field"}}},
		{name: "bad duration, bad quantity and a nested unknown field, all reported", give: `
reserveBytes: lots
models:
  - name: a
  - name: b
    peakMemoryBytes: {1g.10gb: 2Gi, 2g.20gb: two}
  - name: c
    loadTime: banana
    fault: {hangLoad: true, slow: 1}
`, want: []FieldError{
			{Path: "reserveBytes", Line: 2, Msg: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
			{Path: `models[1].peakMemoryBytes["2g.20gb"]`, Line: 6, Msg: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
			{Path: "models[2].loadTime", Line: 8, Msg: `time: invalid duration "banana"`},
			{Path: "models[2].fault.slow", Line: 9, Msg: "unknown field"},
		}},
		{name: "wrong type", give: "models:\n  - name: a\n    count: many\n",
			want: []FieldError{{Path: "models[0].count", Line: 3, Msg: `"many": want an integer`}}},
		// metav1.Duration's own decoding said only "want a string": a number needs its unit.
		{name: "duration without a unit", give: "models:\n  - name: a\n    loadTime: 3\n",
			want: []FieldError{{Path: "models[0].loadTime", Line: 3, Msg: `"3": want a Go duration with its unit, such as "3s" (s, m, h, ms)`}}},
		{name: "duration as a fraction", give: "models:\n  - name: a\n    loadTime: 1.5\n",
			want: []FieldError{{Path: "models[0].loadTime", Line: 3, Msg: `"1.5": want a Go duration with its unit, such as "1.5s" (s, m, h, ms)`}}},
		{name: "duration in exponent notation", give: "models:\n  - name: a\n    loadTime: 1e3\n",
			want: []FieldError{{Path: "models[0].loadTime", Line: 3, Msg: `"1e3": want a Go duration with its unit, such as "3s" (s, m, h, ms)`}}},
		{name: "duration as a boolean", give: "models:\n  - name: a\n    loadTime: true\n",
			want: []FieldError{{Path: "models[0].loadTime", Line: 3, Msg: `"true": want a Go duration with its unit, such as "3s" (s, m, h, ms)`}}},
		{name: "duration as a list", give: "models:\n  - name: a\n    loadTime: [3s]\n",
			want: []FieldError{{Path: "models[0].loadTime", Line: 3, Msg: `a list: want a Go duration with its unit, such as "3s" (s, m, h, ms)`}}},
		{name: "duplicate field", give: "models:\n  - name: a\n    name: b\n",
			want: []FieldError{{Path: "models[0].name", Line: 3, Msg: "duplicate field (first at line 2)"}}},
		// A second spelling of a field (encoding/json matches keys case-insensitively) is a
		// duplicate too: name: a then Name: b decoded as b without a word.
		{name: "duplicate field, two spellings", give: "models:\n  - name: a\n    Name: b\n    NAME: c\n",
			want: []FieldError{
				{Path: "models[0].Name", Line: 3, Msg: `duplicate field (first at line 2 as "name"; keys name fields case-insensitively)`},
				{Path: "models[0].NAME", Line: 4, Msg: `duplicate field (first at line 2 as "name"; keys name fields case-insensitively)`},
			}},
		{name: "duplicate field, two spellings, neither exact", give: "Models: []\nMODELS: []\n",
			want: []FieldError{{Path: "MODELS", Line: 2, Msg: `duplicate field (first at line 1 as "Models"; keys name fields case-insensitively)`}}},
		{name: "duplicate field, two spellings inside a merged mapping", give: "models:\n  - <<: {name: a, Name: b}\n",
			want: []FieldError{{Path: "models[0].Name", Line: 2, Msg: `duplicate field (first at line 2 as "name"; keys name fields case-insensitively)`}}},
		{name: "map keys are exact: two spellings are two keys", give: "models:\n  - name: a\n    peakMemoryBytes: {1g.10gb: 1, 1G.10GB: 2, 1g.10gb: 3}\n",
			want: []FieldError{{Path: `models[0].peakMemoryBytes.1g.10gb`, Line: 3, Msg: "duplicate field (first at line 3)"}}},
		{name: "not a list", give: "models: {name: a}\n",
			want: []FieldError{{Path: "models", Line: 1, Msg: "a mapping: want a list"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f file
			err := Unmarshal([]byte(tt.give), &f)
			var got []FieldError
			for _, e := range joined(err) {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("error %v is not a *FieldError", e)
				}
				got = append(got, *fe)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func TestUnmarshal(t *testing.T) {
	var f file
	if err := Unmarshal([]byte("models:\n  - name: a\n    loadTime: 8s\n    peakMemoryBytes: {1g.10gb: 2Gi}\n"), &f); err != nil {
		t.Fatal(err)
	}
	q := f.Models[0].Peak["1g.10gb"]
	if f.Models[0].LoadTime.Duration.String() != "8s" || q.Value() != 2<<30 {
		t.Errorf("decoded %+v", f)
	}
	err := Unmarshal([]byte("models: [\n"), &f)
	if err == nil || err.Error() != "yaml: line 1: did not find expected node content" {
		t.Errorf("syntax error = %v", err)
	}
}

// TestScalarsAsWritten: YAML 1.1 booleans (on, y, no, off, yes) and numbers that yaml.v2 would
// reformat stay the text the user wrote when the field is a string, as map keys too; a boolean
// field takes only YAML 1.2's true/false. sigs.k8s.io/yaml turned name: on into "true".
func TestScalarsAsWritten(t *testing.T) {
	type entry struct {
		Name    string            `json:"name"`
		Version string            `json:"version,omitempty"`
		Labels  map[string]string `json:"labels,omitempty"`
		Hang    bool              `json:"hang,omitempty"`
	}
	var got []entry
	err := Unmarshal([]byte(`
- {name: on, version: 1.10, labels: {y: n, off: 0x1F}}
- {name: y, hang: true}
- {name: no}
- {name: "off", version: 007}
- {name: yes, labels: {true: false}}
`), &got)
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{Name: "on", Version: "1.10", Labels: map[string]string{"y": "n", "off": "0x1F"}},
		{Name: "y", Hang: true},
		{Name: "no"},
		{Name: "off", Version: "007"},
		{Name: "yes", Labels: map[string]string{"true": "false"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	var b struct {
		Hang bool `json:"hang"`
	}
	err = Unmarshal([]byte("hang: yes\n"), &b)
	if err == nil || err.Error() != `hang: "yes": want true or false (line 1)` {
		t.Errorf("hang: yes = %v, want a FieldError asking for true or false", err)
	}
}

// TestSpellingsOfOneField: a single spelling other than the json name still decodes (as
// encoding/json matches it); a merged key of another spelling is overridden by the explicit
// one, as a merged key of the same spelling is.
func TestSpellingsOfOneField(t *testing.T) {
	var got []model
	if err := Unmarshal([]byte("- {Name: a, COUNT: 2}\n- {<<: {Name: m, count: 1}, name: b}\n"), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[0].Count != 2 || got[1].Name != "b" || got[1].Count != 1 {
		t.Errorf("decoded %+v; want a (count 2) and b (explicit name over merged Name, count 1)", got)
	}
}

func TestUnmarshalAliasesAndMerge(t *testing.T) {
	var got struct {
		Base   map[string]int `json:"base"`
		Models []model        `json:"models"`
	}
	err := Unmarshal([]byte(`
base: &b {count: 1}
models:
  - &m {name: a, count: 2}
  - {<<: *m, name: b}
  - *m
`), &got)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Models) != 3 || got.Models[1].Name != "b" || got.Models[1].Count != 2 || got.Models[2].Name != "a" {
		t.Errorf("models = %+v, want a, b (merged count 2), a", got.Models)
	}
	// A billion-laughs document is refused, not expanded.
	var v any
	lol := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i := range 8 {
		lol += fmt.Sprintf("%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", 'b'+i, 'b'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i, 'a'+i)
	}
	err = Unmarshal([]byte(lol), &v)
	if err == nil || !strings.Contains(err.Error(), "document expands to more than") {
		t.Errorf("billion laughs: err = %v", err)
	}
}

// FuzzUnmarshal: any input decodes or fails with an error and never panics; a plain
// (unquoted, one-line, one-word) name decoded into a string is text the input holds.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		"models:\n  - name: on\n    peakMemoryBytes: {1g.10gb: 2Gi}\n",
		"models: [{name: y}, {name: no}, {name: off}, {name: yes}]\n",
		"models: [{name: 1.10, count: 0x1F}]\n",
		"reserveBytes: 1e3\nmodels: []\n",
		"models: [{<<: {name: a}, name: b}]\n",
		"a: &a [x]\nb: [*a, *a]\n",
		"models:\n  - name: a\n    name: b\n",
		"{",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var fl file
		if err := Unmarshal([]byte(s), &fl); err != nil {
			return
		}
		for _, m := range fl.Models {
			if !strings.ContainsAny(m.Name, " \\\"'\n") && !strings.Contains(s, m.Name) {
				t.Errorf("name %q is not in the input", m.Name)
			}
		}
	})
}

// TestNotUTF8NamesLine: a byte that is not UTF-8 is named with its line and offset (yaml.v3
// said only "yaml: invalid leading UTF-8 octet").
func TestNotUTF8NamesLine(t *testing.T) {
	var v struct {
		A string `json:"a"`
		B string `json:"b"`
	}
	err := Unmarshal([]byte("a: x\nb: caf\xe9\n"), &v)
	const want = "byte 0xe9 at offset 11 is not UTF-8; want a UTF-8 file (line 2)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if err := Unmarshal([]byte("a: \xef\xbf\xbd\n"), &v); err != nil || v.A != "\ufffd" {
		t.Errorf("an encoded U+FFFD: err = %v, a = %q; want it read", err, v.A)
	}
}

// TestRefuseNull: with Options.RefuseNull a null field, map entry or list element is an error
// naming its path; without it a null leaves the zero value, as encoding/json does.
func TestRefuseNull(t *testing.T) {
	type doc struct {
		A string         `json:"a"`
		M map[string]int `json:"m"`
		L []int          `json:"l"`
	}
	var v doc
	err := UnmarshalWith([]byte("a: null\nm: {x: ~}\nl: [1, null]\n"), &v, Options{RefuseNull: true})
	for _, want := range []string{"a: null: remove the key", `m["x"]: null: remove the key`, "l[1]: null: remove the key"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
	if err := Unmarshal([]byte("a: null\n"), &v); err != nil || v.A != "" {
		t.Errorf("without RefuseNull: err = %v, a = %q; want nil and empty", err, v.A)
	}
}
