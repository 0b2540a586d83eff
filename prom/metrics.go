package prom

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	duration   *prometheus.HistogramVec
	errors     *prometheus.CounterVec
	perRefresh prometheus.Gauge
	replaced   *prometheus.CounterVec
}

// newMetrics builds the poller's collectors and registers them on reg (nil: unregistered).
func newMetrics(reg prometheus.Registerer, p *Poller) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inferscale_scaler_prom_query_duration_seconds",
			Help:    "Duration of one Prometheus query evaluation by the scaler's poller, by signal kind.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferscale_scaler_prom_query_errors_total",
			Help: "Prometheus query evaluations that failed, by signal kind.",
		}, []string{"kind"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferscale_scaler_prom_namespace_matchers_replaced_total",
			Help: "Distinct custom queries whose namespace matchers confinement replaced (they named another namespace or widened their scope), by the ScaledObject's namespace.",
		}, []string{"namespace"}),
		perRefresh: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "inferscale_scaler_prom_queries_per_refresh",
			Help: "Distinct Prometheus queries evaluated by the last full refresh.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{
		m.duration, m.errors, m.perRefresh, m.replaced,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferscale_scaler_prom_snapshot_age_seconds",
			Help: "Age in seconds of the oldest result in the signal snapshot (now minus its evaluation time; 0 before any).",
		}, func() float64 { return p.snapshotAge().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferscale_scaler_prom_subscriptions",
			Help: "Signals (ScaledObject triggers x kinds) the poller currently serves.",
		}, func() float64 { return float64(p.Subscriptions()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferscale_scaler_prom_queries_waiting",
			Help: "Distinct queries due but waiting for a concurrency slot: of their Prometheus address (it has --query-concurrency queries in flight: slow, hung, or more distinct queries than slots), or of those all ScaledObject-named addresses share.",
		}, func() float64 { return float64(p.waitingQueries()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "inferscale_scaler_prom_addresses",
			Help: "Distinct Prometheus addresses the subscribed queries name; each has its own --query-concurrency slots.",
		}, func() float64 { return float64(p.addresses()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register poller metrics: %w", err)
		}
	}
	return m, nil
}
