package scaler

import (
	"context"
	"math"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/scaler/decision"
)

// decisionCollector exports every trigger's last decision at scrape time
// from the server's snapshot: no per-series state is kept between scrapes.
// A scrape is not free, though: client_golang builds every series of a
// scrape in memory before encoding it, about 0.6–0.9 KiB per series, and a
// trigger has up to 36 series (10,000 triggers: ≈ 360,000 series, ≈ 230 MiB
// transient heap; 20 series measured 190 MiB RSS after one scrape). So per-trigger
// series are exported only while perObject is set and at most maxTriggers
// triggers are registered (0: no bound); the aggregates
// (inferscale_scaler_triggers, _triggers_active, _triggers_degraded,
// _triggers_no_data, _object_metrics) are always exported.
type decisionCollector struct {
	s           *Server
	perObject   bool
	maxTriggers int

	desired, raw, active, degraded, ready, term  *prometheus.Desc
	signal, signalStatus, info, triggers, noData *prometheus.Desc
	nActive, nDegraded, nNoData, exported        *prometheus.Desc

	lambdaH, load, service, dispersion, horizon, pWait, saturated *prometheus.Desc
	amplification, retryCapped                                    *prometheus.Desc
}

var triggerLabels = []string{"namespace", "scaledobject", "metric"}

func newDecisionCollector(s *Server) *decisionCollector {
	d := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc("inferscale_scaler_"+name, help, append(append([]string(nil), triggerLabels...), extra...), nil)
	}
	agg := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("inferscale_scaler_"+name, help, nil, nil)
	}
	return &decisionCollector{
		s:             s,
		perObject:     true,
		desired:       d("desired_replicas", "Replica count answered to KEDA (GetMetrics value, target 1)."),
		raw:           d("raw_replicas", "N_raw = clamp(N_demand + warm, min, max), before windows."),
		active:        d("active", "IsActive answer (1 active, 0 inactive)."),
		degraded:      d("degraded", "1 when a signal that was once valid is out past staleAfter, or when rate ÷ the unique rate is above decision.MaxAmplification, 1000 (that unique rate counts as missing)."),
		ready:         d("ready_replicas", "R as used by the decision (absent when unknown)."),
		term:          d("term_replicas", "Formula terms: slo, drain, cap, occupancy, activity, warm, demand (absent when not computed; slo reads max + 1 when the bound cannot meet the SLO).", "term"),
		lambdaH:       d("forecast_rate_rps", "λ_H: the arrival rate forecast over the cold-start horizon, requests per second (absent without a rate)."),
		load:          d("offered_load_erlangs", "a = max(λ_H·S, running): the offered load N_slo is sized for, Erlangs (absent when not computed)."),
		service:       d("service_time_seconds", "S as used: mean seconds of service per request, measured or k/μ (absent when unknown).", "source"),
		dispersion:    d("arrival_dispersion", "I as used: index of dispersion of arrival counts (1 when not measured: Poisson)."),
		horizon:       d("cold_start_seconds", "H as used: from a scale-up decision to a ready replica, seconds.", "source"),
		pWait:         d("predicted_wait_probability", "Predicted P(wait > sloWaitSeconds) at the answered replica count (absent when not computed)."),
		saturated:     d("saturated", "1 when engine activity is at activityCeiling: the pool does not scale down."),
		amplification: d("retry_amplification", "Retry amplification: rate ÷ uniqueRateQuery's unique rate (absent without a unique rate; alert above 1.5)."),
		retryCapped:   d("retry_capped", "1 when the amplification exceeded retryBudget and the load was sized on unique rate × retryBudget."),
		signal:        d("signal_value", "Signal value used by the decision (last good value when held).", "signal"),
		signalStatus:  d("signal_status", "1 for the signal's status (fresh, zero, held, out, never).", "signal", "status"),
		info:          d("decision_info", "1, labelled with what decided the number: the demand term and the shaping limit (empty: none); the reason text is in the logs.", "term", "limit"),
		noData:        d("no_data", "1 when the last evaluation had no usable signal (RPCs answer Unavailable)."),
		triggers:      agg("triggers", "Registered ScaledObject triggers."),
		nActive:       agg("triggers_active", "Triggers whose IsActive answer is true."),
		nDegraded:     agg("triggers_degraded", "Triggers whose decision is degraded (a once-valid signal out past staleAfter, or a unique rate refused as implausible)."),
		nNoData:       agg("triggers_no_data", "Triggers with no usable signal (RPCs answer Unavailable)."),
		exported:      agg("object_metrics", "1 when this scrape carries per-ScaledObject series; 0 when --object-metrics is off or more than --object-metrics-max-triggers triggers are registered."),
	}
}

