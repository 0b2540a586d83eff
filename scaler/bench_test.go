package scaler

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferscale/inferscale/prom"
)

const benchObjects = 10000

// benchRefs returns n preset ScaledObjects spread over 100 namespaces and 20
// models, as a large cluster would have them.
func benchRefs(n int) []*pb.ScaledObjectRef {
	refs := make([]*pb.ScaledObjectRef, n)
	for i := range refs {
		refs[i] = ref(fmt.Sprintf("team-%03d", i%100), fmt.Sprintf("pool-%05d", i), map[string]string{
			"scalerAddress":     "inferscale-scaler.inferscale:9090",
			"engine":            []string{"triton", "vllm"}[i%2],
			"model":             fmt.Sprintf("model-%02d", i%20),
			"replicaThroughput": "12",
			"warmReplicas":      "1",
			"scaleUpWindow":     "15s",
		})
	}
	return refs
}

// benchServer registers refs on a Server fed by in-memory signals with
// values for every (namespace, kind), evaluated `refreshes` times 5 s apart
// so the windows' history is full.
func benchServer(tb testing.TB, refs []*pb.ScaledObjectRef, refreshes int) (*Server, *health.Server) {
	tb.Helper()
	sig := newFakeSignals()
	hs := health.NewServer()
	srv, err := NewServer(ServerConfig{Defaults: Defaults{PrometheusAddress: "http://prometheus:9090"}, RefreshInterval: 5 * time.Second, ForgetAfter: time.Hour}, sig, nil, nil, hs)
	if err != nil {
		tb.Fatal(err)
	}
	clock := &fakeClock{t: t0}
	srv.now = clock.now
	set := func(now time.Time, i int) {
		for n := range 100 {
			ns := fmt.Sprintf("team-%03d", n)
			sig.set(ns, prom.KindQueue, prom.Result{Value: float64((n + i) % 40), EvaluatedAt: now})
			sig.set(ns, prom.KindRate, prom.Result{Value: float64((n*7 + i) % 90), EvaluatedAt: now})
			sig.set(ns, prom.KindActivity, prom.Result{Value: 0.4, EvaluatedAt: now})
			sig.set(ns, prom.KindReady, prom.Result{Value: 3, EvaluatedAt: now})
		}
	}
	set(t0, 0)
	for _, r := range refs {
		if _, err := srv.ensure(context.Background(), r); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 1; i < refreshes; i++ {
		now := t0.Add(time.Duration(i) * 5 * time.Second)
		clock.set(now)
		set(now, i)
		srv.Refresh(now)
	}
	return srv, hs
}

// BenchmarkGetMetrics: GetMetrics over loopback TCP gRPC with 10,000
// ScaledObjects registered, from 8 concurrent callers on one connection
// (KEDA's operator shares one connection per scaler address). The gRPC
// health Check RPC over the same connection is the baseline: the difference
// is what the scaler itself adds. Reports p99 latency and RPC/s.
func BenchmarkGetMetrics(b *testing.B) {
	refs := benchRefs(benchObjects)
	srv, hs := benchServer(b, refs, 2)
	defer srv.Stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterExternalScalerServer(gs, srv)
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewExternalScalerClient(conn)
	hc := healthpb.NewHealthClient(conn)
	reqs := make([]*pb.GetMetricsRequest, len(refs))
	for i, r := range refs {
		reqs[i] = &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: MetricName(r.Namespace, r.Name, r.ScalerMetadata)}
	}

	// serial: one caller, so p50/p99 are the latency of one RPC, not queueing.
	// parallel: 4 × GOMAXPROCS callers for throughput.
	measure := func(b *testing.B, parallel bool, call func(i int) error) {
		var mu sync.Mutex
		var all []time.Duration
		var next int
		run := func(n func() bool) {
			lat := make([]time.Duration, 0, 1024)
			mu.Lock()
			i := next
			next += 7919
			mu.Unlock()
			for n() {
				i++
				t := time.Now()
				if err := call(i % len(reqs)); err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}
		b.ResetTimer()
		start := time.Now()
		if parallel {
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
		} else {
			run(b.Loop)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		slices.Sort(all)
		if len(all) > 0 {
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		}
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "rpc/s")
	}
	ctx := context.Background()
	getMetrics := func(i int) error {
		resp, err := client.GetMetrics(ctx, reqs[i])
		if err == nil && len(resp.MetricValues) != 1 {
			err = fmt.Errorf("got %d values", len(resp.MetricValues))
		}
		return err
	}
	healthCheck := func(int) error {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	b.Run("GetMetrics/serial", func(b *testing.B) { measure(b, false, getMetrics) })
	b.Run("HealthCheckBaseline/serial", func(b *testing.B) { measure(b, false, healthCheck) })
	b.Run("GetMetrics/parallel", func(b *testing.B) { measure(b, true, getMetrics) })
	b.Run("HealthCheckBaseline/parallel", func(b *testing.B) { measure(b, true, healthCheck) })
}

// BenchmarkMemory10000ScaledObjects reports the live heap and the process
// RSS with 10,000 preset ScaledObjects registered and 5 minutes of 5 s
// history each (in-memory signals), then the live heap the same ScaledObjects
// add on the real prom.Poller. The loop body is empty: the figures are the
// custom metrics. Run: go test -run '^$' -bench Memory -benchtime 1x ./scaler/
func BenchmarkMemory10000ScaledObjects(b *testing.B) {
	liveHeap()
	debug.FreeOSMemory()
	baseline := vmRSS(b) // the test binary before any ScaledObject
	srv, _ := benchServer(b, benchRefs(benchObjects), 61)
	defer srv.Stop()
	if got := srv.Triggers(); got != benchObjects {
		b.Fatalf("registered %d triggers, want %d", got, benchObjects)
	}
	live := liveHeap()
	rss := vmRSS(b)
	debug.FreeOSMemory()
	rssFreed := vmRSS(b)
	runtime.KeepAlive(srv)

	poller, err := prom.NewPoller(prom.PollerConfig{
		DefaultAddress: "http://prometheus:9090", RefreshInterval: 5 * time.Second, QueryTimeout: 10 * time.Second,
		Concurrency: 8, ForgetAfter: 10 * time.Minute, NamespaceLabel: "namespace", PodLabel: "pod",
	}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	before := liveHeap()
	ps, err := NewServer(ServerConfig{Defaults: Defaults{PrometheusAddress: "http://prometheus:9090"}, RefreshInterval: 5 * time.Second, ForgetAfter: time.Hour},
		PollerSignals(poller), nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range benchRefs(benchObjects) {
		if _, err := ps.ensure(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	withPoller := liveHeap() - before
	runtime.KeepAlive(ps)
	runtime.KeepAlive(poller)
	for b.Loop() {
	}
	b.ReportMetric(float64(live)/(1<<20), "live-heap-MiB")
	b.ReportMetric(float64(baseline)/(1<<20), "VmRSS-baseline-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "VmRSS-MiB")
	b.ReportMetric(float64(rssFreed)/(1<<20), "VmRSS-after-FreeOSMemory-MiB")
	b.ReportMetric(float64(withPoller)/(1<<20), "real-poller-registration-MiB")
	b.ReportMetric(float64(poller.Subscriptions()), "poller-subscriptions")
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func vmRSS(t testing.TB) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS line")
	return 0
}
