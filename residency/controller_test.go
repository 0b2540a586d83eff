package residency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// staticDemand is a DemandSource the test sets, standing in for Prometheus.
type staticDemand struct {
	mu    sync.Mutex
	rates map[string]float64
}

func (d *staticDemand) set(name string, r float64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rates[name] = r
}

func (d *staticDemand) Rates(_ context.Context, models []string) (map[string]float64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]float64{}
	for _, m := range models {
		if r, ok := d.rates[m]; ok {
			out[m] = r
		}
	}
	return out, nil
}

type harness struct {
	t      *testing.T
	clock  *tritontest.FakeClock
	srv    *tritontest.Server
	client *triton.Client
	ctl    *Controller
	m      *Metrics
	demand *staticDemand
	infer  inference.GRPCInferenceServiceClient
}

// newHarness starts a fake Triton with fake, and a controller over it with the device probe
// reading the fake's device memory (as NVML would).
func newHarness(t *testing.T, fake tritontest.Config, cat plan.Catalog, budget plan.Budget) *harness {
	t.Helper()
	return newHarnessCfg(t, DefaultConfig(), fake, cat, budget)
}

func newHarnessCfg(t *testing.T, cfg Config, fake tritontest.Config, cat plan.Catalog, budget plan.Budget) *harness {
	t.Helper()
	h := &harness{t: t, clock: tritontest.NewFakeClock(t0), demand: &staticDemand{rates: map[string]float64{}}}
	fake.Clock = h.clock
	h.srv = tritontest.Start(t, fake)
	tcfg := triton.DefaultConfig()
	tcfg.Clock = h.clock
	var err error
	h.client, err = triton.Dial(h.srv.GRPCAddr(), tcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.client.Close() })
	conn, err := grpc.NewClient(h.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h.infer = inference.NewGRPCInferenceServiceClient(conn)
	h.m, err = NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TritonMetricsURL == DefaultConfig().TritonMetricsURL {
		cfg.TritonMetricsURL = h.srv.MetricsURL() // the queue lengths
	}
	h.ctl, err = NewController(cfg, cat, budget, Deps{
		Triton: h.client, Demand: h.demand, Clock: h.clock, Metrics: h.m,
		Log:             slog.New(slog.DiscardHandler),
		DeviceUsedBytes: func() (int64, error) { return h.srv.DeviceUsedBytes(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) step() bool {
	h.t.Helper()
	acted, err := h.ctl.Step(context.Background())
	if err != nil {
		h.t.Fatalf("Step: %v", err)
	}
	return acted
}

func (h *harness) state(name string) triton.State {
	st, _ := h.srv.Model(name)
	return st.State
}

// requests sends n inferences to model (the fake serves them at once: ServiceTime 0).
func (h *harness) requests(model string, n int) {
	h.t.Helper()
	for range n {
		if _, err := h.infer.ModelInfer(context.Background(), &inference.ModelInferRequest{ModelName: model}); err != nil {
			h.t.Fatalf("infer %s: %v", model, err)
		}
	}
}

func fakeModel(name string, gib float64) tritontest.Model {
	return tritontest.Model{Name: name, MemoryBytes: int64(gib * float64(gi))}
}

func TestControllerLoadsP0ThenReady(t *testing.T) {
	cat := catalog(model("pin", plan.TierP0, 2, time.Second), model("chat", plan.TierP1, 3, time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 2), fakeModel("chat", 3)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	if ok, why := h.ctl.Ready(); ok {
		t.Fatalf("ready before any observation (%s)", why)
	}
	h.demand.set("chat", 1)
	if !h.step() || h.state("pin") != triton.StateReady || h.state("chat") != triton.StateUnavailable && h.state("chat") != "" {
		t.Fatalf("first step: pin %q chat %q; want P0 loaded first, alone", h.state("pin"), h.state("chat"))
	}
	if ok, _ := h.ctl.Ready(); ok {
		t.Fatal("ready before the loaded P0 model was observed READY")
	}
	h.step()
	if ok, why := h.ctl.Ready(); !ok || h.state("chat") != triton.StateReady {
		t.Fatalf("second step: ready %v (%s), chat %q", ok, why, h.state("chat"))
	}
	if h.step() {
		t.Fatal("third step acted; want a fixed point")
	}
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("success")); got != 2 {
		t.Errorf("loads_total{success} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(h.m.AccountedBytes); got != float64(5*gi) {
		t.Errorf("accounted_bytes = %v, want %v", got, 5*gi)
	}
	if got := testutil.ToFloat64(h.m.ResidentModels); got != 2 {
		t.Errorf("resident_models = %v, want 2", got)
	}
}

func TestControllerMissingP0KeepsNotReady(t *testing.T) {
	unplaceable := plan.Model{Name: "elsewhere", Digest: dgA, Tier: plan.TierP0, LoadTime: time.Second, PeakMemoryBytes: map[string]int64{"7g.80gb": gi}}
	cat := catalog(model("pin", plan.TierP0, 2, time.Second), unplaceable)
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 2), fakeModel("elsewhere", 1)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.step()
	h.step()
	ok, why := h.ctl.Ready()
	if ok || why != "P0 models not READY: elsewhere" {
		t.Fatalf("Ready = %v, %q; want not ready naming the P0 model without a peak for %s", ok, why, prof)
	}
	if h.state("elsewhere") == triton.StateReady {
		t.Fatal("a model without a peak for the profile was loaded")
	}
	if got := testutil.ToFloat64(h.m.UnplaceableModels); got != 1 {
		t.Errorf("unplaceable_models = %v, want 1", got)
	}
	if diff := h.ctl.Status().Unplaceable; len(diff) != 1 || diff[0] != "elsewhere" {
		t.Errorf("Status.Unplaceable = %v", diff)
	}
}

func TestControllerTritonRestartMidLoad(t *testing.T) {
	cat := catalog(model("pin", plan.TierP0, 2, 30*time.Second))
	slow := fakeModel("pin", 2)
	slow.LoadTime = 30 * time.Second
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{slow}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	done := make(chan error, 1)
	go func() { _, err := h.ctl.Step(ctx); done <- err }()
	if err := h.srv.Await(ctx, func() bool { return h.state("pin") == triton.StateLoading }); err != nil {
		t.Fatal(err)
	}
	h.srv.Restart() // Triton crashes mid-load and forgets everything
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); got != 0 {
		t.Fatalf("a restart counted as %v load failures; want 0 (no backoff for Triton's restart)", got)
	}
	// The next loop sees the new, empty state and loads again at once.
	go func() { _, err := h.ctl.Step(ctx); done <- err }()
	if err := h.srv.Await(ctx, func() bool { return h.state("pin") == triton.StateLoading }); err != nil {
		t.Fatal(err)
	}
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(30 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.step()
	if ok, why := h.ctl.Ready(); !ok {
		t.Fatalf("not ready after reloading past the restart: %s", why)
	}
	var pb dto.Metric
	if err := h.m.LoadSeconds.Write(&pb); err != nil {
		t.Fatal(err)
	}
	if c, s := pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum(); c != 1 || s != 30 {
		t.Errorf("load_duration_seconds count %d sum %v; want the one 30s load (the interrupted one is not a success)", c, s)
	}
}

func TestControllerFailedLoadsBackOffThenQuarantine(t *testing.T) {
	cat := catalog(model("bad", plan.TierP0, 2, time.Second))
	broken := fakeModel("bad", 2)
	broken.Fault.FailLoad = "Internal: CUDA error: an illegal memory access"
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{broken}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	failures := func() float64 { return testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")) }
	// Default backoff: 10s, doubling; quarantine after 3 failures.
	steps := []struct {
		advance      time.Duration
		wantFailures float64
	}{
		{0, 1},                // first try fails: back off 10s
		{0, 1},                // within backoff: no retry storm
		{9 * time.Second, 1},  // still within
		{time.Second, 2},      // 10s later: second failure, back off 20s
		{19 * time.Second, 2}, // within
		{time.Second, 3},      // third failure: quarantined
		{time.Hour, 3},        // never again
	}
	for i, s := range steps {
		h.clock.Advance(s.advance)
		h.step()
		if got := failures(); got != s.wantFailures {
			t.Fatalf("step %d (+%s): load failures %v, want %v", i, s.advance, got, s.wantFailures)
		}
	}
	if got := testutil.ToFloat64(h.m.Quarantined); got != 1 {
		t.Errorf("quarantined_models = %v, want 1", got)
	}
	if ok, why := h.ctl.Ready(); ok || why != "P0 models not READY: bad" {
		t.Errorf("Ready = %v, %q", ok, why)
	}
}

func TestControllerDoesNotLoadIntoLeakedMemory(t *testing.T) {
	probes := []struct {
		name  string
		probe func(h *harness) func() (int64, error)
	}{
		{name: "device (as NVML)", probe: func(h *harness) func() (int64, error) {
			return func() (int64, error) { return h.srv.DeviceUsedBytes(), nil }
		}},
		{name: "Triton's nv_gpu_memory_used_bytes", probe: func(h *harness) func() (int64, error) {
			return TritonMemoryProbe(h.srv.MetricsURL(), nil)
		}},
	}
	for _, p := range probes {
		t.Run(p.name, func(t *testing.T) {
			cat := catalog(model("old", plan.TierP1, 4, time.Second), model("big", plan.TierP1, 8, time.Second))
			leaky := fakeModel("old", 4)
			leaky.Fault.UnloadLeakBytes = 4 * gi
			h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
				Models: []tritontest.Model{leaky, fakeModel("big", 8)}, StartupModels: []string{"old"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi, FreeIdle: true})
			h.ctl.deps.DeviceUsedBytes = p.probe(h)
			h.step()                          // sees old READY since t0
			h.clock.Advance(11 * time.Minute) // idle past the 10m timeout
			if !h.step() || h.state("old") != triton.StateUnavailable {
				t.Fatalf("idle model not unloaded: %q", h.state("old"))
			}
			h.demand.set("big", 5)
			h.step() // the device still shows 4 GiB in use: 4 + 8 > 10
			if h.state("big") != triton.StateUnavailable && h.state("big") != "" {
				t.Fatalf("big is %q: loaded into memory the unload did not return", h.state("big"))
			}
			if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); got != 0 {
				t.Errorf("load failures %v: the controller tried a load that could not fit", got)
			}
			if got := testutil.ToFloat64(h.m.RefusedLoads); got != 1 {
				t.Errorf("refused_loads_total = %v, want 1", got)
			}
			if got := testutil.ToFloat64(h.m.MeasuredBytes); got != float64(4*gi) {
				t.Errorf("measured_bytes = %v, want the leaked 4 GiB", got)
			}
			if got := testutil.ToFloat64(h.m.Unloads.WithLabelValues("idle")); got != 1 {
				t.Errorf("unloads_total{idle} = %v, want 1", got)
			}
			if h.srv.MaxDeviceUsedBytes() > 10*gi {
				t.Errorf("device peaked at %d > budget", h.srv.MaxDeviceUsedBytes())
			}
		})
	}
}

func TestTritonMemoryProbeWithoutMetric(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE nv_inference_count counter\nnv_inference_count{model=\"m\",version=\"1\"} 3")
	}))
	defer web.Close()
	if got, err := TritonMemoryProbe(web.URL, nil)(); got != -1 || err != nil {
		t.Errorf("probe = %d, %v; want -1 (unknown) without nv_gpu_memory_used_bytes", got, err)
	}
}

