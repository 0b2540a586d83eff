package scaler

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fixed start of every scenario.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeSignals is an in-memory Signals: the test sets each (namespace, kind)
// result directly, as the poller's snapshot would hold it.
type fakeSignals struct {
	mu      sync.Mutex
	results map[string]prom.Result // by namespace/kind
	subs    []prom.Request
	err     error // returned by Subscribe when set
}

func newFakeSignals() *fakeSignals { return &fakeSignals{results: map[string]prom.Result{}} }

func (f *fakeSignals) set(ns string, k prom.Kind, r prom.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[ns+"/"+string(k)] = r
}

func (f *fakeSignals) Subscribe(r prom.Request) (SignalHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.subs = append(f.subs, r)
	return fakeHandle{f, r.Namespace + "/" + string(r.Kind)}, nil
}

type fakeHandle struct {
	f   *fakeSignals
	key string
}

func (h fakeHandle) Result() prom.Result {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.results[h.key]
}
func (fakeHandle) Close() {}

type fakeTargets map[string]Target

func (ft fakeTargets) Lookup(ns, name string) (Target, bool) { t, ok := ft[ns+"/"+name]; return t, ok }

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time)     { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

type harness struct {
	srv    *Server
	client pb.ExternalScalerClient
	health healthpb.HealthClient
	clock  *fakeClock
	sig    *fakeSignals
	reg    *prometheus.Registry
}

// newHarness serves a Server over bufconn with KEDA's own client stubs.
func newHarness(t *testing.T, targets Targets) *harness {
	t.Helper()
	return newHarnessIn(t, targets, "")
}

// newHarnessIn is newHarness for a scaler with --watch-namespace=watchNamespace.
func newHarnessIn(t *testing.T, targets Targets, watchNamespace string) *harness {
	t.Helper()
	return newHarnessConfig(t, targets, func(c *ServerConfig) { c.WatchNamespace = watchNamespace })
}

// newHarnessConfig is newHarness with edit applied to the ServerConfig.
func newHarnessConfig(t *testing.T, targets Targets, edit func(*ServerConfig)) *harness {
	t.Helper()
	h := &harness{clock: &fakeClock{t: t0}, sig: newFakeSignals(), reg: prometheus.NewRegistry()}
	hs := health.NewServer()
	var tg Targets
	if targets != nil {
		tg = targets
	}
	cfg := ServerConfig{
		Defaults:        Defaults{PrometheusAddress: "http://prometheus:9090"},
		RefreshInterval: 5 * time.Second,
		ForgetAfter:     10 * time.Minute,
	}
	edit(&cfg)
	srv, err := NewServer(cfg, h.sig, tg, nil, hs)
	if err != nil {
		t.Fatal(err)
	}
	srv.now = h.clock.now
	h.srv = srv
	h.reg.MustRegister(newDecisionCollector(srv))
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	pb.RegisterExternalScalerServer(gs, srv)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		gs.Stop()
	})
	h.client = pb.NewExternalScalerClient(conn)
	h.health = healthpb.NewHealthClient(conn)
	return h
}

// queueMeta: custom queue query with μ = ρ = 1 and D = 1 s, so the answer equals ⌈Q⌉.
func queueMeta(kv ...string) map[string]string {
	m := map[string]string{
		"scalerAddress":     "inferscale:9090",
		"queueQuery":        "sum(gateway_queue_depth)",
		"replicaThroughput": "1", "targetUtilization": "1", "drainSeconds": "1",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func ref(ns, name string, meta map[string]string) *pb.ScaledObjectRef {
	return &pb.ScaledObjectRef{Namespace: ns, Name: name, ScalerMetadata: meta}
}

// kedaValue reads a MetricValue the way KEDA v2.21 does
// (externalScaler.GetMetricsAndActivity): the float when > 0, else the int.
func kedaValue(v *pb.MetricValue) float64 {
	if v.MetricValueFloat > 0 {
		return v.MetricValueFloat
	}
	return float64(v.MetricValue)
}

func (h *harness) metrics(t *testing.T, r *pb.ScaledObjectRef) (*pb.MetricValue, error) {
	t.Helper()
	ctx := context.Background()
	spec, err := h.client.GetMetricSpec(ctx, r)
	if err != nil {
		t.Fatalf("GetMetricSpec: %v", err)
	}
	resp, err := h.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: spec.MetricSpecs[0].MetricName})
	if err != nil {
		return nil, err
	}
	if len(resp.MetricValues) != 1 || resp.MetricValues[0].MetricName != spec.MetricSpecs[0].MetricName {
		t.Fatalf("GetMetrics = %v, want one value named %q", resp.MetricValues, spec.MetricSpecs[0].MetricName)
	}
	return resp.MetricValues[0], nil
}

