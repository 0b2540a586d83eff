package plan

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// State is a model's state in Triton's repository index.
type State string

// Triton's model states (RepositoryIndexResponse.ModelIndex.state).
const (
	StateReady       State = "READY"
	StateLoading     State = "LOADING"
	StateUnloading   State = "UNLOADING"
	StateUnavailable State = "UNAVAILABLE"
)

// HoldsMemory reports whether a model in state s is accounted: Triton holds its memory while it
// is loading, ready, or unloading (until it reports UNAVAILABLE).
func (s State) HoldsMemory() bool {
	return s == StateReady || s == StateLoading || s == StateUnloading
}

// ModelStatus is what was observed about one model in one loop.
type ModelStatus struct {
	// State from Triton's repository index; a model missing from the index is UNAVAILABLE.
	State State
	// Reason is Triton's reason text (e.g. "unloaded", an out-of-memory message).
	Reason string
	// LoadedSince is when the model was first seen READY (zero: unknown, treated as long ago).
	LoadedSince time.Time
	// LastUsed is the model's last inference (Triton's statistics last_inference); zero if never.
	LastUsed time.Time
	// MeasuredBytes is the model's measured GPU memory (Triton's memory_usage or NVML); for a
	// model that is not loaded, the last measurement above its admitted peak, if any. A model
	// is accounted at the larger of its admitted peak and MeasuredBytes.
	MeasuredBytes int64
	// Quarantined models failed to load too often; Plan never loads them.
	Quarantined bool
	// BackoffUntil: Plan does not load the model before this time (a failed load backs off).
	BackoffUntil time.Time
	// OverPeak is set once the model was measured above its admitted peak (reported, kept).
	OverPeak bool
	// Digest is the digest of the copy Triton serves, when known (the controller loaded it);
	// "" when unknown. A READY model whose Digest differs from the catalog's is reloaded.
	Digest string
	// Queued is the number of requests waiting for the model: in Triton's queue
	// (nv_inference_pending_request_count) for a loaded model, held elsewhere (a gateway) for
	// one that is not loaded. Negative reads as 0.
	Queued int
	// Executing is the number of requests executing (the controller's in-flight accounting).
	// Negative reads as 0.
	Executing int
	// WaitingSince is when the oldest request still waiting for the model arrived (zero:
	// unknown or none). Waiting work ages: see Decide.
	WaitingSince time.Time
}

// Busy reports whether the model has work in flight (queued or executing requests): a busy
// model is never a victim.
func (s ModelStatus) Busy() bool { return s.Queued > 0 || s.Executing > 0 }

// InFlight is Queued + Executing, negatives read as 0.
func (s ModelStatus) InFlight() int { return max(s.Queued, 0) + max(s.Executing, 0) }

// Observed is one loop's view of Triton and the device.
type Observed struct {
	// Models by name: every model in Triton's index, plus catalog models with controller
	// flags (backoff, quarantine). Missing models are UNAVAILABLE.
	Models map[string]ModelStatus
	// UnaccountedBytes is device memory in use beyond what the models account for: memory an
	// unload has not returned yet, leaks, other processes. Counted like the reserve.
	UnaccountedBytes int64
	// LoadWait is how long recent on-demand loads waited before they started: from the oldest
	// request held for the model to the load's start, a DecayedMean over recent loads (the
	// controller measures it; zero: none measured). A miss costs it on top of the load time
	// (Worth). Negative reads as 0.
	LoadWait time.Duration
}

// Held is what is held outside Triton for one model (the sidecar's inference front): the number
// of requests and when the oldest of them arrived. For a model that holds no memory they are its
// Queued work and WaitingSince.
type Held struct {
	Requests int
	Since    time.Time
}

// Demand is each model's expected request rate in requests per second: the decayed estimate of
// its arrivals (DecayedRate.Rate). Work in flight is not in it: Decide reads it from
// ModelStatus. Missing, negative, NaN and infinite rates read as 0.
type Demand map[string]float64

