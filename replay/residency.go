package replay

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/inferscale/inferscale/residency/plan"
)

// Residency policy names.
const (
	ResidencyInferscale = "inferscale"
	ResidencyLRU        = "lru"
	ResidencyLFU        = "lfu"
	ResidencyGDS        = "gds"
	ResidencyBelady     = "belady"
)

// ResidencyPolicies lists the residency policies in table order.
func ResidencyPolicies() []string {
	return []string{ResidencyInferscale, ResidencyLRU, ResidencyLFU, ResidencyGDS, ResidencyBelady}
}

// ResidencyConfig describes the model-residency replay: one GPU whose memory
// budget holds a subset of the trace's models, replayed at each of several
// budgets.
//
// Model sizes are drawn per model from a log-normal with median
// SizeMedianBytes and σ SizeSigma (an assumption: Stable-Diffusion-class
// checkpoints and 7B-class LLMs in fp16 are 2-15 GiB), capped at half the
// smallest budget so every model fits. Load times are drawn per model from
// LoadTimeSamples (GenTD26's measured base-model loads when given) or else
// from a log-normal with GenTD26's median 23 s and p99 52 s. Draws use a PCG
// seeded with Seed; every budget replays the same sizes and load times.
type ResidencyConfig struct {
	// BudgetModels sets the first budget to this many median-sized models; 0
	// picks AutoBudgetModels.
	BudgetModels float64
	// BudgetFactors multiply the first budget: one replay per factor (the
	// default 1 and 2: the budget that binds, and twice it).
	BudgetFactors   []float64
	SizeMedianBytes int64
	SizeSigma       float64
	LoadTimeSamples []time.Duration
	// LoopInterval is the residency controller's (its DefaultConfig: 5 s).
	// Demand is the controller's decayed estimate (plan.DecayedRate), which
	// has no window.
	LoopInterval time.Duration
	// IdleTimeout and MinResidency are the catalog's (its defaults: 10 m and
	// 0, the anti-thrash rule's k × load time applying).
	IdleTimeout, MinResidency time.Duration
	// WakeOnHeld: the controller's loop wakes on the first request held for
	// a model that is not loaded (the sidecar's front, residency/front, holds
	// requests and tells the loop at once); false: the loop sees demand at
	// its next LoopInterval tick. Default true.
	WakeOnHeld bool
	// WakeOnIdle: the loop also wakes when a READY model's last executing
	// request ends while requests wait for a load (the front's OnIdle,
	// residency/front.Deps.OnIdle: a load refused because only busy models
	// held the memory may proceed), at most once per 250 ms as the sidecar
	// paces those wakes; false: it sees that at its next tick. Default true.
	WakeOnIdle bool
	// IgnoreExecTime: replayed requests take no time once their model is
	// READY. Otherwise (the default) a request executes for the trace's own
	// execution time (Request.ExecSeconds; none: no time), and a model with a
	// request executing is busy: no policy evicts it, as Triton does not
	// unload a model with work in flight and the controller never makes a
	// busy model a victim (plan.ModelStatus.Busy). Executions do not contend
	// with one another: the replay models memory, not the GPU's compute.
	IgnoreExecTime bool
	// HoldTimeout is the sidecar front's --hold-timeout (its default: 60 s).
	// The replay holds every request until its model serves it, as though
	// its client sent it again each time the front answered UNAVAILABLE at
	// the hold timeout, and counts its whole wait as stall; the controller
	// sees only what the front holds, so the WaitingSince it plans with and
	// the load wait it measures (plan.Observed.LoadWait) read an age of at
	// most HoldTimeout, and so do the replay's.
	HoldTimeout time.Duration
	Seed        uint64
}

// controllerLoopInterval copies residency.DefaultConfig's LoopInterval: replay links only the
// pure planner (residency/plan), not package residency with its client-go, gRPC and Triton
// dependencies. TestResidencyDefaultsMatchController keeps the copy equal to the controller's.
const controllerLoopInterval = 5 * time.Second

// frontHoldTimeout copies residency/front's default HoldTimeout, for the same reason
// (TestResidencyDefaultsMatchController).
const frontHoldTimeout = 60 * time.Second

// DefaultResidencyConfig returns the documented defaults: an automatic
// budget (AutoBudgetModels) and twice it, median 6 GiB, σ 0.6, and the
// residency package's own controller and catalog defaults.
func DefaultResidencyConfig() ResidencyConfig {
	return ResidencyConfig{
		BudgetModels: 0, BudgetFactors: []float64{1, 2}, SizeMedianBytes: 6 << 30, SizeSigma: 0.6,
		LoopInterval: controllerLoopInterval,
		IdleTimeout:  plan.DefaultIdleTimeout, MinResidency: plan.DefaultMinResidency, WakeOnHeld: true, WakeOnIdle: true,
		HoldTimeout: frontHoldTimeout, Seed: 1,
	}
}

