package prom

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind names one of the scaler's signals.
type Kind string

// The signals a ScaledObject can supply; see DESIGN.md "Signals".
const (
	// KindQueue is Q: requests waiting, pool-wide (a count).
	KindQueue Kind = "queue"
	// KindRate is λ: requests per second arriving at the pool.
	KindRate Kind = "rate"
	// KindActivity is A: mean GPU engine activity of the pool's pods, 0..1 (before the
	// activityCeiling normalisation the decision applies).
	KindActivity Kind = "activity"
	// KindReady is R: ready replicas of the pool (used when the scaler has no Kubernetes access).
	KindReady Kind = "ready"
	// KindRunning is the number of requests the pool's engines are serving now (a count).
	KindRunning Kind = "running"
	// KindServiceTime is S: mean seconds of service (not waiting) per request.
	KindServiceTime Kind = "serviceTime"
	// KindDispersion is I: the index of dispersion of the pool's arrival counts in
	// one-minute windows around the current rate (ca² for Allen–Cunneen); 1 for Poisson
	// arrivals, more for bursts, and a level shift or trend does not raise it.
	KindDispersion Kind = "dispersion"
	// KindUniqueRate is the arrival rate of original requests (first attempts) at a gateway;
	// no engine sees it, so it has no preset and is not in Kinds.
	KindUniqueRate Kind = "uniqueRate"
	// KindVerified is the rate of results that met their quality bar and deadline (the
	// scaler's verifiedQuery, for cost per verified result); no preset, not in Kinds.
	KindVerified Kind = "verified"
)

// Kinds lists every Kind the presets serve, in a fixed order.
var Kinds = []Kind{KindQueue, KindRate, KindActivity, KindReady, KindRunning, KindServiceTime, KindDispersion}

func (k Kind) valid() bool {
	switch k {
	case KindQueue, KindRate, KindActivity, KindReady, KindRunning, KindServiceTime, KindDispersion, KindUniqueRate, KindVerified:
		return true
	}
	return false
}

// Engines with presets. EngineCustom has none: every query must be supplied.
const (
	EngineTriton = "triton"
	EngineVLLM   = "vllm"
	EngineCustom = "custom"
)

// Preset describes the standard metrics of one inference engine.
type Preset struct {
	// Engine is the `engine` metadata value.
	Engine string
	// QueueMetric is a gauge of requests waiting, one series per pod and model.
	QueueMetric string
	// HeldMetric, when set, is a gauge of requests held outside the engine (per pod and model)
	// that the queue signal adds to QueueMetric: the residency sidecar's inference front holds
	// requests for a model that is not loaded, where the engine cannot count them.
	HeldMetric string
	// RequestCounters are counters whose summed rate() is the pool's request rate.
	RequestCounters []string
	// ModelLabel is the label that carries the model name on the engine's series.
	ModelLabel string
	// RunningMetric is a gauge of requests being served, per pod and model; empty when the
	// engine has none (Triton), and then running is read from BusySeconds' rate (Little's law)
	// and, where set, ForwardingSeconds.
	RunningMetric string
	// ForwardingSeconds, when set (with RunningMetric empty), is a counter of the
	// request-seconds of requests forwarded to the engine and not yet answered, per pod and
	// model: the residency sidecar's inference front counts them
	// (inferscale_front_forwarding_seconds_total). Its rate less the engine's mean QueueMetric
	// is the mean number executing, counted while they run; running is the larger of that and
	// BusySeconds' rate, which counts them when they end.
	ForwardingSeconds string
	// BusySeconds are the counters of total request time and of its waiting part, and
	// their unit in seconds: rate(total) − rate(waiting) is the mean number of requests in
	// service, and that ÷ rate(Completions) is the mean service time S.
	BusyTotal, BusyWaiting string
	BusyUnitSeconds        float64
	// Completions counts the requests BusyTotal covers.
	Completions string
}

