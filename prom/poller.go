package prom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/inferscale/inferscale/internal/errtext"
)

// ErrNotSubscribed is the Err of a [Result] for a key the poller does not know: it was never
// subscribed, or it was forgotten after [PollerConfig.ForgetAfter] without reads.
var ErrNotSubscribed = errors.New("prom: key not subscribed (subscribe again)")

// Request asks the poller for one signal of one ScaledObject.
type Request struct {
	// Address is the Prometheus base URL; empty means PollerConfig.DefaultAddress.
	Address string
	// Namespace is the ScaledObject's namespace. Required: presets are split by it and
	// custom queries are confined to it.
	Namespace string
	// Kind is the signal.
	Kind Kind
	// Engine is triton, vllm or custom (empty means custom). Ignored when Query is set.
	Engine string
	// Model is the model label value the presets select. Required for presets.
	Model string
	// Query is user-supplied PromQL (the <kind>Query metadata key); empty selects the preset.
	// It is confined to Namespace (see [Confine]) and must return an instant vector or a
	// scalar; a vector with several series is summed, unless ModelLabel is set (a NaN, ±Inf
	// or negative series makes the sum not usable: [ErrInvalidValue]).
	Query string
	// ModelLabel, with Query, makes the custom query grouped like a preset: the result is
	// split by ModelLabel and the key reads the series whose ModelLabel equals Model
	// (several such series are summed). ScaledObjects or models sharing the same Query then
	// share one evaluation, e.g. per-model demand from a gateway counter
	// `sum by (model) (rate(gateway_requests_total[1m]))`. Ignored without Query.
	ModelLabel string
}

// Key identifies a subscribed signal; it is comparable and cheap to keep. The zero Key is
// never subscribed.
type Key struct {
	q     queryID
	group group
}

// Query returns the PromQL the poller evaluates for k (grouped for presets, confined for
// custom queries).
func (k Key) Query() string { return k.q.promql }

// String is for logs; the address is redacted ([RedactAddress]).
func (k Key) String() string {
	addr := RedactAddress(k.q.address)
	if k.group == (group{}) {
		return addr + " " + k.q.promql
	}
	if k.group.signal != "" {
		return fmt.Sprintf("%s %s [namespace=%q model=%q %s=%q]", addr, k.q.promql, k.group.namespace, k.group.model, SignalLabel, k.group.signal)
	}
	return fmt.Sprintf("%s %s [namespace=%q model=%q]", addr, k.q.promql, k.group.namespace, k.group.model)
}

type queryID struct {
	address string
	promql  string
	split   string // model label a custom query is split by; "" sums it
}

// group is one (namespace, model) slice of a grouped result, and for a preset bundle the
// signal; zero for custom queries.
type group struct {
	namespace string
	model     string
	signal    Kind // the bundle's SignalLabel; "" for other queries
}

// Result is the last snapshot of one key.
type Result struct {
	// Value is the key's value: its series of a grouped preset query, or the sum of a custom
	// query's vector (or its scalar). Zero when Empty or Err is set. One series or a scalar
	// is passed on as Prometheus returned it: NaN, ±Inf or negative values are the caller's
	// to judge. A sum is not: when one of the series it would add is NaN, ±Inf or negative,
	// the key has no Value and its Err wraps [ErrInvalidValue] (-5 + 10 is not a queue of 5).
	Value float64
	// Empty is true when the query succeeded but returned no series for this key.
	Empty bool
	// Err is set when the last evaluation of the key's query failed (Value is then zero;
	// the caller holds on to earlier values), when its value would be a sum of series one of
	// which is invalid ([ErrInvalidValue]), or to ErrNotSubscribed. Addresses in it are
	// redacted ([RedactAddress]).
	Err error
	// EvaluatedAt is when the poller last evaluated the query (its evaluation timestamp);
	// zero before the first evaluation.
	EvaluatedAt time.Time
	// SampleTime is the timestamp Prometheus gave the sample (for an instant query, the
	// evaluation time); zero when Empty or Err is set.
	SampleTime time.Time
	// Waiting is true while the key's query is due but waits for one of its address's
	// [PollerConfig.Concurrency] slots (that address already has Concurrency queries in
	// flight: a slow or hung Prometheus, or more distinct queries than slots) or, for an
	// address a ScaledObject names, for one of the [TenantSlotsPerConcurrency] × Concurrency
	// slots all such addresses share; it has not been sent. The other fields
	// are the last evaluation's; with a zero EvaluatedAt there is none yet, which is neither
	// Empty (Prometheus answered no series) nor Err (it failed).
	Waiting bool
}

