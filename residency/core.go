package residency

import (
	"time"

	"github.com/inferscale/inferscale/residency/plan"
)

// The catalog and budget types, the profile table and the pure planner live in package
// residency/plan, which imports the standard library and go-digest only (replay links it without
// client-go, gRPC or the Triton client). These aliases and forwarders keep the residency names
// that the controller, the sidecar and their callers use; the planner's other entry points
// (plan.Plan, plan.Apply, plan.Value, …) are used from package plan directly. See package plan
// for their documentation. Catalog YAML (ParseCatalog, LoadCatalog, ReadCatalog) stays here.
type (
	// Tier is plan.Tier.
	Tier = plan.Tier
	// Model is plan.Model.
	Model = plan.Model
	// Catalog is plan.Catalog.
	Catalog = plan.Catalog
	// Budget is plan.Budget.
	Budget = plan.Budget
	// State is plan.State.
	State = plan.State
	// ModelStatus is plan.ModelStatus.
	ModelStatus = plan.ModelStatus
	// Observed is plan.Observed.
	Observed = plan.Observed
	// Demand is plan.Demand.
	Demand = plan.Demand
	// Action is plan.Action.
	Action = plan.Action
	// Result is plan.Result.
	Result = plan.Result
)

// Tiers (plan.TierP0, …).
const (
	TierP0 = plan.TierP0
	TierP1 = plan.TierP1
	TierP2 = plan.TierP2
)

// Triton's model states (plan.StateReady, …).
const (
	StateReady       = plan.StateReady
	StateLoading     = plan.StateLoading
	StateUnloading   = plan.StateUnloading
	StateUnavailable = plan.StateUnavailable
)

// ActionUnload is plan.ActionUnload.
const ActionUnload = plan.ActionUnload

// MaxMemoryBytes is plan.MaxMemoryBytes, the largest byte count the catalog accepts.
const MaxMemoryBytes = plan.MaxMemoryBytes

// Defaults ParseCatalog applies when the file leaves a field out (plan.DefaultIdleTimeout, …).
const (
	DefaultIdleTimeout  = plan.DefaultIdleTimeout
	DefaultMinResidency = plan.DefaultMinResidency
	DefaultLoadTime     = plan.DefaultLoadTime
)

// Sentinel errors (the same values as plan's, so errors.Is works with either name).
var (
	// ErrCatalog is plan.ErrCatalog.
	ErrCatalog = plan.ErrCatalog
	// ErrBudget is plan.ErrBudget.
	ErrBudget = plan.ErrBudget
	// ErrNeverFits is plan.ErrNeverFits.
	ErrNeverFits = plan.ErrNeverFits
)

// ProfileBytes is plan.ProfileBytes: the usable bytes of a MIG profile or whole GPU.
func ProfileBytes(profile string) (int64, bool) { return plan.ProfileBytes(profile) }

// Profiles is plan.Profiles: the names in the profile table, sorted.
func Profiles() []string { return plan.Profiles() }

// ReserveBytes is plan.ReserveBytes.
func ReserveBytes(cat Catalog, b Budget) int64 { return plan.ReserveBytes(cat, b) }

// Accounted is plan.Accounted: the accounted memory of obs.
func Accounted(cat Catalog, b Budget, obs Observed) int64 { return plan.Accounted(cat, b, obs) }

// Decide is plan.Decide: the plan, its refusals and the accounting.
func Decide(cat Catalog, budget Budget, obs Observed, demand Demand, now time.Time) Result {
	return plan.Decide(cat, budget, obs, demand, now)
}
