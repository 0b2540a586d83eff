package front

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/plan"
)

// The methods the front looks into; every other method passes through.
const (
	methodInfer       = inference.GRPCInferenceService_ModelInfer_FullMethodName
	methodStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer"
	methodLoad        = inference.GRPCInferenceService_RepositoryModelLoad_FullMethodName
	methodUnload      = inference.GRPCInferenceService_RepositoryModelUnload_FullMethodName
)

// modelControlMsg answers a client's RepositoryModelLoad or RepositoryModelUnload: the
// residency controller owns what is loaded (it talks to Triton on the pod's loopback), and a
// client's load would bypass the memory budget, its unload evict what the plan keeps.
const modelControlMsg = "model control belongs to this pod's residency controller: repository load and unload are not served through the inference front"

// PushbackKey is gRPC's retry pushback trailer (gRFC A6, "gRPC Retry Design": "the server may
// explicitly pushback by setting metadata in its response … grpc-retry-pushback-ms"): a
// non-negative integer of milliseconds the client waits before its next attempt. The front
// sends it with every UNAVAILABLE it answers itself.
const PushbackKey = "grpc-retry-pushback-ms"

// Verdict is what the readiness source knows about a model when a request for it arrives.
type Verdict int

const (
	// NotInCatalog: the pod does not serve the model; NOT_FOUND at once.
	NotInCatalog Verdict = iota
	// Ready: the model was last seen READY; the request is forwarded.
	Ready
	// NotReady: a catalog model that is not READY and that the planner may load; the request is
	// held.
	NotReady
	// Quarantined: the model failed to load too often and will not be loaded; UNAVAILABLE at
	// once.
	Quarantined
	// NeverFits: the model can never be loaded in this pod (no peak for its profile, or above
	// the budget); UNAVAILABLE at once.
	NeverFits
	// Loading: a catalog model whose load is under way; the request is held, as for NotReady.
	// It differs from NotReady only once the pod drains: a draining pod starts no load, so the
	// requests held for a NotReady model then fail UNAVAILABLE with a pushback at once (they
	// are served elsewhere), while those held for a Loading model wait for its load to finish.
	Loading
)