// Validate reports every field out of range.
func (c ResidencyConfig) Validate() error {
	var errs []error
	if !(c.BudgetModels == 0 || c.BudgetModels >= 1 && c.BudgetModels <= 1e4) {
		errs = append(errs, fmt.Errorf("residency BudgetModels = %g: want 0 (auto) or [1, 10000]", c.BudgetModels))
	}
	if len(c.BudgetFactors) == 0 || len(c.BudgetFactors) > 8 {
		errs = append(errs, fmt.Errorf("residency BudgetFactors: %d factors; want 1 to 8", len(c.BudgetFactors)))
	}
	for i, f := range c.BudgetFactors {
		if !(f >= 1 && f <= 100) {
			errs = append(errs, fmt.Errorf("residency BudgetFactors[%d] = %g: want [1, 100]", i, f))
		}
	}
	if c.SizeMedianBytes < 1<<20 || c.SizeMedianBytes > 1<<40 {
		errs = append(errs, fmt.Errorf("residency SizeMedianBytes = %d: want [1 MiB, 1 TiB]", c.SizeMedianBytes))
	}
	if !(c.SizeSigma >= 0 && c.SizeSigma <= 3) {
		errs = append(errs, fmt.Errorf("residency SizeSigma = %g: want [0, 3]", c.SizeSigma))
	}
	if c.LoopInterval < 100*time.Millisecond || c.LoopInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("residency LoopInterval = %v: want [100ms, 10m]", c.LoopInterval))
	}
	if c.HoldTimeout < time.Second || c.HoldTimeout > 30*time.Minute {
		errs = append(errs, fmt.Errorf("residency HoldTimeout = %v: want [1s, 30m], the front's --hold-timeout range", c.HoldTimeout))
	}
	if c.IdleTimeout < 0 || c.MinResidency < 0 {
		errs = append(errs, fmt.Errorf("residency IdleTimeout/MinResidency = %v/%v: want ≥ 0", c.IdleTimeout, c.MinResidency))
	}
	for i, d := range c.LoadTimeSamples {
		if d < 0 {
			errs = append(errs, fmt.Errorf("residency LoadTimeSamples[%d] = %v: want ≥ 0", i, d))
			break
		}
	}
	return errors.Join(errs...)
}

// ResidencyResult is one residency policy's run under one budget.
type ResidencyResult struct {
	Policy string
	// BudgetBytes is the memory budget of this run.
	BudgetBytes int64
	Requests    int
	// Hits are requests whose model was READY on arrival.
	Hits int
	// Loads and BytesLoaded count completed loads.
	Loads       int
	BytesLoaded int64
	// WaitS is the load stall: the total request time spent waiting for
	// loads, seconds; Unserved requests (model never loaded: every policy runs
	// until nothing waits, inferscale at most a week past the trace's end)
	// count until the end and are the requests failed or dropped. No policy
	// evicts a model with a request waiting or executing
	// (ResidencyConfig.IgnoreExecTime), so none fails by an eviction.
	WaitS    float64
	Unserved int
	// Stall splits WaitS by what each waiting request waited on.
	Stall StallSources
	// Refusals counts, for inferscale, each plan's refusals of loads that
	// requests wait for, by cause (one count per model and plan).
	Refusals RefusalCounts
	// Series is resident GiB per sample step.
	Series []ResidentSample
}

// StallSources splits the load stall (ResidencyResult.WaitS) of every
// request by what it waited on, in seconds; the four sum to WaitS.
// OwnLoadS: its model's own load, from the later of the request's arrival
// and the load's start to the load's end. BehindS: other models' loads,
// while the one loader was busy with them. IdleS: the loader idle while the
// request waited — its load not yet started: refused (RefusalCounts), or
// waiting for busy models (requests executing) to free the memory, or the
// controller's pause between steps (250 ms after each), or the loop not yet
// woken. UnservedS: the wait of requests never served, to the end.
type StallSources struct {
	OwnLoadS, BehindS, IdleS, UnservedS float64
}

// RefusalCounts counts inferscale's refusals (plan.Refusal) of loads that
// requests wait for, once per model and plan, by cause: Unworthy (the load
// would evict more worth than it brings), Young (no room, and a READY model
// within its minimum residency — the anti-thrash rule, plan.MinResidency —
// holds memory), NoRoom (no room with no model young: busy, loading or
// higher-ranked models hold it).
type RefusalCounts struct {
	Unworthy, Young, NoRoom int
}

// ResidentSample is the resident memory and model count at TimeS.
type ResidentSample struct {
	TimeS    float64
	GiB      float64
	Resident int
}

