package scaler

import (
	"context"
	"sync"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
)

// firstEvalSignals is fakeSignals whose handles implement FirstEvaluator:
// onWait runs when the server asks for the first-evaluation channel, and
// returns it (the poller storing its first evaluation as the RPC waits).
type firstEvalSignals struct {
	*fakeSignals
	mu     sync.Mutex
	asked  int
	onWait func(key string) <-chan struct{}
}

func (f *firstEvalSignals) Subscribe(r prom.Request) (SignalHandle, error) {
	h, err := f.fakeSignals.Subscribe(r)
	if err != nil {
		return nil, err
	}
	return firstEvalHandle{h.(fakeHandle), f}, nil
}

type firstEvalHandle struct {
	fakeHandle
	f *firstEvalSignals
}

func (h firstEvalHandle) Evaluated() <-chan struct{} {
	h.f.mu.Lock()
	h.f.asked++
	h.f.mu.Unlock()
	return h.f.onWait(h.key)
}

func newFirstEvalServer(t *testing.T, sig *firstEvalSignals, wait time.Duration) *Server {
	t.Helper()
	srv, err := NewServer(ServerConfig{
		Defaults:            Defaults{PrometheusAddress: "http://prometheus:9090"},
		RefreshInterval:     5 * time.Second,
		ForgetAfter:         10 * time.Minute,
		FirstEvaluationWait: wait,
	}, sig, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.now = func() time.Time { return t0 }
	return srv
}

// TestFirstCallsWaitForFirstEvaluation: KEDA's GetMetricSpec subscribes a
// new trigger's queries; its first GetMetrics and IsActive, before the
// poller has evaluated them, wait for that first evaluation and answer its
// value, not Unavailable (queue never…), and answer alike.
func TestFirstCallsWaitForFirstEvaluation(t *testing.T) {
	sig := &firstEvalSignals{fakeSignals: newFakeSignals()}
	sig.onWait = func(key string) <-chan struct{} {
		// The poller stores its first evaluation now.
		sig.fakeSignals.set("team-a", prom.KindQueue, prom.Result{Value: 4, EvaluatedAt: t0})
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	srv := newFirstEvalServer(t, sig, time.Second)
	ctx := context.Background()

	r := ref("team-a", "pool", queueMeta())
	spec, err := srv.GetMetricSpec(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(sig.subs); got != 1 {
		t.Fatalf("GetMetricSpec subscribed %d queries, want 1", got)
	}
	resp, err := srv.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: spec.MetricSpecs[0].MetricName})
	if err != nil {
		t.Fatalf("first GetMetrics = %v, want the first evaluation's value", err)
	}
	if got := resp.MetricValues[0].MetricValue; got != 4 {
		t.Errorf("first GetMetrics = %d, want 4", got)
	}

	// IsActive first on another trigger: the same first evaluation, active.
	r2 := ref("team-a", "other", queueMeta())
	act, err := srv.IsActive(ctx, r2)
	if err != nil || !act.Result {
		t.Fatalf("first IsActive = %v, %v; want true, nil", act, err)
	}
}

// TestFirstEvaluationWaitIsBounded: a Prometheus that has not answered the
// first evaluation (a slow one) costs a new trigger's first call at most the
// bound, and no later call waits at all; both answer Unavailable alike.
func TestFirstEvaluationWaitIsBounded(t *testing.T) {
	never := make(chan struct{}) // the first evaluation never completes
	sig := &firstEvalSignals{fakeSignals: newFakeSignals()}
	sig.onWait = func(string) <-chan struct{} { return never }
	srv := newFirstEvalServer(t, sig, 10*time.Millisecond)
	ctx := context.Background()
	r := ref("team-a", "pool", queueMeta())
	name := MetricName("team-a", "pool", r.ScalerMetadata)
	for i := range 2 {
		_, err := srv.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: name})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("GetMetrics #%d = %v, want Unavailable", i+1, err)
		}
		_, err = srv.IsActive(ctx, r)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("IsActive #%d = %v, want Unavailable (as GetMetrics)", i+1, err)
		}
	}
	if sig.asked != 1 {
		t.Errorf("first-evaluation channel asked %d times, want 1 (only the first call waits)", sig.asked)
	}

	// A caller whose deadline has passed does not wait either.
	sig2 := &firstEvalSignals{fakeSignals: newFakeSignals()}
	sig2.onWait = func(string) <-chan struct{} { return never }
	srv2 := newFirstEvalServer(t, sig2, time.Second)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := srv2.IsActive(cctx, r); status.Code(err) != codes.Canceled {
		t.Errorf("IsActive with a done context, new trigger = %v, want Canceled (not registered)", err)
	}
	if _, err := srv2.GetMetricSpec(ctx, r); err != nil { // registers; does not wait
		t.Fatal(err)
	}
	if _, err := srv2.IsActive(cctx, r); status.Code(err) != codes.Unavailable {
		t.Errorf("IsActive with a done context = %v, want Unavailable", err)
	}
}

func TestFirstEvaluationWaitRange(t *testing.T) {
	_, err := NewServer(ServerConfig{RefreshInterval: time.Second, ForgetAfter: time.Second, FirstEvaluationWait: 2 * time.Second}, newFakeSignals(), nil, nil, nil)
	if err == nil || err.Error() != "FirstEvaluationWait 2s: must be in [0s, 1s]" {
		t.Errorf("NewServer = %v, want the FirstEvaluationWait range", err)
	}
}
