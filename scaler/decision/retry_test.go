package decision

import (
	"math"
	"strings"
	"testing"
)

// A unique rate that reads 0 while retries still arrive (a gateway counter in
// zeroWhenAbsent at idle, or its rate() window behind the backend's) never caps the
// pool: 0 × retryBudget would size a loaded pool to nothing. The amplification reads +Inf
// (not exported) and the pool is sized on the rate and the queue as without a unique rate.
func TestRetryCapZeroUniqueNeverCapsToZero(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.QueueQuery, p.ReplicaThroughput = "r", "q", 1
	var o Observation
	o.Samples[SignalRate], o.Samples[SignalQueue] = val(30, t0), val(500, t0)
	o.ReadyReplicas, o.ReadyKnown = 20, true
	plain, _ := Recommend(p, o, State{}, t0)

	p.UniqueRateQuery = "u"
	o.Samples[SignalUniqueRate] = val(0, t0)
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.RetryCapped || !math.IsInf(rec.Amplification, 1) {
		t.Errorf("unique 0, rate 30: capped %v amplification %v, want uncapped, +Inf", rec.RetryCapped, rec.Amplification)
	}
	if rec.Raw != plain.Raw || rec.Demand != plain.Demand || rec.Raw == 0 {
		t.Errorf("unique 0: raw %d demand %d, want those without a unique rate (%d, %d), never 0 with 500 queued",
			rec.Raw, rec.Demand, plain.Raw, plain.Demand)
	}
	// A positive unique rate still caps: 30/s of 10/s unique with 500 queued.
	o.Samples[SignalUniqueRate] = val(10, t0)
	capped, _ := Recommend(p, o, State{}, t0)
	if !capped.RetryCapped || capped.Amplification != 3 || capped.Raw >= plain.Raw {
		t.Errorf("unique 10: capped %v amplification %v raw %d, want capped, 3, below %d", capped.RetryCapped, capped.Amplification, capped.Raw, plain.Raw)
	}
}

// A unique rate so small that rate ÷ unique rate overflows (30 ÷ 1e-308 = +Inf) is not a
// measured amplification: capped, the pool was sized on 1e-308 × retryBudget, one replica,
// while the metrics and the storm note read "∞ (no unique requests)". It counts as a missing
// unique rate: no amplification (-1, not exported), no cap, sized as without a unique rate,
// degraded, and the reason says why.
func TestRetryCapAmplificationOverflowNeverCaps(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.ReplicaThroughput = "r", 1
	var o Observation
	o.Samples[SignalRate] = val(30, t0)
	plain, _ := Recommend(p, o, State{}, t0)

	p.UniqueRateQuery = "u"
	o.Samples[SignalUniqueRate] = val(1e-308, t0)
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.RetryCapped || rec.Amplification != -1 || !rec.Degraded {
		t.Errorf("unique 1e-308, rate 30: capped %v amplification %v degraded %v, want uncapped, -1 (not computed), degraded",
			rec.RetryCapped, rec.Amplification, rec.Degraded)
	}
	if rec.Replicas != plain.Replicas || rec.Replicas < 30 {
		t.Errorf("unique 1e-308: %d replicas, want %d as without a unique rate (30/s at 1 s each), not 1", rec.Replicas, plain.Replicas)
	}
	if want := "uniqueRate=1e-308 refused: rate ÷ unique rate overflows float64; not capped, as without a unique rate"; !strings.Contains(rec.Reason, want) ||
		strings.Contains(rec.Reason, "out past staleAfter") {
		t.Errorf("reason %q, want it to contain %q and no signal out", rec.Reason, want)
	}
	// A unique rate at which the ratio fits still caps.
	o.Samples[SignalUniqueRate] = val(1e-306, t0)
	if rec, _ := Recommend(p, o, State{}, t0); !rec.RetryCapped || rec.Amplification != 30/1e-306 || rec.Degraded {
		t.Errorf("unique 1e-306: capped %v amplification %v degraded %v, want capped, 3e307, not degraded", rec.RetryCapped, rec.Amplification, rec.Degraded)
	}
}
