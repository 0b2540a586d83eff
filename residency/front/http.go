package front

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
)

// upstreamIdleConns is how many idle connections to Triton the HTTP front keeps open for
// reuse.
const upstreamIdleConns = 256

// HTTPHandler returns the front for Triton's HTTP/REST inference protocol (KServe v2 over
// HTTP) at upstream (e.g. http://127.0.0.1:8100): POST /v2/models/{model}[/versions/{v}]/infer,
// and Triton's generate extension's /generate and /generate_stream on the same model paths (its
// text endpoint for LLMs; generate_stream answers Server-Sent Events, which the proxy flushes
// as they come), are held and failed fast as a gRPC ModelInfer is, with the model name taken
// from the URL path (the body is never parsed); every other request is proxied unchanged
// (httputil.ReverseProxy). Its own answers are KServe v2 errors ({"error": "…"}): 404 for a
// model outside the catalog, 503 with Retry-After (RFC 9110 §10.2.3: whole seconds, the
// pushback rounded up) where gRPC gets UNAVAILABLE with grpc-retry-pushback-ms, 429 with
// Retry-After where it gets RESOURCE_EXHAUSTED for the pod's hold budget (the HTTP mapping of
// RESOURCE_EXHAUSTED in google.rpc.Code), and 413 Content Too Large (RFC 9110 §15.5.14) for a
// body over MaxRequestBytes, on every path: one that declares a larger Content-Length is refused
// unread, a chunked one once it passes the bound; a request Triton does not answer gets 503 with
// Retry-After or 502 (httpUpstreamError). Held requests
// are released in arrival order, each once handed to the proxy; HTTP/1.1 connections give no
// stronger order. A request whose model Triton has unloaded since the front's last view is not
// re-held (Triton answers it).
func (f *Front) HTTPHandler(upstream *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	// http.DefaultTransport keeps 2 idle connections per host: with many clients nearly every
	// request to Triton would open a new loopback connection (TIME_WAIT, ephemeral ports).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost, tr.MaxIdleConns = upstreamIdleConns, upstreamIdleConns
	proxy.Transport = tr
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok { // a chunked body passed the bound while forwarded
			f.m.FastFailed.WithLabelValues("", "too_large").Inc()
			f.httpAnswer(w, f.tooLarge(-1))
			return
		}
		if db, ok := r.Context().Value(deadlineBodyKey{}).(*deadlineBody); ok && db.expired(time.Now()) {
			// Its read deadline passed: net/http has cancelled r's context, so err may say
			// only that. Connection: close, or net/http would wait to read the rest.
			f.m.FastFailed.WithLabelValues("", "body_timeout").Inc()
			w.Header().Set("Connection", "close")
			f.httpAnswer(w, &refusal{code: codes.DeadlineExceeded, reason: "body_timeout",
				msg: fmt.Sprintf("the request body did not arrive within the hold timeout %s (--hold-timeout)", f.cfg.HoldTimeout)})
			return
		}
		f.httpUpstreamError(w, r, upstream, err)
	}
	proxy.ModifyResponse = func(resp *http.Response) error {
		if fw, ok := resp.Request.Context().Value(forwardedKey{}).(*forwarded); ok {
			if fw.toBodyEnd {
				resp.Body = &endOnBodyEnd{ReadCloser: resp.Body, fw: fw}
			} else {
				fw.done()
			}
		}
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isModelControl(r) {
			f.m.FastFailed.WithLabelValues("", "model_control").Inc()
			f.httpAnswer(w, &refusal{code: codes.PermissionDenied, reason: "model_control", msg: modelControlMsg})
			return
		}
		if r.ContentLength > f.cfg.MaxRequestBytes {
			w.Header().Set("Connection", "close") // the body is not read
			f.m.FastFailed.WithLabelValues("", "too_large").Inc()
			f.httpAnswer(w, f.tooLarge(r.ContentLength))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, f.cfg.MaxRequestBytes)
		name, ok := inferPath(r)
		if !ok {
			proxy.ServeHTTP(w, r)
			return
		}
		f.serveHTTPInfer(w, r, name, proxy)
	})
}

