package front_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/tritontest"
)

const streamInfer = "/inference.GRPCInferenceService/ModelStreamInfer"

// streamFront starts tritontest with tc, an upstream serving ModelStreamInfer from it (see
// TestStreamInferHeld) with answers messages per request (more than 1: as a decoupled model),
// and a front for the models of tc's catalog, all stopped at cleanup.
func streamFront(t *testing.T, tc tritontest.Config, answers int) (*front.Front, *tritontest.Server, *grpc.ClientConn) {
	t.Helper()
	ts, err := tritontest.New(tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	up := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		if m, _ := grpc.MethodFromServerStream(ss); m != streamInfer {
			return status.Error(codes.Unimplemented, m)
		}
		for {
			var req inference.ModelInferRequest
			if err := ss.RecvMsg(&req); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
			resp, err := ts.ModelInfer(ss.Context(), &req)
			if err != nil {
				return err
			}
			for range answers {
				if err := ss.SendMsg(resp); err != nil {
					return err
				}
			}
		}
	}))
	ts.Register(up)
	uln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = up.Serve(uln) }()
	t.Cleanup(up.Stop)

	cfg := testConfig()
	cfg.Upstream = uln.Addr().String()
	cat := map[string]bool{}
	for _, m := range tc.Models {
		cat[m.Name] = true
	}
	r := &readiness{triton: ts, fixed: map[string]front.Verdict{}, cat: cat}
	f, err := front.New(cfg, front.Deps{Readiness: r})
	if err != nil {
		t.Fatal(err)
	}
	fln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.Serve(fln) }()
	t.Cleanup(func() {
		_ = f.Close()
		<-served
	})
	return f, ts, dial(t, fln.Addr().String())
}

// TestStreamInferHeld: a ModelStreamInfer whose first request is for a model that is not
// loaded is held, then every message passes in both directions. The project's proto subset
// and tritontest have no ModelStreamInfer, so the upstream here serves it by calling
// tritontest's ModelInfer per message and answering with the ModelInferResponse (Triton wraps
// it in a ModelStreamInferResponse, which the front never reads).
func TestStreamInferHeld(t *testing.T) {
	f, ts, cc := streamFront(t, oneModel("stream", 0), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, streamInfer)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"s0", "s1", "s2"}
	if err := cs.SendMsg(&inference.ModelInferRequest{ModelName: "stream", Id: ids[0]}); err != nil {
		t.Fatal(err)
	}
	for f.Held()["stream"].Requests != 1 { // the first message is held until the model loads
		time.Sleep(time.Millisecond)
	}
	if _, err := ts.RepositoryModelLoad(ctx, &inference.RepositoryModelLoadRequest{ModelName: "stream"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		if err := cs.SendMsg(&inference.ModelInferRequest{ModelName: "stream", Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	// An open stream, forwarded, is not counted as the model's work in flight: it may stay open,
	// idle, for the client's whole life.
	if got := f.Forwarding(); len(got) != 0 {
		t.Errorf("Forwarding with a stream open = %v, want empty (streams are not counted)", got)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		var resp inference.ModelInferResponse
		err := cs.RecvMsg(&resp)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		got = append(got, resp.GetId())
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("responses (-want +got):\n%s", diff)
	}
}

// TestDrainEndsIdleStream: a ModelStreamInfer stream that stays open after its answers does
// not hold the drain to its deadline: once every request it carried is answered and nothing
// has passed for the front's quiet time (2 s), the drain ends it UNAVAILABLE and reports
// drained. A stream whose request is still executing is not idle: the drain waits for its
// answer, which the client gets. Before, one idle stream made every drain run to its deadline.
func TestDrainEndsIdleStream(t *testing.T) {
	tc := oneModel("stream", 0)
	tc.StartupModels = []string{"stream"}
	tc.Models[0].ServiceTime = 3 * time.Second
	f, _, cc := streamFront(t, tc, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(id string) grpc.ClientStream {
		t.Helper()
		cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, streamInfer)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(&inference.ModelInferRequest{ModelName: "stream", Id: id}); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	idle := open("idle")
	var resp inference.ModelInferResponse
	if err := idle.RecvMsg(&resp); err != nil || resp.GetId() != "idle" {
		t.Fatalf("first answer: %v %q", err, resp.GetId())
	}
	busy := open("busy")  // executes for 3 s from now
	for f.Active() != 2 { // both streams entered the front
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	f.StartDrain()
	dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
	defer dcancel()
	if err := f.Drain(dctx); err != nil {
		t.Fatalf("drain with one idle stream and one executing: %v after %s, want drained", err, time.Since(start))
	}
	took := time.Since(start)
	if took < 3*time.Second || took > 10*time.Second {
		t.Errorf("drained after %s, want after the busy stream's 3 s request and its 2 s quiet, well before the 15 s deadline", took)
	}
	if err := idle.RecvMsg(&resp); status.Code(err) != codes.Unavailable {
		t.Errorf("idle stream after the drain: %v, want UNAVAILABLE (reopen elsewhere)", err)
	}
	if err := busy.RecvMsg(&resp); err != nil || resp.GetId() != "busy" {
		t.Errorf("busy stream's answer: %v %q, want its answer before the drain ended it", err, resp.GetId())
	}
	if n := f.Active(); n != 0 {
		t.Errorf("Active after the drain = %d, want 0", n)
	}
}

// TestDrainWaitsForDecoupledStream: a stream that has had more answers than requests (a
// decoupled model, as TRT-LLM's or vLLM's token streams) is never ended as idle: its counts no
// longer say whether a later request is still queued or running (3 answers to request A would
// read as answers to B, C and D). The drain waits for it, here to its deadline.
func TestDrainWaitsForDecoupledStream(t *testing.T) {
	tc := oneModel("stream", 0)
	tc.StartupModels = []string{"stream"}
	f, _, cc := streamFront(t, tc, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, streamInfer)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(&inference.ModelInferRequest{ModelName: "stream", Id: "a"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var resp inference.ModelInferResponse
		if err := cs.RecvMsg(&resp); err != nil {
			t.Fatal(err)
		}
	}
	f.StartDrain()
	dctx, dcancel := context.WithTimeout(ctx, 3500*time.Millisecond) // past the 2 s quiet
	defer dcancel()
	if err := f.Drain(dctx); err == nil {
		t.Fatal("drain with a decoupled stream open: drained, want its deadline (the stream is not known idle)")
	}
	// The stream is still open: a later request on it is answered.
	if err := cs.SendMsg(&inference.ModelInferRequest{ModelName: "stream", Id: "b"}); err != nil {
		t.Fatal(err)
	}
	var resp inference.ModelInferResponse
	if err := cs.RecvMsg(&resp); err != nil || resp.GetId() != "b" {
		t.Errorf("request on the decoupled stream after the drain's deadline: %v %q, want answered", err, resp.GetId())
	}
}
