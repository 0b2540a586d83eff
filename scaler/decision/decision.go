package decision

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inferscale/inferscale/internal/errtext"
)

// ErrNoData is carried by a Recommendation when no demand term could be
// computed: every configured signal is out (missing past staleAfter, or
// never valid). The server answers Unavailable so that KEDA's fallback acts.
var ErrNoData = errors.New("no usable signal data")

// errActivityNeedsReady is why a usable activity alone gives no answer: N_act = ⌈R·A/A_target⌉
// needs the ready replicas R.
const errActivityNeedsReady = "activity sizes the pool only with the ready replicas known (readyQuery, or the ScaledObject and its Deployment or StatefulSet in Kubernetes)"

// Sample is the raw result of one poll of one signal's query.
type Sample struct {
	// Value is the query's result (the poller reduces a vector to one number).
	Value float64
	// Empty is true when the query returned no series. Empty is not zero
	// unless the signal is in zeroWhenAbsent or is a per-pod series while no
	// replica is ready.
	Empty bool
	// Err is the poll's error, if any (Prometheus down, query failed).
	Err error
	// EvaluatedAt is when the query was evaluated; zero means never polled.
	EvaluatedAt time.Time
	// Waiting is true while the query is due but waits for a slot of its Prometheus address
	// (prom.Result.Waiting: --query-concurrency queries to that address in flight); a signal
	// not usable then says so in the reason.
	Waiting bool
}

// Observation is everything Recommend sees of the world at one instant.
type Observation struct {
	// Samples holds the latest poll result per signal, indexed by Signal.
	Samples [NumSignals]Sample
	// ReadyReplicas is R from Kubernetes (the scale target's ready replicas)
	// when ReadyKnown; otherwise R comes from readyQuery if configured.
	ReadyReplicas int32
	ReadyKnown    bool
	// CurrentReplicas is the scale target's spec.replicas when CurrentKnown;
	// it seeds the history of a ScaledObject seen for the first time.
	CurrentReplicas int32
	CurrentKnown    bool
	// MinReplicas and MaxReplicas are the ScaledObject's bounds when
	// BoundsKnown; otherwise the policy's minReplicas/maxReplicas apply.
	MinReplicas, MaxReplicas int32
	BoundsKnown              bool
	// ColdStart is H as measured from the scale target's recent pod starts
	// (creation to Ready) when ColdStartKnown; the policy's coldStart
	// overrides it.
	ColdStart      time.Duration
	ColdStartKnown bool
}

// Point is a run of consecutive evaluations in the sliding history with the
// same raw value N_raw and the same answer; AtUnixNano is the time of the
// run's latest evaluation. A run belongs to a window when its latest
// evaluation does, which is exactly when any of its evaluations does, so the
// windows' minimum and maximum are those of the unmerged history. A steady
// pool keeps one or two points instead of one per refresh (16 bytes each:
// 10,000 ScaledObjects × minutes of history).
type Point struct {
	AtUnixNano  int64 // Unix nanoseconds
	Raw, Result int32
}

// LastGood is a signal's last valid value and the time it was evaluated.
// A zero read from an empty per-pod series while no replica is ready is a
// valid value too, but it does not show that the series exists:
// State.Measured records that, and only a measured signal is held or out.
type LastGood struct {
	Value float64
	At    time.Time // zero: no valid value yet
}

// State is what Recommend remembers between calls. The zero State is a
// ScaledObject never seen before (or a freshly started scaler). Recommend
// never modifies the State it is given; it returns a new one.
type State struct {
	// FirstSeen is the time of the first evaluation.
	FirstSeen time.Time
	// Seeded is true once the history was seeded with SeedReplicas at SeedAt.
	Seeded       bool
	SeedReplicas int32
	SeedAt       time.Time
	// History holds recent evaluations, oldest first, pruned to the longest
	// of the up-window, the down-window and the step-down period.
	History []Point
	// Rates holds the fresh rate samples of the last forecastWindow(H),
	// oldest first, at most maxRatePoints, for the λ_H forecast.
	Rates []RatePoint
	// Good holds the last valid value per signal.
	Good [NumSignals]LastGood
	// Measured is true per signal once it produced a valid sample of its
	// own: a present, valid value, or an empty result of a signal in
	// zeroWhenAbsent. A zero read from an empty per-pod series while no
	// replica is ready does not count, so a series that never exists (Triton
	// or vLLM without a DCGM exporter) is "never" valid, reported and left
	// out, not out and degraded once replicas are ready.
	Measured [NumSignals]bool
	// LastReplicas and LastActive are the previous answer (HasLast false
	// before the first answer with data).
	LastReplicas int32
	LastActive   bool
	HasLast      bool
	// LastGoodResult is the last result computed without degradation; a
	// degraded decision never goes below it.
	LastGoodResult int32
}

// Term names what decided a Recommendation's number.
type Term string