// Presets holds the built-in engine presets, keyed by engine name.
//
// Triton: nv_inference_pending_request_count (gauge, per model and version),
// nv_inference_request_success / nv_inference_request_failure (counters), label `model`
// (Triton's metrics documentation). vLLM: vllm:num_requests_waiting (gauge),
// vllm:request_success_total (counter of finished requests, by finished_reason), label
// `model_name` (vLLM's production metrics documentation). vLLM has no failure counter.
//
// Service: Triton's nv_inference_request_duration_us and nv_inference_queue_duration_us
// are cumulative microseconds of successful requests (end to end, and waiting in the
// scheduler queue), so their difference's rate is microseconds of service per second;
// Triton has no in-flight gauge, so running is that rate in seconds (Little's law: mean
// requests in service), or, where the residency sidecar's front forwards the requests, the
// rate of the front's request-seconds forwarded and not answered less Triton's mean pending
// count, when that is larger (see [PresetQuery]). vLLM exports vllm:num_requests_running and
// the histograms vllm:e2e_request_latency_seconds and vllm:request_queue_time_seconds, whose
// _sum difference is seconds of service and whose _count counts finished requests.
var Presets = map[string]Preset{
	EngineTriton: {
		Engine:            EngineTriton,
		QueueMetric:       "nv_inference_pending_request_count",
		HeldMetric:        "inferscale_front_held_requests",
		RequestCounters:   []string{"nv_inference_request_success", "nv_inference_request_failure"},
		ModelLabel:        "model",
		ForwardingSeconds: "inferscale_front_forwarding_seconds_total",
		BusyTotal:         "nv_inference_request_duration_us",
		BusyWaiting:       "nv_inference_queue_duration_us",
		BusyUnitSeconds:   1e-6,
		Completions:       "nv_inference_request_success",
	},
	EngineVLLM: {
		Engine:          EngineVLLM,
		QueueMetric:     "vllm:num_requests_waiting",
		RequestCounters: []string{"vllm:request_success_total"},
		ModelLabel:      "model_name",
		RunningMetric:   "vllm:num_requests_running",
		BusyTotal:       "vllm:e2e_request_latency_seconds_sum",
		BusyWaiting:     "vllm:request_queue_time_seconds_sum",
		BusyUnitSeconds: 1,
		Completions:     "vllm:e2e_request_latency_seconds_count",
	},
}

// DispersionWindow and DispersionSpan are the counting window and the span of the
// dispersion preset, and DispersionMedianChi2 its median-to-mean constant.
//
// The preset is the index of dispersion of one-minute arrival counts n (1 for a Poisson
// process; Cox and Lewis, The Statistical Analysis of Series of Events, 1966) estimated
// from the successive differences of adjacent counts over the last ten minutes, not from
// their variance about the span's mean: a step or trend in the rate is the forecast's
// business (λ_H), and would read as burstiness in a variance. For independent Poisson
// counts E[(n_{i+1} − n_i)²] = 2·E[n] (the two-sample or Allan variance, D. W. Allan,
// Proc. IEEE 54(2), 1966), so I = E[(Δn)²] ÷ (2·E[n]). E[(Δn)²] is estimated by the
// median of the squared differences ÷ 0.4549, the median of χ²₁ (a median-based scale,
// as in Rousseeuw and Croux, JASA 88, 1993), so one step or spike among the ten
// differences does not move it. With rates r = n/60 per one-minute window:
//
//	I = 30 · median((Δr)²) ÷ (0.4549 · mean(r))
//
// the median being quantile_over_time(0.5) (linear interpolation between the middle two
// of an even count). When more than half the differences are zero (a pool idle for most
// of the span) I reads 0.
const (
	DispersionWindow     = "1m"
	DispersionSpan       = "10m"
	DispersionMedianChi2 = 0.4549
)

// ServiceTimePriorCompletions and ServiceTimeLongWindow shape the service-time preset, S.
//
// Engines count a request's service when it completes (Triton's duration counters, vLLM's
// latency histograms), so the last minute's ratio service seconds ÷ completions is the mean
// of however few requests happened to finish in it: one 24 s request ending in an otherwise
// idle minute reads S = 24 s where a thousand 1 s requests had just read 1 s, and the sizing
// rule multiplies that S by the forecast arrival rate. The preset therefore weighs the
// minute's mean against the mean over ServiceTimeLongWindow by the minute's completion
// count n, a credibility estimate (Bühlmann, "Experience rating and credibility", ASTIN
// Bulletin 4(3), 1967; the mean of a Gamma–Poisson or normal model with a prior worth n₀
// observations):
//
//	S = (n·S₁ + n₀·S₁₀) ÷ (n + n₀) = (60·B₁ + n₀·B₁₀/C₁₀) ÷ (60·C₁ + n₀)
//
// with B the seconds of service per second and C the completions per second over 1m and
// 10m, and n₀ = 4: the minute's own mean weighs half at 4 completions, 80 % at 16 and 96 %
// at 100, so a pool completing requests every second follows its last minute as before
// while a lone completion moves S a fifth of the way. n₀ is a prior strength stated in
// requests, not fitted to a trace (docs/replay.md gives the figures at 4 and 16). With no
// completion in the last minute S is the 10-minute mean; with none in 10 minutes it is
// 0/0, NaN, an invalid sample, and the scaler holds the last good S.
const (
	ServiceTimePriorCompletions = 4
	ServiceTimeLongWindow       = "10m"
)

