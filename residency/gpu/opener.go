package gpu

import "errors"

// Opener opens the device that visible (the value of NVIDIA_VISIBLE_DEVICES) names and
// returns it with the function that releases NVML. System is the production Opener; with cgo,
// NVMLOpener wraps any nvml.Interface (go-nvml's mocks in tests).
type Opener func(visible string) (*Device, func(), error)

// ErrNoNVML is wrapped by System in a binary built without cgo (CGO_ENABLED=0), where
// go-nvml cannot be linked.
var ErrNoNVML = errors.New("built without cgo: NVML unavailable")