// Demand terms and shaping limits.
const (
	TermNone       Term = "none"            // no demand term (ErrNoData)
	TermSLO        Term = "slo"             // N_slo at the offered load λ_H·S
	TermSLORunning Term = "slo-running"     // N_slo at the offered load of the running requests
	TermDrain      Term = "drain"           // N_drain = ⌈(max(λS, running) + Q_H·S/D)/(kρ)⌉
	TermCap        Term = "utilization-cap" // N_cap = ⌈a/(kρ)⌉, targetUtilization set
	TermOccupancy  Term = "occupancy"       // no service time: ⌈(running + Q)/k⌉
	TermActivity   Term = "activity"        // N_act = ⌈R·A/A_target⌉, activity the only signal
	TermWarm       Term = "warm"            // demand 0, the warm pool is the whole answer
	TermMin        Term = "min"             // clamped up to the lower bound
	TermMax        Term = "max"             // clamped down to the upper bound
	TermBurst      Term = "burst"           // N_raw ≥ burstFactor·R: up-window skipped
	TermUpWindow   Term = "up-window"
	TermDownWindow Term = "down-window"
	TermStepDown   Term = "step-down"
	TermSeed       Term = "seed"             // restart: held at the seed replica count
	TermDegraded   Term = "degraded-floor"   // degraded: held at the last good result
	TermSaturated  Term = "saturation-guard" // engine saturated: no scale-down
)

// SignalStatus says how a signal entered a decision.
type SignalStatus string

// Signal statuses.
const (
	StatusUnconfigured SignalStatus = "unconfigured"
	StatusFresh        SignalStatus = "fresh" // a valid sample within staleAfter
	StatusZero         SignalStatus = "zero"  // empty, read as zero (zeroWhenAbsent, or per-pod with no ready replica)
	StatusHeld         SignalStatus = "held"  // invalid now; the last good value stands in
	StatusOut          SignalStatus = "out"   // invalid, and the last good value is older than staleAfter
	StatusNever        SignalStatus = "never" // never produced a valid sample of its own (State.Measured): reported and left out
)

// Usable reports whether a signal with this status entered the decision: fresh, read as zero,
// or held at its last good value.
func (s SignalStatus) Usable() bool { return s == StatusFresh || s == StatusZero || s == StatusHeld }

// Recommendation is Recommend's answer.
type Recommendation struct {
	// At is the evaluation time.
	At time.Time
	// Replicas is the desired replica count to report to KEDA (metric value
	// with target 1).
	Replicas int32
	// Raw is N_raw = clamp(N_demand + warm, min, max) before windows.
	Raw int32
	// Term is the demand term that won (slo, slo-running, drain,
	// utilization-cap, occupancy, activity, warm).
	Term Term
	// Limit is what shaped Replicas away from the formula's answer ("" when
	// Replicas == Raw straight from the formula): a window, the burst, the
	// step-down bound, the seed, a guard, or min/max whenever the final clamp
	// to the bounds changed the answer those left (then Replicas may equal an
	// unclamped Raw: a held 10 clamped to max 2 with Raw 2 is "max").
	Limit Term
	// NSLO (N_slo), NDrain, NCap, NOcc, NAct, Warm and Demand are the
	// formula's terms; -1 when not computed (signal missing). N_slo above
	// the upper bound reads bound + 1.
	NSLO, NDrain, NCap, NOcc, NAct, Warm, Demand int32
	// LambdaH is λ_H, the forecast arrival rate (req/s); -1 without a rate.
	LambdaH float64
	// Load is a, the offered load N_slo was sized for (Erlangs); -1 when
	// not computed.
	Load float64
	// ServiceTime is S as used (seconds; 0 unknown) and ServiceSource
	// where it came from: "measured", "replicaThroughput" or "".
	ServiceTime   float64
	ServiceSource string
	// Dispersion is I as used: the measured index of dispersion, at least 1
	// (1 when not measured).
	Dispersion float64
	// Horizon is H as used and HorizonSource where it came from:
	// "coldStart", "measured" or "default".
	Horizon       time.Duration
	HorizonSource string
	// PWait is the predicted P(wait > T) at Replicas; -1 when not computed.
	PWait float64
	// Saturated is true when the engine's activity is at its ceiling: the
	// pool does not scale down.
	Saturated bool
	// Amplification is the retry amplification rate ÷ unique rate; -1 when
	// not computed (no unique rate). RetryCapped is true when it exceeded
	// retryBudget and the load terms were sized on unique rate × retryBudget.
	Amplification float64
	RetryCapped   bool
	// Values are the values used per signal (last good value when held).
	Values [NumSignals]float64
	// Status per signal.
	Status [NumSignals]SignalStatus
	// Ready is R as used (-1 unknown).
	Ready int32
	// Active is KEDA's 0 ↔ 1 answer (IsActive).
	Active bool
	// Degraded is true when a signal that once produced a valid sample
	// (State.Measured) is out, or when rate ÷ unique rate passes
	// MaxAmplification (a unique rate used as if missing; the reason's note
	// says so).
	Degraded bool
	// Reason explains the number for logs and humans.
	Reason string
	// Err wraps ErrNoData when no demand term could be computed; Replicas
	// and Active then repeat the previous answer for information only.
	Err error
}

// ceilEps is ⌈x⌉ tolerant of floating error: divisions such as 7/(1·0.7)
// give 10.000000000000002, which must count as 10 replicas, not 11. A value
// within one part in 10⁹ above an integer rounds down to that integer.
// +Inf (and NaN, which the decision never produces) give +Inf: a term
// saturates, it never turns into a small number.
func ceilEps(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return math.Inf(1)
	}
	return math.Ceil(x - 1e-9*math.Max(1, math.Abs(x)))
}

// mulSat is x·y for non-negative factors with 0·Inf = 0: a zero factor
// (no load, no warm fraction) stays zero, anything else saturates at +Inf.
func mulSat(x, y float64) float64 {
	if x == 0 || y == 0 {
		return 0
	}
	return x * y
}