// ResidencyComparison holds every policy's run on one trace, at each budget.
type ResidencyComparison struct {
	Trace  string
	Models int
	// Budgets are the memory budgets replayed, ascending.
	Budgets []int64
	// Results: per budget (in Budgets order) one result per policy, in
	// ResidencyPolicies order.
	Results []ResidencyResult
}

// heldSince is when the oldest request the front would hold for m at t
// arrived: its first pending request's arrival, or t − hold when that one has
// been waiting longer (the front answered it at the hold timeout, and its
// client sent it again; ResidencyConfig.HoldTimeout). m has pending requests.
func (m *resModel) heldSince(t, hold float64) float64 { return max(m.pending[0], t-hold) }

type resModel struct {
	size     int64
	load     time.Duration
	state    uint8 // 0 unavailable, 1 queued for load, 2 loading, 3 ready
	since    float64
	lastUsed float64
	count    int
	nextUse  float64
	pending  []float64
	execS    []float64 // each pending request's execution time
	idleAt   []float64 // the loader's cumulative idle seconds at each pending arrival
	ends     []float64 // end times of requests executing or finished (pruned by executing)
	loadAt   float64   // when its current load started
	gds      float64   // GreedyDual-Size's H
	est      plan.DecayedRate
}

const (
	rmOff uint8 = iota
	rmQueued
	rmLoading
	rmReady
)

type resSim struct {
	cfg     ResidencyConfig
	tr      *Trace
	models  []resModel
	budget  int64
	used    int64
	res     ResidencyResult
	loadQ   []int32
	loading int32
	doneAt  float64
	// idleS is the loader's idle seconds up to idleMark (while loading < 0).
	idleS, idleMark float64
}

// idleUntil is the loader's cumulative idle seconds at t (t not before the last load change).
func (s *resSim) idleUntil(t float64) float64 {
	if s.loading >= 0 {
		return s.idleS
	}
	return s.idleS + max(t-s.idleMark, 0)
}

// hold queues a request arriving at t for model m, which is not ready.
func (s *resSim) hold(m *resModel, r Request, t float64) {
	m.pending = append(m.pending, t)
	m.execS = append(m.execS, s.execSeconds(r))
	m.idleAt = append(m.idleAt, s.idleUntil(t))
}

// execSeconds is how long r executes once its model is READY.
func (s *resSim) execSeconds(r Request) float64 {
	if s.cfg.IgnoreExecTime || r.ExecSeconds < 0 {
		return 0
	}
	return float64(r.ExecSeconds)
}

// run starts a request of m executing at t for d seconds.
func (m *resModel) run(t, d float64) {
	if d > 0 {
		m.ends = append(m.ends, t+d)
	}
}

// executing is the number of m's requests executing at t; it forgets those that ended.
func (m *resModel) executing(t float64) int {
	m.ends = slices.DeleteFunc(m.ends, func(e float64) bool { return e <= t })
	return len(m.ends)
}

// freeAt is when m's last executing request ends (−∞: none).
func (m *resModel) freeAt() float64 {
	f := math.Inf(-1)
	for _, e := range m.ends {
		f = math.Max(f, e)
	}
	return f
}

func newResSim(tr *Trace, cfg ResidencyConfig, sizes []int64, loads []time.Duration, budget int64, name string) *resSim {
	s := &resSim{cfg: cfg, tr: tr, budget: budget, loading: -1, doneAt: math.Inf(1)}
	s.models = make([]resModel, len(tr.Models))
	for i := range s.models {
		s.models[i].size, s.models[i].load = sizes[i], loads[i]
		s.models[i].nextUse = math.Inf(1)
	}
	s.res.Policy, s.res.BudgetBytes = name, budget
	return s
}

// finishLoad completes the in-flight load at t.
func (s *resSim) finishLoad(t float64) int32 {
	m := &s.models[s.loading]
	m.state, m.since = rmReady, t
	s.res.Loads++
	s.res.BytesLoaded += m.size
	idleAtStart := s.idleS
	for k, a := range m.pending {
		s.res.WaitS += t - a
		own := t - max(a, m.loadAt)
		idle := idleAtStart - m.idleAt[k]
		s.res.Stall.OwnLoadS += own
		s.res.Stall.IdleS += idle
		s.res.Stall.BehindS += t - a - own - idle
		m.run(t, m.execS[k])
	}
	if len(m.pending) > 0 {
		m.lastUsed = t
	}
	m.pending, m.execS, m.idleAt = m.pending[:0], m.execS[:0], m.idleAt[:0]
	id := s.loading
	s.loading, s.doneAt = -1, math.Inf(1)
	s.idleMark = t
	return id
}

func (s *resSim) startLoad(id int32, t float64) {
	m := &s.models[id]
	m.state = rmLoading
	m.loadAt = t
	s.idleS = s.idleUntil(t)
	s.loading = id
	s.doneAt = t + m.load.Seconds()
}