func (d Demand) rate(model string) float64 {
	r := d[model]
	if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		return 0
	}
	return r
}

// ActionKind is Load or Unload.
type ActionKind string

// Action kinds.
const (
	ActionLoad   ActionKind = "Load"
	ActionUnload ActionKind = "Unload"
)

// Cause is why the planner chose an action, for counting (Reason is for people).
type Cause string

// Action causes.
const (
	// CauseIdle: an unload of a model unused for its IdleTimeout (only with Budget.FreeIdle).
	CauseIdle Cause = "idle"
	// CauseEvict: an unload that makes room for higher-ranked models.
	CauseEvict Cause = "evict"
	// CauseDemand: a load of a P1/P2 model with demand.
	CauseDemand Cause = "demand"
	// CausePinned: a load of a P0 (pinned) model.
	CausePinned Cause = "pinned"
	// CauseDigest: a reload of a READY model whose catalog digest changed.
	CauseDigest Cause = "digest"
)

// Action is one step of a plan.
type Action struct {
	Kind  ActionKind
	Model string
	// Cause is why the step was chosen.
	Cause Cause
	// Reason explains the step with the numbers behind it.
	Reason string
	// AccountedBytes is the accounted memory once this step (and every step before it) has
	// completed; never above the budget's TotalBytes when the plan started within budget.
	AccountedBytes int64
	// PeakBytes is the highest accounted memory while the step runs: the accounted memory
	// before an unload, after a load, and before plus the swap overhead during a reload.
	PeakBytes int64
	// Digest is the catalog digest a load brings in (loads and reloads only).
	Digest string
	// At is the time the plan was made (Plan's now); Apply stamps LoadedSince with it.
	At time.Time
}

// Refusal is a wanted load that Plan did not start. Either it does not fit even after every
// allowed eviction: NeedBytes is more than BudgetBytes − FixedBytes − KeptBytes, the room left by
// fixed memory and the models ranked above it (Busy names the models with work in flight that
// hold part of FixedBytes and are never evicted). Or it does not pay for itself (Unworthy): its
// Worth is not above the Worth of the models of its tier it would evict (VictimWorth, Victims).
//
// For a deferred reload (Reload set), NeedBytes is the swap overhead and FixedBytes the
// accounted memory the reload would start from.
type Refusal struct {
	Model       string
	NeedBytes   int64
	FixedBytes  int64
	KeptBytes   int64
	BudgetBytes int64
	Reload      bool
	// Busy lists the busy models in FixedBytes, by name (shared between refusals: read only).
	Busy []BusyModel
	// Unworthy is set when the load would fit but evicts more worth than it brings; Worth and
	// VictimWorth are in request-seconds per second (Worth).
	Unworthy    bool
	Worth       float64
	VictimWorth float64
	Victims     []string
}

// BusyModel is a loaded model with work in flight, named in refusals.
type BusyModel struct {
	Name              string
	Queued, Executing int
	Bytes             int64
}

// Reason explains the refusal with its numbers (built on demand: plans run every loop, and most
// refusals are never printed).
func (r Refusal) Reason() string {
	switch {
	case r.Reload:
		return fmt.Sprintf("reload deferred: the swap needs %s more; accounted %s leaves %s of %s",
			FormatBytes(r.NeedBytes), FormatBytes(r.FixedBytes), FormatBytes(max(r.BudgetBytes-r.FixedBytes, 0)), FormatBytes(r.BudgetBytes))
	case r.Unworthy:
		return fmt.Sprintf("refused: worth %.3g does not exceed %.3g of %s, which it would evict",
			r.Worth, r.VictimWorth, strings.Join(r.Victims, ", "))
	}
	s := fmt.Sprintf("refused: needs %s; fixed %s + higher-ranked %s leave %s of %s",
		FormatBytes(r.NeedBytes), FormatBytes(r.FixedBytes), FormatBytes(r.KeptBytes),
		FormatBytes(max(r.BudgetBytes-r.FixedBytes-r.KeptBytes, 0)), FormatBytes(r.BudgetBytes))
	if len(r.Busy) > 0 {
		names := make([]string, len(r.Busy))
		for i, b := range r.Busy {
			names[i] = fmt.Sprintf("%s (%d queued, %d executing, %s)", b.Name, b.Queued, b.Executing, FormatBytes(b.Bytes))
		}
		s += "; waiting for busy models, never evicted with work in flight: " + strings.Join(names, ", ")
	}
	return s
}