// clampReplicas converts a non-negative float replica count to int32
// within [lo, hi]. NaN counts as +Inf (hi): an undefined number never
// scales a pool down.
func clampReplicas(x float64, lo, hi int32) int32 {
	switch {
	case math.IsNaN(x) || x > float64(hi):
		return hi
	case x < float64(lo):
		return lo
	}
	return int32(x)
}

// Recommend is the scaler's decision, a pure function of its arguments (see
// DESIGN.md "The decision" and "Missing and bad data", and the package
// documentation for the formulas and their sources):
//
//	λ_H      = forecastRate(rate history, H)                  (λ missing: no rate load)
//	S        = measured service time, else k/μ (replicaThroughput), else unknown
//	a        = max(λ_H·S, running)                            offered load, Erlangs
//	N_slo    = least N with P(W > T) ≤ 1 − q for N·k servers  (queue.go)
//	N_drain  = ⌈(max(λ·S, running) + Q_H·S/D) / (k·ρ)⌉         (ρ = targetUtilization, 1 unset)
//	Q_H      = Q + max(0, λ − R·k/S)·H  while Q > 0             the backlog when a replica ordered now is ready
//	N_cap    = ⌈a / (k·ρ)⌉                                    (targetUtilization set)
//	N_occ    = ⌈(running + Q) / k⌉                            (S unknown)
//	N_act    = ⌈R · A / A_target⌉                             (activity the only signal)
//	N_demand = max of the terms that could be computed
//	warm     = max(warmReplicas, ⌈warmFraction · N_demand⌉)
//	N_raw    = clamp(N_demand + warm, min, max)
//
// Every term saturates at +Inf and NaN never reaches a clamp, so a huge
// signal answers the upper bound.
//
// Shaping, with cur the previous answer (or the seed): a burst (N_raw ≥
// burstFactor · R and N_raw > cur) answers N_raw; otherwise, as the HPA's
// stabilization does, up = min of raw over the up-window, down = max of raw
// (and the seed) over the down-window; up > cur scales up to up, down < cur
// scales down to down, otherwise cur stays. A step down is bounded: within
// any scaleDownPeriod the answer falls by at most max(1,
// ⌊scaleDownMaxFraction · highest answer in that period⌋). While the
// engine's activity is at its ceiling the answer does not fall below cur
// (the saturation guard). A degraded decision does not go below the last
// non-degraded answer.
//
// Active is true when warmReplicas > 0, when a usable signal is above its
// activation threshold, during the first down-window after the first sight
// unless the seed is known to be 0, and when degraded after an active answer.
func Recommend(p Policy, obs Observation, prev State, now time.Time) (Recommendation, State) {
	st := prev
	st.History = make([]Point, 0, len(prev.History)+1) // rebuilt below; prev's slices are never written
	if st.FirstSeen.IsZero() {
		st.FirstSeen = now
	}
	lo, hi := p.MinReplicas, p.MaxReplicas
	if obs.BoundsKnown {
		lo, hi = obs.MinReplicas, obs.MaxReplicas
	}
	if lo < 0 {
		lo = 0
	}
	if hi < lo {
		hi = lo
	}
	rec := Recommendation{At: now, NSLO: -1, NDrain: -1, NCap: -1, NOcc: -1, NAct: -1, Warm: -1, Demand: -1, Ready: -1,
		Term: TermNone, LambdaH: -1, Load: -1, PWait: -1, Dispersion: 1, Amplification: -1}

	// Ready replicas: Kubernetes first, then readyQuery.
	rKnown, r := obs.ReadyKnown, obs.ReadyReplicas
	// notes say why a sample that was a number was not used (evalSignal); nil on the usual path.
	var notes []string
	note := func(n string) {
		if n != "" {
			notes = append(notes, n)
		}
	}
	var n string
	rec.Status[SignalReady], rec.Values[SignalReady], n = evalSignal(p, SignalReady, obs.Samples[SignalReady], &st, false, now)
	if !obs.ReadyKnown {
		note(n) // with Kubernetes' R the ready query is not used
	}
	// A fractional ready count (an average over series) is rounded to the nearest replica:
	// the status shows the value read (ready=2.5) and the reason the count used (R=3).
	if !rKnown && rec.Status[SignalReady].Usable() {
		rKnown, r = true, int32(math.Round(rec.Values[SignalReady])) // at most MaxReadyReplicas
	}
	if rKnown {
		if r < 0 {
			r = 0
		}
		rec.Ready = r
	}
	noneReady := rKnown && r == 0
	for _, s := range AllSignals() {
		if s != SignalReady {
			rec.Status[s], rec.Values[s], n = evalSignal(p, s, obs.Samples[s], &st, noneReady, now)
			note(n)
		}
	}

	// Seed: the first replica count known within the first down-window.
	if !st.Seeded && now.Sub(st.FirstSeen) < p.ScaleDownWindow {
		seed, ok := int32(0), false
		if obs.CurrentKnown {
			seed, ok = obs.CurrentReplicas, true
		}
		if rKnown && (!ok || r > seed) {
			seed, ok = r, true
		}
		if ok {
			st.Seeded, st.SeedReplicas, st.SeedAt = true, seed, now
		}
	}
	inGuard := now.Sub(st.FirstSeen) < p.ScaleDownWindow
	if st.Seeded {
		inGuard = now.Sub(st.SeedAt) < p.ScaleDownWindow
	}

	// Inputs of the queueing terms.
	usable := func(s Signal) (float64, bool) { return rec.Values[s], rec.Status[s].Usable() }
	lambda, lambdaOK := usable(SignalRate)
	queue, queueOK := usable(SignalQueue)
	running, runningOK := usable(SignalRunning)
	// Retries do not buy headroom: with a unique rate, the arrival rate
	// (and the forecast λ_H made from it) counts at most unique ×
	// retryBudget. The queue and the running requests are not scaled: an
	// engine may serve an attempt whose caller has left (Triton finishes
	// what it started, and a queued attempt stays queued unless its backend
	// supports cancellation; vLLM aborts a request whose client
	// disconnected), so that work can occupy slots whether or not anyone
	// waits. Scaling it down too left the backlog undrained, every attempt
	// timed out and the storm sustained itself: in `go run ./cmd/replay
	// retry` at 1b9e107, 3 × 3 layered retries went from 12.0 GPU-hours and
	// 93.7 % of unique requests answered in time to 96.1 GPU-hours and 0.7 %
	// (docs/replay.md, "Clients that retry"). A missing unique rate never
	// caps, nor does a zero one while the rate is positive (0 × retryBudget
	// would size a loaded pool to nothing), nor one so small that rate ÷
	// unique rate passes MaxAmplification (30 ÷ 1e-9, or 30 ÷ 1e-308, which
	// overflows): that is no measured amplification but a unique-rate query
	// that counts next to nothing, and capped it sized the pool on unique ×
	// retryBudget ≈ 0, one replica. It counts as a missing unique rate: no
	// amplification, no cap, and degraded (not below the last good answer),
	// with a note.
	capFactor, lambdaRaw, ampRefused := 1.0, lambda, false
	if unique, ok := usable(SignalUniqueRate); ok && lambdaOK && lambda > 0 {
		switch a := lambda / unique; {
		case unique == 0:
			rec.Amplification = math.Inf(1)
		case !(a <= MaxAmplification):
			ampRefused = true
			note("uniqueRate=" + strconv.FormatFloat(unique, 'g', 4, 64) + " refused: rate ÷ unique rate = " + strconv.FormatFloat(a, 'g', 4, 64) +
				", above " + strconv.FormatFloat(MaxAmplification, 'g', -1, 64) + " (decision.MaxAmplification): no retry policy sends a request that often; not capped, as without a unique rate")
		default:
			rec.Amplification = a
			if budget := math.Max(1, p.RetryBudget); a > budget {
				rec.RetryCapped = true
				capFactor = mulSat(unique, budget) / lambda
				lambda *= capFactor
			}
		}
	}
	k := float64(max(p.ReplicaConcurrency, 1))
	if v, ok := usable(SignalServiceTime); ok && v > 0 {
		rec.ServiceTime, rec.ServiceSource = v, "measured"
	} else if p.ReplicaThroughput > 0 {
		rec.ServiceTime, rec.ServiceSource = k/p.ReplicaThroughput, "replicaThroughput"
	}
	if v, ok := usable(SignalDispersion); ok {
		// The correction is for arrivals burstier than Poisson: a reading below 1 (the
		// differenced preset reads 0 while most of its span was idle, and a Poisson
		// stream reads below 1 half the time) never credits smoother-than-Poisson
		// arrivals with fewer replicas.
		rec.Dispersion = max(1, v)
	}
	rec.Horizon, rec.HorizonSource = DefaultColdStart, "default"
	switch {
	case p.ColdStart > 0:
		rec.Horizon, rec.HorizonSource = p.ColdStart, "coldStart"
	case obs.ColdStartKnown && obs.ColdStart > 0:
		rec.Horizon, rec.HorizonSource = obs.ColdStart, "measured"
	}
	st.Rates = appendRate(prev.Rates, rec.Status[SignalRate], obs.Samples[SignalRate], now, rec.Horizon)
	slo := sloOf(p)

	// Degradation: a signal that was valid once is out. The ready query
	// counts only while it is the source of R; service time and dispersion
	// only while there is load to size (and, for service time, no
	// replicaThroughput to fall back on).
	loaded := (lambdaOK && lambda > 0) || (queueOK && queue > 0) || (runningOK && running > 0)
	var outs, nevers []string
	for _, s := range AllSignals() {
		switch {
		case s == SignalReady && obs.ReadyKnown,
			s == SignalServiceTime && (!loaded || rec.ServiceSource != ""),
			s == SignalDispersion && !loaded:
			continue
		}
		switch rec.Status[s] {
		case StatusOut:
			outs = append(outs, s.String())
		case StatusNever:
			nevers = append(nevers, s.String())
		}
	}
	rec.Degraded = len(outs) > 0 || ampRefused

	// Demand terms.
	demand, haveDemand := 0.0, false
	take := func(n float64, t Term) int32 {
		if !haveDemand || n > demand {
			demand, rec.Term = n, t
		}
		haveDemand = true
		return clampReplicas(n, 0, math.MaxInt32)
	}
	sv := rec.ServiceTime
	var model queueModel
	rho := p.TargetUtilization
	capOn := rho > 0 && rho <= 1
	if !capOn {
		rho = 1
	}
	aRate, aRun := -1.0, -1.0
	if lambdaOK {
		rec.LambdaH = forecastRate(st.Rates, now, lambdaRaw, rec.Horizon, slo.z)
		if rec.Status[SignalRate] != StatusFresh || len(st.Rates) == 0 {
			rec.LambdaH = forecastRate(nil, now, lambdaRaw, rec.Horizon, slo.z) // held: no new point to extrapolate from
		}
		rec.LambdaH *= capFactor
		if sv > 0 {
			aRate = mulSat(rec.LambdaH, sv)
		}
	}
	if runningOK {
		aRun = running
	}
	if sv > 0 && (aRate >= 0 || aRun >= 0) {
		rec.Load = math.Max(aRate, aRun)
		beta := (rec.Dispersion + 1) / 2 // Allen–Cunneen (ca² + cs²)/2 with ca² = I, cs² = 1
		model = queueModel{a: rec.Load, theta: slo.t / (sv * beta), k: int64(k)}
		if math.IsNaN(model.theta) {
			model.theta = 0
		}
		n, _ := model.leastReplicas(slo.logEps, int64(hi))
		t := TermSLO
		if aRun > aRate {
			t = TermSLORunning
		}
		rec.NSLO = take(n, t)
		if capOn {
			rec.NCap = take(ceilEps(rec.Load/(k*rho)), TermCap)
		}
	}
	if sv > 0 && queueOK {
		base := math.Max(0, running)
		if lambdaOK {
			base = math.Max(base, mulSat(lambda, sv))
		}
		// A backlog keeps growing at λ − R·k/S until replicas ordered now
		// are ready, H from now: that is the backlog they must drain.
		backlog := queue
		if queue > 0 && lambdaOK && rKnown {
			if grow := lambda - float64(r)*k/sv; grow > 0 {
				backlog += mulSat(grow, rec.Horizon.Seconds())
			}
		}
		rec.NDrain = take(ceilEps((base+mulSat(backlog, sv)/p.DrainSeconds)/(k*rho)), TermDrain)
	}
	if sv == 0 && (queueOK || runningOK) {
		occ := 0.0
		if queueOK {
			occ = queue
		}
		if runningOK {
			occ += running
		}
		rec.NOcc = take(ceilEps(occ/k), TermOccupancy)
	}
	activity, activityOK := usable(SignalActivity)
	rec.Saturated = rKnown && r > 0 && activityOK && activity >= p.ActivityCeiling
	if !haveDemand && rKnown && activityOK {
		n := 0.0
		if r > 0 {
			a := math.Min(1, activity/p.ActivityCeiling)
			n = ceilEps(float64(r) * a / p.ActivityTarget)
		}
		rec.NAct = take(n, TermActivity)
	}

	// Activation.
	thresholds := [NumSignals]float64{SignalQueue: p.ActivationQueue, SignalRate: p.ActivationRate, SignalActivity: p.ActivationActivity}
	var activeWhy []string
	if p.WarmReplicas > 0 {
		activeWhy = append(activeWhy, fmt.Sprintf("warm pool %d", p.WarmReplicas))
	}
	for _, s := range []Signal{SignalQueue, SignalRate, SignalActivity, SignalRunning} {
		if rec.Status[s].Usable() && rec.Values[s] > thresholds[s] {
			activeWhy = append(activeWhy, fmt.Sprintf("%s %g > %g", s, rec.Values[s], thresholds[s]))
		}
	}
	if inGuard && (!st.Seeded || st.SeedReplicas > 0) {
		activeWhy = append(activeWhy, "first down-window after first sight")
	}
	if rec.Degraded && prev.HasLast && prev.LastActive {
		activeWhy = append(activeWhy, "degraded, was active")
	}
	rec.Active = len(activeWhy) > 0

	cutoff := func(w time.Duration) int64 { return now.Add(-w).UnixNano() }
	keep := max(p.ScaleUpWindow, p.ScaleDownWindow, p.ScaleDownPeriod)
	for _, pt := range prev.History {
		if pt.AtUnixNano > cutoff(keep) {
			st.History = append(st.History, pt)
		}
	}

	if !haveDemand {
		summary := signalSummary(rec) + notesText(notes) + pollErrors(rec, obs)
		rec.Err = fmt.Errorf("%w: %s", ErrNoData, summary)
		if activityOK && !rKnown {
			// Activity sizes the pool as R·A/A_target: a fresh activity alone read as
			// "activity=0.5 fresh" and never said why it gave no answer.
			rec.Err = fmt.Errorf("%w: %s; %s", ErrNoData, summary, errActivityNeedsReady)
		}
		rec.Replicas = lo
		switch {
		case prev.HasLast:
			rec.Replicas = min(max(prev.LastReplicas, lo), hi)
		case st.Seeded:
			rec.Replicas = min(max(st.SeedReplicas, lo), hi)
		}
		rec.Reason = "no usable signal: " + signalSummary(rec) + notesText(notes)
		if len(outs) > 0 {
			rec.Reason += "; out past staleAfter " + p.StaleAfter.String() + ": " + strings.Join(outs, ",")
		}
		return rec, st
	}

	rec.Demand = clampReplicas(demand, 0, math.MaxInt32)
	warm := math.Max(float64(p.WarmReplicas), ceilEps(mulSat(p.WarmFraction, demand)))
	rec.Warm = clampReplicas(warm, 0, math.MaxInt32)
	if demand == 0 && warm > 0 {
		rec.Term = TermWarm
	}
	raw := clampReplicas(demand+warm, lo, hi)
	rec.Raw = raw
	limit := Term("")
	switch {
	case demand+warm < float64(lo):
		limit = TermMin
	case demand+warm > float64(hi):
		limit = TermMax
	}

	// Windows over the history, the current point included.
	upMin, downMax := raw, raw
	for _, pt := range st.History {
		if pt.AtUnixNano > cutoff(p.ScaleUpWindow) && pt.Raw < upMin {
			upMin = pt.Raw
		}
		if pt.AtUnixNano > cutoff(p.ScaleDownWindow) && pt.Raw > downMax {
			downMax = pt.Raw
		}
	}
	// The seed counts in the down-window only: a restart never scales down
	// before one down-window has passed, but does not delay a scale-up.
	fromSeed := false
	if st.Seeded && st.SeedAt.UnixNano() > cutoff(p.ScaleDownWindow) && st.SeedReplicas > downMax {
		downMax, fromSeed = st.SeedReplicas, true
	}
	cur := raw
	switch {
	case prev.HasLast:
		cur = prev.LastReplicas
	case st.Seeded:
		cur = st.SeedReplicas
	}
	desired := cur
	burst := rKnown && float64(raw) >= p.BurstFactor*float64(r) && raw > cur
	switch {
	case burst:
		desired = raw
		if raw > upMin {
			limit = TermBurst
		}
	case upMin > cur:
		desired = upMin
		if upMin < raw {
			limit = TermUpWindow
		}
	case downMax < cur:
		desired = downMax
		if downMax > raw {
			limit = TermDownWindow
		}
	default:
		if cur != raw {
			limit = TermUpWindow
			if cur > raw {
				limit = TermDownWindow
				if fromSeed && downMax == cur {
					limit = TermSeed
				}
			}
		}
	}
	// Bounded step-down over the last scaleDownPeriod of answers.
	if desired < cur {
		ref := cur
		for _, pt := range st.History {
			if pt.AtUnixNano > cutoff(p.ScaleDownPeriod) && pt.Result > ref {
				ref = pt.Result
			}
		}
		step := int32(math.Max(1, math.Floor(float64(ref)*p.ScaleDownMaxFraction+1e-9)))
		if floor := ref - step; desired < floor {
			desired, limit = floor, TermStepDown
		}
	}
	if rec.Saturated && desired < cur {
		desired, limit = cur, TermSaturated
	}
	if rec.Degraded && desired < prev.LastGoodResult {
		desired, limit = prev.LastGoodResult, TermDegraded
	}
	// The bounds have the last word, and the limit names them when they set the answer: a
	// window's hold, the step-down floor, the seed or a guard's floor that lies outside
	// [min, max] is cut to the bound, and the limit is "max" or "min", not the rule it overrode.
	switch {
	case desired > hi:
		desired, limit = hi, TermMax
	case desired < lo:
		desired, limit = lo, TermMin
	}
	rec.Replicas = desired
	rec.Limit = limit
	if rec.Load >= 0 {
		rec.PWait = model.tail(int64(desired))
	}
	if !rec.Degraded {
		st.LastGoodResult = desired
	}
	if n := len(st.History); n > 0 && st.History[n-1].Raw == raw && st.History[n-1].Result == desired {
		st.History[n-1].AtUnixNano = now.UnixNano() // extend the run (st.History is our own copy)
	} else {
		st.History = append(st.History, Point{AtUnixNano: now.UnixNano(), Raw: raw, Result: desired})
	}
	rec.Reason = reason(p, rec, slo, lo, hi, activeWhy, outs, nevers) + notesText(notes)
	st.LastReplicas, st.LastActive, st.HasLast = rec.Replicas, rec.Active, true
	return rec, st
}

