package scaler

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
	"github.com/inferscale/inferscale/scaler/opencost"
)

// Retry amplification episodes and the pool's cost.
//
// A retry storm is the amplification A = rate ÷ unique rate (the decision's
// Recommendation.Amplification) above AmplificationAlert, the level the
// source material calls worth an alert, for at least AmplificationSustain.
// The scaler logs it once per episode and writes one Warning event
// (EventRetryStorm) on the ScaledObject; when A falls to AmplificationAlert
// or below, the episode ends with a log line and a Normal event
// (EventRetryStormEnded). An evaluation without an amplification (no unique
// rate, or none usable) neither starts nor ends an episode. An event refused
// by Events' per-reason rate limit (a second storm within EventMinInterval of
// the first) or its full queue stays owed and is offered again at each later
// evaluation with an amplification until it is queued, unless the episode it
// reports is over by then: the last event on the ScaledObject says whether a
// storm is going on.

// AmplificationAlert is the retry amplification above which a sustained
// episode is logged and written as an event.
const AmplificationAlert = 1.5

// AmplificationSustain is how long A must stay above AmplificationAlert
// before the episode counts: one minute, the span of the rate() windows
// the rate and unique-rate queries usually read, so that one window's
// misalignment between two counters does not start an episode.
const AmplificationSustain = time.Minute

// Event reasons of retry episodes.
const (
	// EventRetryStorm (Warning): A has stayed above AmplificationAlert for AmplificationSustain.
	EventRetryStorm = "RetryStorm"
	// EventRetryStormEnded (Normal): A is at or below AmplificationAlert again.
	EventRetryStormEnded = "RetryStormEnded"
)

// retryEpisode follows one trigger's amplification between evaluations.
type retryEpisode struct {
	mu       sync.Mutex
	since    time.Time // first evaluation of the current run above the alert level; zero: none
	open     bool      // an episode is going on (its start was logged)
	reported bool      // the last event queued was EventRetryStorm; ≠ open while an event is owed
}

// step records one evaluation's amplification a (negative or NaN: not computed)
// at now. It returns the event the episode owes, if any (owed: the start or end
// of an episode not yet queued; offered again at every step until written
// reports it queued), and whether the episode started or ended at this step
// (changed: the caller logs that once). Pure but for the episode's own state.
func (e *retryEpisode) step(a float64, now time.Time) (ev eventSpec, owed, changed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case a < 0 || math.IsNaN(a):
		return eventSpec{}, false, false
	case a > AmplificationAlert:
		if e.since.IsZero() {
			e.since = now
		}
		if !e.open && now.Sub(e.since) >= AmplificationSustain {
			e.open, changed = true, true
		}
	default:
		e.since = time.Time{}
		if e.open {
			e.open, changed = false, true
		}
	}
	switch {
	case e.open == e.reported:
		return eventSpec{}, false, changed
	case e.open:
		return eventSpec{Type: corev1.EventTypeWarning, Reason: EventRetryStorm, Note: fmt.Sprintf(
			"retry amplification %s (rate ÷ unique rate) has stayed above %g since %s: retries, not new requests, are loading the pool",
			fmtAmplification(a), AmplificationAlert, e.since.UTC().Format(time.RFC3339))}, true, changed
	}
	return eventSpec{Type: corev1.EventTypeNormal, Reason: EventRetryStormEnded, Note: fmt.Sprintf(
		"retry amplification %s is at or below %g again", fmtAmplification(a), AmplificationAlert)}, true, changed
}

// written records that ev, owed by step, was queued: it is owed no more.
func (e *retryEpisode) written(ev eventSpec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reported = ev.Reason == EventRetryStorm
}

func fmtAmplification(a float64) string {
	if math.IsInf(a, 1) {
		return "∞ (no unique requests)"
	}
	return fmt.Sprintf("%.3g", a)
}

// retryEpisodeStep is the server's hook after each evaluation: it logs the
// episode's start and end once, and writes the event the episode owes (until
// one is queued; without Kubernetes there is nothing to write).
func (s *Server) retryEpisodeStep(tr *trigger, rec decision.Recommendation, now time.Time) {
	if rec.Err != nil || tr.policy.UniqueRateQuery == "" {
		return
	}
	ev, owed, changed := tr.retry.step(rec.Amplification, now)
	if changed {
		attrs := []any{"namespace", tr.namespace, "scaledObject", tr.name, "metric", tr.metric,
			"amplification", rec.Amplification, "retryCapped", rec.RetryCapped, "replicas", rec.Replicas}
		if rec.Amplification > AmplificationAlert {
			s.log.Warn("retry storm: amplification above "+fmt.Sprint(AmplificationAlert)+" for "+AmplificationSustain.String(), attrs...)
		} else {
			s.log.Info("retry storm ended", attrs...)
		}
	}
	if !owed {
		return
	}
	if r, ok := s.targets.(eventRecorder); ok && !r.recordEvents(tr.namespace, tr.name, []eventSpec{ev}) {
		return // still owed: offered again at the next evaluation
	}
	tr.retry.written(ev)
}