func (s *resSim) sample(t float64) {
	n := 0
	for _, m := range s.models {
		if m.state == rmReady || m.state == rmLoading {
			n++
		}
	}
	s.res.Series = append(s.res.Series, ResidentSample{TimeS: t, GiB: float64(s.used) / (1 << 30), Resident: n})
}

func (s *resSim) finish(end float64) ResidencyResult {
	for i := range s.models {
		for _, a := range s.models[i].pending {
			s.res.WaitS += end - a
			s.res.Stall.UnservedS += end - a
			s.res.Unserved++
		}
	}
	s.res.Requests = len(s.tr.Requests)
	return s.res
}

// runCache replays an on-demand cache policy (LRU, LFU, GreedyDual-Size,
// Belady): a request for a model that is not loaded queues its load at
// once; one load at a time, first come first served; before a load starts,
// victims are evicted until it fits — never the loading model nor a busy one
// (a request executing). When only busy models' memory would make room, the
// load waits, evicting nothing, until enough of them finish.
//
// GreedyDual-Size (Cao and Irani, USITS 1997) keeps H = L + cost ÷ size per
// model, set on each hit and load with cost the model's load time in
// seconds and size its GiB, evicts the lowest H and raises L to it.
func runCache(tr *Trace, cfg ResidencyConfig, sizes []int64, loads []time.Duration, budget int64, name string, step float64) ResidencyResult {
	s := newResSim(tr, cfg, sizes, loads, budget, name)
	var gdsL float64
	gdsH := func(m *resModel) float64 { return gdsL + m.load.Seconds()/(float64(m.size)/(1<<30)) }
	var next []float64
	if name == ResidencyBelady {
		next = make([]float64, len(tr.Requests))
		last := make([]float64, len(tr.Models))
		for i := range last {
			last[i] = math.Inf(1)
		}
		for i := len(tr.Requests) - 1; i >= 0; i-- {
			r := tr.Requests[i]
			next[i] = last[r.Model]
			last[r.Model] = r.At.Seconds()
		}
	}
	victim := func(t float64) int32 {
		best := int32(-1)
		for id := range s.models {
			m := &s.models[id]
			if m.state != rmReady || m.executing(t) > 0 {
				continue
			}
			if best < 0 {
				best = int32(id)
				continue
			}
			b := &s.models[best]
			switch name {
			case ResidencyLRU:
				if m.lastUsed < b.lastUsed {
					best = int32(id)
				}
			case ResidencyLFU:
				if m.count < b.count || m.count == b.count && m.lastUsed < b.lastUsed {
					best = int32(id)
				}
			case ResidencyGDS:
				if m.gds < b.gds {
					best = int32(id)
				}
			case ResidencyBelady:
				if m.nextUse > b.nextUse {
					best = int32(id)
				}
			}
		}
		return best
	}
	retryAt := math.Inf(1) // a load waits for busy models until then
	startNext := func(t float64) {
		retryAt = math.Inf(1)
		for s.loading < 0 && len(s.loadQ) > 0 {
			id := s.loadQ[0]
			m := &s.models[id]
			free, busyFree := s.budget-s.used, math.Inf(1)
			for v := range s.models {
				if o := &s.models[v]; o.state == rmReady {
					if o.executing(t) == 0 {
						free += o.size
					} else {
						busyFree = math.Min(busyFree, o.freeAt())
					}
				}
			}
			if free < m.size && !math.IsInf(busyFree, 1) {
				retryAt = busyFree // the first busy model to finish frees its memory
				return
			}
			s.loadQ = s.loadQ[1:]
			for s.used+m.size > s.budget {
				v := victim(t)
				if v < 0 {
					break
				}
				s.models[v].state = rmOff
				s.used -= s.models[v].size
				gdsL = max(gdsL, s.models[v].gds)
			}
			if s.used+m.size > s.budget {
				m.state = rmOff // cannot fit: its requests stay unserved
				continue
			}
			s.used += m.size
			m.gds = gdsH(m)
			s.startLoad(id, t)
		}
	}
	nextSample := step
	for i, r := range tr.Requests {
		t := r.At.Seconds()
		for s.doneAt <= t || nextSample <= t || retryAt <= t {
			if retryAt <= s.doneAt && retryAt <= nextSample {
				startNext(retryAt)
			} else if s.doneAt <= nextSample {
				d := s.doneAt
				s.finishLoad(d)
				startNext(d)
			} else {
				s.sample(nextSample)
				nextSample += step
			}
		}
		m := &s.models[r.Model]
		m.count++
		if next != nil {
			m.nextUse = next[i]
		}
		switch m.state {
		case rmReady:
			s.res.Hits++
			m.lastUsed = t
			m.gds = gdsH(m)
			m.run(t, s.execSeconds(r))
		case rmOff:
			m.state = rmQueued
			s.hold(m, r, t)
			s.loadQ = append(s.loadQ, r.Model)
			if math.IsInf(retryAt, 1) {
				startNext(t)
			}
		default:
			s.hold(m, r, t)
		}
	}
	end := tr.Duration().Seconds()
	for !math.IsInf(s.doneAt, 1) || !math.IsInf(retryAt, 1) {
		if retryAt <= s.doneAt {
			startNext(retryAt)
			continue
		}
		d := s.doneAt
		s.finishLoad(d)
		startNext(d)
		end = math.Max(end, d)
	}
	return s.finish(end)
}

