//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/inferscale/inferscale/residency/plan"
)

// ErrNoDevice is wrapped when NVIDIA_VISIBLE_DEVICES names no usable device.
var ErrNoDevice = errors.New("no GPU device")

// ErrNVML is wrapped when an NVML call fails; the NVML return code's text is kept.
var ErrNVML = errors.New("nvml")

// ErrReading is wrapped when NVML answers with a memory figure that cannot be a device's: past
// plan.MaxMemoryBytes (1 PiB), where NVML's uint64 would also wrap negative as an int64. The
// error names the figure NVML reported.
var ErrReading = errors.New("nvml reading out of range")

// Device is the GPU or MIG device the pod was given.
type Device struct {
	dev nvml.Device
	// UUID is NVML's UUID of the device (GPU-… or MIG-…).
	UUID string
	// Name is NVML's device name, e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb".
	Name string
	// MIG is true for a MIG device handle.
	MIG bool
	// Profile is the MIG profile parsed from a MIG device's name ("1g.5gb"), or "" for a whole GPU.
	Profile string
	// TotalBytes is the device's total memory in bytes as NVML reports it, at most plan.MaxMemoryBytes.
	TotalBytes int64
}

// Open resolves visibleDevices (the value of NVIDIA_VISIBLE_DEVICES) to one device through lib,
// which must be initialised (lib.Init) by the caller, and reads its memory.
func Open(lib nvml.Interface, visibleDevices string) (*Device, error) {
	id := strings.TrimSpace(visibleDevices)
	if strings.Contains(id, ",") {
		return nil, fmt.Errorf("%w: NVIDIA_VISIBLE_DEVICES=%q names several devices; want exactly one", ErrNoDevice, id)
	}
	var (
		dev nvml.Device
		ret nvml.Return
	)
	switch {
	case id == "" || id == "none" || id == "void":
		return nil, fmt.Errorf("%w: NVIDIA_VISIBLE_DEVICES=%q; want a MIG-/GPU- UUID, an index, or all", ErrNoDevice, id)
	case id == "all":
		n, r := lib.DeviceGetCount()
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("%w: device count: %w", ErrNVML, r)
		}
		if n != 1 {
			return nil, fmt.Errorf("%w: NVIDIA_VISIBLE_DEVICES=all shows %d devices; want exactly one", ErrNoDevice, n)
		}
		dev, ret = lib.DeviceGetHandleByIndex(0)
	case strings.HasPrefix(id, "MIG-") || strings.HasPrefix(id, "GPU-"):
		dev, ret = lib.DeviceGetHandleByUUID(id)
	default:
		gpuIdx, migIdx, isMIG := strings.Cut(id, ":")
		g, err := strconv.Atoi(gpuIdx)
		if err != nil || g < 0 {
			return nil, fmt.Errorf("%w: NVIDIA_VISIBLE_DEVICES=%q; want a MIG-/GPU- UUID, an index (0), a MIG index pair (0:1), or all", ErrNoDevice, id)
		}
		dev, ret = lib.DeviceGetHandleByIndex(g)
		if ret == nvml.SUCCESS && isMIG {
			m, err := strconv.Atoi(migIdx)
			if err != nil || m < 0 {
				return nil, fmt.Errorf("%w: NVIDIA_VISIBLE_DEVICES=%q: MIG index %q is not a non-negative integer", ErrNoDevice, id, migIdx)
			}
			dev, ret = dev.GetMigDeviceHandleByIndex(m)
		}
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: resolve %q: %w", ErrNVML, id, ret)
	}
	d := &Device{dev: dev}
	if d.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: uuid of %q: %w", ErrNVML, id, ret)
	}
	if d.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: name of %q: %w", ErrNVML, id, ret)
	}
	d.MIG = strings.HasPrefix(d.UUID, "MIG-")
	d.Profile = ProfileFromName(d.Name)
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: memory of %s: %w", ErrNVML, d.UUID, ret)
	}
	var err error
	if d.TotalBytes, err = checkedBytes("total", d.UUID, mem.Total); err != nil {
		return nil, err
	}
	return d, nil
}

// ProfileFromName returns the MIG profile at the end of a MIG device name
// ("NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb"), or "" when the name has none.
func ProfileFromName(name string) string {
	_, p, ok := strings.Cut(name, " MIG ")
	if !ok {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(p))
}

// UsedBytes re-reads the memory in use on the device in bytes (NVML's memory info Used), for
// the controller's check that an unload really returned its memory. A figure past
// plan.MaxMemoryBytes is an ErrReading error naming it (never a negative "unknown").
func (d *Device) UsedBytes() (int64, error) {
	mem, ret := d.dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("%w: memory of %s: %w", ErrNVML, d.UUID, ret)
	}
	return checkedBytes("used", d.UUID, mem.Used)
}

// checkedBytes converts NVML's byte count what of device uuid to an int64, refusing one past
// plan.MaxMemoryBytes with an ErrReading error that names the figure.
func checkedBytes(what, uuid string, v uint64) (int64, error) {
	if v > uint64(plan.MaxMemoryBytes) {
		return 0, fmt.Errorf("%w: memory of %s: NVML reports %s %d bytes; want at most %d (1 PiB, plan.MaxMemoryBytes)",
			ErrReading, uuid, what, v, int64(plan.MaxMemoryBytes))
	}
	return int64(v), nil
}

// Budget returns the residency budget of the device: its total memory less reserveBytes, for
// profile (the device's own MIG profile when profile is "").
func (d *Device) Budget(profile string, reserveBytes int64) (plan.Budget, error) {
	if profile == "" {
		profile = d.Profile
	}
	b := plan.Budget{Profile: profile, TotalBytes: d.TotalBytes, ReserveBytes: reserveBytes}
	if err := b.Validate(); err != nil {
		return plan.Budget{}, fmt.Errorf("device %s (%s): %w", d.UUID, d.Name, err)
	}
	return b, nil
}