// verifiedQueryOf is the query of verified results per second: verifiedQuery,
// or, without it and with a price configured (priced: gpuHourPrice, or
// OpenCost on, --opencost-address) on a vLLM preset, the requests that
// waited at most T = sloWaitSeconds, read from vLLM's queue-time histogram:
//
//	sum(rate(vllm:request_queue_time_seconds_bucket{model_name="<model>", le=~"<T>|<T>.0"}[5m]))
//
// The bucket whose upper bound is T counts them (Prometheus histograms are
// cumulative); le is matched in both Go's and Python's float text ("2" and
// "2.0"). When T is not one of the histogram's bounds the query returns no
// series and cost per verified result is absent, never wrong. Triton has no
// latency histogram by default: no fallback. "" when there is nothing to read.
func verifiedQueryOf(p decision.Policy, priced bool) string {
	if p.VerifiedQuery != "" {
		return p.VerifiedQuery
	}
	if p.Engine != decision.EngineVLLM || !priced {
		return ""
	}
	t := strconv.FormatFloat(p.SLOWaitSeconds, 'f', -1, 64)
	le := regexp.QuoteMeta(t)
	if !strings.Contains(t, ".") {
		le += "|" + regexp.QuoteMeta(t+".0")
	}
	return fmt.Sprintf("sum(rate(vllm:request_queue_time_seconds_bucket{model_name=%s, le=~%s}[5m]))",
		strconv.Quote(p.Model), strconv.Quote(le))
}

// subscribeVerified subscribes tr's verified-results query (verifiedQueryOf), when there is one.
func (s *Server) subscribeVerified(tr *trigger) error {
	q := verifiedQueryOf(tr.policy, tr.policy.GPUHourPrice > 0 || s.prices != nil)
	if q == "" {
		return nil
	}
	h, err := s.signals.Subscribe(prom.Request{Address: tr.policy.PrometheusAddress, Namespace: tr.namespace,
		Kind: prom.KindVerified, Query: q})
	if err != nil {
		return err
	}
	tr.verified = h
	return nil
}

// Price sources of inferscale_scaler_replica_hour_price's source label.
const (
	PriceSourceMetadata = "gpuHourPrice" // the trigger's gpuHourPrice metadata
	PriceSourceOpenCost = "opencost"     // OpenCost's allocation API (--opencost-address)
)

// priceOf is tr's price of one replica-hour at now and where it comes from: gpuHourPrice
// when set (it always wins: the two are never both used nor summed), else, with OpenCost on
// and the scale target known, OpenCost's fresh price of the target's controller; ok is false
// without either. Either is in gpuHourPrice's range (0, maxGPUHourPrice]: ParseMetadata and
// openCostPrices.store refuse others, and so does this last check.
func (s *Server) priceOf(tr *trigger, now time.Time) (price float64, source string, ok bool) {
	if p := tr.policy.GPUHourPrice; p > 0 {
		return p, PriceSourceMetadata, true
	}
	if s.prices == nil {
		return 0, "", false
	}
	tr.mu.Lock()
	w := tr.target
	tr.mu.Unlock()
	if w.Kind == "" {
		return 0, "", false
	}
	p, ok := s.prices.price(opencost.Controller{Namespace: tr.namespace, Kind: w.Kind, Name: w.Name}, now)
	if !ok || !(p > 0 && p <= maxGPUHourPrice) {
		return 0, "", false
	}
	return p, PriceSourceOpenCost, true
}

// pricedNamespaces is, per namespace, the controllers whose OpenCost price triggers (of all)
// need: the scale targets of those without gpuHourPrice whose target is known. Only their
// prices are kept of an answer, so what is kept is bounded by the triggers.
func (s *Server) pricedNamespaces(all []*trigger) map[string]map[opencost.Controller]struct{} {
	out := map[string]map[opencost.Controller]struct{}{}
	for _, tr := range all {
		if tr.policy.GPUHourPrice > 0 {
			continue
		}
		tr.mu.Lock()
		w := tr.target
		tr.mu.Unlock()
		if w.Kind == "" {
			continue
		}
		if out[tr.namespace] == nil {
			out[tr.namespace] = map[opencost.Controller]struct{}{}
		}
		out[tr.namespace][opencost.Controller{Namespace: tr.namespace, Kind: w.Kind, Name: w.Name}] = struct{}{}
	}
	return out
}

