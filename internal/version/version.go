// Package version reports what a binary was built from — the main module's version and the
// VCS revision — read from the Go build information (runtime/debug.ReadBuildInfo), so no
// version string is kept by hand. Every command's --version prints String.
//
// `go build` in a git checkout stamps vcs.revision, vcs.time and vcs.modified (unless
// -buildvcs=false); since Go 1.24 it also stamps the main module's version from the tag, or a
// pseudo-version. `go run` and test binaries carry neither: the version reads "(devel)".
package version

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Flag registers --version on fs. After fs.Parse, a true value means: print String and exit 0.
func Flag(fs *flag.FlagSet) *bool {
	return fs.Bool("version", false, "print the module version and VCS revision, then exit")
}

// String is the one-line version of command as built, from debug.ReadBuildInfo.
func String(command string) string {
	bi, _ := debug.ReadBuildInfo()
	return Format(command, bi, runtime.GOOS, runtime.GOARCH)
}

// Format renders command's version from bi (nil when the binary has no build information):
//
//	scaler v0.1.0 github.com/inferscale/inferscale revision 0123abcd… 2026-12-01T07:00:00Z (modified) go1.26.7 linux/amd64
//
// Fields absent from bi are left out; a missing version reads "(devel)", as Go writes it.
func Format(command string, bi *debug.BuildInfo, goos, goarch string) string {
	ver, path, goVer := "(devel)", "", ""
	var rev, when string
	modified := false
	if bi != nil {
		if bi.Main.Version != "" {
			ver = bi.Main.Version
		}
		path, goVer = bi.Main.Path, bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	parts := []string{command, ver}
	if path != "" {
		parts = append(parts, path)
	}
	if rev != "" {
		parts = append(parts, "revision", rev)
	}
	if when != "" {
		parts = append(parts, when)
	}
	if modified {
		parts = append(parts, "(modified)")
	}
	if goVer != "" {
		parts = append(parts, goVer)
	}
	parts = append(parts, fmt.Sprintf("%s/%s", goos, goarch))
	return strings.Join(parts, " ")
}

// ErrRequested is returned by a command's flag parsing when --version was given, so that it
// prints String and exits 0 before validating the other flags.
var ErrRequested = errors.New("--version requested")
