package residency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
)

// Triton is the part of *triton.Client the controller uses.
type Triton interface {
	Index(ctx context.Context, readyOnly bool) ([]triton.ModelIndex, error)
	Load(ctx context.Context, name string, opts triton.LoadOptions) error
	Unload(ctx context.Context, name string, opts triton.UnloadOptions) error
	Statistics(ctx context.Context, name string) ([]triton.ModelStats, error)
}

// DemandSource gives the request rates (req/s) of models that are not loaded in this pod, which
// Triton's statistics cannot see. Models it has no value for are left out of the map.
type DemandSource interface {
	Rates(ctx context.Context, models []string) (map[string]float64, error)
}

// Events records Kubernetes events about the pod (see NewKubeEvents); nil records none.
type Events interface {
	Event(warning bool, reason, message string)
}

// Deps are the controller's connections to the world. Triton is required.
type Deps struct {
	Triton Triton
	// Demand of models not loaded here; nil: none (they load only when P0).
	Demand DemandSource
	// DeviceUsedBytes reads the device's memory in use: gpu.Device.UsedBytes with NVML, else
	// TritonMemoryProbe; a negative value means unknown. nil: no device check. An error does
	// not stop the loop: it plans on the accounting alone (with the unaccounted memory last
	// measured), counts device_memory_read_errors_total and warns at most every 5 minutes.
	DeviceUsedBytes func() (int64, error)
	// Clock drives the loop and every timestamp; nil: the wall clock.
	Clock triton.Clock
	// Log; nil: slog.Default().
	Log *slog.Logger
	// Metrics; nil: collectors on a throwaway registry.
	Metrics *Metrics
	// Events; nil: none.
	Events Events
	// Held returns the requests held outside Triton per model (the sidecar's inference front,
	// residency/front): for a catalog model that holds no memory they are its Queued work, and
	// the oldest one's arrival its WaitingSince, so the plan wants it as it wants a model with a
	// queue, and the wait until its load starts is measured (plan.Observed.LoadWait). nil: none.
	Held func() map[string]plan.Held
	// Forwarding returns, per model, the unary and HTTP requests the front has forwarded to
	// Triton and not had answered (front.Front.Forwarding). They are queued or executing in
	// Triton (or still being sent to it), so a READY model's Executing is at least their count
	// less its observed queue: Triton's statistics count a request only once it completes, and
	// its pending gauge only while it waits, so a lone request executing is otherwise
	// invisible, and the model would be a victim while it runs. nil: none.
	Forwarding func() map[string]int
	// FrontActive returns the inference requests the sidecar's front holds or is forwarding now
	// (front.Front.Active). The drain is over only once it reads 0: Triton's counters do not
	// see a request the front still holds, and a model unloaded to confirm the drain would
	// fail a held request its load was for. nil: none.
	FrontActive func() int
}

// Status is the controller's latest view, for the HTTP endpoints.
type Status struct {
	// At is when Triton was last observed; Err is set when that failed.
	At  time.Time
	Err error
	// P0NotReady lists the P0 models that are not READY (sorted).
	P0NotReady []string
	// Unplaceable lists the catalog models that can never be loaded in this pod (sorted): no
	// peak for the pod's profile, or peak + reserve above the budget (Catalog.Unfit).
	Unplaceable []string
	// Result is the last plan.
	Result plan.Result
	// Catalog and Observed are what the last plan was made from (the inference front's view
	// of which models are READY, quarantined or outside the catalog).
	Catalog  plan.Catalog
	Observed plan.Observed
}

