package promtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"go.uber.org/goleak"

	"github.com/inferscale/inferscale/internal/promtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExporterToPrometheus(t *testing.T) {
	exp := promtest.NewExporter(t)
	exp.Gauge("vllm:num_requests_waiting", "namespace", "model_name").WithLabelValues("a", "llama").Set(3)
	srv := promtest.Start(t)

	// Targets are added after start through the file_sd file.
	srv.SetTargets(t, exp.Target())
	got := srv.WaitFor(t, `vllm:num_requests_waiting{namespace="a"}`, promtest.HasValue(3), 30*time.Second)
	if m := got[0].Metric["model_name"]; m != "llama" {
		t.Errorf("model_name = %q, want llama (honor_labels keeps exporter labels)", m)
	}

	srv.SetTargets(t)
	srv.WaitFor(t, `vllm:num_requests_waiting`, promtest.IsEmpty, 30*time.Second)
}

func TestSlowProxy(t *testing.T) {
	srv := promtest.Start(t)
	proxy := promtest.NewSlowProxy(t, srv.URL(), 0)
	c, err := api.NewClient(api.Config{Address: proxy.URL(), RoundTripper: &http.Transport{DisableKeepAlives: true}})
	if err != nil {
		t.Fatal(err)
	}
	prom := v1.NewAPI(c)

	v, _, _, err := prom.Query(context.Background(), "vector(42)", time.Now())
	if err != nil {
		t.Fatalf("query through proxy: %v", err)
	}
	if got := v.(model.Vector); len(got) != 1 || got[0].Value != 42 {
		t.Fatalf("query through proxy = %v, want one sample of 42", got)
	}

	// With a delay far beyond the caller's deadline the caller gets its deadline error and
	// the proxy drops the held request.
	proxy.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, _, err := prom.Query(ctx, "vector(42)", time.Now()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("query with 1h delay: err = %v, want context.DeadlineExceeded", err)
	}
}

// TestModelValue: a model's series are summed over their other labels (a Triton model's
// versions), a series without a model label is model "", gauges and counters read alike, and
// a family or model with no series reads 0.
func TestModelValue(t *testing.T) {
	const body = `# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="a",version="1"} 2
nv_inference_pending_request_count{model="a",version="2"} 3
nv_inference_pending_request_count{model="b",version="1"} 7
# TYPE inferscale_residency_resident_models gauge
inferscale_residency_resident_models 4
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="a",version="1"} 6e+06
`
	for _, c := range []struct {
		name, model string
		want        float64
	}{
		{"nv_inference_pending_request_count", "a", 5},
		{"nv_inference_pending_request_count", "b", 7},
		{"nv_inference_pending_request_count", "c", 0},
		{"nv_inference_pending_request_count", "", 0},
		{"inferscale_residency_resident_models", "", 4},
		{"inferscale_residency_resident_models", "a", 0},
		{"nv_inference_queue_duration_us", "a", 6e6},
		{"absent", "a", 0},
	} {
		if got := promtest.ModelValue(t, strings.NewReader(body), c.name, c.model); got != c.want {
			t.Errorf("ModelValue(%s, %q) = %v, want %v", c.name, c.model, got, c.want)
		}
	}
}
