package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
)

// SignalHandle reads one subscribed signal's latest snapshot. Result must
// never wait on Prometheus.
type SignalHandle interface {
	Result() prom.Result
	// Close releases the subscription.
	Close()
}

// FirstEvaluator is implemented by SignalHandles that can tell when their
// query's first evaluation has been stored (the poller's handles do): the
// server then waits for it, bounded by ServerConfig.FirstEvaluationWait, on
// a new trigger's first GetMetrics or IsActive.
type FirstEvaluator interface {
	// Evaluated returns a channel closed once the first evaluation is stored.
	Evaluated() <-chan struct{}
}

// DefaultFirstEvaluationWait is the scaler's ServerConfig.FirstEvaluationWait:
// below KEDA's 3 s GetMetrics deadline and below the 500 ms the slow-Prometheus
// load test gives every call.
const DefaultFirstEvaluationWait = 300 * time.Millisecond

// Signals is the server's view of the background poller (package prom):
// Subscribe registers a signal once per trigger; its errors (bad PromQL,
// bad address) are the user's and wrap prom.ErrBadRequest.
type Signals interface {
	Subscribe(prom.Request) (SignalHandle, error)
}

// Target is what Kubernetes knows of a ScaledObject: its bounds and its
// scale target's replicas.
type Target struct {
	MinReplicas, MaxReplicas int32
	// ReadyReplicas is the scale target's ready replicas; CurrentReplicas its
	// spec.replicas. Each is meaningful only when its Known flag is set.
	ReadyReplicas   int32
	ReadyKnown      bool
	CurrentReplicas int32
	CurrentKnown    bool
	// ColdStart is the scale target's measured cold start (pod creation to Ready), meaningful
	// only when ColdStartKnown; the policy's coldStart overrides it.
	ColdStart      time.Duration
	ColdStartKnown bool
	// Workload is the scale target as OpenCost names its controller (for the replica-hour
	// price, --opencost-address); zero when the target is not an apps/v1 Deployment or
	// StatefulSet.
	Workload Workload
}

// Workload names a scale target by OpenCost's lower-case controller kind: Kind is
// "deployment" (apps/v1 Deployment) or "statefulset" (apps/v1 StatefulSet), "" when unknown.
type Workload struct {
	Kind, Name string
}

// Targets looks up ScaledObjects in Kubernetes (scaler/kube's informers).
// Lookup must not block; ok is false when the ScaledObject is unknown, and
// the metadata bounds and readyQuery apply instead.
type Targets interface {
	Lookup(namespace, name string) (Target, bool)
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Defaults are the process-wide metadata defaults (--prometheus-address).
	Defaults Defaults
	// RefreshInterval is how often every trigger is re-evaluated, > 0.
	RefreshInterval time.Duration
	// ForgetAfter drops a trigger no RPC has asked about for this long
	// (deleted ScaledObjects), ≥ RefreshInterval.
	ForgetAfter time.Duration
	// WatchNamespace, when set, is the only namespace served (Config's
	// WatchNamespace): an RPC for a ScaledObject elsewhere is answered
	// InvalidArgument, never registered.
	WatchNamespace string
	// FirstEvaluationWait bounds how long the first GetMetrics or IsActive of
	// a trigger whose queries have never been evaluated waits for the
	// poller's first evaluation of them (started when the trigger's first
	// RPC, usually GetMetricSpec, subscribed them), so that KEDA's first call
	// after a new ScaledObject or a scaler restart gets a value rather than
	// Unavailable. The wait ends at the first evaluation, this bound or the
	// RPC's deadline, whichever comes first, and happens once per trigger:
	// a query that has been evaluated (even failing) is never waited for, so
	// a slow Prometheus delays only a new trigger's first calls, by at most
	// this bound. 0: no wait. Range [0, 1s]; the scaler uses
	// DefaultFirstEvaluationWait.
	FirstEvaluationWait time.Duration
	// MaxTriggers bounds the triggers registered at once (Config's
	// MaxTriggers, --max-triggers): a new trigger past it is answered
	// ResourceExhausted once its metadata has parsed (bad metadata is
	// InvalidArgument, full or not) and keeps no memory and subscribes no
	// query, so a caller inventing
	// ScaledObjects or metadata cannot grow memory and the queries sent to
	// Prometheus without end. 0: no bound.
	MaxTriggers int
}