// Result is Decide's full answer: the plan, the loads it had to refuse, and the accounting.
type Result struct {
	Actions []Action
	Refused []Refusal
	// StartBytes is the accounted memory before the plan; BudgetBytes the budget's TotalBytes.
	StartBytes  int64
	BudgetBytes int64
}

const gib = float64(1 << 30)

// Value is what keeping model m resident is worth per unit of memory:
//
//	value = Worth ÷ admitted peak (GiB),
//	Worth = expected demand (req/s) × (load wait + load time) (s)
//
// — the request-seconds of load stall avoided per second and GiB: GreedyDual-Size's cost ÷ size
// (Cao and Irani, "Cost-aware WWW proxy caching algorithms", USENIX USITS 1997) with the cost a
// miss imposes (the wait for the loader, Observed.LoadWait, then the load time — the measured
// fetch latency, as their GD-Size(latency) takes it) weighted by the decayed demand
// (DecayedRate, in the LRFU family),
// as GreedyDual-Size-Frequency weights it by frequency. It is the density a knapsack greedy ranks
// by. A model without an entry for profile is worth 0. Decide adds work in flight to Worth (see
// Decide).
func Value(m Model, profile string, rateRPS float64, loadWait time.Duration) float64 {
	return density(m, profile, Worth(m, rateRPS, loadWait))
}

func density(m Model, profile string, worth float64) float64 {
	peak, ok := m.PeakMemoryBytes[profile]
	if !ok || peak <= 0 {
		return 0
	}
	return worth / (float64(peak) / gib)
}

// worth is Decide's worth of m: Worth at rate, plus its work in flight, plus the age of its
// oldest waiting request in load times.
func worth(m Model, rate float64, st ModelStatus, loadWait time.Duration, now time.Time) float64 {
	w := Worth(m, rate, loadWait) + float64(st.InFlight())
	if st.InFlight() > 0 && !st.WaitingSince.IsZero() && now.After(st.WaitingSince) {
		w += now.Sub(st.WaitingSince).Seconds() / m.LoadTime.Seconds()
	}
	return w
}

// Worth is the load stall that keeping m resident avoids, in request-seconds per second:
// expected demand (req/s) × (loadWait + load time) (s) — each future request would wait for the
// loader and then one load. A load pays for itself when its Worth exceeds the Worth of the
// models it evicts. A negative loadWait reads as 0.
func Worth(m Model, rateRPS float64, loadWait time.Duration) float64 {
	return rateRPS * (max(loadWait, 0).Seconds() + m.LoadTime.Seconds())
}

// ReserveBytes is the reserve Plan keeps back: the larger of the catalog's and the budget's.
func ReserveBytes(cat Catalog, b Budget) int64 { return max(cat.ReserveBytes, b.ReserveBytes) }

// Accounted returns the accounted memory of obs: the reserve, the unaccounted device memory,
// and every READY, LOADING and UNLOADING model at the larger of its admitted peak and its
// measured bytes, plus the swap overhead of a model being reloaded. Models outside the catalog
// or without a peak for the budget's profile count at their measured bytes.
func Accounted(cat Catalog, b Budget, obs Observed) int64 {
	total := ReserveBytes(cat, b) + max(obs.UnaccountedBytes, 0)
	for name, st := range obs.Models {
		if st.State.HoldsMemory() {
			total += residentBytes(cat, b.Profile, name, st)
		}
	}
	return total
}

