package front_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/residency/tritontest"
)

// tritonPending reads nv_inference_pending_request_count for the model from tritontest's
// metrics endpoint, as Prometheus would scrape it (summed over versions).
func tritonPending(t *testing.T, h *harness, model string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.triton.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("tritontest metrics: %v", err)
	}
	var sum float64
	for _, m := range fams["nv_inference_pending_request_count"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "model" && l.GetValue() == model {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// TestForwardingGauge: inferscale_front_forwarding_requests{model} counts the unary requests
// forwarded to Triton and not yet answered, those Triton queues included. Three requests to a
// model that executes one at a time for 2 s: the gauge reads 3 while Triton's pending count
// reads 2, so forwarding − pending is the one executing, what the scaler's Triton preset reads
// as running (prom.PresetQuery); once every answer has come the gauge reads 0, its series kept.
func TestForwardingGauge(t *testing.T) {
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "slow", MemoryBytes: 1 << 30, ServiceTime: 2 * time.Second, Concurrency: 1}}
	tc.StartupModels = []string{"slow"}
	h := start(t, tc, testConfig(), false, "slow")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	gauge := func() float64 { return testutil.ToFloat64(h.m.Forwarding.WithLabelValues("slow")) }
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b", "c"} {
		wg.Go(func() {
			if _, err := infer(ctx, h.client, "slow", id, nil); err != nil {
				t.Errorf("infer %s: %v", id, err)
			}
		})
	}
	// Within the first request's 2 s: all three forwarded, one executing, two pending.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for gauge() != 3 || tritonPending(t, h, "slow") != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("forwarding gauge %v, Triton pending %v; want 3 and 2 while the first request executes", gauge(), tritonPending(t, h, "slow"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff(map[string]int{"slow": 3}, h.front.Forwarding()); diff != "" {
		t.Errorf("Forwarding (-want +got):\n%s", diff)
	}
	if executing := gauge() - tritonPending(t, h, "slow"); executing != 1 {
		t.Errorf("forwarding − pending = %v, want 1 (Concurrency 1)", executing)
	}
	wg.Wait()
	if got := gauge(); got != 0 {
		t.Errorf("forwarding gauge after every answer = %v, want 0", got)
	}
	if n := testutil.CollectAndCount(h.m.Forwarding); n != 1 {
		t.Errorf("forwarding series = %d, want 1 (kept at 0)", n)
	}
}
