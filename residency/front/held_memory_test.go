package front_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/front"
)

// TestStalledReadersCountAsHeld: an HTTP request whose body is being read to be held counts
// against --hold-max-requests while it is read, and is charged one ReadChunk buffer and
// ReaderOverhead, so connections that send one byte of a chunked body and stall cannot pile up
// past the bound. Before, 1,000 such connections for one model were charged 1 byte each
// against a bound of 10 requests, and grew the heap by 77.7 KiB each (a hostile trial).
func TestStalledReadersCountAsHeld(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHeldRequests = 10
	h := start(t, oneModel("cold", 0), cfg, false, "cold") // never loaded
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	// Closed before srv.Close (deferred above), which waits for active connections.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	stall := func() net.Conn {
		c := rawRequest(t, srv.Listener.Addr().String(), "POST /v2/models/cold/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n")
		conns = append(conns, c)
		return c
	}
	for range cfg.MaxHeldRequests {
		stall()
	}
	const each = front.ReadChunk + front.ReaderOverhead
	want := int64(cfg.MaxHeldRequests) * each
	for deadline := time.Now().Add(10 * time.Second); h.front.ReadingBytes("cold") != want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("charged %d bytes for %d stalled readers, want %d", h.front.ReadingBytes("cold"), cfg.MaxHeldRequests, want)
		}
	}
	for i := range 5 {
		line, err := statusLine(stall())
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 503") {
			t.Errorf("stalled reader %d past the bound of %d: %q (%v), want 503 at once", cfg.MaxHeldRequests+i+1, cfg.MaxHeldRequests, line, err)
		}
	}
	if got := h.front.ReadingBytes("cold"); got != want {
		t.Errorf("charged %d bytes after the refusals, want %d", got, want)
	}
	// A held gRPC request meets the same count.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := infer(ctx, h.client, "cold", "g", nil); err == nil || !strings.Contains(err.Error(), "hold queue is full (10 requests") {
		t.Errorf("gRPC request with 10 bodies being read: %v, want queue_full naming 10 requests", err)
	}
}

// TestHeldBodyMemory: a held HTTP body costs what it is charged: its bytes rounded up to one
// ReadChunk, and ReaderOverhead. A bytes.Buffer that doubled as it grew had kept a 33 MiB + 1
// body in 64 MiB (1.94× what the hold budget counted, a hostile trial). The heap is read after
// a GC with the body held.
func TestHeldBodyMemory(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHeldBytes, cfg.MaxTotalHeldBytes, cfg.MaxRequestBytes = 64<<20, 64<<20, 64<<20
	h := start(t, oneModel("cold", 0), cfg, false, "cold") // never loaded
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	const size = 33<<20 + 1
	body := jsonBody("big", size)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- postChunked(t, ctx, srv.URL, "cold", bytes.NewReader(body)) }() // no copy on the client's side
	waitHeld(t, h, "cold", 1)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	charge := int64((size+front.ReadChunk-1)/front.ReadChunk*front.ReadChunk + front.ReaderOverhead)
	t.Logf("held a %d-byte chunked body, charged %d; heap grew %d bytes (%.2f× the charge)", size, charge, grew, float64(grew)/float64(charge))
	if grew > charge*5/4 {
		t.Errorf("heap grew %d bytes holding a %d-byte body charged %d, want at most 1.25× the charge", grew, size, charge)
	}
	h.front.StartDrain()
	drainCtx, drainCancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer drainCancel()
	_ = h.front.Drain(drainCtx)
	if got := <-done; got != http.StatusServiceUnavailable {
		t.Errorf("held request at the drain deadline: status %d, want 503", got)
	}
	runtime.KeepAlive(body)
}
