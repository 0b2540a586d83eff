package front

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the front's Prometheus collectors, registered on a caller's (private) registry.
// Names are prefixed inferscale_front_. The model label is the catalog model's name; requests
// for names outside the catalog are counted under model="" so that clients cannot create
// series.
type Metrics struct {
	// HeldRequests is inferscale_front_held_requests{model}: requests held now. The scaler's
	// Triton preset adds it to the queue signal.
	HeldRequests *prometheus.GaugeVec
	// HoldSeconds is inferscale_front_hold_seconds{model}: time each held request spent held,
	// whatever its outcome.
	HoldSeconds *prometheus.HistogramVec
	// Forwarded is inferscale_front_forwarded_total{model}: inference requests sent to Triton.
	Forwarded *prometheus.CounterVec
	// ForwardingSeconds is inferscale_front_forwarding_seconds_total{model}: the request-seconds
	// of unary ModelInfer and HTTP inference requests forwarded to Triton and not yet answered
	// (gRPC ModelStreamInfer streams are not counted; an HTTP request counts from its
	// forwarding, while its body may still be arriving when it was not held, until Triton's
	// answer has come: its response header for infer, however slowly the client reads it; the
	// end of its body for generate and generate_stream, which Triton starts at the model's
	// first response), so that its rate()
	// over a window is the mean number of them over that window, counted while they run rather
	// than when they end. Triton has no gauge of requests executing, so the scaler's Triton
	// preset reads the requests running as this rate less Triton's mean
	// nv_inference_pending_request_count (docs/scaler-prom.md).
	ForwardingSeconds *ForwardingSeconds
	// FastFailed is inferscale_front_fast_failed_total{model,reason}: inference requests the
	// front answered itself without holding them; reason is one of not_found, quarantined,
	// never_fits, queue_full, hold_budget (--hold-max-total-bytes), draining, bad_request,
	// too_large (--max-request-bytes; model="" when refused before its model was read),
	// body_timeout (a chunked HTTP body read to be held that stopped arriving for --hold-timeout), and
	// model_control for a refused repository load or unload (model=""), and unloaded (Triton
	// answered NOT_FOUND for a model unloaded since the front's view, and the request, past
	// --retain-max-total-bytes, was not kept to be held).
	FastFailed *prometheus.CounterVec
	// HoldFailed is inferscale_front_hold_failed_total{model,reason}: held requests that ended
	// without being forwarded; reason is one of hold_timeout, cancelled (the client's deadline
	// or cancellation), quarantined, never_fits, not_found, draining (the drain's deadline, or a
	// released request whose model Triton had unloaded while the pod drains), shutdown.
	HoldFailed *prometheus.CounterVec
	// RetainedBytes is inferscale_front_retained_bytes: bytes of forwarded requests kept now
	// for a re-hold, at most --retain-max-total-bytes.
	RetainedBytes prometheus.Gauge
}

// NewMetrics builds the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns, sub = "inferscale", "front"
	m := &Metrics{
		HeldRequests: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "held_requests",
			Help: "Inference requests held now, waiting for their model to be READY."}, []string{"model"}),
		// 50 ms to about 7 minutes: a hold lasts a model load, seconds to minutes.
		HoldSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "hold_seconds",
			Help:    "Time a held request spent held, whatever its outcome.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}, []string{"model"}),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "forwarded_total",
			Help: "Inference requests forwarded to Triton."}, []string{"model"}),
		ForwardingSeconds: newForwardingSeconds(prometheus.BuildFQName(ns, sub, "forwarding_seconds_total"), time.Now),
		FastFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "fast_failed_total",
			Help: "Inference requests answered at once without holding them, by reason."}, []string{"model", "reason"}),
		HoldFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "hold_failed_total",
			Help: "Held inference requests that ended without being forwarded, by reason."}, []string{"model", "reason"}),
		RetainedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "retained_bytes",
			Help: "Bytes of forwarded inference requests kept now to be held again if Triton answers NOT_FOUND for a model unloaded meanwhile."}),
	}
	for _, c := range []prometheus.Collector{m.HeldRequests, m.HoldSeconds, m.Forwarded, m.ForwardingSeconds, m.FastFailed, m.HoldFailed, m.RetainedBytes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ForwardingSeconds is the collector of inferscale_front_forwarding_seconds_total{model}: per
// model, the integral over time of the requests forwarded to Triton and not yet answered, in
// seconds (each request adds the time from its forwarding to its answer, continuously, not
// when it ends). A model's series exists from its first forwarded request on.
type ForwardingSeconds struct {
	desc *prometheus.Desc
	now  func() time.Time

	mu     sync.Mutex
	models map[string]*inFlight
}

// inFlight is one model's count of requests forwarded now, since when it has had that count,
// and the request-seconds accumulated before then.
type inFlight struct {
	n     int
	since time.Time
	acc   float64
}

func newForwardingSeconds(name string, now func() time.Time) *ForwardingSeconds {
	return &ForwardingSeconds{
		desc: prometheus.NewDesc(name, "Request-seconds of unary and HTTP inference requests forwarded to Triton and not yet answered "+
			"(gRPC streams not counted); its rate is the mean number of them.", []string{"model"}, nil),
		now: now, models: map[string]*inFlight{}}
}

// add changes the model's count by d (+1 when a request is forwarded, −1 when its answer has
// come), first accumulating the request-seconds of the count it had.
func (c *ForwardingSeconds) add(model string, d int) {
	c.mu.Lock() // the clock is read under the lock, so that every interval is ≥ 0
	defer c.mu.Unlock()
	now := c.now()
	s := c.models[model]
	if s == nil {
		s = &inFlight{since: now}
		c.models[model] = s
	}
	s.acc += float64(s.n) * now.Sub(s.since).Seconds()
	s.n, s.since = max(0, s.n+d), now
}

// Describe implements prometheus.Collector.
func (c *ForwardingSeconds) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: each model's accumulated request-seconds plus those
// of the requests forwarded now, up to now.
func (c *ForwardingSeconds) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	now := c.now()
	ms := make([]prometheus.Metric, 0, len(c.models))
	for model, s := range c.models {
		v := s.acc + float64(s.n)*now.Sub(s.since).Seconds()
		ms = append(ms, prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, v, model))
	}
	c.mu.Unlock() // sent after: a slow scrape does not hold up forwarding
	for _, m := range ms {
		ch <- m
	}
}
