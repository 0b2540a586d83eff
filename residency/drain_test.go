package residency

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// newDrainHarness is a harness whose controller has drain settings and an HTTP server.
func newDrainHarness(t *testing.T, serviceTime time.Duration) (*harness, *Drainer, *httptest.Server) {
	t.Helper()
	cat := catalog(model("m", plan.TierP0, 1, time.Second))
	fm := fakeModel("m", 1)
	fm.ServiceTime = serviceTime
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fm}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = h.srv.MetricsURL()
	cfg.PropagationDelay = 5 * time.Second
	cfg.DrainPollInterval = time.Second
	cfg.DrainTimeout = 30 * time.Second
	dr := NewDrainer(cfg, h.ctl, nil)
	reg := prometheus.NewRegistry()
	web := httptest.NewServer(NewHandler(h.ctl, dr, reg))
	t.Cleanup(web.Close)
	h.step()
	h.step()
	if ok, why := h.ctl.Ready(); !ok {
		t.Fatalf("not ready before the drain: %s", why)
	}
	return h, dr, web
}

// drive advances the fake clock a second at a time, whenever at least parked timers wait on it,
// until done is closed.
func drive(ctx context.Context, t *testing.T, clock *tritontest.FakeClock, parked int, done <-chan struct{}) {
	t.Helper()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-dctx.Done():
		}
	}()
	for {
		if err := clock.BlockUntil(dctx, parked); err != nil {
			select {
			case <-done:
				return
			default:
				t.Fatalf("drive: %v", err)
			}
		}
		clock.Advance(time.Second)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestDrainWithRequestsInFlightDropsNothing(t *testing.T) {
	h, dr, web := newDrainHarness(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	send := func(n int) {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.infer.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "m"}); err != nil {
					failed.Add(1)
					t.Logf("request failed: %v", err)
					return
				}
				ok.Add(1)
			}()
		}
	}
	send(6) // one executes, five queue
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("m"); return st.Pending == 5 && st.Executing == 1 }); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		code int
		body string
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Post(web.URL+"/drain", "", nil)
		if err != nil {
			answered <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, strings.TrimSpace(string(b))}
	}()
	// The executing request and the propagation delay both wait on the clock.
	if err := h.clock.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, web.URL+"/readyz"); code != http.StatusServiceUnavailable || body != "draining" {
		t.Fatalf("/readyz during drain = %d %q; want 503 draining at once", code, body)
	}
	send(2) // stragglers routed before the endpoint removal propagated
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("m"); return st.Pending == 7 }); err != nil {
		t.Fatal(err)
	}

	drive(ctx, t, h.clock, 1, dr.Done())
	a := <-answered
	if a.code != http.StatusOK || a.body != "drained" {
		t.Fatalf("POST /drain = %d %q", a.code, a.body)
	}
	// Triton's preStop returned: Kubernetes stops Triton, which finishes what is executing.
	shut := make(chan struct{})
	go func() { defer close(shut); _ = h.srv.Shutdown(ctx) }()
	drive(ctx, t, h.clock, 1, shut)
	wg.Wait()
	if failed.Load() != 0 || ok.Load() != 8 {
		t.Fatalf("requests: %d ok, %d failed; want 8 ok, 0 failed", ok.Load(), failed.Load())
	}
	if got := testutil.ToFloat64(h.m.DrainSeconds); got < 5 {
		t.Errorf("drain_duration_seconds = %v, want at least the 5s propagation delay", got)
	}
	// A second drain request joins the finished drain.
	if err := dr.Drain(ctx); err != nil {
		t.Errorf("second Drain = %v", err)
	}
}

func TestDrainDeadline(t *testing.T) {
	h, dr, web := newDrainHarness(t, time.Hour) // queued work that never ends within the test (1 h: tritontest's longest service time)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reqCtx, stopReqs := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = h.infer.ModelInfer(reqCtx, &inference.ModelInferRequest{ModelName: "m"})
		}()
	}
	defer func() { stopReqs(); wg.Wait() }()
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("m"); return st.Pending == 1 }); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- dr.Drain(ctx) }()
	drive(ctx, t, h.clock, 2, dr.Done()) // the executing request's timer and the drain's
	if err := <-errc; !errors.Is(err, ErrDrainTimeout) {
		t.Fatalf("Drain = %v, want ErrDrainTimeout", err)
	}
	resp, err := http.Post(web.URL+"/drain", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("POST /drain after a timed-out drain = %d, want 504", resp.StatusCode)
	}
}

