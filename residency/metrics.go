package residency

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sidecar's Prometheus collectors, registered on a caller's (private)
// registry. Names are prefixed inferscale_residency_; each field is the metric of the same name
// in snake case (help texts in NewMetrics).
type Metrics struct {
	Ready             prometheus.Gauge
	ResidentModels    prometheus.Gauge
	AccountedBytes    prometheus.Gauge
	MeasuredBytes     prometheus.Gauge
	BudgetBytes       prometheus.Gauge
	Loads             *prometheus.CounterVec // result: success, failure
	Unloads           *prometheus.CounterVec // reason: idle, evict
	Evictions         prometheus.Counter
	RefusedLoads      prometheus.Counter
	LoadSeconds       prometheus.Histogram
	DrainSeconds      prometheus.Gauge
	OverPeak          *prometheus.GaugeVec // model
	Quarantined       prometheus.Gauge
	UnplaceableModels prometheus.Gauge
	LoopErrors        prometheus.Counter
	DeviceReadErrors  prometheus.Counter
	QueueReadErrors   prometheus.Counter
	BusyModels        prometheus.Gauge
	LoadWait          prometheus.Gauge
}

// NewMetrics builds the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns, sub = "inferscale", "residency"
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	m := &Metrics{
		Ready:          g("ready", "1 when every P0 model is READY and no drain is under way."),
		ResidentModels: g("resident_models", "Models READY in Triton."),
		AccountedBytes: g("accounted_bytes", "Accounted memory: reserve, unaccounted device memory, and every READY/LOADING/UNLOADING model at its admitted peak (or measurement, if higher) plus swap overhead."),
		MeasuredBytes:  g("measured_bytes", "Device memory in use (NVML) or, without NVML, the models' memory_usage from Triton's statistics."),
		BudgetBytes:    g("budget_bytes", "Usable memory of the pod's GPU slice."),
		Loads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "loads_total",
			Help: "Model loads by result (success, failure)."}, []string{"result"}),
		Unloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "unloads_total",
			Help: "Model unloads by reason (idle, evict)."}, []string{"reason"}),
		Evictions:    c("evictions_total", "Models unloaded to make room for another or to get back within budget."),
		RefusedLoads: c("refused_loads_total", "Wanted loads refused because they do not fit (counted when a refusal starts)."),
		LoadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "load_duration_seconds",
			Help: "Time of successful loads.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)}),
		DrainSeconds: g("drain_duration_seconds", "Duration of the last drain, from the request to drained."),
		OverPeak: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "model_over_peak_bytes",
			Help: "Bytes a model was measured above its admitted peak (flagged models only)."}, []string{"model"}),
		Quarantined:       g("quarantined_models", "Models quarantined after repeated failed loads."),
		UnplaceableModels: g("unplaceable_models", "Catalog models that can never be loaded here: no peak for this pod's profile, or peak + reserve above the budget."),
		LoopErrors:        c("loop_errors_total", "Loops that could not observe Triton."),
		DeviceReadErrors: c("device_memory_read_errors_total",
			"Loops that could not read the device's used memory (NVML, or Triton's nv_gpu_memory_used_bytes) and planned on the accounting alone."),
		QueueReadErrors: c("queue_read_errors_total",
			"Loops whose reading of Triton's queue lengths (nv_inference_pending_request_count) failed, or had a series that is not a count in [0, 1e9] (NaN, ±Inf, negative, counter-typed); the models of invalid series counted as busy, never evicted."),
		BusyModels: g("busy_models", "READY models with queued or executing requests in the last loop: never evicted."),
		LoadWait:   g("load_wait_seconds", "Mean wait of recent successful loads that requests waited for, from the oldest held request to the load's start, each load weighted by its recency (half-life 10 min; the value changes only when a load completes); the planner counts it in a miss's cost."),
	}
	for _, col := range []prometheus.Collector{m.Ready, m.ResidentModels, m.AccountedBytes, m.MeasuredBytes, m.BudgetBytes,
		m.Loads, m.Unloads, m.Evictions, m.RefusedLoads, m.LoadSeconds, m.DrainSeconds, m.OverPeak, m.Quarantined,
		m.UnplaceableModels, m.LoopErrors, m.DeviceReadErrors, m.QueueReadErrors, m.BusyModels, m.LoadWait} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	m.Loads.WithLabelValues("success")
	m.Loads.WithLabelValues("failure")
	m.Unloads.WithLabelValues("idle")
	m.Unloads.WithLabelValues("evict")
	return m, nil
}
