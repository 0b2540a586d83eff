package front_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inferscale/inferscale/residency/front"
)

// postChunked sends an infer request whose body has no Content-Length (chunked) and returns
// its status; body is read by the client as the server asks for it.
// readingChunked starts a chunked POST for model at base, sends n bytes of its body and returns
// once the front has read them (Front.ReadingBytes), the connection open: the body's writer
// (close it to end the body; the test's end closes it too) and the request's status to come.
func readingChunked(t *testing.T, ctx context.Context, h *harness, base, model string, n int) (*io.PipeWriter, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	status := make(chan int, 1)
	go func() { status <- postChunked(t, ctx, base, model, pr) }()
	if _, err := pw.Write(bytes.Repeat([]byte{'x'}, n)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); h.front.ReadingBytes(model) < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the front read %d bytes of the %d-byte body", h.front.ReadingBytes(model), n)
		}
	}
	return pw, status
}

func postChunked(t *testing.T, ctx context.Context, base, model string, body io.Reader) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/models/"+model+"/infer", io.NopCloser(body))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s (chunked): %v", model, err)
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// rawRequest opens a connection to addr and writes text on it (a request head, perhaps part of
// a body), leaving the connection open; it is closed at cleanup.
func rawRequest(t *testing.T, addr, text string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	return c
}

// statusLine reads the first line of the answer on c, waiting at most 10 s.
func statusLine(c net.Conn) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

// rawChunkedStatus sends the head of a chunked infer request and no body, and returns the
// status line the server answers within 10 s ("" when none).
func rawChunkedStatus(t *testing.T, addr, model string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST /v2/models/"+model+"/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestHTTPChunkedBodiesBounded: a chunked request for a model that is not ready is read into
// memory to learn its size, so the bytes being read count against the model's hold bound
// (--hold-max-bytes) as they arrive, and a request the full queue cannot take is refused
// before its body is read. Otherwise every open connection could buffer up to the whole bound
// before the queue refuses it: memory grows with the connections, not the bound.
func TestHTTPChunkedBodiesBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHeldBytes = 4 << 20
	cfg.MaxHeldRequests = 1
	h := start(t, oneModel("big", 0), cfg, false, "big") // never loaded: requests stay held
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A client streams 3 MiB of a body and stops sending, connection open.
	pw, slow := readingChunked(t, ctx, h, srv.URL, "big", 3<<20)
	// 2 MiB more would pass the 4 MiB bound with the 3 MiB being read: refused at once.
	if got := postChunked(t, ctx, srv.URL, "big", bytes.NewReader(bytes.Repeat([]byte{'y'}, 2<<20))); got != http.StatusServiceUnavailable {
		t.Errorf("2 MiB while 3 MiB are read: status %d, want 503", got)
	}
	pw.Close() // the 3 MiB request completes and is held
	waitHeld(t, h, "big", 1)

	// The queue is full (1 request): a chunked request is refused without its body being
	// read — this one never sends a byte.
	if got := rawChunkedStatus(t, srv.Listener.Addr().String(), "big"); got != "HTTP/1.1 503 Service Unavailable" {
		t.Errorf("chunked request on a full queue: status line %q, want 503", got)
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("big", "queue_full")); got != 2 {
		t.Errorf("fast_failed_total{big,queue_full} = %v, want 2", got)
	}
	h.front.StartDrain()
	drainCtx, drainCancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer drainCancel()
	_ = h.front.Drain(drainCtx) // fails the held request
	if got := <-slow; got != http.StatusServiceUnavailable {
		t.Errorf("held request at the drain deadline: status %d, want 503", got)
	}
}