// sloParams are the SLO's numbers as the queueing terms use them.
type sloParams struct {
	t      float64 // T, seconds
	q      float64 // quantile
	logEps float64 // ln(1 − q)
	z      float64 // Φ⁻¹(q), the forecast's prediction-bound multiplier
}

// sloOf returns the policy's SLO; values outside the metadata ranges (a
// Policy not built by ParseMetadata) fall back to the defaults, T = 2 s and
// q = 0.99, so that the core never divides by zero or takes ln 0.
func sloOf(p Policy) sloParams {
	t, q := p.SLOWaitSeconds, p.SLOQuantile
	if !(t > 0) || math.IsInf(t, 0) {
		t = 2
	}
	if !(q >= 0.5 && q <= 0.9999) {
		q = 0.99
	}
	return sloParams{t: t, q: q, logEps: math.Log(1 - q), z: normalQuantile(q)}
}

// appendRate returns the rate history with a fresh sample added (one not
// older than the newest point), pruned to forecastWindow(h) before now and
// to maxRatePoints. The prev slice is never written.
func appendRate(prev []RatePoint, status SignalStatus, smp Sample, now time.Time, h time.Duration) []RatePoint {
	cut := now.Add(-forecastWindow(h)).UnixNano()
	i := 0
	for i < len(prev) && prev[i].AtUnixNano <= cut {
		i++
	}
	add := status == StatusFresh && !smp.Empty && (len(prev) == 0 || smp.EvaluatedAt.UnixNano() > prev[len(prev)-1].AtUnixNano)
	keep := prev[i:]
	if add && len(keep) >= maxRatePoints {
		keep = keep[len(keep)-maxRatePoints+1:]
	}
	out := make([]RatePoint, len(keep), len(keep)+1)
	copy(out, keep)
	if add && smp.EvaluatedAt.UnixNano() > cut {
		out = append(out, RatePoint{AtUnixNano: smp.EvaluatedAt.UnixNano(), Rate: smp.Value})
	}
	return out
}