type sample struct {
	value float64
	ts    time.Time
}

// query is one distinct PromQL evaluation and its snapshot. Snapshot fields are guarded by
// Poller.mu.
type query struct {
	id         queryID
	kind       Kind // first subscriber's kind, or presets/<engine> for a bundle; a metrics label only
	grouped    bool
	bundle     bool // a PresetBundle: series are split by SignalLabel too
	modelLabel string
	ep         *endpoint

	subs        int
	evaluatedAt time.Time
	err         error
	series      map[group]sample // grouped queries
	bad         map[group]error  // grouped queries: groups whose sum has an invalid series (nil: none)
	total       sample           // custom queries
	empty       bool             // custom queries
	failing     bool             // for logging state changes only
	invalid     bool             // likewise, for invalid values (ErrInvalidValue)
	inflight    bool             // an evaluation is waiting for a slot or running
	waiting     bool             // inflight and still waiting for a slot of ep
	cancel      func()           // ends the running evaluation (nil: none)
	first       chan struct{}    // closed when the first evaluation is stored
	dropped     chan struct{}    // closed when the last subscriber is gone
}

// endpoint is one Prometheus address's API client and its Concurrency slots, shared by the
// queries naming the address and forgotten with the last of them. Slots per address keep a
// slow or hung address from delaying the queries of any other: its evaluations wait only
// for its own slots.
type endpoint struct {
	client  v1.API
	sem     chan struct{} // Concurrency slots
	queries int           // live queries naming the address (guarded by Poller.mu)
}

type subscription struct {
	key      Key
	q        *query
	reqs     []Request    // the requests that resolve to key (guarded by Poller.mu)
	lastUsed atomic.Int64 // unix nanoseconds
}

func (s *subscription) touch(now time.Time) { s.lastUsed.Store(now.UnixNano()) }

// Poller evaluates every distinct query once per refresh and serves the results from a
// snapshot. Its methods are safe for concurrent use.
type Poller struct {
	cfg       PollerConfig
	log       *slog.Logger
	m         *metrics
	transport *http.Transport
	// budget bounds the responses from the scaler's own --prometheus-address; tenantBudget
	// those from every address a ScaledObject names itself. A hostile server named by one
	// tenant then can at worst fail queries to other tenant-named servers, never to the
	// operator's Prometheus that the presets and most ScaledObjects read.
	budget, tenantBudget *respBudget
	// tenantSlots bounds the queries in flight to every address a ScaledObject names itself,
	// together (TenantSlotsPerConcurrency × Concurrency), on top of each address's own slots:
	// one tenant naming thousands of hung addresses holds at most that many goroutines and
	// connections, and never a slot of the default address.
	tenantSlots chan struct{}
	now         func() time.Time
	kick        chan struct{}

	warnMu   sync.Mutex
	replaced map[[2]string]struct{} // (namespace, query) whose namespace matchers were replaced: warned once

	mu         sync.RWMutex
	reqs       map[Request]*subscription
	subs       map[Key]*subscription
	queries    map[queryID]*query
	endpoints  map[string]*endpoint // by address; one per address some live query names
	perRefresh int
}

