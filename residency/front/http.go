package front

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// HTTPHandler returns the front for Triton's HTTP/REST inference protocol (KServe v2 over
// HTTP) at upstream (e.g. http://127.0.0.1:8100): POST /v2/models/{model}[/versions/{v}]/infer
// is held and failed fast as a gRPC ModelInfer is, with the model name taken from the URL path
// (the body is never parsed); every other request is proxied unchanged
// (httputil.ReverseProxy). Its own answers are KServe v2 errors ({"error": "…"}): 404 for a
// model outside the catalog, 503 with Retry-After (RFC 9110 §10.2.3: whole seconds, the
// pushback rounded up) where gRPC gets UNAVAILABLE with grpc-retry-pushback-ms. Held requests
// are released in arrival order, each once handed to the proxy; HTTP/1.1 connections give no
// stronger order. A request whose model Triton has unloaded since the front's last view is not
// re-held (Triton answers it).
func (f *Front) HTTPHandler(upstream *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := inferPath(r)
		if !ok {
			proxy.ServeHTTP(w, r)
			return
		}
		f.serveHTTPInfer(w, r, name, proxy)
	})
}

// inferPath returns the model of a KServe v2 infer request: POST /v2/models/{model}/infer or
// /v2/models/{model}/versions/{version}/infer.
func inferPath(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/models/")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[1] == "infer",
		len(parts) == 4 && parts[1] == "versions" && parts[3] == "infer":
	default:
		return "", false
	}
	if parts[0] == "" || len(parts[0]) > maxModelNameBytes {
		return "", false
	}
	return parts[0], true
}

func (f *Front) serveHTTPInfer(w http.ResponseWriter, r *http.Request, name string, proxy http.Handler) {
	v := f.deps.Readiness.Verdict(name)
	label := name
	if v == NotInCatalog {
		label = ""
	}
	if !f.enter() {
		f.m.FastFailed.WithLabelValues(label, "draining").Inc()
		f.httpAnswer(w, f.unavailable("draining", "pod is draining: retry on another replica"))
		return
	}
	defer f.leave()
	if rf := f.refusalFor(v, name); rf != nil {
		f.m.FastFailed.WithLabelValues(label, rf.reason).Inc()
		f.httpAnswer(w, rf)
		return
	}
	if v == NotReady || f.hasQueue(name) {
		size := r.ContentLength
		if size < 0 { // chunked: read it, up to one byte past the bound
			body, err := io.ReadAll(io.LimitReader(r.Body, f.cfg.MaxHeldBytes+1))
			if err != nil {
				f.m.FastFailed.WithLabelValues(name, "bad_request").Inc()
				f.httpAnswer(w, &refusal{code: codes.InvalidArgument, reason: "bad_request", msg: "reading the request body: " + err.Error()})
				return
			}
			size = int64(len(body))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		held, rf := f.hold(r.Context(), name, size)
		if rf != nil {
			f.httpAnswer(w, rf)
			return
		}
		if held == nil { // the client went away
			return
		}
		held.markSent() // handed to the proxy
	}
	f.m.Forwarded.WithLabelValues(name).Inc()
	proxy.ServeHTTP(w, r)
}

// httpAnswer writes r as a KServe v2 error: 404 for NOT_FOUND, 400 for a bad request, 503 with
// Retry-After for UNAVAILABLE, 500 otherwise.
func (f *Front) httpAnswer(w http.ResponseWriter, r *refusal) {
	code := http.StatusInternalServerError
	switch r.code {
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
		secs := (f.cfg.RetryPushback.Milliseconds() + 999) / 1000
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": r.msg})
}
