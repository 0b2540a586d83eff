package replay

import (
	"testing"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/plan"
)

// TestResidencyDefaultsMatchController: replay copies the controller's loop interval and demand
// window (it links only residency/plan); the copies must stay equal to residency.DefaultConfig.
func TestResidencyDefaultsMatchController(t *testing.T) {
	rc := residency.DefaultConfig()
	got := DefaultResidencyConfig()
	if got.LoopInterval != rc.LoopInterval || got.DemandWindow != rc.DemandWindow {
		t.Errorf("DefaultResidencyConfig loop %v, demand window %v; residency.DefaultConfig has %v, %v",
			got.LoopInterval, got.DemandWindow, rc.LoopInterval, rc.DemandWindow)
	}
	if got.IdleTimeout != plan.DefaultIdleTimeout || got.MinResidency != plan.DefaultMinResidency {
		t.Errorf("DefaultResidencyConfig idle %v, min residency %v; catalog defaults are %v, %v",
			got.IdleTimeout, got.MinResidency, plan.DefaultIdleTimeout, plan.DefaultMinResidency)
	}
}