func residentBytes(cat Catalog, profile, name string, st ModelStatus) int64 {
	m, ok := cat.Model(name)
	if !ok {
		return max(st.MeasuredBytes, 0)
	}
	peak, ok := m.Peak(profile)
	if !ok {
		return max(st.MeasuredBytes, 0)
	}
	// No swap overhead here: a reload's old + new copy exist only while the controller's Load
	// call runs (Triton's index keeps the model READY meanwhile, and the loop observes again
	// only after the call returns); Action.PeakBytes accounts it when the reload is planned.
	return max(peak, st.MeasuredBytes)
}

// Plan returns the ordered load and unload actions that bring Triton's loaded set to the best
// set that fits the budget. It is Decide(...).Actions; see Decide.
func Plan(cat Catalog, budget Budget, obs Observed, demand Demand, now time.Time) []Action {
	return Decide(cat, budget, obs, demand, now).Actions
}

// contender is a model whose residency the plan may change.
type contender struct {
	model    *Model // into the catalog
	resident bool
	stale    bool // READY with another digest than the catalog's: reload if kept
	bytes    int64
	value    float64
	worth    float64
	// excluded: a load that does not pay for itself; victims and victimWorth say why.
	excluded    bool
	victims     []string
	victimWorth float64
}

// Decide is the residency decision, a pure function of its arguments.
//
// Fixed memory — the reserve, unaccounted device memory, LOADING and UNLOADING models, P0
// models that are READY, models younger than their MinResidency (k × load time, the anti-thrash
// rule), busy models (queued or executing requests: never a victim), and models Plan does not
// manage (outside the catalog or without a peak for the profile) — is kept. Idle models are not
// unloaded for idleness unless budget.FreeIdle is set: then P1/P2 models with no demand and no
// work in flight, unused for their IdleTimeout (measured from the later of LastUsed and
// LoadedSince), are unloaded. Every other READY model and every wanted model that is not loaded
// (P0 always; P1/P2 with demand > 0; never quarantined or backing off, never without a peak for
// the profile) is ranked by tier (P0, P1, P2), then by value (highest first), then by name, and
// admitted greedily while the accounted memory stays within budget.TotalBytes. READY models
// left out are evicted — so a victim is always below every load it makes room for.
//
// A model's worth here is Worth(m, rate, loadWait) plus its work in flight (ModelStatus.InFlight: queued and
// executing requests, or requests held for a model that is not loaded): a request that waits
// accrues stall at one second per second until its model serves it, so each counts 1 req·s/s,
// while a future arrival costs the load wait and one load time at its expected rate. Waiting work also ages: the
// oldest waiting request adds its wait in load times (WaitingSince), so that, as with Highest
// Response Ratio Next (Brinch Hansen, "Short-term scheduling in multiprogramming systems", SOSP
// 1971), a model whose requests wait gains rank until it is served and none starves behind a
// busier one. Its value is worth ÷ GiB. A model with requests held for it is wanted even before
// its rate shows them.
//
// Admission pays for itself: walking the admitted P1/P2 loads in rank order, each takes free
// memory first and then the evictions, lowest-ranked first; a load whose Worth does not exceed
// the Worth of the victims of its own tier it takes is excluded (an Unworthy Refusal) and the
// greedy is run again without it, so that its victims stay. Wanted models left out are refused;
// a refusal names the busy models that hold memory.
//
// A kept READY model whose Digest differs from the catalog's (a new artifact) is reloaded:
// Triton keeps the old copy serving while the new one loads, so the reload holds the model's
// SwapOverheadBytes on top until the swap, and it is emitted only when that fits (otherwise it
// is a deferred Refusal with Reload set).
//
// Actions are ordered: idle unloads; evictions that bring an over-budget start within budget;
// then the loads — P0 first, then by worth ÷ load time, highest first: Smith's rule (W. E.
// Smith, "Various optimizers for single-stage production", Naval Research Logistics Quarterly
// 3, 1956), which minimises the total weighted waiting of jobs on one machine, here the stall
// behind one loader — each preceded by the evictions (lowest-ranked first) it needs, so that a
// model is unloaded only when its memory is about to be used; then reloads (by name). When the
// start is within budget, the
// accounted memory during and after every step is too (Action.PeakBytes, AccountedBytes). Ties
// break by name; the result is deterministic, and planning again on Apply(obs, actions) at the
// same time and demand yields no actions.
func Decide(cat Catalog, budget Budget, obs Observed, demand Demand, now time.Time) Result {
	res := Result{StartBytes: Accounted(cat, budget, obs), BudgetBytes: budget.TotalBytes}
	fixed := ReserveBytes(cat, budget) + max(obs.UnaccountedBytes, 0)
	var idle []Action
	var cs []contender
	var staleFixed []contender // fixed READY models to reload
	var busy []BusyModel

	for name, st := range obs.Models {
		if _, ok := cat.Model(name); !ok && st.State.HoldsMemory() {
			fixed += max(st.MeasuredBytes, 0)
		}
	}
	for i := range cat.Models {
		m := &cat.Models[i]
		st, ok := obs.Models[m.Name]
		if !ok {
			st.State = StateUnavailable
		}
		peak, placeable := m.Peak(budget.Profile)
		rate := demand.rate(m.Name)
		switch {
		case st.State == StateReady:
			bytes := residentBytes(cat, budget.Profile, m.Name, st)
			young := !st.LoadedSince.IsZero() && now.Sub(st.LoadedSince) < MinResidency(cat, *m)
			stale := placeable && st.Digest != "" && st.Digest != m.Digest && !st.Quarantined && !now.Before(st.BackoffUntil)
			if st.Busy() {
				busy = append(busy, BusyModel{Name: m.Name, Queued: max(st.Queued, 0), Executing: max(st.Executing, 0), Bytes: bytes})
			}
			if !placeable || m.Tier == TierP0 || young || st.Busy() {
				fixed += bytes
				if stale {
					staleFixed = append(staleFixed, contender{model: m, resident: true, bytes: bytes, stale: true})
				}
				continue
			}
			lastActive := st.LastUsed
			if st.LoadedSince.After(lastActive) {
				lastActive = st.LoadedSince
			}
			if timeout := IdleTimeout(cat, *m); budget.FreeIdle && rate == 0 && now.Sub(lastActive) >= timeout {
				since := "never used"
				if !lastActive.IsZero() {
					since = "unused for " + now.Sub(lastActive).Round(time.Second).String()
				}
				idle = append(idle, Action{Kind: ActionUnload, Model: m.Name, Cause: CauseIdle, At: now,
					Reason: fmt.Sprintf("idle: %s %s, %s ≥ idle timeout %s (freeIdle)", m.Tier, m.Name, since, timeout)})
				continue
			}
			w := worth(*m, rate, st, obs.LoadWait, now)
			cs = append(cs, contender{model: m, resident: true, bytes: bytes, value: density(*m, budget.Profile, w),
				worth: w, stale: stale})
		case st.State.HoldsMemory(): // LOADING, UNLOADING: in flight, left alone.
			fixed += residentBytes(cat, budget.Profile, m.Name, st)
		default:
			wanted := m.Tier == TierP0 || rate > 0 || st.Busy()
			if !placeable || !wanted || st.Quarantined || now.Before(st.BackoffUntil) {
				continue
			}
			w := worth(*m, rate, st, obs.LoadWait, now)
			cs = append(cs, contender{model: m, bytes: max(peak, st.MeasuredBytes), value: density(*m, budget.Profile, w), worth: w})
		}
	}
	slices.SortFunc(cs, func(a, b contender) int {
		return cmp.Or(cmp.Compare(a.model.Tier.rank(), b.model.Tier.rank()),
			cmp.Compare(b.value, a.value), strings.Compare(a.model.Name, b.model.Name))
	})

	admitted := make([]bool, len(cs))
	// Each round excludes at least one load, so there are at most len(cs)+1 rounds; in practice
	// one or two.
	for range len(cs) + 1 {
		used := fixed
		for i, c := range cs {
			admitted[i] = false
			if !c.excluded && used+c.bytes <= budget.TotalBytes {
				admitted[i] = true
				used += c.bytes
			}
		}
		if !excludeUnworthy(cs, admitted, fixed, budget.TotalBytes) {
			break
		}
	}
	// A load excluded as unworthy is admitted after all when it fits in what the plan frees
	// anyway (the victims that worthier loads evict): it then evicts nothing for itself, and
	// leaving it out would only make the next plan, once those evictions are done, admit it —
	// planning again after applying must yield nothing.
	used := fixed
	for i, c := range cs {
		if admitted[i] {
			used += c.bytes
		}
	}
	for i := range cs {
		if c := &cs[i]; c.excluded && used+c.bytes <= budget.TotalBytes {
			c.excluded, c.victims, c.victimWorth = false, nil, 0
			admitted[i] = true
			used += c.bytes
		}
	}

	// Prefix sums over the ranking for the reasons: bytes kept and loads admitted ahead of i.
	p := newPrefix(cs, admitted, fixed, budget.TotalBytes)
	acct := res.StartBytes
	for _, a := range idle {
		st := obs.Models[a.Model]
		a.PeakBytes = acct
		acct -= residentBytes(cat, budget.Profile, a.Model, st)
		a.AccountedBytes = acct
		res.Actions = append(res.Actions, a)
	}
	slices.SortFunc(busy, func(a, b BusyModel) int { return strings.Compare(a.Name, b.Name) })
	var loads []contender
	for i, c := range cs {
		switch {
		case c.resident:
		case admitted[i]:
			loads = append(loads, c)
		case c.excluded:
			res.Refused = append(res.Refused, Refusal{Model: c.model.Name, NeedBytes: c.bytes, FixedBytes: fixed, KeptBytes: p.kept[i],
				BudgetBytes: budget.TotalBytes, Unworthy: true, Worth: c.worth, VictimWorth: c.victimWorth, Victims: c.victims})
		default:
			res.Refused = append(res.Refused, Refusal{Model: c.model.Name, NeedBytes: c.bytes,
				FixedBytes: fixed, KeptBytes: p.kept[i], BudgetBytes: budget.TotalBytes, Busy: busy})
		}
	}
	// Every admitted load fits with all the others, so any order stays within budget.
	slices.SortStableFunc(loads, func(a, b contender) int {
		return cmp.Or(cmp.Compare(min(a.model.Tier.rank(), 1), min(b.model.Tier.rank(), 1)),
			cmp.Compare(b.worth/b.model.LoadTime.Seconds(), a.worth/a.model.LoadTime.Seconds()),
			strings.Compare(a.model.Name, b.model.Name))
	})
	// Evictions, lowest-ranked first, as late as possible: first those that bring an
	// over-budget start back within budget, then before each load those it needs.
	var victims []int
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].resident && !admitted[i] {
			victims = append(victims, i)
		}
	}
	evict := func() {
		i := victims[0]
		victims = victims[1:]
		c := cs[i]
		res.Actions = append(res.Actions, Action{Kind: ActionUnload, Model: c.model.Name, Cause: CauseEvict, At: now, AccountedBytes: acct - c.bytes,
			PeakBytes: acct, Reason: p.evictReason(cs, i, fixed, budget.TotalBytes)})
		acct -= c.bytes
	}
	for acct > budget.TotalBytes && len(victims) > 0 {
		evict()
	}
	for _, c := range loads {
		for acct+c.bytes > budget.TotalBytes && len(victims) > 0 {
			evict()
		}
		acct += c.bytes
		cause := CauseDemand
		if c.model.Tier == TierP0 {
			cause = CausePinned
		}
		res.Actions = append(res.Actions, Action{Kind: ActionLoad, Model: c.model.Name, Cause: cause, At: now, AccountedBytes: acct,
			PeakBytes: acct, Digest: c.model.Digest, Reason: loadReason(c, demand.rate(c.model.Name))})
	}
	for len(victims) > 0 { // a victim larger than what the loads needed of it
		evict()
	}
	// Reloads of kept models whose digest changed, by name, last: the swap holds
	// SwapOverheadBytes more until the old copy goes, so it runs only where that fits beside
	// every other step, and leaves the accounted memory as it was.
	stale := staleFixed
	for i, c := range cs {
		if c.stale && admitted[i] {
			stale = append(stale, c)
		}
	}
	slices.SortFunc(stale, func(a, b contender) int { return strings.Compare(a.model.Name, b.model.Name) })
	for _, c := range stale {
		swap := c.model.SwapOverheadBytes
		if acct+swap > budget.TotalBytes {
			res.Refused = append(res.Refused, Refusal{Model: c.model.Name, NeedBytes: swap, FixedBytes: acct,
				BudgetBytes: budget.TotalBytes, Reload: true})
			continue
		}
		res.Actions = append(res.Actions, Action{Kind: ActionLoad, Model: c.model.Name, Cause: CauseDigest, At: now, AccountedBytes: acct,
			PeakBytes: acct + swap, Digest: c.model.Digest,
			Reason: fmt.Sprintf("reload: digest %s → %s; the swap holds %s more", shortDigest(obs.Models[c.model.Name].Digest), shortDigest(c.model.Digest), FormatBytes(swap))})
	}
	return res
}