// String names the verdict as the metrics' reason label does.
func (v Verdict) String() string {
	switch v {
	case NotInCatalog:
		return "not_found"
	case Ready:
		return "ready"
	case NotReady:
		return "not_ready"
	case Quarantined:
		return "quarantined"
	case NeverFits:
		return "never_fits"
	case Loading:
		return "loading"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// holds reports whether a request for a model with this verdict is held until it is READY.
func (v Verdict) holds() bool { return v == NotReady || v == Loading }

// Readiness tells the front what it may do with a request for a model. The sidecar implements
// it from the controller's latest observation and catalog. Verdict is called once per
// inference request and once per re-check of a held model, and must not block.
type Readiness interface {
	Verdict(model string) Verdict
}

// Deps are the front's connections to the rest of the sidecar. Readiness is required.
type Deps struct {
	Readiness Readiness
	// OnHold is called when a model's first request is held (its hold queue was empty), and when
	// a request the front kept no copy of met a stale READY (Triton's NOT_FOUND for a model
	// unloaded since the front's view), so the planner can act at once instead of at its next
	// loop; it must not block. nil: none.
	OnHold func(model string)
	// OnIdle is called when the last request the front forwards for a model (Forwarding) has
	// its answer while the front holds or releases requests for any model, so the planner
	// can act at once: it never evicts a model with work in flight, and a load waiting for
	// memory may now have a victim. It must not block. nil: none.
	OnIdle func(model string)
	// Metrics; nil: collectors on a throwaway registry.
	Metrics *Metrics
	// Log; nil: slog.Default().
	Log *slog.Logger
	// DialOptions are added to the upstream connection's (keepalive, interceptors).
	DialOptions []grpc.DialOption
}

// Front is the gRPC front; New creates it, Serve serves it, Drain and Close stop it.
type Front struct {
	cfg    Config
	deps   Deps
	m      *Metrics
	conn   *grpc.ClientConn
	client inference.GRPCInferenceServiceClient
	srv    *grpc.Server

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // watchers

	mu       sync.Mutex
	noHolds  bool // StartDrain: requests that would be held fail at once
	draining bool // Drain: every new inference request fails at once
	queues   map[string]*queue
	reading  map[string]int64 // per model: bytes charged for HTTP bodies being read to be held
	readers  map[string]int   // per model: HTTP requests whose bodies are being read to be held
	// forwarding counts, per model, the unary and HTTP requests forwarded to Triton whose
	// answer has not come; a model at 0 has no entry.
	forwarding map[string]int
	// heldTotal is the bytes held for every model plus those being read to be held (the sum
	// of queue.bytes and reading), bounded by MaxTotalHeldBytes.
	heldTotal int64
	// retained is the bytes of forwarded unary requests kept for a re-hold after a stale
	// NOT_FOUND (keep), bounded by MaxRetainedBytes.
	retained int64
	active   int           // inference requests held or being forwarded, and open streams
	drained  chan struct{} // closed by Drain: idle streams end (streamQuiet)
	idle     chan struct{} // closed when active drops to 0
}

// queue is one model's held requests, in arrival order. One watcher goroutine serves a queue
// from its first request until it is empty again.
type queue struct {
	held  []*waiter
	bytes int64
	kick  chan struct{} // Recheck: look now
}

// waiter is one held request. released and err are guarded by Front.mu; ready is closed, under
// Front.mu, when the request leaves the queue (err nil: forward it).
type waiter struct {
	size int64
	// arrived is when the front received the request (queue order, Held's Since); queued is
	// when it entered the queue (hold_seconds).
	arrived  time.Time
	queued   time.Time
	released bool
	err      *refusal
	ready    chan struct{}
	sent     chan struct{} // closed by markSent once its request went upstream, or it gave up
	sentOnce sync.Once
}

// markSent tells the watcher releasing the queue that the next request may go.
func (w *waiter) markSent() { w.sentOnce.Do(func() { close(w.sent) }) }

// refusal is an answer the front gives itself.
type refusal struct {
	code   codes.Code
	reason string // metrics label
	msg    string
	// pushback: send grpc-retry-pushback-ms (HTTP: Retry-After), the request may succeed
	// when retried later or elsewhere.
	pushback bool
}

// New validates cfg and returns a front whose upstream connection to Triton is set up lazily
// (grpc.NewClient), so New does not fail when Triton is not up yet.
func New(cfg Config, deps Deps) (*Front, error) {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if deps.Readiness == nil {
		errs = append(errs, errors.New("deps.Readiness: nil; want a readiness source"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Metrics == nil {
		m, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			return nil, err
		}
		deps.Metrics = m
	}
	// Triton accepts messages up to 2 GiB − 1 (its MAX_GRPC_MESSAGE_SIZE is INT32_MAX); the
	// front must pass anything Triton would take.
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // a forwarded frame is sent once; the client owns retries
		// No replay buffer either: with retries disabled grpc-go still kept every request up to
		// 256 KiB (its default MaxRetryRPCBufferSize) until the answer, for a transparent retry
		// of a stream Triton never saw, so 64 concurrent 128 KiB requests stayed in memory
		// whatever --retain-max-total-bytes said. Such a stream now fails UNAVAILABLE, which
		// the client retries.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32), grpc.MaxRetryRPCBufferSize(0)),
	}, deps.DialOptions...)
	conn, err := grpc.NewClient(cfg.Upstream, opts...)
	if err != nil {
		return nil, fmt.Errorf("front: upstream %q: %w", cfg.Upstream, err)
	}
	f := &Front{cfg: cfg, deps: deps, m: deps.Metrics, conn: conn, client: inference.NewGRPCInferenceServiceClient(conn),
		done: make(chan struct{}), queues: map[string]*queue{}, reading: map[string]int64{}, readers: map[string]int{}, forwarding: map[string]int{}, drained: make(chan struct{})}
	// Requests are bounded by MaxRequestBytes: gRPC checks a message's length prefix before
	// reading it, so a larger one costs no memory. Responses come from Triton and pass whole.
	f.srv = grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.UnknownServiceHandler(f.handle),
		grpc.MaxRecvMsgSize(int(cfg.MaxRequestBytes)), grpc.MaxSendMsgSize(math.MaxInt32))
	return f, nil
}

// Serve serves the front on ln until Close; it returns nil once closed.
func (f *Front) Serve(ln net.Listener) error {
	if err := f.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("front: serve: %w", err)
	}
	return nil
}

