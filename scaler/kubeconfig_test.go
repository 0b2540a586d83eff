package scaler

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/inferscale/inferscale/internal/kubeconfigfile"
)

// TestKubeconfigBounded: clientcmd reads a kubeconfig whole, and --kubeconfig=/dev/zero ran the
// scaler out of memory at start. A kubeconfig that is not a regular file, or is over 1 MiB, is
// refused by startTargets naming the flag and the file, before anything reads it (the rule is
// the ledger's, internal/kubeconfigfile). /dev/null stands for a device here: before the check
// /dev/zero would have exhausted the test's memory instead of failing it.
func TestKubeconfigBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, kubeconfigfile.MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name, kubeconfig, want string
	}{
		{"device", "/dev/null", `Kubeconfig (--kubeconfig) "/dev/null": not a regular file (Dc---------); want a kubeconfig file`},
		{"directory", dir, `Kubeconfig (--kubeconfig) "` + dir + `": not a regular file (d---------); want a kubeconfig file`},
		{"over 1 MiB", big, `Kubeconfig (--kubeconfig) "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a kubeconfig file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
