//go:build cgo

package sidecar

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/gpu"
	"github.com/inferscale/inferscale/residency/plan"
)

// withMIG carves a GPU instance of profileID out of the first GPU of go-nvml's mock s (its own
// CreateGpuInstance and profile table) and makes it visible as MIG device 0:0 named name, with
// that profile's memory; the mock has no MIG device handles of its own.
func withMIG(t *testing.T, s *server.Server, profileID int, name string) *server.Server {
	t.Helper()
	parent := s.Devices[0].(*server.Device)
	info, ret := parent.GetGpuInstanceProfileInfo(profileID)
	if ret != nvml.SUCCESS {
		t.Fatalf("profile %d: %v", profileID, ret)
	}
	if _, ret := parent.CreateGpuInstance(&info); ret != nvml.SUCCESS {
		t.Fatalf("create GPU instance: %v", ret)
	}
	mig := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return "MIG-1b2c3d4e-0000-5000-8000-000000000001", nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: info.MemorySizeMB << 20, Free: info.MemorySizeMB << 20}, nvml.SUCCESS
		},
	}
	parent.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 0 {
			return mig, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return s
}

func catalogWith(profiles ...string) plan.Catalog {
	peaks := map[string]int64{}
	for _, p := range profiles {
		peaks[p] = 1 << 30
	}
	return plan.Catalog{Models: []plan.Model{{Name: "m", PeakMemoryBytes: peaks}}}
}

// TestResolveBudgetMapsReportedMIGProfile: the MIG profile NVML names the pod's slice is
// resolved to the catalog's name for the same geometry and nearest memory, and logged.
func TestResolveBudgetMapsReportedMIGProfile(t *testing.T) {
	tests := []struct {
		name    string
		lib     func(t *testing.T) *server.Server
		cat     plan.Catalog
		want    plan.Budget
		wantLog string // "" when the name is the catalog's
	}{
		{name: "H100 slice a driver names 1g.12gb is the catalog's 1g.10gb",
			lib: func(t *testing.T) *server.Server {
				return withMIG(t, dgxh100.New(), nvml.GPU_INSTANCE_PROFILE_1_SLICE, "NVIDIA H100 80GB HBM3 MIG 1g.12gb")
			},
			cat: catalogWith("1g.10gb", "1g.20gb", "3g.40gb"),
			// 10240 MiB: the H100 mock's 1-slice profile MemorySizeMB; NVML's reading stays the budget.
			want:    plan.Budget{Profile: "1g.10gb", TotalBytes: 10240 << 20},
			wantLog: `"reported":"1g.12gb","profile":"1g.10gb"`},
		{name: "H200 1g.18gb to a catalog written for 1g.20gb",
			lib: func(t *testing.T) *server.Server {
				return withMIG(t, dgxh200.New(), nvml.GPU_INSTANCE_PROFILE_1_SLICE, "NVIDIA H200 141GB HBM3e MIG 1g.18gb")
			},
			cat:     catalogWith("1g.10gb", "1g.20gb"),
			want:    plan.Budget{Profile: "1g.20gb", TotalBytes: 18432 << 20},
			wantLog: `"reported":"1g.18gb","profile":"1g.20gb"`},
		{name: "exact name: nothing to log",
			lib: func(t *testing.T) *server.Server {
				return withMIG(t, dgxh100.New(), nvml.GPU_INSTANCE_PROFILE_1_SLICE, "NVIDIA H100 80GB HBM3 MIG 1g.10gb")
			},
			cat:  catalogWith("1g.10gb", "1g.12gb"),
			want: plan.Budget{Profile: "1g.10gb", TotalBytes: 10240 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, nil))
			b, dev, err := ResolveBudget(residency.DefaultConfig(), tt.cat, gpu.NVMLOpener(tt.lib(t)), "0:0", log)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			if diff := cmp.Diff(tt.want, b); diff != "" {
				t.Errorf("budget (-want +got):\n%s", diff)
			}
			logged := strings.Contains(buf.String(), "MIG profile resolved")
			if tt.wantLog == "" && logged || tt.wantLog != "" && !strings.Contains(buf.String(), tt.wantLog) {
				t.Errorf("log %q: want the mapping %q logged (none for an exact name)", buf.String(), tt.wantLog)
			}
		})
	}
}

// TestResolveBudgetRefusesUnmatchedMIGProfile: a slice no catalog profile matches (H200's
// 2-slice 2g.35gb against a catalog for 2g.20gb) is refused rather than run with nothing
// loadable.
func TestResolveBudgetRefusesUnmatchedMIGProfile(t *testing.T) {
	s := withMIG(t, dgxh200.New(), nvml.GPU_INSTANCE_PROFILE_2_SLICE, "NVIDIA H200 141GB HBM3e MIG 2g.35gb")
	_, _, err := ResolveBudget(residency.DefaultConfig(), catalogWith("2g.20gb", "1g.20gb"), gpu.NVMLOpener(s), "0:0", discard)
	if !errors.Is(err, ErrNoBudget) || !errors.Is(err, gpu.ErrNoProfileMatch) || !strings.Contains(err.Error(), `"2g.35gb"`) {
		t.Errorf("err = %v, want ErrNoBudget wrapping gpu.ErrNoProfileMatch naming 2g.35gb", err)
	}
	// --mig-profile overrides the device's name.
	c := residency.DefaultConfig()
	c.MIGProfile = "2g.20gb"
	b, dev, err := ResolveBudget(c, catalogWith("2g.20gb"), gpu.NVMLOpener(withMIG(t, dgxh200.New(), nvml.GPU_INSTANCE_PROFILE_2_SLICE, "NVIDIA H200 141GB HBM3e MIG 2g.35gb")), "0:0", discard)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if b.Profile != "2g.20gb" || b.TotalBytes != 35840<<20 {
		t.Errorf("budget %+v, want profile 2g.20gb with the device's 35840 MiB", b)
	}
}