func modelName(i int) string { return fmt.Sprintf("m%05d", i) }

// runPlan replays plan.Decide (plan.Plan's actions; its refusals are
// counted in Refusals), the residency controller's pure decision:
// every LoopInterval the controller observes the loaded set, each model's
// expected demand — a plan.DecayedRate of its arrivals (half-life
// plan.DefaultHalfLife), counting requests for models not loaded (as the
// sidecar's front or a gateway query sees them; a model that is not loaded
// has demand only while requests wait for it) — and, as work in flight
// (ModelStatus.Queued), the requests still waiting for a load; it plans and
// carries out the plan's first step as the controller's Step does: its
// leading unloads, or else its first load, which the step waits for (one at
// a time); after a step that acted the next follows after 250 ms, else after
// LoopInterval, or (WakeOnHeld) at the first request held for a model that is
// not loaded, or (WakeOnIdle) while requests wait, when a READY model's last
// executing request ends, whichever comes first. A request for a model that is
// not READY waits until its load completes. A model
// whose decayed count fell below 2⁻¹⁰ (ten half-lives without a request)
// and has nothing waiting reads as no demand. Planning is skipped at ticks
// where nothing changed for 30 s and nothing waits (no arrival, no load
// completion): every estimate decays at the same rate, so the ranking, and
// the plan, would be the same but for a minimum residency running out,
// which the 30 s re-plan catches.
func runPlan(tr *Trace, cfg ResidencyConfig, sizes []int64, loads []time.Duration, budget int64, step float64) (ResidencyResult, error) {
	s := newResSim(tr, cfg, sizes, loads, budget, ResidencyInferscale)
	cat := plan.Catalog{IdleTimeout: cfg.IdleTimeout, MinResidency: cfg.MinResidency}
	const profile = "replay"
	names := make([]string, len(tr.Models))
	ids := make(map[string]int, len(tr.Models))
	for i := range tr.Models {
		names[i] = modelName(i)
		ids[names[i]] = i
		cat.Models = append(cat.Models, plan.Model{Name: names[i], Tier: plan.TierP1, Digest: fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(tr.Models[i]))),
			PeakMemoryBytes: map[string]int64{profile: sizes[i]}, LoadTime: loads[i]})
	}
	if err := cat.Validate(); err != nil {
		return ResidencyResult{}, fmt.Errorf("residency catalog: %w", err)
	}
	bud := plan.Budget{Profile: profile, TotalBytes: budget}
	if err := bud.Validate(); err != nil {
		return ResidencyResult{}, err
	}
	const halfLife = plan.DefaultHalfLife
	const negligible = 1.0 / 1024
	loop := cfg.LoopInterval.Seconds()
	hold := cfg.HoldTimeout.Seconds()
	var loadWait plan.DecayedMean // the controller's: from a load's oldest held request to its start
	active := map[int32]bool{}    // models with a non-negligible estimate or waiting requests
	// ready holds the READY models. Every model a step observes, plans or wakes on is READY
	// or active (a model with requests waiting is active), so a step costs what those cost,
	// not what the catalog does: every step looped over all models, and 10,000 models a
	// week past a trace's end did not finish in minutes.
	ready := map[int32]bool{}
	finishLoad := func(t float64) {
		ready[s.finishLoad(t)] = true
	}
	var seen []int32 // a step's models, READY or active, in catalog order
	i := 0
	n := len(tr.Requests)
	end := tr.Duration().Seconds()
	lastPlan, changed := math.Inf(-1), true
	lastIdleWake := math.Inf(-1) // the sidecar passes the front's OnIdle on at most once per settle
	nextSample := step
	const settle = 0.25 // the controller's pause after a step that acted (min(LoopInterval, 250 ms))
	for t := 0.0; ; {
		// Arrivals before t.
		for ; i < n && tr.Requests[i].At.Seconds() < t; i++ {
			r := tr.Requests[i]
			at := r.At.Seconds()
			for s.doneAt <= at {
				finishLoad(s.doneAt)
				changed = true
			}
			m := &s.models[r.Model]
			m.count++
			m.est = m.est.Add(1, t0.Add(time.Duration(at*1e9)), halfLife)
			active[r.Model] = true
			changed = true
			if m.state == rmReady {
				s.res.Hits++
				m.lastUsed = at
				m.run(at, s.execSeconds(r))
			} else {
				s.hold(m, r, at)
			}
		}
		for s.doneAt <= t {
			finishLoad(s.doneAt)
			changed = true
		}
		for nextSample <= t {
			s.sample(nextSample)
			nextSample += step
		}
		waiting := false
		for m := range active {
			waiting = waiting || len(s.models[m].pending) > 0
		}
		// As the cache policies, run until nothing waits (a week past the end at most: a
		// request still waiting then is counted unserved).
		if i >= n && s.loading < 0 && (!waiting || t > end+7*86400) {
			return s.finish(math.Max(end, t)), nil
		}
		next := t + loop
		if changed || waiting || t-lastPlan >= 30 {
			now := t0.Add(time.Duration(t * 1e9))
			demand := plan.Demand{}
			for m := range active {
				rm := &s.models[m]
				if rm.est.CRF*math.Exp2(-now.Sub(rm.est.At).Seconds()/halfLife.Seconds()) < negligible && len(rm.pending) == 0 {
					delete(active, m)
					continue
				}
				if rm.state != rmOff || len(rm.pending) > 0 {
					// A model that is not loaded is wanted only while requests wait for it
					// (on-demand admission; its history still sets its worth).
					demand[names[m]] = rm.est.Rate(now, halfLife)
				}
			}
			seen = seen[:0]
			for m := range ready {
				seen = append(seen, m)
			}
			for m := range active {
				if !ready[m] {
					seen = append(seen, m)
				}
			}
			slices.Sort(seen)
			obs := plan.Observed{Models: map[string]plan.ModelStatus{}, LoadWait: time.Duration(loadWait.Mean() * 1e9)}
			for _, id := range seen {
				m := &s.models[id]
				switch m.state {
				case rmReady:
					obs.Models[names[id]] = plan.ModelStatus{State: plan.StateReady, LoadedSince: t0.Add(time.Duration(m.since * 1e9)), LastUsed: t0.Add(time.Duration(m.lastUsed * 1e9)),
						Executing: m.executing(t)}
				default:
					if len(m.pending) > 0 { // held for the load, as the sidecar's front holds them
						obs.Models[names[id]] = plan.ModelStatus{State: plan.StateUnavailable, Queued: len(m.pending),
							WaitingSince: t0.Add(time.Duration(m.heldSince(t, hold) * 1e9))}
					}
				}
			}
			// Plan sees only models that are loaded or in demand, in catalog order: it skips
			// every other catalog entry anyway (not wanted, not resident), so the answer is the
			// same and a 1,350-model catalog costs what its working set costs.
			sub := cat
			sub.Models = sub.Models[:0:0]
			for _, id := range seen {
				name := names[id]
				if _, ok := obs.Models[name]; ok || demand[name] > 0 {
					sub.Models = append(sub.Models, cat.Models[id])
				}
			}
			dec := plan.Decide(sub, bud, obs, demand, now)
			actions := dec.Actions
			young := 0 // 1: a young model holds memory, −1: none, 0: not yet looked at
			for _, r := range dec.Refused {
				switch {
				case r.Reload:
				case r.Unworthy:
					s.res.Refusals.Unworthy++
				default:
					if young == 0 {
						young = -1
						if youngHolds(sub, obs, now) {
							young = 1
						}
					}
					if young > 0 {
						s.res.Refusals.Young++
					} else {
						s.res.Refusals.NoRoom++
					}
				}
			}
			lastPlan, changed = t, false
			// As the controller's step: the plan's leading unloads, or else its first load,
			// which the step waits for.
			for k, a := range actions {
				id, ok := ids[a.Model]
				if !ok {
					return ResidencyResult{}, fmt.Errorf("plan named unknown model %q", a.Model)
				}
				m := &s.models[id]
				if a.Kind == plan.ActionUnload {
					if m.state == rmReady && m.executing(t) > 0 {
						return ResidencyResult{}, fmt.Errorf("plan unloaded %s with %d requests executing", a.Model, m.executing(t))
					}
					if m.state == rmReady {
						m.state = rmOff
						s.used -= m.size
						delete(ready, int32(id))
					}
					next, changed = t+settle, true
					continue
				}
				if k == 0 && m.state == rmOff && s.used+m.size <= s.budget {
					if len(m.pending) > 0 {
						loadWait = loadWait.Add(t-m.heldSince(t, hold), now, halfLife)
					}
					s.used += m.size
					s.startLoad(int32(id), t)
					next = s.doneAt + settle
				}
				break
			}
		}
		asleep := next == t+loop // the step did not act: the loop sleeps until a tick or a wake
		idleWake := false
		if cfg.WakeOnIdle && waiting && asleep {
			// While requests wait, a model going idle wakes the loop: it may be the victim
			// the waiting load needs (the controller never evicts a busy model).
			for id := range active { // a model executing had an arrival within ten half-lives
				if m := &s.models[id]; m.state == rmReady && m.executing(t) > 0 {
					if w := math.Max(math.Nextafter(m.freeAt(), math.Inf(1)), lastIdleWake+settle); w < next {
						next = w
						idleWake = true
					}
				}
			}
		}
		if cfg.WakeOnHeld && asleep {
			// The first request held for a model that is not loaded wakes the loop.
			for k := i; k < n && tr.Requests[k].At.Seconds() < next; k++ {
				if m := &s.models[tr.Requests[k].Model]; m.state == rmOff && len(m.pending) == 0 {
					next = math.Nextafter(tr.Requests[k].At.Seconds(), math.Inf(1))
					idleWake = false
					break
				}
			}
		}
		if idleWake {
			lastIdleWake = next
		}
		t = next
	}
}

