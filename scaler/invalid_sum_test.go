package scaler

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
)

// TestQueueSumWithNegativeSeriesIsNotUsable: a queueQuery returning {-5, 10} (two pods, one
// with a broken gauge) is not a queue of 5: through the real poller the signal is not usable
// (never valid, left out), so with no other signal the RPCs answer Unavailable, as for an
// invalid single value. Before, the poller summed the vector and the scaler answered 5
// replicas. A valid vector {3, 4} still reads as the queue 7.
func TestQueueSumWithNegativeSeriesIsNotUsable(t *testing.T) {
	var mu sync.Mutex
	answer := `[{"metric":{"pod":"a"},"value":[1767225600,"-5"]},{"metric":{"pod":"b"},"value":[1767225600,"10"]}]`
	srv, poller, req := queueOnlyServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":%s}}`, answer)
	}))
	ctx := context.Background()
	poller.Refresh(ctx)

	_, err := srv.GetMetrics(ctx, req)
	// The answer says why: the queue poll's error, which names the series and the range.
	const want = "rpc error: code = Unavailable desc = ScaledObject team-a/pool: no usable signal data: queue never; queue: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `series {pod="a"} is -5, outside the accepted range [0, +Inf)`) {
		t.Errorf("GetMetrics = %v, want %s… naming series {pod=\"a\"} is -5", err, want)
	}
	tr := srv.triggers[req.MetricName]
	rec, _ := tr.snapshot()
	if rec.Status[decision.SignalQueue] != decision.StatusNever || rec.Values[decision.SignalQueue] != 0 {
		t.Errorf("queue status %s, value %v; want never, 0 (not usable, not 5)", rec.Status[decision.SignalQueue], rec.Values[decision.SignalQueue])
	}

	mu.Lock()
	answer = `[{"metric":{"pod":"a"},"value":[1767225600,"3"]},{"metric":{"pod":"b"},"value":[1767225600,"4"]}]`
	mu.Unlock()
	poller.Refresh(ctx)
	srv.evaluate(tr, time.Now())
	resp, err := srv.GetMetrics(ctx, req)
	if err != nil || len(resp.MetricValues) != 1 || resp.MetricValues[0].MetricValue != 7 {
		t.Errorf("GetMetrics = %v, %v; want 7 replicas (queue 3 + 4, drained in 1 s at 1 req/s)", resp, err)
	}
}

// queueOnlyServer is a Server whose one ScaledObject, team-a/pool, has only a queueQuery,
// polled by the real poller from the Prometheus h answers as; it returns the server, the
// poller (to Refresh) and the GetMetrics request of that trigger.
func queueOnlyServer(t *testing.T, h http.Handler) (*Server, *prom.Poller, *pb.GetMetricsRequest) {
	t.Helper()
	ps := httptest.NewServer(h)
	t.Cleanup(ps.Close)
	pc := prom.DefaultConfig()
	pc.DefaultAddress = ps.URL
	poller, err := prom.NewPoller(pc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Defaults: Defaults{PrometheusAddress: ps.URL}, RefreshInterval: 5 * time.Second, ForgetAfter: 10 * time.Minute},
		PollerSignals(poller), nil, nil, health.NewServer())
	if err != nil {
		t.Fatal(err)
	}
	ref := &pb.ScaledObjectRef{Namespace: "team-a", Name: "pool", ScalerMetadata: map[string]string{
		"queueQuery": "sum by (pod) (gateway_pending)", "replicaThroughput": "1", "drainSeconds": "1",
	}}
	spec, err := srv.GetMetricSpec(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return srv, poller, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: spec.MetricSpecs[0].MetricName}
}

// TestUnavailableSaysPrometheusRefused: a Prometheus that answers 401 to every query leaves
// no usable signal; KEDA's Unavailable answer says so, with the status, instead of only
// "queue never".
func TestUnavailableSaysPrometheusRefused(t *testing.T) {
	srv, poller, req := queueOnlyServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	ctx := context.Background()
	poller.Refresh(ctx)
	_, err := srv.GetMetrics(ctx, req)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no usable signal data: queue never; queue: ") ||
		!strings.Contains(err.Error(), "401") {
		t.Fatalf("GetMetrics = %v; want Unavailable naming the queue poll's 401", err)
	}
}

// TestUnavailableSaysPrometheusRefusedPreset: a preset ScaledObject (engine triton) against a
// Prometheus whose address carries a password and a token and that answers 401: the
// Unavailable answer names the 401, past the kilobytes of the preset bundle's PromQL (a cut of
// the poll error's end dropped it), and neither secret.
func TestUnavailableSaysPrometheusRefusedPreset(t *testing.T) {
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(ps.Close)
	addr := strings.Replace(ps.URL, "http://", "http://reader:s3cretPassw0rd@", 1) + "/?token=t0kenValue"
	pc := prom.DefaultConfig()
	pc.DefaultAddress = addr
	poller, err := prom.NewPoller(pc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Defaults: Defaults{PrometheusAddress: addr}, RefreshInterval: 5 * time.Second, ForgetAfter: 10 * time.Minute},
		PollerSignals(poller), nil, nil, health.NewServer())
	if err != nil {
		t.Fatal(err)
	}
	ref := &pb.ScaledObjectRef{Namespace: "team-a", Name: "pool", ScalerMetadata: map[string]string{
		"engine": "triton", "model": "resnet", "replicaThroughput": "1",
	}}
	ctx := context.Background()
	spec, err := srv.GetMetricSpec(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	poller.Refresh(ctx)
	_, err = srv.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: ref, MetricName: spec.MetricSpecs[0].MetricName})
	wantHead := "rpc error: code = Unavailable desc = ScaledObject team-a/pool: no usable signal data: queue never, rate never, activity never, ready never, running never, serviceTime never, dispersion never; queue: query " +
		strings.Replace(ps.URL, "http://", "http://reader:xxxxx@", 1) + `/?token=xxxxx "label_replace(`
	if status.Code(err) != codes.Unavailable || !strings.HasPrefix(err.Error(), wantHead) || !strings.HasSuffix(err.Error(), ": client_error: client error: 401") {
		t.Fatalf("GetMetrics = %v\nwant %s…: client_error: client error: 401", err, wantHead)
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("GetMetrics = %v: shows the secret", err)
	}
}
