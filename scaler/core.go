package scaler

import (
	"time"

	"github.com/inferscale/inferscale/scaler/decision"
)

// The decision's types and Recommend live in package scaler/decision, which
// imports the standard library only (replay links it without gRPC, KEDA's
// stubs, the PromQL parser or client-go). These aliases keep the scaler's
// public names; see the decision package for their documentation.
type (
	// Signal is decision.Signal.
	Signal = decision.Signal
	// Policy is decision.Policy; ParseMetadata builds it from ScaledObject metadata.
	Policy = decision.Policy
	// Sample is decision.Sample.
	Sample = decision.Sample
	// Observation is decision.Observation.
	Observation = decision.Observation
	// State is decision.State.
	State = decision.State
	// Recommendation is decision.Recommendation.
	Recommendation = decision.Recommendation
)

// Signals (decision.SignalQueue, …).
const (
	SignalQueue    = decision.SignalQueue
	SignalRate     = decision.SignalRate
	SignalActivity = decision.SignalActivity
	// NumSignals is the length of the per-signal arrays.
	NumSignals = decision.NumSignals
)

// Engines a ScaledObject may name in the `engine` key.
const (
	EngineCustom = decision.EngineCustom
	EngineTriton = decision.EngineTriton
	EngineVLLM   = decision.EngineVLLM
)

// StatusUnconfigured is decision.StatusUnconfigured: the signal's query is
// not configured (no signal-status series is exported for it).
const StatusUnconfigured = decision.StatusUnconfigured

// AllSignals lists every signal in index order (decision.AllSignals).
func AllSignals() []Signal { return decision.AllSignals() }

// DefaultPolicy returns the defaults of the metadata table (decision.DefaultPolicy).
func DefaultPolicy() Policy { return decision.DefaultPolicy() }

// Recommend is the scaler's pure decision, decision.Recommend; see there for
// the formulas.
func Recommend(p Policy, obs Observation, prev State, now time.Time) (Recommendation, State) {
	return decision.Recommend(p, obs, prev, now)
}
