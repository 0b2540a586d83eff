package front_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/front"
)

// httpUpstream stands in for Triton's HTTP endpoint (tritontest serves gRPC only): an infer
// request runs tritontest's ModelInfer for the model in the path and answers its id as JSON;
// GET /v2/health/ready answers 200.
func httpUpstream(t *testing.T, h *harness) *url.URL {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/models/{model}/infer", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := h.triton.ModelInfer(r.Context(), &inference.ModelInferRequest{ModelName: r.PathValue("model"), Id: body.ID})
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"model_name": resp.GetModelName(), "id": resp.GetId()})
	})
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ready") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// frontOver serves h's front over the upstream server up (closed at cleanup, after the
// front's server, which cleanup also closes).
func frontOver(t *testing.T, h *harness, up *httptest.Server) *httptest.Server {
	t.Helper()
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.front.HTTPHandler(u))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, base, model, id string) (int, http.Header, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/models/"+model+"/infer", strings.NewReader(`{"id":"`+id+`","inputs":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", model, err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	var out map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}

// TestHTTPHoldAndFailFast: KServe v2 REST infer requests are held through a load like gRPC
// ones, fail fast with 404 / 503 + Retry-After, and other paths pass through.
func TestHTTPHoldAndFailFast(t *testing.T) {
	cfg := testConfig()
	cfg.RetryPushback = 1500 * time.Millisecond
	tc := oneModel("rest", 500*time.Millisecond)
	h := start(t, tc, cfg, true, "rest", "quarantined")
	h.ready.set("quarantined", front.Quarantined)
	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()

	var wg sync.WaitGroup
	codes := make([]int, 10)
	ids := make([]string, 10)
	for i := range codes {
		wg.Go(func() {
			var body map[string]string
			codes[i], _, body = post(t, srv.URL, "rest", string(rune('a'+i)))
			ids[i] = body["id"]
		})
	}
	wg.Wait()
	for i := range codes {
		if codes[i] != http.StatusOK || ids[i] != string(rune('a'+i)) {
			t.Errorf("request %d: status %d id %q, want 200 and its own id", i, codes[i], ids[i])
		}
	}
	if st, _ := h.triton.Model("rest"); st.Loads != 1 {
		t.Errorf("loads = %d, want 1", st.Loads)
	}

	tests := []struct {
		name, model     string
		wantStatus      int
		wantRetryAfter  string
		wantErrContains string
	}{
		{"not in catalog", "nosuch", http.StatusNotFound, "", "not in this pool's catalog"},
		{"quarantined", "quarantined", http.StatusServiceUnavailable, "2", "quarantined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := post(t, srv.URL, tt.model, "x")
			if code != tt.wantStatus || hdr.Get("Retry-After") != tt.wantRetryAfter || !strings.Contains(body["error"], tt.wantErrContains) {
				t.Errorf("status %d, Retry-After %q, body %v; want %d, %q, error containing %q",
					code, hdr.Get("Retry-After"), body, tt.wantStatus, tt.wantRetryAfter, tt.wantErrContains)
			}
		})
	}

	resp, err := http.Get(srv.URL + "/v2/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if diff := cmp.Diff("ready", string(b)); diff != "" || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v2/health/ready: %d (-want +got):\n%s", resp.StatusCode, diff)
	}
}

