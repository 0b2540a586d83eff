package strictyaml

import (
	"errors"
	"testing"
)

// TestSecondDocumentIsRefused: a catalog or config with a second YAML document used to be read
// up to the first "---" and the rest dropped without a word (a tier: P9 model in the second
// document went unnoticed). It is refused, naming the second document's line.
func TestSecondDocumentIsRefused(t *testing.T) {
	type model struct {
		Name string `json:"name"`
		Tier string `json:"tier"`
	}
	type catalog struct {
		Models []model `json:"models"`
	}
	tests := []struct {
		name     string
		give     string
		wantLine int // 0: no error
		want     catalog
	}{
		{name: "one document", give: "models:\n  - name: a\n    tier: P0\n", want: catalog{Models: []model{{"a", "P0"}}}},
		{name: "leading marker", give: "---\nmodels:\n  - name: a\n    tier: P0\n", want: catalog{Models: []model{{"a", "P0"}}}},
		{name: "trailing empty document", give: "models:\n  - name: a\n    tier: P0\n---\n", want: catalog{Models: []model{{"a", "P0"}}}},
		{name: "second document", give: "models:\n  - name: a\n    tier: P0\n---\nmodels:\n  - name: b\n    tier: P9\n", wantLine: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got catalog
			err := Unmarshal([]byte(tt.give), &got)
			if tt.wantLine == 0 {
				if err != nil {
					t.Fatalf("Unmarshal: %v", err)
				}
				if len(got.Models) != len(tt.want.Models) || got.Models[0] != tt.want.Models[0] {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Line != tt.wantLine {
				t.Fatalf("Unmarshal error = %v, want a *FieldError at line %d", err, tt.wantLine)
			}
		})
	}
}