// Close stops at once: held requests fail UNAVAILABLE, open calls are cut, the listener and the
// upstream connection close. Call Drain first for a graceful stop. Safe to call more than once.
func (f *Front) Close() error {
	var err error
	f.closeOnce.Do(func() {
		// Under f.mu: hold and pump add to f.wg only under f.mu with done still open, so no
		// Add can race the Wait below (a watcher or copy started then would outlive Close).
		f.mu.Lock()
		close(f.done)
		f.mu.Unlock()
		f.srv.Stop()
		f.wg.Wait()
		err = f.conn.Close()
	})
	return err
}

// Drain makes the front refuse every new inference request with UNAVAILABLE (and a pushback,
// so the client's next attempt goes to another pod) and waits until no request is held or
// being forwarded and no ModelStreamInfer stream is open. A stream ends UNAVAILABLE once it is
// idle — Triton has sent one answer for each request the client sent on it, and nothing has
// passed either way for streamQuiet — so a client that keeps a stream open between requests
// reopens it on another pod instead of holding the drain to its deadline. A stream of a
// decoupled model (more answers than requests) is waited for, to the deadline if it stays open. When ctx ends first, the requests still held fail UNAVAILABLE and Drain
// returns ctx's error; forwarded ones go on until Close. Call it once the pod's endpoints are
// gone (after the propagation delay): until then clients still send here.
func (f *Front) Drain(ctx context.Context) error {
	f.mu.Lock()
	if !f.draining {
		close(f.drained)
	}
	f.noHolds, f.draining = true, true
	f.kickLocked()
	idle := f.idle
	busy := f.active > 0
	f.mu.Unlock()
	if !busy {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for name, q := range f.queues {
			f.failHeldLocked(name, q, f.unavailable("draining", "pod is draining"))
		}
		f.mu.Unlock()
		return fmt.Errorf("front: drain: %w", ctx.Err())
	}
}

// StartDrain begins a drain: from now on a request that would be held (its model is not READY,
// and a draining pod loads nothing) fails UNAVAILABLE with a pushback at once, while requests
// for READY models are still forwarded — load balancers send here until the pod's endpoints
// are removed. Requests already held for a model whose load is under way (Loading) keep
// waiting and go to Triton once it is READY; those held for a model that is not loading fail
// UNAVAILABLE with a pushback now, since nothing will load it here. Drain then refuses the rest.
func (f *Front) StartDrain() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noHolds = true
	f.kickLocked()
}

// Held returns the requests held now per model, with the arrival of the oldest (models with none
// are left out): the demand, queue and waiting time the planner counts for models that are not
// READY.
func (f *Front) Held() map[string]plan.Held {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]plan.Held, len(f.queues))
	for name, q := range f.queues {
		if len(q.held) > 0 {
			out[name] = plan.Held{Requests: len(q.held), Since: q.held[0].arrived}
		}
	}
	return out
}

// Recheck makes every model with held requests check its readiness now instead of at its next
// RecheckInterval (the sidecar calls it after each observation of Triton).
func (f *Front) Recheck() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kickLocked()
}

