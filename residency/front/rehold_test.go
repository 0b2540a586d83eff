package front_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/front"
)

// upstreamGate is a unary client interceptor for the front's upstream connection: it records
// the x-id of every ModelInfer the front sends to Triton, in order, and can run a hook before
// a given attempt of a given id is sent (block it, unload the model under it).
type upstreamGate struct {
	mu       sync.Mutex
	sent     []string
	attempts map[string]int
	// before, when set, runs before attempt n (1-based) of id is sent.
	before func(id string, n int)
}

func (g *upstreamGate) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == inference.GRPCInferenceService_ModelInfer_FullMethodName {
		md, _ := metadata.FromOutgoingContext(ctx)
		id := ""
		if v := md.Get("x-id"); len(v) > 0 {
			id = v[0]
		}
		g.mu.Lock()
		if g.attempts == nil {
			g.attempts = map[string]int{}
		}
		g.attempts[id]++
		n := g.attempts[id]
		before := g.before
		g.mu.Unlock()
		if before != nil {
			before(id, n)
		}
		g.mu.Lock()
		g.sent = append(g.sent, id)
		g.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (g *upstreamGate) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

func withID(id string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-id", id)
}

// TestStaleReadyRequeuedByArrival: a request the front forwarded on a stale READY view and that
// Triton answered NOT_FOUND (the model was unloaded) is held once — at its place by arrival,
// with its arrival time. Request a arrives first and is forwarded; while it is on its way, the
// front's view turns NOT_READY and request b, arriving after a, is held; then Triton answers a
// NOT_FOUND. The front then holds a ahead of b and reports the oldest arrival (a's) as the
// queue's Since, so the planner sees how long the client has really waited; once the model is
// loaded a goes to Triton before b. Before the fix a was appended behind b with the time of its
// re-hold: Since was b's arrival and b was served first.
func TestStaleReadyRequeuedByArrival(t *testing.T) {
	gate := &upstreamGate{}
	aSent := make(chan struct{})
	aGo := make(chan struct{})
	gate.before = func(id string, n int) {
		if id == "a" && n == 1 {
			close(aSent)
			<-aGo
		}
	}
	h := startWith(t, oneModel("m", 0), testConfig(), false, []grpc.DialOption{grpc.WithChainUnaryInterceptor(gate.intercept)}, "m")
	h.ready.set("m", front.Ready) // stale: tritontest has not loaded m

	beforeA := time.Now()
	aDone := make(chan error, 1)
	go func() {
		_, err := infer(withID("a"), h.client, "m", "a", nil)
		aDone <- err
	}()
	<-aSent // a arrived and is being forwarded
	afterA := time.Now()

	h.ready.set("m", front.NotReady)
	bDone := make(chan error, 1)
	go func() {
		_, err := infer(withID("b"), h.client, "m", "b", nil)
		bDone <- err
	}()
	waitHeld(t, h, "m", 1) // b held
	close(aGo)             // Triton answers a NOT_FOUND: a is held again
	waitHeld(t, h, "m", 2)

	got := h.front.Held()["m"]
	if got.Since.Before(beforeA) || got.Since.After(afterA) {
		t.Errorf("held m since %v, want a's arrival, between %v and %v (b arrived after %v)", got.Since, beforeA, afterA, afterA)
	}
	if _, err := h.direct.RepositoryModelLoad(context.Background(), &inference.RepositoryModelLoadRequest{ModelName: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := <-aDone; err != nil {
		t.Errorf("request a: %v, want served", err)
	}
	if err := <-bDone; err != nil {
		t.Errorf("request b: %v, want served", err)
	}
	// a's first attempt (NOT_FOUND), then a again ahead of b.
	if diff := cmp.Diff([]string{"a", "a", "b"}, gate.order()); diff != "" {
		t.Errorf("ModelInfer order sent to Triton (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.m.HeldRequests.WithLabelValues("m")); got != 0 {
		t.Errorf("held_requests = %v, want 0", got)
	}
}

// TestStaleReadySecondNotFound: a request held once after a NOT_FOUND and answered NOT_FOUND
// again (the model was unloaded once more just as it went) fails with Triton's NOT_FOUND: it
// is not held a second time, nothing stays held, and the front goes on serving.
func TestStaleReadySecondNotFound(t *testing.T) {
	gate := &upstreamGate{}
	h := startWith(t, oneModel("m", 0), testConfig(), false, []grpc.DialOption{grpc.WithChainUnaryInterceptor(gate.intercept)}, "m")
	gate.before = func(id string, n int) {
		if id == "x" && n == 2 { // the held request's second attempt: unload under it
			if _, err := h.direct.RepositoryModelUnload(context.Background(), &inference.RepositoryModelUnloadRequest{ModelName: "m"}); err != nil {
				t.Errorf("unload: %v", err)
			}
		}
	}
	h.ready.set("m", front.Ready) // stale
	done := make(chan error, 1)
	go func() {
		_, err := infer(withID("x"), h.client, "m", "x", nil)
		done <- err
	}()
	waitHeld(t, h, "m", 1)
	if _, err := h.direct.RepositoryModelLoad(context.Background(), &inference.RepositoryModelLoadRequest{ModelName: "m"}); err != nil {
		t.Fatal(err)
	}
	err := <-done
	direct, derr := h.direct.ModelInfer(context.Background(), &inference.ModelInferRequest{ModelName: "m"})
	if derr == nil {
		t.Fatalf("direct infer after unload: %v, want NOT_FOUND", direct)
	}
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != status.Convert(derr).Message() {
		t.Errorf("second NOT_FOUND: %v, want Triton's own %v", err, derr)
	}
	waitHeld(t, h, "m", 0)
	if diff := cmp.Diff([]string{"x", "x"}, gate.order()); diff != "" {
		t.Errorf("ModelInfer attempts (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.m.HeldRequests.WithLabelValues("m")); got != 0 {
		t.Errorf("held_requests = %v, want 0", got)
	}
	if n := holdCount(t, h.reg, "m"); n != 1 {
		t.Errorf("hold_seconds count = %d, want 1 (held once)", n)
	}
}

// TestDrainNotFoundAfterRelease: a request held before the drain, released once its model is
// ready, that Triton answers NOT_FOUND (the drain unloads every model to confirm Triton is
// idle) fails UNAVAILABLE with the pushback, so the client retries on another replica: the
// model is in the catalog, and a draining pod loads nothing. Before the fix the client got
// Triton's NOT_FOUND, which clients do not retry.
func TestDrainNotFoundAfterRelease(t *testing.T) {
	gate := &upstreamGate{}
	h := startWith(t, oneModel("m", 0), testConfig(), false, []grpc.DialOption{grpc.WithChainUnaryInterceptor(gate.intercept)}, "m")
	gate.before = func(id string, n int) {
		if id == "held" && n == 1 {
			if _, err := h.direct.RepositoryModelUnload(context.Background(), &inference.RepositoryModelUnloadRequest{ModelName: "m"}); err != nil {
				t.Errorf("unload: %v", err)
			}
		}
	}
	done := make(chan error, 1)
	var tr metadata.MD
	go func() {
		_, err := infer(withID("held"), h.client, "m", "held", &tr)
		done <- err
	}()
	waitHeld(t, h, "m", 1)
	h.front.StartDrain()
	if _, err := h.direct.RepositoryModelLoad(context.Background(), &inference.RepositoryModelLoadRequest{ModelName: "m"}); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if status.Code(err) != codes.Unavailable || !cmp.Equal(tr.Get(front.PushbackKey), []string{"1000"}) {
		t.Errorf("released into an unload while draining: %v, trailer %v; want Unavailable with pushback 1000", err, tr)
	}
	if got := testutil.ToFloat64(h.m.HoldFailed.WithLabelValues("m", "draining")); got != 1 {
		t.Errorf("hold_failed_total{m,draining} = %v, want 1", got)
	}
}

// TestHoldCountsBodiesBeingRead: --hold-max-bytes bounds a model's held bytes together with the
// chunked HTTP bodies being read to be held for it, for every request that would be held — a
// gRPC one or an HTTP one with a Content-Length too, not only for the chunked reader. With 3 MiB
// of a chunked body being read under a 4 MiB bound, a 2 MiB gRPC request fails UNAVAILABLE
// queue_full at once, naming both; before the fix it was held, 5 MiB for the model.
func TestHoldCountsBodiesBeingRead(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHeldBytes = 4 << 20
	h := start(t, oneModel("cold", 0), cfg, false, "cold") // never loaded
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	pw, slow := readingChunked(t, ctx, h, srv.URL, "cold", 3<<20)
	var tr metadata.MD
	_, err := h.client.ModelInfer(ctx, sizedRequest(t, "cold", 2<<20), grpc.Trailer(&tr))
	// The reader counts as a request, and is charged its buffers (3 MiB full, one more
	// allocated for the bytes still to come) and ReaderOverhead.
	wantMsg := fmt.Sprintf(`model "cold" is not ready and its hold queue is full (1 requests, %d bytes held or being read; bounds 1000, 4194304)`, 3<<20+front.ReadChunk+front.ReaderOverhead)
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != wantMsg || len(tr.Get(front.PushbackKey)) != 1 {
		t.Errorf("2 MiB while 3 MiB are read: %v, trailer %v; want Unavailable %q with pushback", err, tr, wantMsg)
	}
	if got := h.front.Held()["cold"].Requests; got != 0 {
		t.Errorf("held %d, want 0", got)
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("cold", "queue_full")); got != 1 {
		t.Errorf("fast_failed_total{cold,queue_full} = %v, want 1", got)
	}
	pw.Close() // the 3 MiB body completes and is held
	waitHeld(t, h, "cold", 1)
	h.front.StartDrain()
	drainCtx, drainCancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer drainCancel()
	_ = h.front.Drain(drainCtx)
	if got := <-slow; got != http.StatusServiceUnavailable {
		t.Errorf("held request at the drain deadline: status %d, want 503", got)
	}
}