// Controller keeps Triton's loaded models within the budget: every loop it observes Triton,
// asks Decide, and carries out the first step of the plan — its leading unloads, or its
// leading loads up to MaxConcurrentLoads — then observes again, so that an unload counts only
// once the index shows the model UNAVAILABLE and the device shows its memory back. A model
// with queued or executing requests is never unloaded to make room (plan.ModelStatus.Busy).
type Controller struct {
	cfg    Config
	budget plan.Budget
	deps   Deps
	m      *Metrics

	draining atomic.Bool
	wake     chan struct{} // Wake: run the next loop now

	mu           sync.Mutex
	cat          plan.Catalog // replaced by SetCatalog; read through catalog()
	loadedDigest map[string]string
	firstReady   map[string]time.Time
	// lastCount is each loaded model's finished-request count (success + fail) at the last loop; est its decayed
	// demand (kept while it is not loaded: its history counts when it is wanted again); work
	// its in-flight accounting; lastObserved the last loop's time.
	lastCount    map[string]uint64
	est          map[string]plan.DecayedRate
	work         map[string]work
	lastObserved time.Time
	// loadWait is the decayed mean wait of loads that requests waited for, before they started
	// (plan.Observed.LoadWait).
	loadWait plan.DecayedMean
	// metricsClient reads Triton's queue lengths; queueErrSince and queueWarnAt rate-limit the
	// warning while they are unreadable.
	metricsClient *http.Client
	queueErrSince time.Time
	queueWarnAt   time.Time
	// queueInvalid is set while a queue-length series is not a count (warned once per
	// episode); noStats while READY models are missing from Triton's statistics.
	queueInvalid bool
	noStats      bool
	// unloadIssued tracks the unloads Triton answered (or refused) while the model still holds
	// memory: one is re-issued only after Config.Backoff of its tries, and counted once.
	unloadIssued map[string]unloadIssue
	// demandErrSince and demandWarnAt rate-limit the warning while the demand of models not
	// loaded is unavailable, as the queue's.
	demandErrSince time.Time
	demandWarnAt   time.Time
	failures       map[string]int
	backoffUntil   map[string]time.Time
	quarantined    map[string]bool
	overPeak       map[string]int64
	refused        map[string]bool
	// loading names the models whose load this controller has issued and Triton has not yet
	// answered (LoadInFlight): the status's observation precedes them.
	loading map[string]bool
	status  Status
	// unaccounted is the device memory beyond the accounting at the last reading; kept while
	// the device cannot be read. deviceErrSince is when the current run of unreadable loops
	// began (zero: readable), deviceWarnAt when it was last logged.
	unaccounted    int64
	deviceErrSince time.Time
	deviceWarnAt   time.Time
}