// ActivityMetric is NVIDIA DCGM's graphics-engine activity, 0..1 per GPU or MIG instance.
// Unlike DCGM_FI_DEV_GPU_UTIL it is reported per MIG instance.
const ActivityMetric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"

// Labels names the labels preset queries group and join on.
type Labels struct {
	// Namespace is the label carrying the Kubernetes namespace (default "namespace").
	Namespace string
	// Pod is the label carrying the pod name, on the engine's series and on DCGM's series
	// (default "pod"). DCGM exporter must be scraped so that its own pod/namespace labels
	// are kept (for example honorLabels: true on its ServiceMonitor).
	Pod string
}

// PresetQuery returns the grouped PromQL for kind under engine's preset. The query covers
// every namespace and model; its result has one series per (namespace, model) with exactly
// those two labels (the model label is the preset's ModelLabel). The poller evaluates it once
// per refresh for all ScaledObjects of that engine and splits it.
//
// The pool of a (namespace, model) is the set of pods in that namespace that export the
// engine's queue metric for that model. Activity is the mean over those pods of each pod's
// mean DCGM engine activity (a pod with two GPUs counts once); ready is the number of those
// pods.
//
// Running on Triton, which has no gauge of requests executing, is the larger of two readings
// (requests, per pool, each a mean over the last minute): the front's forwarded-and-unanswered
// request-seconds per second less Triton's mean pending count, clamped at 0 (counted while
// requests run, but blind to gRPC ModelStreamInfer streams and to clients that bypass the
// front), and the busy rate of the last minute's completions (Little's law on the duration
// counters: sees every request, but only once it ends, so it lags a rise by up to a minute plus
// the requests' own duration). The larger follows a rise within the minute whatever the
// requests' length; the busy rate is its floor; a pool without the front reads the busy rate.
// Both are one-minute means, not an instant's count: an instant's count of busy slots, taken as
// offered load, ordered a replica more whenever a poll found every slot of a small pool busy.
//
// Errors wrap [ErrBadRequest] for an unknown engine or kind.
func PresetQuery(engine string, kind Kind, l Labels) (string, error) {
	p, ok := Presets[engine]
	if !ok {
		return "", fmt.Errorf("%w: engine %q has no preset queries (accepted: triton, vllm; custom needs a %sQuery)", ErrBadRequest, engine, kind)
	}
	ns, model, pod := l.Namespace, p.ModelLabel, l.Pod
	by := ns + ", " + model
	// pods is 1 per (namespace, pod, model) whose pod exports the engine's queue metric.
	pods := fmt.Sprintf("group by (%s, %s, %s) (%s)", ns, pod, model, p.QueueMetric)
	switch kind {
	case KindQueue:
		if p.HeldMetric != "" { // one selector: the sum has a series wherever either gauge does
			return fmt.Sprintf(`sum by (%s) ({__name__=~"%s|%s"})`, by, p.QueueMetric, p.HeldMetric), nil
		}
		return fmt.Sprintf("sum by (%s) (%s)", by, p.QueueMetric), nil
	case KindRate:
		// One sum per counter, then added: rate() drops the metric name, so a single
		// {__name__=~"a|b"} selector would give two series with the same labels. Both
		// counters exist for every loaded Triton model (Triton creates them at load).
		terms := make([]string, len(p.RequestCounters))
		for i, c := range p.RequestCounters {
			terms[i] = fmt.Sprintf("sum by (%s) (rate(%s[1m]))", by, c)
		}
		return strings.Join(terms, " + "), nil
	case KindActivity:
		return fmt.Sprintf("avg by (%s) (%s * on (%s, %s) group_left () avg by (%s, %s) (%s))",
			by, pods, ns, pod, ns, pod, ActivityMetric), nil
	case KindReady:
		return fmt.Sprintf("count by (%s) (%s)", by, pods), nil
	case KindRunning:
		if p.RunningMetric != "" {
			return fmt.Sprintf("sum by (%s) (%s)", by, p.RunningMetric), nil
		}
		if p.ForwardingSeconds != "" {
			// max(executing, busy) per group: the comparison keeps executing where it is at
			// least the busy rate, the first `or` takes the busy rate for the other groups and
			// for pools without the front, the second takes executing where the busy rate is
			// absent (Triton recreates its counters when it loads a model).
			b := busy(p, by, "1m")
			executing := fmt.Sprintf("clamp_min(sum by (%s) (rate(%s[1m])) - sum by (%s) (avg_over_time(%s[1m])), 0)", by, p.ForwardingSeconds, by, p.QueueMetric)
			return fmt.Sprintf("(%s >= %s) or %s or %s", executing, b, b, executing), nil
		}
		return busy(p, by, "1m"), nil
	case KindServiceTime:
		// (60·B₁ + n₀·B₁₀/C₁₀) ÷ (60·C₁ + n₀): ServiceTimePriorCompletions' credibility blend.
		long := fmt.Sprintf("%s / sum by (%s) (rate(%s[%s]))", busy(p, by, ServiceTimeLongWindow), by, p.Completions, ServiceTimeLongWindow)
		return fmt.Sprintf("(60 * %s + %d * (%s)) / (60 * sum by (%s) (rate(%s[1m])) + %d)",
			busy(p, by, "1m"), ServiceTimePriorCompletions, long, by, p.Completions, ServiceTimePriorCompletions), nil
	case KindDispersion:
		// One rate per window, as the rate preset sums it, and the same a window earlier; a
		// subquery samples their difference and the rate once per window over the span.
		terms := make([]string, len(p.RequestCounters))
		prev := make([]string, len(p.RequestCounters))
		for i, c := range p.RequestCounters {
			terms[i] = fmt.Sprintf("sum by (%s) (rate(%s[%s]))", by, c, DispersionWindow)
			prev[i] = fmt.Sprintf("sum by (%s) (rate(%s[%s] offset %s))", by, c, DispersionWindow, DispersionWindow)
		}
		r, rPrev := strings.Join(terms, " + "), strings.Join(prev, " + ")
		return fmt.Sprintf("30 * quantile_over_time(0.5, (((%s) - (%s)) ^ 2)[%s:%s]) / (%s * avg_over_time((%s)[%s:%s]))",
			r, rPrev, DispersionSpan, DispersionWindow,
			strconv.FormatFloat(DispersionMedianChi2, 'f', -1, 64), r, DispersionSpan, DispersionWindow), nil
	}
	return "", fmt.Errorf("%w: kind %q is not one of %s", ErrBadRequest, kind, kindList())
}

