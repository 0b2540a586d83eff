package decision

import (
	"math"
	"strconv"
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

// A unique rate so small that rate ÷ unique rate passes MaxAmplification (30 ÷ 0.01 = 3,000;
// 30 ÷ 1e-308 overflows to +Inf) is not a measured amplification: capped, the pool was sized on
// unique × retryBudget, one replica, while the metrics and the storm note read "∞ (no unique
// requests)". It counts as a missing unique rate: no amplification (-1, not exported), no cap,
// sized as without a unique rate, degraded, and the reason says why. At the bound it caps.
func TestRetryCapAmplificationOverflowNeverCaps(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.ReplicaThroughput = "r", 1
	var o Observation
	o.Samples[SignalRate] = val(30, t0)
	plain, _ := Recommend(p, o, State{}, t0)

	p.UniqueRateQuery = "u"
	for _, c := range []struct {
		unique float64
		ratio  string
	}{{1e-308, "+Inf"}, {1e-9, "3e+10"}, {0.01, "3000"}} {
		o.Samples[SignalUniqueRate] = val(c.unique, t0)
		rec, _ := Recommend(p, o, State{}, t0)
		if rec.RetryCapped || rec.Amplification != -1 || !rec.Degraded {
			t.Errorf("unique %g, rate 30: capped %v amplification %v degraded %v, want uncapped, -1 (not computed), degraded",
				c.unique, rec.RetryCapped, rec.Amplification, rec.Degraded)
		}
		if rec.Replicas != plain.Replicas || rec.Replicas < 30 {
			t.Errorf("unique %g: %d replicas, want %d as without a unique rate (30/s at 1 s each), not 1", c.unique, rec.Replicas, plain.Replicas)
		}
		want := "uniqueRate=" + strconv.FormatFloat(c.unique, 'g', 4, 64) + " refused: rate ÷ unique rate = " + c.ratio + ", above 1000 (decision.MaxAmplification)"
		if !strings.Contains(rec.Reason, want) || strings.Contains(rec.Reason, "out past staleAfter") {
			t.Errorf("reason %q, want it to contain %q and no signal out", rec.Reason, want)
		}
	}
	// At the bound it caps: 30 ÷ 0.03 = 1,000, sized on 0.03 × 1.2.
	o.Samples[SignalUniqueRate] = val(0.03, t0)
	if rec, _ := Recommend(p, o, State{}, t0); !rec.RetryCapped || math.Abs(rec.Amplification-1000) > 1e-9 || rec.Degraded || rec.Replicas >= plain.Replicas {
		t.Errorf("unique 0.03: capped %v amplification %v degraded %v replicas %d, want capped at 1000, not degraded, fewer than %d",
			rec.RetryCapped, rec.Amplification, rec.Degraded, rec.Replicas, plain.Replicas)
	}
}
