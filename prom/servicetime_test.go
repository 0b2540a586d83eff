package prom

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// The service-time preset against a real Prometheus, on 13 minutes of Triton counters:
//   - "lone": one completion a second of 1 s service (and 0.5 s queued) for 12 minutes, then
//     one request of 24 s service alone in the last minute. The last minute's ratio reads
//     24 s; the preset weighs it as ServiceTimePriorCompletions' doc says, (24·f + 4·S₁₀) ÷
//     (f + 4), with f the one completion as rate() extrapolates it (about 1): near 5.7 s;
//   - "quiet": the same steady 12 minutes, then a minute with no completion: the 10-minute
//     mean, 1 s;
//   - "idle": no completion in 13 minutes: NaN, which the poller reads as an invalid sample.
//
// The exact value is checked against the same formula computed from Prometheus's own
// 1-minute and 10-minute rates, which tests the query's arithmetic and label matching;
// rate()'s extrapolation is Prometheus's.
func TestServiceTimePresetAgainstPrometheus(t *testing.T) {
	at, times := backfillTimes(13*time.Minute, 15*time.Second) // one sample per scrape: 53 scrapes of a second
	base := times[0]
	td := &timedExporter{times: times}
	success, requestUS, queueUS := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	lone := at.Add(-30 * time.Second)
	for _, m := range []string{"lone", "quiet", "idle"} {
		var n, req, queue float64
		for _, ts := range times {
			switch {
			case m == "idle":
			case ts.Before(at.Add(-time.Minute)) || ts.Equal(at.Add(-time.Minute)):
				if ts.After(base) {
					n, req, queue = n+15, req+15*1.5e6, queue+15*0.5e6
				}
			case m == "lone" && ts.Equal(lone):
				n, req, queue = n+1, req+24.5e6, queue+0.5e6
			}
			success[m] = append(success[m], n+1000) // counters long past zero
			requestUS[m] = append(requestUS[m], req+1e9)
			queueUS[m] = append(queueUS[m], queue+1e8)
		}
	}
	for _, c := range []struct {
		name string
		v    map[string][]float64
	}{{"nv_inference_request_success", success}, {"nv_inference_request_duration_us", requestUS}, {"nv_inference_queue_duration_us", queueUS}} {
		for _, m := range []string{"lone", "quiet", "idle"} {
			td.add(c.name, "counter", m, c.v[m])
		}
	}
	srv := td.prometheus(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitBackfilled(ctx, t, srv, `nv_inference_queue_duration_us{model="idle"}`, at, len(times))

	evalAt := evalModel(ctx, t, srv)
	eval := func(query, m string) float64 { t.Helper(); return evalAt(query, m, at) }
	q, err := PresetQuery(EngineTriton, KindServiceTime, testLabels)
	if err != nil {
		t.Fatal(err)
	}
	p := Presets[EngineTriton]
	by := "namespace, model"
	b1, b10 := busy(p, by, "1m"), busy(p, by, "10m")
	c1 := fmt.Sprintf("sum by (%s) (rate(%s[1m]))", by, p.Completions)
	c10 := fmt.Sprintf("sum by (%s) (rate(%s[10m]))", by, p.Completions)
	const n0 = ServiceTimePriorCompletions
	want := func(m string) float64 {
		return (60*eval(b1, m) + n0*eval(b10, m)/eval(c10, m)) / (60*eval(c1, m) + n0)
	}

	got := eval(q, "lone")
	if w := want("lone"); math.Abs(got-w) > 1e-9*w {
		t.Errorf("lone: preset S = %v, the formula on Prometheus's rates gives %v", got, w)
	}
	if ratio := eval(b1, "lone") / eval(c1, "lone"); math.Abs(ratio-24) > 1e-6 {
		t.Errorf("lone: the last minute's own ratio = %v, want 24 (the scenario)", ratio)
	}
	if got < 5 || got > 6.5 {
		t.Errorf("lone: S = %.3f s, want about (24 + 4 × 1.04) ÷ 5 = 5.63 s, not the lone 24 s", got)
	}
	quiet := eval(q, "quiet")
	if s10 := eval(b10, "quiet") / eval(c10, "quiet"); math.Abs(quiet-s10) > 1e-9 || math.Abs(s10-1) > 1e-6 {
		t.Errorf("quiet: S = %v, want the 10-minute mean %v = 1 s", quiet, s10)
	}
	if idle := eval(q, "idle"); !math.IsNaN(idle) {
		t.Errorf("idle: S = %v, want NaN (0/0: nothing completed in 10 minutes)", idle)
	}
}