// SignalLabel is the label [PresetBundle] adds to every series: the [Kind] the series is a
// value of.
const SignalLabel = "inferscale_signal"

// PresetBundle returns one PromQL query that evaluates every Kind of engine's preset at
// once: each [PresetQuery] wrapped in label_replace(q, "inferscale_signal", "<kind>", "", "")
// (the empty regex matches the absent source label, so every series gets the label; the
// idiom of Prometheus's label_replace documentation) and the seven joined with `or`. The
// kinds' series then differ in SignalLabel, so `or` keeps all of them. The poller evaluates
// one bundle per engine and Prometheus address per refresh instead of one query per kind:
// the signals of a refresh share one evaluation instant, and 1,000 preset ScaledObjects cost
// one query per engine. Prometheus still evaluates every part, so its work is the same as
// the seven queries'. Errors wrap [ErrBadRequest] for an unknown engine.
func PresetBundle(engine string, l Labels) (string, error) {
	parts := make([]string, len(Kinds))
	for i, k := range Kinds {
		q, err := PresetQuery(engine, k, l)
		if err != nil {
			return "", err
		}
		parts[i] = fmt.Sprintf("label_replace(%s, %q, %q, \"\", \"\")", q, SignalLabel, string(k))
	}
	return strings.Join(parts, " or "), nil
}

// busy is the seconds of service per second of the requests completed over the last window
// (a PromQL range such as "1m"): (rate(total) − rate(waiting)) × unit. Over a window with no
// request longer than itself it is the mean number of requests in service (Little's law).
func busy(p Preset, by, window string) string {
	q := fmt.Sprintf("(sum by (%s) (rate(%s[%s])) - sum by (%s) (rate(%s[%s])))", by, p.BusyTotal, window, by, p.BusyWaiting, window)
	if p.BusyUnitSeconds != 1 {
		q = fmt.Sprintf("%s * %s", q, strconv.FormatFloat(p.BusyUnitSeconds, 'f', -1, 64)) // the parser's own print
	}
	return q
}

// kindList is the comma list of Kinds, for errors.
func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