func TestHTTPEndpoints(t *testing.T) {
	cat := catalog(model("m", plan.TierP0, 1, time.Second))
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("m", 1)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h.ctl.m = m
	web := httptest.NewServer(NewHandler(h.ctl, NewDrainer(DefaultConfig(), h.ctl, nil), reg))
	defer web.Close()

	if code, _ := get(t, web.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := get(t, web.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "triton not observed") {
		t.Errorf("/readyz before observing = %d %q", code, body)
	}
	h.step()
	if code, body := get(t, web.URL+"/readyz"); code != http.StatusServiceUnavailable || body != "P0 models not READY: m" {
		t.Errorf("/readyz while loading = %d %q", code, body)
	}
	h.step()
	if code, body := get(t, web.URL+"/readyz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	code, body := get(t, web.URL+"/metrics")
	for _, want := range []string{"inferscale_residency_resident_models 1", "inferscale_residency_ready 1",
		`inferscale_residency_loads_total{result="success"} 1`, "inferscale_residency_accounted_bytes 1.073741824e+09",
		"inferscale_residency_load_duration_seconds_bucket", "inferscale_residency_drain_duration_seconds 0"} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get(t, web.URL+"/drain"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /drain = %d, want 405", code)
	}
}

// TestDrainLogsWithoutMetrics: without Triton's metrics (no URL, or the endpoint refusing
// connections) the drain reads statistics alone and drains (confirmed by the unload a poll
// later); the queue length is unknown, and the log says so instead of -1; durations are
// written as "5s", not nanoseconds.
func TestDrainLogsWithoutMetrics(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	for _, url := range []string{"", gone.URL + "/metrics"} {
		t.Run("url="+url, func(t *testing.T) { testDrainLogsWithoutMetrics(t, url) })
	}
}

func testDrainLogsWithoutMetrics(t *testing.T, url string) {
	h, _, _ := newDrainHarness(t, time.Second)
	var buf bytes.Buffer
	h.ctl.deps.Log = NewLogger(&buf, slog.LevelInfo)
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = url
	cfg.PropagationDelay = 5 * time.Second
	dr := NewDrainer(cfg, h.ctl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- dr.Drain(ctx) }()
	drive(ctx, t, h.clock, 1, dr.Done())
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		got[rec["msg"].(string)] = rec
	}
	if p := got["drain: propagation delay over"]["took"]; p != "5s" {
		t.Errorf("propagation took = %#v, want \"5s\"", p)
	}
	quiet := got["drain: queues empty and counters quiet; confirming by unloading"]
	if quiet["pending"] != "unknown" {
		t.Errorf("quiet pending = %#v, want \"unknown\"", quiet["pending"])
	}
	if took, ok := quiet["took"].(string); !ok || took != "1s" {
		t.Errorf("quiet took = %#v, want \"1s\" (two equal reads a second apart)", quiet["took"])
	}
	// One poll later the index confirms: the unloaded model had nothing in flight.
	if took, ok := got["drain: Triton idle"]["took"].(string); !ok || took != "2s" {
		t.Errorf("idle took = %#v, want \"2s\"", got["drain: Triton idle"]["took"])
	}
}

// TestDrainWaitsForLongRequest: a request executing alone for 3 s, three drain polls, leaves no
// trace in Triton's queue or counters until it ends; the drain reports drained only after it
// finished (confirmed by the unload, which Triton completes after the request), and the client
// sees no error.
func TestDrainWaitsForLongRequest(t *testing.T) {
	h, _, _ := newDrainHarness(t, 3*time.Second)
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = h.srv.MetricsURL()
	cfg.PropagationDelay = time.Second
	cfg.DrainPollInterval = time.Second
	dr := NewDrainer(cfg, h.ctl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() {
		_, err := h.infer.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "m"})
		served <- err
	}()
	if err := h.srv.Await(ctx, func() bool { st, _ := h.srv.Model("m"); return st.Executing == 1 }); err != nil {
		t.Fatal(err)
	}
	start := h.clock.Now()
	errc := make(chan error, 1)
	go func() { errc <- dr.Drain(ctx) }()
	// Advance a second at a time once every timer waits: the request's and the drain's while
	// the request executes, the drain's after.
	for done := false; !done; {
		select {
		case <-dr.Done():
			done = true
			continue
		default:
		}
		parked := 1
		if st, _ := h.srv.Model("m"); st.Executing > 0 {
			parked = 2
		}
		bctx, stop := context.WithTimeout(ctx, 20*time.Millisecond)
		err := h.clock.BlockUntil(bctx, parked)
		stop()
		if err == nil {
			h.clock.Advance(time.Second)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Drain = %v", err)
	}
	st, _ := h.srv.Model("m")
	if st.Executing != 0 || st.Pending != 0 {
		t.Fatalf("drained at +%s with %d executing, %d queued", h.clock.Now().Sub(start), st.Executing, st.Pending)
	}
	if took := h.clock.Now().Sub(start); took < 3*time.Second {
		t.Errorf("drained after %s, before the 3 s request could finish", took)
	}
	if err := <-served; err != nil {
		t.Errorf("the request failed: %v", err)
	}
}

// TestDrainTritonUnreachable (issue 12): with Triton gone, a drain — SIGTERM's path — ends after
// unreachableReads reads a poll apart, neither the propagation delay nor the drain deadline,
// returns nil (nothing can be in flight there) and says why.
func TestDrainTritonUnreachable(t *testing.T) {
	h, _, _ := newDrainHarness(t, time.Second)
	var buf bytes.Buffer
	h.ctl.deps.Log = NewLogger(&buf, slog.LevelInfo)
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = h.srv.MetricsURL()
	cfg.PropagationDelay, cfg.DrainTimeout = time.Minute, 10*time.Minute
	dr := NewDrainer(cfg, h.ctl, nil)
	if err := h.srv.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := h.clock.Now()
	errc := make(chan error, 1)
	go func() { errc <- dr.Drain(ctx) }()
	drive(ctx, t, h.clock, 1, dr.Done())
	if err := <-errc; err != nil {
		t.Fatalf("Drain = %v, want nil", err)
	}
	if took, want := h.clock.Now().Sub(start), (unreachableReads-1)*cfg.DrainPollInterval; took != want {
		t.Errorf("drain took %s, want %s (%d reads a poll apart)", took, want, unreachableReads)
	}
	if !strings.Contains(buf.String(), `"msg":"drain: Triton unreachable; nothing can be in flight there, so the drain ends now"`) ||
		strings.Contains(buf.String(), "work left") {
		t.Errorf("the log does not say why:\n%s", buf.String())
	}
	if ok, why := h.ctl.Ready(); ok || why != "draining" {
		t.Errorf("Ready = %v %q, want not ready: draining", ok, why)
	}
}

// TestDrainWaitsForFront: Triton's queue and counters are quiet, but the sidecar's inference
// front still holds (or forwards) two requests — held for a model whose load is under way, which
// Triton's counters cannot see. The drain neither confirms by unloading (that would unload the
// model those requests wait for) nor reports drained until the front reads 0 active; then it
// unloads, confirms and ends. Before, it answered drained with the front's requests still held.
func TestDrainWaitsForFront(t *testing.T) {
	h, _, _ := newDrainHarness(t, 0)
	var active atomic.Int32
	active.Store(2)
	h.ctl.deps.FrontActive = func() int { return int(active.Load()) }
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = h.srv.MetricsURL()
	cfg.PropagationDelay = time.Second
	cfg.DrainPollInterval = time.Second
	cfg.DrainTimeout = time.Minute
	dr := NewDrainer(cfg, h.ctl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- dr.Drain(ctx) }()
	start := h.clock.Now()
	for range 10 { // the propagation delay, then nine polls of quiet counters
		bctx, stop := context.WithTimeout(ctx, 5*time.Second)
		err := h.clock.BlockUntil(bctx, 1)
		stop()
		select {
		case derr := <-errc:
			t.Fatalf("Drain = %v after %s with the front still holding 2 requests", derr, h.clock.Now().Sub(start))
		default:
		}
		if err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
	}
	if st, _ := h.srv.Model("m"); st.State != "READY" {
		t.Fatalf("m is %s while the front holds requests, want READY (not unloaded to confirm the drain)", st.State)
	}
	active.Store(0)
	opened := h.clock.Now()
	for {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("Drain = %v", err)
			}
			if st, _ := h.srv.Model("m"); st.State == "READY" {
				t.Errorf("m still READY after the drain, want unloaded (the confirmation)")
			}
			if h.clock.Now().Before(opened) {
				t.Errorf("drained at %s, before the front went idle at %s", h.clock.Now(), opened)
			}
			return
		default:
		}
		bctx, stop := context.WithTimeout(ctx, 20*time.Millisecond)
		err := h.clock.BlockUntil(bctx, 1)
		stop()
		if err == nil {
			h.clock.Advance(time.Second)
		}
		if ctx.Err() != nil {
			t.Fatal("the drain did not end after the front went idle")
		}
	}
}