// NewPoller returns a poller for cfg whose metrics are registered on reg (nil: not
// registered). It starts nothing; call [Poller.Run]. Errors: cfg.Validate's, and metric
// registration failures.
func NewPoller(cfg PollerConfig, reg prometheus.Registerer, log *slog.Logger) (*Poller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("poller config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.Concurrency
	// http.DefaultTransport's dialer, plus the refusal of metadata addresses once resolved.
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: refuseDial}).DialContext
	maxResp := cfg.MaxResponseBytes
	if maxResp == 0 {
		maxResp = DefaultMaxResponseBytes
	}
	p := &Poller{
		cfg:          cfg,
		log:          log,
		transport:    tr,
		budget:       &respBudget{max: maxResp},
		tenantBudget: &respBudget{max: maxResp},
		tenantSlots:  make(chan struct{}, TenantSlotsPerConcurrency*cfg.Concurrency),
		now:          time.Now,
		kick:         make(chan struct{}, 1),
		reqs:         map[Request]*subscription{},
		subs:         map[Key]*subscription{},
		queries:      map[queryID]*query{},
		endpoints:    map[string]*endpoint{},
		replaced:     map[[2]string]struct{}{},
	}
	m, err := newMetrics(reg, p)
	if err != nil {
		return nil, err
	}
	p.m = m
	return p, nil
}

