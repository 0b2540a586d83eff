package prom

import (
	"context"
	"math"
	"testing"
	"time"
)

// The Triton running preset against a real Prometheus, on 13 minutes of Triton's counters
// and pending gauge and the residency front's forwarding gauge. Every pool completes 4
// requests a second of 1 s service (and 0.5 s queued) throughout, so the busy rate (Little's
// law on the last minute's completions) reads 4 requests in service; at the last instant:
//   - "step": the load has just risen: the front has 20 requests forwarded and unanswered,
//     Triton 6 pending, so 14 execute, which no completion has yet shown: running 14;
//   - "stream": the front forwards nothing it counts (ModelStreamInfer streams), Triton has 2
//     pending: forwarding − pending is clamped at 0 and the busy rate, 4, is taken;
//   - "falling": 1 forwarded, none pending: the busy rate, 4, is the larger;
//   - "nofront": Triton without the sidecar (no forwarding series): the busy rate, 4.
//
// Each value is checked against max(max(forwarding − pending, 0), busy) with busy evaluated
// by Prometheus from the preset's own busy-rate query, which tests the comparison, the `or`
// and the label matching; the scenario's busy rate of 4 is checked too.
func TestTritonRunningPresetAgainstPrometheus(t *testing.T) {
	at, times := backfillTimes(13*time.Minute, 15*time.Second)
	last := len(times) - 1
	models := []string{"step", "stream", "falling", "nofront"}
	// At the last instant: requests forwarded by the front (-1: no series) and pending in Triton.
	forwarding := map[string]float64{"step": 20, "stream": 0, "falling": 1, "nofront": -1}
	pending := map[string]float64{"step": 6, "stream": 2, "falling": 0, "nofront": 0}
	e := &timedExporter{times: times}
	counter := func(perStep, offset float64) []float64 {
		v := make([]float64, len(times))
		for i := range v {
			v[i] = offset + perStep*float64(i)
		}
		return v
	}
	for _, m := range models {
		e.add("nv_inference_request_success", "counter", m, counter(60, 1000))
	}
	for _, m := range models {
		e.add("nv_inference_request_duration_us", "counter", m, counter(60*1.5e6, 1e9))
	}
	for _, m := range models {
		e.add("nv_inference_queue_duration_us", "counter", m, counter(60*0.5e6, 1e8))
	}
	gauge := func(final, before float64) []float64 {
		v := make([]float64, len(times))
		for i := range v {
			v[i] = before
		}
		v[last] = final
		return v
	}
	for _, m := range models {
		e.add("nv_inference_pending_request_count", "gauge", m, gauge(pending[m], 0))
	}
	for _, m := range models {
		if forwarding[m] >= 0 {
			e.add("inferscale_front_forwarding_requests", "gauge", m, gauge(forwarding[m], 4))
		}
	}
	srv := e.prometheus(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitBackfilled(ctx, t, srv, `inferscale_front_forwarding_requests{model="falling"}`, at, len(times))
	waitBackfilled(ctx, t, srv, `nv_inference_queue_duration_us{model="nofront"}`, at, len(times))

	eval := evalModel(ctx, t, srv)
	q, err := PresetQuery(EngineTriton, KindRunning, testLabels)
	if err != nil {
		t.Fatal(err)
	}
	b := busy(Presets[EngineTriton], "namespace, model", "1m")
	for _, m := range models {
		busyRate := eval(b, m, at)
		if math.Abs(busyRate-4) > 1e-9 {
			t.Fatalf("%s: busy rate = %v, want 4 (the scenario)", m, busyRate)
		}
		want := busyRate
		if f := forwarding[m]; f >= 0 {
			want = max(max(f-pending[m], 0), busyRate)
		}
		if got := eval(q, m, at); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: preset running = %v, want %v", m, got, want)
		}
	}
	if got := eval(q, "step", at); got != 14 {
		t.Errorf("step: running = %v, want 14 (20 forwarded − 6 pending), not the lagging busy rate", got)
	}
}