// MaxResidencyModels bounds the models of a trace the residency replay
// takes: three times the largest shared multi-model trace's (the Azure
// Functions sample, 1,350), as MaxTraceSpan is three times the longest
// shared trace. A plan step costs what the models loaded or waiting cost
// (plan.Decide ranks them all), and there is about one step per load, so a
// trace whose models all wait for their first load costs models² : 1,000,
// 2,000 and 4,000 models each requested twice 0.2 s apart took 3, 14 and
// 56 s for inferscale at one budget on the shared 2-core machine, and
// 10,000 did not finish in minutes.
const MaxResidencyModels = 3 * 1350

// CompareResidency runs plan.Plan, LRU, LFU, GreedyDual-Size and Belady's
// furthest-next-use on the trace at each budget of cfg. A trace with more
// than MaxResidencyModels models is an error wrapping ErrTooLarge.
func CompareResidency(tr *Trace, cfg ResidencyConfig) (*ResidencyComparison, error) {
	if len(tr.Requests) == 0 {
		return nil, ErrEmptyTrace
	}
	if err := checkResidencyModels(len(tr.Models)); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x52657369))
	bm := cfg.BudgetModels
	if bm == 0 {
		bm = AutoBudgetModels(tr)
	}
	rc := &ResidencyComparison{Trace: tr.Name, Models: len(tr.Models)}
	for _, f := range cfg.BudgetFactors {
		rc.Budgets = append(rc.Budgets, int64(bm*f*float64(cfg.SizeMedianBytes)))
	}
	slices.Sort(rc.Budgets)
	rc.Budgets = slices.Compact(rc.Budgets)
	sizes := make([]int64, len(tr.Models))
	loads := make([]time.Duration, len(tr.Models))
	for i := range sizes {
		sz := float64(cfg.SizeMedianBytes) * math.Exp(cfg.SizeSigma*rng.NormFloat64())
		sizes[i] = min(int64(sz), rc.Budgets[0]/2)
		if len(cfg.LoadTimeSamples) > 0 {
			loads[i] = cfg.LoadTimeSamples[rng.IntN(len(cfg.LoadTimeSamples))]
		} else {
			// GenTD26: median 23 s, p99 52 s → σ = ln(52/23)/2.326.
			loads[i] = time.Duration(23e9 * math.Exp(math.Log(52.0/23)/2.326*rng.NormFloat64()))
		}
		loads[i] = max(loads[i], time.Millisecond)
	}
	step := math.Max(60, math.Ceil(tr.Duration().Seconds()/1500/60)*60)
	for _, budget := range rc.Budgets {
		r, err := runPlan(tr, cfg, sizes, loads, budget, step)
		if err != nil {
			return nil, err
		}
		rc.Results = append(rc.Results, r)
		for _, p := range ResidencyPolicies()[1:] {
			rc.Results = append(rc.Results, runCache(tr, cfg, sizes, loads, budget, p, step))
		}
	}
	return rc, nil
}

