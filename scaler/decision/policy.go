package decision

import (
	"strconv"
	"strings"
	"time"
)

// Signal names one input of the decision.
type Signal int

// The signals, in the order Observation and State index them.
const (
	SignalQueue       Signal = iota // Q: requests waiting, pool-wide
	SignalRate                      // λ: arrivals per second
	SignalActivity                  // A: mean GPU engine activity, 0..activityCeiling
	SignalReady                     // R: ready replicas (readyQuery; Kubernetes when known)
	SignalRunning                   // requests the engine is running now, pool-wide
	SignalServiceTime               // S: mean seconds of service per request
	SignalDispersion                // I: index of dispersion of arrival counts (Var/mean), 1 for Poisson
	SignalUniqueRate                // original requests per second (first attempts at the gateway)
	// NumSignals is the number of signals: the length of the per-signal arrays.
	NumSignals
)

var signalNames = [NumSignals]string{"queue", "rate", "activity", "ready", "running", "serviceTime", "dispersion", "uniqueRate"}

// String returns the signal's name as used in zeroWhenAbsent, logs and metric labels.
func (s Signal) String() string {
	if s < 0 || s >= NumSignals {
		return "signal(" + strconv.Itoa(int(s)) + ")"
	}
	return signalNames[s]
}

// AllSignals lists every signal in index order.
func AllSignals() []Signal {
	return []Signal{SignalQueue, SignalRate, SignalActivity, SignalReady, SignalRunning, SignalServiceTime, SignalDispersion, SignalUniqueRate}
}

// SignalSet is a set of signals, a bit per Signal.
type SignalSet uint8

// Has reports whether s is in the set.
func (ss SignalSet) Has(s Signal) bool { return ss&(1<<uint(s)) != 0 }

// With returns the set with s added.
func (ss SignalSet) With(s Signal) SignalSet { return ss | 1<<uint(s) }

// String returns the set as a comma list in signal order, the zeroWhenAbsent syntax.
func (ss SignalSet) String() string {
	var names []string
	for _, s := range AllSignals() {
		if ss.Has(s) {
			names = append(names, s.String())
		}
	}
	return strings.Join(names, ",")
}

// Engines a ScaledObject may name in the `engine` key.
const (
	EngineCustom = "custom"
	EngineTriton = "triton"
	EngineVLLM   = "vllm"
)

// Policy is the validated form of one ScaledObject trigger's metadata
// (scaler.ParseMetadata builds it). Field names follow the metadata keys
// (scaler's Key constants); durations are time.Duration, rates are per second.
type Policy struct {
	// Engine selects the query preset: EngineTriton, EngineVLLM or EngineCustom.
	Engine string
	// Model is the model label value the presets select on (required for presets).
	Model string
	// PrometheusAddress is the Prometheus base URL (http or https).
	PrometheusAddress string
	// QueueQuery, RateQuery, ActivityQuery, ReadyQuery, RunningQuery,
	// ServiceTimeQuery and DispersionQuery are PromQL overrides; empty means
	// the preset's query (or no such signal with EngineCustom).
	QueueQuery, RateQuery, ActivityQuery, ReadyQuery string
	RunningQuery, ServiceTimeQuery, DispersionQuery  string
	// UniqueRateQuery is PromQL for arrivals of original requests (first
	// attempts, or distinct request ids, at the gateway); no preset.
	UniqueRateQuery string
	// RetryBudget is the retry amplification (rate ÷ unique rate) the pool
	// is sized for, [1, 10]: with a unique rate, the arrival rate and its
	// forecast count at most unique rate × RetryBudget; the queue and the
	// running requests count as measured (the engine serves abandoned
	// attempts: see Recommend).
	RetryBudget float64
	// GPUHourPrice is the price of one replica-hour (any currency), > 0, for
	// the scaler's cost metrics; 0: not given. Recommend does not read it.
	GPUHourPrice float64
	// VerifiedQuery is PromQL for the rate of results that met their quality
	// bar and deadline (per second), for cost per verified result; "": none.
	// Recommend does not read it.
	VerifiedQuery string

	// SLOWaitSeconds is T, the queue wait a request may see, seconds, > 0.
	SLOWaitSeconds float64
	// SLOQuantile is q, the share of requests that must wait at most T, [0.5, 0.9999].
	SLOQuantile float64
	// ReplicaConcurrency is k, requests one replica serves at once (Triton
	// instances × batch slots, vLLM max_num_seqs), ≥ 1.
	ReplicaConcurrency int32
	// ColdStart is H, from a scale-up decision to a ready replica; 0 means
	// the measured value (Observation.ColdStart), else DefaultColdStart.
	ColdStart time.Duration

	// ReplicaThroughput is μ, requests per second one replica sustains
	// within its SLO; with no service-time signal S = k/μ. 0: not given.
	ReplicaThroughput float64
	// TargetUtilization is ρ in (0, 1], an optional cap on the pool's
	// offered load (N ≥ a/(k·ρ)); 0: no cap. The drain term divides by it
	// too (1 when unset).
	TargetUtilization float64
	// DrainSeconds is D, the seconds within which a backlog must be drained.
	DrainSeconds float64
	// ActivityTarget is the engine activity one replica should run at, (0,
	// 1]; it sizes the pool only when activity is its only signal (N_act).
	ActivityTarget float64
	// ActivityCeiling is the raw activity value at saturation on this MIG
	// profile, (0, 1]. At or above it the engine is saturated and the pool
	// does not scale down (the saturation guard).
	ActivityCeiling float64
	// WarmReplicas is the absolute warm pool, ≥ 0.
	WarmReplicas int32
	// WarmFraction is the warm pool as a fraction of demand, [0, 1].
	WarmFraction float64
	// MinReplicas and MaxReplicas bound the result when Kubernetes does not.
	MinReplicas, MaxReplicas int32
	// ScaleUpWindow: a scale-up goes to the minimum raw value over this window.
	ScaleUpWindow time.Duration
	// ScaleDownWindow: a scale-down goes to the maximum raw value over this window.
	ScaleDownWindow time.Duration
	// BurstFactor: raw ≥ BurstFactor × ready skips the up-window; ≥ 1.
	BurstFactor float64
	// ActivationQueue, ActivationRate and ActivationActivity: IsActive is true
	// when a signal's value is strictly above its threshold (raw activity, not
	// normalised). They decide 0 ↔ 1 only.
	ActivationQueue, ActivationRate, ActivationActivity float64
	// StaleAfter is how long a last good value may stand in for a missing one.
	StaleAfter time.Duration
	// ZeroWhenAbsent lists signals whose empty result means zero.
	ZeroWhenAbsent SignalSet
	// ScaleDownMaxFraction bounds each step down: within any ScaleDownPeriod
	// the result falls by at most max(1, ⌊fraction × the highest result in
	// that period⌋) replicas. (0, 1]; 1 disables the bound.
	ScaleDownMaxFraction float64
	// ScaleDownPeriod is the period ScaleDownMaxFraction applies to, > 0.
	ScaleDownPeriod time.Duration
}

