package scaler

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
)

// ErrInvalidMetadata is wrapped by every error ParseMetadata returns; the
// server maps it to gRPC InvalidArgument.
var ErrInvalidMetadata = errors.New("invalid scaler metadata")

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
	KeyRunningQuery         = "runningQuery"
	KeyServiceTimeQuery     = "serviceTimeQuery"
	KeyDispersionQuery      = "dispersionQuery"
	KeyUniqueRateQuery      = "uniqueRateQuery"
	KeyRetryBudget          = "retryBudget"
	KeyGPUHourPrice         = "gpuHourPrice"
	KeyVerifiedQuery        = "verifiedQuery"
	KeySLOWaitSeconds       = "sloWaitSeconds"
	KeySLOQuantile          = "sloQuantile"
	KeyReplicaConcurrency   = "replicaConcurrency"
	KeyColdStart            = "coldStart"
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
	maxReplicasLimit    = 100000
	maxWindow           = time.Hour
	maxConcurrencyLimit = 1000000
	maxSLOWaitSeconds   = 86400
	// maxGPUHourPrice bounds gpuHourPrice (any currency): 10⁹ a replica-hour is past any GPU in
	// any currency, and × maxReplicasLimit the cost rate stays exact in float64 (≤ 10¹⁴), where
	// 1e308 saturated it (5 replicas read as 1.8× the cost of 1).
	maxGPUHourPrice = 1e9
	// gpuHourPriceRange is maxGPUHourPrice's range as errors write it; OpenCost's price of a
	// replica-hour is held to it too (openCostPrices.store).
	gpuHourPriceRange = "(0, 1e9]"
	// maxModelBytes bounds model, a label value: past Triton's 255-byte model names and
	// Hugging Face's 96 + 1 + 96-byte repository ids, and small enough that the vLLM
	// verified-results query built from it (verifiedQueryOf, up to 4 bytes per byte quoted)
	// stays within prom.MaxQueryBytes. Before, a 17,000-byte model was accepted and the
	// trigger then failed naming verifiedQuery, a key the user never wrote.
	maxModelBytes = 1024
)

// maxEcho is how many bytes of a value an error repeats; a longer value is
// cut there and its length given, so a hostile 1 MB value cannot make a
// 1 MB error.
const maxEcho = 64

// maxUnknownListed is how many unknown keys one error names.
const maxUnknownListed = 8

// echo quotes v for an error, cut to maxEcho bytes (at a rune boundary)
// with its length when longer.
func echo(v string) string { return errtext.Quote(v, maxEcho) }

// plainNumber matches the numbers metadata accepts: plain decimal, with an
// optional fraction and exponent ("2", "0.99", "1e3", "-1.5E-2"). Go
// literal forms ParseFloat also takes (1_000, 0x10, 0b1, Inf, NaN) are not
// numbers a user writes in YAML and are rejected.
var plainNumber = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// plainInteger matches the integers metadata accepts: decimal digits with
// an optional sign.
var plainInteger = regexp.MustCompile(`^[+-]?[0-9]+$`)

// Defaults are values ParseMetadata takes from the process rather than from
// the metadata.
type Defaults struct {
	// PrometheusAddress is the scaler's --prometheus-address flag.
	PrometheusAddress string
	// RefreshInterval is the scaler's --refresh-interval; when > 0, staleAfter must be at
	// least StaleAfterRefreshes times it, and an absent staleAfter defaults to the larger of
	// DefaultPolicy's 60s and that floor. 0: no floor (callers other than the server).
	RefreshInterval time.Duration
}

// StaleAfterRefreshes is how many refresh intervals staleAfter must span at least. The poller
// evaluates each query once per --refresh-interval and the decisions run at the same period,
// not in phase, so a good value is up to one interval old (plus the query's own time) when it
// is used: a staleAfter below one interval went out between two polls and flapped the trigger
// between a value and Unavailable (staleAfter 4s at a 5s refresh), and 1ns read every valid
// value as "never". Two intervals leave one whole interval of margin.
const StaleAfterRefreshes = 2

// Lower bounds of replicaThroughput and drainSeconds: they divide, so a denormal (5e-324)
// answered maxReplicas without a word. 10⁻⁶ requests/s (one request per 11.6 days) is below any
// replica that serves, and 0.1 s is shorter than the shortest --refresh-interval, the scaler's
// own reaction time.
const (
	minReplicaThroughput = 1e-6
	minDrainSeconds      = 0.1
)