// kickLocked makes every held model's watcher check now. f.mu is held.
func (f *Front) kickLocked() {
	for _, q := range f.queues {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
}

func (f *Front) unavailable(reason, msg string) *refusal {
	return &refusal{code: codes.Unavailable, reason: reason, msg: msg, pushback: true}
}

// holdBudgetFull is the answer to a request that would pass MaxTotalHeldBytes: the pod has no
// memory left to hold it, so it fails RESOURCE_EXHAUSTED (HTTP 429) with the pushback.
func (f *Front) holdBudgetFull(name string, held, size int64) *refusal {
	return &refusal{code: codes.ResourceExhausted, reason: "hold_budget", pushback: true,
		msg: fmt.Sprintf("model %q is not ready and holding the request's %d bytes would pass the pod's hold budget: %d bytes held for all models, bound %d (--hold-max-total-bytes)",
			name, size, held, f.cfg.MaxTotalHeldBytes)}
}

// tooLarge is the answer to an HTTP body over MaxRequestBytes; size < 0 when unknown (chunked).
func (f *Front) tooLarge(size int64) *refusal {
	what := "the request body"
	if size >= 0 {
		what = fmt.Sprintf("the request body of %d bytes", size)
	}
	return &refusal{code: codes.ResourceExhausted, reason: "too_large",
		msg: fmt.Sprintf("%s is larger than the front's maximum %d bytes (--max-request-bytes)", what, f.cfg.MaxRequestBytes)}
}

// recvErr counts an error of reading a client's message: RESOURCE_EXHAUSTED is gRPC's refusal
// of a message over MaxRequestBytes (its only cause on a server's receive). grpc-go has already
// answered the call with its own status ("grpc: received message larger than max (N vs. M)",
// naming the size and the limit) when RecvMsg returns, so the error is returned unchanged.
func (f *Front) recvErr(err error) error {
	if status.Code(err) == codes.ResourceExhausted {
		f.m.FastFailed.WithLabelValues("", "too_large").Inc()
	}
	return err
}

// answer returns r as the call's status, with the pushback trailer when r has one.
func (f *Front) answer(ss grpc.ServerStream, r *refusal) error {
	if r.pushback {
		ss.SetTrailer(metadata.Pairs(PushbackKey, strconv.FormatInt(f.cfg.RetryPushback.Milliseconds(), 10)))
	}
	return status.Error(r.code, r.msg)
}

// Active returns the inference requests the front holds or is forwarding now. A drain of the
// pod is over only when it is 0: Triton's counters do not see requests still held here.
func (f *Front) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

// Forwarding returns a copy of the requests forwarded to Triton and not yet answered, per
// model (unary ModelInfer and HTTP inference; ModelStreamInfer streams are not counted); models
// with none are absent.
func (f *Front) Forwarding() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.forwarding)
}

// forwardStart counts a request for the model as forwarded to Triton, until forwardEnd.
func (f *Front) forwardStart(name string) {
	f.mu.Lock()
	f.forwarding[name]++
	f.mu.Unlock()
	f.m.ForwardingSeconds.add(name, 1)
}

// forwardEnd ends one forwardStart of the model, once its answer has come. When that leaves
// the model with no request forwarded while the front holds or releases requests for any
// model (a queue exists), it calls Deps.OnIdle(model).
func (f *Front) forwardEnd(name string) {
	f.m.ForwardingSeconds.add(name, -1)
	f.mu.Lock()
	n := f.forwarding[name] - 1
	if n > 0 {
		f.forwarding[name] = n
	} else {
		delete(f.forwarding, name)
	}
	idle := n <= 0 && len(f.queues) > 0
	f.mu.Unlock()
	if idle && f.deps.OnIdle != nil {
		f.deps.OnIdle(name)
	}
}

// enter counts an inference request as active unless the front drains.
func (f *Front) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	if f.active == 0 {
		f.idle = make(chan struct{})
	}
	f.active++
	return true
}

func (f *Front) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.active--
	if f.active == 0 {
		close(f.idle)
	}
}

// handle is the front's only handler (grpc.UnknownServiceHandler): every call arrives here.
func (f *Front) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "front: no method on the stream")
	}
	switch method {
	case methodInfer, methodStreamInfer:
		return f.infer(ss, method)
	case methodLoad, methodUnload:
		f.m.FastFailed.WithLabelValues("", "model_control").Inc()
		return status.Error(codes.PermissionDenied, modelControlMsg)
	}
	return f.pump(ss, method, sendFrame{})
}

// refusalFor is the answer to a request for the model under verdict v when the front answers
// it itself at once; nil when it is forwarded or held.
func (f *Front) refusalFor(v Verdict, name string) *refusal {
	switch v {
	case NotInCatalog:
		return &refusal{code: codes.NotFound, reason: "not_found", msg: fmt.Sprintf("model %q is not in this pool's catalog", name)}
	case Quarantined:
		return f.unavailable("quarantined", fmt.Sprintf("model %q is quarantined in this pod after repeated failed loads", name))
	case NeverFits:
		return f.unavailable("never_fits", fmt.Sprintf("model %q can never be loaded in this pod (its memory does not fit the pod's GPU profile)", name))
	case Ready, NotReady, Loading:
		return nil
	}
	return &refusal{code: codes.Internal, reason: "bad_request", msg: fmt.Sprintf("front: readiness %v for model %q", v, name)}
}