// evalSignal classifies one signal's sample and updates its last good value
// and whether it was ever measured. An invalid sample of a signal never
// measured is StatusNever, even when a zero inferred at R = 0 stood in
// before (DESIGN.md "Missing and bad data": a signal that has never produced
// a valid sample is reported and left out).
//
// note, empty but for three cases, says why a signal has no fresh value, for the
// reason and the no-data error: a value above the signal's bound (maxValue: a
// ready count past MaxReadyReplicas, an activity above 1), a query waiting for a
// slot of its Prometheus address (Sample.Waiting), and a value older than
// staleAfter of a signal never measured (its status alone, "never", would read as
// if no value had ever come).
func evalSignal(p Policy, s Signal, smp Sample, st *State, noneReady bool, now time.Time) (status SignalStatus, v float64, note string) {
	if !p.Configured(s) {
		return StatusUnconfigured, 0, ""
	}
	read := smp.Err == nil && !smp.EvaluatedAt.IsZero()
	valid := read && now.Sub(smp.EvaluatedAt) <= p.StaleAfter
	status, v = StatusFresh, smp.Value
	inferred := false
	if valid && smp.Empty {
		switch {
		case p.ZeroWhenAbsent.Has(s): // the user declared that empty means zero: a reading
			status, v = StatusZero, 0
		case noneReady && p.PerPod(s): // zero inferred from the pods' absence, not a reading
			status, v, inferred = StatusZero, 0, true
		default:
			valid = false
		}
	}
	if valid && (math.IsNaN(v) || math.IsInf(v, 0) || v < 0) {
		valid = false
	}
	if valid && v > maxValue[s] {
		valid = false
		note = s.String() + "=" + strconv.FormatFloat(v, 'g', 4, 64) + " refused: " + maxValueWhy[s]
	}
	if valid {
		if smp.EvaluatedAt.After(st.Good[s].At) || st.Good[s].At.IsZero() {
			st.Good[s] = LastGood{Value: v, At: smp.EvaluatedAt}
		}
		if !inferred {
			st.Measured[s] = true
		}
		return status, v, ""
	}
	if note == "" && smp.Waiting {
		note = s.String() + " waiting for a query slot: --query-concurrency queries to its prometheusAddress are in flight"
	}
	g := st.Good[s]
	switch {
	case g.At.IsZero() || !st.Measured[s]:
		if note == "" && read && !smp.Empty && now.Sub(smp.EvaluatedAt) > p.StaleAfter {
			note = s.String() + " stale: its last value was read " + now.Sub(smp.EvaluatedAt).String() + " ago, past staleAfter " + p.StaleAfter.String()
		}
		return StatusNever, 0, note
	case now.Sub(g.At) <= p.StaleAfter:
		return StatusHeld, g.Value, note
	}
	return StatusOut, 0, note
}

