package scaler

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// ErrInvalidMetadata is wrapped by every error ParseMetadata returns; the
// server maps it to gRPC InvalidArgument.
var ErrInvalidMetadata = errors.New("invalid scaler metadata")

// Signal names one input of the decision.
type Signal int

// The signals, in the order Observation and State index them.
const (
	SignalQueue    Signal = iota // Q: requests waiting, pool-wide
	SignalRate                   // λ: arrivals per second
	SignalActivity               // A: mean GPU engine activity, 0..activityCeiling
	SignalReady                  // R: ready replicas (readyQuery; Kubernetes when known)
	// NumSignals is the number of signals: the length of the per-signal arrays.
	NumSignals
)

var signalNames = [NumSignals]string{"queue", "rate", "activity", "ready"}

// String returns the signal's name as used in zeroWhenAbsent, logs and metric labels.
func (s Signal) String() string {
	if s < 0 || s >= NumSignals {
		return "signal(" + strconv.Itoa(int(s)) + ")"
	}
	return signalNames[s]
}

// AllSignals lists every signal in index order.
func AllSignals() []Signal { return []Signal{SignalQueue, SignalRate, SignalActivity, SignalReady} }

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

// Metadata keys: the public interface users write in ScaledObject YAML. The
// names are fixed; other tools (the Helm chart, replay) read them.
const (
	KeyEngine               = "engine"
	KeyModel                = "model"
	KeyPrometheusAddress    = "prometheusAddress"
	KeyQueueQuery           = "queueQuery"
	KeyRateQuery            = "rateQuery"
	KeyActivityQuery        = "activityQuery"
	KeyReadyQuery           = "readyQuery"
	KeyReplicaThroughput    = "replicaThroughput"
	KeyTargetUtilization    = "targetUtilization"
	KeyDrainSeconds         = "drainSeconds"
	KeyActivityTarget       = "activityTarget"
	KeyActivityCeiling      = "activityCeiling"
	KeyWarmReplicas         = "warmReplicas"
	KeyWarmFraction         = "warmFraction"
	KeyMinReplicas          = "minReplicas"
	KeyMaxReplicas          = "maxReplicas"
	KeyScaleUpWindow        = "scaleUpWindow"
	KeyScaleDownWindow      = "scaleDownWindow"
	KeyBurstFactor          = "burstFactor"
	KeyActivationQueue      = "activationQueue"
	KeyActivationRate       = "activationRate"
	KeyActivationActivity   = "activationActivity"
	KeyStaleAfter           = "staleAfter"
	KeyZeroWhenAbsent       = "zeroWhenAbsent"
	KeyScaleDownMaxFraction = "scaleDownMaxFraction"
	KeyScaleDownPeriod      = "scaleDownPeriod"
)

// kedaKeys are trigger metadata keys KEDA's own external scaler reads
// (pkg/scalers/external_scaler.go, externalScalerMetadata in KEDA v2.21) and
// then forwards to us unchanged in ScaledObjectRef.scalerMetadata. They are
// accepted and ignored. TLS material (caCert, tlsClientCert, tlsClientKey)
// comes from authParams and is never forwarded, but is accepted too in case
// a user puts it in metadata.
var kedaKeys = map[string]bool{
	"scalerAddress": true,
	"enableTLS":     true,
	"unsafeSsl":     true,
	"caCert":        true,
	"tlsClientCert": true,
	"tlsClientKey":  true,
}

// fromEnvSuffix: KEDA forwards a key `fooFromEnv` with the value already
// resolved from the target container's environment; ParseMetadata reads it
// as `foo`.
const fromEnvSuffix = "FromEnv"

// Bounds of the accepted ranges that are not in the table but keep
// arithmetic finite: HPA stabilization windows are capped at one hour too.
const (
	maxReplicasLimit = 100000
	maxWindow        = time.Hour
)