// Server implements KEDA's externalscaler.ExternalScalerServer. RPCs read
// the last evaluation of their trigger and never wait on Prometheus (but for
// a new trigger's first answer, bounded by FirstEvaluationWait); Run
// re-evaluates every trigger once per RefreshInterval with Recommend.
type Server struct {
	pb.UnimplementedExternalScalerServer

	cfg     ServerConfig
	signals Signals
	targets Targets // nil: no Kubernetes access
	log     *slog.Logger
	now     func() time.Time
	health  *health.Server

	// registering holds one token per registration in progress (ensure);
	// its capacity, GOMAXPROCS, bounds the CPU that parsing new triggers'
	// PromQL can take.
	registering chan struct{}

	streams atomic.Int64 // open StreamIsActive calls, all triggers

	mu            sync.RWMutex
	metadataBytes int                 // Σ trigger.metadataBytes of triggers
	triggers      map[string]*trigger // by metric name
	quit          chan struct{}       // closed by Stop: ends streams
	stopOnce      sync.Once

	// prices are OpenCost's replica-hour prices (--opencost-address); nil: off. Set before
	// the server serves.
	prices *openCostPrices
}

// trigger is one ScaledObject trigger: its policy, subscriptions and
// decision state.
type trigger struct {
	namespace, name, metric string
	metadataBytes           int // keys and values, counted in Server.metadataBytes
	policy                  decision.Policy
	handles                 [decision.NumSignals]SignalHandle
	lastUsed                atomic.Int64 // unix nanoseconds of the last RPC
	streams                 atomic.Int32 // open StreamIsActive calls: never forgotten while > 0
	waited                  atomic.Bool  // an RPC waited for the first evaluation (FirstEvaluationWait)
	verified                SignalHandle // verifiedQuery (cost per verified result); nil without
	retry                   retryEpisode // retry amplification episodes (cost.go)
	costNotFinite           atomic.Bool  // the cost per 1,000 verified results overflowed (logged once; cost.go)

	mu      sync.Mutex
	state   decision.State
	rec     decision.Recommendation
	have    bool          // rec holds an evaluation
	changed chan struct{} // made by a waiting StreamIsActive; closed and cleared when rec.Active changes
	target  Workload      // the scale target at the last evaluation (Kubernetes); zero: unknown
}

