package decision

import (
	"testing"
	"time"
)

// benchRecommend runs Recommend with a full 5-minute history (60
// evaluations 5 s apart, so the rate history is full too) and then times
// one more decision.
func benchRecommend(b *testing.B, p Policy, obs func(i int, now time.Time) Observation) {
	var st State
	for i := range 60 {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		_, st = Recommend(p, obs(i, now), st, now)
	}
	now := t0.Add(300 * time.Second)
	o := obs(60, now)
	b.ReportAllocs()
	for b.Loop() {
		Recommend(p, o, st, now)
	}
}

// BenchmarkRecommend is the policy of an existing ScaledObject
// (replicaThroughput only, no SLO keys, k = 1) on a small pool: the
// baseline the pooled-queue cases below are reported against.
func BenchmarkRecommend(b *testing.B) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress, p.ReplicaThroughput, p.WarmReplicas = EngineTriton, "m", "http://p:9090", 12, 1
	benchRecommend(b, p, func(i int, now time.Time) Observation {
		var o Observation
		o.Samples[SignalQueue] = val(float64(i%40), now)
		o.Samples[SignalRate] = val(float64(i%90), now)
		o.Samples[SignalActivity] = val(0.4, now)
		o.ReadyReplicas, o.ReadyKnown = 3, true
		return o
	})
}

// BenchmarkRecommendPool1000 is the upper case: a pool of up to
// N·k = 1,000 servers (k = 8, maxReplicas 125) at about 900 Erlangs of
// offered load (λ ≈ 450/s, S = 2 s, dispersion 2, a noisy rising rate), the
// search ending near the bound. Each decision runs the Erlang recurrence
// twice (N_slo and P(wait > T) at the answer).
func BenchmarkRecommendPool1000(b *testing.B) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress = EngineTriton, "m", "http://p:9090"
	p.RunningQuery, p.ServiceTimeQuery, p.DispersionQuery = "run", "s", "i"
	p.ReplicaConcurrency, p.MaxReplicas, p.WarmReplicas = 8, 125, 1
	benchRecommend(b, p, func(i int, now time.Time) Observation {
		var o Observation
		o.Samples[SignalQueue] = val(float64(i%7), now)
		o.Samples[SignalRate] = val(420+float64(i%5)+float64(i)/3, now)
		o.Samples[SignalActivity] = val(0.6, now)
		o.Samples[SignalRunning] = val(800, now)
		o.Samples[SignalServiceTime] = val(2, now)
		o.Samples[SignalDispersion] = val(2, now)
		o.ReadyReplicas, o.ReadyKnown = 110, true
		return o
	})
}
