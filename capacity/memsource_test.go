package capacity

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
