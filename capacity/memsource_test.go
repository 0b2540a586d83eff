package capacity

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/capacity/record"
)

// TestMemSourceReadsGaugeOrUntyped: Triton exports nv_gpu_memory_used_bytes as a gauge, and a
// text exposition without a TYPE line parses as untyped. The untyped value was read as a
// gauge's, 0 bytes, so a model using 5 GB was admitted with peak 0; a counter was read the
// same way, and an untyped NaN passed the range check as that 0.
func TestMemSourceReadsGaugeOrUntyped(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    int64
		wantErr string // after "--metrics-url <url>: "
	}{
		{name: "gauge", body: "# TYPE nv_gpu_memory_used_bytes gauge\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 5e9\n", want: 5e9},
		{name: "untyped", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 5e9\n", want: 5e9},
		{name: "untyped, two GPUs", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 5e9\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\"} 1e9\n", want: 6e9},
		{name: "counter", body: "# TYPE nv_gpu_memory_used_bytes counter\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 5e9\n",
			wantErr: "nv_gpu_memory_used_bytes is of type counter, want a gauge (as Triton exports it) or untyped"},
		{name: "untyped NaN", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} NaN\n", wantErr: "nv_gpu_memory_used_bytes NaN is outside [0, 1125899906842624]"},
		{name: "untyped negative", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} -1\n", wantErr: "nv_gpu_memory_used_bytes -1 is outside [0, 1125899906842624]"},
		// The bound is plan.MaxMemoryBytes, 2^50 bytes, exact in a float64, for each GPU's
		// sample and for their sum.
		{name: "zero", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 0\n", want: 0},
		{name: "one GPU at the bound", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 1125899906842624\n", want: 1 << 50},
		{name: "one GPU a byte past the bound", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 1125899906842625\n",
			wantErr: "nv_gpu_memory_used_bytes 1.125899906842625e+15 is outside [0, 1125899906842624]"},
		{name: "two GPUs summing to the bound", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 562949953421312\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\"} 562949953421312\n", want: 1 << 50},
		{name: "two GPUs a byte past the bound", body: "nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-1\"} 562949953421312\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-2\"} 562949953421313\n",
			wantErr: "nv_gpu_memory_used_bytes sums to 1.125899906842625e+15, outside [0, 1125899906842624]"},
		{name: "gauge without samples", body: "# TYPE nv_gpu_memory_used_bytes gauge\n",
			wantErr: "no nv_gpu_memory_used_bytes (is Triton's GPU metrics collection on?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, tt.body) }))
			defer srv.Close()
			m := memSource{metricsURL: srv.URL + "/metrics", client: &http.Client{Timeout: 5 * time.Second}}
			got, err := m.used(context.Background())
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			wantErr := ""
			if tt.wantErr != "" {
				wantErr = "--metrics-url " + srv.URL + "/metrics: " + tt.wantErr
			}
			if got != tt.want || gotErr != wantErr {
				t.Errorf("used() = %d, %q; want %d, %q", got, gotErr, tt.want, wantErr)
			}
		})
	}
}

// TestVerdictUnmeasuredMemory: a record whose memory was not measured claims no headroom and
// says which figures are unknown: with no load time either (--skip-memory) all three, with a
// measured load time (no device memory reading) the two memory figures only. Before, a
// Triton run with no memory reading (memorySource none) claimed the whole budget as headroom.
func TestVerdictUnmeasuredMemory(t *testing.T) {
	const budget, reserve = 10 << 30, 1 << 30
	rec := record.Record{SLOThroughputRPS: 40}
	v := Verdict(rec, budget, reserve, "--skip-memory")
	want := "memory and load time not measured (--skip-memory): peakBytes, swapPeakBytes and loadTimeSeconds are 0 for unknown"
	if !v.Allowed || v.HeadroomBytes != 0 || len(v.Limits) != 1 || !strings.HasPrefix(v.Limits[0], want) {
		t.Errorf("--skip-memory: %+v, want allowed, no headroom, the limit %q", v, want)
	}
	rec.LoadTimeSeconds = 2.5
	v = Verdict(rec, budget, reserve, "no device memory reading")
	want = "memory not measured (no device memory reading): peakBytes and swapPeakBytes are 0 for unknown, headroomBytes is not computed (0), and allowed is judged on the SLO alone; do not take memory from this record"
	if !v.Allowed || v.HeadroomBytes != 0 || len(v.Limits) != 1 || v.Limits[0] != want {
		t.Errorf("no reading: %+v, want allowed, no headroom, the limit %q", v, want)
	}
	rec.SLOThroughputRPS = 0
	if v := Verdict(rec, budget, reserve, "no device memory reading"); v.Allowed {
		t.Errorf("μ 0: %+v, want refused", v)
	}
	if v := Verdict(record.Record{SLOThroughputRPS: 40}, budget, reserve, ""); v.HeadroomBytes != budget-reserve {
		t.Errorf("measured 0 bytes: headroom %d, want %d", v.HeadroomBytes, budget-reserve)
	}
}

// TestVerdictMeasuredMemory: with memory measured, a model is admitted when μ > 0 and both its
// peak and its swap peak fit beside the reserve, an exact fit included; headroom is budget −
// reserve − max(peak, swap peak), negative when it does not fit. Budget 10 GiB, reserve 1 GiB:
// 9 GiB for the model.
func TestVerdictMeasuredMemory(t *testing.T) {
	const gi = int64(1) << 30
	const budget, reserve = 10 * gi, 1 * gi
	for _, tt := range []struct {
		name       string
		peak, swap int64
		mu         float64
		allowed    bool
		headroom   int64
		limit      string // the refusal's text; "" when allowed
	}{
		{"fits with room", 4 * gi, 6 * gi, 40, true, 3 * gi, ""},
		{"peak fits exactly", 9 * gi, 0, 40, true, 0, ""},
		{"swap peak fits exactly", 5 * gi, 9 * gi, 40, true, 0, ""},
		{"peak 1 byte over", 9*gi + 1, 0, 40, false, -1,
			"refused: peak 9.00GiB + reserve 1.00GiB exceeds the 1g.10gb budget 10.00GiB"},
		{"swap peak 1 byte over", 5 * gi, 9*gi + 1, 40, false, -1,
			"refused: swap peak 9.00GiB + reserve 1.00GiB exceeds the 1g.10gb budget 10.00GiB (a reload would not fit)"},
		{"fits, no rate met the SLO", 4 * gi, 4 * gi, 0, false, 5 * gi, "refused: no rate met the SLO"},
	} {
		rec := record.Record{Profile: "1g.10gb", SLOThroughputRPS: tt.mu, Memory: record.Memory{PeakBytes: tt.peak, SwapPeakBytes: tt.swap}}
		v := Verdict(rec, budget, reserve, "")
		var limits []string
		if tt.limit != "" {
			limits = []string{tt.limit}
		}
		if v.Allowed != tt.allowed || v.HeadroomBytes != tt.headroom || v.BudgetBytes != budget || v.ReserveBytes != reserve ||
			strings.Join(v.Limits, "|") != strings.Join(limits, "|") {
			t.Errorf("%s: %+v, want allowed %v, headroom %d, limits %q", tt.name, v, tt.allowed, tt.headroom, limits)
		}
	}
}
