package decision

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// rateReadyPolicy is the trial's trigger: rateQuery vector(10), readyQuery, replicaThroughput 1,
// no Kubernetes, default bounds [0, 100] and a 5-minute down-window.
func rateReadyPolicy() Policy {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://prometheus:9090"
	p.RateQuery, p.ReadyQuery, p.ReplicaThroughput = "vector(10)", "r", 1
	return p
}

// A ready count past MaxReadyReplicas is an invalid sample named in the reason, not a replica
// count: readyQuery vector(1e308) read as 2,147,483,647 ready replicas, seeded the restart
// history and held the pool at maxReplicas 100 for the whole down-window (raw 12).
func TestImplausibleReadyRefused(t *testing.T) {
	p := rateReadyPolicy()
	var o Observation
	o.Samples[SignalRate] = val(10, t0)
	o.Samples[SignalReady] = val(1e308, t0)
	rec, st := Recommend(p, o, State{}, t0)
	if rec.Err != nil {
		t.Fatal(rec.Err)
	}
	if rec.Replicas != 12 || rec.Raw != 12 || rec.Ready != -1 || rec.Status[SignalReady] != StatusNever {
		t.Errorf("replicas %d raw %d ready %d ready status %s, want 12, 12, -1 (unknown), never",
			rec.Replicas, rec.Raw, rec.Ready, rec.Status[SignalReady])
	}
	if st.SeedReplicas > 12 {
		t.Errorf("seed %d, want none above the raw 12", st.SeedReplicas)
	}
	const want = "ready=1e+308 refused: above 1e6 (decision.MaxReadyReplicas): not a replica count"
	if !strings.Contains(rec.Reason, want) {
		t.Errorf("reason %q does not contain %q", rec.Reason, want)
	}
	// One above the bound is refused, the bound itself is a count (clamped to maxReplicas).
	o.Samples[SignalReady] = val(MaxReadyReplicas+1, t0)
	if rec, _ := Recommend(p, o, State{}, t0); rec.Ready != -1 {
		t.Errorf("ready %g: R = %d, want unknown", MaxReadyReplicas+1, rec.Ready)
	}
	o.Samples[SignalReady] = val(MaxReadyReplicas, t0)
	if rec, _ := Recommend(p, o, State{}, t0); rec.Ready != 1000000 {
		t.Errorf("ready %g: R = %d, want 1000000", MaxReadyReplicas, rec.Ready)
	}

	// A held good value stands in, and the refusal is named while it does.
	o.Samples[SignalReady] = val(3, t0)
	_, st = Recommend(p, o, State{}, t0)
	o.Samples[SignalRate] = val(10, t0.Add(5*time.Second))
	o.Samples[SignalReady] = val(1e308, t0.Add(5*time.Second))
	rec, _ = Recommend(p, o, st, t0.Add(5*time.Second))
	if rec.Status[SignalReady] != StatusHeld || rec.Ready != 3 || !strings.Contains(rec.Reason, want) {
		t.Errorf("after a good 3: ready %s R=%d reason %q, want held, 3, naming the refusal", rec.Status[SignalReady], rec.Ready, rec.Reason)
	}
}

// A fractional ready count is rounded to the nearest replica, and the reason shows both.
func TestFractionalReadyRounded(t *testing.T) {
	p := rateReadyPolicy()
	var o Observation
	o.Samples[SignalRate] = val(10, t0)
	o.Samples[SignalReady] = val(2.5, t0)
	rec, _ := Recommend(p, o, State{}, t0)
	if rec.Ready != 3 || rec.Values[SignalReady] != 2.5 {
		t.Fatalf("R = %d, ready value %g; want 3 and 2.5", rec.Ready, rec.Values[SignalReady])
	}
	if !strings.Contains(rec.Reason, "ready=2.5 fresh") || !strings.Contains(rec.Reason, "R=3") {
		t.Errorf("reason %q: want ready=2.5 fresh and R=3", rec.Reason)
	}
}

// Engine activity above 1 is an invalid sample, not clamped to 1: activityQuery vector(1e308)
// with readyQuery vector(2) answered ⌈2·1/0.7⌉ = 3 without a word.
func TestActivityAboveOneRefused(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://prometheus:9090"
	p.ActivityQuery, p.ReadyQuery = "a", "r"
	var o Observation
	o.Samples[SignalReady] = val(2, t0)
	for _, v := range []float64{1e308, 1.5, 100} {
		o.Samples[SignalActivity] = val(v, t0)
		rec, _ := Recommend(p, o, State{}, t0)
		if !errors.Is(rec.Err, ErrNoData) || rec.Status[SignalActivity] != StatusNever || rec.Saturated {
			t.Fatalf("activity %g: err %v, status %s, saturated %v; want ErrNoData, never, false", v, rec.Err, rec.Status[SignalActivity], rec.Saturated)
		}
		if want := "refused: above 1 (decision.MaxActivity): engine activity is a fraction of time in [0, 1]"; !strings.Contains(rec.Err.Error(), want) {
			t.Errorf("activity %g: error %q does not contain %q", v, rec.Err, want)
		}
	}
	// 1 itself (and a mean rounded just past it) is a reading: ⌈2·1/0.7⌉ = 3.
	for _, v := range []float64{1, 1.0000000000000002} {
		o.Samples[SignalActivity] = val(v, t0)
		if rec, _ := Recommend(p, o, State{}, t0); rec.Err != nil || rec.NAct != 3 {
			t.Errorf("activity %v: N_act %d err %v, want 3", v, rec.NAct, rec.Err)
		}
	}
}

// A value read but older than staleAfter, of a signal never measured, is named as stale, not
// only "never": staleAfter 1ns read "queue never" though every query returned a value.
func TestNeverMeasuredStaleNamed(t *testing.T) {
	p := queuePolicy()
	p.StaleAfter = time.Second
	rec, _ := Recommend(p, obsQueue(5, t0), State{}, t0.Add(3*time.Second))
	if !errors.Is(rec.Err, ErrNoData) {
		t.Fatalf("err %v, want ErrNoData", rec.Err)
	}
	if want := "queue stale: its last value was read 3s ago, past staleAfter 1s"; !strings.Contains(rec.Err.Error(), want) {
		t.Errorf("error %q does not contain %q", rec.Err, want)
	}
}

// A query waiting for a slot of its Prometheus address (prom.Result.Waiting) says so in the
// no-data error, rather than only "queue never".
func TestWaitingQueryNamed(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://prometheus:9090"
	p.QueueQuery, p.ReplicaThroughput = "q", 1
	var o Observation
	o.Samples[SignalQueue] = Sample{Waiting: true}
	rec, _ := Recommend(p, o, State{}, t0)
	const want = "queue waiting for a query slot: --query-concurrency queries to its prometheusAddress are in flight"
	if !errors.Is(rec.Err, ErrNoData) || !strings.Contains(rec.Err.Error(), want) {
		t.Errorf("err %v, want ErrNoData containing %q", rec.Err, want)
	}
	o.Samples[SignalQueue] = Sample{}
	if rec, _ := Recommend(p, o, State{}, t0); rec.Err == nil || strings.Contains(rec.Err.Error(), "waiting") {
		t.Errorf("not waiting: err %v, want no-data without 'waiting'", rec.Err)
	}
}