// costCollector exports, per trigger with a price of one replica-hour (priceOf:
// gpuHourPrice, or OpenCost's), the price, the pool's cost rate and, with a
// verified rate, the cost per 1,000 verified results, at scrape time from the
// last decision and the verified query's snapshot:
//
//	cost rate        = desired replicas × price                     (per hour)
//	cost per 1,000   = cost rate ÷ (verified rate × 3,600) × 1,000
//
// The desired replicas are the count the scaler answers (the HPA lands on
// it), not a bill: replicas still starting are billed and counted, nodes
// and other pods are not, so nothing is counted twice. The cost per 1,000
// is absent while the verified rate is missing, stale (older than
// staleAfter), invalid (NaN, ±Inf, negative: logged once per episode,
// verifiedInvalidStep) or zero, and while the result does not fit a float64
// (costNotFiniteStep logs that once per episode). Series follow the decision collector's
// perObject and maxTriggers.
type costCollector struct {
	dc                                      *decisionCollector
	costRate, perVerified, verifiedR, price *prometheus.Desc

	mu      sync.Mutex
	invalid map[*trigger]struct{} // triggers whose verified query answered an invalid value at the last scrape (logged)
}

func newCostCollector(dc *decisionCollector) *costCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("inferscale_scaler_"+name, help, triggerLabels, nil)
	}
	return &costCollector{dc: dc, invalid: map[*trigger]struct{}{},
		price: prometheus.NewDesc("inferscale_scaler_replica_hour_price",
			"Price of one replica-hour in use: the gpuHourPrice metadata, or without it OpenCost's Σ totalCost ÷ (Σ minutes ÷ 60) of the scale target's pods (absent without either; never both).",
			append(append([]string(nil), triggerLabels...), "source"), nil),
		costRate:    d("cost_per_hour", "Desired replicas × replica_hour_price: the pool's cost rate per hour (absent without a price)."),
		perVerified: d("cost_per_thousand_verified_results", "Cost per 1,000 verified results: cost_per_hour ÷ (verified rate × 3600) × 1000 (absent without a price or a positive, fresh verified rate, and while the result is not a finite number, logged once)."),
		verifiedR:   d("verified_results_rate", "Verified results per second: verifiedQuery's value, or on vLLM without it the requests that waited at most sloWaitSeconds (absent without a fresh valid value)."),
	}
}

func (c *costCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.price
	ch <- c.costRate
	ch <- c.perVerified
	ch <- c.verifiedR
}

func (c *costCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.dc.s
	if !c.dc.perObject || (c.dc.maxTriggers > 0 && s.Triggers() > c.dc.maxTriggers) {
		return
	}
	now := s.now()
	invalid := map[*trigger]float64{}
	s.eachTrigger(func(tr *trigger, rec decision.Recommendation) {
		l := []string{tr.namespace, tr.name, tr.metric}
		verified, vok, bad := verifiedRate(tr, now)
		if vok {
			ch <- prometheus.MustNewConstMetric(c.verifiedR, prometheus.GaugeValue, verified, l...)
		}
		if bad {
			invalid[tr] = verified
		}
		price, source, ok := s.priceOf(tr, now)
		if !ok {
			return
		}
		ch <- prometheus.MustNewConstMetric(c.price, prometheus.GaugeValue, price, tr.namespace, tr.name, tr.metric, source)
		if rec.Err != nil {
			return
		}
		rate := costRate(rec.Replicas, price)
		ch <- prometheus.MustNewConstMetric(c.costRate, prometheus.GaugeValue, rate, l...)
		v, ok := costPer1kVerified(rate, verified)
		if vok && ok {
			ch <- prometheus.MustNewConstMetric(c.perVerified, prometheus.GaugeValue, v, l...)
		}
		s.costNotFiniteStep(tr, vok && verified > 0 && rate > 0 && !ok, vok && ok, rate, verified)
	})
	c.verifiedInvalidStep(invalid)
}