// httpUpstreamError answers a request that Triton's HTTP endpoint did not answer, in KServe v2's
// error shape ({"error": "…"}), as the gRPC front passes on the UNAVAILABLE of a Triton it
// cannot reach: 503 Service Unavailable with Retry-After (the pushback rounded up) when the
// connection to Triton could not be made (Triton is starting or restarting: the request never
// reached it, so a retry here or on another replica is safe), 502 Bad Gateway otherwise (the
// request was sent and the answer was lost: Triton may have run it). A client that went away
// first is logged at debug level, not as a fault of the pod.
func (f *Front) httpUpstreamError(w http.ResponseWriter, r *http.Request, upstream *url.URL, err error) {
	if r.Context().Err() != nil {
		f.deps.Log.Debug("front: HTTP client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		w.WriteHeader(http.StatusBadGateway) // nobody reads it
		return
	}
	f.deps.Log.Warn("front: HTTP upstream", "method", r.Method, "path", r.URL.Path, "err", err)
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		f.httpAnswer(w, &refusal{code: codes.Unavailable, pushback: true,
			msg: fmt.Sprintf("Triton's HTTP endpoint %s is not reachable: %v", upstream.Host, op.Err)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadGateway)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("no answer from Triton's HTTP endpoint %s: %v", upstream.Host, err)})
}

// modelControlPath is Triton's own route for the repository extension's load and unload, less
// its index: modelcontrol_regex_ in its src/http_server.cc,
// /v2/repository(?:/([^/]+))?/(index|models/([^/]+)/(load|unload)), which Triton full-matches
// (RE2, as Go's regexp) against the raw path, not percent-decoded (libevhtp does not decode).
var modelControlPath = regexp.MustCompile(`^/v2/repository(?:/[^/]+)?/models/[^/]+/(?:load|unload)$`)

// isModelControl reports a KServe v2 repository extension load or unload as Triton routes one:
// the path as the proxy forwards it (URL.EscapedPath) matching modelControlPath, whatever the
// method (Triton answers a method other than POST there itself; refusing it costs nothing). A
// match on the decoded path let /v2/repository/models/a%2Fx/load through: Triton loads a model
// named "a%2Fx", and its load parameters can carry a whole model config and files.
func isModelControl(r *http.Request) bool {
	return modelControlPath.MatchString(r.URL.EscapedPath())
}

// inferEndpoints are the last path segments of a request that runs a model: KServe v2's infer
// and Triton's generate extension (docs/protocol/extension_generate.md: POST
// v2/models/${MODEL_NAME}[/versions/${MODEL_VERSION}]/generate and /generate_stream).
var inferEndpoints = map[string]bool{"infer": true, "generate": true, "generate_stream": true}

// inferPath returns the model of a request that runs one: POST /v2/models/{model}/{endpoint} or
// /v2/models/{model}/versions/{version}/{endpoint}, endpoint one of inferEndpoints and version
// decimal digits. It reads the path as the client sent it, not percent-decoded, because Triton
// does: its HTTP server matches the raw path against
// /v2/models/([^/]+)(?:/versions/([0-9]+))?/(infer|generate|generate_stream|...) (model_regex_
// in its src/http_server.cc; libevhtp does not decode), so /v2/models/%6D/infer is a model
// named "%6D" there, and /versions/x/ matches nothing. The front holds only what Triton would
// run; anything else passes through for Triton to answer.
func inferPath(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v2/models/")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && inferEndpoints[parts[1]],
		len(parts) == 4 && parts[1] == "versions" && decimal(parts[2]) && inferEndpoints[parts[3]]:
	default:
		return "", false
	}
	if parts[0] == "" || len(parts[0]) > maxModelNameBytes {
		return "", false
	}
	return parts[0], true
}

