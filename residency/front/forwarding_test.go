package front_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inferscale/inferscale/internal/promtest"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// tritonMetric reads a Triton metric for the model from tritontest's metrics endpoint, as
// Prometheus would scrape it, summed over versions (a gauge's or a counter's value).
func tritonMetric(t *testing.T, h *harness, name, model string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.triton.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return promtest.ModelValue(t, rec.Body, name, model)
}

// TestForwardingSeconds: inferscale_front_forwarding_seconds_total{model} integrates the
// unary requests forwarded to Triton and not yet answered, those Triton queues included.
// Three requests to a model that executes one at a time for 2 s, sent together: answered
// after about 2, 4 and 6 s, 12 request-seconds; of them Triton counts 2 + 4 = 6 s queued
// (nv_inference_queue_duration_us), and the rest, 3 × 2 s, executing: the difference the
// scaler's Triton preset reads as running (prom.PresetQuery). While the first executes the
// front has 3 forwarded and Triton 2 pending. Triton's clock stands still until all three
// are there, however slowly they arrive, then moves 2 s each 2 s of real time, so the
// request-seconds counted from then on are 12 plus the machine's delays in waking and
// answering (6–9 ms with -race on an idle 2-core machine), which the bounds allow 1.5 s.
func TestForwardingSeconds(t *testing.T) {
	tc := tritontest.DefaultConfig()
	clock := tritontest.NewFakeClock(time.Unix(0, 0))
	tc.Clock = clock
	tc.Models = []tritontest.Model{{Name: "slow", MemoryBytes: 1 << 30, ServiceTime: 2 * time.Second, Concurrency: 1}}
	tc.StartupModels = []string{"slow"}
	h := start(t, tc, testConfig(), false, "slow")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	sent := time.Now()
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		wg.Go(func() {
			if _, err := infer(ctx, h.client, "slow", id, nil); err != nil {
				t.Errorf("infer %s: %v", id, err)
			}
		})
	}
	pending := func() float64 { return tritonMetric(t, h, "nv_inference_pending_request_count", "slow") }
	deadline := time.Now().Add(20 * time.Second)
	for h.front.Forwarding()["slow"] != 3 || pending() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("forwarding %v, Triton pending %v; want 3 and 2 while the first request executes", h.front.Forwarding(), pending())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mid := testutil.ToFloat64(h.m.ForwardingSeconds)
	if limit := 3 * time.Since(sent).Seconds(); mid <= 0 || mid > limit {
		t.Errorf("request-seconds while the first executes = %v, want in (0, %.3f]: three requests forwarded since they were sent", mid, limit)
	}
	for range 3 { // each request executes 2 s of Triton's clock and of real time
		if err := clock.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("waiting for a request to execute: %v", err)
		}
		time.Sleep(2 * time.Second)
		clock.Advance(2 * time.Second)
	}
	wg.Wait()
	total := testutil.ToFloat64(h.m.ForwardingSeconds)
	if d := total - mid; d < 12 || d > 13.5 {
		t.Errorf("request-seconds from the first execution to the three answers = %v − %v = %v, want 2 + 4 + 6 = 12 and at most 1.5 s of delays", total, mid, d)
	}
	queued := tritonMetric(t, h, "nv_inference_queue_duration_us", "slow") / 1e6
	if queued != 6 {
		t.Errorf("Triton's queued seconds = %v, want 2 + 4 on its clock", queued)
	}
	if executing := total - mid - queued; executing < 6 || executing > 7.5 {
		t.Errorf("forwarded − Triton's queued seconds = %v − %v − %v = %v, want 3 × 2 s executing and at most 1.5 s of delays", total, mid, queued, executing)
	}
	if got := testutil.ToFloat64(h.m.ForwardingSeconds); got != total {
		t.Errorf("request-seconds with nothing forwarded moved: %v then %v", total, got)
	}
	if got := h.front.Forwarding(); len(got) != 0 {
		t.Errorf("Forwarding after every answer = %v, want empty", got)
	}
}
