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
	// SignalSet is decision.SignalSet.
	SignalSet = decision.SignalSet
	// Policy is decision.Policy; ParseMetadata builds it from ScaledObject metadata.
	Policy = decision.Policy
	// Sample is decision.Sample.
	Sample = decision.Sample
	// Observation is decision.Observation.
	Observation = decision.Observation
	// Point is decision.Point.
	Point = decision.Point
	// LastGood is decision.LastGood.
	LastGood = decision.LastGood
	// State is decision.State.
	State = decision.State
	// Term is decision.Term.
	Term = decision.Term
	// SignalStatus is decision.SignalStatus.
	SignalStatus = decision.SignalStatus
	// Recommendation is decision.Recommendation.
	Recommendation = decision.Recommendation
)

// Signals (decision.SignalQueue, …).
const (
	SignalQueue    = decision.SignalQueue
	SignalRate     = decision.SignalRate
	SignalActivity = decision.SignalActivity
	SignalReady    = decision.SignalReady
	// NumSignals is the length of the per-signal arrays.
	NumSignals = decision.NumSignals
)

// Engines a ScaledObject may name in the `engine` key.
const (
	EngineCustom = decision.EngineCustom
	EngineTriton = decision.EngineTriton
	EngineVLLM   = decision.EngineVLLM
)

// Demand terms and shaping limits (decision.TermNone, …).
const (
	TermNone       = decision.TermNone
	TermRate       = decision.TermRate
	TermDrain      = decision.TermDrain
	TermActivity   = decision.TermActivity
	TermWarm       = decision.TermWarm
	TermMin        = decision.TermMin
	TermMax        = decision.TermMax
	TermBurst      = decision.TermBurst
	TermUpWindow   = decision.TermUpWindow
	TermDownWindow = decision.TermDownWindow
	TermStepDown   = decision.TermStepDown
	TermSeed       = decision.TermSeed
	TermDegraded   = decision.TermDegraded
)

// Signal statuses (decision.StatusUnconfigured, …).
const (
	StatusUnconfigured = decision.StatusUnconfigured
	StatusFresh        = decision.StatusFresh
	StatusZero         = decision.StatusZero
	StatusHeld         = decision.StatusHeld
	StatusOut          = decision.StatusOut
	StatusNever        = decision.StatusNever
)

// ErrNoData is decision.ErrNoData: no demand term could be computed; the
// server answers Unavailable so that KEDA's fallback acts.
var ErrNoData = decision.ErrNoData

// AllSignals lists every signal in index order (decision.AllSignals).
func AllSignals() []Signal { return decision.AllSignals() }

// DefaultPolicy returns the defaults of the metadata table (decision.DefaultPolicy).
func DefaultPolicy() Policy { return decision.DefaultPolicy() }

// Recommend is the scaler's pure decision, decision.Recommend; see there for
// the formulas.
func Recommend(p Policy, obs Observation, prev State, now time.Time) (Recommendation, State) {
	return decision.Recommend(p, obs, prev, now)
}