// infer serves ModelInfer and ModelStreamInfer: read the first request, decide from its model
// name, hold it if needed, forward it. Later messages of a stream follow it unchecked.
func (f *Front) infer(ss grpc.ServerStream, method string) error {
	var req frame
	if err := ss.RecvMsg(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // a stream closed without a request
		}
		return f.recvErr(err)
	}
	arrived := time.Now()
	defer req.free() // no-op once passed on
	name, err := frameModel(&req)
	if err != nil {
		f.m.FastFailed.WithLabelValues("", "bad_request").Inc()
		return status.Error(codes.InvalidArgument, err.Error())
	}
	v := f.deps.Readiness.Verdict(name)
	label := name
	if v == NotInCatalog {
		label = ""
	}
	if !f.enter() {
		f.m.FastFailed.WithLabelValues(label, "draining").Inc()
		return f.answer(ss, f.unavailable("draining", "pod is draining: retry on another replica"))
	}
	defer f.leave()
	if r := f.refusalFor(v, name); r != nil {
		f.m.FastFailed.WithLabelValues(label, r.reason).Inc()
		return f.answer(ss, r)
	}
	size := int64(req.data.Len())
	hold := v.holds() || f.hasQueue(name) // behind earlier held requests: keep arrival order
	for held := false; ; {
		var w *waiter
		if hold {
			var r *refusal
			if w, r = f.hold(ss.Context(), name, size, arrived); r != nil {
				return f.answer(ss, r)
			}
			if w == nil { // the client's deadline or cancellation
				return status.FromContextError(ss.Context().Err()).Err()
			}
			held = true
		}
		f.m.Forwarded.WithLabelValues(name).Inc()
		if method == methodStreamInfer {
			// Not counted in Forwarding: a client may keep one stream open for its whole life,
			// idle most of it, and counting it would make its model busy, so never a victim,
			// for as long (Triton's statistics still see the requests it carries). Its first
			// message goes with its buffers: a stream is never held again, and the front's
			// reference had kept the message for the stream's whole life.
			out := f.sendable(&req, w)
			req.free()
			return f.pump(ss, method, out)
		}
		f.forwardStart(name)
		// Keep the request for a re-hold only where one can follow (not after a hold) and
		// within MaxRetainedBytes; otherwise it goes to Triton with its buffers.
		kept := !held && f.keep(size)
		out := f.sendable(&req, w)
		if !kept {
			req.free()
		}
		// drop lets the kept copy go once Triton's answer needs no re-hold, before the answer
		// goes to a client that may read it slowly.
		dropped := !kept
		drop := func() {
			if !dropped {
				dropped = true
				req.free()
				f.unkeep(size)
			}
		}
		again, err := f.unary(ss, method, name, out, held, kept, drop)
		if !again {
			drop()
			return err
		}
		f.unkeep(size) // the hold charges the bytes now
		hold = true    // Triton does not have the model after all: hold it once, by its arrival
	}
}

// keep reserves size bytes of MaxRetainedBytes for a forwarded request kept for a re-hold;
// false when they would pass it.
func (f *Front) keep(size int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.retained+size > f.cfg.MaxRetainedBytes {
		return false
	}
	f.retained += size
	f.m.RetainedBytes.Set(float64(f.retained))
	return true
}

// unkeep returns keep's reservation.
func (f *Front) unkeep(size int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retained -= size
	f.m.RetainedBytes.Set(float64(f.retained))
}

// sendable returns a frame that shares req's buffers (one more reference), so that req can be
// sent again after a NOT_FOUND; w, when not nil, is told once the frame is on its way.
func (f *Front) sendable(req *frame, w *waiter) sendFrame {
	req.data.Ref()
	out := sendFrame{f: &frame{data: req.data}, w: w}
	if w != nil {
		out.f.onSend = w.markSent
	}
	return out
}

type sendFrame struct {
	f *frame
	w *waiter
}

// sent tells the waiter's watcher that the next held request may go (again, harmlessly, when
// the codec already did).
func (s sendFrame) sent() {
	if s.w != nil {
		s.w.markSent()
	}
}

