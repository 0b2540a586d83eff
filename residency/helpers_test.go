package residency

import "github.com/inferscale/inferscale/residency/plan/plantest"

// Shared fixtures of the controller, drain and config tests: the planner's
// (residency/plan/plantest) under the short names these tests use.
var (
	t0      = plantest.T0
	model   = plantest.Model
	catalog = plantest.Catalog
)

const (
	gi   = plantest.Gi
	dgA  = plantest.DigestA
	dgB  = plantest.DigestB
	prof = plantest.Profile
)
