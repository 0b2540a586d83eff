package replay

import (
	"testing"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/plan"
)

// TestResidencyDefaultsMatchController: replay copies the controller's loop interval (it links
// only residency/plan); the copy must stay equal to residency.DefaultConfig.
func TestResidencyDefaultsMatchController(t *testing.T) {
	rc := residency.DefaultConfig()
	got := DefaultResidencyConfig()
	if got.LoopInterval != rc.LoopInterval {
		t.Errorf("DefaultResidencyConfig loop %v; residency.DefaultConfig has %v", got.LoopInterval, rc.LoopInterval)
	}
	if got.IdleTimeout != plan.DefaultIdleTimeout || got.MinResidency != plan.DefaultMinResidency {
		t.Errorf("DefaultResidencyConfig idle %v, min residency %v; catalog defaults are %v, %v",
			got.IdleTimeout, got.MinResidency, plan.DefaultIdleTimeout, plan.DefaultMinResidency)
	}
}