// DefaultColdStart is H when coldStart is not set and no measurement exists.
const DefaultColdStart = 60 * time.Second

// DefaultPolicy returns the defaults of the metadata table (README, "Scaler
// metadata"). It is not a valid
// policy by itself: a signal query (or a preset with a model) and, with a
// queue or rate signal, replicaThroughput must be supplied.
func DefaultPolicy() Policy {
	return Policy{
		Engine:               EngineCustom,
		SLOWaitSeconds:       2,
		SLOQuantile:          0.99,
		ReplicaConcurrency:   1,
		RetryBudget:          1.2,
		DrainSeconds:         30,
		ActivityTarget:       0.7,
		ActivityCeiling:      1.0,
		MinReplicas:          0,
		MaxReplicas:          100,
		ScaleUpWindow:        0,
		ScaleDownWindow:      5 * time.Minute,
		BurstFactor:          2,
		StaleAfter:           60 * time.Second,
		ScaleDownMaxFraction: 0.5,
		ScaleDownPeriod:      time.Minute,
	}
}

// HasPreset reports whether the engine fills in standard queries.
func (p Policy) HasPreset() bool { return p.Engine == EngineTriton || p.Engine == EngineVLLM }

// Query returns the PromQL override for s ("" when the preset's applies or none).
func (p Policy) Query(s Signal) string {
	switch s {
	case SignalQueue:
		return p.QueueQuery
	case SignalRate:
		return p.RateQuery
	case SignalActivity:
		return p.ActivityQuery
	case SignalReady:
		return p.ReadyQuery
	case SignalRunning:
		return p.RunningQuery
	case SignalServiceTime:
		return p.ServiceTimeQuery
	case SignalDispersion:
		return p.DispersionQuery
	case SignalUniqueRate:
		return p.UniqueRateQuery
	}
	return ""
}

// Configured reports whether signal s has a query: an override, or a preset
// query. Presets supply every signal but the unique rate (a gateway's); the
// ready query (readyQuery or the preset's pod count) is used only when
// Kubernetes does not know R.
func (p Policy) Configured(s Signal) bool {
	return p.Query(s) != "" || (p.HasPreset() && s != SignalUniqueRate)
}

// PerPod reports whether an empty result of s while no replica is ready
// reads as zero: the preset series (Triton's, vLLM's, DCGM's) are exported by
// the pods and leave with them. Engine activity is treated as per-pod for
// every engine because it means nothing without a replica.
func (p Policy) PerPod(s Signal) bool {
	switch s {
	case SignalActivity:
		return true
	case SignalQueue, SignalRate, SignalRunning:
		return p.HasPreset() && p.Query(s) == ""
	}
	return false
}