// excludeUnworthy attributes the evictions of one greedy round to the loads that need their
// memory and excludes every P1/P2 load that does not pay for itself: its Worth is not above the
// Worth of the victims of its own tier whose memory it takes (a lower tier always yields, as
// the operator ranked it). Loads take free memory first, then evictions lowest-ranked first;
// evictions that only bring an over-budget start back within budget are nobody's. It reports
// whether it excluded a load.
func excludeUnworthy(cs []contender, admitted []bool, fixed, budget int64) bool {
	free := budget - fixed
	var victims []int // lowest-ranked first
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].resident {
			free -= cs[i].bytes
			if !admitted[i] {
				victims = append(victims, i)
			}
		}
	}
	if len(victims) == 0 {
		return false
	}
	// Evictions first cover an over-budget start; then each load takes what it needs.
	var left int64 // bytes of victims[v-1] not yet taken
	v := 0
	take := func(need int64, each func(j int)) {
		for need > 0 {
			if left == 0 {
				if v == len(victims) {
					return
				}
				left = cs[victims[v]].bytes
				if each != nil {
					each(victims[v])
				}
				v++
			}
			n := min(need, left)
			need -= n
			left -= n
		}
	}
	if free < 0 {
		take(-free, nil)
		free = 0
	}
	excluded := false
	for i := range cs {
		c := &cs[i]
		if c.resident || !admitted[i] {
			continue
		}
		need := c.bytes
		if n := min(need, free); n > 0 {
			free -= n
			need -= n
		}
		var worth float64
		var names []string
		take(need, func(j int) {
			if cs[j].model.Tier == c.model.Tier {
				worth += cs[j].worth
				names = append(names, cs[j].model.Name)
			}
		})
		if c.model.Tier != TierP0 && len(names) > 0 && c.worth <= worth {
			c.excluded, c.victims, c.victimWorth = true, names, worth
			excluded = true
		}
	}
	return excluded
}