func TestGetMetricsFloatsAndInts(t *testing.T) {
	tests := []struct {
		name      string
		queue     float64
		wantInt   int64
		wantFloat float64
	}{
		{"whole", 7, 7, 7},
		{"fractional demand rounds up in both", 2.5, 3, 3},
		{"zero is zero in both", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, fakeTargets{"team-a/pool": {MaxReplicas: 50, ReadyKnown: true, CurrentKnown: true}})
			h.sig.set("team-a", prom.KindQueue, prom.Result{Value: tt.queue, EvaluatedAt: t0})
			mv, err := h.metrics(t, ref("team-a", "pool", queueMeta()))
			if err != nil {
				t.Fatalf("GetMetrics: %v", err)
			}
			if mv.MetricValue != tt.wantInt || mv.MetricValueFloat != tt.wantFloat || kedaValue(mv) != tt.wantFloat {
				t.Errorf("metricValue %d metricValueFloat %v (KEDA reads %v), want %d and %v",
					mv.MetricValue, mv.MetricValueFloat, kedaValue(mv), tt.wantInt, tt.wantFloat)
			}
		})
	}
}

func TestMetricSpecAndNames(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 4, EvaluatedAt: t0})
	h.sig.set("team-b", prom.KindQueue, prom.Result{Value: 9, EvaluatedAt: t0})

	a := ref("team-a", "pool", queueMeta())
	b := ref("team-b", "pool", queueMeta())
	a2 := ref("team-a", "pool", queueMeta("activationQueue", "3")) // a second trigger of the same ScaledObject
	names := map[string]string{}
	for label, r := range map[string]*pb.ScaledObjectRef{"a": a, "b": b, "a2": a2} {
		spec, err := h.client.GetMetricSpec(ctx, r)
		if err != nil {
			t.Fatalf("GetMetricSpec %s: %v", label, err)
		}
		if len(spec.MetricSpecs) != 1 || spec.MetricSpecs[0].TargetSize != 1 || spec.MetricSpecs[0].TargetSizeFloat != 1 {
			t.Fatalf("GetMetricSpec %s = %v, want one spec with target 1 in both fields", label, spec)
		}
		names[label] = spec.MetricSpecs[0].MetricName
	}
	if names["a"] == names["b"] || names["a"] == names["a2"] || names["b"] == names["a2"] {
		t.Fatalf("names collide: %v", names)
	}
	// The name KEDA asks for (sN- stripped) is exactly the advertised one.
	resp, err := h.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: b, MetricName: names["b"]})
	if err != nil || resp.MetricValues[0].MetricValue != 9 {
		t.Fatalf("GetMetrics b = %v, %v; want 9", resp, err)
	}
	// Another ScaledObject's name, or an unknown one, is NotFound: never another metric's value.
	for _, bad := range []string{names["a"], "s0-" + names["b"], "nope"} {
		_, err := h.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: b, MetricName: bad})
		if status.Code(err) != codes.NotFound {
			t.Errorf("GetMetrics(b, %q): %v, want NotFound", bad, err)
		}
	}
}

func TestBadMetadataIsInvalidArgument(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	r := ref("team-a", "pool", queueMeta("targetUtilization", "1.5", "scaleDownWindow", "forever"))
	for name, call := range h.everyRPC(ctx, r) {
		err := call()
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument ||
			!strings.Contains(st.Message(), "targetUtilization must be a number in (0, 1]") ||
			!strings.Contains(st.Message(), "scaleDownWindow must be a duration in [0s, 1h]") {
			t.Errorf("%s: %v, want InvalidArgument naming targetUtilization and scaleDownWindow with ranges", name, err)
		}
	}
	h.sig.err = fmt.Errorf("%w: queueQuery: parse error", prom.ErrBadRequest)
	_, err := h.client.GetMetricSpec(ctx, ref("team-a", "other", queueMeta()))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "queueQuery") {
		t.Errorf("subscribe error: %v, want InvalidArgument naming queueQuery", err)
	}
}