func TestControllerReloadNeedsOldPlusNew(t *testing.T) {
	cat := catalog(model("a", plan.TierP0, 4, time.Minute), model("b", plan.TierP1, 3, time.Second))
	a := fakeModel("a", 4)
	a.LoadTime = time.Minute
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{a, fakeModel("b", 3)}, StartupModels: []string{"a"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Someone reloads a (a new version in the repository): old and new copy both hold 4 GiB.
	reloaded := make(chan error, 1)
	go func() { reloaded <- h.client.Load(ctx, "a", triton.LoadOptions{}) }()
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("a"); return st.HeldBytes == 8*gi }); err != nil {
		t.Fatal(err)
	}
	h.demand.set("b", 2)
	h.step() // 8 GiB in use + 3 > 10: b must wait
	if h.state("b") == triton.StateReady {
		t.Fatal("b loaded while the reload held old + new memory")
	}
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	if err := <-reloaded; err != nil {
		t.Fatal(err)
	}
	h.step()
	if h.state("b") != triton.StateReady {
		t.Fatalf("b is %q after the swap freed the old copy", h.state("b"))
	}
	if h.srv.MaxDeviceUsedBytes() > 10*gi {
		t.Errorf("device peaked at %d > budget", h.srv.MaxDeviceUsedBytes())
	}
}

