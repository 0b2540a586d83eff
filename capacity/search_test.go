package capacity_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/capacity"
	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/tritontest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// threshold is a measure whose levels pass up to limit req/s.
func threshold(limit float64, tried *[]float64) func(context.Context, float64) (capacity.Level, error) {
	return func(_ context.Context, r float64) (capacity.Level, error) {
		*tried = append(*tried, r)
		return capacity.Level{OfferedRPS: r, ThroughputRPS: r, Stable: true, KeepsUp: true, MeetsSLO: r <= limit}, nil
	}
}

func TestSearchPath(t *testing.T) {
	tests := []struct {
		name      string
		limit     float64
		cfg       capacity.SearchConfig
		wantMu    float64
		wantTried []float64
		wantLimit bool
	}{
		{name: "step up then bisect to 5 %", limit: 123, cfg: capacity.SearchConfig{StartRPS: 10, StepFactor: 2, Precision: 0.05, MaxRPS: 1e5, MinRPS: 0.1},
			wantMu: 120, wantTried: []float64{10, 20, 40, 80, 160, 120, 140, 130, 125}},
		{name: "failing start steps down", limit: 3, cfg: capacity.SearchConfig{StartRPS: 10, StepFactor: 2, Precision: 0.1, MaxRPS: 1e5, MinRPS: 0.1},
			wantMu: 2.96875, wantTried: []float64{10, 5, 2.5, 3.75, 3.125, 2.8125, 2.96875}},
		{name: "max rate reached", limit: 1e9, cfg: capacity.SearchConfig{StartRPS: 10, StepFactor: 10, Precision: 0.05, MaxRPS: 1000, MinRPS: 1},
			wantMu: 1000, wantTried: []float64{10, 100, 1000}, wantLimit: true},
		{name: "nothing passes", limit: 0, cfg: capacity.SearchConfig{StartRPS: 1, StepFactor: 2, Precision: 0.05, MaxRPS: 10, MinRPS: 0.3},
			wantMu: 0, wantTried: []float64{1, 0.5}, wantLimit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tried []float64
			res, err := capacity.Search(context.Background(), tt.cfg, threshold(tt.limit, &tried))
			if err != nil {
				t.Fatal(err)
			}
			if res.MuRPS != tt.wantMu {
				t.Errorf("μ = %v, want %v", res.MuRPS, tt.wantMu)
			}
			if diff := cmp.Diff(tt.wantTried, tried); diff != "" {
				t.Errorf("rates tried (-want +got):\n%s", diff)
			}
			if got := len(res.Limits) > 0; got != tt.wantLimit {
				t.Errorf("limits = %q, want some: %v", res.Limits, tt.wantLimit)
			}
			if len(res.Curve) != len(tried) {
				t.Errorf("curve has %d levels, want %d", len(res.Curve), len(tried))
			}
		})
	}
}