// Policy is the validated form of one ScaledObject trigger's metadata. Field
// names follow the metadata keys (see the Key constants); durations are
// time.Duration, rates are per second.
type Policy struct {
	// Engine selects the query preset: EngineTriton, EngineVLLM or EngineCustom.
	Engine string
	// Model is the model label value the presets select on (required for presets).
	Model string
	// PrometheusAddress is the Prometheus base URL (http or https).
	PrometheusAddress string
	// QueueQuery, RateQuery, ActivityQuery and ReadyQuery are PromQL overrides;
	// empty means the preset's query (or no such signal with EngineCustom).
	QueueQuery, RateQuery, ActivityQuery, ReadyQuery string

	// ReplicaThroughput is μ, requests per second one replica sustains within its SLO.
	ReplicaThroughput float64
	// TargetUtilization is ρ in (0, 1].
	TargetUtilization float64
	// DrainSeconds is D, the seconds within which a backlog must be drained.
	DrainSeconds float64
	// ActivityTarget is the engine activity one replica should run at, (0, 1].
	ActivityTarget float64
	// ActivityCeiling is the raw activity value at saturation on this MIG profile, (0, 1].
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

// Defaults are values ParseMetadata takes from the process rather than from
// the metadata.
type Defaults struct {
	// PrometheusAddress is the scaler's --prometheus-address flag.
	PrometheusAddress string
}

// DefaultPolicy returns the defaults of the metadata table. It is not a valid
// policy by itself: a signal query (or a preset with a model) and, with a
// queue or rate signal, replicaThroughput must be supplied.
func DefaultPolicy() Policy {
	return Policy{
		Engine:               EngineCustom,
		TargetUtilization:    0.8,
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
	}
	return ""
}

// Configured reports whether signal s has a query: an override, or a preset
// query. Presets supply all four; the ready query (readyQuery or the
// preset's pod count) is used only when Kubernetes does not know R.
func (p Policy) Configured(s Signal) bool {
	return p.Query(s) != "" || p.HasPreset()
}

// PerPod reports whether an empty result of s while no replica is ready
// reads as zero: the preset series (Triton's, vLLM's, DCGM's) are exported by
// the pods and leave with them. Engine activity is treated as per-pod for
// every engine because it means nothing without a replica.
func (p Policy) PerPod(s Signal) bool {
	switch s {
	case SignalActivity:
		return true
	case SignalQueue, SignalRate:
		return p.HasPreset() && p.Query(s) == ""
	}
	return false
}

// rangeError formats one violation: the key, the accepted range, what was given.
func rangeError(key, accepted, got string) error {
	return fmt.Errorf("%w: %s must be %s, got %q", ErrInvalidMetadata, key, accepted, got)
}

// ParseMetadata validates a trigger's scalerMetadata into a Policy. Absent
// keys take DefaultPolicy's values (prometheusAddress takes
// defaults.PrometheusAddress). It returns every violation joined with
// errors.Join; each wraps ErrInvalidMetadata and names the key and its
// accepted range. Keys it does not know are errors, except those KEDA itself
// forwards (scalerAddress, enableTLS, unsafeSsl, …); `<key>FromEnv` is read
// as `<key>`.
func ParseMetadata(meta map[string]string, defaults Defaults) (Policy, error) {
	p := DefaultPolicy()
	p.PrometheusAddress = defaults.PrometheusAddress
	var errs []error

	known := map[string]bool{}
	for _, k := range allKeys {
		known[k] = true
	}
	vals := make(map[string]string, len(meta))
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic error order
	for _, k := range keys {
		v := meta[k]
		switch {
		case kedaKeys[k]:
		case known[k]:
			if _, dup := vals[k]; dup {
				errs = append(errs, fmt.Errorf("%w: %s and %s%s are both set; set one", ErrInvalidMetadata, k, k, fromEnvSuffix))
				continue
			}
			vals[k] = v
		case strings.HasSuffix(k, fromEnvSuffix) && known[strings.TrimSuffix(k, fromEnvSuffix)]:
			base := strings.TrimSuffix(k, fromEnvSuffix)
			if _, dup := vals[base]; dup {
				errs = append(errs, fmt.Errorf("%w: %s and %s are both set; set one", ErrInvalidMetadata, base, k))
				continue
			}
			vals[base] = v
		default:
			errs = append(errs, fmt.Errorf("%w: unknown key %q (known keys: %s)", ErrInvalidMetadata, k, strings.Join(allKeys, ", ")))
		}
	}

	get := func(key string) (string, bool) {
		v, ok := vals[key]
		return strings.TrimSpace(v), ok
	}
	float := func(key string, dst *float64, accepted string, ok func(float64) bool) {
		s, present := get(key)
		if !present {
			return
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || !ok(f) {
			errs = append(errs, rangeError(key, accepted, s))
			return
		}
		*dst = f
	}
	integer := func(key string, dst *int32, accepted string, ok func(int64) bool) {
		s, present := get(key)
		if !present {
			return
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || !ok(n) {
			errs = append(errs, rangeError(key, accepted, s))
			return
		}
		*dst = int32(n)
	}
	duration := func(key string, dst *time.Duration, accepted string, ok func(time.Duration) bool) {
		s, present := get(key)
		if !present {
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil || !ok(d) {
			errs = append(errs, rangeError(key, accepted+` (a Go duration such as "30s")`, s))
			return
		}
		*dst = d
	}
	positive := func(f float64) bool { return f > 0 }
	unit := func(f float64) bool { return f > 0 && f <= 1 }
	nonNeg := func(f float64) bool { return f >= 0 }

	engineOK := true
	if s, ok := get(KeyEngine); ok {
		switch s {
		case EngineCustom, EngineTriton, EngineVLLM:
			p.Engine = s
		default:
			errs = append(errs, rangeError(KeyEngine, "one of triton, vllm, custom", s))
			engineOK = false
		}
	}
	if s, ok := get(KeyModel); ok {
		p.Model = s
	}
	if s, ok := get(KeyPrometheusAddress); ok {
		p.PrometheusAddress = s
	}
	for _, q := range []struct {
		key string
		dst *string
	}{
		{KeyQueueQuery, &p.QueueQuery},
		{KeyRateQuery, &p.RateQuery},
		{KeyActivityQuery, &p.ActivityQuery},
		{KeyReadyQuery, &p.ReadyQuery},
	} {
		s, ok := get(q.key)
		if !ok {
			continue
		}
		if err := checkQuery(s); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s must be a PromQL expression of instant-vector or scalar type: %v", ErrInvalidMetadata, q.key, err))
			continue
		}
		*q.dst = s
	}
	float(KeyReplicaThroughput, &p.ReplicaThroughput, "a number > 0 (requests per second)", positive)
	float(KeyTargetUtilization, &p.TargetUtilization, "a number in (0, 1]", unit)
	float(KeyDrainSeconds, &p.DrainSeconds, "a number of seconds > 0", positive)
	float(KeyActivityTarget, &p.ActivityTarget, "a number in (0, 1]", unit)
	float(KeyActivityCeiling, &p.ActivityCeiling, "a number in (0, 1]", unit)
	integer(KeyWarmReplicas, &p.WarmReplicas, fmt.Sprintf("an integer in [0, %d]", maxReplicasLimit), func(n int64) bool { return n >= 0 && n <= maxReplicasLimit })
	float(KeyWarmFraction, &p.WarmFraction, "a number in [0, 1]", func(f float64) bool { return f >= 0 && f <= 1 })
	integer(KeyMinReplicas, &p.MinReplicas, fmt.Sprintf("an integer in [0, %d]", maxReplicasLimit), func(n int64) bool { return n >= 0 && n <= maxReplicasLimit })
	integer(KeyMaxReplicas, &p.MaxReplicas, fmt.Sprintf("an integer in [1, %d]", maxReplicasLimit), func(n int64) bool { return n >= 1 && n <= maxReplicasLimit })
	window := func(d time.Duration) bool { return d >= 0 && d <= maxWindow }
	duration(KeyScaleUpWindow, &p.ScaleUpWindow, "a duration in [0s, 1h]", window)
	duration(KeyScaleDownWindow, &p.ScaleDownWindow, "a duration in [0s, 1h]", window)
	float(KeyBurstFactor, &p.BurstFactor, "a number ≥ 1", func(f float64) bool { return f >= 1 })
	float(KeyActivationQueue, &p.ActivationQueue, "a number ≥ 0", nonNeg)
	float(KeyActivationRate, &p.ActivationRate, "a number ≥ 0 (requests per second)", nonNeg)
	float(KeyActivationActivity, &p.ActivationActivity, "a number in [0, 1]", func(f float64) bool { return f >= 0 && f <= 1 })
	duration(KeyStaleAfter, &p.StaleAfter, "a duration in (0s, 1h]", func(d time.Duration) bool { return d > 0 && d <= maxWindow })
	if s, ok := get(KeyZeroWhenAbsent); ok && s != "" {
		for _, name := range strings.Split(s, ",") {
			name = strings.TrimSpace(name)
			i := slices.Index(signalNames[:], name)
			if i < 0 {
				errs = append(errs, rangeError(KeyZeroWhenAbsent, "a comma list of queue, rate, activity, ready", s))
				break
			}
			p.ZeroWhenAbsent = p.ZeroWhenAbsent.With(Signal(i))
		}
	}
	float(KeyScaleDownMaxFraction, &p.ScaleDownMaxFraction, "a number in (0, 1]", unit)
	duration(KeyScaleDownPeriod, &p.ScaleDownPeriod, "a duration in (0s, 1h]", func(d time.Duration) bool { return d > 0 && d <= maxWindow })

	// Cross-key rules.
	if p.HasPreset() && p.Model == "" {
		errs = append(errs, fmt.Errorf("%w: %s is required with %s %q (the model label value)", ErrInvalidMetadata, KeyModel, KeyEngine, p.Engine))
	}
	if p.PrometheusAddress == "" {
		errs = append(errs, fmt.Errorf("%w: %s is required (an http or https URL) when the scaler has no --prometheus-address", ErrInvalidMetadata, KeyPrometheusAddress))
	} else if u, err := url.Parse(p.PrometheusAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, rangeError(KeyPrometheusAddress, "an http or https URL with a host", p.PrometheusAddress))
	}
	if engineOK && !p.Configured(SignalQueue) && !p.Configured(SignalRate) && !p.Configured(SignalActivity) {
		errs = append(errs, fmt.Errorf("%w: %s, %s or %s is required with %s %q (or use engine triton or vllm)", ErrInvalidMetadata, KeyQueueQuery, KeyRateQuery, KeyActivityQuery, KeyEngine, EngineCustom))
	}
	if (p.Configured(SignalQueue) || p.Configured(SignalRate)) && p.ReplicaThroughput == 0 {
		if _, given := vals[KeyReplicaThroughput]; !given {
			errs = append(errs, fmt.Errorf("%w: %s is required with a queue or rate signal (a number > 0, requests per second one replica sustains)", ErrInvalidMetadata, KeyReplicaThroughput))
		}
	}
	if p.MinReplicas > p.MaxReplicas {
		errs = append(errs, fmt.Errorf("%w: %s (%d) must be ≤ %s (%d)", ErrInvalidMetadata, KeyMinReplicas, p.MinReplicas, KeyMaxReplicas, p.MaxReplicas))
	}
	if err := errors.Join(errs...); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// allKeys lists every metadata key in the order of the README's table.
var allKeys = []string{
	KeyEngine, KeyModel, KeyPrometheusAddress,
	KeyQueueQuery, KeyRateQuery, KeyActivityQuery, KeyReadyQuery,
	KeyReplicaThroughput, KeyTargetUtilization, KeyDrainSeconds,
	KeyActivityTarget, KeyActivityCeiling, KeyWarmReplicas, KeyWarmFraction,
	KeyMinReplicas, KeyMaxReplicas, KeyScaleUpWindow, KeyScaleDownWindow,
	KeyBurstFactor, KeyActivationQueue, KeyActivationRate, KeyActivationActivity,
	KeyStaleAfter, KeyZeroWhenAbsent, KeyScaleDownMaxFraction, KeyScaleDownPeriod,
}

// MetadataKeys returns every metadata key ParseMetadata accepts (KEDA's own
// forwarded keys excluded).
func MetadataKeys() []string { return slices.Clone(allKeys) }

var promqlParser = parser.NewParser(parser.Options{})

// checkQuery parses q with Prometheus's own PromQL parser and requires a
// value the poller can read as one number per series.
func checkQuery(q string) error {
	if q == "" {
		return errors.New("empty")
	}
	expr, err := promqlParser.ParseExpr(q)
	if err != nil {
		return err
	}
	switch t := expr.Type(); t {
	case parser.ValueTypeVector, parser.ValueTypeScalar:
		return nil
	default:
		return fmt.Errorf("expression has type %s", t)
	}
}