// TestHTTPGenerateStreamHeld: Triton's generate extension (the text endpoint LLM clients use)
// is held through a load like infer: POST /v2/models/{model}/generate_stream for a model that is
// loading waits, goes to Triton once it is READY, and its Server-Sent Events reach the client
// one at a time as Triton writes them (the first arrives while the upstream still holds the
// second back), not buffered to the end. Before, /generate and /generate_stream were proxied
// straight to Triton, which answered a model still loading with an error.
func TestHTTPGenerateStreamHeld(t *testing.T) {
	h := start(t, oneModel("llm", 300*time.Millisecond), testConfig(), true, "llm")
	second := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/models/{model}/generate_stream", func(w http.ResponseWriter, r *http.Request) {
		if st, _ := h.triton.Model(r.PathValue("model")); st.State != "READY" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"model not ready"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, "data: {\"text_output\":\"Hello\"}\n\n")
		w.(http.Flusher).Flush()
		<-second
		_, _ = io.WriteString(w, "data: {\"text_output\":\" world\"}\n\n")
	})
	srv := frontOver(t, h, httptest.NewServer(mux))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v2/models/llm/generate_stream", strings.NewReader(`{"text_input":"Hi","parameters":{"stream":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, Content-Type %q, body %q; want 200 and an event stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	first := make([]byte, len("data: {\"text_output\":\"Hello\"}\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: {\"text_output\":\"Hello\"}\n\n" {
		t.Fatalf("first event %q, %v; want it before the upstream sends the second", first, err)
	}
	// The model is still generating: the request counts as forwarded until the stream ends.
	if got := h.front.Forwarding()["llm"]; got != 1 {
		t.Errorf("Forwarding[llm] = %d between the events, want 1", got)
	}
	close(second)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: {\"text_output\":\" world\"}\n\n" {
		t.Errorf("second event %q, %v", rest, err)
	}
	if got := h.front.Forwarding(); len(got) != 0 {
		t.Errorf("Forwarding = %v once the stream ended, want empty", got)
	}
	if st, _ := h.triton.Model("llm"); st.Loads != 1 {
		t.Errorf("loads = %d, want 1 (the held request's)", st.Loads)
	}
	h.mu.Lock()
	holds := h.holds
	h.mu.Unlock()
	if len(holds) != 1 || holds[0] != "llm" {
		t.Errorf("holds = %v, want [llm]", holds)
	}
}

// TestHTTPUpstreamErrors: a request Triton's HTTP endpoint does not answer gets a KServe v2
// error, not the reverse proxy's bare 502: 503 with Retry-After when Triton cannot be reached
// (the request never left the pod), 502 when the connection broke after the request was sent.
func TestHTTPUpstreamErrors(t *testing.T) {
	cfg := testConfig()
	cfg.RetryPushback = 1500 * time.Millisecond
	h := start(t, oneModel("rest", 50*time.Millisecond), cfg, true, "rest")

	// Nothing listens at a closed listener's address: every dial is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := &url.URL{Scheme: "http", Host: l.Addr().String()}
	_ = l.Close()
	// An upstream that reads the request and closes the connection without an answer.
	hangup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	defer hangup.Close()
	broken, err := url.Parse(hangup.URL)
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name            string
		upstream        *url.URL
		path            string // "" is an infer request for "rest", held through its load first
		wantStatus      int
		wantRetryAfter  string
		wantErrContains string
	}{
		{"infer, Triton not reachable", refused, "", http.StatusServiceUnavailable, "2", "is not reachable"},
		{"pass-through, Triton not reachable", refused, "/v2/health/ready", http.StatusServiceUnavailable, "2", "is not reachable"},
		{"infer, connection broken", broken, "", http.StatusBadGateway, "", "no answer from Triton's HTTP endpoint"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(h.front.HTTPHandler(tt.upstream))
			defer srv.Close()
			var (
				code int
				hdr  http.Header
				body map[string]string
			)
			if tt.path == "" {
				code, hdr, body = post(t, srv.URL, "rest", "x")
			} else {
				resp, err := http.Get(srv.URL + tt.path)
				if err != nil {
					t.Fatal(err)
				}
				code, hdr = resp.StatusCode, resp.Header
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
			}
			if code != tt.wantStatus || hdr.Get("Retry-After") != tt.wantRetryAfter ||
				hdr.Get("Content-Type") != "application/json" || !strings.Contains(body["error"], tt.wantErrContains) {
				t.Errorf("status %d, Retry-After %q, Content-Type %q, body %v; want %d, %q, application/json, error containing %q",
					code, hdr.Get("Retry-After"), hdr.Get("Content-Type"), body, tt.wantStatus, tt.wantRetryAfter, tt.wantErrContains)
			}
		})
	}
}