func TestControllerNoThrashWithinMinResidency(t *testing.T) {
	// Two 6 GiB models on a 10 GiB slice: only one fits. Demand alternates every 30s.
	cat := catalog(model("a", plan.TierP1, 6, 10*time.Second), model("b", plan.TierP1, 6, 10*time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("a", 6), fakeModel("b", 6)}, StartupModels: []string{"a"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.step()
	for i := range 4 { // 2 minutes = minResidency
		h.clock.Advance(30 * time.Second)
		if i%2 == 0 {
			h.demand.set("b", 10) // b hot, a cold
		} else {
			h.demand.set("b", 0)
			h.requests("a", 300) // a hot: 10 req/s
		}
		h.step()
		h.step()
	}
	sa, _ := h.srv.Model("a")
	sb, _ := h.srv.Model("b")
	if sa.Unloads != 0 || sb.Loads != 0 {
		t.Fatalf("thrash inside minResidency: a unloaded %d times, b loaded %d times", sa.Unloads, sb.Loads)
	}
	// Past minResidency (61 s later) with b hot and a cold, b replaces a once.
	h.demand.set("b", 10)
	h.clock.Advance(61 * time.Second)
	h.step() // unload a
	h.step() // load b
	sa, _ = h.srv.Model("a")
	sb, _ = h.srv.Model("b")
	if sa.Unloads != 1 || sb.Loads != 1 || h.state("b") != triton.StateReady {
		t.Fatalf("after minResidency: a unloads %d, b loads %d, b %q; want one swap", sa.Unloads, sb.Loads, h.state("b"))
	}
	if got := testutil.ToFloat64(h.m.Evictions); got != 1 {
		t.Errorf("evictions_total = %v, want 1", got)
	}
}

func TestControllerFlagsOverPeak(t *testing.T) {
	cat := catalog(model("fat", plan.TierP0, 2, time.Second), model("p1", plan.TierP1, 6, time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("fat", 3), fakeModel("p1", 6)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.step() // loads fat, which really takes 3 GiB
	h.step() // observes memory_usage 3 GiB > 2 GiB peak
	if got := testutil.ToFloat64(h.m.OverPeak.WithLabelValues("fat")); got != float64(gi) {
		t.Errorf("model_over_peak_bytes{fat} = %v, want %v", got, gi)
	}
	h.demand.set("p1", 1)
	h.step() // 3 (measured) + 6 ≤ 10: fits; at the 2 GiB peak it would also have fit
	if got := testutil.ToFloat64(h.m.AccountedBytes); got != float64(3*gi) {
		t.Errorf("accounted_bytes = %v, want the 3 GiB measurement", got)
	}
}

func TestControllerWaitsForUnloadToFinish(t *testing.T) {
	// a holds 6 GiB and has a request executing for a minute; b (6 GiB) is wanted and worth
	// more. Triton's unload returns at once but a holds its memory until the request ends.
	cat := catalog(model("a", plan.TierP2, 6, time.Second), model("b", plan.TierP1, 6, time.Minute))
	a := fakeModel("a", 6)
	a.ServiceTime = time.Minute
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{a, fakeModel("b", 6)}, StartupModels: []string{"a"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.step()
	h.clock.Advance(3 * time.Minute) // past minResidency
	served := make(chan error, 1)
	go func() {
		_, err := h.infer.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "a"})
		served <- err
	}()
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("a"); return st.Executing == 1 }); err != nil {
		t.Fatal(err)
	}
	h.demand.set("b", 5)
	if !h.step() || h.state("a") != triton.StateUnloading {
		t.Fatalf("a is %q; want UNLOADING after the eviction", h.state("a"))
	}
	h.step() // a still holds its memory: b must not load
	if h.state("b") == triton.StateReady || h.state("b") == triton.StateLoading {
		t.Fatalf("b is %q while a is still UNLOADING", h.state("b"))
	}
	h.clock.Advance(time.Minute) // the request ends; a becomes UNAVAILABLE
	if err := <-served; err != nil {
		t.Fatalf("the in-flight request failed: %v", err)
	}
	h.step()
	if h.state("b") != triton.StateReady {
		t.Fatalf("b is %q after a's memory came back", h.state("b"))
	}
	if h.srv.MaxDeviceUsedBytes() > 10*gi {
		t.Errorf("device peaked at %d > budget", h.srv.MaxDeviceUsedBytes())
	}
}

func TestControllerRun(t *testing.T) {
	cat := catalog(model("pin", plan.TierP0, 2, time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 2)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.ctl.Run(runCtx) }()
	// First loop loads pin and waits the 250ms settle time; the next observes it READY and
	// waits a whole LoopInterval.
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ok, _ := h.ctl.Ready(); ok || h.state("pin") != triton.StateReady {
		t.Fatalf("after the first loop: ready %v, pin %q; want loaded, not yet observed", ok, h.state("pin"))
	}
	h.clock.Advance(250 * time.Millisecond)
	if err := h.clock.BlockUntil(ctx, 1); err != nil { // the second loop waits LoopInterval
		t.Fatal(err)
	}
	if ok, why := h.ctl.Ready(); !ok {
		t.Fatalf("not ready after the second loop: %s", why)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
}

func TestControllerBoundsConcurrentLoads(t *testing.T) {
	cat := catalog(model("a", plan.TierP0, 1, 10*time.Second), model("b", plan.TierP0, 1, 10*time.Second), model("c", plan.TierP0, 1, 10*time.Second))
	var ms []tritontest.Model
	for _, n := range []string{"a", "b", "c"} {
		m := fakeModel(n, 1)
		m.LoadTime = 10 * time.Second
		ms = append(ms, m)
	}
	cfg := DefaultConfig()
	cfg.MaxConcurrentLoads = 2
	h := newHarnessCfg(t, cfg, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi, Models: ms},
		cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	loading := func() (n int) {
		for _, st := range h.srv.Models() {
			if st.State == triton.StateLoading {
				n++
			}
		}
		return n
	}
	done := make(chan error, 1)
	go func() { _, err := h.ctl.Step(ctx); done <- err }()
	if err := h.clock.BlockUntil(ctx, 2); err != nil { // two loads wait on their load time
		t.Fatal(err)
	}
	if n := loading(); n != 2 || h.state("c") == triton.StateLoading {
		t.Fatalf("%d models LOADING (c %q); want a and b, at most 2", n, h.state("c"))
	}
	h.clock.Advance(10 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { _, err := h.ctl.Step(ctx); done <- err }()
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n := loading(); n != 1 || h.state("c") != triton.StateLoading {
		t.Fatalf("second step: %d LOADING, c %q; want c alone", n, h.state("c"))
	}
	h.clock.Advance(10 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("success")); got != 3 {
		t.Errorf("loads_total{success} = %v, want 3", got)
	}
}

func TestControllerReloadsChangedDigest(t *testing.T) {
	withDigest := func(d string) plan.Catalog {
		m := model("a", plan.TierP0, 4, 10*time.Second)
		m.Digest, m.SwapOverheadBytes = d, 4*gi // Triton's reload holds old + new copy
		return catalog(m)
	}
	a := fakeModel("a", 4)
	a.LoadTime = 10 * time.Second
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{a}}, withDigest(dgA), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stepWithLoad := func() {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := h.ctl.Step(ctx); done <- err }()
		if err := h.clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(10 * time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	stepWithLoad() // first load, digest dgA
	if h.step() {
		t.Fatal("acted again with the catalog unchanged")
	}
	if err := h.ctl.SetCatalog(withDigest(dgB)); err != nil {
		t.Fatal(err)
	}
	stepWithLoad() // reload to dgB: old and new copy both held during the load
	// The plan accounted the swap: the reload's peak is old + new copy (4 + 4 GiB), and the
	// model stays accounted at its 4 GiB once the old copy is gone.
	acts := h.ctl.Status().Result.Actions
	if len(acts) != 1 || acts[0].Cause != plan.CauseDigest || acts[0].PeakBytes != 8*gi || acts[0].AccountedBytes != 4*gi {
		t.Fatalf("reload plan %+v, want one digest reload peaking at 8 GiB, 4 GiB after", acts)
	}
	st, _ := h.srv.Model("a")
	if st.Loads != 2 || st.State != triton.StateReady {
		t.Fatalf("a: %d loads, %q; want reloaded once and READY", st.Loads, st.State)
	}
	if got := h.srv.MaxDeviceUsedBytes(); got != 8*gi {
		t.Errorf("device peak %d, want the 8 GiB of old + new copy", got)
	}
	if h.step() {
		t.Fatal("acted again after the reload")
	}
	if err := h.ctl.SetCatalog(plan.Catalog{}); err == nil {
		t.Error("an invalid catalog was accepted")
	}
}

func TestWatchCatalog(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/catalog.yaml"
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(digest string) string {
		return "models: [{name: pin, digest: " + digest + ", tier: P0, peakMemoryBytes: {" + prof + ": 1Gi}}]"
	}
	write(entry(dgA))
	cat, loaded, err := ReadCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 1)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.ctl.WatchCatalog(watchCtx, path, loaded) }()
	if err := h.clock.BlockUntil(ctx, 1); err != nil { // the watcher read its baseline and waits
		t.Fatal(err)
	}
	tick := func() {
		t.Helper()
		h.clock.Advance(DefaultConfig().LoopInterval)
		if err := h.clock.BlockUntil(ctx, 1); err != nil { // the watcher read and waits again
			t.Fatal(err)
		}
	}
	digest := func() string { m, _ := h.ctl.catalog().Model("pin"); return m.Digest }

	write(entry(dgB))
	tick()
	if digest() != dgB {
		t.Fatalf("digest %s after the file changed, want %s", digest(), dgB)
	}
	write(entry(dgA))
	tick()
	if digest() != dgA {
		t.Fatalf("digest %s after the file changed back, want %s", digest(), dgA)
	}
	write("models: [{name: pin, tier: P7}]")
	tick()
	if digest() != dgA {
		t.Fatalf("an invalid catalog replaced the current one")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWatchCatalogChangedBeforeWatch: a ConfigMap update landing between the sidecar's initial
// load and the watcher's start (NVML and the Triton dial run in between) is applied on the
// watcher's first read, because its baseline is the loaded bytes, not the file at watch start.
func TestWatchCatalogChangedBeforeWatch(t *testing.T) {
	path := t.TempDir() + "/catalog.yaml"
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(digest string) string {
		return "models: [{name: pin, digest: " + digest + ", tier: P0, peakMemoryBytes: {" + prof + ": 1Gi}}]"
	}
	write(entry(dgA))
	cat, loaded, err := ReadCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	write(entry(dgB)) // the update lands before the watcher starts
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 1)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.ctl.WatchCatalog(watchCtx, path, loaded) }()
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(DefaultConfig().LoopInterval)
	if err := h.clock.BlockUntil(ctx, 1); err != nil { // first read done, waiting again
		t.Fatal(err)
	}
	if m, _ := h.ctl.catalog().Model("pin"); m.Digest != dgB {
		t.Errorf("digest %s, want %s: the update made before the watch started was ignored", m.Digest, dgB)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestControllerLoadsWithoutDeviceReading: Triton's metrics endpoint refusing connections (the
// default URL with no Triton metrics behind it) must not stop the loop: the P0 model loads on
// the accounting alone, every unreadable loop is counted, and the warning is rate-limited.
func TestControllerLoadsWithoutDeviceReading(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connection refused from now on
	cat := catalog(model("pin", plan.TierP0, 2, time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 2)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	var logs bytes.Buffer
	h.ctl.deps.Log = NewLogger(&logs, slog.LevelInfo)
	h.ctl.deps.DeviceUsedBytes = TritonMemoryProbe(gone.URL+"/metrics", nil)
	warnings := func() int { return strings.Count(logs.String(), `"msg":"device memory unreadable`) }

	if !h.step() || h.state("pin") != triton.StateReady {
		t.Fatalf("pin is %q after the first step; want READY despite the unreadable device", h.state("pin"))
	}
	h.step()
	h.clock.Advance(time.Minute)
	h.step()
	if ok, why := h.ctl.Ready(); !ok {
		t.Errorf("not ready: %s", why)
	}
	if got := testutil.ToFloat64(h.m.DeviceReadErrors); got != 3 {
		t.Errorf("device_memory_read_errors_total = %v, want 3", got)
	}
	if got := warnings(); got != 1 {
		t.Errorf("%d warnings in three loops, want 1:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the warning does not say why:\n%s", logs.String())
	}
	h.clock.Advance(deviceWarnEvery)
	h.step()
	if got := warnings(); got != 2 {
		t.Errorf("%d warnings after %s more, want 2", got, deviceWarnEvery)
	}
	h.ctl.deps.DeviceUsedBytes = func() (int64, error) { return h.srv.DeviceUsedBytes(), nil }
	h.step()
	if !strings.Contains(logs.String(), `"msg":"device memory readable again","unreadable_for":"6m0s"`) {
		t.Errorf("no recovery log:\n%s", logs.String())
	}
}

// TestControllerKeepsLeakWhileDeviceUnreadable: memory a reading showed leaked stays accounted
// while the device cannot be read, so nothing is loaded into it.
func TestControllerKeepsLeakWhileDeviceUnreadable(t *testing.T) {
	cat := catalog(model("old", plan.TierP1, 4, time.Second), model("big", plan.TierP1, 8, time.Second))
	leaky := fakeModel("old", 4)
	leaky.Fault.UnloadLeakBytes = 4 * gi
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{leaky, fakeModel("big", 8)}, StartupModels: []string{"old"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi, FreeIdle: true})
	h.step()
	h.clock.Advance(11 * time.Minute)
	if !h.step() || h.state("old") != triton.StateUnavailable {
		t.Fatalf("idle model not unloaded: %q", h.state("old"))
	}
	h.step() // reads the 4 GiB leak
	h.ctl.deps.DeviceUsedBytes = func() (int64, error) { return 0, errors.New("nvml: unknown error") }
	h.demand.set("big", 5)
	h.step()
	if st := h.state("big"); st != triton.StateUnavailable && st != "" {
		t.Fatalf("big is %q: loaded into memory the last reading showed leaked", st)
	}
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); got != 0 {
		t.Errorf("load failures %v: the controller tried a load that could not fit", got)
	}
	if got := h.ctl.Status().Result.StartBytes; got != 4*gi {
		t.Errorf("accounted = %d, want the kept 4 GiB leak", got)
	}
}

// TestControllerPinnedModelThatCanNeverFit: a P0 model whose peak + reserve exceeds the budget
// is a configuration error at start and on a catalog update (the current catalog is kept);
// models of any tier that can never fit count as unplaceable.
func TestControllerPinnedModelThatCanNeverFit(t *testing.T) {
	budget := plan.Budget{Profile: prof, TotalBytes: 9856 << 20}
	fake := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 2), fakeModel("huge", 20)}}
	bad := catalog(model("pin", plan.TierP0, 2, time.Second), model("huge", plan.TierP0, 20, time.Second))
	_, err := NewController(DefaultConfig(), bad, budget, Deps{Triton: &triton.Client{}})
	if !errors.Is(err, plan.ErrNeverFits) || !strings.Contains(err.Error(),
		`model "huge" (P0): peak 20.00GiB + reserve 0.0MiB = 20.00GiB exceeds the budget 9.62GiB of profile 1g.10gb`) {
		t.Fatalf("NewController = %v, want ErrNeverFits naming huge, its peak and the budget", err)
	}

	good := catalog(model("pin", plan.TierP0, 2, time.Second), model("huge", plan.TierP2, 20, time.Second))
	h := newHarness(t, fake, good, budget)
	if got := testutil.ToFloat64(h.m.UnplaceableModels); got != 1 {
		t.Errorf("unplaceable_models = %v, want 1 (huge, P2, above the budget)", got)
	}
	if diff := h.ctl.Status().Unplaceable; len(diff) != 1 || diff[0] != "huge" {
		t.Errorf("Status.Unplaceable = %v, want [huge]", diff)
	}
	if err := h.ctl.SetCatalog(bad); !errors.Is(err, plan.ErrNeverFits) {
		t.Fatalf("SetCatalog = %v, want ErrNeverFits", err)
	}
	if m, _ := h.ctl.catalog().Model("huge"); m.Tier != plan.TierP2 {
		t.Errorf("catalog after a rejected update has huge as %s, want the kept P2", m.Tier)
	}
	h.step()
	h.step()
	if ok, why := h.ctl.Ready(); !ok {
		t.Errorf("not ready on the kept catalog: %s", why)
	}
}

