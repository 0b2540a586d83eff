//go:build cgo

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLOpener returns the Opener that initialises lib, resolves the device with Open and
// shuts lib down on close; nil when lib is nil. Tests pass go-nvml's mock servers.
func NVMLOpener(lib nvml.Interface) Opener {
	if lib == nil {
		return nil
	}
	return func(visible string) (*Device, func(), error) {
		if ret := lib.Init(); ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("%w: init: %w", ErrNVML, ret)
		}
		d, err := Open(lib, visible)
		if err != nil {
			lib.Shutdown()
			return nil, nil, err
		}
		return d, func() { lib.Shutdown() }, nil
	}
}

// System opens the device through the host's NVML library (libnvidia-ml.so.1, which go-nvml
// loads with dlopen at Init, so a machine without the driver gets an error, not a crash).
func System(visible string) (*Device, func(), error) { return NVMLOpener(nvml.New())(visible) }
