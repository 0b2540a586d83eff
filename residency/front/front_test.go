package front_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readiness is the sidecar's view in miniature: catalog models are Ready when tritontest has
// them READY and NotReady otherwise, unless set to a fixed verdict; other names are
// NotInCatalog.
type readiness struct {
	triton *tritontest.Server
	mu     sync.Mutex
	fixed  map[string]front.Verdict
	cat    map[string]bool
}

func (r *readiness) Verdict(model string) front.Verdict {
	r.mu.Lock()
	v, fixed := r.fixed[model]
	inCat := r.cat[model]
	r.mu.Unlock()
	switch {
	case fixed:
		return v
	case !inCat:
		return front.NotInCatalog
	}
	if st, ok := r.triton.Model(model); ok && st.State == triton.StateReady {
		return front.Ready
	}
	return front.NotReady
}

func (r *readiness) set(model string, v front.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fixed[model] = v
}

type harness struct {
	triton *tritontest.Server
	front  *front.Front
	m      *front.Metrics
	ready  *readiness
	reg    *prometheus.Registry
	// client calls through the front; direct calls tritontest.
	client, direct inference.GRPCInferenceServiceClient
	// conn is the client's connection to the front at addr.
	conn *grpc.ClientConn
	addr string
	// holds and idles list the models OnHold and OnIdle were called for, in order.
	mu           sync.Mutex
	holds, idles []string
}

// start serves tritontest and a front before it. With load set, OnHold loads the model in
// tritontest, as the planner would; catalog lists the catalog's models.
func start(t testing.TB, tcfg tritontest.Config, fcfg front.Config, load bool, catalog ...string) *harness {
	t.Helper()
	return startWith(t, tcfg, fcfg, load, nil, catalog...)
}

