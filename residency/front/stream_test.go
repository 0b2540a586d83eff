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

// TestStreamInferHeld: a ModelStreamInfer whose first request is for a model that is not
// loaded is held, then every message passes in both directions. The project's proto subset
// and tritontest have no ModelStreamInfer, so the upstream here serves it by calling
// tritontest's ModelInfer per message and answering with the ModelInferResponse (Triton wraps
// it in a ModelStreamInferResponse, which the front never reads).
func TestStreamInferHeld(t *testing.T) {
	ts, err := tritontest.New(oneModel("stream", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
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
			if err := ss.SendMsg(resp); err != nil {
				return err
			}
		}
	}))
	ts.Register(up)
	uln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = up.Serve(uln) }()
	defer up.Stop()

	cfg := testConfig()
	cfg.Upstream = uln.Addr().String()
	r := &readiness{triton: ts, fixed: map[string]front.Verdict{}, cat: map[string]bool{"stream": true}}
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
	defer func() {
		_ = f.Close()
		<-served
	}()

	cc := dial(t, fln.Addr().String())
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