func TestUnavailableAfterStaleAfter(t *testing.T) {
	h := newHarness(t, fakeTargets{"team-a/pool": {MaxReplicas: 50, ReadyReplicas: 3, ReadyKnown: true, CurrentReplicas: 3, CurrentKnown: true}})
	ctx := context.Background()
	r := ref("team-a", "pool", queueMeta("staleAfter", "60s"))
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 5, EvaluatedAt: t0})

	if mv, err := h.metrics(t, r); err != nil || mv.MetricValue != 5 {
		t.Fatalf("t0: %v %v, want 5", mv, err)
	}
	// Prometheus fails from now on; the last good 5 holds until staleAfter.
	h.sig.set("team-a", prom.KindQueue, prom.Result{Err: errors.New("connection refused"), EvaluatedAt: t0.Add(30 * time.Second)})
	h.clock.set(t0.Add(30 * time.Second))
	h.srv.Refresh(h.clock.now())
	if mv, err := h.metrics(t, r); err != nil || mv.MetricValue != 5 {
		t.Fatalf("t0+30s: %v %v, want the held 5", mv, err)
	}
	h.clock.set(t0.Add(61 * time.Second))
	h.srv.Refresh(h.clock.now())
	if _, err := h.metrics(t, r); status.Code(err) != codes.Unavailable {
		t.Fatalf("t0+61s GetMetrics: %v, want Unavailable so KEDA's fallback acts", err)
	}
	if _, err := h.client.IsActive(ctx, r); status.Code(err) != codes.Unavailable {
		t.Fatalf("t0+61s IsActive: %v, want Unavailable", err)
	}
	hc, err := h.health.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health = %v %v, want NOT_SERVING with no fresh data", hc, err)
	}
	// The metric spec never depends on live data.
	if _, err := h.client.GetMetricSpec(ctx, r); err != nil {
		t.Fatalf("GetMetricSpec without data: %v", err)
	}
	// Data returns: answers and health recover.
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 2, EvaluatedAt: t0.Add(70 * time.Second)})
	h.clock.set(t0.Add(70 * time.Second))
	h.srv.Refresh(h.clock.now())
	if _, err := h.metrics(t, r); err != nil {
		t.Fatalf("t0+70s: %v", err)
	}
	if hc, _ := h.health.Check(ctx, &healthpb.HealthCheckRequest{}); hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, want SERVING", hc)
	}
}

func TestIsActiveAndStream(t *testing.T) {
	h := newHarness(t, fakeTargets{"team-a/pool": {MaxReplicas: 10, ReadyKnown: true, CurrentKnown: true}}) // at zero
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := ref("team-a", "pool", queueMeta("activationQueue", "2"))
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 1, EvaluatedAt: t0})

	got, err := h.client.IsActive(ctx, r)
	if err != nil || got.Result {
		t.Fatalf("IsActive(queue 1 ≤ activationQueue 2) = %v %v, want false", got, err)
	}
	stream, err := h.client.StreamIsActive(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.Recv(); err != nil || msg.Result {
		t.Fatalf("first push = %v %v, want false", msg, err)
	}
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 3, EvaluatedAt: t0.Add(5 * time.Second)})
	h.clock.set(t0.Add(5 * time.Second))
	h.srv.Refresh(h.clock.now())
	if msg, err := stream.Recv(); err != nil || !msg.Result {
		t.Fatalf("push after queue 3 > 2 = %v %v, want true", msg, err)
	}
	if got, err := h.client.IsActive(ctx, r); err != nil || !got.Result {
		t.Fatalf("IsActive = %v %v, want true", got, err)
	}
	// Stopping the server ends the stream (GracefulStop does not hang on it).
	h.srv.Stop()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("stream still open after Stop")
	}
}

