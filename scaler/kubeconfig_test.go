package scaler

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferscale/inferscale/internal/kubeconfigfile/streamtest"

	"golang.org/x/sync/errgroup"

	"github.com/inferscale/inferscale/internal/kubeconfigfile"
)

// TestKubeconfigBounded: clientcmd reads a kubeconfig whole, and --kubeconfig=/dev/zero ran the
// scaler out of memory at start. A kubeconfig that is not a regular file, or is over 1 MiB, is
// refused by startTargets naming the flag and the file, before anything reads it (the rule is
// the ledger's, internal/kubeconfigfile). /dev/null stands for a device here: before the check
// /dev/zero would have exhausted the test's memory instead of failing it.
//
// The size was stat'ed, so /proc/self/pagemap (a regular file of size 0 that reads on for
// hundreds of GiB) passed and ran the scaler out of memory; it is now read through the bound.
// A certificate-authority the kubeconfig names was read whole by client-go after the check (a
// directory or a large file failed late in kube.New, /dev/zero ran out of memory); it is read
// through the bound at load and refused naming the kubeconfig, the cluster and the file.
func TestKubeconfigBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, kubeconfigfile.MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	withCA := func(name, ca string) string {
		p := filepath.Join(dir, name)
		y := "apiVersion: v1\nkind: Config\ncurrent-context: c\n" +
			"clusters:\n- name: k\n  cluster: {server: \"https://127.0.0.1:1\", certificate-authority: \"" + ca + "\"}\n" +
			"users:\n- name: u\n  user: {username: u}\n" +
			"contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
		if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caDir, caBig := withCA("ca-dir.yaml", dir), withCA("ca-big.yaml", big)
	tests := []struct {
		name, kubeconfig, want string
	}{
		{"device", "/dev/null", `Kubeconfig (--kubeconfig) "/dev/null": not a regular file (Dc---------); want a kubeconfig file`},
		{"directory", dir, `Kubeconfig (--kubeconfig) "` + dir + `": not a regular file (d---------); want a kubeconfig file`},
		{"over 1 MiB", big, `Kubeconfig (--kubeconfig) "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a kubeconfig file`},
		{"zero size, streams", "/proc/self/pagemap", `Kubeconfig (--kubeconfig) "/proc/self/pagemap": more than 1048576 bytes (1 MiB) read, though its size is 0; want a kubeconfig file`},
		{"certificate-authority a directory", caDir, `Kubeconfig (--kubeconfig) "` + caDir + `": cluster "k": certificate-authority "` + dir + `": not a regular file (d---------); want a PEM file`},
		{"certificate-authority over 1 MiB", caBig, `Kubeconfig (--kubeconfig) "` + caBig + `": cluster "k": certificate-authority "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a PEM file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.kubeconfig == streamtest.Pagemap {
				streamtest.SkipUnlessPagemap(t)
			}
			cfg := DefaultConfig()
			cfg.Kubeconfig = tt.kubeconfig
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g, gctx := errgroup.WithContext(ctx)
			targets, err := startTargets(gctx, g, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			cancel()
			if werr := g.Wait(); werr != nil {
				t.Errorf("goroutines started: %v", werr)
			}
			if err == nil || err.Error() != tt.want || targets != nil {
				t.Errorf("startTargets: targets %v, error %v\nwant nil, %q", targets, err, tt.want)
			}
		})
	}
}
