package front_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// minBytes is the smallest MaxRequestBytes and MaxTotalHeldBytes (4 MiB); tritontest's gRPC
// server takes messages up to gRPC's default, the same 4 MiB, so a request at the front's
// limit also passes upstream.
const minBytes = 4 << 20

// sizedRequest returns a ModelInferRequest for model whose serialized size is exactly size
// bytes, padded with one raw input.
func sizedRequest(t testing.TB, model string, size int) *inference.ModelInferRequest {
	t.Helper()
	req := &inference.ModelInferRequest{ModelName: model, Id: "sized", RawInputContents: [][]byte{nil}}
	pad := size - proto.Size(req)
	for range 8 {
		req.RawInputContents[0] = make([]byte, pad)
		d := size - proto.Size(req)
		if d == 0 {
			return req
		}
		pad += d
	}
	t.Fatalf("no request of exactly %d bytes", size)
	return nil
}

// TestMaxRequestBytes: a gRPC message of exactly --max-request-bytes passes; one byte more is
// refused RESOURCE_EXHAUSTED with a message naming its size and the limit, for ModelInfer and
// for a passed-through method alike, and counted as too_large.
func TestMaxRequestBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestBytes = minBytes
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "m", MemoryBytes: 1 << 20}}
	tc.StartupModels = []string{"m"}
	h := start(t, tc, cfg, false, "m")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// grpc-go refuses the message itself, before the front's handler can answer (its RecvMsg
	// writes the status), so the message is gRPC's: it names the size and the limit.
	const wantMsg = "grpc: received message larger than max (4194305 vs. 4194304)"
	tests := []struct {
		name     string
		call     func() error
		wantCode codes.Code
	}{
		{"ModelInfer at the limit", func() error {
			_, err := h.client.ModelInfer(ctx, sizedRequest(t, "m", minBytes))
			return err
		}, codes.OK},
		{"ModelInfer one byte over", func() error {
			_, err := h.client.ModelInfer(ctx, sizedRequest(t, "m", minBytes+1))
			return err
		}, codes.ResourceExhausted},
		{"passed-through ModelReady one byte over", func() error {
			req := &inference.ModelReadyRequest{Name: strings.Repeat("x", minBytes+1-5)} // tag, 4-byte length
			if n := proto.Size(req); n != minBytes+1 {
				t.Fatalf("ModelReadyRequest of %d bytes, want %d", n, minBytes+1)
			}
			_, err := h.client.ModelReady(ctx, req)
			return err
		}, codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("code %v (%v), want %v", got, err, tt.wantCode)
			}
			if tt.wantCode != codes.OK && !strings.Contains(status.Convert(err).Message(), wantMsg) {
				t.Errorf("message %q, want containing %q", status.Convert(err).Message(), wantMsg)
			}
		})
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("", "too_large")); got != 2 {
		t.Errorf(`fast_failed_total{"",too_large} = %v, want 2`, got)
	}
}

// TestHoldBudget: --hold-max-total-bytes bounds the bytes held for all models together. 3 MiB
// held for one model and 1 MiB for another fill a 4 MiB budget exactly and stay held; one
// more small request fails at once RESOURCE_EXHAUSTED with the pushback, though neither
// model's own queue is full.
func TestHoldBudget(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTotalHeldBytes = minBytes
	cfg.MaxHeldBytes = minBytes
	cfg.RetryPushback = 1500 * time.Millisecond
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "a", MemoryBytes: 1 << 20}, {Name: "b", MemoryBytes: 1 << 20}}
	h := start(t, tc, cfg, false, "a", "b") // never loaded: requests stay held
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, r := range []struct {
		model string
		size  int
	}{{"a", 3 << 20}, {"b", 1 << 20}} {
		req := sizedRequest(t, r.model, r.size)
		wg.Go(func() { _, _ = h.client.ModelInfer(ctx, req) })
		waitHeld(t, h, r.model, 1)
	}

	var tr metadata.MD
	callCtx, callCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer callCancel()
	_, err := infer(callCtx, h.client, "b", "over", &tr)
	const wantMsg = "4194304 bytes held for all models, bound 4194304 (--hold-max-total-bytes)"
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), wantMsg) {
		t.Errorf("past the budget: %v, want ResourceExhausted containing %q", err, wantMsg)
	}
	if got := tr.Get(front.PushbackKey); len(got) != 1 || got[0] != "1500" {
		t.Errorf("pushback trailer %v, want [1500]", got)
	}
	if got := h.front.Held(); got["a"].Requests != 1 || got["b"].Requests != 1 {
		t.Errorf("held %v, want a:1 b:1 (the refused request is not held)", got)
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("b", "hold_budget")); got != 1 {
		t.Errorf("fast_failed_total{b,hold_budget} = %v, want 1", got)
	}
}