// prefix holds, for each rank i, the bytes admitted above it, the bytes of loads admitted above
// it, and the number of such loads (loads[k] is the rank of the k-th admitted load); and
// noLoads[i], fixed plus the residents above i that the same first-fit admission keeps when
// nothing is loaded.
type prefix struct {
	kept, loadBytes, noLoads []int64
	nLoads                   []int
	loads                    []int
}

func newPrefix(cs []contender, admitted []bool, fixed, budget int64) prefix {
	p := prefix{kept: make([]int64, len(cs)+1), loadBytes: make([]int64, len(cs)+1), noLoads: make([]int64, len(cs)+1),
		nLoads: make([]int, len(cs)+1)}
	p.noLoads[0] = fixed
	for i, c := range cs {
		p.kept[i+1], p.loadBytes[i+1], p.nLoads[i+1], p.noLoads[i+1] = p.kept[i], p.loadBytes[i], p.nLoads[i], p.noLoads[i]
		if c.resident && p.noLoads[i]+c.bytes <= budget {
			p.noLoads[i+1] += c.bytes
		}
		if admitted[i] {
			p.kept[i+1] += c.bytes
			if !c.resident {
				p.loadBytes[i+1] += c.bytes
				p.nLoads[i+1]++
				p.loads = append(p.loads, i)
			}
		}
	}
	return p
}

