package scaler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/internal/promtest"
)

// running is a scaler process in-test: Run's code path on loopback listeners.
type running struct {
	grpcAddr, httpAddr string
	cancel             context.CancelFunc
	done               chan error
}

func startScaler(t *testing.T, cfg Config) *running {
	t.Helper()
	gl, hl := serveListeners(t)
	cfg.Listen, cfg.MetricsListen = gl.Addr().String(), hl.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{grpcAddr: gl.Addr().String(), httpAddr: hl.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	go func() { r.done <- serve(ctx, cfg, log, gl, hl, nil) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func dial(t testing.TB, addr string) (*grpc.ClientConn, pb.ExternalScalerClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return conn, pb.NewExternalScalerClient(conn)
}

// waitValue calls GetMetrics until it answers want (or fails the test after
// timeout); the poller's first evaluation and Prometheus's first scrape take
// a moment, and until then the answer is Unavailable.
func waitValue(t *testing.T, c pb.ExternalScalerClient, r *pb.ScaledObjectRef, want int64, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	spec, err := c.GetMetricSpec(ctx, r)
	if err != nil {
		t.Fatalf("GetMetricSpec: %v", err)
	}
	name := spec.MetricSpecs[0].MetricName
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		resp, err := c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: name})
		if err == nil && resp.MetricValues[0].MetricValue == want && resp.MetricValues[0].MetricValueFloat == float64(want) {
			return
		}
		last = resp.String()
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetMetrics for %s/%s never answered %d within %v; last: %s", r.Namespace, r.Name, want, timeout, last)
		}
		<-tick.C
	}
}

func integrationConfig(promURL string) Config {
	cfg := DefaultConfig()
	cfg.PrometheusAddress = promURL
	cfg.RefreshInterval = 500 * time.Millisecond
	cfg.QueryTimeout = 10 * time.Second
	cfg.GracefulStopTimeout = 5 * time.Second
	return cfg
}

// TestIntegrationPrometheus: exporter value → real Prometheus → poller →
// decision → GetMetrics through KEDA's stubs, with confinement.
func TestIntegrationPrometheus(t *testing.T) {
	exp := promtest.NewExporter(t)
	queue := exp.Gauge("gateway_queue_depth", "namespace")
	queue.WithLabelValues("team-a").Set(7)
	queue.WithLabelValues("team-b").Set(100)
	ps := promtest.Start(t, exp.Target())
	ps.WaitFor(t, `gateway_queue_depth`, func(v model.Vector) bool { return len(v) == 2 }, 30*time.Second)

	run := startScaler(t, integrationConfig(ps.URL()))
	conn, c := dial(t, run.grpcAddr)
	defer conn.Close()

	own := ref("team-a", "pool", queueMeta())
	waitValue(t, c, own, 7, 30*time.Second)

	// A team-a query that names team-b cannot read team-b's 100: confinement
	// replaces its namespace matcher with team-a's, so it reads team-a's 7.
	sneaky := ref("team-a", "sneaky", queueMeta("queueQuery", `sum(gateway_queue_depth{namespace="team-b"})`))
	waitValue(t, c, sneaky, 7, 30*time.Second)

	// Scale-up follows the exporter (up-window 0).
	queue.WithLabelValues("team-a").Set(12)
	waitValue(t, c, own, 12, 30*time.Second)

	resp, err := http.Get("http://" + run.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`inferscale_scaler_desired_replicas{metric="` + MetricName("team-a", "pool", own.ScalerMetadata) + `",namespace="team-a",scaledobject="pool"} 12`,
		`inferscale_scaler_rpcs_total{code="OK",method="GetMetrics"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestLoadSlowPrometheus: 50 clients, each opening a fresh TCP connection
// per call, against a Prometheus that takes 5 s per query: every call is
// answered correctly within its 500 ms deadline (a correctness bound: RPCs
// never wait on Prometheus), and afterwards no connection is left open.
func TestLoadSlowPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	exp := promtest.NewExporter(t)
	exp.Gauge("gateway_queue_depth", "namespace").WithLabelValues("team-a").Set(7)
	ps := promtest.Start(t, exp.Target())
	ps.WaitFor(t, `gateway_queue_depth`, func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second)
	proxy := promtest.NewSlowProxy(t, ps.URL(), 0)

	cfg := integrationConfig(proxy.URL())
	run := startScaler(t, cfg)
	r := ref("team-a", "pool", queueMeta())
	func() {
		conn, c := dial(t, run.grpcAddr)
		defer conn.Close()
		waitValue(t, c, r, 7, 30*time.Second)
	}()
	name := MetricName("team-a", "pool", r.ScalerMetadata)
	fdBefore := openFDs(t)

	proxy.SetDelay(5 * time.Second)
	waitFor(t, "a query held by the slow proxy", 10*time.Second, func() bool { return proxy.Held() > 0 })

	const clients, callsEach = 50, 10
	var wg sync.WaitGroup
	errs := make(chan error, clients*callsEach)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range callsEach {
				errs <- oneCall(run.grpcAddr, r, name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("call: %v", err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d calls failed", failed, clients*callsEach)
	}
	if proxy.Held() == 0 {
		t.Errorf("no query was held during the load: Prometheus was not slow while we measured")
	}

	// Every per-call connection is gone (server side closes asynchronously);
	// a few pooled connections of the poller to the proxy may come and go.
	proxy.SetDelay(0)
	const slack = 6
	waitFor(t, "open file descriptors back to the pre-load count", 20*time.Second, func() bool { return openFDs(t) <= fdBefore+slack })
	run.stop(t)
}

// oneCall is what KEDA's HPA path does: dial, GetMetrics under a deadline, close.
func oneCall(addr string, r *pb.ScaledObjectRef, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := pb.NewExternalScalerClient(conn).GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: name}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if v := resp.MetricValues[0]; v.MetricValue != 7 || v.MetricValueFloat != 7 {
		return errors.New("wrong value " + v.String())
	}
	return nil
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// TestIntegrationFirstGetMetricsAnswers: KEDA's sequence on a new
// ScaledObject (or after a scaler restart), GetMetricSpec then GetMetrics at
// once, answers the value on the first GetMetrics, not Unavailable: the
// first call waits (≤ DefaultFirstEvaluationWait) for the poller's first
// evaluation, which GetMetricSpec's subscription started.
func TestIntegrationFirstGetMetricsAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	exp := promtest.NewExporter(t)
	exp.Gauge("gateway_queue_depth", "namespace").WithLabelValues("team-a").Set(7)
	ps := promtest.Start(t, exp.Target())
	ps.WaitFor(t, `gateway_queue_depth`, func(v model.Vector) bool { return len(v) == 1 }, 30*time.Second)
	cfg := integrationConfig(ps.URL())
	cfg.RefreshInterval = time.Minute // no refresh tick helps the first call
	run := startScaler(t, cfg)
	conn, c := dial(t, run.grpcAddr)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second) // KEDA's deadline
	defer cancel()
	r := ref("team-a", "pool", queueMeta())
	spec, err := c.GetMetricSpec(ctx, r, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: spec.MetricSpecs[0].MetricName})
	if err != nil {
		t.Fatalf("first GetMetrics = %v, want 7", err)
	}
	if got := resp.MetricValues[0].MetricValue; got != 7 {
		t.Errorf("first GetMetrics = %d, want 7", got)
	}
	act, err := c.IsActive(ctx, ref("team-a", "other", queueMeta()))
	if err != nil || !act.Result {
		t.Errorf("first IsActive of another trigger = %v, %v; want true", act, err)
	}
}
