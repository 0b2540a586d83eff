package tritontest

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are Triton's Prometheus metrics, with Triton's names and labels
// (docs/user_guide/metrics.md), in a private registry.
type metrics struct {
	reg                *prometheus.Registry
	success, failure   *prometheus.CounterVec
	count, execCount   *prometheus.CounterVec
	pending            *prometheus.GaugeVec
	requestUS, queueUS *prometheus.CounterVec
	inputUS, inferUS   *prometheus.CounterVec
	outputUS           *prometheus.CounterVec
	gpuTotal, gpuUsed  *prometheus.GaugeVec
}

func newMetrics() *metrics {
	model := []string{"model", "version"}
	gpu := []string{"gpu_uuid"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, model)
	}
	m := &metrics{
		reg:       prometheus.NewRegistry(),
		success:   counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
		failure:   counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
		count:     counter("nv_inference_count", "Number of inferences performed (does not include cached requests)"),
		execCount: counter("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)"),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nv_inference_pending_request_count",
			Help: "Instantaneous number of pending requests awaiting execution per-model.",
		}, model),
		requestUS: counter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)"),
		queueUS:   counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)"),
		inputUS:   counter("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds (does not include cached requests)"),
		inferUS:   counter("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not include cached requests)"),
		outputUS:  counter("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds (does not include cached requests)"),
		gpuTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nv_gpu_memory_total_bytes", Help: "GPU total memory, in bytes",
		}, gpu),
		gpuUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nv_gpu_memory_used_bytes", Help: "GPU used memory, in bytes",
		}, gpu),
	}
	m.reg.MustRegister(m.success, m.failure, m.count, m.execCount, m.pending,
		m.requestUS, m.queueUS, m.inputUS, m.inferUS, m.outputUS, m.gpuTotal, m.gpuUsed)
	return m
}

func (m *metrics) modelVecs() []interface{ DeleteLabelValues(...string) bool } {
	return []interface{ DeleteLabelValues(...string) bool }{
		m.success, m.failure, m.count, m.execCount, m.pending,
		m.requestUS, m.queueUS, m.inputUS, m.inferUS, m.outputUS,
	}
}

// addModel creates a loaded model's series at zero, as Triton does when the
// model becomes READY.
func (m *metrics) addModel(name, version string) {
	for _, v := range []*prometheus.CounterVec{m.success, m.failure, m.count, m.execCount, m.requestUS, m.queueUS, m.inputUS, m.inferUS, m.outputUS} {
		v.WithLabelValues(name, version)
	}
	m.pending.WithLabelValues(name, version).Set(0)
}

// removeModel drops an unloaded model's series: Triton reports metrics of
// loaded models only.
func (m *metrics) removeModel(name, version string) {
	for _, v := range m.modelVecs() {
		v.DeleteLabelValues(name, version)
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