// Subscribe registers r and returns its key. It is idempotent and cheap for a request seen
// before (no parsing), and it counts as a read for [PollerConfig.ForgetAfter], so callers may
// subscribe on every RPC. A new query is evaluated as soon as Run notices it, without waiting
// for the next refresh.
//
// Errors wrap [ErrBadRequest]: unknown kind or engine, missing namespace or model, a bad
// address; and [ErrBadQuery] (which also wraps ErrBadRequest) for PromQL that does not parse
// or does not return an instant vector or scalar.
func (p *Poller) Subscribe(r Request) (Key, error) {
	now := p.now()
	p.mu.RLock()
	s, ok := p.reqs[r]
	p.mu.RUnlock()
	if ok {
		s.touch(now)
		return s.key, nil
	}

	key, spec, err := p.resolve(r)
	if err != nil {
		return Key{}, err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.reqs[r]; ok { // subscribed concurrently
		s.touch(now)
		return s.key, nil
	}
	if s, ok := p.subs[key]; ok {
		p.reqs[r] = s
		s.reqs = append(s.reqs, r)
		s.touch(now)
		return key, nil
	}
	q, ok := p.queries[key.q]
	if !ok {
		ep, ok := p.endpoints[key.q.address]
		if !ok {
			c, err := api.NewClient(api.Config{Address: key.q.address, RoundTripper: &limitedTransport{base: p.transport, budget: p.budgetFor(key.q.address)}})
			if err != nil {
				return Key{}, fmt.Errorf("%w: prometheusAddress %s: %w", ErrBadRequest, quoteAddr(key.q.address), RedactURLError(err))
			}
			ep = &endpoint{client: v1.NewAPI(c), sem: make(chan struct{}, p.cfg.Concurrency)}
			p.endpoints[key.q.address] = ep
		}
		ep.queries++
		spec.ep = ep
		spec.first = make(chan struct{})
		spec.dropped = make(chan struct{})
		q = spec
		p.queries[key.q] = q
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	q.subs++
	// Every key of a query shares the query's own PromQL string: a preset bundle is ~1.8 KB,
	// and 10,000 ScaledObjects × 7 signals must not keep 70,000 copies of it.
	key.q = q.id
	s = &subscription{key: key, q: q, reqs: []Request{r}}
	s.touch(now)
	p.subs[key] = s
	p.reqs[r] = s
	return key, nil
}

// Unsubscribe forgets k at once; keys nobody reads are also forgotten after ForgetAfter.
func (p *Poller) Unsubscribe(k Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.subs[k]; ok {
		p.dropLocked(s)
	}
}

func (p *Poller) dropLocked(s *subscription) {
	delete(p.subs, s.key)
	for _, r := range s.reqs {
		delete(p.reqs, r)
	}
	q := s.q
	q.subs--
	if q.subs > 0 {
		return
	}
	delete(p.queries, q.id)
	// Its evaluation, waiting or running, ends now: a forgotten query holds no slot, no
	// connection and no goroutine.
	close(q.dropped)
	if q.cancel != nil {
		q.cancel()
	}
	q.ep.queries--
	if q.ep.queries == 0 {
		delete(p.endpoints, q.id.address)
	}
}

// resolve turns r into its key and a fresh query description. It does not touch p's maps.
func (p *Poller) resolve(r Request) (Key, *query, error) {
	if !r.Kind.valid() {
		return Key{}, nil, fmt.Errorf("%w: kind %q is not one of queue, rate, activity, ready", ErrBadRequest, r.Kind)
	}
	if r.Namespace == "" {
		return Key{}, nil, fmt.Errorf("%w: namespace is required", ErrBadRequest)
	}
	addr := r.Address
	if addr == "" {
		addr = p.cfg.DefaultAddress
	}
	if addr == "" {
		return Key{}, nil, fmt.Errorf("%w: prometheusAddress is empty and the scaler has no default (--prometheus-address)", ErrBadRequest)
	}
	if err := validateAddress(addr); err != nil {
		return Key{}, nil, err
	}
	if r.Query != "" {
		expr, replaced, err := confineExpr(r.Query, r.Namespace, p.cfg.NamespaceLabel)
		if err != nil {
			return Key{}, nil, fmt.Errorf("%sQuery: %w", r.Kind, err)
		}
		if len(replaced) > 0 {
			p.warnReplaced(r, replaced, expr.String())
		}
		if t := expr.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
			return Key{}, nil, fmt.Errorf("%sQuery %q: %w: returns a %s; it must return an instant vector or a scalar (wrap a range in rate() or similar)", r.Kind, r.Query, ErrBadQuery, t)
		}
		if r.ModelLabel == "" {
			id := queryID{address: addr, promql: expr.String()}
			return Key{q: id}, &query{id: id, kind: r.Kind}, nil
		}
		if !model.LegacyValidation.IsValidLabelName(r.ModelLabel) {
			return Key{}, nil, fmt.Errorf("%w: model label %q must be a label name matching [a-zA-Z_][a-zA-Z0-9_]*", ErrBadRequest, r.ModelLabel)
		}
		if r.Model == "" {
			return Key{}, nil, fmt.Errorf("%w: model is required with a model label (%q)", ErrBadRequest, r.ModelLabel)
		}
		// The query is confined to one namespace already (and may aggregate the label
		// away), so it is split by the model label alone.
		id := queryID{address: addr, promql: expr.String(), split: r.ModelLabel}
		k := Key{q: id, group: group{model: r.Model}}
		return k, &query{id: id, kind: r.Kind, grouped: true, modelLabel: r.ModelLabel}, nil
	}
	engine := r.Engine
	if engine == "" || engine == EngineCustom {
		return Key{}, nil, fmt.Errorf("%w: %sQuery is required with engine %q (or set engine to triton or vllm)", ErrBadRequest, r.Kind, EngineCustom)
	}
	preset, ok := Presets[engine]
	if !ok {
		return Key{}, nil, fmt.Errorf("%w: engine %q: must be one of triton, vllm, custom", ErrBadRequest, engine)
	}
	if r.Model == "" {
		return Key{}, nil, fmt.Errorf("%w: model is required with engine %q", ErrBadRequest, engine)
	}
	labels := Labels{Namespace: p.cfg.NamespaceLabel, Pod: p.cfg.PodLabel}
	if _, err := PresetQuery(engine, r.Kind, labels); err != nil { // the kind has a preset
		return Key{}, nil, err
	}
	promql, err := PresetBundle(engine, labels)
	if err != nil {
		return Key{}, nil, err
	}
	id := queryID{address: addr, promql: promql}
	k := Key{q: id, group: group{namespace: r.Namespace, model: r.Model, signal: r.Kind}}
	return k, &query{id: id, kind: Kind("presets/" + engine), grouped: true, bundle: true, modelLabel: preset.ModelLabel}, nil
}

// warnReplaced logs at WARN, once per distinct (namespace, query), that confinement replaced
// namespace matchers of a custom query (it named another namespace or widened its scope),
// and counts it in inferscale_scaler_prom_namespace_matchers_replaced_total. The query still
// runs, confined to r.Namespace.
func (p *Poller) warnReplaced(r Request, replaced []string, confined string) {
	k := [2]string{r.Namespace, r.Query}
	p.warnMu.Lock()
	_, seen := p.replaced[k]
	p.replaced[k] = struct{}{}
	p.warnMu.Unlock()
	if seen {
		return
	}
	p.m.replaced.WithLabelValues(r.Namespace).Inc()
	p.log.Warn("custom query names other namespaces: its namespace matchers were replaced (confinement); it reads only its own namespace",
		"namespace", r.Namespace, "kind", string(r.Kind), "replaced", replaced, "query", r.Query, "confined", confined)
}

// Result returns the last snapshot for k. It never waits on Prometheus and counts as a read
// for [PollerConfig.ForgetAfter].
func (p *Poller) Result(k Key) Result {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.subs[k]
	if !ok {
		return Result{Err: ErrNotSubscribed}
	}
	s.touch(p.now())
	r := snapshot(s.q, k.group)
	r.Waiting = s.q.waiting
	return r
}

// snapshot is the result of g in q's last evaluation; the caller holds Poller.mu.
func snapshot(q *query, g group) Result {
	switch {
	case q.evaluatedAt.IsZero():
		return Result{}
	case q.err != nil:
		return Result{Err: q.err, EvaluatedAt: q.evaluatedAt}
	case !q.grouped:
		if q.empty {
			return Result{Empty: true, EvaluatedAt: q.evaluatedAt}
		}
		return Result{Value: q.total.value, SampleTime: q.total.ts, EvaluatedAt: q.evaluatedAt}
	}
	if q.bad != nil {
		if err, ok := q.bad[g]; ok {
			return Result{Err: err, EvaluatedAt: q.evaluatedAt}
		}
	}
	smp, ok := q.series[g]
	if !ok {
		return Result{Empty: true, EvaluatedAt: q.evaluatedAt}
	}
	return Result{Value: smp.value, SampleTime: smp.ts, EvaluatedAt: q.evaluatedAt}
}

// closed is returned by Evaluated for keys with nothing to wait for.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Evaluated returns a channel closed once k's query has been evaluated for the first time
// (successfully or not): a caller may wait on it, bounded, for a new key's first snapshot
// instead of answering from an empty one. For a key the poller does not know the channel
// is already closed ([Poller.Result] says ErrNotSubscribed). It never waits on Prometheus.
func (p *Poller) Evaluated(k Key) <-chan struct{} {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.subs[k]
	if !ok {
		return closed
	}
	return s.q.first
}

// Subscriptions returns the number of live keys.
func (p *Poller) Subscriptions() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.subs)
}

