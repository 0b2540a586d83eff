//go:build cgo

package capacity

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// driverVersions reads the NVIDIA driver version and the CUDA version the driver supports
// ("12.4") through NVML; empty strings where NVML is not there (no driver, no device).
func driverVersions() (driver, cuda string) {
	lib := nvml.New()
	if lib.Init() != nvml.SUCCESS {
		return "", ""
	}
	defer lib.Shutdown()
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		driver = v
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		cuda = fmt.Sprintf("%d.%d", v/1000, v%1000/10) // NVML encodes 12.4 as 12040
	}
	return driver, cuda
}