func (c *decisionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.desired, c.raw, c.active, c.degraded, c.ready, c.term, c.signal, c.signalStatus, c.info, c.noData,
		c.triggers, c.nActive, c.nDegraded, c.nNoData, c.exported,
		c.lambdaH, c.load, c.service, c.dispersion, c.horizon, c.pWait, c.saturated, c.amplification, c.retryCapped} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *decisionCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.s.Triggers()
	perObject := c.perObject && (c.maxTriggers == 0 || n <= c.maxTriggers)
	var active, degraded, noData int
	c.s.eachTrigger(func(tr *trigger, rec decision.Recommendation) {
		switch {
		case rec.Err != nil: // IsActive answers Unavailable
			noData++
		case rec.Active:
			active++
		}
		if rec.Degraded {
			degraded++
		}
		if perObject {
			c.collectTrigger(ch, tr, rec)
		}
	})
	for _, a := range []struct {
		d *prometheus.Desc
		v float64
	}{{c.triggers, float64(n)}, {c.nActive, float64(active)}, {c.nDegraded, float64(degraded)}, {c.nNoData, float64(noData)}, {c.exported, b2f(perObject)}} {
		ch <- prometheus.MustNewConstMetric(a.d, prometheus.GaugeValue, a.v)
	}
}

// collectTrigger sends one trigger's series.
func (c *decisionCollector) collectTrigger(ch chan<- prometheus.Metric, tr *trigger, rec decision.Recommendation) {
	l := []string{tr.namespace, tr.name, tr.metric}
	g := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(l[:3:3], extra...)...)
	}
	g(c.noData, b2f(rec.Err != nil))
	g(c.desired, float64(rec.Replicas))
	g(c.active, b2f(rec.Active))
	g(c.degraded, b2f(rec.Degraded))
	if rec.Ready >= 0 {
		g(c.ready, float64(rec.Ready))
	}
	for _, s := range decision.AllSignals() {
		st := rec.Status[s]
		if st == "" || st == decision.StatusUnconfigured {
			continue
		}
		g(c.signalStatus, 1, s.String(), string(st))
		if st.Usable() {
			g(c.signal, rec.Values[s], s.String())
		}
	}
	if rec.Err != nil {
		return
	}
	g(c.raw, float64(rec.Raw))
	for _, t := range []struct {
		name string
		v    int32
	}{{"slo", rec.NSLO}, {"drain", rec.NDrain}, {"cap", rec.NCap}, {"occupancy", rec.NOcc}, {"activity", rec.NAct}, {"warm", rec.Warm}, {"demand", rec.Demand}} {
		if t.v >= 0 {
			g(c.term, float64(t.v), t.name)
		}
	}
	for _, v := range []struct {
		d *prometheus.Desc
		v float64
	}{{c.lambdaH, rec.LambdaH}, {c.load, rec.Load}, {c.pWait, rec.PWait}, {c.amplification, rec.Amplification}} {
		if v.v >= 0 && !math.IsInf(v.v, 0) {
			g(v.d, v.v)
		}
	}
	if rec.ServiceSource != "" && !math.IsInf(rec.ServiceTime, 0) {
		g(c.service, rec.ServiceTime, rec.ServiceSource)
	}
	if !math.IsInf(rec.Dispersion, 0) {
		g(c.dispersion, rec.Dispersion)
	}
	g(c.horizon, rec.Horizon.Seconds(), rec.HorizonSource)
	g(c.saturated, b2f(rec.Saturated))
	if rec.Amplification >= 0 {
		g(c.retryCapped, b2f(rec.RetryCapped))
	}
	g(c.info, 1, string(rec.Term), string(rec.Limit))
}

// rpcMetrics counts RPCs by method and gRPC code.
type rpcMetrics struct{ total *prometheus.CounterVec }

func newRPCMetrics(reg prometheus.Registerer) (*rpcMetrics, error) {
	m := &rpcMetrics{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "inferscale_scaler_rpcs_total",
		Help: "gRPC calls handled, by method and status code.",
	}, []string{"method", "code"})}
	if err := reg.Register(m.total); err != nil {
		return nil, err
	}
	return m, nil
}

func shortMethod(full string) string { return full[strings.LastIndexByte(full, '/')+1:] }

func (m *rpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	m.total.WithLabelValues(shortMethod(info.FullMethod), status.Code(err).String()).Inc()
	return resp, err
}

func (m *rpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	m.total.WithLabelValues(shortMethod(info.FullMethod), status.Code(err).String()).Inc()
	return err
}