// TestControllerNeverEvictsBusyModel: busy (6 GiB) has one request executing and three queued
// (10 s each, one at a time); want (6 GiB) is wanted and worth more, and only one fits. busy is
// never unloaded while any of its requests is queued or executing: the load is refused with a
// reason naming busy, and proceeds once busy is idle. Every request succeeds.
func TestControllerNeverEvictsBusyModel(t *testing.T) {
	cat := catalog(model("busy", plan.TierP2, 6, time.Second), model("want", plan.TierP1, 6, time.Minute))
	busy := fakeModel("busy", 6)
	busy.ServiceTime = 10 * time.Second
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{busy, fakeModel("want", 6)}, StartupModels: []string{"busy"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.step()
	h.clock.Advance(3 * time.Minute) // past the minimum residency
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.infer.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "busy"}); err != nil {
				failed.Add(1)
				t.Logf("request failed: %v", err)
			}
		}()
	}
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("busy"); return st.Pending == 3 && st.Executing == 1 }); err != nil {
		t.Fatal(err)
	}
	h.demand.set("want", 5)
	h.step()
	res := h.ctl.Status().Result
	if len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason(), "busy (3 queued, 1 executing, 6.00GiB)") {
		t.Fatalf("refused %+v; want want refused naming busy with 3 queued, 1 executing", res.Refused)
	}
	if got := testutil.ToFloat64(h.m.BusyModels); got != 1 {
		t.Errorf("busy_models = %v, want 1", got)
	}
	for done := 0; done < 4; {
		st, _ := h.srv.Model("busy")
		if st.State != triton.StateReady || st.Unloads != 0 {
			t.Fatalf("busy is %s (unloads %d) with %d queued and %d executing", st.State, st.Unloads, st.Pending, st.Executing)
		}
		if err := h.clock.BlockUntil(ctx, 1); err != nil { // the executing request's timer
			t.Fatal(err)
		}
		h.clock.Advance(10 * time.Second)
		done++
		if err := h.srv.Await(ctx, func() bool {
			st, _ := h.srv.Model("busy")
			return st.Executing+st.Pending == 4-done
		}); err != nil {
			t.Fatal(err)
		}
		h.step()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	// Idle now: evicted, then want loads (the fake's load takes no time).
	h.step()
	if h.state("busy") != triton.StateUnavailable || h.state("want") != triton.StateReady {
		t.Fatalf("after busy went idle: busy %q, want %q; want UNAVAILABLE and READY", h.state("busy"), h.state("want"))
	}
}

