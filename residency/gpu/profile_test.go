package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveProfile(t *testing.T) {
	tests := []struct {
		name     string
		reported string
		catalog  []string
		want     ProfileMatch
	}{
		{name: "exact", reported: "1g.10gb", catalog: []string{"1g.10gb", "1g.20gb"},
			want: ProfileMatch{Reported: "1g.10gb", Profile: "1g.10gb", Exact: true}},
		{name: "memory figure drifts up (H100 94GB names its 1/8 slice 1g.12gb)", reported: "1g.12gb", catalog: []string{"1g.20gb", "1g.10gb", "3g.40gb"},
			want: ProfileMatch{Reported: "1g.12gb", Profile: "1g.10gb"}},
		{name: "H200's 1g.18gb is nearest 1g.20gb, not 1g.10gb", reported: "1g.18gb", catalog: []string{"1g.10gb", "1g.20gb"},
			want: ProfileMatch{Reported: "1g.18gb", Profile: "1g.20gb"}},
		{name: "3g.47gb to 3g.40gb, not 4g.40gb", reported: "3g.47gb", catalog: []string{"4g.40gb", "3g.40gb", "7g.80gb"},
			want: ProfileMatch{Reported: "3g.47gb", Profile: "3g.40gb"}},
		{name: "same attributes preferred over nearer memory", reported: "1g.12gb+me", catalog: []string{"1g.12gb", "1g.10gb+me"},
			want: ProfileMatch{Reported: "1g.12gb+me", Profile: "1g.10gb+me"}},
		{name: "attributes are not required", reported: "1g.12gb+me", catalog: []string{"1g.10gb"},
			want: ProfileMatch{Reported: "1g.12gb+me", Profile: "1g.10gb"}},
		{name: "compute-instance prefix kept", reported: "1c.3g.47gb", catalog: []string{"3g.40gb", "1c.3g.40gb"},
			want: ProfileMatch{Reported: "1c.3g.47gb", Profile: "1c.3g.40gb"}},
		{name: "equal candidates resolve in lexical order", reported: "1g.12gb", catalog: []string{"1g.10gb+me", "1g.10gb+gfx"},
			want: ProfileMatch{Reported: "1g.12gb", Profile: "1g.10gb+gfx"}},
		{name: "nearest by ratio", reported: "1g.15gb", catalog: []string{"1g.12gb", "1g.18gb"},
			want: ProfileMatch{Reported: "1g.15gb", Profile: "1g.18gb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveProfile(tt.reported, tt.catalog)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ResolveProfile (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveProfileRefuses(t *testing.T) {
	tests := []struct {
		name     string
		reported string
		catalog  []string
		wantText string
	}{
		// A 2× memory difference is another profile, never drift.
		{name: "1g.10gb is not 1g.20gb", reported: "1g.10gb", catalog: []string{"1g.20gb", "1g.5gb"}, wantText: "within 1.25× of 10gb"},
		{name: "other compute slices", reported: "2g.20gb", catalog: []string{"1g.20gb", "3g.20gb"}, wantText: "2g slices"},
		{name: "a compute instance is not its GPU instance", reported: "1c.3g.40gb", catalog: []string{"3g.40gb"}, wantText: "3g slices"},
		{name: "empty catalog", reported: "1g.10gb", catalog: nil, wantText: "catalog profiles: []"},
		{name: "not a MIG profile", reported: "h100-80gb", catalog: []string{"1g.10gb"}, wantText: "not a MIG profile name"},
		{name: "zero memory", reported: "1g.0gb", catalog: []string{"1g.0gb0"}, wantText: "not a MIG profile name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolveProfile(tt.reported, tt.catalog)
			if !errors.Is(err, ErrNoProfileMatch) || !strings.Contains(err.Error(), tt.wantText) || !strings.Contains(err.Error(), tt.reported) {
				t.Errorf("err = %v, want ErrNoProfileMatch naming %q and containing %q", err, tt.reported, tt.wantText)
			}
		})
	}
}