// MaxReadyReplicas bounds a ready count read from readyQuery: a larger value is an invalid
// sample, like NaN or a negative one, never a replica count. 10⁶ is ten times the largest
// maxReplicas the metadata accepts (100,000) and more than six times the pods Kubernetes
// supports in one cluster (150,000, its documented scalability limit), so no real pool reaches
// it; before, readyQuery vector(1e308) read as 2,147,483,647 ready replicas, became the restart
// seed and held the pool at maxReplicas for a whole down-window.
const MaxReadyReplicas = 1e6

// MaxAmplification bounds rate ÷ unique rate as a retry amplification: 1,000
// sends per request is three retrying layers of ten attempts each, past every
// common policy (gRPC caps a retry policy's maxAttempts at 5, gRFC A6; Envoy
// retries once by default; AWS SDKs make 3 attempts). A larger ratio is a
// unique-rate query that counts next to nothing (a difference of two rates, a
// wrong label), and capping on it sized a loaded pool to one replica.
const MaxAmplification = 1000

// MaxActivity bounds an engine activity sample: activity is a fraction of time (DCGM's
// DCGM_FI_PROF_GR_ENGINE_ACTIVE is in [0, 1]), so a larger value is an invalid sample (a
// percentage, or a wrong query), never clamped to 1. The 10⁻⁹ above 1 lets through the
// rounding of a mean of values at 1.
const MaxActivity = 1 + 1e-9

