package sidecar

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/gpu"
	"github.com/inferscale/inferscale/residency/plan"
)

var discard = slog.New(slog.DiscardHandler)

func TestResolveBudget(t *testing.T) {
	cfg := func(f func(*residency.Config)) residency.Config {
		c := residency.DefaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name       string
		cfg        residency.Config
		lib        nvml.Interface
		visible    string
		want       plan.Budget
		wantSource string
		wantUsed   bool
	}{
		{name: "flag wins; NVML still reads used memory", lib: dgxh100.New(), visible: "0",
			cfg:  cfg(func(c *residency.Config) { c.BudgetBytes = 5 << 30; c.MIGProfile = "1g.10gb" }),
			want: plan.Budget{Profile: "1g.10gb", TotalBytes: 5 << 30}, wantSource: "--budget-bytes", wantUsed: true},
		{name: "NVML whole GPU with a profile name", lib: dgxh100.New(), visible: "3",
			cfg:  cfg(func(c *residency.Config) { c.MIGProfile = "h100-80gb"; c.ReserveBytes = 1 << 30 }),
			want: plan.Budget{Profile: "h100-80gb", TotalBytes: 81920 << 20, ReserveBytes: 1 << 30}, wantUsed: true},
		{name: "no GPU: profile table", lib: nil,
			cfg:  cfg(func(c *residency.Config) { c.MIGProfile = "3g.40gb" }),
			want: plan.Budget{Profile: "3g.40gb", TotalBytes: 40192 << 20}, wantSource: "profile table"},
		{name: "--free-idle reaches the budget", lib: nil,
			cfg:  cfg(func(c *residency.Config) { c.MIGProfile = "1g.10gb"; c.FreeIdle = true }),
			want: plan.Budget{Profile: "1g.10gb", TotalBytes: 9856 << 20, FreeIdle: true}, wantSource: "profile table"},
		{name: "nvml off ignores the GPU", lib: dgxh100.New(), visible: "0",
			cfg:  cfg(func(c *residency.Config) { c.NVML = "off"; c.MIGProfile = "1g.10gb" }),
			want: plan.Budget{Profile: "1g.10gb", TotalBytes: 9856 << 20}, wantSource: "profile table"},
		{name: "auto: a bad NVIDIA_VISIBLE_DEVICES falls back to the table", lib: dgxh100.New(), visible: "none",
			cfg:  cfg(func(c *residency.Config) { c.MIGProfile = "1g.10gb" }),
			want: plan.Budget{Profile: "1g.10gb", TotalBytes: 9856 << 20}, wantSource: "profile table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, dev, err := ResolveBudget(tt.cfg, plan.Catalog{}, gpu.NVMLOpener(tt.lib), tt.visible, discard)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			if diff := cmp.Diff(tt.want, b); diff != "" {
				t.Errorf("budget (-want +got):\n%s", diff)
			}
			if tt.wantSource != "" && dev.Source != tt.wantSource {
				t.Errorf("source = %q, want %q", dev.Source, tt.wantSource)
			}
			if (dev.UsedBytes != nil) != tt.wantUsed {
				t.Errorf("UsedBytes set = %v, want %v", dev.UsedBytes != nil, tt.wantUsed)
			}
		})
	}
}

func TestResolveBudgetErrors(t *testing.T) {
	c := residency.DefaultConfig()
	if _, _, err := ResolveBudget(c, plan.Catalog{}, nil, "", discard); !errors.Is(err, ErrNoBudget) {
		t.Errorf("no source: err = %v, want ErrNoBudget", err)
	}
	c.MIGProfile = "9g.1tb"
	if _, _, err := ResolveBudget(c, plan.Catalog{}, nil, "", discard); !errors.Is(err, ErrNoBudget) {
		t.Errorf("unknown profile: err = %v, want ErrNoBudget", err)
	}
	c = residency.DefaultConfig()
	c.NVML = "on"
	if _, _, err := ResolveBudget(c, plan.Catalog{}, gpu.NVMLOpener(dgxh100.New()), "none", discard); err == nil {
		t.Error("--nvml=on without a device: no error")
	}
	c.NVML = "auto"
	if _, _, err := ResolveBudget(c, plan.Catalog{}, gpu.NVMLOpener(dgxh100.New()), "0", discard); !errors.Is(err, ErrNoBudget) {
		t.Errorf("whole GPU without a profile: err = %v, want ErrNoBudget", err)
	}
}

func TestCheckProfile(t *testing.T) {
	cat, err := residency.LoadCatalog("../../cmd/residency/example-catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	custom := cat
	custom.Models = append([]plan.Model{{Name: "z", PeakMemoryBytes: map[string]int64{"1g.12gb": 1 << 30}}}, cat.Models...)
	tests := []struct {
		name    string
		profile string
		cat     plan.Catalog
		wantErr string // "" means nil
	}{
		{name: "unset", profile: "", cat: cat},
		{name: "in the table", profile: "7g.80gb", cat: cat},
		{name: "only in the catalog", profile: "1g.12gb", cat: custom},
		{name: "typo", profile: "9g.99gb", cat: cat,
			wantErr: `unknown --mig-profile: --mig-profile "9g.99gb" is neither in the profile table [1g.10gb 1g.10gb+me 1g.18gb 1g.18gb+me 1g.20gb 1g.35gb 1g.5gb 1g.5gb+me 2g.10gb 2g.20gb 2g.35gb 3g.20gb 3g.40gb 3g.71gb 4g.20gb 4g.40gb 4g.71gb 7g.141gb 7g.40gb 7g.80gb a100-40gb a100-80gb h100-80gb h200-141gb] nor named by any catalog model (catalog profiles: [1g.10gb 2g.20gb 3g.40gb])`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckProfile(tt.profile, tt.cat)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, got); diff != "" {
				t.Errorf("CheckProfile (-want +got):\n%s", diff)
			}
			if tt.wantErr != "" && !errors.Is(err, ErrUnknownProfile) {
				t.Errorf("err = %v, want ErrUnknownProfile", err)
			}
		})
	}
}