// TestEvaluationTimeIsMonotonic: a new trigger without data is re-evaluated by an RPC at the
// RPC's time (t0+10s); a Refresh whose tick time (t0+5s) is earlier must not store its
// evaluation over the later one, else the history holds points out of time order and the
// stale tick's data (queue 9) decides.
func TestEvaluationTimeIsMonotonic(t *testing.T) {
	h := newHarness(t, nil)
	r := ref("team-a", "pool", queueMeta())
	if _, err := h.client.GetMetricSpec(context.Background(), r); err != nil { // registered at t0, no data
		t.Fatal(err)
	}
	h.clock.set(t0.Add(10 * time.Second))
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 4, EvaluatedAt: t0.Add(10 * time.Second)})
	if mv, err := h.metrics(t, r); err != nil || mv.MetricValue != 4 {
		t.Fatalf("t0+10s: %v %v, want 4 = ⌈4/1⌉", mv, err)
	}
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 9, EvaluatedAt: t0.Add(5 * time.Second)})
	h.srv.Refresh(t0.Add(5 * time.Second)) // a tick taken before the RPC
	if mv, err := h.metrics(t, r); err != nil || mv.MetricValue != 4 {
		t.Fatalf("after the stale t0+5s refresh: %v %v, want the t0+10s answer 4", mv, err)
	}
	tr := h.srv.triggers[MetricName("team-a", "pool", r.ScalerMetadata)]
	tr.mu.Lock()
	at, hist := tr.rec.At, append([]decision.Point(nil), tr.state.History...)
	tr.mu.Unlock()
	if !at.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("stored evaluation at t0+%v, want t0+10s", at.Sub(t0))
	}
	for i := 1; i < len(hist); i++ {
		if hist[i].AtUnixNano < hist[i-1].AtUnixNano {
			t.Errorf("history out of time order: %v", hist)
		}
	}
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 9, EvaluatedAt: t0.Add(15 * time.Second)})
	h.clock.set(t0.Add(15 * time.Second))
	h.srv.Refresh(h.clock.now())
	if mv, err := h.metrics(t, r); err != nil || mv.MetricValue != 9 {
		t.Fatalf("t0+15s: %v %v, want 9 (scale-up window 0)", mv, err)
	}
}

// TestTwoServersSameDataSameAnswers: two scaler replicas fed the same snapshots answer alike
// at every step, and the first ten answers are the formulas' (checked on replica A).
//
// Policy: μ = 1, ρ = 1, D = 1 s, so N_raw = N_drain = ⌈Q⌉ (no warm pool, bounds 0..100);
// up-window 20 s, down-window 60 s, burstFactor 2. Q_i = 37·i mod 11 = 4·i mod 11 =
// 0, 4, 8, 1, 5, 9, 2, 6, 10, 3 for i = 0..9, every 5 s; R = ⌊i/10⌋ mod 4 = 0 for i < 10, so
// the seed is 0 and every N_raw above the previous answer is a burst (N_raw ≥ 2·0):
//
//	i=0  Q=0  → 0 (inactive: Q 0 is not above activationQueue 0; the seed is 0)
//	i=1  Q=4  → 4 (burst), i=2 Q=8 → 8 (burst)
//	i=3  Q=1, i=4 Q=5 → 8: the down-window's max raw is 8 (t0+10s), not below 8
//	i=5  Q=9  → 9 (burst); i=6 Q=2, i=7 Q=6 → 9 (down-window max 9)
//	i=8  Q=10 → 10 (burst); i=9 Q=3 → 10
func TestTwoServersSameDataSameAnswers(t *testing.T) {
	a := newHarness(t, nil)
	b := newHarness(t, nil)
	r := ref("team-a", "pool", queueMeta("scaleUpWindow", "20s", "scaleDownWindow", "60s", "readyQuery", "sum(up)"))
	want := []string{
		"0 OK false OK", "4 OK true OK", "8 OK true OK", "8 OK true OK", "8 OK true OK",
		"9 OK true OK", "9 OK true OK", "9 OK true OK", "10 OK true OK", "10 OK true OK",
	}
	for i := 0; i < 60; i++ {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		q := prom.Result{Value: float64((i * 37) % 11), EvaluatedAt: now}
		ready := prom.Result{Value: float64((i / 10) % 4), EvaluatedAt: now}
		var answers [2]string
		for j, h := range []*harness{a, b} {
			h.sig.set("team-a", prom.KindQueue, q)
			h.sig.set("team-a", prom.KindReady, ready)
			h.clock.set(now)
			h.srv.Refresh(now)
			mv, err := h.metrics(t, r)
			act, aerr := h.client.IsActive(context.Background(), r)
			answers[j] = fmt.Sprintf("%v %v %v %v", mv.GetMetricValue(), status.Code(err), act.GetResult(), status.Code(aerr))
		}
		if answers[0] != answers[1] {
			t.Fatalf("t0+%v: replica A answered %s, replica B %s", now.Sub(t0), answers[0], answers[1])
		}
		if i < len(want) && answers[0] != want[i] {
			t.Errorf("i=%d (t0+%v): answered %q (replicas, GetMetrics code, active, IsActive code), want %q", i, now.Sub(t0), answers[0], want[i])
		}
	}
}