// checkResidencyModels refuses more than MaxResidencyModels models.
func checkResidencyModels(n int) error {
	if n > MaxResidencyModels {
		return fmt.Errorf("residency replay: %w: %d models; want 2 to %d (MaxResidencyModels, three times the Azure Functions sample's 1,350)", ErrTooLarge, n, MaxResidencyModels)
	}
	return nil
}

// Result returns the run of policy at budget, and whether there is one.
func (rc *ResidencyComparison) Result(policy string, budget int64) (ResidencyResult, bool) {
	for _, r := range rc.Results {
		if r.Policy == policy && r.BudgetBytes == budget {
			return r, true
		}
	}
	return ResidencyResult{}, false
}

// WriteTable writes the residency comparison as Markdown: one row per
// budget and policy, with inferscale's load stall as a ratio to LRU's and
// to Belady's at the same budget (the targets: ≤ 0.7 and ≤ 1.3).
func (rc *ResidencyComparison) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	gib := func(v int64) string { return fnum(float64(v)/(1<<30), 1) }
	budgets := make([]string, len(rc.Budgets))
	for i, v := range rc.Budgets {
		budgets[i] = gib(v)
	}
	fmt.Fprintf(&b, "Residency on %s: %d models, memory budgets %s GiB, one load at a time (sizes and load times drawn per model, seeded; see docs/replay.md).\n\n", rc.Trace, rc.Models, strings.Join(budgets, " and "))
	b.WriteString("| budget GiB | policy | loads | hit ratio | load-stall hours | stall ÷ LRU | stall ÷ Belady | mean wait per miss | GiB loaded | failed or dropped |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rc.Results {
		hit := float64(r.Hits) / float64(max(1, r.Requests))
		miss := r.Requests - r.Hits
		mw := math.NaN()
		if miss > 0 {
			mw = r.WaitS / float64(miss)
		}
		ratio := func(base string) string {
			o, ok := rc.Result(base, r.BudgetBytes)
			if !ok || o.WaitS <= 0 {
				return "–"
			}
			return fnum(r.WaitS/o.WaitS, 2)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %d |\n", gib(r.BudgetBytes), r.Policy, r.Loads, fnum(hit, 4), fnum(r.WaitS/3600, 2),
			ratio(ResidencyLRU), ratio(ResidencyBelady), fwait(mw), fnum(float64(r.BytesLoaded)/(1<<30), 0), r.Unserved)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Section renders the residency comparison for the HTML report; the chart
// shows the smallest budget.
func (rc *ResidencyComparison) Section() (Section, error) {
	var tb bytes.Buffer
	if err := rc.WriteTable(&tb); err != nil {
		return Section{}, err
	}
	s := tableSection("Residency: "+rc.Trace, tb.String())
	budget := rc.Budgets[0]
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Resident memory over time (GiB), budget %s GiB", fnum(float64(budget)/(1<<30), 1))
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "GiB resident or loading"
	p.Legend.Top = true
	for i, r := range rc.Results {
		if r.BudgetBytes != budget {
			continue
		}
		pts := make(plotter.XYs, len(r.Series))
		for k, v := range r.Series {
			pts[k] = plotter.XY{X: v.TimeS / 3600, Y: v.GiB}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return Section{}, err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	bl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(budget) / (1 << 30)}, {X: rc.endHours(), Y: float64(budget) / (1 << 30)}})
	if err != nil {
		return Section{}, err
	}
	bl.Color = color.Black
	bl.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(bl)
	p.Legend.Add("budget", bl)
	ch, err := svgPlot(p, 26, 10)
	if err != nil {
		return Section{}, err
	}
	s.Charts = append(s.Charts, ch)
	return s, nil
}

