package prom

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRunningPartsDoNotImportEachOther: the scaler and the residency sidecar share this package
// and nothing of each other; this package imports neither.
func TestRunningPartsDoNotImportEachOther(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list dependencies")
	}
	const mod = "github.com/inferscale/inferscale/"
	tests := []struct {
		pattern string
		banned  []string
	}{
		{pattern: "../scaler/...", banned: []string{mod + "residency"}},
		{pattern: "../residency/...", banned: []string{mod + "scaler"}},
		{pattern: ".", banned: []string{mod + "scaler", mod + "residency"}},
	}
	for _, tt := range tests {
		out, err := exec.Command("go", "list", "-deps", "-test", tt.pattern).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps -test %s: %v\n%s", tt.pattern, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range tt.banned {
				if dep == b || strings.HasPrefix(dep, b+"/") || strings.HasPrefix(dep, b+" ") {
					t.Errorf("%s depends on %s", tt.pattern, dep)
				}
			}
		}
	}
}
