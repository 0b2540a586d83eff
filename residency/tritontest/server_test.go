package tritontest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const gib = int64(1) << 30

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

type fixture struct {
	srv    *tritontest.Server
	clock  *tritontest.FakeClock
	client *triton.Client
	infer  inference.GRPCInferenceServiceClient
	ctx    context.Context
}

// start serves cfg on a fake clock at t0 and connects a client to it.
func start(t *testing.T, cfg tritontest.Config) *fixture {
	t.Helper()
	clock := tritontest.NewFakeClock(t0)
	cfg.Clock = clock
	srv := tritontest.Start(t, cfg)
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c, err := triton.New(conn, triton.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &fixture{srv: srv, clock: clock, client: c, infer: inference.NewGRPCInferenceServiceClient(conn), ctx: ctx}
}

// async runs f in a goroutine and returns its error on a channel.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func (f *fixture) inferAsync(name string) <-chan error {
	return async(func() error {
		_, err := f.infer.ModelInfer(f.ctx, &inference.ModelInferRequest{ModelName: name, Id: "r"})
		return err
	})
}

func (f *fixture) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := f.srv.Await(f.ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (f *fixture) model(name string) tritontest.ModelStatus {
	st, _ := f.srv.Model(name)
	return st
}

func (f *fixture) index(t *testing.T) []triton.ModelIndex {
	t.Helper()
	idx, err := f.client.Index(f.ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func explicit(models []tritontest.Model, startup ...string) tritontest.Config {
	cfg := tritontest.DefaultConfig()
	cfg.Models = models
	cfg.StartupModels = startup
	return cfg
}

func TestLoadTakesLoadTimeAndHoldsMemoryWhileLoading(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "a", MemoryBytes: 4 * gib, LoadTime: 30 * time.Second}}))
	done := async(func() error {
		return f.client.Load(f.ctx, "a", triton.LoadOptions{ConfigJSON: `{"max_batch_size": 8}`})
	})
	if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]triton.ModelIndex{{Name: "a", Version: "1", State: triton.StateLoading}}, f.index(t)); diff != "" {
		t.Errorf("index while loading (-want +got):\n%s", diff)
	}
	if got := f.srv.DeviceUsedBytes(); got != 4*gib {
		t.Errorf("DeviceUsedBytes while loading = %d, want %d", got, 4*gib)
	}
	f.clock.Advance(29 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("load returned before its load time: %v", err)
	default:
	}
	f.clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, err := f.client.WaitState(f.ctx, "a", true, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(triton.ModelIndex{Name: "a", Version: "1", State: triton.StateReady}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := f.model("a").ConfigJSON; got != `{"max_batch_size": 8}` {
		t.Errorf("config override = %q", got)
	}
}

func TestReloadNeedsOldPlusNewMemory(t *testing.T) {
	models := []tritontest.Model{{Name: "a", MemoryBytes: 4 * gib, LoadTime: 10 * time.Second}}
	t.Run("fits", func(t *testing.T) {
		f := start(t, explicit(models, "a"))
		done := async(func() error { return f.client.Load(f.ctx, "a", triton.LoadOptions{}) })
		if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := f.srv.DeviceUsedBytes(); got != 8*gib {
			t.Errorf("DeviceUsedBytes during reload = %d, want old+new %d", got, 8*gib)
		}
		if ready, err := f.client.ModelReady(f.ctx, "a", ""); err != nil || !ready {
			t.Errorf("ModelReady during reload = %v, %v; want the old copy serving", ready, err)
		}
		f.clock.Advance(10 * time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, want := f.srv.DeviceUsedBytes(), 4*gib; got != want {
			t.Errorf("DeviceUsedBytes after swap = %d, want %d", got, want)
		}
		if got, want := f.srv.MaxDeviceUsedBytes(), 8*gib; got != want {
			t.Errorf("MaxDeviceUsedBytes = %d, want %d", got, want)
		}
		if got := f.model("a").Loads; got != 2 {
			t.Errorf("Loads = %d, want 2", got)
		}
	})
	t.Run("does not fit", func(t *testing.T) {
		cfg := explicit(models, "a")
		cfg.DeviceMemoryBytes = 6 * gib
		f := start(t, cfg)
		err := f.client.Load(f.ctx, "a", triton.LoadOptions{})
		if !errors.Is(err, triton.ErrLoadFailed) || !strings.Contains(err.Error(), "out of memory") {
			t.Fatalf("reload on a full device: %v, want ErrLoadFailed out of memory", err)
		}
		if diff := cmp.Diff([]triton.ModelIndex{{Name: "a", Version: "1", State: triton.StateReady}}, f.index(t)); diff != "" {
			t.Errorf("the old copy keeps serving (-want +got):\n%s", diff)
		}
		if got := f.srv.MaxDeviceUsedBytes(); got != 4*gib {
			t.Errorf("MaxDeviceUsedBytes = %d, want %d", got, 4*gib)
		}
	})
}

func TestUnloadOfBusyModelHoldsMemoryUntilRequestsFinish(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "a", MemoryBytes: 4 * gib, ServiceTime: 2 * time.Second}}, "a"))
	first := f.inferAsync("a")
	f.await(t, "one executing", func() bool { return f.model("a").Executing == 1 })
	second := f.inferAsync("a")
	f.await(t, "one executing, one queued", func() bool {
		st := f.model("a")
		return st.Executing == 1 && st.Pending == 1
	})
	if err := f.client.Unload(f.ctx, "a", triton.UnloadOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]triton.ModelIndex{{Name: "a", Version: "1", State: triton.StateUnloading}}, f.index(t)); diff != "" {
		t.Errorf("index after unload returned (-want +got):\n%s", diff)
	}
	if got := f.srv.DeviceUsedBytes(); got != 4*gib {
		t.Errorf("DeviceUsedBytes while unloading = %d, want %d held", got, 4*gib)
	}
	_, err := f.infer.ModelInfer(f.ctx, &inference.ModelInferRequest{ModelName: "a"})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "Request for unknown model: 'a' has no available versions") {
		t.Errorf("new request to an unloading model: %v, want NotFound naming 'a'", err)
	}
	if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := f.model("a").State; got != triton.StateUnloading {
		t.Errorf("state with a queued request left = %q, want UNLOADING", got)
	}
	if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Second)
	if err := <-second; err != nil {
		t.Fatalf("a request queued before the unload must still be served: %v", err)
	}
	got, err := f.client.WaitState(f.ctx, "a", false, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(triton.ModelIndex{Name: "a", Version: "1", State: triton.StateUnavailable, Reason: "unloaded"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := f.srv.DeviceUsedBytes(); got != 0 {
		t.Errorf("DeviceUsedBytes after unload = %d, want 0", got)
	}
}

func TestLoadThatDoesNotFitFailsWithReason(t *testing.T) {
	cfg := explicit([]tritontest.Model{{Name: "a", MemoryBytes: 4 * gib}, {Name: "b", MemoryBytes: 4 * gib}}, "a")
	cfg.DeviceMemoryBytes = 6 * gib
	f := start(t, cfg)
	err := f.client.Load(f.ctx, "b", triton.LoadOptions{})
	if !errors.Is(err, triton.ErrLoadFailed) {
		t.Fatalf("err = %v, want ErrLoadFailed", err)
	}
	const reason = "failed to load 'b' version 1: Internal: out of memory: the model needs 4294967296 bytes, GPU 0 has 2147483648 of 6442450944 bytes free"
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q does not keep the reason %q", err, reason)
	}
	got, err := f.client.WaitState(f.ctx, "b", true, time.Second)
	if !errors.Is(err, triton.ErrLoadFailed) {
		t.Errorf("WaitState = %v, want ErrLoadFailed at once", err)
	}
	if diff := cmp.Diff(triton.ModelIndex{Name: "b", Version: "1", State: triton.StateUnavailable, Reason: reason}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := f.srv.MaxDeviceUsedBytes(); got != 4*gib {
		t.Errorf("MaxDeviceUsedBytes = %d, want %d", got, 4*gib)
	}
}

func TestRestartLosesLoadedModels(t *testing.T) {
	models := []tritontest.Model{
		{Name: "a", MemoryBytes: 2 * gib},
		{Name: "b", MemoryBytes: 3 * gib, ServiceTime: time.Second, Fault: tritontest.Fault{UnloadLeakBytes: gib}},
		{Name: "c", MemoryBytes: gib},
	}
	f := start(t, explicit(models, "a"))
	for _, name := range []string{"b", "c"} {
		if err := f.client.Load(f.ctx, name, triton.LoadOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inflight := f.inferAsync("b")
	if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Unload(f.ctx, "c", triton.UnloadOptions{}); err != nil {
		t.Fatal(err)
	}
	f.srv.Restart()
	if err := <-inflight; status.Code(err) != codes.Unavailable {
		t.Errorf("in-flight request across a restart: %v, want Unavailable", err)
	}
	want := []triton.ModelIndex{
		{Name: "a", Version: "1", State: triton.StateReady},
		{Name: "b"},
		{Name: "c"},
	}
	if diff := cmp.Diff(want, f.index(t)); diff != "" {
		t.Errorf("index after restart (-want +got):\n%s", diff)
	}
	if got := f.srv.DeviceUsedBytes(); got != 2*gib {
		t.Errorf("DeviceUsedBytes after restart = %d, want only the startup model's %d", got, 2*gib)
	}
	if _, err := f.client.Statistics(f.ctx, "b"); err == nil {
		t.Error("statistics of a model the restart forgot: want an error")
	}
}

func TestDefaultModeRefusesRepositoryCalls(t *testing.T) {
	cfg := explicit([]tritontest.Model{{Name: "a", MemoryBytes: gib}, {Name: "b", MemoryBytes: gib}})
	cfg.ModelControlMode = tritontest.ModeNone
	f := start(t, cfg)
	want := []triton.ModelIndex{{Name: "a", Version: "1", State: triton.StateReady}, {Name: "b", Version: "1", State: triton.StateReady}}
	if diff := cmp.Diff(want, f.index(t)); diff != "" {
		t.Errorf("default mode loads every model at start (-want +got):\n%s", diff)
	}
	if err := f.client.Load(f.ctx, "a", triton.LoadOptions{}); !errors.Is(err, triton.ErrModelControlDisabled) {
		t.Errorf("Load = %v, want ErrModelControlDisabled", err)
	}
	if err := f.client.Unload(f.ctx, "a", triton.UnloadOptions{}); !errors.Is(err, triton.ErrModelControlDisabled) {
		t.Errorf("Unload = %v, want ErrModelControlDisabled", err)
	}
	if got := f.model("a").State; got != triton.StateReady {
		t.Errorf("state after refused unload = %q", got)
	}
}

func TestInferErrorsNameTheModel(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "never-loaded", MemoryBytes: gib}}))
	tests := []struct {
		name     string
		model    string
		wantCode codes.Code
		wantText string
	}{
		{name: "not ready", model: "never-loaded", wantCode: codes.NotFound, wantText: "Request for unknown model: 'never-loaded' has no available versions"},
		{name: "unknown", model: "nope", wantCode: codes.NotFound, wantText: "Request for unknown model: 'nope' is not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.infer.ModelInfer(f.ctx, &inference.ModelInferRequest{ModelName: tt.model})
			if status.Code(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("ModelInfer(%q) = %v, want %v containing %q", tt.model, err, tt.wantCode, tt.wantText)
			}
		})
	}
}

