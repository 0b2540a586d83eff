package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestLiveNoKubeconfig: `KUBECONFIG= ledger --live` with no ~/.kube/config, outside a pod, said
// "--kubeconfig: invalid configuration: no configuration has been provided, try setting
// KUBERNETES_MASTER environment variable": a flag nobody gave and a variable client-go's
// loading rules do not read. It now names each place looked at, in the documented order, and
// how to pass one; exit 2.
func TestLiveNoKubeconfig(t *testing.T) {
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists on this machine: the run would read it", clientcmd.RecommendedHomeFile)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	var out, errb bytes.Buffer
	code := run([]string{"--spec=" + testdata + "source-case.yaml", "--live", "--timeout=2s"}, &out, &errb)
	want := `ledger: no kubeconfig found: looked at $KUBECONFIG (not set), ~/.kube/config ("` + clientcmd.RecommendedHomeFile +
		`" does not exist) and the in-cluster service account (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not running in a pod);` +
		` pass one with --kubeconfig=PATH (or set $KUBECONFIG)`
	if got := strings.TrimSpace(errb.String()); code != exitBad || got != want {
		t.Errorf("exit %d, stderr %q\nwant %d, %q", code, got, exitBad, want)
	}
	if strings.Contains(errb.String(), "KUBERNETES_MASTER") {
		t.Errorf("stderr names KUBERNETES_MASTER: %q", errb.String())
	}
}

// TestNoKubeconfigError: the message for every way client-go finds no configuration. Only
// --kubeconfig given puts the flag in it; $KUBECONFIG set means ~/.kube/config was not read,
// and the message says so.
func TestNoKubeconfigError(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	const pod = "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not running in a pod"
	tests := []struct {
		name, flag, env string
		precedence      []string
		want            string
	}{
		{name: "nothing set", precedence: []string{missing},
			want: `no kubeconfig found: looked at $KUBECONFIG (not set), ~/.kube/config ("` + missing + `" does not exist) and the in-cluster service account (` + pod + `); pass one with --kubeconfig=PATH (or set $KUBECONFIG)`},
		{name: "$KUBECONFIG files", env: missing + ":" + empty, precedence: []string{missing, empty},
			want: `no kubeconfig found: looked at $KUBECONFIG ("` + missing + `" does not exist; "` + empty + `" gives no cluster (empty, or no server for its current context); ~/.kube/config is read only when $KUBECONFIG is empty)` +
				` and the in-cluster service account (` + pod + `); pass one with --kubeconfig=PATH (or set $KUBECONFIG)`},
		{name: "--kubeconfig empty", flag: empty, precedence: []string{missing},
			want: `--kubeconfig "` + empty + `" gives no cluster (empty, or no server for its current context), and no in-cluster service account (` + pod + `)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := noKubeconfigError(tt.flag, tt.env, tt.precedence, fileState, pod).Error()
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestInClusterMissing: why the in-cluster service account is not usable, as client-go
// decides it: the unset variables, else the token file.
func TestInClusterMissing(t *testing.T) {
	absent := func(string) string { return "does not exist" }
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "neither", env: nil, want: "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not running in a pod"},
		{name: "no port", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, want: "KUBERNETES_SERVICE_PORT is not set: not running in a pod"},
		{name: "no token", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
			want: `token "/var/run/secrets/kubernetes.io/serviceaccount/token" does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inClusterMissing(func(k string) string { return tt.env[k] }, absent); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// testKubeconfig is a kubeconfig for https://127.0.0.1:1 whose cluster names ca as its
// certificate-authority ("" for none).
func testKubeconfig(ca string) string {
	cluster := `{server: "https://127.0.0.1:1"}`
	if ca != "" {
		cluster = `{server: "https://127.0.0.1:1", certificate-authority: "` + ca + `"}`
	}
	return "apiVersion: v1\nkind: Config\ncurrent-context: c\n" +
		"clusters:\n- name: k\n  cluster: " + cluster + "\n" +
		"users:\n- name: u\n  user: {username: u}\n" +
		"contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
}

// TestNoKubeconfigMigration: client-go's default loading rules migrate ~/.kube/.kubeconfig to
// ~/.kube/config on every load, even with --kubeconfig given: they read the old file whole (a
// symlink to /dev/zero ran the ledger out of memory) and wrote ~/.kube/config. The ledger reads
// neither now and writes nothing: a ~/.kube/.kubeconfig file is not copied, and one that is a
// directory (clientcmd: "cannot migrate … because it is a directory") is no error.
//
// ~/.kube/config is client-go's RecommendedHomeFile, fixed from $HOME when the package is
// initialized, so each case runs this test binary again with HOME set from its start.
func TestNoKubeconfigMigration(t *testing.T) {
	if os.Getenv("INFERSCALE_TEST_MIGRATION_CHILD") != "" {
		cfg, err := restConfig(Config{Kubeconfig: os.Getenv("INFERSCALE_TEST_MIGRATION_KUBECONFIG")})
		if err != nil {
			t.Fatalf("restConfig: %v", err)
		}
		if cfg.Host != "https://127.0.0.1:1" {
			t.Fatalf("host %q, want --kubeconfig's https://127.0.0.1:1", cfg.Host)
		}
		return
	}
	for _, old := range []string{"file", "directory"} {
		t.Run(old, func(t *testing.T) {
			home := t.TempDir()
			legacy := filepath.Join(home, ".kube", ".kubeconfig")
			if err := os.MkdirAll(filepath.Dir(legacy), 0o700); err != nil {
				t.Fatal(err)
			}
			var err error
			if old == "file" {
				err = os.WriteFile(legacy, []byte(testKubeconfig("")), 0o600)
			} else {
				err = os.Mkdir(legacy, 0o700)
			}
			if err != nil {
				t.Fatal(err)
			}
			kc := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kc, []byte(testKubeconfig("")), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestNoKubeconfigMigration$", "-test.count=1")
			cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG=", "INFERSCALE_TEST_MIGRATION_CHILD=1",
				"INFERSCALE_TEST_MIGRATION_KUBECONFIG="+kc)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("ledger's restConfig with --kubeconfig and a ~/.kube/.kubeconfig %s: %v\n%s", old, err, out)
			}
			if _, err := os.Lstat(filepath.Join(home, ".kube", "config")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("~/.kube/config: %v; want it never written", err)
			}
		})
	}
}
