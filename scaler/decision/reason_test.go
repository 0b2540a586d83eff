package decision

import (
	"errors"
	"math"
	"testing"
	"time"
)

// The reason is what an operator reads in the scaler's log, its events and
// KEDA's: each clause below is checked whole, with values computed apart
// from the code.

// TestReasonRetryCapped: λ 30/s of which 10/s unique, retryBudget 1.5, so λ_H
// = 15/s; S = 0.5 s measured, k = 2: a = 7.5 Erlangs. T = 2.5 s, q = 0.995:
// 8 servers give P(wait > T) = C(8, 7.5)·e^(−0.5·2.5/0.5) = 0.80725·0.082085 =
// 0.0663 > 0.005, 10 servers (5 replicas) give 0.306611·e^(−12.5) =
// 1.1426e-06 (Erlang C from the Erlang B recurrence, computed apart in
// float64). N_drain = ⌈7.5/2⌉ = 4 with no backlog.
func TestReasonRetryCapped(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.UniqueRateQuery, p.ServiceTimeQuery, p.QueueQuery, p.DispersionQuery = "r", "u", "s", "q", "i"
	p.SLOWaitSeconds, p.SLOQuantile, p.RetryBudget, p.ReplicaConcurrency = 2.5, 0.995, 1.5, 2
	p.MaxReplicas = 10
	var o Observation
	o.Samples[SignalRate], o.Samples[SignalUniqueRate] = val(30, t0), val(10, t0)
	o.Samples[SignalServiceTime], o.Samples[SignalQueue] = val(0.5, t0), val(0, t0)
	o.ReadyReplicas, o.ReadyKnown = 3, true
	rec, _ := Recommend(p, o, State{}, t0)
	const want = "replicas 5; raw 5 = clamp(demand 5 [slo] + warm 0, 0, 10); " +
		"predicted P(wait > 2.5s) = 1.14e-06 at 5 replicas (target ≤ 0.005); " +
		"terms slo=5 drain=4 cap=-1 occupancy=-1 activity=-1; " +
		"load 7.5 Erlangs, λ_H=15/s over H=1m0s (default), S=0.5s (measured), k=2, I=1; " +
		"queue=0 fresh, rate=30 fresh, serviceTime=0.5 fresh, dispersion never, uniqueRate=10 fresh, R=3; " +
		"retry-capped: amplification 3 > retryBudget 1.5, load sized on unique rate × 1.5; " +
		"left out (never valid): dispersion; active: rate 30 > 0, first down-window after first sight"
	if rec.Reason != want {
		t.Errorf("reason\n got %s\nwant %s", rec.Reason, want)
	}
	if math.Abs(rec.PWait-1.142633601899544e-06) > 1e-15 || rec.LambdaH != 15 || rec.Load != 7.5 || rec.Demand != 5 || rec.Warm != 0 {
		t.Errorf("PWait %v λ_H %v load %v demand %d warm %d, want 1.1426336019e-06, 15, 7.5, 5, 0", rec.PWait, rec.LambdaH, rec.Load, rec.Demand, rec.Warm)
	}
}