// verifiedInvalidStep logs, once per episode per trigger, that the verified query answered a
// value that is no rate (NaN, ±Inf or negative: the poller passes one series on as Prometheus
// returned it), so verified_results_rate and cost_per_thousand_verified_results are absent:
// at WARN, with the value, when a trigger's episode starts (now: this scrape's invalid
// values), at INFO when it ends (its value valid, or no longer read). Before, the series were
// absent with no word. What it keeps is bounded by the triggers (the last scrape's invalid ones).
func (c *costCollector) verifiedInvalidStep(now map[*trigger]float64) {
	s := c.dc.s
	c.mu.Lock()
	defer c.mu.Unlock()
	for tr, v := range now {
		if _, was := c.invalid[tr]; !was {
			s.log.Warn("verified results rate not usable: the verified query's value must be a finite number ≥ 0; verified_results_rate and cost_per_thousand_verified_results are absent",
				"namespace", tr.namespace, "scaledObject", tr.name, "metric", tr.metric, "value", v)
		}
	}
	for tr := range c.invalid {
		if _, still := now[tr]; !still {
			s.log.Info("verified results rate no longer invalid", "namespace", tr.namespace, "scaledObject", tr.name, "metric", tr.metric)
			delete(c.invalid, tr)
		}
	}
	for tr := range now {
		c.invalid[tr] = struct{}{}
	}
}

// costNotFiniteStep logs, once per episode per trigger, that the cost per 1,000 verified
// results is not exported because it does not fit a float64 (a verified rate of 1e-300 with a
// price of 1e9 is +Inf; a cost rate of 1e-320 over 1e10 verified results a second underflows
// to 0): a Prometheus user reads +Inf as "no verified results", a saturated 1.8e308 as a real
// cost that sums and averages into nonsense, and 0 as free, so the series is absent instead,
// and this line says why. The episode ends (INFO) when the series is exported
// again (exported), not while it is absent for another reason (a verified rate missing).
func (s *Server) costNotFiniteStep(tr *trigger, notFinite, exported bool, ratePerHour, verifiedPerSecond float64) {
	attrs := []any{"namespace", tr.namespace, "scaledObject", tr.name, "metric", tr.metric}
	switch {
	case notFinite && tr.costNotFinite.CompareAndSwap(false, true):
		s.log.Warn("cost per 1,000 verified results not exported: cost_per_hour ÷ (verified rate × 3600) × 1000 does not fit a float64 (overflows, or underflows to 0)",
			append(attrs, "costPerHour", ratePerHour, "verifiedResultsRate", verifiedPerSecond)...)
	case exported && tr.costNotFinite.CompareAndSwap(true, false):
		s.log.Info("cost per 1,000 verified results exported again", attrs...)
	}
}

// costRate is replicas × price per hour. It never overflows: a price is at most
// maxGPUHourPrice (priceOf), so the product is below 2³¹ × 10⁹ ≈ 2.1e18 (it saturated at
// 1.8e308 when OpenCost's price had no bound, read as a real cost).
func costRate(replicas int32, price float64) float64 {
	return float64(max(replicas, 0)) * price
}

// costPer1kVerified is rate (per hour) ÷ 3600 ÷ verified per second × 1000,
// the cost per result in an order that does not overflow first (verified ×
// 3600 overflowed from 5e304 and the result read 0); ok is false for a
// verified rate that is not positive or finite, and for a result that does
// not fit a float64: +Inf, or 0 from a positive cost rate (underflow).
func costPer1kVerified(ratePerHour, verifiedPerSecond float64) (float64, bool) {
	if !(verifiedPerSecond > 0) || math.IsInf(verifiedPerSecond, 0) {
		return 0, false
	}
	v := ratePerHour / 3600 / verifiedPerSecond * 1000
	if math.IsNaN(v) || math.IsInf(v, 0) || (v == 0 && ratePerHour > 0) {
		return 0, false
	}
	return v, true
}

// verifiedRate reads tr's verified query's snapshot: ok when it holds a
// valid value (finite, ≥ 0) evaluated within staleAfter of now; invalid
// when it holds a fresh value that is NaN, ±Inf or negative (v is then that value).
func verifiedRate(tr *trigger, now time.Time) (v float64, ok, invalid bool) {
	if tr.verified == nil {
		return 0, false, false
	}
	r := tr.verified.Result()
	if r.Err != nil || r.Empty || r.EvaluatedAt.IsZero() || now.Sub(r.EvaluatedAt) > tr.policy.StaleAfter {
		return 0, false, false
	}
	if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0 {
		return r.Value, false, true
	}
	return r.Value, true, false
}