// TestControllerAlternatingDemandBounded: two 6 GiB models on a 10 GiB slice, demand moving from
// one to the other every 30 s for an hour, the loop every 5 s. Each model's catalog load time is
// L = 45 s (the fake loads instantly), so the anti-thrash rule — a model stays at least
// plan.AntiThrashFactor × L — allows at most one load per 45 s: 80 per hour, where following
// every switch would load 120 times. The controller must stay within the rule's bound and still
// follow the demand.
func TestControllerAlternatingDemandBounded(t *testing.T) {
	const load = 45 * time.Second
	cat := catalog(model("a", plan.TierP1, 6, load), model("b", plan.TierP1, 6, load))
	cat.MinResidency = 0 // the rule alone
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("a", 6), fakeModel("b", 6)}, StartupModels: []string{"a"}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	for s := 0; s < 3600; s += 5 {
		hot, cold := "a", "b"
		if (s/30)%2 == 1 {
			hot, cold = "b", "a"
		}
		h.demand.set(cold, 0)
		if h.state(hot) == triton.StateReady {
			h.demand.set(hot, 0)
			h.requests(hot, 5) // 1 req/s
		} else {
			h.demand.set(hot, 1) // seen by the gateway while not loaded here
		}
		h.step()
		h.clock.Advance(5 * time.Second)
	}
	sa, _ := h.srv.Model("a")
	sb, _ := h.srv.Model("b")
	loads := sa.Loads + sb.Loads - 1 // a's startup load is not the controller's
	bound := int(time.Hour / (plan.AntiThrashFactor * load))
	if loads > bound || loads < 10 {
		t.Errorf("loads in an hour = %d, want 10..%d (one per %s at most; 120 if every switch loaded)", loads, bound, plan.AntiThrashFactor*load)
	}
	if h.srv.MaxDeviceUsedBytes() > 10*gi {
		t.Errorf("device peaked at %d > budget", h.srv.MaxDeviceUsedBytes())
	}
	t.Logf("loads per hour: %d (bound %d)", loads, bound)
}

