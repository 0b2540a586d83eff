package version

import (
	"flag"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormat(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.7",
		Main:      debug.Module{Path: "github.com/inferscale/inferscale", Version: "v0.1.0"},
		Settings: []debug.BuildSetting{
			{Key: "CGO_ENABLED", Value: "0"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "91919e0abcdef0123456789abcdef0123456789a"},
			{Key: "vcs.time", Value: "2026-12-01T07:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name string
		give *debug.BuildInfo
		want string
	}{
		{name: "stamped release build", give: stamped,
			want: "scaler v0.1.0 github.com/inferscale/inferscale revision 91919e0abcdef0123456789abcdef0123456789a 2026-12-01T07:00:00Z (modified) go1.26.7 linux/arm64"},
		{name: "go run: no version, no vcs", give: &debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Path: "github.com/inferscale/inferscale", Version: "(devel)"}},
			want: "scaler (devel) github.com/inferscale/inferscale go1.26.7 linux/arm64"},
		{name: "unmodified tree", give: &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}, {Key: "vcs.revision", Value: "abc"}}},
			want: "scaler v0.2.0 revision abc linux/arm64"},
		{name: "no build information", give: nil, want: "scaler (devel) linux/arm64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Format("scaler", tt.give, "linux", "arm64")); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	v := Flag(fs)
	if err := fs.Parse([]string{"--version"}); err != nil {
		t.Fatal(err)
	}
	if !*v {
		t.Error("--version parsed as false")
	}
}
