package front_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHTTPForwardingEndsWhenTritonAnswers: an HTTP inference request stops counting as
// forwarded (Forwarding, the request-seconds counter, the planner's busy model) when Triton's
// answer has come, not when its client has read it. The upstream answers a 32 MiB body at
// once; the client reads only the status line and stops reading, so the front's copy blocks.
// Forwarding is empty and the counter still while the answer waits to be written, and the
// request stays active (the drain waits for it) until its client goes. Before, the request
// counted as running on the model for as long as the client left the answer unread.
func TestHTTPForwardingEndsWhenTritonAnswers(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 32<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(big)
	}))
	h := start(t, oneModel("m", 0), testConfig(), true, "m")
	srv := frontOver(t, h, up)

	c := rawRequest(t, strings.TrimPrefix(srv.URL, "http://"), "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	defer c.Close() // before srv.Close (at cleanup), which waits for the handler blocked writing to c
	if line, err := statusLine(c); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("status line %q, %v; want 200", line, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(h.front.Forwarding()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Forwarding = %v 5 s after Triton answered, want empty", h.front.Forwarding())
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := testutil.ToFloat64(h.m.ForwardingSeconds)
	time.Sleep(500 * time.Millisecond)
	if after := testutil.ToFloat64(h.m.ForwardingSeconds); after != before {
		t.Errorf("request-seconds moved from %v to %v with the answer unread and nothing forwarded", before, after)
	}
	if before > 3 {
		t.Errorf("request-seconds = %v, want under 3 (counted until the upstream answered)", before)
	}
	if n := h.front.Active(); n != 1 {
		t.Errorf("Active = %d with the answer still being written, want 1 (the drain waits for it)", n)
	}
	c.Close()
	for h.front.Active() != 0 {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("Active = %d after the client closed, want 0", h.front.Active())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPGenerateCountsToTheBodyEnd: Triton starts a generate reply at the model's first
// response, and a decoupled model goes on generating after it, so a generate request counts
// as forwarded until the upstream body ends, not from the header on: forwarded while the
// upstream holds the rest of its answer, not once it has ended.
func TestHTTPGenerateCountsToTheBodyEnd(t *testing.T) {
	rest := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"text_output":"Hello`)
		w.(http.Flusher).Flush()
		<-rest
		_, _ = io.WriteString(w, ` world"}`)
	}))
	h := start(t, oneModel("m", 0), testConfig(), true, "m")
	srv := frontOver(t, h, up)
	resp, err := http.Post(srv.URL+"/v2/models/m/generate", "application/json", strings.NewReader(`{"text_input":"Hi"}`))
	if err != nil {
		close(rest)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len(`{"text_output":"Hello`))
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		close(rest)
		t.Fatalf("first part: %v", err)
	}
	if got := h.front.Forwarding()["m"]; got != 1 {
		t.Errorf("Forwarding[m] = %d after Triton's header and first response, want 1 (the model may still be generating)", got)
	}
	close(rest)
	if b, err := io.ReadAll(resp.Body); err != nil || string(first)+string(b) != `{"text_output":"Hello world"}` {
		t.Errorf("answer %q, %v", string(first)+string(b), err)
	}
	if got := h.front.Forwarding(); len(got) != 0 {
		t.Errorf("Forwarding = %v once the answer ended, want empty", got)
	}
}