func (f *Front) serveHTTPInfer(w http.ResponseWriter, r *http.Request, name string, proxy http.Handler) {
	arrived := time.Now()
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
	if v.holds() || f.hasQueue(name) {
		// The body is read before the request is held, chunked or not, and counts as it
		// arrives: a declared Content-Length is only a claim, and charging it before the bytes
		// came let one connection that declared 64 MiB and sent nothing take the pod's whole
		// hold budget for the hold timeout. A client that stops sending must not keep its reservation: the read ends at the
		// hold timeout (a server without read deadlines leaves it open; then unbounded).
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(f.cfg.HoldTimeout))
		body, rf := f.readHeldBody(name, r.Body, r.ContentLength)
		_ = rc.SetReadDeadline(time.Time{})
		if rf != nil {
			// The rest of the body is not read: without Connection: close, net/http would
			// read up to 256 KiB of it before sending the answer.
			w.Header().Set("Connection", "close")
			f.m.FastFailed.WithLabelValues(name, rf.reason).Inc()
			f.httpAnswer(w, rf)
			return
		}
		r.Body = io.NopCloser(body.reader())
		r.ContentLength = body.n
		held, rf := f.hold(r.Context(), name, body.charge(), arrived)
		if rf != nil {
			f.httpAnswer(w, rf)
			return
		}
		if held == nil {
			// The request's context ended while it was held: the client went away, or only
			// half-closed its connection, which net/http reports the same way. Either way it
			// was not run; saying so (net/http would send a 200 with no body) is harmless to
			// a client that left and true to one still reading.
			f.httpAnswer(w, f.unavailable("cancelled", fmt.Sprintf("model %q was not ready and the request was cancelled while held (its client closed the connection, or its sending side): it was not run", name)))
			return
		}
		held.markSent() // handed to the proxy
	} else if r.ContentLength != 0 {
		// A forwarded request counts as the model's work in flight (never a victim, and the
		// drain waits for it) from now on, so its body must arrive within the hold timeout, as
		// a held one must: a connection that declared a body and stopped sending had kept its
		// model busy and the drain waiting for as long as it stayed open.
		rc := http.NewResponseController(w)
		// The proxy's transport reads the body on its own goroutine, and may do so after
		// this handler has returned (Triton answered first): a clear then would lift the
		// deadline net/http has set for the connection's next request. returned, under mu,
		// makes it a no-op.
		var mu sync.Mutex
		returned := false
		defer func() {
			mu.Lock()
			returned = true
			mu.Unlock()
		}()
		db := &deadlineBody{ReadCloser: r.Body, deadline: time.Now().Add(f.cfg.HoldTimeout), clear: func() {
			mu.Lock()
			defer mu.Unlock()
			if !returned {
				_ = rc.SetReadDeadline(time.Time{})
			}
		}}
		_ = rc.SetReadDeadline(db.deadline)
		r.Body = db
		r = r.WithContext(context.WithValue(r.Context(), deadlineBodyKey{}, db))
	}
	f.m.Forwarded.WithLabelValues(name).Inc()
	fw := &forwarded{end: func() { f.forwardEnd(name) }, toBodyEnd: !strings.HasSuffix(r.URL.EscapedPath(), "/infer")}
	f.forwardStart(name)
	defer fw.done() // deferred: the proxy panics with http.ErrAbortHandler on a broken copy
	proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, fw)))
}