// maxValue is each signal's largest valid sample (+Inf: no bound but finiteness), and
// maxValueWhy the note's explanation of it.
var (
	maxValue = [NumSignals]float64{
		SignalQueue: math.Inf(1), SignalRate: math.Inf(1), SignalActivity: MaxActivity, SignalReady: MaxReadyReplicas,
		SignalRunning: math.Inf(1), SignalServiceTime: math.Inf(1), SignalDispersion: math.Inf(1), SignalUniqueRate: math.Inf(1),
	}
	maxValueWhy = [NumSignals]string{
		SignalActivity: "above 1 (decision.MaxActivity): engine activity is a fraction of time in [0, 1]",
		SignalReady:    "above 1e6 (decision.MaxReadyReplicas): not a replica count",
	}
)

// notesText is "; note; note" for evalSignal's notes, "" without any.
func notesText(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

func signalSummary(rec Recommendation) string {
	var b text
	b.signals(rec)
	return string(b)
}

// maxPollErrors and maxPollErrorBytes bound what pollErrors adds to a no-data error: the
// distinct poll errors of the configured signals, at most two, each cut to 512 bytes in its
// middle (errtext.CutMiddle).
const (
	maxPollErrors     = 2
	maxPollErrorBytes = 512
)

// pollErrors returns "; queue: <err>" for the first configured signals (in AllSignals order)
// whose last poll failed, one per distinct error text, so that an Unavailable answer says why
// (a Prometheus 401 failed every query alike: the signal states alone read "queue never" and
// hid it). Empty when no poll failed. The errors are the poller's, whose addresses package
// prom has already redacted.
func pollErrors(rec Recommendation, obs Observation) string {
	var b strings.Builder
	var seen []string
	for _, s := range AllSignals() {
		err := obs.Samples[s].Err
		if err == nil || rec.Status[s] == StatusUnconfigured {
			continue
		}
		// A poll error reads "query <address> <PromQL>: <cause>", and a preset's PromQL alone
		// is kilobytes: the middle goes, so that the cause (the 401) it is shown for stays.
		msg := errtext.CutMiddle(err.Error(), maxPollErrorBytes)
		if slices.Contains(seen, msg) {
			continue
		}
		if len(seen) == maxPollErrors {
			b.WriteString("; more poll errors")
			break
		}
		seen = append(seen, msg)
		b.WriteString("; " + s.String() + ": " + msg)
	}
	return b.String()
}

// text builds a reason with strconv instead of fmt: the reason is built on
// every decision, and fmt was 40 % of a decision's CPU. %g is precision -1,
// %.3g precision 3 (strconv's 'g' is what fmt uses for both).
type text []byte

func (b *text) s(parts ...string) {
	for _, p := range parts {
		*b = append(*b, p...)
	}
}
func (b *text) d(n int32)                    { *b = strconv.AppendInt(*b, int64(n), 10) }
func (b *text) g(v float64, prec int)        { *b = strconv.AppendFloat(*b, v, 'g', prec, 64) }
func (b *text) list(xs []string, sep string) { b.s(strings.Join(xs, sep)) }

// signals appends "name=value status" per usable signal and "name status"
// per other configured one, comma separated.
func (b *text) signals(rec Recommendation) {
	first := true
	for _, s := range AllSignals() {
		st := rec.Status[s]
		if st == StatusUnconfigured {
			continue
		}
		if !first {
			b.s(", ")
		}
		first = false
		b.s(s.String())
		if st == StatusFresh || st == StatusZero || st == StatusHeld {
			b.s("=")
			b.g(rec.Values[s], -1)
		}
		b.s(" ", string(st))
	}
}

func reason(p Policy, rec Recommendation, slo sloParams, lo, hi int32, activeWhy, outs, nevers []string) string {
	b := make(text, 0, 768)
	b.s("replicas ")
	b.d(rec.Replicas)
	if rec.Limit != "" {
		b.s(" (", string(rec.Limit), ")")
	}
	b.s("; raw ")
	b.d(rec.Raw)
	b.s(" = clamp(demand ")
	b.d(rec.Demand)
	b.s(" [", string(rec.Term), "] + warm ")
	b.d(rec.Warm)
	b.s(", ")
	b.d(lo)
	b.s(", ")
	b.d(hi)
	b.s(")")
	if rec.PWait >= 0 {
		b.s("; predicted P(wait > ")
		b.g(slo.t, -1)
		b.s("s) = ")
		b.g(rec.PWait, 3)
		b.s(" at ")
		b.d(rec.Replicas)
		b.s(" replicas (target ≤ ")
		b.g(1-slo.q, 3)
		b.s(")")
	}
	b.s("; terms slo=")
	b.d(rec.NSLO)
	b.s(" drain=")
	b.d(rec.NDrain)
	b.s(" cap=")
	b.d(rec.NCap)
	b.s(" occupancy=")
	b.d(rec.NOcc)
	b.s(" activity=")
	b.d(rec.NAct)
	if rec.Load >= 0 {
		b.s("; load ")
		b.g(rec.Load, 4)
		b.s(" Erlangs")
	}
	if rec.LambdaH >= 0 {
		b.s(", λ_H=")
		b.g(rec.LambdaH, 4)
		b.s("/s over H=", rec.Horizon.String(), " (", rec.HorizonSource, ")")
	}
	if rec.ServiceSource != "" {
		b.s(", S=")
		b.g(rec.ServiceTime, 4)
		b.s("s (", rec.ServiceSource, ")")
	}
	b.s(", k=")
	b.d(max(p.ReplicaConcurrency, 1))
	b.s(", I=")
	b.g(rec.Dispersion, 3)
	b.s("; ")
	b.signals(rec)
	if rec.Ready >= 0 {
		b.s(", R=")
		b.d(rec.Ready)
	}
	if rec.Saturated {
		b.s("; engine saturated (activity at ceiling): no scale-down")
	}
	if budget := max(1, p.RetryBudget); rec.RetryCapped {
		b.s("; retry-capped: amplification ")
		b.g(rec.Amplification, 3)
		b.s(" > retryBudget ")
		b.g(budget, -1)
		b.s(", load sized on unique rate × ")
		b.g(budget, -1)
	} else if rec.Amplification >= 0 {
		b.s("; amplification ")
		b.g(rec.Amplification, 3)
	}
	if len(outs) > 0 {
		b.s("; degraded: ")
		b.list(outs, ",")
		b.s(" out past staleAfter ", p.StaleAfter.String())
	}
	if len(nevers) > 0 {
		b.s("; left out (never valid): ")
		b.list(nevers, ",")
	}
	if rec.Active {
		b.s("; active: ")
		b.list(activeWhy, ", ")
	} else {
		b.s("; inactive")
	}
	return string(b)
}