func (p prefix) evictReason(cs []contender, i int, fixed, budget int64) string {
	c := cs[i]
	n := p.nLoads[i]
	// With nothing loaded the victim would still not fit (the start is over budget): the
	// loads are not what evicts it.
	if n == 0 || p.noLoads[i]+c.bytes > budget {
		return fmt.Sprintf("evict: %s value %.3g lowest; over budget: fixed %s + higher-ranked models leave no room for %s within %s",
			c.model.Tier, c.value, FormatBytes(fixed), FormatBytes(c.bytes), FormatBytes(budget))
	}
	const show = 3
	names := make([]string, 0, show)
	for _, j := range p.loads[:min(n, show)] {
		names = append(names, cs[j].model.Name)
	}
	list := strings.Join(names, ", ")
	if n > show {
		list = fmt.Sprintf("%s and %d more", list, n-show)
	}
	return fmt.Sprintf("evict: %s value %.3g lowest; need %s for %s", c.model.Tier, c.value, FormatBytes(p.loadBytes[i]), list)
}

// shortDigest abbreviates algorithm:hex to algorithm:first 12 hex digits.
func shortDigest(d string) string {
	if alg, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return d
}

func loadReason(c contender, rate float64) string {
	if c.model.Tier == TierP0 {
		return fmt.Sprintf("load: P0 pinned; needs %s", FormatBytes(c.bytes))
	}
	return fmt.Sprintf("load: %s demand %.3g req/s, value %.3g; needs %s", c.model.Tier, rate, c.value, FormatBytes(c.bytes))
}