// rangeError formats one violation: the key, the accepted range, what was given.
func rangeError(key, accepted, got string) error {
	return fmt.Errorf("%w: %s must be %s, got %s", ErrInvalidMetadata, key, accepted, echo(got))
}

// ParseMetadata validates a trigger's scalerMetadata into a Policy. Absent
// keys take DefaultPolicy's values (prometheusAddress takes
// defaults.PrometheusAddress). It returns every violation joined with
// errors.Join; each wraps ErrInvalidMetadata and names the key and its
// accepted range. Keys it does not know are errors, except those KEDA itself
// forwards (scalerAddress, enableTLS, unsafeSsl, …); `<key>FromEnv` is read
// as `<key>`.
func ParseMetadata(meta map[string]string, defaults Defaults) (decision.Policy, error) {
	p := decision.DefaultPolicy()
	p.PrometheusAddress = defaults.PrometheusAddress
	staleFloor := StaleAfterRefreshes * defaults.RefreshInterval
	p.StaleAfter = max(p.StaleAfter, staleFloor)
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
	var unknown []string
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
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 { // one error, the known keys listed once
		named := make([]string, 0, maxUnknownListed)
		for _, k := range unknown[:min(len(unknown), maxUnknownListed)] {
			named = append(named, echo(k))
		}
		more := ""
		if n := len(unknown) - len(named); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		errs = append(errs, fmt.Errorf("%w: unknown keys %s%s (known keys: %s)", ErrInvalidMetadata,
			strings.Join(named, ", "), more, strings.Join(allKeys, ", ")))
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
		if !plainNumber.MatchString(s) || err != nil || math.IsNaN(f) || math.IsInf(f, 0) || !ok(f) {
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
		if !plainInteger.MatchString(s) || err != nil || !ok(n) {
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
	unit := func(f float64) bool { return f > 0 && f <= 1 }
	nonNeg := func(f float64) bool { return f >= 0 }

	engineOK := true
	if s, ok := get(KeyEngine); ok {
		switch s {
		case decision.EngineCustom, decision.EngineTriton, decision.EngineVLLM:
			p.Engine = s
		default:
			errs = append(errs, rangeError(KeyEngine, "one of triton, vllm, custom", s))
			engineOK = false
		}
	}
	modelRefused, modelGiven := false, false
	if s, ok := get(KeyModel); ok {
		modelGiven = s != "" // the chart writes model: "" for a pool without one
		if len(s) > maxModelBytes {
			errs = append(errs, rangeError(KeyModel, fmt.Sprintf("a model label value of at most %d bytes", maxModelBytes), s))
			modelRefused = true
		} else {
			p.Model = s
		}
	}
	addressEmpty := false
	if s, ok := get(KeyPrometheusAddress); ok {
		p.PrometheusAddress, addressEmpty = s, s == ""
	}
	for _, q := range []struct {
		key string
		dst *string
	}{
		{KeyQueueQuery, &p.QueueQuery},
		{KeyRateQuery, &p.RateQuery},
		{KeyActivityQuery, &p.ActivityQuery},
		{KeyReadyQuery, &p.ReadyQuery},
		{KeyRunningQuery, &p.RunningQuery},
		{KeyServiceTimeQuery, &p.ServiceTimeQuery},
		{KeyDispersionQuery, &p.DispersionQuery},
		{KeyUniqueRateQuery, &p.UniqueRateQuery},
		{KeyVerifiedQuery, &p.VerifiedQuery},
	} {
		s, ok := get(q.key)
		if !ok {
			continue
		}
		// The budget is checked before parsing: the parser's time grows
		// super-linearly with depth, and it cannot be interrupted.
		if err := prom.CheckBudget(s); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrInvalidMetadata, q.key, err))
			continue
		}
		if err := checkQuery(s); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s must be a PromQL expression of instant-vector or scalar type: %s", ErrInvalidMetadata, q.key, bounded(err.Error())))
			continue
		}
		*q.dst = s
	}
	float(KeySLOWaitSeconds, &p.SLOWaitSeconds, fmt.Sprintf("a number of seconds in (0, %d]", maxSLOWaitSeconds), func(f float64) bool { return f > 0 && f <= maxSLOWaitSeconds })
	float(KeySLOQuantile, &p.SLOQuantile, "a number in [0.5, 0.9999]", func(f float64) bool { return f >= 0.5 && f <= 0.9999 })
	integer(KeyReplicaConcurrency, &p.ReplicaConcurrency, fmt.Sprintf("an integer in [1, %d]", maxConcurrencyLimit), func(n int64) bool { return n >= 1 && n <= maxConcurrencyLimit })
	duration(KeyColdStart, &p.ColdStart, "a duration in (0s, 1h]", func(d time.Duration) bool { return d > 0 && d <= maxWindow })
	float(KeyGPUHourPrice, &p.GPUHourPrice, "a number in "+gpuHourPriceRange+" (price of one replica-hour)", func(f float64) bool { return f > 0 && f <= maxGPUHourPrice })
	float(KeyRetryBudget, &p.RetryBudget, "a number in [1, 10] (rate ÷ unique rate)", func(f float64) bool { return f >= 1 && f <= 10 })
	float(KeyReplicaThroughput, &p.ReplicaThroughput, "a number ≥ 1e-6 (requests per second)", func(f float64) bool { return f >= minReplicaThroughput })
	float(KeyTargetUtilization, &p.TargetUtilization, "a number in (0, 1]", unit)
	float(KeyDrainSeconds, &p.DrainSeconds, "a number of seconds ≥ 0.1", func(f float64) bool { return f >= minDrainSeconds })
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
	if staleFloor > 0 {
		duration(KeyStaleAfter, &p.StaleAfter,
			fmt.Sprintf("a duration in [%v, 1h] (at least %d × the scaler's --refresh-interval %v)", staleFloor, StaleAfterRefreshes, defaults.RefreshInterval),
			func(d time.Duration) bool { return d >= staleFloor && d <= maxWindow })
	} else {
		duration(KeyStaleAfter, &p.StaleAfter, "a duration in (0s, 1h]", func(d time.Duration) bool { return d > 0 && d <= maxWindow })
	}
	if s, ok := get(KeyZeroWhenAbsent); ok && s != "" {
		for _, name := range strings.Split(s, ",") {
			name = strings.TrimSpace(name)
			i := slices.IndexFunc(decision.AllSignals(), func(s decision.Signal) bool { return s.String() == name })
			if i < 0 {
				errs = append(errs, rangeError(KeyZeroWhenAbsent, "a comma list of "+signalList(), s))
				break
			}
			p.ZeroWhenAbsent = p.ZeroWhenAbsent.With(decision.AllSignals()[i])
		}
	}
	float(KeyScaleDownMaxFraction, &p.ScaleDownMaxFraction, "a number in (0, 1]", unit)
	duration(KeyScaleDownPeriod, &p.ScaleDownPeriod, "a duration in (0s, 1h]", func(d time.Duration) bool { return d > 0 && d <= maxWindow })

	// Cross-key rules.
	// The model selects a preset's series; with engine custom nothing reads it, and it was
	// accepted and dropped without a word.
	if modelGiven && engineOK && !p.HasPreset() && !modelRefused {
		errs = append(errs, fmt.Errorf("%w: %s is set with %s %q, whose queries are all given: the model selects the series of the triton and vllm presets, so it has no effect; set %s to triton or vllm, or remove %s",
			ErrInvalidMetadata, KeyModel, KeyEngine, p.Engine, KeyEngine, KeyModel))
	}
	if p.HasPreset() && p.Model == "" && !modelRefused { // a refused model has its own error
		errs = append(errs, fmt.Errorf("%w: %s is required with %s %q (the model label value)", ErrInvalidMetadata, KeyModel, KeyEngine, p.Engine))
	}
	switch {
	case addressEmpty && defaults.PrometheusAddress != "":
		errs = append(errs, fmt.Errorf("%w: %s is empty: remove the key to use the scaler's --prometheus-address, or give an http or https URL", ErrInvalidMetadata, KeyPrometheusAddress))
	case addressEmpty:
		errs = append(errs, fmt.Errorf("%w: %s is empty: give an http or https URL (the scaler has no --prometheus-address)", ErrInvalidMetadata, KeyPrometheusAddress))
	case p.PrometheusAddress == "":
		errs = append(errs, fmt.Errorf("%w: %s is required (an http or https URL) when the scaler has no --prometheus-address", ErrInvalidMetadata, KeyPrometheusAddress))
	default:
		if err := prom.CheckAddress(p.PrometheusAddress); err != nil {
			// Redacted by CheckAddress: the error reaches KEDA's status and the ScaledObject's events.
			errs = append(errs, fmt.Errorf("%w: %s must be %s, got %w", ErrInvalidMetadata, KeyPrometheusAddress, prom.AddressRule, err))
		}
	}
	// A demand query given but refused above has its own error; "required" would send the user
	// looking for a key they wrote.
	demandGiven := false
	for _, k := range []string{KeyQueueQuery, KeyRateQuery, KeyRunningQuery, KeyActivityQuery} {
		if _, ok := vals[k]; ok {
			demandGiven = true
		}
	}
	if engineOK && !demandGiven && !p.Configured(decision.SignalQueue) && !p.Configured(decision.SignalRate) &&
		!p.Configured(decision.SignalActivity) && !p.Configured(decision.SignalRunning) {
		errs = append(errs, fmt.Errorf("%w: %s, %s, %s or %s is required with %s %q (or use engine triton or vllm)", ErrInvalidMetadata,
			KeyQueueQuery, KeyRateQuery, KeyRunningQuery, KeyActivityQuery, KeyEngine, decision.EngineCustom))
	}
	// A queue or rate needs a service time to become servers: measured
	// (serviceTimeQuery, or the preset's) or S = k/μ.
	if (p.Configured(decision.SignalQueue) || p.Configured(decision.SignalRate)) && !p.Configured(decision.SignalServiceTime) && p.ReplicaThroughput == 0 {
		if _, given := vals[KeyReplicaThroughput]; !given {
			errs = append(errs, fmt.Errorf("%w: %s or %s is required with a queue or rate signal and %s %q (the mean seconds of service per request, or a number > 0 of requests per second one replica sustains)",
				ErrInvalidMetadata, KeyServiceTimeQuery, KeyReplicaThroughput, KeyEngine, decision.EngineCustom))
		}
	}
	// The retry cap is rate ÷ unique rate against retryBudget: without a unique rate the budget,
	// and without a rate the unique rate, did nothing, silently.
	_, budgetGiven := vals[KeyRetryBudget]
	_, uniqueGiven := vals[KeyUniqueRateQuery]
	_, rateGiven := vals[KeyRateQuery]
	if budgetGiven && !uniqueGiven {
		errs = append(errs, fmt.Errorf("%w: %s is set without %s: the budget bounds rate ÷ unique rate, so it has no effect; set %s or remove %s",
			ErrInvalidMetadata, KeyRetryBudget, KeyUniqueRateQuery, KeyUniqueRateQuery, KeyRetryBudget))
	}
	if uniqueGiven && engineOK && !rateGiven && !p.Configured(decision.SignalRate) {
		keys := KeyUniqueRateQuery + " needs"
		if budgetGiven {
			keys = KeyUniqueRateQuery + " and " + KeyRetryBudget + " need"
		}
		errs = append(errs, fmt.Errorf("%w: %s a rate signal (%s, or %s triton or vllm): the amplification is rate ÷ unique rate, so without a rate there is nothing to cap",
			ErrInvalidMetadata, keys, KeyRateQuery, KeyEngine))
	}
	if p.MinReplicas > p.MaxReplicas {
		errs = append(errs, fmt.Errorf("%w: %s (%d) must be ≤ %s (%d)", ErrInvalidMetadata, KeyMinReplicas, p.MinReplicas, KeyMaxReplicas, p.MaxReplicas))
	}
	if err := errors.Join(errs...); err != nil {
		return decision.Policy{}, err
	}
	return p, nil
}

// allKeys lists every metadata key in the order of the README's table.
var allKeys = []string{
	KeyEngine, KeyModel, KeyPrometheusAddress,
	KeyQueueQuery, KeyRateQuery, KeyActivityQuery, KeyReadyQuery,
	KeyRunningQuery, KeyServiceTimeQuery, KeyDispersionQuery, KeyUniqueRateQuery, KeyRetryBudget,
	KeyGPUHourPrice, KeyVerifiedQuery,
	KeySLOWaitSeconds, KeySLOQuantile, KeyReplicaConcurrency, KeyColdStart,
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

// bounded cuts an error text that may repeat a value (the PromQL parser's
// messages quote the query) to a few times maxEcho bytes, with its length.
func bounded(msg string) string { return errtext.Cut(msg, 4*maxEcho) }

// signalList is the comma list of signal names zeroWhenAbsent accepts.
func signalList() string {
	names := make([]string, 0, decision.NumSignals)
	for _, s := range decision.AllSignals() {
		names = append(names, s.String())
	}
	return strings.Join(names, ", ")
}
