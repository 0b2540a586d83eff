package prom

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// The Triton running preset against a real Prometheus, on 13 minutes of Triton's counters
// and pending gauge and the residency front's forwarding request-seconds. Every pool but
// "fresh" completes 4 requests a second of 1 s service (and 0.5 s queued) throughout, so the
// busy rate (Little's law on the last minute's completions) reads 4 requests in service; over
// the last minute:
//   - "step": the load has risen: the front's request-seconds grow by 24 a second for 45 s
//     and then 8 a second (20 forwarded and unanswered on average over the minute), while
//     Triton's pending count reads 6, 12, 12, 0, 0 at the minute's scrapes (6 on average), so
//     14 execute on average, which no completion has yet shown: running 14. A reading of the
//     last instant instead of the minute (irate, the pending count now) would give 8;
//   - "stream": the front forwards nothing it counts (gRPC streams), Triton has 2 pending:
//     the difference is clamped at 0 and the busy rate, 4, is taken;
//   - "falling": 1 forwarded, none pending: the busy rate, 4, is the larger;
//   - "nofront": Triton without the sidecar (no forwarding series): the busy rate, 4;
//   - "fresh": a model just loaded, whose duration counters Triton has not exported yet (no
//     busy rate), with 3 forwarded: 3.
//
// Each value is checked against max(executing, busy), each side evaluated by Prometheus from
// the preset's own parts, which tests the comparison, both `or`s and the label matching; the
// scenario's 4, 14 and 3 are checked too.
func TestTritonRunningPresetAgainstPrometheus(t *testing.T) {
	at, times := backfillTimes(13*time.Minute, 15*time.Second)
	lastMinute := func(i int) bool { return !times[i].Before(at.Add(-time.Minute)) }
	// The step's shape inside the last minute, by sample (the last is at): request-seconds per
	// second forwarded since the previous sample, and Triton's pending count. The first value
	// is at at − 1m: a window closed on the left (Prometheus 2) averages 5 pending samples, one
	// open on the left (Prometheus 3) 4, and both read 6.
	stepForwarding := []float64{20, 24, 24, 24, 8}
	stepPending := []float64{6, 12, 12, 0, 0}
	inMinute := func(i int) int { return i - (len(times) - 5) }
	// Over the last minute: request-seconds per second forwarded by the front (-1: no series),
	// Triton's pending count, and whether Triton exports its duration counters.
	type pool struct {
		forwarding, pending float64
		durations           bool
	}
	pools := map[string]pool{
		"step": {20, 6, true}, "stream": {0, 2, true}, "falling": {1, 0, true},
		"nofront": {-1, 0, true}, "fresh": {3, 0, false},
	}
	models := []string{"step", "stream", "falling", "nofront", "fresh"}
	e := &timedExporter{times: times}
	series := func(perSecond func(i int) float64, counter bool) []float64 {
		v := make([]float64, len(times))
		acc := 1000.0 // counters long past zero
		for i := range v {
			if !counter {
				v[i] = perSecond(i)
				continue
			}
			if i > 0 {
				acc += perSecond(i) * 15 // the growth from the previous sample, 15 s before
			}
			v[i] = acc
		}
		return v
	}
	steady := func(x float64) func(int) float64 { return func(int) float64 { return x } }
	for _, c := range []struct {
		name    string
		perSecS float64
	}{{"nv_inference_request_success", 4}, {"nv_inference_request_duration_us", 4 * 1.5e6}, {"nv_inference_queue_duration_us", 4 * 0.5e6}} {
		for _, m := range models {
			if pools[m].durations {
				e.add(c.name, "counter", m, series(steady(c.perSecS), true))
			}
		}
	}
	// shape is a value per sample: before ahead of the last minute; inside it, the step's
	// values for "step" and the pool's own for the others.
	shape := func(m string, before float64, step []float64, own float64) func(int) float64 {
		return func(i int) float64 {
			switch {
			case !lastMinute(i):
				return before
			case m == "step":
				return step[inMinute(i)]
			}
			return own
		}
	}
	for _, m := range models {
		e.add("nv_inference_pending_request_count", "gauge", m, series(shape(m, 0, stepPending, pools[m].pending), false))
	}
	for _, m := range models {
		if f := pools[m].forwarding; f >= 0 {
			e.add("inferscale_front_forwarding_seconds_total", "counter", m, series(shape(m, 4, stepForwarding, f), true))
		}
	}
	srv := e.prometheus(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitBackfilled(ctx, t, srv, `inferscale_front_forwarding_seconds_total{model="fresh"}`, at, len(times))
	waitBackfilled(ctx, t, srv, `nv_inference_queue_duration_us{model="nofront"}`, at, len(times))

	eval := evalModel(ctx, t, srv)
	q, err := PresetQuery(EngineTriton, KindRunning, testLabels)
	if err != nil {
		t.Fatal(err)
	}
	p, by := Presets[EngineTriton], "namespace, model"
	busyQ := busy(p, by, "1m")
	executingQ := fmt.Sprintf("clamp_min(sum by (%s) (rate(%s[1m])) - sum by (%s) (avg_over_time(%s[1m])), 0)", by, p.ForwardingSeconds, by, p.QueueMetric)
	for _, m := range models {
		want := math.Inf(-1)
		if pools[m].durations {
			b := eval(busyQ, m, at)
			if math.Abs(b-4) > 1e-9 {
				t.Fatalf("%s: busy rate = %v, want 4 (the scenario)", m, b)
			}
			want = b
		}
		if f := pools[m].forwarding; f >= 0 {
			x := eval(executingQ, m, at)
			// The step's counter grows unevenly inside the minute, and Prometheus 3's rate over
			// a window open on the left extrapolates 45 s of it (840 ÷ 45 s: 18.7, so X 12.7)
			// where Prometheus 2 reads the whole minute (20, X 14).
			if wantX := max(0, f-pools[m].pending); math.Abs(x-wantX) > 1e-9 && (m != "step" || x < 12.5 || x > 14+1e-9) {
				t.Fatalf("%s: executing = %v, want %v (the scenario)", m, x, wantX)
			}
			want = max(want, x)
		}
		if got := eval(q, m, at); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: preset running = %v, want %v", m, got, want)
		}
	}
	if got := eval(q, "step", at); got < 12.5 || got > 14+1e-9 {
		t.Errorf("step: running = %v, want the minute's 20 forwarded − 6 pending = 14 (12.7 on Prometheus 3), not the lagging busy rate (4) nor the last instant (8)", got)
	}
	if got := eval(q, "fresh", at); math.Abs(got-3) > 1e-9 {
		t.Errorf("fresh: running = %v, want 3 (no busy rate yet)", got)
	}
}