func (rc *ResidencyComparison) endHours() float64 {
	var e float64
	for _, r := range rc.Results {
		if n := len(r.Series); n > 0 {
			e = math.Max(e, r.Series[n-1].TimeS/3600)
		}
	}
	return math.Max(e, 1e-3)
}

// tableSection parses a "paragraph, blank line, Markdown table" block.
func tableSection(heading, md string) Section {
	lines := slices.DeleteFunc(bytesLines(md), func(s string) bool { return s == "" })
	s := Section{Heading: heading, Intro: lines[0]}
	for i, l := range lines[1:] {
		cells := splitRow(l)
		switch i {
		case 0:
			s.Header = cells
		case 1:
		default:
			s.Rows = append(s.Rows, cells)
		}
	}
	return s
}

// AutoBudgetModels sizes the residency budget to half the trace's mean
// working set — distinct models requested per 10-minute window, over
// windows with any request — and at least 4 models, so that the budget
// binds on every trace without making it hopeless.
func AutoBudgetModels(tr *Trace) float64 {
	seen := map[int32]bool{}
	var win time.Duration = -1
	var sum, n float64
	for _, r := range tr.Requests {
		w := r.At / (10 * time.Minute)
		if w != win {
			if len(seen) > 0 {
				sum += float64(len(seen))
				n++
			}
			clear(seen)
			win = w
		}
		seen[r.Model] = true
	}
	sum += float64(len(seen))
	n++
	return math.Max(4, math.Round(sum/n/2))
}

// youngHolds reports whether a READY model of obs is within its minimum residency at now.
func youngHolds(cat plan.Catalog, obs plan.Observed, now time.Time) bool {
	for name, st := range obs.Models {
		if m, ok := cat.Model(name); ok && st.State == plan.StateReady && now.Sub(st.LoadedSince) < plan.MinResidency(cat, m) {
			return true
		}
	}
	return false
}