// NewController validates its inputs and returns a controller; Run starts it.
func NewController(cfg Config, cat plan.Catalog, budget plan.Budget, deps Deps) (*Controller, error) {
	var errs []error
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := cat.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := budget.Validate(); err != nil {
		errs = append(errs, err)
	} else if err := cat.CheckPinned(budget); err != nil {
		errs = append(errs, err)
	}
	if deps.Triton == nil {
		errs = append(errs, errors.New("deps.Triton: nil; want a Triton client"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if deps.Clock == nil {
		deps.Clock = triton.RealClock{}
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
	c := &Controller{cfg: cfg, cat: cat, budget: budget, deps: deps, m: deps.Metrics, wake: make(chan struct{}, 1),
		loadedDigest: map[string]string{}, firstReady: map[string]time.Time{}, lastCount: map[string]uint64{}, est: map[string]plan.DecayedRate{},
		work: map[string]work{}, metricsClient: &http.Client{Timeout: 5 * time.Second}, failures: map[string]int{},
		backoffUntil: map[string]time.Time{}, quarantined: map[string]bool{}, overPeak: map[string]int64{}, loading: map[string]bool{},
		refused: map[string]bool{}, unloadIssued: map[string]unloadIssue{}}
	c.status.Err = errors.New("not observed yet")
	c.m.BudgetBytes.Set(float64(budget.TotalBytes))
	c.setCatalogLocked(cat)
	return c, nil
}

// catalog returns the current catalog.
func (c *Controller) catalog() plan.Catalog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cat
}

// SetCatalog replaces the catalog (a ConfigMap update) from the next loop on. A model whose
// digest changed starts afresh (failures, backoff and quarantine forgotten) and, where loaded,
// is reloaded by the plan. An invalid catalog, or one with a P0 model that can never fit the
// budget (ErrNeverFits), is rejected and the current one kept.
func (c *Controller) SetCatalog(cat plan.Catalog) error {
	if err := cat.Validate(); err != nil {
		return err
	}
	if err := cat.CheckPinned(c.budget); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var changed []string
	for _, m := range cat.Models {
		if old, ok := c.cat.Model(m.Name); ok && old.Digest != m.Digest {
			changed = append(changed, m.Name)
			delete(c.failures, m.Name)
			delete(c.backoffUntil, m.Name)
			delete(c.quarantined, m.Name)
			delete(c.overPeak, m.Name)
			c.m.OverPeak.DeleteLabelValues(m.Name)
		}
	}
	c.setCatalogLocked(cat)
	c.deps.Log.Info("catalog replaced", "models", len(cat.Models), "digest_changed", changed)
	return nil
}

func (c *Controller) setCatalogLocked(cat plan.Catalog) {
	c.cat = cat
	unfit := cat.Unfit(c.budget)
	c.status.Unplaceable = nil
	why := make([]string, 0, len(unfit))
	for _, u := range unfit {
		c.status.Unplaceable = append(c.status.Unplaceable, u.Name)
		why = append(why, fmt.Sprintf("%s (%s): %s", u.Name, u.Tier, u.Reason))
	}
	c.m.UnplaceableModels.Set(float64(len(unfit)))
	if len(unfit) > 0 {
		c.deps.Log.Warn("catalog models can never be loaded in this pod",
			"profile", c.budget.Profile, "budget_bytes", c.budget.TotalBytes, "models", why)
		c.event(true, "Unplaceable", "models never loaded here: "+strings.Join(why, "; "))
	}
}

func (c *Controller) event(warning bool, reason, msg string) {
	if c.deps.Events != nil {
		c.deps.Events.Event(warning, reason, msg)
	}
}

// Status returns the latest status.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Ready reports whether the pod should receive traffic: Triton was observed in the last loop,
// every P0 model is READY, and no drain is under way. The string says why not.
func (c *Controller) Ready() (bool, string) {
	if c.draining.Load() {
		return false, "draining"
	}
	st := c.Status()
	switch {
	case st.Err != nil:
		return false, "triton not observed: " + st.Err.Error()
	case len(st.P0NotReady) > 0:
		return false, "P0 models not READY: " + strings.Join(st.P0NotReady, ", ")
	}
	return true, "ok"
}

// StartDrain marks the pod not-ready and stops new loads (the drain itself is Drainer's).
func (c *Controller) StartDrain() {
	c.draining.Store(true)
	c.m.Ready.Set(0)
}

// Run loops until ctx is done: Step, then wait LoopInterval (a short settle time when the
// step acted, so a plan's next step follows quickly). It returns nil when ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	settle := c.cfg.Settle()
	for {
		acted, err := c.Step(ctx)
		if err != nil && ctx.Err() == nil {
			c.deps.Log.Warn("residency loop", "err", err)
		}
		wait := c.cfg.LoopInterval
		if acted {
			wait = settle
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.deps.Clock.After(wait):
		case <-c.wake:
		}
	}
}

// Wake makes Run start its next loop now instead of after the loop interval. The inference
// front calls it when it holds the first request for a model, and when a model's last
// forwarded request ends while it holds requests (a load refused because only busy models
// held the memory may proceed now). It never blocks.
func (c *Controller) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// addHeld counts the requests held outside Triton (Deps.Held) as the Queued work of each
// catalog model that holds no memory, and the oldest one's arrival as its WaitingSince (the
// earlier of that and one already observed).
func (c *Controller) addHeld(cat plan.Catalog, obs plan.Observed) {
	if c.deps.Held == nil {
		return
	}
	for name, h := range c.deps.Held() {
		if _, ok := cat.Model(name); !ok || h.Requests <= 0 {
			continue
		}
		st, ok := obs.Models[name]
		if !ok {
			st.State = plan.StateUnavailable
		}
		if !st.State.HoldsMemory() {
			st.Queued = max(st.Queued, 0) + h.Requests
			if !h.Since.IsZero() && (st.WaitingSince.IsZero() || h.Since.Before(st.WaitingSince)) {
				st.WaitingSince = h.Since
			}
			obs.Models[name] = st
		}
	}
}

// addForwarding raises each READY model's Executing to the requests the front forwards to it
// (Deps.Forwarding) less those observed queued: every forwarded request is queued or executing
// in Triton until it is answered.
func (c *Controller) addForwarding(obs plan.Observed) {
	if c.deps.Forwarding == nil {
		return
	}
	for name, n := range c.deps.Forwarding() {
		st, ok := obs.Models[name]
		if !ok || st.State != plan.StateReady || n <= 0 {
			continue
		}
		st.Executing = max(st.Executing, n-max(st.Queued, 0))
		obs.Models[name] = st
	}
}

// Step runs one loop: observe, decide, and act on the plan's first step. It reports whether it
// acted; an error means Triton could not be observed (nothing was done).
func (c *Controller) Step(ctx context.Context) (acted bool, err error) {
	now := c.deps.Clock.Now()
	cat := c.catalog()
	o, err := c.observe(ctx, cat, now)
	if err != nil {
		c.m.LoopErrors.Inc()
		c.mu.Lock()
		c.status.At, c.status.Err = now, err
		c.mu.Unlock()
		c.m.Ready.Set(0)
		return false, err
	}
	c.flagOverPeak(cat, o.obs)
	c.addHeld(cat, o.obs)
	c.addForwarding(o.obs)
	c.mu.Lock()
	o.obs.LoadWait = time.Duration(c.loadWait.Mean() * 1e9)
	c.mu.Unlock()
	res := plan.Decide(cat, c.budget, o.obs, o.demand, now)
	c.record(cat, now, o, res)
	if c.draining.Load() {
		return false, nil
	}
	// The plan's first step: its leading unloads, alone — their memory counts as free only once
	// a later observation shows the model UNAVAILABLE and the device's memory back — or else its
	// leading loads, up to MaxConcurrentLoads and up to the next unload (the plan puts each
	// eviction just before the load that needs its memory).
	c.forgetUnwantedUnloads(res.Actions)
	var unloads, loads []plan.Action
	for _, a := range res.Actions {
		if a.Kind == plan.ActionUnload {
			if len(loads) > 0 {
				break
			}
			unloads = append(unloads, a)
		} else {
			if len(unloads) > 0 {
				break
			}
			loads = append(loads, a)
		}
	}
	if len(unloads) > 0 {
		// An unload waiting out its re-issue backoff is no step: the loop sleeps its interval
		// rather than re-planning every settle time, and the loads behind it wait for its memory.
		for _, a := range unloads {
			if c.unload(ctx, a, now) {
				acted = true
			}
		}
		return acted, nil
	}
	if len(loads) == 0 {
		return false, nil
	}
	loads = loads[:min(len(loads), c.cfg.MaxConcurrentLoads)]
	c.mu.Lock()
	for _, a := range loads {
		c.loading[a.Model] = true
	}
	c.mu.Unlock()
	var g errgroup.Group
	for _, a := range loads {
		since := o.obs.Models[a.Model].WaitingSince
		g.Go(func() error {
			defer func() {
				c.mu.Lock()
				delete(c.loading, a.Model)
				c.mu.Unlock()
			}()
			if c.load(ctx, a) {
				c.recordLoadWait(since, now)
			}
			return nil
		})
	}
	_ = g.Wait()
	return true, nil
}

// LoadInFlight reports whether the controller has asked Triton to load the model and Triton
// has not answered yet. Status's observation was taken before the load began, so it shows the
// model as it was; a drain lets such a load finish (it starts no new one), and the inference
// front keeps the requests it holds for that model until it is READY.
func (c *Controller) LoadInFlight(model string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loading[model]
}

// record publishes the observation and plan in metrics and the status.
func (c *Controller) record(cat plan.Catalog, now time.Time, o observation, res plan.Result) {
	resident := 0
	var p0NotReady []string
	for _, m := range cat.Models {
		st := o.obs.Models[m.Name]
		if m.Tier == plan.TierP0 && st.State != plan.StateReady {
			p0NotReady = append(p0NotReady, m.Name)
		}
	}
	busy := 0
	for _, st := range o.obs.Models {
		if st.State == plan.StateReady {
			resident++
			if st.Busy() {
				busy++
			}
		}
	}
	c.m.ResidentModels.Set(float64(resident))
	c.m.BusyModels.Set(float64(busy))
	c.m.AccountedBytes.Set(float64(res.StartBytes))
	if o.usedBytes >= 0 {
		c.m.MeasuredBytes.Set(float64(o.usedBytes))
	} else {
		c.m.MeasuredBytes.Set(float64(o.statsBytes))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	refusedNow := make(map[string]bool, len(res.Refused))
	for _, r := range res.Refused {
		refusedNow[r.Model] = true
		if !c.refused[r.Model] {
			c.m.RefusedLoads.Inc()
			c.deps.Log.Warn("load refused", "model", r.Model, "need_bytes", r.NeedBytes, "reason", r.Reason())
			c.event(true, "LoadRefused", r.Model+": "+r.Reason())
		}
	}
	c.refused = refusedNow
	c.m.Quarantined.Set(float64(len(c.quarantined)))
	c.status = Status{At: now, P0NotReady: p0NotReady, Unplaceable: c.status.Unplaceable, Result: res, Catalog: cat, Observed: o.obs}
	if len(p0NotReady) == 0 && !c.draining.Load() {
		c.m.Ready.Set(1)
	} else {
		c.m.Ready.Set(0)
	}
}

// flagOverPeak reports READY models measured above their admitted peak, once per model.
func (c *Controller) flagOverPeak(cat plan.Catalog, obs plan.Observed) {
	names := make([]string, 0, len(obs.Models))
	for name := range obs.Models {
		names = append(names, name)
	}
	slices.Sort(names)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		st := obs.Models[name]
		m, ok := cat.Model(name)
		peak, hasPeak := m.Peak(c.budget.Profile)
		if !ok || !hasPeak || st.State != plan.StateReady || st.MeasuredBytes <= peak || st.MeasuredBytes <= c.overPeak[name] {
			continue
		}
		c.overPeak[name] = st.MeasuredBytes
		c.m.OverPeak.WithLabelValues(name).Set(float64(st.MeasuredBytes - peak))
		msg := fmt.Sprintf("%s measured %s, above its admitted peak %s for %s; accounted at the measurement from now on",
			name, plan.FormatBytes(st.MeasuredBytes), plan.FormatBytes(peak), c.budget.Profile)
		c.deps.Log.Warn("model above admitted peak", "model", name, "measured_bytes", st.MeasuredBytes, "peak_bytes", peak)
		c.event(true, "OverPeak", msg)
	}
}

// forgetUnwantedUnloads drops the tracked unloads (unloadIssued) of models the plan no longer
// unloads: a later eviction of such a model is a new one, issued at once and counted.
func (c *Controller) forgetUnwantedUnloads(actions []plan.Action) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.unloadIssued {
		if !slices.ContainsFunc(actions, func(a plan.Action) bool { return a.Kind == plan.ActionUnload && a.Model == name }) {
			delete(c.unloadIssued, name)
		}
	}
}

// unloadIssue is an unload the controller issued whose model the index still shows holding
// memory.
type unloadIssue struct {
	first, last time.Time // first and latest issue
	tries       int       // unloads issued (answered OK or not)
	warned      bool      // "had no effect" was logged
	counted     bool      // Triton answered one OK: counted in unloads_total / evictions_total
}

// unload issues a's unload at now unless one was issued for the model less than
// Config.Backoff(tries) ago (Triton answered it, yet the model still holds memory), and
// reports whether it issued one. The first unload Triton accepts is counted (unloads_total,
// evictions_total), logged and recorded as an event; a re-issue is not counted again, and the
// first one warns that the earlier unload had no effect.
func (c *Controller) unload(ctx context.Context, a plan.Action, now time.Time) bool {
	c.mu.Lock()
	u, again := c.unloadIssued[a.Model]
	if again && now.Sub(u.last) < c.cfg.Backoff(u.tries) {
		c.mu.Unlock()
		return false
	}
	c.mu.Unlock()
	start := c.deps.Clock.Now()
	err := c.deps.Triton.Unload(ctx, a.Model, triton.UnloadOptions{})
	took := c.deps.Clock.Now().Sub(start)
	if !again {
		u.first = now
	}
	u.last = now
	u.tries++
	next := c.cfg.Backoff(u.tries)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.unloadIssued[a.Model] = u
		c.deps.Log.Warn("unload failed", "model", a.Model, "reason", a.Reason, "err", err, "tries", u.tries, "next_try_in", next)
		return true
	}
	if again && u.counted {
		if !u.warned {
			u.warned = true
			c.deps.Log.Warn("unload had no effect: Triton answered OK and the model still holds memory; unload issued again",
				"model", a.Model, "state", "still loaded", "since_first", now.Sub(u.first), "tries", u.tries, "next_try_in", next)
		} else {
			c.deps.Log.Debug("unload issued again", "model", a.Model, "tries", u.tries, "next_try_in", next)
		}
		c.unloadIssued[a.Model] = u
		return true
	}
	u.counted = true
	c.unloadIssued[a.Model] = u
	kind := "evict"
	if a.Cause == plan.CauseIdle {
		kind = "idle"
	} else {
		c.m.Evictions.Inc()
	}
	c.m.Unloads.WithLabelValues(kind).Inc()
	c.deps.Log.Info("unload", "model", a.Model, "reason", a.Reason, "accounted_after_bytes", a.AccountedBytes, "took", took)
	c.event(false, "Unload", a.Model+": "+a.Reason)
	return true
}