func TestDecisionMetrics(t *testing.T) {
	h := newHarness(t, fakeTargets{"team-a/pool": {MaxReplicas: 10, ReadyReplicas: 2, ReadyKnown: true, CurrentReplicas: 2, CurrentKnown: true}})
	r := ref("team-a", "pool", queueMeta())
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 6, EvaluatedAt: t0})
	if _, err := h.metrics(t, r); err != nil {
		t.Fatal(err)
	}
	name := MetricName("team-a", "pool", r.ScalerMetadata)
	want := fmt.Sprintf(`
# HELP inferscale_scaler_desired_replicas Replica count answered to KEDA (GetMetrics value, target 1).
# TYPE inferscale_scaler_desired_replicas gauge
inferscale_scaler_desired_replicas{metric=%[1]q,namespace="team-a",scaledobject="pool"} 6
# HELP inferscale_scaler_signal_value Signal value used by the decision (last good value when held).
# TYPE inferscale_scaler_signal_value gauge
inferscale_scaler_signal_value{metric=%[1]q,namespace="team-a",scaledobject="pool",signal="queue"} 6
# HELP inferscale_scaler_decision_info 1, labelled with what decided the number: the demand term and the shaping limit (empty: none); the reason text is in the logs.
# TYPE inferscale_scaler_decision_info gauge
inferscale_scaler_decision_info{limit="",metric=%[1]q,namespace="team-a",scaledobject="pool",term="drain"} 1
`, name)
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want),
		"inferscale_scaler_desired_replicas", "inferscale_scaler_signal_value", "inferscale_scaler_decision_info"); err != nil {
		t.Fatal(err)
	}
}

func TestForgetAfter(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 2, EvaluatedAt: t0})
	h.sig.set("team-b", prom.KindQueue, prom.Result{Value: 2, EvaluatedAt: t0})
	if _, err := h.metrics(t, ref("team-a", "gone", queueMeta())); err != nil {
		t.Fatal(err)
	}
	streamed := ref("team-b", "streamed", queueMeta())
	stream, err := h.client.StreamIsActive(ctx, streamed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Triggers(); got != 2 {
		t.Fatalf("%d triggers, want 2", got)
	}
	h.clock.add(11 * time.Minute) // past ForgetAfter (10m) without an RPC
	h.srv.Refresh(h.clock.now())
	if got := h.srv.Triggers(); got != 1 {
		t.Fatalf("%d triggers after ForgetAfter, want 1 (the one with an open stream)", got)
	}
}

// everyRPC returns KEDA's four calls about r, each reduced to its error, so a
// test can assert that all of them answer alike.
func (h *harness) everyRPC(ctx context.Context, r *pb.ScaledObjectRef) map[string]func() error {
	return map[string]func() error{
		"GetMetricSpec": func() error { _, err := h.client.GetMetricSpec(ctx, r); return err },
		"GetMetrics": func() error {
			_, err := h.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: MetricName(r.Namespace, r.Name, r.ScalerMetadata)})
			return err
		},
		"IsActive": func() error { _, err := h.client.IsActive(ctx, r); return err },
		"StreamIsActive": func() error {
			s, err := h.client.StreamIsActive(ctx, r)
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
	}
}