// Run refreshes at once and then every RefreshInterval, and evaluates newly subscribed
// queries as soon as they appear, until ctx is done. Each query is evaluated independently:
// a query still in flight from an earlier refresh (a slow or hung Prometheus) is skipped, not
// waited for, and each address has its own Concurrency slots, so one slow address never
// delays the others. Run returns nil after ctx is done,
// once every evaluation it started has ended and idle connections are closed.
func (p *Poller) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		p.transport.CloseIdleConnections()
	}()
	t := time.NewTicker(p.cfg.RefreshInterval)
	defer t.Stop()
	p.launch(ctx, &wg, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.launch(ctx, &wg, true)
		case <-p.kick:
			p.launch(ctx, &wg, false)
		}
	}
}

// Refresh forgets unread subscriptions, evaluates every distinct query not already in
// flight once (up to Concurrency at a time per address, each bounded by QueryTimeout) and
// waits for
// those evaluations. Run does the same on its ticker without waiting; tests call Refresh to
// step the poller without a clock.
func (p *Poller) Refresh(ctx context.Context) {
	var wg sync.WaitGroup
	p.launch(ctx, &wg, true)
	wg.Wait()
}

// launch starts evaluations on wg: of every query (all) or of queries never evaluated.
func (p *Poller) launch(ctx context.Context, wg *sync.WaitGroup, all bool) {
	now := p.now()
	p.mu.Lock()
	if all {
		cutoff := now.Add(-p.cfg.ForgetAfter).UnixNano()
		for _, s := range p.subs {
			if s.lastUsed.Load() < cutoff {
				p.log.Info("forgetting unread signal", "key", s.key.String())
				p.dropLocked(s)
			}
		}
		p.perRefresh = len(p.queries)
	}
	todo := make([]*query, 0, len(p.queries))
	for _, q := range p.queries {
		if q.inflight || (!all && !q.evaluatedAt.IsZero()) {
			continue
		}
		q.inflight = true
		todo = append(todo, q)
	}
	perRefresh := p.perRefresh
	p.mu.Unlock()
	if all {
		p.m.perRefresh.Set(float64(perRefresh))
	}
	for _, q := range todo {
		wg.Go(func() { p.slot(ctx, q, now) })
	}
}

