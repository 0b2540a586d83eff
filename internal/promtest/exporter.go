package promtest

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Exporter is an HTTP /metrics endpoint over a private registry whose series the test sets.
type Exporter struct {
	srv      *httptest.Server
	reg      *prometheus.Registry
	mu       sync.Mutex
	gauges   map[string]*prometheus.GaugeVec
	counters map[string]*prometheus.CounterVec
}

// NewExporter starts an exporter on a free loopback port and closes it in t.Cleanup.
func NewExporter(t testing.TB) *Exporter {
	t.Helper()
	e := &Exporter{
		reg:      prometheus.NewRegistry(),
		gauges:   map[string]*prometheus.GaugeVec{},
		counters: map[string]*prometheus.CounterVec{},
	}
	e.srv = httptest.NewServer(promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{}))
	t.Cleanup(e.srv.Close)
	return e
}

// Target returns host:port for a scrape config.
func (e *Exporter) Target() string { return strings.TrimPrefix(e.srv.URL, "http://") }

// URL returns the exporter's base URL.
func (e *Exporter) URL() string { return e.srv.URL }

// Registry returns the exporter's registry, for collectors the helpers do not cover.
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Gauge returns the gauge vector name with the given label names, registering it on first
// use. Names may contain colons (vllm:num_requests_waiting). It panics, like
// prometheus.MustRegister, when name was registered with other labels.
func (e *Exporter) Gauge(name string, labelNames ...string) *prometheus.GaugeVec {
	e.mu.Lock()
	defer e.mu.Unlock()
	if g, ok := e.gauges[name]; ok {
		return g
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "promtest gauge " + name}, labelNames)
	e.reg.MustRegister(g)
	e.gauges[name] = g
	return g
}

// Counter returns the counter vector name with the given label names, registering it on
// first use. The name is exposed exactly as given (Triton's counters have no _total suffix).
func (e *Exporter) Counter(name string, labelNames ...string) *prometheus.CounterVec {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.counters[name]; ok {
		return c
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "promtest counter " + name}, labelNames)
	e.reg.MustRegister(c)
	e.counters[name] = c
	return c
}