// unary forwards one ModelInfer (grpc.ClientConn.Invoke: no goroutine per call). again reports
// a NOT_FOUND from Triton for a model that Triton's ModelReady says is not ready (the front's
// view was stale: the model was unloaded), for a request not held before (held false) that the
// caller kept (kept): the caller holds the request instead of failing it. A held request
// answered so gets Triton's NOT_FOUND (it is held once), except while the pod drains: the drain
// unloads every model and a draining pod loads nothing, so the model, which is in the catalog,
// is served elsewhere — UNAVAILABLE with the pushback, which clients retry, where NOT_FOUND
// they would not. A request not held and not kept (past MaxRetainedBytes) gets that
// UNAVAILABLE too: its bytes are gone; the planner is woken (Deps.OnHold) so that its view,
// and the front's, is right before the client's retry. It ends the caller's forwardStart as
// soon as Triton has answered, and calls drop once no re-hold will follow, both before the
// answer goes on.
func (f *Front) unary(ss grpc.ServerStream, method, name string, req sendFrame, held, kept bool, drop func()) (again bool, err error) {
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	var resp frame
	var header, trailer metadata.MD
	err = f.conn.Invoke(metadata.NewOutgoingContext(ctx, md), method, req.f, &resp,
		grpc.ForceCodecV2(rawCodec{}), grpc.Header(&header), grpc.Trailer(&trailer))
	f.forwardEnd(name) // Triton has answered: the request no longer holds the model busy
	req.sent()
	req.f.free() // no-op once sent
	if err != nil {
		if status.Code(err) == codes.NotFound && !f.modelReady(ctx, name) {
			if f.drainStarted() {
				r := f.unavailable("draining", fmt.Sprintf("model %q was unloaded and the pod is draining (it loads nothing more): retry on another replica", name))
				if held {
					f.m.HoldFailed.WithLabelValues(name, r.reason).Inc()
				} else {
					f.m.FastFailed.WithLabelValues(name, r.reason).Inc()
				}
				return false, f.answer(ss, r)
			}
			if !held && kept {
				return true, nil
			}
			if !held { // not kept: nothing to drop
				f.m.FastFailed.WithLabelValues(name, "unloaded").Inc()
				if f.deps.OnHold != nil {
					f.deps.OnHold(name)
				}
				return false, f.answer(ss, f.unavailable("unloaded", fmt.Sprintf("model %q was unloaded while this request was forwarded, and the front kept no copy to hold it: its kept requests were at --retain-max-total-bytes (%d bytes); retry", name, f.cfg.MaxRetainedBytes)))
			}
		}
		drop()
		if len(header) > 0 {
			_ = ss.SetHeader(header)
		}
		ss.SetTrailer(trailer)
		return false, err
	}
	drop()
	_ = ss.SetHeader(header)
	err = ss.SendMsg(&resp)
	resp.free() // no-op when sent
	ss.SetTrailer(trailer)
	return false, err
}

// drainStarted reports whether StartDrain or Drain was called.
func (f *Front) drainStarted() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.noHolds
}

// pump proxies one call in both directions, first (when set) being the client's first message,
// already read. It returns Triton's status.
func (f *Front) pump(ss grpc.ServerStream, method string, first sendFrame) error {
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	md, _ := metadata.FromIncomingContext(ctx)
	desc := &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}
	cs, err := f.conn.NewStream(metadata.NewOutgoingContext(ctx, md), desc, method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		if first.f != nil {
			first.f.free()
		}
		first.sent()
		return err
	}
	// The copy ends when the client half-closes, or when this handler returns (gRPC then ends
	// the server stream, and its RecvMsg returns). A client message over MaxRequestBytes ends
	// the call: the copy reports it and cancels the upstream call, and the call fails with it.
	refused := make(chan error, 1)
	if !f.track() {
		if first.f != nil {
			first.f.free()
		}
		first.sent()
		return status.Error(codes.Unavailable, "front is shutting down")
	}
	var st streamActivity
	st.touch()
	go func() {
		defer f.wg.Done()
		if err := f.clientToUpstream(ss, cs, first, &st); status.Code(err) == codes.ResourceExhausted {
			refused <- err
			cancel()
		}
	}()
	idleEnded := make(chan struct{})
	if f.track() {
		go func() {
			defer f.wg.Done()
			if f.endWhenIdle(ctx, &st) {
				close(idleEnded)
				cancel()
			}
		}()
	}
	headerSent := false
	for {
		var resp frame
		if err := cs.RecvMsg(&resp); err != nil {
			select {
			case rerr := <-refused:
				return rerr
			case <-idleEnded:
				return status.Error(codes.Unavailable, "pod is draining: this stream was idle and is closed; open it again on another replica")
			default:
			}
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				if !headerSent {
					if h, herr := cs.Header(); herr == nil {
						_ = ss.SetHeader(h)
					}
				}
				return nil
			}
			return err
		}
		if !headerSent {
			if h, herr := cs.Header(); herr == nil {
				_ = ss.SendHeader(h)
			}
			headerSent = true
		}
		st.answer()
		if err := ss.SendMsg(&resp); err != nil {
			resp.free()
			return err
		}
	}
}