// TestHTTPChunkedBodyStalls: a chunked body read to be held that stops arriving keeps its
// reservation only until the hold timeout: then the front answers 408 and the bytes read are
// released. Without the read deadline a stalled client would hold them for good.
func TestHTTPChunkedBodyStalls(t *testing.T) {
	cfg := testConfig()
	cfg.HoldTimeout = time.Second
	h := start(t, oneModel("cold", 0), cfg, false, "cold") // never loaded
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	pr, pw := io.Pipe()
	defer pw.Close()
	got := make(chan int, 1)
	go func() { got <- postChunked(t, ctx, srv.URL, "cold", pr) }()
	if _, err := pw.Write(bytes.Repeat([]byte{'x'}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	// The client sends nothing more and keeps the connection open.
	select {
	case code := <-got:
		if code != http.StatusRequestTimeout {
			t.Errorf("stalled chunked body: status %d, want 408", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer 10 s after the body stalled (hold timeout 1 s)")
	}
	if n := h.front.ReadingBytes("cold"); n != 0 {
		t.Errorf("bytes still reserved after the refusal: %d, want 0", n)
	}
	if got := testutil.ToFloat64(h.m.FastFailed.WithLabelValues("cold", "body_timeout")); got != 1 {
		t.Errorf("fast_failed_total{cold,body_timeout} = %v, want 1", got)
	}
}

// TestHTTPDeclaredLengthIsNotCharged: a request for a model that is not ready counts against
// the hold budget by the buffer its arrived bytes are read into (one ReadChunk) and
// ReaderOverhead, not by its Content-Length. A client
// that declared the whole budget and sent nothing used to take it: every other cold model's
// requests got 429 for the hold timeout.
func TestHTTPDeclaredLengthIsNotCharged(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHeldBytes, cfg.MaxTotalHeldBytes = 4<<20, 4<<20
	tc := oneModel("a", 0)
	tc.Models = append(tc.Models, tc.Models[0])
	tc.Models[1].Name = "b"
	h := start(t, tc, cfg, false, "a", "b") // never loaded: requests stay held
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()

	// 4 MiB declared, 1 byte sent, the connection kept open.
	rawRequest(t, srv.Listener.Addr().String(), "POST /v2/models/a/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 4194304\r\n\r\n{")
	const want = front.ReadChunk + front.ReaderOverhead
	for deadline := time.Now().Add(10 * time.Second); h.front.ReadingBytes("a") != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the front counts %d bytes for a's body, want %d: one buffer for the 1 byte that arrived, and the connection", h.front.ReadingBytes("a"), want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan int, 1)
	go func() { got <- postChunked(t, ctx, srv.URL, "b", strings.NewReader(`{"id":"small"}`)) }()
	waitHeld(t, h, "b", 1) // held, not refused 429 for a's 4 MiB that never came
	h.front.StartDrain()
	drainCtx, drainCancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer drainCancel()
	_ = h.front.Drain(drainCtx)
	if code := <-got; code != http.StatusServiceUnavailable {
		t.Errorf("b at the drain deadline: status %d, want 503 (draining)", code)
	}
}

// TestHTTPDrainClosesConnection: while the pod drains, the 503 "retry on another replica"
// closes its connection, so that the client's retry opens a new one, which the Service sends
// elsewhere; a kept-alive connection brought every retry back to the draining pod.
func TestHTTPDrainClosesConnection(t *testing.T) {
	h := start(t, oneModel("m", 0), testConfig(), true, "m")
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	h.front.StartDrain()
	resp, err := http.Post(srv.URL+"/v2/models/m/infer", "application/json", strings.NewReader(`{"id":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close {
		t.Errorf("while draining: status %d, connection closed %v; want 503 and closed", resp.StatusCode, resp.Close)
	}
}

// TestHTTPUpstreamConnectionsReused: 32 clients sending 50 requests each through the front
// reuse its connections to Triton. With http.DefaultTransport (2 idle connections per host)
// they opened 1,027 connections for 1,600 requests (667 in this test); the front keeps up to
// 256 idle.
func TestHTTPUpstreamConnectionsReused(t *testing.T) {
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{}`)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	h := start(t, oneModel("m", 0), testConfig(), true, "m")
	srv := frontOver(t, h, up)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 50 {
				resp, err := client.Post(srv.URL+"/v2/models/m/infer", "application/json", strings.NewReader(`{"id":"x"}`))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d, want 200", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	// About one connection per concurrent request (32), never one per request. The bound is
	// twice that: Go's transport may dial for a request while another's connection is on its
	// way back to the idle pool, and then keeps both (a run saw 33).
	if n := conns.Load(); n > 64 {
		t.Errorf("%d upstream connections for 1,600 requests from 32 clients, want ≤ 64", n)
	}
}

// TestHTTPForwardedBodyDeadline: a request forwarded to a READY model counts as its work in
// flight, so its body must arrive within the hold timeout: one that declared 1,000 bytes and
// sent one is answered 408 body_timeout and ends, and the model is no longer busy. Before, it
// stayed forwarded for as long as the connection stayed open, which kept the model from ever
// being a victim and the drain waiting.
func TestHTTPForwardedBodyDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.HoldTimeout = time.Second
	tc := oneModel("hot", 0)
	tc.StartupModels = []string{"hot"}
	h := start(t, tc, cfg, false, "hot")
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	c := rawRequest(t, srv.Listener.Addr().String(), "POST /v2/models/hot/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	for deadline := time.Now().Add(5 * time.Second); h.front.Forwarding()["hot"] != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Forwarding = %v, want hot: 1 while its body arrives", h.front.Forwarding())
		}
	}
	line, err := statusLine(c)
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 408") {
		t.Errorf("stalled forwarded body: %q (%v), want 408 after the 1 s hold timeout", line, err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(h.front.Forwarding()) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Forwarding after the refusal = %v, want empty", h.front.Forwarding())
		}
	}
	// A body that arrives in time is forwarded and answered, its deadline lifted.
	if code, _, out := post(t, srv.URL, "hot", "ok"); code != http.StatusOK || out["id"] != "ok" {
		t.Errorf("prompt request: %d %v, want 200 with its id", code, out)
	}
}

// TestHTTPHeldHalfCloseNotOK: a held request whose client half-closes its connection (net/http
// then cancels the request's context) is answered 503, never net/http's default 200 with no
// body for an inference that never ran.
func TestHTTPHeldHalfCloseNotOK(t *testing.T) {
	h := start(t, oneModel("cold", 0), testConfig(), false, "cold") // never loaded
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	c := rawRequest(t, srv.Listener.Addr().String(), "POST /v2/models/cold/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	waitHeld(t, h, "cold", 1)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	line, err := statusLine(c)
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 503") {
		t.Errorf("held request after the client's half-close: %q (%v), want 503", line, err)
	}
}
