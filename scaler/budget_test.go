package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
)

// TestHostileQueryIsInvalidArgument: a 1 MB query and a query nested 8k deep (each minutes or
// half a second of parser CPU without the budget) are refused before parsing, with
// InvalidArgument naming the metadata key and the limit, by all four of KEDA's calls.
func TestHostileQueryIsInvalidArgument(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	tests := []struct {
		name, key, query, want string
	}{
		{name: "100 KB", key: KeyQueueQuery, query: strings.Repeat("a+", 50<<10) + "a",
			want: fmt.Sprintf("queueQuery: bad request: bad PromQL query: the query is %d bytes; the limit is %d bytes", 100<<10+1, prom.MaxQueryBytes)},
		// Past MaxMetadataBytes the whole metadata is refused first, naming the largest key.
		{name: "1 MB", key: KeyQueueQuery, query: strings.Repeat("a+", 1<<19) + "a",
			want: `ScaledObject team-a/pool-1MB: scalerMetadata is 1048664 bytes (keys and values), the largest "queueQuery" (1048587 bytes); the limit is 163840 bytes (160 KiB: nine queries of at most 16384 bytes, and the other keys)`},
		{name: "depth 8k", key: KeyRateQuery, query: strings.Repeat("(", 8000) + "up" + strings.Repeat(")", 8000),
			want: fmt.Sprintf("rateQuery: bad request: bad PromQL query: the query nests 8000 deep; the limit is depth %d", prom.MaxQueryDepth)},
	}
	for _, tt := range tests {
		r := ref("team-a", "pool-"+strings.ReplaceAll(tt.name, " ", ""), queueMeta(tt.key, tt.query))
		for name, call := range h.everyRPC(ctx, r) {
			st := status.Convert(call())
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.want) {
				t.Errorf("%s %s: %v %.300q, want InvalidArgument containing %q", tt.name, name, st.Code(), st.Message(), tt.want)
			}
			if len(st.Message()) > 4<<10 {
				t.Errorf("%s %s: a %d-byte message; the query must not be echoed", tt.name, name, len(st.Message()))
			}
		}
	}
	if n := len(h.sig.subs); n != 0 {
		t.Errorf("%d subscriptions after refused queries, want 0", n)
	}
}

// stuckSignals is a Signals whose Subscribe blocks until released, as a parse that never ends
// would (before the budget, a 1 MB query kept a handler busy for minutes).
type stuckSignals struct {
	*fakeSignals
	entered chan struct{} // closed when Subscribe is first called
	release chan struct{}
	once    sync.Once
}

func (s *stuckSignals) Subscribe(r prom.Request) (SignalHandle, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return s.fakeSignals.Subscribe(r)
}

// TestGracefulStopWithinTimeout: while a registration is stuck, SIGTERM (serve's context)
// still stops the scaler soon after --graceful-stop-timeout, and the stuck RPC is answered.
func TestGracefulStopWithinTimeout(t *testing.T) {
	gl, hl, cfg := serveConfig(t)
	cfg.GracefulStopTimeout = 200 * time.Millisecond
	var buf syncBuffer
	log, err := NewLogger(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	sig := &stuckSignals{fakeSignals: newFakeSignals(), entered: make(chan struct{}), release: make(chan struct{})}
	defer close(sig.release) // let the stuck registration finish (goleak)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, cfg, log, gl, hl, sig) }()

	conn, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rpc := make(chan error, 1)
	go func() {
		_, err := pb.NewExternalScalerClient(conn).GetMetricSpec(context.Background(),
			ref("team-a", "pool", queueMeta("prometheusAddress", "http://prometheus:9090")))
		rpc <- err
	}()
	select {
	case <-sig.entered:
	case err := <-rpc:
		t.Fatalf("GetMetricSpec returned before registering: %v", err)
	}

	start := time.Now()
	cancel()
	// A stop that waited for the stuck handler would never end; 5 s is far above the
	// 200 ms timeout plus the one-second bound on handlers after a forced stop.
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("serve still running %v after SIGTERM with --graceful-stop-timeout=%v", time.Since(start), cfg.GracefulStopTimeout)
	}
	if err := <-rpc; status.Code(err) == codes.OK || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stuck GetMetricSpec: %v, want an error from the stop (Canceled or Unavailable)", err)
	}
	if out := buf.String(); !strings.Contains(out, "graceful stop timed out") || strings.Contains(out, "still running after stop") {
		t.Errorf("logs: want the forced stop and no handler left running:\n%s", out)
	}
}