// streamQuiet is how long a ModelStreamInfer stream must have passed nothing either way, with
// as many answers as requests, before a drain ends it as idle. A decoupled model may answer
// one request many times, and only its last answer ends it (Triton marks it only when the
// client asks, triton_enable_empty_final_response), so the front cannot see its requests end:
// a stream that has had more answers than requests is never ended as idle.
const streamQuiet = 2 * time.Second

// streamActivity counts a stream's traffic for the drain's idle test.
type streamActivity struct {
	sent, answered atomic.Int64 // client messages passed to Triton, Triton messages passed back
	last           atomic.Int64 // unix nanoseconds of the last message either way
	// decoupled is set once Triton has sent more messages than the client: a decoupled model
	// answers one request many times, so the counts no longer say which requests were
	// answered (a request queued behind a token stream would read as answered by its tokens).
	decoupled atomic.Bool
}

func (s *streamActivity) touch() { s.last.Store(time.Now().UnixNano()) }

// answer counts one message from Triton.
func (s *streamActivity) answer() {
	if s.answered.Add(1) > s.sent.Load() {
		s.decoupled.Store(true)
	}
	s.touch()
}

// idle reports whether every request sent has had its one answer and nothing passed for
// streamQuiet. A decoupled stream is never idle: a drain waits for it as for a request in
// flight, to its deadline if the client keeps it open.
func (s *streamActivity) idle(now time.Time) bool {
	return !s.decoupled.Load() && s.answered.Load() == s.sent.Load() && now.Sub(time.Unix(0, s.last.Load())) >= streamQuiet
}

// endWhenIdle waits for a drain, then until the stream is idle (streamActivity.idle, checked
// every streamQuiet/10), and reports true; false when ctx ends first.
func (f *Front) endWhenIdle(ctx context.Context, st *streamActivity) bool {
	select {
	case <-ctx.Done():
		return false
	case <-f.drained:
	}
	t := time.NewTicker(streamQuiet / 10)
	defer t.Stop()
	for {
		if st.idle(time.Now()) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// track adds one goroutine to f.wg unless the front is closed (then it reports false).
func (f *Front) track() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
		return false
	default:
	}
	f.wg.Add(1)
	return true
}

// clientToUpstream copies the client's messages to Triton until the client half-closes,
// counting them in st.
func (f *Front) clientToUpstream(ss grpc.ServerStream, cs grpc.ClientStream, first sendFrame, st *streamActivity) error {
	if first.f != nil {
		st.sent.Add(1)
		st.touch()
		err := cs.SendMsg(first.f)
		first.sent()
		first.f.free() // no-op once sent; a frame SendMsg refused before marshalling is freed here
		if err != nil {
			return err
		}
	}
	for {
		var m frame
		if err := ss.RecvMsg(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return cs.CloseSend()
			}
			return f.recvErr(err)
		}
		st.sent.Add(1)
		st.touch()
		if err := cs.SendMsg(&m); err != nil {
			m.free()
			return err
		}
	}
}

// modelReady asks Triton whether the model is ready now; an error reads as not ready.
func (f *Front) modelReady(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, max(f.cfg.RecheckInterval, time.Second))
	defer cancel()
	r, err := f.client.ModelReady(ctx, &inference.ModelReadyRequest{Name: name})
	return err == nil && r.GetReady()
}