func startWith(t testing.TB, tcfg tritontest.Config, fcfg front.Config, load bool, dialOpts []grpc.DialOption, catalog ...string) *harness {
	t.Helper()
	ts := tritontest.Start(t, tcfg)
	h := &harness{triton: ts, reg: prometheus.NewRegistry(),
		ready: &readiness{triton: ts, fixed: map[string]front.Verdict{}, cat: map[string]bool{}}}
	for _, m := range catalog {
		h.ready.cat[m] = true
	}
	tc, err := triton.Dial(ts.GRPCAddr(), triton.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	loadCtx, cancelLoads := context.WithCancel(context.Background())
	var loads sync.WaitGroup
	m, err := front.NewMetrics(h.reg)
	if err != nil {
		t.Fatal(err)
	}
	fcfg.Upstream = ts.GRPCAddr()
	f, err := front.New(fcfg, front.Deps{Readiness: h.ready, Metrics: m, DialOptions: dialOpts, OnHold: func(model string) {
		h.mu.Lock()
		h.holds = append(h.holds, model)
		h.mu.Unlock()
		if load {
			loads.Go(func() { _ = tc.Load(loadCtx, model, triton.LoadOptions{}) })
		}
	}, OnIdle: func(model string) {
		h.mu.Lock()
		h.idles = append(h.idles, model)
		h.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.front, h.m = f, m
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.Serve(ln) }()
	h.addr = ln.Addr().String()
	h.conn = dial(t, h.addr)
	h.client = inference.NewGRPCInferenceServiceClient(h.conn)
	h.direct = inference.NewGRPCInferenceServiceClient(dial(t, ts.GRPCAddr()))
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("front.Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("front.Serve: %v", err)
		}
		cancelLoads()
		loads.Wait()
		_ = tc.Close()
	})
	return h
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func infer(ctx context.Context, c inference.GRPCInferenceServiceClient, model, id string, trailer *metadata.MD) (*inference.ModelInferResponse, error) {
	if trailer == nil {
		trailer = new(metadata.MD)
	}
	return c.ModelInfer(ctx, &inference.ModelInferRequest{ModelName: model, Id: id,
		Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{make([]byte, 16)}}, grpc.Trailer(trailer))
}

func testConfig() front.Config {
	c := front.DefaultConfig()
	c.HoldTimeout = 30 * time.Second
	return c
}

func oneModel(name string, load time.Duration) tritontest.Config {
	c := tritontest.DefaultConfig()
	c.Models = []tritontest.Model{{Name: name, MemoryBytes: 1 << 30, LoadTime: load, ServiceTime: time.Millisecond, Concurrency: 4}}
	return c
}

// TestHoldThroughLoad: 50 requests for a model with a 3 s load time, sent while it is not
// loaded, all succeed; none waits longer than the load plus one loop interval of the
// residency controller (its default, 5 s: the bound a controller-driven load meets).
func TestHoldThroughLoad(t *testing.T) {
	const load = 3 * time.Second
	h := start(t, oneModel("resnet", load), testConfig(), true, "resnet")
	var wg sync.WaitGroup
	errs := make([]error, 50)
	waits := make([]time.Duration, 50)
	for i := range 50 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := infer(ctx, h.client, "resnet", strconv.Itoa(i), nil)
			waits[i] = time.Since(start)
			if err == nil && (resp.GetModelName() != "resnet" || resp.GetId() != strconv.Itoa(i)) {
				err = errors.New("response for " + resp.GetModelName() + "/" + resp.GetId())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
	bound := load + residency.DefaultConfig().LoopInterval
	longest := slices.Max(waits)
	t.Logf("longest wait %s (load %s, bound %s)", longest, load, bound)
	if longest > bound {
		t.Errorf("longest wait %s, want <= %s (load + one loop interval)", longest, bound)
	}
	st, _ := h.triton.Model("resnet")
	if st.Loads != 1 {
		t.Errorf("tritontest loads = %d, want 1", st.Loads)
	}
	h.mu.Lock()
	holds := slices.Clone(h.holds)
	h.mu.Unlock()
	if diff := cmp.Diff([]string{"resnet"}, holds); diff != "" {
		t.Errorf("OnHold calls (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.m.Forwarded.WithLabelValues("resnet")); got != 50 {
		t.Errorf("forwarded_total = %v, want 50", got)
	}
	if got := testutil.ToFloat64(h.m.HeldRequests.WithLabelValues("resnet")); got != 0 {
		t.Errorf("held_requests after release = %v, want 0", got)
	}
	if n := holdCount(t, h.reg, "resnet"); n != 50 {
		t.Errorf("hold_seconds count = %d, want 50", n)
	}
}

// holdCount is the sample count of inferscale_front_hold_seconds{model}.
func holdCount(t *testing.T, reg *prometheus.Registry, model string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "inferscale_front_hold_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" && l.GetValue() == model {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// waitHeld waits until the front holds n requests for the model.
func waitHeld(t testing.TB, h *harness, model string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.front.Held()[model].Requests != n {
		if time.Now().After(deadline) {
			t.Fatalf("held %v, want %d for %s", h.front.Held(), n, model)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReleaseInArrivalOrder: requests held one after another are sent to Triton in that order
// once the model is ready, each after the one before it is on its way. (Triton's gRPC server
// then runs each call on its own thread, so its queue may swap calls that arrive microseconds
// apart; the front's order is the one it controls.)
func TestReleaseInArrivalOrder(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if md, _ := metadata.FromOutgoingContext(ctx); method == inference.GRPCInferenceService_ModelInfer_FullMethodName {
			mu.Lock()
			sent = append(sent, md.Get("x-id")...)
			mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	h := startWith(t, oneModel("bert", 0), testConfig(), false, []grpc.DialOption{grpc.WithChainUnaryInterceptor(record)}, "bert")
	var wg sync.WaitGroup
	var want []string
	for i := range 10 {
		id := strconv.Itoa(i)
		want = append(want, id)
		wg.Go(func() {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-id", id)
			if _, err := infer(ctx, h.client, "bert", id, nil); err != nil {
				t.Errorf("request %s: %v", id, err)
			}
		})
		waitHeld(t, h, "bert", i+1)
	}
	if _, err := h.direct.RepositoryModelLoad(context.Background(), &inference.RepositoryModelLoadRequest{ModelName: "bert"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, sent); diff != "" {
		t.Errorf("order sent to Triton (-want +got):\n%s", diff)
	}
}

// TestFailFast: requests the front cannot serve within the hold budget are answered at once,
// UNAVAILABLE with the retry pushback or NOT_FOUND, long before the 10 s hold timeout (the
// call has a 1 s deadline; DEADLINE_EXCEEDED would mean it was held).
func TestFailFast(t *testing.T) {
	cfg := testConfig()
	cfg.HoldTimeout = 10 * time.Second
	cfg.MaxHeldRequests = 1
	cfg.RetryPushback = 1500 * time.Millisecond
	tc := tritontest.DefaultConfig()
	for _, n := range []string{"quarantined", "huge", "busy"} {
		tc.Models = append(tc.Models, tritontest.Model{Name: n, MemoryBytes: 1 << 30})
	}
	h := start(t, tc, cfg, false, "quarantined", "huge", "busy")
	h.ready.set("quarantined", front.Quarantined)
	h.ready.set("huge", front.NeverFits)
	// One request holds busy's only hold slot.
	heldCtx, cancelHeld := context.WithCancel(context.Background())
	heldDone := make(chan error, 1)
	go func() {
		_, err := infer(heldCtx, h.client, "busy", "first", nil)
		heldDone <- err
	}()
	waitHeld(t, h, "busy", 1)

	tests := []struct {
		name, model  string
		wantCode     codes.Code
		wantPushback []string
		reason       string
		label        string
	}{
		{"quarantined", "quarantined", codes.Unavailable, []string{"1500"}, "quarantined", "quarantined"},
		{"never fits", "huge", codes.Unavailable, []string{"1500"}, "never_fits", "huge"},
		{"hold queue full", "busy", codes.Unavailable, []string{"1500"}, "queue_full", "busy"},
		{"not in catalog", "nosuchmodel", codes.NotFound, nil, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var tr metadata.MD
			start := time.Now()
			_, err := infer(ctx, h.client, tt.model, "x", &tr)
			t.Logf("answered in %s: %v", time.Since(start), err)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code = %v, want %v (err %v)", got, tt.wantCode, err)
			}
			if diff := cmp.Diff(tt.wantPushback, tr.Get(front.PushbackKey)); diff != "" {
				t.Errorf("%s trailer (-want +got):\n%s", front.PushbackKey, diff)
			}
			if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues(tt.label, tt.reason)); got != 1 {
				t.Errorf("fast_failed_total{model=%q,reason=%q} = %v, want 1", tt.label, tt.reason, got)
			}
		})
	}
	cancelHeld()
	if err := <-heldDone; status.Code(err) != codes.Canceled {
		t.Errorf("cancelled held request: %v, want Canceled", err)
	}
	waitHeld(t, h, "busy", 0)
	if got := testutil.ToFloat64(h.m.HoldFailed.WithLabelValues("busy", "cancelled")); got != 1 {
		t.Errorf("hold_failed_total{busy,cancelled} = %v, want 1", got)
	}
}

// TestHoldBounds: a model that does not become ready fails at the hold timeout, UNAVAILABLE
// with pushback; a client deadline shorter than the hold timeout ends the hold first.
func TestHoldBounds(t *testing.T) {
	cfg := testConfig()
	cfg.HoldTimeout = time.Second
	h := start(t, oneModel("slow", 0), cfg, false, "slow")

	var tr metadata.MD
	start := time.Now()
	_, err := infer(context.Background(), h.client, "slow", "a", &tr)
	took := time.Since(start)
	if status.Code(err) != codes.Unavailable || len(tr.Get(front.PushbackKey)) != 1 {
		t.Errorf("after the hold timeout: %v, trailer %v; want Unavailable with %s", err, tr, front.PushbackKey)
	}
	if took < cfg.HoldTimeout {
		t.Errorf("answered after %s, want >= the %s hold timeout", took, cfg.HoldTimeout)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = infer(ctx, h.client, "slow", "b", nil)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("with a 200ms deadline: %v, want DeadlineExceeded", err)
	}
	waitHeld(t, h, "slow", 0)
	if got := testutil.ToFloat64(h.m.HoldFailed.WithLabelValues("slow", "hold_timeout")); got != 1 {
		t.Errorf("hold_failed_total{slow,hold_timeout} = %v, want 1", got)
	}
}

// TestStaleReadyHeld: the front's view says READY but Triton has unloaded the model (answers
// NOT_FOUND): the request is held and served once the model is loaded again, not failed.
func TestStaleReadyHeld(t *testing.T) {
	h := start(t, oneModel("evicted", 200*time.Millisecond), testConfig(), true, "evicted")
	h.ready.set("evicted", front.Ready)
	resp, err := infer(context.Background(), h.client, "evicted", "7", nil)
	if err != nil || resp.GetId() != "7" {
		t.Fatalf("infer: %v, %v; want id 7", resp, err)
	}
	if st, _ := h.triton.Model("evicted"); st.Loads != 1 {
		t.Errorf("loads = %d, want 1", st.Loads)
	}
}

// TestPassThrough: RPCs other than inference reach Triton unchanged: the same answers as
// straight to tritontest, NOT_FOUND included.
func TestPassThrough(t *testing.T) {
	tc := oneModel("a", 0)
	tc.StartupModels = []string{"a"}
	h := start(t, tc, testConfig(), false, "a")
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func(inference.GRPCInferenceServiceClient) (any, error)
	}{
		{"ServerReady", func(c inference.GRPCInferenceServiceClient) (any, error) {
			r, err := c.ServerReady(ctx, &inference.ServerReadyRequest{})
			return r.GetReady(), err
		}},
		{"RepositoryIndex", func(c inference.GRPCInferenceServiceClient) (any, error) {
			r, err := c.RepositoryIndex(ctx, &inference.RepositoryIndexRequest{})
			return r.String(), err
		}},
		{"ModelStatistics unknown", func(c inference.GRPCInferenceServiceClient) (any, error) {
			r, err := c.ModelStatistics(ctx, &inference.ModelStatisticsRequest{Name: "zzz"})
			return r.String(), err
		}},
		{"ModelInfer ready", func(c inference.GRPCInferenceServiceClient) (any, error) {
			r, err := infer(ctx, c, "a", "id-1", nil)
			return r.GetModelName() + "/" + r.GetModelVersion() + "/" + r.GetId(), err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, wantErr := c.call(h.direct)
			got, gotErr := c.call(h.client)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answer (-direct +front):\n%s", diff)
			}
			if status.Code(wantErr) != status.Code(gotErr) || status.Convert(wantErr).Message() != status.Convert(gotErr).Message() {
				t.Errorf("error: front %v, direct %v", gotErr, wantErr)
			}
		})
	}
}

// TestDrain: a draining front refuses new inference requests with UNAVAILABLE and a pushback,
// and Drain returns only once the request it held has been served.
func TestDrain(t *testing.T) {
	h := start(t, oneModel("m", 0), testConfig(), false, "m")
	h.ready.set("m", front.Loading) // its load is under way: a drain lets it finish
	heldDone := make(chan error, 1)
	go func() {
		_, err := infer(context.Background(), h.client, "m", "held", nil)
		heldDone <- err
	}()
	waitHeld(t, h, "m", 1)
	drained := make(chan error, 1)
	go func() { drained <- h.front.Drain(context.Background()) }()

	var tr metadata.MD
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for { // Drain starts refusing once its goroutine runs
		tr = nil
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = infer(ctx, h.client, "m", "new", &tr)
		cancel()
		if status.Code(err) == codes.Unavailable || time.Now().After(deadline) {
			break
		}
	}
	if status.Code(err) != codes.Unavailable || len(tr.Get(front.PushbackKey)) != 1 {
		t.Errorf("new request while draining: %v, trailer %v; want Unavailable with pushback", err, tr)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v while a request was held", err)
	default:
	}
	if _, err := h.direct.RepositoryModelLoad(context.Background(), &inference.RepositoryModelLoadRequest{ModelName: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := <-heldDone; err != nil {
		t.Errorf("held request: %v", err)
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
}

// TestDrainDeadline: when the drain's context ends first, held requests fail UNAVAILABLE and
// Drain says so.
func TestDrainDeadline(t *testing.T) {
	h := start(t, oneModel("m", 0), testConfig(), false, "m")
	h.ready.set("m", front.Loading) // a load that does not finish before the drain's deadline
	heldDone := make(chan error, 1)
	go func() {
		_, err := infer(context.Background(), h.client, "m", "held", nil)
		heldDone <- err
	}()
	waitHeld(t, h, "m", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.front.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain: %v, want DeadlineExceeded", err)
	}
	if err := <-heldDone; status.Code(err) != codes.Unavailable {
		t.Errorf("held request: %v, want Unavailable", err)
	}
}

// TestStartDrain: while endpoints are being removed the front still forwards requests for READY
// models, refuses at once those it would hold (a draining pod loads nothing), and keeps
// holding what it held for a model whose load is under way, until that load is done.
func TestStartDrain(t *testing.T) {
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "loaded", MemoryBytes: 1 << 30}, {Name: "cold", MemoryBytes: 1 << 30}}
	tc.StartupModels = []string{"loaded"}
	h := start(t, tc, testConfig(), false, "loaded", "cold")
	heldDone := make(chan error, 1)
	before := time.Now()
	go func() {
		_, err := infer(context.Background(), h.client, "cold", "held", nil)
		heldDone <- err
	}()
	waitHeld(t, h, "cold", 1)
	since := h.front.Held()["cold"].Since
	if since.Before(before) || since.After(time.Now()) {
		t.Errorf("held cold since %v, want the request's arrival, between %v and now", since, before)
	}
	h.ready.set("cold", front.Loading)
	h.front.StartDrain()
	if _, err := infer(context.Background(), h.client, "loaded", "1", nil); err != nil {
		t.Errorf("READY model while draining: %v, want served", err)
	}
	var tr metadata.MD
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := infer(ctx, h.client, "cold", "2", &tr); status.Code(err) != codes.Unavailable || len(tr.Get(front.PushbackKey)) != 1 {
		t.Errorf("model not READY while draining: %v, trailer %v; want Unavailable with pushback", err, tr)
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("cold", "draining")); got != 1 {
		t.Errorf("fast_failed_total{cold,draining} = %v, want 1", got)
	}
	if got := h.front.Held()["cold"]; got.Requests != 1 || !got.Since.Equal(since) {
		t.Errorf("held cold = %+v, want the request held before the drain still held, since %v", got, since)
	}
	if _, err := h.direct.RepositoryModelLoad(context.Background(), &inference.RepositoryModelLoadRequest{ModelName: "cold"}); err != nil {
		t.Fatal(err)
	}
	if err := <-heldDone; err != nil {
		t.Errorf("request held before the drain: %v, want served", err)
	}
}

// TestStartDrainFailsHeldNotLoading: a request held for a model that is not loading when the
// pod starts draining can never be served here (a draining pod starts no load), so StartDrain
// answers it UNAVAILABLE with the pushback at once, to be retried on another replica, instead
// of keeping it until the drain's deadline. Before, it waited out the whole drain and then
// failed all the same.
func TestStartDrainFailsHeldNotLoading(t *testing.T) {
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "cold", MemoryBytes: 1 << 30}}
	fcfg := testConfig()
	fcfg.RecheckInterval = 10 * time.Second // the most: within 5 s only StartDrain's own re-check ends the hold
	h := start(t, tc, fcfg, false, "cold")
	heldDone := make(chan error, 1)
	var tr metadata.MD
	go func() {
		_, err := infer(context.Background(), h.client, "cold", "held", &tr)
		heldDone <- err
	}()
	waitHeld(t, h, "cold", 1)
	h.front.StartDrain()
	select {
	case err := <-heldDone:
		if status.Code(err) != codes.Unavailable || len(tr.Get(front.PushbackKey)) != 1 ||
			status.Convert(err).Message() != `model "cold" is not loaded and the pod is draining (it loads nothing more): retry on another replica` {
			t.Errorf("held request at StartDrain: %v, trailer %v; want Unavailable with pushback, naming the drain", err, tr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was still held 5 s after StartDrain (the re-check is every 10 s)")
	}
	if got := testutil.ToFloat64(h.m.HoldFailed.WithLabelValues("cold", "draining")); got != 1 {
		t.Errorf("hold_failed_total{cold,draining} = %v, want 1", got)
	}
	if got := h.front.Held(); len(got) != 0 {
		t.Errorf("held after StartDrain = %v, want none", got)
	}
	if got := h.front.Active(); got != 0 {
		t.Errorf("Active after the held request failed = %d, want 0", got)
	}
}
