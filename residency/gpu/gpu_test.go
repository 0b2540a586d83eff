//go:build cgo

package gpu

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/plan"
)

// migDevice carves a MIG device out of a go-nvml mock GPU: it creates a GPU instance of
// profileID through the mock's own CreateGpuInstance and returns a MIG device handle whose
// memory is that instance profile's MemorySizeMB (the go-nvml mock has no MIG device handles
// of its own; everything else comes from its tables).
func migDevice(t *testing.T, parent *server.Device, profileID int, uuid, name string) *mock.Device {
	t.Helper()
	info, ret := parent.GetGpuInstanceProfileInfo(profileID)
	if ret != nvml.SUCCESS {
		t.Fatalf("profile %d: %v", profileID, ret)
	}
	if _, ret := parent.CreateGpuInstance(&info); ret != nvml.SUCCESS {
		t.Fatalf("create GPU instance: %v", ret)
	}
	used := uint64(0)
	mig := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			total := info.MemorySizeMB << 20
			return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
		},
	}
	return mig
}

func TestOpenWholeGPU(t *testing.T) {
	tests := []struct {
		name      string
		server    func() nvml.Interface
		visible   func(nvml.Interface) string
		wantName  string
		wantTotal int64
	}{
		{name: "A100 by UUID", server: func() nvml.Interface { return dgxa100.New() },
			visible:  func(s nvml.Interface) string { return s.(*server.Server).Devices[3].(*server.Device).UUID },
			wantName: "Mock NVIDIA A100-SXM4-40GB", wantTotal: 40960 << 20},
		{name: "H100 by index", server: func() nvml.Interface { return dgxh100.New() },
			visible:  func(nvml.Interface) string { return "2" },
			wantName: "NVIDIA H100 80GB HBM3", wantTotal: 81920 << 20},
		{name: "H200 by UUID", server: func() nvml.Interface { return dgxh200.New() },
			visible:  func(s nvml.Interface) string { return s.(*server.Server).Devices[0].(*server.Device).UUID },
			wantName: "NVIDIA H200 141GB HBM3e", wantTotal: 144384 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.server()
			d, err := Open(s, tt.visible(s))
			if err != nil {
				t.Fatal(err)
			}
			if d.Name != tt.wantName || d.TotalBytes != tt.wantTotal || d.MIG || d.Profile != "" {
				t.Errorf("Open = %+v; want name %q, total %d, whole GPU", d, tt.wantName, tt.wantTotal)
			}
			b, err := d.Budget("h100-80gb", 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(plan.Budget{Profile: "h100-80gb", TotalBytes: tt.wantTotal, ReserveBytes: 1 << 30}, b); diff != "" {
				t.Errorf("Budget (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenMIG(t *testing.T) {
	s := dgxa100.New()
	parent := s.Devices[0].(*server.Device)
	const uuid = "MIG-4f1c6e5e-6b7a-5a3e-9d6c-3b1f0e2d4c5a"
	mig := migDevice(t, parent, nvml.GPU_INSTANCE_PROFILE_1_SLICE, uuid, "Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb")
	byUUID := s.DeviceGetHandleByUUIDFunc
	s.DeviceGetHandleByUUIDFunc = func(u string) (nvml.Device, nvml.Return) {
		if u == uuid {
			return mig, nvml.SUCCESS
		}
		return byUUID(u)
	}
	parent.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 0 {
			return mig, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	for _, visible := range []string{uuid, "0:0"} {
		t.Run(visible, func(t *testing.T) {
			d, err := Open(s, visible)
			if err != nil {
				t.Fatal(err)
			}
			// 4864 MiB: the A100-40GB 1g.5gb instance profile's MemorySizeMB in go-nvml's mock,
			// and the figure in residency's profile table.
			want, _ := plan.ProfileBytes("1g.5gb")
			if !d.MIG || d.Profile != "1g.5gb" || d.TotalBytes != 4864<<20 || d.TotalBytes != want {
				t.Errorf("Open = %+v; want MIG 1g.5gb with %d bytes", d, want)
			}
			b, err := d.Budget("", 256<<20)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(plan.Budget{Profile: "1g.5gb", TotalBytes: 4864 << 20, ReserveBytes: 256 << 20}, b); diff != "" {
				t.Errorf("Budget (-want +got):\n%s", diff)
			}
			used, err := d.UsedBytes()
			if err != nil || used != 0 {
				t.Errorf("UsedBytes = %d, %v", used, err)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	s := dgxa100.New()
	tests := []struct {
		name    string
		visible string
		want    error
	}{
		{name: "empty", visible: "", want: ErrNoDevice},
		{name: "none", visible: "none", want: ErrNoDevice},
		{name: "several", visible: "0,1", want: ErrNoDevice},
		{name: "all with eight GPUs", visible: "all", want: ErrNoDevice},
		{name: "garbage", visible: "gpu0", want: ErrNoDevice},
		{name: "bad MIG index", visible: "0:x", want: ErrNoDevice},
		{name: "unknown UUID", visible: "GPU-00000000-0000-0000-0000-000000000000", want: ErrNVML},
		{name: "index out of range", visible: "8", want: ErrNVML},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(s, tt.visible)
			if !errors.Is(err, tt.want) {
				t.Errorf("Open(%q) err = %v, want %v", tt.visible, err, tt.want)
			}
		})
	}
	// NVML's return code text is kept.
	_, err := Open(s, "8")
	if !errors.Is(err, nvml.ERROR_INVALID_ARGUMENT) {
		t.Errorf("err = %v, want it to wrap ERROR_INVALID_ARGUMENT", err)
	}
}

func TestBudgetWholeGPUNeedsProfile(t *testing.T) {
	d, err := Open(dgxh100.New(), "0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Budget("", 0); !errors.Is(err, plan.ErrBudget) {
		t.Errorf("Budget without a profile on a whole GPU: err = %v, want ErrBudget", err)
	}
}

func TestUsedBytesFollowsDevice(t *testing.T) {
	s := dgxh100.New()
	dev := s.Devices[1].(*server.Device)
	d, err := Open(s, "1")
	if err != nil {
		t.Fatal(err)
	}
	dev.MemoryInfo.Used = 3 << 30
	if used, err := d.UsedBytes(); err != nil || used != 3<<30 {
		t.Errorf("UsedBytes = %d, %v; want %d", used, err, 3<<30)
	}
}

func TestProfileFromName(t *testing.T) {
	tests := []struct{ give, want string }{
		{"NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"},
		{"NVIDIA A100-SXM4-40GB MIG 1g.5gb+me", "1g.5gb+me"},
		{"NVIDIA H200 141GB HBM3e", ""},
	}
	for _, tt := range tests {
		if got := ProfileFromName(tt.give); got != tt.want {
			t.Errorf("ProfileFromName(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestMemoryReadingsOutOfRange: NVML figures past plan.MaxMemoryBytes are errors naming the
// figure. Before, go-nvml's mock with Used = MaxUint64 gave UsedBytes() = -1 with a nil error
// (negative reads as "unknown": the device check was off), and Total = MaxUint64 was refused
// as "totalBytes: -1".
func TestMemoryReadingsOutOfRange(t *testing.T) {
	const huge = "18446744073709551615"
	t.Run("used", func(t *testing.T) {
		s := dgxh100.New()
		d, err := Open(s, "1")
		if err != nil {
			t.Fatal(err)
		}
		s.Devices[1].(*server.Device).MemoryInfo.Used = math.MaxUint64
		used, err := d.UsedBytes()
		if !errors.Is(err, ErrReading) || !strings.Contains(err.Error(), "used "+huge+" bytes") || used != 0 {
			t.Errorf("UsedBytes = %d, %v; want an ErrReading error naming used %s bytes", used, err, huge)
		}
		s.Devices[1].(*server.Device).MemoryInfo.Used = 1<<50 + 1
		if _, err := d.UsedBytes(); !errors.Is(err, ErrReading) || !strings.Contains(err.Error(), "used 1125899906842625 bytes") {
			t.Errorf("UsedBytes past 1 PiB: %v; want an ErrReading error", err)
		}
		s.Devices[1].(*server.Device).MemoryInfo.Used = 1 << 50
		if used, err := d.UsedBytes(); err != nil || used != 1<<50 {
			t.Errorf("UsedBytes at 1 PiB = %d, %v; want %d", used, err, int64(1<<50))
		}
	})
	t.Run("total", func(t *testing.T) {
		s := dgxh100.New()
		s.Devices[1].(*server.Device).MemoryInfo.Total = math.MaxUint64
		d, err := Open(s, "1")
		if !errors.Is(err, ErrReading) || !strings.Contains(err.Error(), "total "+huge+" bytes") || d != nil {
			t.Errorf("Open = %v, %v; want an ErrReading error naming total %s bytes", d, err, huge)
		}
	})
}
