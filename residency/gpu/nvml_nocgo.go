//go:build !cgo

package gpu

import (
	"fmt"

	"github.com/inferscale/inferscale/residency/plan"
)

// Device is the GPU or MIG device the pod was given. go-nvml needs cgo, so in a build without
// it (the static images of `make images`) no Device is ever opened: System fails with
// ErrNoNVML and the budget comes from --mig-profile or --budget-bytes. The fields are those of
// the cgo build's Device.
type Device struct {
	UUID       string
	Name       string
	MIG        bool
	Profile    string
	TotalBytes int64
}

// UsedBytes fails with ErrNoNVML: there is no device handle without cgo.
func (d *Device) UsedBytes() (int64, error) { return 0, ErrNoNVML }

// Budget fails with ErrNoNVML: there is no device handle without cgo.
func (d *Device) Budget(string, int64) (plan.Budget, error) { return plan.Budget{}, ErrNoNVML }

// System fails with ErrNoNVML: this binary was built with CGO_ENABLED=0.
func System(string) (*Device, func(), error) {
	return nil, nil, fmt.Errorf("%w: set --mig-profile (profile table) or --budget-bytes", ErrNoNVML)
}