// httpAnswer writes r as a KServe v2 error: 404 for NOT_FOUND, 400 for a bad request, 403 for
// model control, 503 for UNAVAILABLE, 413 for a body over MaxRequestBytes, 429 for the hold
// budget (RESOURCE_EXHAUSTED), 408 for a body that did not arrive in time, 500 otherwise; with
// Retry-After when r has a pushback, and Connection: close when the pod is draining.
func (f *Front) httpAnswer(w http.ResponseWriter, r *refusal) {
	code := http.StatusInternalServerError
	switch {
	case r.code == codes.NotFound:
		code = http.StatusNotFound
	case r.code == codes.InvalidArgument:
		code = http.StatusBadRequest
	case r.code == codes.PermissionDenied:
		code = http.StatusForbidden
	case r.code == codes.Unavailable:
		code = http.StatusServiceUnavailable
	case r.code == codes.ResourceExhausted && r.reason == "too_large":
		code = http.StatusRequestEntityTooLarge
	case r.code == codes.ResourceExhausted:
		code = http.StatusTooManyRequests
	case r.code == codes.DeadlineExceeded:
		code = http.StatusRequestTimeout
	}
	if r.reason == "draining" {
		// So that the client's retry opens a new connection, which the Service sends to
		// another replica; a kept-alive one would bring it back to this draining pod.
		w.Header().Set("Connection", "close")
	}
	if r.pushback {
		secs := (f.cfg.RetryPushback.Milliseconds() + 999) / 1000
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": r.msg})
}

// readChunk is the size of each buffer readHeldBody reads a held body into. A body is kept
// in such buffers, each charged whole when it is allocated (the last one of a declared
// Content-Length only as large as the bytes left), so a held body costs at most one readChunk
// more than its bytes (a bytes.Buffer doubling as it grew had kept up to twice them),
// and a connection that sends one byte and stalls costs one readChunk, charged.
const readChunk = 16 << 10

// readerOverhead is charged for each HTTP request while its body is read to be held and while it
// is held, for what its connection costs the sidecar besides the body: net/http's per-connection
// bufio.Reader and bufio.Writer (4 KiB each) and the serving goroutine's stack (8 KiB at least).
// Measured: 1,000 connections stalled one byte into a chunked body grew the heap by 13.7 KiB
// each beside their 64 KiB read buffer (a hostile trial, 2026-12-04).
const readerOverhead = 16 << 10

// heldBody is a request body read to be held: buffers of readChunk bytes (fewer for the last
// of a declared Content-Length), each full but the last.
type heldBody struct {
	bufs [][]byte
	n    int64 // bytes in bufs
}

// charge is what the body costs while held: its buffers' capacity and readerOverhead.
func (b *heldBody) charge() int64 {
	c := int64(readerOverhead)
	for _, p := range b.bufs {
		c += int64(cap(p))
	}
	return c
}

// reader returns the body's bytes in order, without copying them.
func (b *heldBody) reader() io.Reader {
	rs := make([]io.Reader, len(b.bufs))
	for i, p := range b.bufs {
		rs[i] = bytes.NewReader(p)
	}
	return io.MultiReader(rs...)
}

// readHeldBody reads the body of a request about to be held, chunked or of a declared
// length. What the request costs so far — its buffers, each charged whole when allocated, and
// readerOverhead — counts against the model's hold bound and the pod's hold budget together
// with the bytes held (Front.reading, Front.heldTotal), and the request counts against the
// model's MaxHeldRequests while it is read (Front.readers), so memory stays within
// MaxHeldBytes per model and MaxTotalHeldBytes in all however many connections send at once,
// stalled ones included; a request the queue cannot take (full in count, or its body passing
// the bound) is refused with queue_full, before its body is read when the count is already
// full, one passing the budget with hold_budget, a body over MaxRequestBytes (body is bounded
// by http.MaxBytesReader) with too_large, one that stops arriving before the caller's read
// deadline with body_timeout. The reservation ends when it returns: hold then accounts the
// request itself, at heldBody.charge.
func (f *Front) readHeldBody(name string, body io.Reader, declared int64) (*heldBody, *refusal) {
	out := &heldBody{}
	var reserved int64
	counted := false
	defer func() {
		f.mu.Lock()
		if f.reading[name] -= reserved; f.reading[name] <= 0 {
			delete(f.reading, name)
		}
		f.heldTotal -= reserved
		if counted {
			if f.readers[name]--; f.readers[name] <= 0 {
				delete(f.readers, name)
			}
		}
		f.mu.Unlock()
	}()
	full := func(n int, b int64) *refusal {
		return f.unavailable("queue_full", fmt.Sprintf("model %q is not ready and its hold queue is full (%d requests, %d bytes held or being read; bounds %d, %d)",
			name, n, b, f.cfg.MaxHeldRequests, f.cfg.MaxHeldBytes))
	}
	// reserve charges k more bytes of this request, or says why it may not have them.
	reserve := func(k int64) *refusal {
		f.mu.Lock()
		defer f.mu.Unlock()
		var n int
		var held int64
		if q := f.queues[name]; q != nil {
			n, held = len(q.held), q.bytes
		}
		n += f.readers[name]
		if !counted {
			if n+1 > f.cfg.MaxHeldRequests {
				return full(n, held+f.reading[name])
			}
		}
		if held+f.reading[name]+k > f.cfg.MaxHeldBytes {
			return full(n, held+f.reading[name])
		}
		if f.heldTotal+k > f.cfg.MaxTotalHeldBytes {
			return f.holdBudgetFull(name, f.heldTotal, reserved+k)
		}
		if !counted {
			f.readers[name]++
			counted = true
		}
		f.reading[name] += k
		f.heldTotal += k
		reserved += k
		return nil
	}
	if rf := reserve(readerOverhead); rf != nil {
		return nil, rf
	}
	var probe [1]byte
	for {
		var k int
		var err error
		if declared >= 0 && out.n >= declared {
			// All the declared bytes came: net/http's body ends there, so this read sees
			// its EOF and allocates nothing.
			if k, err = body.Read(probe[:]); k > 0 {
				return nil, &refusal{code: codes.InvalidArgument, reason: "bad_request", msg: "reading the request body: more bytes than its Content-Length"}
			}
		} else {
			if len(out.bufs) == 0 || len(out.bufs[len(out.bufs)-1]) == cap(out.bufs[len(out.bufs)-1]) {
				size := int64(readChunk)
				if declared >= 0 {
					size = min(size, declared-out.n) // a Content-Length bounds what can come
				}
				if rf := reserve(size); rf != nil {
					return nil, rf
				}
				out.bufs = append(out.bufs, make([]byte, 0, size))
			}
			last := out.bufs[len(out.bufs)-1]
			k, err = body.Read(last[len(last):cap(last)])
			out.bufs[len(out.bufs)-1] = last[:len(last)+k]
			out.n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			if len(out.bufs) > 0 && len(out.bufs[len(out.bufs)-1]) == 0 {
				out.bufs = out.bufs[:len(out.bufs)-1] // allocated for bytes that did not come
			}
			return out, nil
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, f.tooLarge(-1)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, &refusal{code: codes.DeadlineExceeded, reason: "body_timeout",
				msg: fmt.Sprintf("model %q is not ready and the request body did not arrive within the hold timeout %s (--hold-timeout)", name, f.cfg.HoldTimeout)}
		}
		if err != nil {
			return nil, &refusal{code: codes.InvalidArgument, reason: "bad_request", msg: "reading the request body: " + err.Error()}
		}
	}
}

// deadlineBody is a forwarded request's body under a read deadline, which clear lifts once the
// body has ended (EOF or an error), so a streamed answer (generate_stream) is not cut by it. A
// body that has not ended keeps its deadline: net/http's read of the rest after the handler is
// bounded by it too.
type deadlineBody struct {
	io.ReadCloser
	deadline time.Time
	clear    func()
	ended    atomic.Bool // read by the proxy's ErrorHandler
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.ended.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
		b.ended.Store(true)
		b.clear()
	}
	return n, err
}