// TestReasonOccupancyHeldThenOut: with no service time the pool is sized by
// occupancy, ⌈(queue + running)/k⌉, and the reason has no load, λ_H, S or
// predicted-wait clause. A signal that fails is held (its last good value,
// "held") within staleAfter, then out: degraded, named, and the answer is held
// at the last good one.
func TestReasonOccupancyHeldThenOut(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.QueueQuery, p.RunningQuery = "q", "run"
	p.ReplicaConcurrency, p.MaxReplicas, p.StaleAfter = 2, 6, 30*time.Second
	p.ScaleDownMaxFraction, p.ScaleDownWindow = 1, 0 // nothing but the degraded floor holds the answer
	obs := func(at time.Time, running Sample) Observation {
		var o Observation
		o.Samples[SignalQueue], o.Samples[SignalRunning] = val(9, at), running
		o.ReadyReplicas, o.ReadyKnown = 3, true
		return o
	}
	failed := func(at time.Time) Sample {
		return Sample{Err: errors.New("context deadline exceeded"), EvaluatedAt: at}
	}
	steps := []struct {
		at      time.Duration
		running Sample
		want    string
	}{
		{0, val(4, t0), "replicas 6 (max); raw 6 = clamp(demand 7 [occupancy] + warm 0, 0, 6); " +
			"terms slo=-1 drain=-1 cap=-1 occupancy=7 activity=-1, k=2, I=1; queue=9 fresh, running=4 fresh, R=3; " +
			"active: queue 9 > 0, running 4 > 0"},
		{20 * time.Second, failed(t0.Add(20 * time.Second)), "replicas 6 (max); raw 6 = clamp(demand 7 [occupancy] + warm 0, 0, 6); " +
			"terms slo=-1 drain=-1 cap=-1 occupancy=7 activity=-1, k=2, I=1; queue=9 fresh, running=4 held, R=3; " +
			"active: queue 9 > 0, running 4 > 0"},
		{40 * time.Second, failed(t0.Add(40 * time.Second)), "replicas 6 (degraded-floor); raw 5 = clamp(demand 5 [occupancy] + warm 0, 0, 6); " +
			"terms slo=-1 drain=-1 cap=-1 occupancy=5 activity=-1, k=2, I=1; queue=9 fresh, running out, R=3; " +
			"degraded: running out past staleAfter 30s; active: queue 9 > 0, degraded, was active"},
	}
	var st State
	for _, s := range steps {
		now := t0.Add(s.at)
		var rec Recommendation
		rec, st = Recommend(p, obs(now, s.running), st, now)
		if rec.Reason != s.want {
			t.Errorf("t0+%v reason\n got %s\nwant %s", s.at, rec.Reason, s.want)
		}
		if rec.Load != -1 || rec.LambdaH != -1 || rec.PWait != -1 || rec.ServiceSource != "" {
			t.Errorf("t0+%v: load %v λ_H %v PWait %v S from %q, want -1, -1, -1 and none (no service time)", s.at, rec.Load, rec.LambdaH, rec.PWait, rec.ServiceSource)
		}
	}
}

// TestNoDataReason: every signal out leaves no demand term; the error and the
// reason name the signal and staleAfter, the previous answer stands, and the
// terms that were not computed read -1, not 0 or 1.
func TestNoDataReason(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.ReplicaThroughput, p.StaleAfter = "r", 1, 30*time.Second
	var o Observation
	o.Samples[SignalRate] = val(7, t0)
	first, st := Recommend(p, o, State{}, t0)
	if first.Replicas != 9 {
		t.Fatalf("replicas %d, want 9 (%s)", first.Replicas, first.Reason)
	}
	now := t0.Add(40 * time.Second)
	o.Samples[SignalRate] = Sample{Err: errors.New("connection refused"), EvaluatedAt: now}
	rec, _ := Recommend(p, o, st, now)
	if !errors.Is(rec.Err, ErrNoData) {
		t.Fatalf("Err %v, want ErrNoData", rec.Err)
	}
	const want = "no usable signal: rate out; out past staleAfter 30s: rate"
	if rec.Reason != want || rec.Replicas != 9 {
		t.Errorf("replicas %d reason %q, want 9 and %q", rec.Replicas, rec.Reason, want)
	}
	if rec.Warm != -1 || rec.Demand != -1 || rec.LambdaH != -1 || rec.Load != -1 || rec.NSLO != -1 || rec.Amplification != -1 {
		t.Errorf("warm %d demand %d λ_H %v load %v N_slo %d amplification %v, want all -1 (not computed)",
			rec.Warm, rec.Demand, rec.LambdaH, rec.Load, rec.NSLO, rec.Amplification)
	}
}