// FormatBytes renders a byte count for reasons and logs: MiB with one decimal below 1 GiB, GiB
// with two above.
func FormatBytes(b int64) string {
	if b < 1<<30 && b > -(1<<30) {
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2fGiB", float64(b)/gib)
}

// Apply returns obs after every action has completed: a loaded model is READY with
// LoadedSince = the action's At and Digest = the action's; a reloaded (already READY) model
// keeps its LoadedSince and takes the new Digest; an unloaded model is UNAVAILABLE with reason
// "unloaded". Other fields (LastUsed, MeasuredBytes, flags) are kept. obs is not modified.
func Apply(obs Observed, actions []Action) Observed {
	out := obs // every field carries over; only the models change
	out.Models = maps.Clone(obs.Models)
	if out.Models == nil {
		out.Models = make(map[string]ModelStatus, len(actions))
	}
	for _, a := range actions {
		st := out.Models[a.Model]
		switch a.Kind {
		case ActionLoad:
			if st.State != StateReady {
				st.LoadedSince = a.At
			}
			st.State, st.Reason = StateReady, ""
			if a.Digest != "" {
				st.Digest = a.Digest
			}
		case ActionUnload:
			st.State, st.Reason, st.LoadedSince, st.Digest = StateUnavailable, "unloaded", time.Time{}, ""
		}
		out.Models[a.Model] = st
	}
	return out
}
