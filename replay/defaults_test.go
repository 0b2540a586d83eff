package replay

import (
	"testing"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/plan"
)

// TestResidencyDefaultsMatchController: replay copies the controller's loop interval and the
// front's hold timeout (it links only residency/plan); the copies must stay equal to
// residency.DefaultConfig and front.DefaultConfig.
func TestResidencyDefaultsMatchController(t *testing.T) {
	rc := residency.DefaultConfig()
	got := DefaultResidencyConfig()
	if got.LoopInterval != rc.LoopInterval {
		t.Errorf("DefaultResidencyConfig loop %v; residency.DefaultConfig has %v", got.LoopInterval, rc.LoopInterval)
	}
	if fc := front.DefaultConfig(); got.HoldTimeout != fc.HoldTimeout {
		t.Errorf("DefaultResidencyConfig hold timeout %v; front.DefaultConfig has %v", got.HoldTimeout, fc.HoldTimeout)
	}
	if got.IdleTimeout != plan.DefaultIdleTimeout || got.MinResidency != plan.DefaultMinResidency {
		t.Errorf("DefaultResidencyConfig idle %v, min residency %v; catalog defaults are %v, %v",
			got.IdleTimeout, got.MinResidency, plan.DefaultIdleTimeout, plan.DefaultMinResidency)
	}
}
