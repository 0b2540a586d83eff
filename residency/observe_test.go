package residency

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestAddSat: the statistics' byte sums saturate at math.MaxInt64 instead of wrapping negative.
func TestAddSat(t *testing.T) {
	for _, tt := range []struct{ a, b, want int64 }{
		{3, 4, 7}, {0, 0, 0}, {math.MaxInt64 - 1, 1, math.MaxInt64}, {math.MaxInt64 - 1, 2, math.MaxInt64},
		{math.MaxInt64, 1 << 50, math.MaxInt64},
	} {
		if got := addSat(tt.a, tt.b); got != tt.want {
			t.Errorf("addSat(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestDemandCountsRequestsNotBatchElements: a loaded model's demand is its requests per second,
// as Prometheus measures models that are not loaded (nv_inference_request_success), not its
// inferences: ten batch-32 requests are 10 arrivals, not the 320 that Triton's
// inference_count adds. (It was the inference count, so a batching model ranked 32 times too
// high.)
func TestDemandCountsRequestsNotBatchElements(t *testing.T) {
	cat := catalog(model("img", plan.TierP1, 2, time.Second))
	fm := fakeModel("img", 2)
	fm.MaxBatchSize = 32
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fm}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.demand.set("img", 1)
	h.step()
	if h.state("img") != triton.StateReady {
		t.Fatalf("img %q after a step, want READY", h.state("img"))
	}
	ctx := context.Background()
	if _, err := h.ctl.observe(ctx, cat, t0); err != nil { // the baseline count
		t.Fatal(err)
	}
	batch := &inference.ModelInferRequest{ModelName: "img", Inputs: []*inference.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "FP32", Shape: []int64{32, 3}}}}
	for range 10 {
		if _, err := h.infer.ModelInfer(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	o, err := h.ctl.observe(ctx, cat, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := 10 * math.Ln2 / plan.DefaultHalfLife.Seconds() // 10 arrivals just now, in req/s
	if got := o.demand["img"]; math.Abs(got-want) > 1e-12 {
		t.Errorf("demand of img = %.6g req/s, want %.6g (10 requests; 320 inferences would read %.6g)", got, want, 32*want)
	}
	st, _ := h.client.Statistics(ctx, "img")
	if len(st) != 1 || st[0].InferenceCount != 320 || st[0].Success.Count != 10 || st[0].ExecutionCount != 10 {
		t.Errorf("fake's statistics = %+v, want inference_count 320, success 10, executions 10 (Triton's counts)", st)
	}
}