// expired reports a body that had not ended by its deadline.
func (b *deadlineBody) expired(now time.Time) bool { return !b.ended.Load() && !now.Before(b.deadline) }

// forwarded ends one HTTP request's forwardStart once, when Triton's answer has come (the
// proxy's ModifyResponse), or when the handler returns (an error, a broken copy), whichever is
// first. For infer, at its response header: Triton's HTTP server refuses decoupled models
// there and replies only with the final response, once the model has run
// (src/http_server.cc, CheckTransactionPolicy and the infer ReplyCallback). For generate and
// generate_stream, at the end of its body: Triton starts that reply at the model's first
// response, and a decoupled model goes on generating after it. So a client that reads an infer
// answer slowly or not at all no longer counts as a request running on the model (Forwarding,
// the inferscale_front_forwarding_seconds_total counter, a busy model the planner never
// evicts); on generate and generate_stream the upstream body is read only as fast as the
// client takes it, so such a client keeps counting for an answer larger than the sockets'
// buffers. Either way the request stays active (Active, which the drain waits for) until its
// answer is written.
type forwarded struct {
	once      sync.Once
	end       func()
	toBodyEnd bool // generate, generate_stream: ends with the upstream body
}

func (fw *forwarded) done() { fw.once.Do(fw.end) }

// forwardedKey is the request context key of a forwarded request's *forwarded, for the proxy's
// ModifyResponse (it gets the outgoing request, a clone carrying the incoming one's context).
type forwardedKey struct{}

// endOnBodyEnd is an upstream answer's body that ends its request's forwarding when it ends:
// at its first read error (io.EOF included) or its Close.
type endOnBodyEnd struct {
	io.ReadCloser
	fw *forwarded
}

func (b *endOnBodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.fw.done()
	}
	return n, err
}

func (b *endOnBodyEnd) Close() error {
	b.fw.done()
	return b.ReadCloser.Close()
}

// deadlineBodyKey is the request context key of a forwarded request's *deadlineBody, for the
// proxy's ErrorHandler (it gets the outgoing request, whose body the proxy may have wrapped).
type deadlineBodyKey struct{}

// decimal reports a non-empty string of ASCII digits, Triton's [0-9]+.
func decimal(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