// NewServer returns a Server reading signals from signals and bounds from
// targets (nil when the scaler runs without Kubernetes). log may be nil.
// health, when non-nil, is set SERVING or NOT_SERVING after every refresh
// by data freshness.
func NewServer(cfg ServerConfig, signals Signals, targets Targets, log *slog.Logger, hs *health.Server) (*Server, error) {
	var errs []error
	if cfg.RefreshInterval <= 0 {
		errs = append(errs, fmt.Errorf("RefreshInterval %v: must be > 0", cfg.RefreshInterval))
	}
	if cfg.ForgetAfter < cfg.RefreshInterval {
		errs = append(errs, fmt.Errorf("ForgetAfter %v: must be ≥ RefreshInterval (%v)", cfg.ForgetAfter, cfg.RefreshInterval))
	}
	if cfg.FirstEvaluationWait < 0 || cfg.FirstEvaluationWait > time.Second {
		errs = append(errs, fmt.Errorf("FirstEvaluationWait %v: must be in [0s, 1s]", cfg.FirstEvaluationWait))
	}
	if cfg.MaxTriggers < 0 {
		errs = append(errs, fmt.Errorf("MaxTriggers %d: must be ≥ 0 (0: no bound)", cfg.MaxTriggers))
	}
	if signals == nil {
		errs = append(errs, errors.New("signals: must not be nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if hs != nil {
		// Nothing registered yet: nothing can be stale.
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus(pb.ExternalScaler_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	return &Server{
		cfg:      cfg,
		signals:  signals,
		targets:  targets,
		log:      log,
		now:      time.Now,
		health:   hs,
		triggers: map[string]*trigger{},
		quit:     make(chan struct{}),

		registering: make(chan struct{}, runtime.GOMAXPROCS(0)),
	}, nil
}

// kinds maps Signal to the poller's Kind.
var kinds = [decision.NumSignals]prom.Kind{prom.KindQueue, prom.KindRate, prom.KindActivity, prom.KindReady,
	prom.KindRunning, prom.KindServiceTime, prom.KindDispersion, prom.KindUniqueRate}

// metadataKeyOf names the metadata key of a signal's query for errors.
var metadataKeyOf = [decision.NumSignals]string{KeyQueueQuery, KeyRateQuery, KeyActivityQuery, KeyReadyQuery,
	KeyRunningQuery, KeyServiceTimeQuery, KeyDispersionQuery, KeyUniqueRateQuery}

// ensure returns the trigger for ref, registering it (parse, subscribe,
// first evaluation) the first time on one of a bounded number of workers:
// the RPC waits for a worker and for the registration only while ctx lasts,
// so neither a slow parse nor a queue of them outlives the caller's deadline
// or a server stop (gRPC's Stop cancels every RPC's context). A registration
// the caller stopped waiting for still completes (its cost is bounded by
// prom.CheckBudget) and serves the next call. Errors are gRPC statuses.
func (s *Server) ensure(ctx context.Context, ref *pb.ScaledObjectRef) (*trigger, error) {
	if ref == nil || ref.GetName() == "" || ref.GetNamespace() == "" {
		return nil, status.Error(codes.InvalidArgument, "scaledObjectRef: name and namespace are required")
	}
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	if ns := s.cfg.WatchNamespace; ns != "" && ref.GetNamespace() != ns {
		return nil, status.Errorf(codes.InvalidArgument,
			"ScaledObject %s/%s: namespace %q is not served: this scaler watches only namespace %q (--watch-namespace)",
			ref.GetNamespace(), ref.GetName(), ref.GetNamespace(), ns)
	}
	name := MetricName(ref.GetNamespace(), ref.GetName(), ref.GetScalerMetadata())
	now := s.now()
	s.mu.RLock()
	tr, ok := s.triggers[name]
	s.mu.RUnlock()
	if ok {
		tr.lastUsed.Store(now.UnixNano())
		return tr, nil
	}

	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	select {
	case s.registering <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	type registered struct {
		tr  *trigger
		err error
	}
	done := make(chan registered, 1)
	go func() {
		defer func() { <-s.registering }()
		tr, err := s.register(ref, name, now)
		done <- registered{tr, err}
	}()
	select {
	case r := <-done:
		return r.tr, r.err
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// MaxMetadataBytes bounds a trigger's metadata, keys and values together:
// nine queries (queue, rate, activity, ready, running, serviceTime,
// dispersion, uniqueRate, verified) at prom.MaxQueryBytes are 144 KiB, and
// 16 KiB more is far more than every other key needs. A registered trigger
// keeps its metadata, so without it MaxTriggers triggers of gRPC's 4 MiB
// messages could hold 40 GB.
const MaxMetadataBytes = 160 << 10

// MaxTotalMetadataBytes bounds the metadata of all registered triggers together (with
// MaxTriggers set): MaxTriggers triggers of MaxMetadataBytes each would still hold 1.6 GB. A
// preset trigger's metadata is about 200 bytes and a custom one's with three queries about
// 500, so 16 MiB is eight times what 10,000 preset triggers need.
const MaxTotalMetadataBytes = 16 << 20

// metadataBytes is ref's metadata size, keys and values.
func metadataBytes(ref *pb.ScaledObjectRef) int {
	n := 0
	for k, v := range ref.GetScalerMetadata() {
		n += len(k) + len(v)
	}
	return n
}

// checkRef refuses, InvalidArgument, a reference no ScaledObject can have:
// a namespace longer than a DNS-1123 label (63 bytes), a name longer than a
// DNS-1123 subdomain (253 bytes), or metadata past MaxMetadataBytes. Each is
// kept per trigger, and only a caller other than KEDA sends them. (The
// characters are not checked: the namespace reaches PromQL only as a
// matcher value, and the metric name is sanitized.)
func checkRef(ref *pb.ScaledObjectRef) error {
	if n := len(ref.GetNamespace()); n > validation.DNS1123LabelMaxLength {
		return status.Errorf(codes.InvalidArgument, "scaledObjectRef.namespace %s: must be a Kubernetes namespace name, at most %d bytes", echo(ref.GetNamespace()), validation.DNS1123LabelMaxLength)
	}
	if n := len(ref.GetName()); n > validation.DNS1123SubdomainMaxLength {
		return status.Errorf(codes.InvalidArgument, "scaledObjectRef.name %s: must be a Kubernetes object name, at most %d bytes", echo(ref.GetName()), validation.DNS1123SubdomainMaxLength)
	}
	if n := metadataBytes(ref); n > MaxMetadataBytes {
		largest, md := "", ref.GetScalerMetadata()
		for k, v := range md {
			if l := len(k) + len(v); l > len(largest)+len(md[largest]) || l == len(largest)+len(md[largest]) && k < largest {
				largest = k
			}
		}
		return status.Errorf(codes.InvalidArgument, "ScaledObject %s/%s: scalerMetadata is %d bytes (keys and values), the largest %s (%d bytes); the limit is %d bytes (160 KiB: nine queries of at most %d bytes, and the other keys)",
			ref.GetNamespace(), ref.GetName(), n, echo(largest), len(largest)+len(md[largest]), MaxMetadataBytes, prom.MaxQueryBytes)
	}
	return nil
}

// register parses ref's metadata, subscribes its signals and evaluates it
// once; see ensure.
//
// The metadata is parsed before MaxTriggers is checked, so that a bad trigger
// is answered InvalidArgument naming its keys even when the scaler is full
// (a typo reported as ResourceExhausted was never seen to be a typo). That
// costs a full scaler nothing it does not already spend: parsing is bounded
// by MaxMetadataBytes and prom.CheckBudget and runs on the registering
// workers, and a bad trigger, never registered, is parsed on every call
// whether or not the scaler is full. Nothing is subscribed past the limit.
func (s *Server) register(ref *pb.ScaledObjectRef, name string, now time.Time) (*trigger, error) {
	defaults := s.cfg.Defaults
	defaults.RefreshInterval = s.cfg.RefreshInterval // the staleAfter floor
	p, err := ParseMetadata(ref.GetScalerMetadata(), defaults)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ScaledObject %s/%s: %v", ref.GetNamespace(), ref.GetName(), err)
	}
	if err := s.full(ref); err != nil { // before any subscribing
		return nil, err
	}
	tr := &trigger{namespace: ref.GetNamespace(), name: ref.GetName(), metric: name, policy: p, metadataBytes: metadataBytes(ref)}
	for _, sig := range decision.AllSignals() {
		// R comes from Kubernetes when the ScaledObject is found there;
		// readyQuery (or the preset's pod count) stands in otherwise.
		if !p.Configured(sig) {
			continue
		}
		h, err := s.signals.Subscribe(prom.Request{
			Address:   p.PrometheusAddress,
			Namespace: tr.namespace,
			Kind:      kinds[sig],
			Engine:    p.Engine,
			Model:     p.Model,
			Query:     p.Query(sig),
		})
		if err != nil {
			tr.close()
			code := codes.Internal
			if errors.Is(err, prom.ErrBadRequest) {
				code = codes.InvalidArgument
			}
			return nil, status.Errorf(code, "ScaledObject %s/%s: %s: %v", tr.namespace, tr.name, metadataKeyOf[sig], err)
		}
		tr.handles[sig] = h
	}
	if err := s.subscribeVerified(tr); err != nil {
		tr.close()
		code := codes.Internal
		if errors.Is(err, prom.ErrBadRequest) {
			code = codes.InvalidArgument
		}
		return nil, status.Errorf(code, "ScaledObject %s/%s: %s: %v", tr.namespace, tr.name, KeyVerifiedQuery, err)
	}
	tr.lastUsed.Store(now.UnixNano())

	s.mu.Lock()
	if old, ok := s.triggers[name]; ok { // registered concurrently
		s.mu.Unlock()
		tr.close()
		old.lastUsed.Store(now.UnixNano())
		return old, nil
	}
	if m := s.cfg.MaxTriggers; m > 0 && len(s.triggers) >= m { // filled by concurrent registrations
		s.mu.Unlock()
		tr.close()
		return nil, s.fullError(ref, m)
	}
	if s.cfg.MaxTriggers > 0 && s.metadataBytes+tr.metadataBytes > MaxTotalMetadataBytes {
		held := s.metadataBytes
		s.mu.Unlock()
		tr.close()
		return nil, status.Errorf(codes.ResourceExhausted, "ScaledObject %s/%s: not registered: the registered triggers' metadata holds %d bytes and this one's %d would pass %d (16 MiB, MaxTotalMetadataBytes)",
			ref.GetNamespace(), ref.GetName(), held, tr.metadataBytes, MaxTotalMetadataBytes)
	}
	s.metadataBytes += tr.metadataBytes
	s.triggers[name] = tr
	s.mu.Unlock()
	s.log.Info("trigger registered", "namespace", tr.namespace, "scaledObject", tr.name, "metric", name,
		"engine", p.Engine, "model", p.Model)
	s.evaluate(tr, now)
	return tr, nil
}

// full returns ResourceExhausted when MaxTriggers triggers are registered.
func (s *Server) full(ref *pb.ScaledObjectRef) error {
	m := s.cfg.MaxTriggers
	if m <= 0 {
		return nil
	}
	s.mu.RLock()
	n := len(s.triggers)
	s.mu.RUnlock()
	if n < m {
		return nil
	}
	return s.fullError(ref, m)
}

func (s *Server) fullError(ref *pb.ScaledObjectRef, m int) error {
	return status.Errorf(codes.ResourceExhausted,
		"ScaledObject %s/%s: not registered: the scaler already serves %d triggers, its limit (--max-triggers); "+
			"a trigger KEDA has not called about for --forget-after (%v) is dropped and frees a place",
		ref.GetNamespace(), ref.GetName(), m, s.cfg.ForgetAfter)
}

func (t *trigger) close() {
	for _, h := range t.handles {
		if h != nil {
			h.Close()
		}
	}
	if t.verified != nil {
		t.verified.Close()
	}
}

// observe reads the trigger's snapshot and Kubernetes view into an Observation, and the
// scale target's workload (zero without Kubernetes).
func (s *Server) observe(tr *trigger) (decision.Observation, Workload) {
	var o decision.Observation
	var w Workload
	for sig, h := range tr.handles {
		if h == nil {
			continue
		}
		r := h.Result()
		o.Samples[sig] = decision.Sample{Value: r.Value, Empty: r.Empty, Err: r.Err, EvaluatedAt: r.EvaluatedAt, Waiting: r.Waiting}
	}
	if s.targets != nil {
		if t, ok := s.targets.Lookup(tr.namespace, tr.name); ok {
			o.MinReplicas, o.MaxReplicas, o.BoundsKnown = t.MinReplicas, t.MaxReplicas, true
			o.ReadyReplicas, o.ReadyKnown = t.ReadyReplicas, t.ReadyKnown
			o.CurrentReplicas, o.CurrentKnown = t.CurrentReplicas, t.CurrentKnown
			o.ColdStart, o.ColdStartKnown = t.ColdStart, t.ColdStartKnown
			w = t.Workload
		}
	}
	return o, w
}

// evaluate runs Recommend for tr at now and stores the answer. Time moves
// forward per trigger: a now earlier than the stored answer's (a Refresh
// whose tick time was taken before an RPC re-evaluated a trigger without
// data at its own, later time) stores nothing and returns the stored answer,
// so the history never holds points out of time order.
func (s *Server) evaluate(tr *trigger, now time.Time) decision.Recommendation {
	obs, w := s.observe(tr)
	tr.mu.Lock()
	tr.target = w
	prev := tr.rec
	hadPrev := tr.have
	if hadPrev && now.Before(prev.At) {
		tr.mu.Unlock()
		s.log.Debug("evaluation skipped: a later one is stored", "namespace", tr.namespace, "scaledObject", tr.name,
			"metric", tr.metric, "at", now, "stored", prev.At)
		return prev
	}
	rec, st := decision.Recommend(tr.policy, obs, tr.state, now)
	tr.state, tr.rec, tr.have = st, rec, true
	tr.rec.Reason = "" // logged below; not kept per trigger (10,000 ScaledObjects)
	if (!hadPrev || prev.Active != rec.Active) && tr.changed != nil {
		close(tr.changed)
		tr.changed = nil // the next waiter makes one: no channel per idle trigger
	}
	tr.mu.Unlock()

	attrs := []any{"namespace", tr.namespace, "scaledObject", tr.name, "metric", tr.metric,
		"replicas", rec.Replicas, "raw", rec.Raw, "active", rec.Active, "degraded", rec.Degraded,
		"term", string(rec.Term), "limit", string(rec.Limit), "reason", rec.Reason}
	switch {
	case rec.Err != nil && (!hadPrev || prev.Err == nil):
		s.log.Warn("no usable data: RPCs answer Unavailable", append(attrs, "err", rec.Err)...)
	case rec.Err == nil && (!hadPrev || prev.Err != nil || prev.Replicas != rec.Replicas || prev.Active != rec.Active || prev.Degraded != rec.Degraded):
		s.log.Info("decision", attrs...)
	default:
		s.log.Debug("decision", attrs...)
	}
	s.recordEvents(tr, prev, hadPrev, rec)
	s.retryEpisodeStep(tr, rec, now)
	return rec
}

// snapshot returns the trigger's last answer.
func (tr *trigger) snapshot() (decision.Recommendation, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.rec, tr.have
}

// answer returns the last evaluation or a gRPC status for no data. A
// trigger that has never had data is re-evaluated from the snapshot on the
// call (the poller evaluates new queries at once), after waiting, once per
// trigger and at most FirstEvaluationWait (never beyond ctx), for its
// queries' first evaluation; so KEDA's first calls after registration do not
// wait a whole refresh, and IsActive and GetMetrics of a new trigger answer
// alike (both from the same first evaluation). Once it has answered, only
// the background refresh moves its state.
func (s *Server) answer(ctx context.Context, tr *trigger) (decision.Recommendation, error) {
	tr.mu.Lock()
	rec, ok, answered := tr.rec, tr.have, tr.state.HasLast
	tr.mu.Unlock()
	if !ok || (rec.Err != nil && !answered) {
		s.awaitFirst(ctx, tr)
		rec = s.evaluate(tr, s.now())
	}
	if rec.Err != nil {
		return rec, status.Errorf(codes.Unavailable, "ScaledObject %s/%s: %v", tr.namespace, tr.name, rec.Err)
	}
	return rec, nil
}

// awaitFirst waits until every subscribed query of tr has been evaluated
// once, FirstEvaluationWait has passed or ctx is done, whichever is first.
// Only the first calls of a trigger wait: a trigger whose wait ended (by
// evaluation or bound) never waits again.
func (s *Server) awaitFirst(ctx context.Context, tr *trigger) {
	if s.cfg.FirstEvaluationWait <= 0 || tr.waited.Load() {
		return
	}
	var pending []<-chan struct{}
	for _, h := range tr.handles {
		if fe, ok := h.(FirstEvaluator); ok {
			if ch := fe.Evaluated(); !isClosed(ch) {
				pending = append(pending, ch)
			}
		}
	}
	if len(pending) > 0 {
		t := time.NewTimer(s.cfg.FirstEvaluationWait)
		defer t.Stop()
	wait:
		for _, ch := range pending {
			select {
			case <-ch:
			case <-t.C:
				break wait
			case <-ctx.Done():
				return // the caller is gone: a later call may still wait
			}
		}
	}
	tr.waited.Store(true)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// IsActive answers KEDA's 0 ↔ 1 question from the last evaluation.
func (s *Server) IsActive(ctx context.Context, ref *pb.ScaledObjectRef) (*pb.IsActiveResponse, error) {
	tr, err := s.ensure(ctx, ref)
	if err != nil {
		return nil, err
	}
	rec, err := s.answer(ctx, tr)
	if err != nil {
		return nil, err
	}
	return &pb.IsActiveResponse{Result: rec.Active}, nil
}

// StreamIsActive sends the activation state when first known and then on
// every change, until the client goes away or the server stops.
func (s *Server) StreamIsActive(ref *pb.ScaledObjectRef, stream grpc.ServerStreamingServer[pb.IsActiveResponse]) error {
	tr, err := s.ensure(stream.Context(), ref)
	if err != nil {
		return err
	}
	// KEDA keeps one stream per external-push trigger, so at most MaxTriggers are open; each
	// holds a goroutine and its buffers (≈ 27 KiB measured), and a caller could open them
	// without end on one trigger.
	if n := s.streams.Add(1); s.cfg.MaxTriggers > 0 && n > int64(s.cfg.MaxTriggers) {
		s.streams.Add(-1)
		return status.Errorf(codes.ResourceExhausted, "ScaledObject %s/%s: StreamIsActive: %d streams are open, the limit (--max-triggers: KEDA keeps one per external-push trigger)",
			tr.namespace, tr.name, s.cfg.MaxTriggers)
	}
	defer s.streams.Add(-1)
	tr.streams.Add(1)
	defer tr.streams.Add(-1)
	sent, last := false, false
	for {
		tr.mu.Lock()
		if tr.changed == nil {
			tr.changed = make(chan struct{})
		}
		rec, have, changed := tr.rec, tr.have, tr.changed
		tr.mu.Unlock()
		tr.lastUsed.Store(s.now().UnixNano())
		if have && rec.Err == nil && (!sent || rec.Active != last) {
			if err := stream.Send(&pb.IsActiveResponse{Result: rec.Active}); err != nil {
				return err
			}
			sent, last = true, rec.Active
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.quit:
			return nil
		case <-changed:
		}
	}
}

// GetMetricSpec advertises one metric per trigger, target 1, independent of live data.
func (s *Server) GetMetricSpec(ctx context.Context, ref *pb.ScaledObjectRef) (*pb.GetMetricSpecResponse, error) {
	tr, err := s.ensure(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &pb.GetMetricSpecResponse{MetricSpecs: []*pb.MetricSpec{{
		MetricName:      tr.metric,
		TargetSize:      1,
		TargetSizeFloat: 1,
	}}}, nil
}

// GetMetrics returns the desired replica count as the metric value (the HPA,
// with target 1 and AverageValue, lands on it): metricValueFloat and
// metricValue carry the same integer. An unknown metric name is NotFound.
func (s *Server) GetMetrics(ctx context.Context, req *pb.GetMetricsRequest) (*pb.GetMetricsResponse, error) {
	tr, err := s.ensure(ctx, req.GetScaledObjectRef())
	if err != nil {
		return nil, err
	}
	if req.GetMetricName() != tr.metric {
		return nil, status.Errorf(codes.NotFound, "metric %s is not served for ScaledObject %s/%s with this metadata (it advertises %q)",
			echo(req.GetMetricName()), tr.namespace, tr.name, tr.metric)
	}
	rec, err := s.answer(ctx, tr)
	if err != nil {
		return nil, err
	}
	return &pb.GetMetricsResponse{MetricValues: []*pb.MetricValue{{
		MetricName:       tr.metric,
		MetricValue:      int64(rec.Replicas),
		MetricValueFloat: float64(rec.Replicas),
	}}}, nil
}

// Run re-evaluates every trigger once per RefreshInterval, forgets triggers
// unused for ForgetAfter and updates health, until ctx is done; then it ends
// open streams. It returns nil.
func (s *Server) Run(ctx context.Context) error {
	defer s.Stop()
	t := time.NewTicker(s.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.Refresh(s.now())
		}
	}
}

// Stop ends every open stream (GracefulStop waits for handlers).
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.quit) }) }

// Refresh evaluates every trigger at now (Run calls it; tests step it).
func (s *Server) Refresh(now time.Time) {
	s.mu.Lock()
	all := make([]*trigger, 0, len(s.triggers))
	cutoff := now.Add(-s.cfg.ForgetAfter).UnixNano()
	for name, tr := range s.triggers {
		if tr.lastUsed.Load() < cutoff && tr.streams.Load() == 0 {
			delete(s.triggers, name)
			s.metadataBytes -= tr.metadataBytes
			tr.close()
			s.log.Info("trigger forgotten (no RPC for ForgetAfter)", "namespace", tr.namespace, "scaledObject", tr.name,
				"metric", name, "forgetAfter", s.cfg.ForgetAfter)
			continue
		}
		all = append(all, tr)
	}
	s.mu.Unlock()
	// A fixed order keeps logs reproducible.
	sort.Slice(all, func(i, j int) bool { return all[i].metric < all[j].metric })
	fresh := 0
	for _, tr := range all {
		if s.evaluate(tr, now).Err == nil {
			fresh++
		}
	}
	if s.prices != nil {
		s.prices.want(s.pricedNamespaces(all))
	}
	if s.health != nil {
		st := healthpb.HealthCheckResponse_SERVING
		if len(all) > 0 && fresh == 0 {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		s.health.SetServingStatus("", st)
		s.health.SetServingStatus(pb.ExternalScaler_ServiceDesc.ServiceName, st)
	}
}

// Triggers returns the number of registered triggers.
func (s *Server) Triggers() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.triggers)
}

// eachTrigger calls f for every trigger's last answer (for metrics).
func (s *Server) eachTrigger(f func(tr *trigger, rec decision.Recommendation)) {
	s.mu.RLock()
	all := make([]*trigger, 0, len(s.triggers))
	for _, tr := range s.triggers {
		all = append(all, tr)
	}
	s.mu.RUnlock()
	for _, tr := range all {
		if rec, ok := tr.snapshot(); ok {
			f(tr, rec)
		}
	}
}

// PollerSignals adapts a *prom.Poller to Signals. Handles share the
// poller's keys (ScaledObjects of one namespace, engine and model read one
// grouped series), so Close does not unsubscribe: the poller forgets keys
// nobody reads after its ForgetAfter. A key the poller forgot while still in
// use is subscribed again on the next read.
//
// Equal requests get the same handle (10,000 preset ScaledObjects over 100
// namespaces and 20 models hold 400 handles, not 40,000, ≈ 7 MiB less heap);
// the table holds handles weakly, so a handle no trigger references is
// collected and its entry removed.
func PollerSignals(p *prom.Poller) Signals {
	return &pollerSignals{p: p, handles: map[prom.Request]weak.Pointer[pollerHandle]{}}
}

type pollerSignals struct {
	p       *prom.Poller
	mu      sync.Mutex
	handles map[prom.Request]weak.Pointer[pollerHandle]
}

func (ps *pollerSignals) shared(r prom.Request) *pollerHandle {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.handles[r].Value()
}

func (ps *pollerSignals) Subscribe(r prom.Request) (SignalHandle, error) {
	if h := ps.shared(r); h != nil {
		return h, nil
	}
	k, err := ps.p.Subscribe(r)
	if err != nil {
		return nil, err
	}
	h := &pollerHandle{p: ps.p, req: r}
	h.key.Store(&k)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if old := ps.handles[r].Value(); old != nil { // subscribed concurrently
		return old, nil
	}
	wp := weak.Make(h)
	ps.handles[r] = wp
	runtime.AddCleanup(h, ps.forget, handleEntry{r, wp})
	return h, nil
}

// len returns the number of entries in the handle table (tests).
func (ps *pollerSignals) len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.handles)
}

type handleEntry struct {
	req prom.Request
	h   weak.Pointer[pollerHandle]
}

// forget removes a collected handle's entry unless a newer handle replaced it.
func (ps *pollerSignals) forget(e handleEntry) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.handles[e.req] == e.h {
		delete(ps.handles, e.req)
	}
}

type pollerHandle struct {
	p   *prom.Poller
	req prom.Request
	key atomic.Pointer[prom.Key]
}

func (h *pollerHandle) Result() prom.Result {
	r := h.p.Result(*h.key.Load())
	if errors.Is(r.Err, prom.ErrNotSubscribed) {
		if k, err := h.p.Subscribe(h.req); err == nil {
			h.key.Store(&k)
			r = h.p.Result(k)
		}
	}
	return r
}

func (h *pollerHandle) Close() {}

// Evaluated implements FirstEvaluator with the poller's first evaluation.
func (h *pollerHandle) Evaluated() <-chan struct{} { return h.p.Evaluated(*h.key.Load()) }
