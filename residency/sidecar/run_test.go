package sidecar

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/plan"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunFailsFast(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tooBig := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(tooBig, []byte(`models:
  - name: huge
    digest: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    tier: P0
    peakMemoryBytes: {1g.10gb: 20Gi}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := residency.DefaultConfig()
	base.CatalogPath = "../../cmd/residency/example-catalog.yaml"
	base.MIGProfile = "1g.10gb"
	base.NVML = "off"
	// A free port and a bounded context: should a case regress and start serving, Run returns
	// nil at the deadline and the case fails instead of hanging on a fixed port.
	base.ListenAddress = "127.0.0.1:0"
	tests := []struct {
		name string
		give func(*residency.Config)
		want string
	}{
		{name: "bad config", give: func(c *residency.Config) { c.MaxConcurrentLoads = 0 }, want: "MaxConcurrentLoads"},
		{name: "missing catalog", give: func(c *residency.Config) { c.CatalogPath = "missing.yaml" }, want: "invalid catalog"},
		{name: "no budget", give: func(c *residency.Config) { c.MIGProfile = "" }, want: "no memory budget"},
		{name: "P0 model above the budget", give: func(c *residency.Config) { c.CatalogPath = tooBig; c.BudgetBytes = 10307921510 },
			want: tooBig + `: pinned model can never fit the budget: model "huge" (P0): peak 20.00GiB + reserve 0.0MiB = 20.00GiB exceeds the budget 9.60GiB of profile 1g.10gb`},
		{name: "misspelled profile with --budget-bytes", give: func(c *residency.Config) { c.MIGProfile = "9g.99gb"; c.BudgetBytes = 10307921510 },
			want: `unknown --mig-profile: --mig-profile "9g.99gb" is neither in the profile table [1g.10gb 1g.10gb+me`},
		{name: "listen address taken", give: func(c *residency.Config) { c.ListenAddress = busy.Addr().String() }, want: "listen " + busy.Addr().String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.give(&c)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := Run(ctx, c, discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	c := base
	c.CatalogPath = "missing.yaml"
	if err := Run(context.Background(), c, discard); !errors.Is(err, plan.ErrCatalog) {
		t.Errorf("err = %v, want ErrCatalog", err)
	}
}