func TestSearchConfigErrorsNameFlags(t *testing.T) {
	err := capacity.SearchConfig{StartRPS: -1, StepFactor: 1, Precision: 2, MaxRPS: -5, MinRPS: 0}.Validate()
	for _, want := range []string{"--start-rate", "--step-factor", "--precision", "--max-rate", "--min-rate"} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	// A factor just above 1 left lo × factor == lo: the step-up never ended.
	for _, f := range []float64{1 + 1e-16, 1.0001, 1.0099} {
		err := capacity.SearchConfig{StartRPS: 10, StepFactor: f, Precision: 0.05, MaxRPS: 1e5, MinRPS: 0.1}.Validate()
		if err == nil || !contains(err.Error(), "stepFactor (--step-factor) is ") || !contains(err.Error(), "want [1.01, 100]") {
			t.Errorf("step factor %v: %v; want the flag and [1.01, 100]", f, err)
		}
	}
	if err := (capacity.SearchConfig{StartRPS: 10, StepFactor: 1.01, Precision: 0.05, MaxRPS: 1e5, MinRPS: 0.1}).Validate(); err != nil {
		t.Errorf("step factor 1.01: %v", err)
	}
	err = capacity.MeasureConfig{}.Validate()
	for _, want := range []string{"--window", "--max-windows", "--stability", "--max-in-flight", "--slo-latency", "--slo-quantile"} {
		if err == nil || !contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestClientBound: a generator allowed 2 requests in flight cannot offer 50 req/s to a model
// answering in 200 ms (Little: 10 in flight needed); it reports client-bound, and Search
// returns ErrClientBound instead of a capacity. Real clock, real server; under a second.
func TestClientBound(t *testing.T) {
	srv := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1 << 30,
		Models: []tritontest.Model{{Name: "m", ServiceTime: 200 * time.Millisecond, Concurrency: 100}}, StartupModels: []string{"m"}})
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg := capacity.DefaultMeasureConfig()
	cfg.Window, cfg.MinWindowRequests, cfg.MaxWindows, cfg.MaxInFlight = 100*time.Millisecond, 1, 4, 2
	gen, err := capacity.NewGenerator(capacity.TritonTarget{Client: inference.NewGRPCInferenceServiceClient(conn), Request: &inference.ModelInferRequest{ModelName: "m"}}, nil, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := capacity.Search(context.Background(), capacity.SearchConfig{StartRPS: 50, StepFactor: 2, Precision: 0.05, MaxRPS: 1000, MinRPS: 1}, gen.Measure)
	if !errors.Is(err, capacity.ErrClientBound) {
		t.Fatalf("err = %v, want ErrClientBound", err)
	}
	if res.MuRPS != 0 || len(res.Curve) != 1 || !res.Curve[0].ClientBound || !contains(res.Curve[0].ClientBoundReason, "in-flight cap (2)") {
		t.Errorf("result μ %v, curve %+v; want no capacity and one client-bound level naming the cap", res.MuRPS, res.Curve)
	}
}

// TestSearchClientBoundAfterPass: a client-bound level above a passing one ends the search
// with that μ as a lower bound (a limit says so), not with an error.
func TestSearchClientBoundAfterPass(t *testing.T) {
	res, err := capacity.Search(context.Background(), capacity.SearchConfig{StartRPS: 10, StepFactor: 2, Precision: 0.05, MaxRPS: 1e5, MinRPS: 1},
		func(_ context.Context, r float64) (capacity.Level, error) {
			return capacity.Level{OfferedRPS: r, ThroughputRPS: r, Stable: true, KeepsUp: true, MeetsSLO: true, ClientBound: r > 30, ClientBoundReason: "lagging"}, nil
		})
	if err != nil || res.MuRPS != 20 || len(res.Limits) != 1 || !strings.Contains(res.Limits[0], "client-bound at 40 req/s (lagging)") {
		t.Errorf("μ %v, limits %q, err %v; want μ 20 with a client-bound limit", res.MuRPS, res.Limits, err)
	}
}

// TestSearchFinestPrecision: at MinPrecision the search ends within 0.1 % below the
// limit in a bounded number of levels; a finer precision, which bisected for ever (adjacent
// floats never get within 1e-300 of each other), is refused naming the flag.
func TestSearchFinestPrecision(t *testing.T) {
	const limit = 123.456
	var tried []float64
	res, err := capacity.Search(context.Background(), capacity.SearchConfig{StartRPS: 100, StepFactor: 2, Precision: capacity.MinPrecision, MaxRPS: 1e5, MinRPS: 1},
		threshold(limit, &tried))
	if err != nil {
		t.Fatal(err)
	}
	if res.MuRPS > limit || res.MuRPS < limit*(1-capacity.MinPrecision) || len(tried) > 20 {
		t.Errorf("μ = %v after %d levels, want within 0.1 %% below %v in at most 20", res.MuRPS, len(tried), limit)
	}
	err = capacity.SearchConfig{StartRPS: 1, StepFactor: 2, Precision: 1e-300, MaxRPS: 10, MinRPS: 1}.Validate()
	if err == nil || !contains(err.Error(), "precision (--precision) is 1e-300, want [0.001, 1)") {
		t.Errorf("Validate(precision 1e-300) = %v", err)
	}
}