// recordLoadWait adds the wait of a successful load that requests waited for — from the oldest
// of them (since; zero: none waited) to start, when it was issued — to the decayed mean the
// plan reads as Observed.LoadWait. A failed load records nothing, so a load retried after its
// backoff counts once, when it succeeds.
func (c *Controller) recordLoadWait(since, start time.Time) {
	if since.IsZero() || !start.After(since) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadWait = c.loadWait.Add(start.Sub(since).Seconds(), start, plan.DefaultHalfLife)
	c.m.LoadWait.Set(c.loadWait.Mean())
}

// load issues a and reports whether it succeeded: Triton answered the load OK and its index
// then shows the model READY. Triton answers a load only once it has finished, so a load that
// worked shows READY in the index read right after; one answered OK whose model is not READY
// there is a failed load (backoff, quarantine), logged and recorded as such. An error, or an
// unconfirmed load, is not the model's fault — no backoff — only when Triton restarted or went
// away: ctx ended, or the load failed UNAVAILABLE (or its confirmation could not be read) and
// the index then cannot be read or shows the model never loaded, as a restarted Triton does
// (it records every failed load in its index, UNAVAILABLE with the reason). An UNAVAILABLE
// answer while the index shows the load's outcome (out of memory, say) is a failed load.
func (c *Controller) load(ctx context.Context, a plan.Action) bool {
	start := c.deps.Clock.Now()
	c.deps.Log.Info("load", "model", a.Model, "reason", a.Reason, "accounted_after_bytes", a.AccountedBytes)
	err := c.deps.Triton.Load(ctx, a.Model, triton.LoadOptions{})
	took := c.deps.Clock.Now().Sub(start)
	if ctx.Err() != nil {
		c.deps.Log.Warn("load interrupted", "model", a.Model, "took", took, "err", err)
		return false
	}
	entry, found, idxErr := c.indexEntry(ctx, a.Model)
	forgotten := idxErr != nil || !found || (entry.State == triton.StateUnknown && entry.Reason == "")
	switch {
	case err == nil && idxErr == nil && entry.State == triton.StateReady:
		c.m.Loads.WithLabelValues("success").Inc()
		c.m.LoadSeconds.Observe(took.Seconds())
		c.mu.Lock()
		delete(c.failures, a.Model)
		delete(c.backoffUntil, a.Model)
		c.loadedDigest[a.Model] = a.Digest
		c.mu.Unlock()
		c.deps.Log.Info("loaded", "model", a.Model, "took", took)
		c.event(false, "Loaded", fmt.Sprintf("%s loaded in %s: %s", a.Model, took, a.Reason))
		return true
	case err == nil && idxErr != nil:
		// The load's outcome cannot be read: Triton went away after answering. The next loop
		// observes whatever it is now.
		c.deps.Log.Warn("load unconfirmed: Triton answered OK, its index is unreadable", "model", a.Model, "took", took, "err", idxErr)
		return false
	case errors.Is(err, triton.ErrUnavailable) && forgotten:
		// Triton restarted or went away: not the model's fault, no backoff; the next loop
		// observes the new state.
		c.deps.Log.Warn("load interrupted: Triton restarted or is unreachable", "model", a.Model, "took", took, "err", err,
			"index_err", idxErr)
		return false
	case err == nil:
		err = fmt.Errorf("%w: Triton answered the load OK, but its index then shows the model %s (reason %q), not READY",
			triton.ErrLoadFailed, stateText(entry, found), entry.Reason)
	}
	c.loadFailed(a, took, err)
	return false
}