func TestUnloadOfUnknownModelIsDone(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "a", MemoryBytes: gib}}))
	for _, name := range []string{"not-in-repository", "a"} {
		if err := f.client.Unload(f.ctx, name, triton.UnloadOptions{UnloadDependents: true}); err != nil {
			t.Errorf("Unload(%q) = %v, want nil", name, err)
		}
	}
}

// scrape reads the fake's /metrics and returns each sample of the model
// and GPU series as "name{labels}" → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func TestMetricsAndStatistics(t *testing.T) {
	cfg := explicit([]tritontest.Model{
		{Name: "a", MemoryBytes: 3 * gib, ServiceTime: 100 * time.Millisecond, Fault: tritontest.Fault{ExtraServiceTime: 50 * time.Millisecond}},
		{Name: "idle", MemoryBytes: gib},
	}, "a", "idle")
	cfg.GPUUUID = "GPU-test"
	f := start(t, cfg)
	reqs := []<-chan error{f.inferAsync("a"), f.inferAsync("a"), f.inferAsync("a")}
	f.await(t, "one executing, two queued", func() bool { return f.model("a").Pending == 2 })
	if got := scrape(t, f.srv.MetricsURL())["nv_inference_pending_request_count{model=a,version=1}"]; got != 2 {
		t.Errorf("pending count = %v, want 2", got)
	}
	for range 3 {
		if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(150 * time.Millisecond)
		f.await(t, "next request", func() bool { st := f.model("a"); return st.Executing+st.Pending < 3 || f.clock.Waiters() > 0 })
	}
	for _, r := range reqs {
		if err := <-r; err != nil {
			t.Fatal(err)
		}
	}
	got := scrape(t, f.srv.MetricsURL())
	// Three requests of 150 ms each, one at a time: they waited 0, 150 and
	// 300 ms, so queue = 450 ms, compute = 450 ms, request = 900 ms.
	want := map[string]float64{
		"nv_inference_request_success{model=a,version=1}":           3,
		"nv_inference_request_failure{model=a,version=1}":           0,
		"nv_inference_count{model=a,version=1}":                     3,
		"nv_inference_exec_count{model=a,version=1}":                3,
		"nv_inference_pending_request_count{model=a,version=1}":     0,
		"nv_inference_queue_duration_us{model=a,version=1}":         450000,
		"nv_inference_compute_infer_duration_us{model=a,version=1}": 450000,
		"nv_inference_request_duration_us{model=a,version=1}":       900000,
		"nv_inference_request_success{model=idle,version=1}":        0,
		"nv_gpu_memory_total_bytes{gpu_uuid=GPU-test}":              float64(tritontest.DefaultConfig().DeviceMemoryBytes),
		"nv_gpu_memory_used_bytes{gpu_uuid=GPU-test}":               float64(4 * gib),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}

	stats, err := f.client.Statistics(f.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	wantStats := []triton.ModelStats{{
		Name: "a", Version: "1", LastInference: t0.Add(450 * time.Millisecond),
		InferenceCount: 3, ExecutionCount: 3,
		Success:       triton.DurationStat{Count: 3, Duration: 900 * time.Millisecond},
		Queue:         triton.DurationStat{Count: 3, Duration: 450 * time.Millisecond},
		ComputeInput:  triton.DurationStat{Count: 3},
		ComputeInfer:  triton.DurationStat{Count: 3, Duration: 450 * time.Millisecond},
		ComputeOutput: triton.DurationStat{Count: 3},
		MemoryUsage:   []triton.MemoryUsage{{Type: "GPU", Bytes: uint64(3 * gib)}},
	}, {
		Name: "idle", Version: "1",
		MemoryUsage: []triton.MemoryUsage{{Type: "GPU", Bytes: uint64(gib)}},
	}}
	if diff := cmp.Diff(wantStats, stats); diff != "" {
		t.Errorf("statistics (-want +got):\n%s", diff)
	}

	// Unloaded models leave /metrics, as in Triton.
	if err := f.client.Unload(f.ctx, "idle", triton.UnloadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := scrape(t, f.srv.MetricsURL())["nv_inference_request_success{model=idle,version=1}"]; ok {
		t.Error("an unloaded model's series is still exported")
	}
}

func TestFaults(t *testing.T) {
	models := []tritontest.Model{{Name: "a", MemoryBytes: 4 * gib, LoadTime: 5 * time.Second}}
	t.Run("load fails once with the reason kept", func(t *testing.T) {
		ms := append([]tritontest.Model(nil), models...)
		ms[0].Fault = tritontest.Fault{FailLoad: "Internal: CUDA error: an illegal memory access", FailLoadCount: 1}
		f := start(t, explicit(ms))
		done := async(func() error { return f.client.Load(f.ctx, "a", triton.LoadOptions{}) })
		if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(5 * time.Second)
		err := <-done
		const reason = "failed to load 'a' version 1: Internal: CUDA error: an illegal memory access"
		if !errors.Is(err, triton.ErrLoadFailed) || !strings.Contains(err.Error(), reason) {
			t.Fatalf("err = %v, want ErrLoadFailed with %q", err, reason)
		}
		if diff := cmp.Diff(tritontest.ModelStatus{State: triton.StateUnavailable, Reason: reason}, f.model("a")); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		done = async(func() error { return f.client.Load(f.ctx, "a", triton.LoadOptions{}) })
		if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(5 * time.Second)
		if err := <-done; err != nil {
			t.Fatalf("second load: %v", err)
		}
	})
	t.Run("load hangs until released", func(t *testing.T) {
		f := start(t, explicit(models))
		if err := f.srv.SetFault("a", tritontest.Fault{HangLoad: true}); err != nil {
			t.Fatal(err)
		}
		done := async(func() error { return f.client.Load(f.ctx, "a", triton.LoadOptions{}) })
		f.await(t, "LOADING", func() bool { return f.model("a").State == triton.StateLoading })
		f.clock.Advance(time.Hour)
		if st := f.model("a"); st.State != triton.StateLoading || st.HeldBytes != 4*gib {
			t.Errorf("hung load after an hour: %+v, want LOADING holding memory", st)
		}
		if err := f.srv.SetFault("a", tritontest.Fault{}); err != nil {
			t.Fatal(err)
		}
		if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(5 * time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unload leaks memory until restart", func(t *testing.T) {
		f := start(t, explicit(models, "a"))
		if err := f.srv.SetFault("a", tritontest.Fault{UnloadLeakBytes: gib}); err != nil {
			t.Fatal(err)
		}
		if err := f.client.Unload(f.ctx, "a", triton.UnloadOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := f.srv.DeviceUsedBytes(); got != gib {
			t.Errorf("DeviceUsedBytes after a leaky unload = %d, want %d", got, gib)
		}
		f.srv.Restart()
		if got := f.srv.DeviceUsedBytes(); got != 4*gib {
			t.Errorf("DeviceUsedBytes after restart = %d, want the startup model's %d", got, 4*gib)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		f := start(t, explicit(models))
		if err := f.srv.SetFault("nope", tritontest.Fault{}); !errors.Is(err, tritontest.ErrUnknownModel) {
			t.Errorf("SetFault(nope) = %v", err)
		}
	})
}

func TestShutdownWaitsForInFlight(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "a", MemoryBytes: gib, ServiceTime: time.Second}}, "a"))
	req := f.inferAsync("a")
	if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	shut := async(func() error { return f.srv.Shutdown(f.ctx) })
	f.await(t, "not ready", func() bool {
		ready, err := f.client.ServerReady(f.ctx)
		return err == nil && !ready
	})
	_, err := f.infer.ModelInfer(f.ctx, &inference.ModelInferRequest{ModelName: "a"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("request during shutdown: %v, want Unavailable", err)
	}
	f.clock.Advance(time.Second)
	if err := <-req; err != nil {
		t.Errorf("in-flight request during shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give tritontest.Config
		want []string
	}{
		{name: "default", give: tritontest.DefaultConfig()},
		{
			name: "everything wrong",
			give: tritontest.Config{
				ModelControlMode: "poll", DeviceMemoryBytes: 0, DeviceID: -1,
				Models: []tritontest.Model{
					{Name: "", MemoryBytes: -1, LoadTime: -1, ServiceTime: -1, Concurrency: -1},
					{Name: "x", MemoryBytes: 10, Fault: tritontest.Fault{UnloadLeakBytes: 11}},
					{Name: "x"},
				},
				StartupModels: []string{"y"},
			},
			want: []string{
				`modelControlMode is "poll"`, "deviceMemoryBytes is 0, want > 0", "deviceID is -1",
				"models[0].name is empty", "models[0].memoryBytes is -1", "models[0].loadTime", "models[0].serviceTime",
				"models[0].concurrency", "models[1].fault.unloadLeakBytes is 11, want 0..10", `models[2].name "x" is repeated`,
				`startupModels[0] is "y"`,
			},
		},
		{
			name: "startup models do not fit",
			give: tritontest.Config{ModelControlMode: tritontest.ModeNone, DeviceMemoryBytes: 5, Models: []tritontest.Model{{Name: "a", MemoryBytes: 3}, {Name: "b", MemoryBytes: 3}}},
			want: []string{"startup models need 6 bytes, more than deviceMemoryBytes 5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if (err != nil) != (len(tt.want) > 0) {
				t.Fatalf("Validate() = %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
				}
			}
			if err != nil && !errors.Is(err, tritontest.ErrInvalidConfig) {
				t.Errorf("not ErrInvalidConfig: %v", err)
			}
		})
	}
}

// TestBatchedRequestsCountAsTritonCounts: with max_batch_size, a request's batch size is its
// first input's first dimension; inference_count grows by it, the success and execution counts
// by one request (Triton's statistics extension and its nv_inference_count); a batch size above
// max_batch_size is refused INVALID_ARGUMENT and counts nowhere.
func TestBatchedRequestsCountAsTritonCounts(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "img", MemoryBytes: gib, MaxBatchSize: 8}}, "img"))
	req := func(b int64) *inference.ModelInferRequest {
		return &inference.ModelInferRequest{ModelName: "img", Inputs: []*inference.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "FP32", Shape: []int64{b, 224, 224, 3}}}}
	}
	for _, b := range []int64{8, 3} {
		if _, err := f.infer.ModelInfer(f.ctx, req(b)); err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
	}
	_, err := f.infer.ModelInfer(f.ctx, req(9))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "inference request batch-size must be <= 8 for 'img'") {
		t.Errorf("batch 9 of max 8: %v, want InvalidArgument with Triton's text", err)
	}
	stats, err := f.client.Statistics(f.ctx, "img")
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 1 || stats[0].InferenceCount != 11 || stats[0].ExecutionCount != 2 || stats[0].Success.Count != 2 || stats[0].Fail.Count != 0 {
		t.Errorf("statistics %+v, want inference_count 11, execution_count 2, success 2, fail 0", stats)
	}
}