// postBody posts body to model's infer path, with a Content-Length unless chunked, and returns
// the status, the Retry-After header and the body's error text.
func postBody(t *testing.T, ctx context.Context, base, model string, body []byte, chunked bool) (int, string, string) {
	t.Helper()
	var rd io.Reader = strings.NewReader(string(body))
	if chunked {
		rd = io.NopCloser(rd) // hides the length: net/http sends it chunked
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/models/"+model+"/infer", rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", model, err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// jsonBody is a KServe v2 JSON request of exactly size bytes ({"id":…,"pad":"xx…"}).
func jsonBody(id string, size int) []byte {
	head := `{"id":"` + id + `","pad":"`
	return []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
}

// TestHTTPMaxRequestBytes: an HTTP body of exactly --max-request-bytes is forwarded; one byte
// more is answered 413 naming the flag, whether its Content-Length declares it (refused
// unread) or it arrives chunked (refused once it passes the bound, while forwarded or while
// read to be held).
func TestHTTPMaxRequestBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestBytes = minBytes
	cfg.HoldTimeout = 2 * time.Second
	tc := tritontest.DefaultConfig()
	tc.Models = []tritontest.Model{{Name: "ready", MemoryBytes: 1 << 20}, {Name: "cold", MemoryBytes: 1 << 20}}
	tc.StartupModels = []string{"ready"}
	h := start(t, tc, cfg, false, "ready", "cold")
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const wantMsg = "larger than the front's maximum 4194304 bytes (--max-request-bytes)"
	tests := []struct {
		name       string
		model      string
		size       int
		chunked    bool
		wantStatus int
	}{
		{"at the limit", "ready", minBytes, false, http.StatusOK},
		{"at the limit, chunked", "ready", minBytes, true, http.StatusOK},
		{"one byte over", "ready", minBytes + 1, false, http.StatusRequestEntityTooLarge},
		{"one byte over, chunked, forwarded", "ready", minBytes + 1, true, http.StatusRequestEntityTooLarge},
		{"one byte over, chunked, read to be held", "cold", minBytes + 1, true, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := postBody(t, ctx, srv.URL, tt.model, jsonBody("x", tt.size), tt.chunked)
			if code != tt.wantStatus {
				t.Fatalf("status %d (%s), want %d", code, body, tt.wantStatus)
			}
			if code != http.StatusOK && !strings.Contains(body, wantMsg) {
				t.Errorf("body %q, want containing %q", body, wantMsg)
			}
		})
	}
}

// TestHTTPHoldBudget: HTTP requests held for a model that is not ready count against
// --hold-max-total-bytes by their body's bytes (a declared Content-Length sizes the buffers
// exactly) and ReaderOverhead each; within the budget they are held, past it the front answers
// 429 with Retry-After at once.
func TestHTTPHoldBudget(t *testing.T) {
	cfg := testConfig()
	cfg.MaxTotalHeldBytes = minBytes
	cfg.MaxHeldBytes = 16 << 20
	cfg.RetryPushback = 1500 * time.Millisecond
	h := start(t, oneModel("cold", 0), cfg, false, "cold") // never loaded
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held := make(chan int, 2)
	for i, size := range []int{3<<20 - front.ReaderOverhead, 1<<20 - front.ReaderOverhead} { // exactly the budget
		body := jsonBody("held", size)
		go func() {
			code, _, _ := postBody(t, ctx, srv.URL, "cold", body, false)
			held <- code
		}()
		waitHeld(t, h, "cold", i+1)
	}
	code, retryAfter, body := postBody(t, ctx, srv.URL, "cold", jsonBody("over", 64), false)
	if code != http.StatusTooManyRequests || retryAfter != "2" || !strings.Contains(body, "bound 4194304 (--hold-max-total-bytes)") {
		t.Errorf("past the budget: status %d, Retry-After %q, body %q; want 429, 2, naming --hold-max-total-bytes", code, retryAfter, body)
	}
	if got := h.front.Held()["cold"].Requests; got != 2 {
		t.Errorf("held %d, want 2", got)
	}
	// A held HTTP request whose body is unread does not see its client leave (net/http
	// watches the connection only once the body is read), so the drain's deadline ends them.
	h.front.StartDrain()
	drainCtx, drainCancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer drainCancel()
	_ = h.front.Drain(drainCtx)
	for range 2 {
		if got := <-held; got != http.StatusServiceUnavailable {
			t.Errorf("held request at the drain deadline: status %d, want 503", got)
		}
	}
}
