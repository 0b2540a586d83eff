package decision

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestForecastThroughRecommend: the rate history Recommend keeps between
// calls is what λ_H extrapolates. A rate rising 0.1/s, polled every 15 s:
// at t = 60 s the five fresh points lie on a line (slope 0.1, no residual, so
// no prediction-bound term), and λ_H = λ + H·b = 16 + 60·0.1 = 22. A held
// rate (its query failing within staleAfter) is not a new point: λ_H is the
// held λ, and the history is unchanged. A sample not newer than the last
// point (a poll that has not refreshed) is not added twice.
func TestForecastThroughRecommend(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.ReplicaThroughput, p.MaxReplicas = "r", 1, 100
	obs := func(s Sample) Observation {
		var o Observation
		o.Samples[SignalRate] = s
		return o
	}
	var st State
	var rec Recommendation
	for i := range 5 {
		at := t0.Add(time.Duration(i) * 15 * time.Second)
		rec, st = Recommend(p, obs(val(10+0.1*float64(15*i), at)), st, at)
	}
	if math.Abs(rec.LambdaH-22) > 1e-9 || len(st.Rates) != 5 {
		t.Fatalf("λ_H %.12g from %d points, want 16 + 60·0.1 = 22 from 5 (%s)", rec.LambdaH, len(st.Rates), rec.Reason)
	}
	// N_slo at a = 22 Erlangs (S = 1 s), not at the current 16.
	if rec.Load != rec.LambdaH {
		t.Errorf("load %v, want λ_H·S = %v", rec.Load, rec.LambdaH)
	}

	again := t0.Add(65 * time.Second) // the same sample, read again 5 s later
	rec2, st2 := Recommend(p, obs(val(16, t0.Add(60*time.Second))), st, again)
	if len(st2.Rates) != 5 || math.Abs(rec2.LambdaH-22) > 1e-9 {
		t.Errorf("a repeated sample: %d points, λ_H %.12g; want 5 points and 22", len(st2.Rates), rec2.LambdaH)
	}

	held := t0.Add(75 * time.Second)
	rec, st = Recommend(p, obs(Sample{Err: errors.New("timeout"), EvaluatedAt: held}), st, held)
	if rec.Status[SignalRate] != StatusHeld || rec.LambdaH != 16 || len(st.Rates) != 5 {
		t.Errorf("held: status %q λ_H %v, %d points; want held, λ_H = the held 16, 5 points (%s)", rec.Status[SignalRate], rec.LambdaH, len(st.Rates), rec.Reason)
	}
}

// TestRateHistoryWindow: the history covers forecastWindow(H) = max(2H, 2 min)
// before now (a point exactly at its start is out) and at most maxRatePoints
// points, the newest kept.
func TestRateHistoryWindow(t *testing.T) {
	run := func(h, every, span time.Duration) State {
		p := DefaultPolicy()
		p.PrometheusAddress = "http://p:9090"
		p.RateQuery, p.ReplicaThroughput, p.ColdStart, p.MaxReplicas = "r", 1, h, 100
		var st State
		for at := time.Duration(0); at <= span; at += every {
			now := t0.Add(at)
			var o Observation
			o.Samples[SignalRate] = val(5, now)
			_, st = Recommend(p, o, st, now)
		}
		return st
	}
	tests := []struct {
		name              string
		h, every, span    time.Duration
		wantN             int
		wantOldestAgoSecs int64
	}{
		{"H 5 min: 10 min of 15 s polls", 5 * time.Minute, 15 * time.Second, 15 * time.Minute, 40, 585},
		{"H 30 s: the 2 min floor", 30 * time.Second, 15 * time.Second, 15 * time.Minute, 8, 105},
		{"1 s polls: at most 128 points", 5 * time.Minute, time.Second, 200 * time.Second, maxRatePoints, maxRatePoints - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := run(tt.h, tt.every, tt.span)
			if len(st.Rates) != tt.wantN {
				t.Fatalf("%d points, want %d", len(st.Rates), tt.wantN)
			}
			end := t0.Add(tt.span).UnixNano()
			if ago := (end - st.Rates[0].AtUnixNano) / 1e9; ago != tt.wantOldestAgoSecs {
				t.Errorf("oldest point %d s before now, want %d", ago, tt.wantOldestAgoSecs)
			}
			if st.Rates[len(st.Rates)-1].AtUnixNano != end {
				t.Errorf("newest point not the current sample")
			}
		})
	}
}

// TestSLOBounds: sloQuantile's range [0.5, 0.9999] is closed; a Policy not
// built by ParseMetadata with T ≤ 0 takes T = 2 s. a = 7 Erlangs (λ 7/s,
// S 1 s), T 2 s (Erlang C computed apart): q = 0.5 needs 8 servers (P 0.0860),
// q = 0.99 9 (0.00705), q = 0.9999 11 (4.06e-05).
func TestSLOBounds(t *testing.T) {
	tests := []struct {
		t, q float64
		want int32
	}{
		{2, 0.5, 8}, {2, 0.9999, 11}, {2, 0.99, 9}, {0, 0.99, 9}, {math.Inf(1), 0.99, 9}, {2, 0.49, 9}, {2, 1, 9},
	}
	for _, tt := range tests {
		p := DefaultPolicy()
		p.PrometheusAddress = "http://p:9090"
		p.RateQuery, p.ReplicaThroughput, p.SLOWaitSeconds, p.SLOQuantile = "r", 1, tt.t, tt.q
		var o Observation
		o.Samples[SignalRate] = val(7, t0)
		if rec, _ := Recommend(p, o, State{}, t0); rec.NSLO != tt.want {
			t.Errorf("T %v q %v: N_slo %d, want %d (%s)", tt.t, tt.q, rec.NSLO, tt.want, rec.Reason)
		}
	}
}

// TestIdleAmplification: with no requests (rate 0) there is no amplification
// to report, whatever the unique rate reads: not 0, and not +Inf for 0 ÷ 0.
func TestIdleAmplification(t *testing.T) {
	p := DefaultPolicy()
	p.PrometheusAddress = "http://p:9090"
	p.RateQuery, p.UniqueRateQuery, p.ReplicaThroughput = "r", "u", 1
	for _, unique := range []float64{0, 5} {
		var o Observation
		o.Samples[SignalRate], o.Samples[SignalUniqueRate] = val(0, t0), val(unique, t0)
		rec, _ := Recommend(p, o, State{}, t0)
		if rec.Amplification != -1 || rec.RetryCapped || rec.Degraded {
			t.Errorf("rate 0, unique %v: amplification %v capped %v degraded %v, want -1, false, false (%s)",
				unique, rec.Amplification, rec.RetryCapped, rec.Degraded, rec.Reason)
		}
	}
}