// slot evaluates q at now once a slot of q's address is free, unless ctx ends or q is
// forgotten first; a forgotten query's running evaluation is cancelled (dropLocked).
// acquire takes a slot of sem for q: at once when one is free, else marking q waiting (a
// saturated address, or all tenant-named ones) until one is, ctx ends or q is forgotten
// (false).
func (p *Poller) acquire(ctx context.Context, q *query, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	p.mu.Lock()
	q.waiting = true
	p.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-q.dropped:
	}
	return false
}

func (p *Poller) slot(ctx context.Context, q *query, now time.Time) {
	defer func() {
		p.mu.Lock()
		q.inflight, q.waiting, q.cancel = false, false, nil
		p.mu.Unlock()
	}()
	if !p.acquire(ctx, q, q.ep.sem) {
		return
	}
	defer func() { <-q.ep.sem }()
	if q.id.address != p.cfg.DefaultAddress {
		if !p.acquire(ctx, q, p.tenantSlots) {
			return
		}
		defer func() { <-p.tenantSlots }()
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	select {
	case <-q.dropped: // forgotten while the slot was taken
		p.mu.Unlock()
		return
	default:
	}
	q.waiting, q.cancel = false, cancel
	p.mu.Unlock()
	p.evaluate(qctx, q, now)
}

// TenantSlotsPerConcurrency × [PollerConfig.Concurrency] queries may be in flight to all the
// addresses ScaledObjects name themselves together (256 at the default 8), besides each such
// address's own Concurrency: without it the bound was Concurrency × --max-triggers addresses.
const TenantSlotsPerConcurrency = 32

// budgetFor is the response budget of address: the default address's own, or the one every
// other address shares.
func (p *Poller) budgetFor(address string) *respBudget {
	if address == p.cfg.DefaultAddress {
		return p.budget
	}
	return p.tenantBudget
}

// evaluate runs q at time now and stores the outcome in q's snapshot.
func (p *Poller) evaluate(ctx context.Context, q *query, now time.Time) {
	qctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
	defer cancel()
	// The response's bytes count against MaxResponseBytes until its result is split below.
	c := &charge{b: p.budgetFor(q.id.address), address: q.id.address}
	defer c.release() // also on shutdown's early return
	qctx = withCharge(qctx, c)
	start := time.Now()
	v, _, _, err := q.ep.client.Query(qctx, q.id.promql, now, v1.WithTimeout(p.cfg.QueryTimeout))
	err = RedactURLError(boundedAPIError(err))
	p.m.duration.WithLabelValues(string(q.kind)).Observe(time.Since(start).Seconds())
	if ctx.Err() != nil {
		return // shutting down or forgotten: keep the snapshot as it was
	}
	var (
		series map[group]sample
		bad    map[group]error
		total  sample
		empty  bool
	)
	if err == nil {
		nsLabel := p.cfg.NamespaceLabel
		if q.id.split != "" {
			nsLabel = "" // custom split queries: confined already, split by model only
		}
		series, bad, total, empty, err = split(v, q.kind, q.grouped, q.bundle, nsLabel, q.modelLabel)
	}
	c.release() // the decoded vector is garbage now; its bytes go back to the budget
	invalid := errors.Is(err, ErrInvalidValue)
	if err != nil {
		err = fmt.Errorf("query %s %q: %w", RedactAddress(q.id.address), q.id.promql, err)
		if !invalid { // an invalid value is no failed evaluation: Prometheus answered
			p.m.errors.WithLabelValues(string(q.kind)).Inc()
		}
	}
	var firstBad error
	for _, e := range bad {
		if firstBad == nil || e.Error() < firstBad.Error() { // deterministic for the log
			firstBad = e
		}
	}
	invalid = invalid || firstBad != nil

	p.mu.Lock()
	defer p.mu.Unlock()
	if q.evaluatedAt.IsZero() {
		close(q.first)
	}
	q.evaluatedAt = now
	q.err = err
	q.series, q.bad, q.total, q.empty = series, bad, total, empty
	failing := err != nil && !invalid
	switch {
	case failing && !q.failing:
		p.log.Warn("prometheus query failing", "err", err)
	case !failing && q.failing:
		p.log.Info("prometheus query recovered", "address", RedactAddress(q.id.address), "query", q.id.promql)
	}
	switch {
	case invalid && !q.invalid && firstBad != nil:
		p.log.Warn("prometheus query result not usable: a series it sums is NaN, ±Inf or negative, or their sum passes float64",
			"address", RedactAddress(q.id.address), "query", q.id.promql, "keys", len(bad), "err", firstBad)
	case invalid && !q.invalid:
		p.log.Warn("prometheus query result not usable: a series it sums is NaN, ±Inf or negative, or their sum passes float64", "err", err)
	case !invalid && q.invalid && !failing:
		p.log.Info("prometheus query result usable again", "address", RedactAddress(q.id.address), "query", q.id.promql)
	}
	q.failing, q.invalid = failing, invalid
}

// split converts a query result into per-group samples (grouped: keyed by the values of
// nsLabel and modelLabel, and of SignalLabel for a bundle; an empty nsLabel leaves the
// namespace out) or one total (custom: the sum of the vector's samples, the latest sample
// time; empty when the vector is). Several series of one group, or of a custom query, are
// summed only when each is a finite number ≥ 0 ([validSummand]): otherwise the group is in
// bad, or for a custom query err wraps ErrInvalidValue. kind names the signal in those errors
// (a bundle's series name their own).
func split(v model.Value, kind Kind, grouped, bundle bool, nsLabel, modelLabel string) (map[group]sample, map[group]error, sample, bool, error) {
	switch v := v.(type) {
	case *model.Scalar:
		if grouped {
			return nil, nil, sample{}, false, fmt.Errorf("preset query returned a scalar, want a vector")
		}
		return nil, nil, sample{value: float64(v.Value), ts: v.Timestamp.Time()}, false, nil
	case model.Vector:
		if grouped {
			series := make(map[group]sample, len(v))
			var summed map[group]int // groups of several series, and how many (nil: none)
			key := func(s *model.Sample) group {
				g := group{model: string(s.Metric[model.LabelName(modelLabel)])}
				if bundle {
					g.signal = Kind(s.Metric[SignalLabel])
				}
				if nsLabel != "" {
					g.namespace = string(s.Metric[model.LabelName(nsLabel)])
				}
				return g
			}
			for _, s := range v {
				g := key(s)
				old, dup := series[g]
				if dup {
					if summed == nil {
						summed = map[group]int{}
					}
					summed[g] = max(summed[g], 1) + 1
				}
				series[g] = sample{value: old.value + float64(s.Value), ts: s.Timestamp.Time()}
			}
			if summed == nil {
				return series, nil, sample{}, false, nil
			}
			var bad map[group]error
			for g, n := range summed {
				// Every summand valid, the sum past float64 (two series of 1e308): +Inf is no
				// sample, and the decision dropped it without a word.
				if math.IsInf(series[g].value, 1) {
					if bad == nil {
						bad = map[group]error{}
					}
					k := kind
					if bundle {
						k = g.signal
					}
					bad[g] = &invalidValueError{kind: k, n: n, group: g, grouped: true, overflow: true}
					delete(series, g)
				}
			}
			for _, s := range v {
				g := key(s)
				n, ok := summed[g]
				if !ok || validSummand(float64(s.Value)) {
					continue
				}
				// An invalid series (+Inf itself) is named rather than the overflow it causes.
				if e, seen := bad[g]; seen && !e.(*invalidValueError).overflow {
					continue
				}
				if bad == nil {
					bad = map[group]error{}
				}
				k := kind
				if bundle {
					k = g.signal
				}
				bad[g] = &invalidValueError{kind: k, series: s.Metric.String(), value: float64(s.Value), n: n, group: g, grouped: true}
				delete(series, g)
			}
			return series, bad, sample{}, false, nil
		}
		if len(v) == 0 {
			return nil, nil, sample{}, true, nil
		}
		var total sample
		var first *model.Sample // the first series that is no valid summand
		for _, s := range v {
			total.value += float64(s.Value)
			if t := s.Timestamp.Time(); t.After(total.ts) {
				total.ts = t
			}
			if first == nil && !validSummand(float64(s.Value)) {
				first = s
			}
		}
		if first != nil && len(v) > 1 {
			return nil, nil, sample{}, false, &invalidValueError{kind: kind, series: first.Metric.String(), value: float64(first.Value), n: len(v)}
		}
		if len(v) > 1 && math.IsInf(total.value, 1) {
			return nil, nil, sample{}, false, &invalidValueError{kind: kind, n: len(v), overflow: true}
		}
		return nil, nil, total, false, nil
	}
	return nil, nil, sample{}, false, fmt.Errorf("query returned a %s, want a vector or scalar", v.Type())
}

// validSummand reports whether v may be added into a key's value: a finite number ≥ 0, the
// range of every signal (a count, a rate, an activity, a time, a dispersion). The decision
// treats NaN, ±Inf and negative values as no sample; summed with valid series they would
// hide (-5 + 10 reads as a queue of 5) or spoil the others.
func validSummand(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// ErrInvalidValue is wrapped by a [Result.Err] when the key's value would be the sum of
// several series and one of them is NaN, ±Inf or negative, or their sum passes the largest
// float64: the sum would hide it, so the key
// has no value (the scaler's decision holds the signal's last good value, then leaves it out,
// as for an invalid single value). The error names the signal, the series, its value and the
// accepted range.
var ErrInvalidValue = errors.New("invalid value")

// maxSeriesText bounds the labels of an invalid series that an error repeats.
const maxSeriesText = 256

type invalidValueError struct {
	kind    Kind
	series  string // the invalid series' labels (model.Metric.String)
	value   float64
	n       int // series the value would sum
	group   group
	grouped bool
	// overflow: every series is valid and their sum passes the largest float64 (series and
	// value are then unset).
	overflow bool
}

func (e *invalidValueError) Error() string {
	of := "the query returned"
	if e.grouped {
		switch {
		case e.group.namespace != "":
			of = fmt.Sprintf("of namespace %q, model %q", e.group.namespace, e.group.model)
		default:
			of = fmt.Sprintf("of model %q", e.group.model)
		}
	}
	if e.overflow {
		return fmt.Sprintf("%v: %s: the %d series %s sum past the largest float64 (%g), so the sample is not usable",
			ErrInvalidValue, e.kind, e.n, of, math.MaxFloat64)
	}
	return fmt.Sprintf("%v: %s: series %s is %s, outside the accepted range [0, +Inf) (a finite number ≥ 0), so the %d series %s are not summed and the sample is not usable",
		ErrInvalidValue, e.kind, errtext.Cut(e.series, maxSeriesText), strconv.FormatFloat(e.value, 'g', -1, 64), e.n, of)
}

func (e *invalidValueError) Unwrap() error { return ErrInvalidValue }

// snapshotAge is the age of the oldest result in the snapshot (now minus the earliest
// EvaluatedAt among evaluated queries); 0 when nothing has been evaluated.
func (p *Poller) snapshotAge() time.Duration {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var oldest time.Time
	for _, q := range p.queries {
		if !q.evaluatedAt.IsZero() && (oldest.IsZero() || q.evaluatedAt.Before(oldest)) {
			oldest = q.evaluatedAt
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return p.now().Sub(oldest)
}

// waitingQueries is the number of queries waiting for a slot of their address.
func (p *Poller) waitingQueries() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, q := range p.queries {
		if q.waiting {
			n++
		}
	}
	return n
}

// addresses is the number of distinct Prometheus addresses live queries name.
func (p *Poller) addresses() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.endpoints)
}

// Queries returns the number of distinct queries currently subscribed; the next full refresh
// evaluates exactly these.
func (p *Poller) Queries() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.queries)
}
