package strictyaml

import (
	"errors"
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
		{name: "duplicate field", give: "models:\n  - name: a\n    name: b\n",
			want: []FieldError{{Path: "models[0].name", Line: 3, Msg: "duplicate field (first at line 2)"}}},
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
