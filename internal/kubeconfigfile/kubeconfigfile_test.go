package kubeconfigfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheck: a device, a directory or a file over 1 MiB is refused naming the flag and the
// path; a regular file within the bound and a missing path (left to clientcmd) pass.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	atBound := filepath.Join(dir, "at-bound.yaml")
	if err := os.WriteFile(atBound, make([]byte, MaxBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"device", "/dev/zero", `--kubeconfig "/dev/zero": not a regular file (Dc---------); want a kubeconfig file`},
		{"directory", dir, `--kubeconfig "` + dir + `": not a regular file (d---------); want a kubeconfig file`},
		{"over 1 MiB", big, `--kubeconfig "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a kubeconfig file`},
		{"at 1 MiB", atBound, ""},
		{"missing", filepath.Join(dir, "none.yaml"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check("--kubeconfig", tt.path)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Check(%q) = %q\nwant %q", tt.path, got, tt.want)
			}
		})
	}
}