// indexEntry reads Triton's index and returns name's entry (of its versions, the one in the
// state that holds the most: READY, LOADING, UNLOADING) and whether the index lists it.
func (c *Controller) indexEntry(ctx context.Context, name string) (triton.ModelIndex, bool, error) {
	idx, err := c.deps.Triton.Index(ctx, false)
	if err != nil {
		return triton.ModelIndex{}, false, err
	}
	var got triton.ModelIndex
	found := false
	for _, e := range idx {
		if e.Name != name {
			continue
		}
		r, gr := stateRank(plan.State(e.State)), stateRank(plan.State(got.State))
		// Among entries of one rank, one with a state or a reason says more than a version
		// never loaded: a failed load's UNAVAILABLE entry carries Triton's reason.
		if !found || r > gr || (r == gr && got.State == triton.StateUnknown && got.Reason == "" && (e.State != triton.StateUnknown || e.Reason != "")) {
			got, found = e, true
		}
	}
	return got, found, nil
}

// stateText names an index entry's state for messages.
func stateText(e triton.ModelIndex, found bool) string {
	switch {
	case !found:
		return "missing from the index"
	case e.State == triton.StateUnknown:
		return "never loaded"
	}
	return string(e.State)
}

// loadFailed counts a failed load of a: backoff after Config.Backoff of its consecutive
// failures, quarantine at QuarantineAfter; logged and recorded as a LoadFailed event.
func (c *Controller) loadFailed(a plan.Action, took time.Duration, err error) {
	c.m.Loads.WithLabelValues("failure").Inc()
	c.mu.Lock()
	c.failures[a.Model]++
	n := c.failures[a.Model]
	var msg string
	if n >= c.cfg.QuarantineAfter {
		c.quarantined[a.Model] = true
		delete(c.backoffUntil, a.Model)
		msg = fmt.Sprintf("%s failed to load %d times; quarantined until the sidecar restarts: %v", a.Model, n, err)
	} else {
		wait := c.cfg.Backoff(n)
		c.backoffUntil[a.Model] = c.deps.Clock.Now().Add(wait)
		msg = fmt.Sprintf("%s failed to load (%d of %d before quarantine); next try in %s: %v", a.Model, n, c.cfg.QuarantineAfter, wait, err)
	}
	c.m.Quarantined.Set(float64(len(c.quarantined)))
	c.mu.Unlock()
	c.deps.Log.Warn("load failed", "model", a.Model, "failures", n, "took", took, "detail", msg)
	c.event(true, "LoadFailed", msg)
}
