package decision

import (
	"testing"
	"time"
)

// BenchmarkRecommend is the pure decision alone, with a full 5-minute history.
func BenchmarkRecommend(b *testing.B) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress, p.ReplicaThroughput, p.WarmReplicas = EngineTriton, "m", "http://p:9090", 12, 1
	var st State
	for i := range 60 {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		var o Observation
		o.Samples[SignalQueue] = val(float64(i%40), now)
		o.Samples[SignalRate] = val(float64(i%90), now)
		o.Samples[SignalActivity] = val(0.4, now)
		o.ReadyReplicas, o.ReadyKnown = 3, true
		_, st = Recommend(p, o, st, now)
	}
	now := t0.Add(300 * time.Second)
	var o Observation
	o.Samples[SignalQueue] = val(12, now)
	o.Samples[SignalRate] = val(40, now)
	o.Samples[SignalActivity] = val(0.4, now)
	o.ReadyReplicas, o.ReadyKnown = 3, true
	b.ReportAllocs()
	for b.Loop() {
		Recommend(p, o, st, now)
	}
}