// failingDemand is a demand source that fails while err is set, with a long error (as the
// Prometheus source's, which quotes the bundled query once per model).
type failingDemand struct {
	mu  sync.Mutex
	err error
}

func (d *failingDemand) Rates(_ context.Context, _ []string) (map[string]float64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return map[string]float64{}, d.err
}

// TestDemandWarningRateLimited: while the demand of models not loaded is unavailable the warning
// is logged once when it starts and then at most every deviceWarnEvery, its error cut to
// maxWarnErrBytes, and once more (INFO) when demand is back. Before, every loop logged it, the
// whole error each time (11–13 KB a line with Prometheus down and a dozen catalog models).
func TestDemandWarningRateLimited(t *testing.T) {
	cat := catalog(model("cold", plan.TierP2, 2, time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("cold", 2)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	var logs bytes.Buffer
	h.ctl.deps.Log = NewLogger(&logs, slog.LevelInfo)
	d := &failingDemand{err: errors.New("query failed: " + strings.Repeat("sum by (namespace, model) (x) ", 500))}
	h.ctl.deps.Demand = d
	warnings := func() int { return strings.Count(logs.String(), `"msg":"demand of models not loaded unavailable`) }
	for range 3 {
		h.step()
		h.clock.Advance(time.Minute)
	}
	if got := warnings(); got != 1 {
		t.Errorf("%d warnings in three loops, want 1:\n%s", got, logs.String())
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "demand of models not loaded unavailable") && len(line) > maxWarnErrBytes+512 {
			t.Errorf("warning of %d bytes, want the error cut to %d", len(line), maxWarnErrBytes)
		}
	}
	h.clock.Advance(deviceWarnEvery)
	h.step()
	if got := warnings(); got != 2 {
		t.Errorf("%d warnings after %s more, want 2", got, deviceWarnEvery)
	}
	d.mu.Lock()
	d.err = nil
	d.mu.Unlock()
	h.step()
	if !strings.Contains(logs.String(), `"msg":"demand of models not loaded available again","unavailable_for":"8m0s"`) {
		t.Errorf("no recovery log:\n%s", logs.String())
	}
}
