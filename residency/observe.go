package residency

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
)

// stateRank orders the states of a model's versions: the one that holds the most wins.
func stateRank(s plan.State) int {
	switch s {
	case plan.StateReady:
		return 3
	case plan.StateLoading:
		return 2
	case plan.StateUnloading:
		return 1
	}
	return 0
}

// observation is one loop's reading of Triton and the device.
type observation struct {
	obs    plan.Observed
	demand plan.Demand
	// usedBytes is the device's memory in use (NVML), or -1 without a probe.
	usedBytes int64
	// statsBytes is the sum of the models' memory_usage in Triton's statistics.
	statsBytes int64
}

// observe re-reads Triton's index, statistics and queue lengths, the device and the demand
// source; nothing about Triton's state is carried over from earlier loops except the time each
// model was first seen READY, the counts behind the demand estimates and the in-flight
// accounting. c.mu must not be held.
func (c *Controller) observe(ctx context.Context, cat plan.Catalog, now time.Time) (observation, error) {
	idx, err := c.deps.Triton.Index(ctx, false)
	if err != nil {
		return observation{}, fmt.Errorf("read repository index: %w", err)
	}
	stats, err := c.deps.Triton.Statistics(ctx, "")
	if err != nil {
		return observation{}, fmt.Errorf("read model statistics: %w", err)
	}
	o := observation{obs: plan.Observed{Models: make(map[string]plan.ModelStatus, len(idx))}, demand: plan.Demand{}, usedBytes: -1}
	for _, e := range idx {
		s := plan.State(e.State)
		if e.State == triton.StateUnknown {
			s = plan.StateUnavailable
		}
		cur, seen := o.obs.Models[e.Name]
		if !seen || stateRank(s) > stateRank(cur.State) {
			o.obs.Models[e.Name] = plan.ModelStatus{State: s, Reason: e.Reason}
		}
	}
	type agg struct {
		last     time.Time
		finished uint64 // requests that succeeded or failed
		bytes    int64
	}
	per := make(map[string]agg, len(stats))
	for _, s := range stats {
		a := per[s.Name]
		if s.LastInference.After(a.last) {
			a.last = s.LastInference
		}
		// Requests, not inferences: InferenceCount counts each element of a batched request
		// (a batch-32 request adds 32), while Success and Fail count requests, as the
		// nv_inference_request_success and _failure counters that give the demand of models
		// not loaded do. The sum saturates rather than wraps.
		a.finished = addSatU(a.finished, addSatU(s.Success.Count, s.Fail.Count))
		// Each GPUBytes is at most triton.MaxStatisticsBytes (2^50); the sums over versions and
		// models saturate rather than wrap (a 4 MiB answer can list 2^17 entries).
		a.bytes = addSat(a.bytes, int64(s.GPUBytes()))
		per[s.Name] = a
		o.statsBytes = addSat(o.statsBytes, int64(s.GPUBytes()))
	}
	queues := c.readQueues(ctx, now)

	var notLoaded, noStats []string
	c.mu.Lock()
	for name, st := range o.obs.Models {
		if st.State == plan.StateReady {
			if _, ok := c.firstReady[name]; !ok {
				c.firstReady[name] = now
				c.readyAgainLocked(name)
			}
			st.LoadedSince = c.firstReady[name]
		} else {
			delete(c.firstReady, name)
		}
		if st.State == plan.StateReady {
			st.Digest = c.loadedDigest[name]
		} else {
			delete(c.loadedDigest, name)
		}
		q, invalid := queues.of(name)
		a, inStats := per[name]
		switch {
		case inStats:
			st.LastUsed, st.MeasuredBytes = a.last, a.bytes
			o.demand[name] = c.arrivedLocked(name, now, a.finished)
			st.Queued, st.Executing = c.inFlightLocked(name, a.finished, q, now)
		case st.State == plan.StateReady:
			// Triton lists every loaded model in its statistics; one missing is read from what
			// else is known — its queue, the work it still owes at its last finished count, its
			// decayed demand — and counts as busy when its queue is unknown, so that missing
			// statistics never make it a victim.
			noStats = append(noStats, name)
			st.Queued, st.Executing = c.inFlightLocked(name, c.work[name].finished, q, now)
			if q < 0 {
				st.Executing = max(st.Executing, 1)
			}
			if e, ok := c.est[name]; ok {
				o.demand[name] = e.Rate(now, plan.DefaultHalfLife)
			}
		default:
			delete(c.lastCount, name)
			delete(c.work, name)
		}
		if invalid && st.State.HoldsMemory() {
			// A queue that cannot be read is not an empty one: the model counts one request
			// executing, so it is never a victim while the reading lasts.
			st.Executing = max(st.Executing, 1)
		}
		o.obs.Models[name] = st
	}
	c.noStatsEpisodeLocked(noStats)
	for name := range c.firstReady {
		if _, ok := o.obs.Models[name]; !ok {
			delete(c.firstReady, name)
		}
	}
	for name := range c.loadedDigest {
		if _, ok := o.obs.Models[name]; !ok {
			delete(c.loadedDigest, name)
		}
	}
	for name, u := range c.unloadIssued {
		if st, ok := o.obs.Models[name]; !ok || !st.State.HoldsMemory() {
			if u.warned {
				c.deps.Log.Info("unload took effect", "model", name, "unloads_issued", u.tries,
					"since_first", now.Sub(u.first))
			}
			delete(c.unloadIssued, name)
		}
	}
	c.pruneLocked(cat, o.obs)
	for _, m := range cat.Models {
		st, ok := o.obs.Models[m.Name]
		if !ok {
			st.State = plan.StateUnavailable
		}
		if !st.State.HoldsMemory() {
			notLoaded = append(notLoaded, m.Name)
			st.MeasuredBytes = c.overPeak[m.Name] // a model that measured above its peak is admitted at that
		}
		st.Quarantined = c.quarantined[m.Name]
		st.BackoffUntil = c.backoffUntil[m.Name]
		st.OverPeak = c.overPeak[m.Name] > 0
		if ok || st.Quarantined || !st.BackoffUntil.IsZero() || st.OverPeak {
			o.obs.Models[m.Name] = st
		}
	}
	c.mu.Unlock()

	if c.deps.Demand != nil && len(notLoaded) > 0 {
		slices.Sort(notLoaded)
		rates, err := c.deps.Demand.Rates(ctx, notLoaded)
		c.mu.Lock()
		c.demandWarning(err, now)
		dt := now.Sub(c.lastObserved)
		if c.lastObserved.IsZero() || dt < 0 {
			dt = 0
		}
		dt = min(dt, 10*c.cfg.LoopInterval) // a stalled loop does not invent arrivals
		for _, name := range notLoaded {
			if r, ok := rates[name]; ok && !math.IsNaN(r) && !math.IsInf(r, 0) && r > 0 {
				// Demand for a model that is not loaded: the source's current rate, integrated
				// into the model's decayed estimate (its history counts too). Only a model with
				// current demand is wanted (on-demand admission).
				c.est[name] = c.est[name].Add(r*dt.Seconds(), now, plan.DefaultHalfLife)
				o.demand[name] = max(c.est[name].Rate(now, plan.DefaultHalfLife), r)
			}
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.lastObserved = now
	c.mu.Unlock()

	if c.deps.DeviceUsedBytes != nil {
		used, err := c.deps.DeviceUsedBytes()
		if err != nil {
			// An unreadable device (Triton's metrics endpoint down) must not stop every load:
			// plan on the accounting alone, keeping the unaccounted memory last measured (a
			// leak stays accounted until a reading shows it back).
			c.m.DeviceReadErrors.Inc()
			c.mu.Lock()
			o.obs.UnaccountedBytes = c.unaccounted
			warn := c.deviceErrSince.IsZero() || now.Sub(c.deviceWarnAt) >= deviceWarnEvery
			if c.deviceErrSince.IsZero() {
				c.deviceErrSince = now
			}
			if warn {
				c.deviceWarnAt = now
			}
			since := c.deviceErrSince
			c.mu.Unlock()
			if warn {
				c.deps.Log.Warn("device memory unreadable; planning on the catalog's accounting and Triton's memory_usage",
					"err", err, "unreadable_for", now.Sub(since), "unaccounted_bytes_kept", o.obs.UnaccountedBytes,
					"next_warning_in", deviceWarnEvery)
			}
			return o, nil
		}
		c.mu.Lock()
		if !c.deviceErrSince.IsZero() {
			c.deps.Log.Info("device memory readable again", "unreadable_for", now.Sub(c.deviceErrSince))
			c.deviceErrSince, c.deviceWarnAt = time.Time{}, time.Time{}
		}
		c.mu.Unlock()
		if used < 0 { // the probe cannot tell (Triton without GPU metrics)
			return o, nil
		}
		o.usedBytes = used
		// Memory the device shows in use beyond the reserve and what the models account for:
		// an unload that has not returned its memory yet, a leak, another process.
		modelBytes := plan.Accounted(cat, c.budget, o.obs) - plan.ReserveBytes(cat, c.budget)
		o.obs.UnaccountedBytes = max(0, used-plan.ReserveBytes(cat, c.budget)-modelBytes)
		c.mu.Lock()
		c.unaccounted = o.obs.UnaccountedBytes
		c.mu.Unlock()
	}
	return o, nil
}

// deviceWarnEvery rate-limits the warning about an unreadable device: once when it starts,
// then at most once per period while it lasts (the metric counts every loop).
const deviceWarnEvery = 5 * time.Minute

// arrivedLocked adds the requests name finished since the last loop (the growth of its
// cumulative success + failure request count; a batched request counts once) to its decayed
// demand estimate and returns the estimate at now in
// req/s (plan.DecayedRate, half-life plan.DefaultHalfLife). The first reading of a count, and a
// count below the previous one (Triton restarted, or the model was reloaded), is a baseline.
func (c *Controller) arrivedLocked(name string, now time.Time, count uint64) float64 {
	prev, ok := c.lastCount[name]
	c.lastCount[name] = count
	var n float64
	if ok && count >= prev {
		n = float64(count - prev)
	}
	c.est[name] = c.est[name].Add(n, now, plan.DefaultHalfLife)
	return c.est[name].Rate(now, plan.DefaultHalfLife)
}

// work is the in-flight accounting of one loaded model.
type work struct {
	// finished is the model's finished-request count (success + failure) at the last loop.
	finished uint64
	// owed is the finished count at which every request seen queued, and the one executing
	// ahead of them, will have finished.
	owed uint64
	// moved is when the finished count last grew or a queue was last seen: an owed count
	// that nothing moves towards for owedExpiry expires.
	moved time.Time
}

// owedExpiry bounds how long owed in-flight work (work.owed) outlives its evidence: once the
// queue reads 0 and the finished count has not grown for this long, the owed requests are
// written off (logged) and the model is idle again. 10 minutes: ten times the front's default
// hold timeout (60 s) — a request still executing past it is safe all the same, as Triton
// completes an unload only after in-flight requests finish; without it a count that never
// arrives (a request Triton dropped from its statistics) kept the model busy, never a victim,
// for ever.
const owedExpiry = 10 * time.Minute

// inFlightLocked returns the queued and executing requests of name from its finished-request
// count and its queue length (Triton's nv_inference_pending_request_count; -1: unknown) at now.
//
// Triton reports the queue but not what executes. A request leaves the queue when it starts
// executing and counts as finished when it ends, so when the queue holds q requests at least
// one request executes ahead of them (every instance is busy, or nothing would wait): the
// model owes q + 1 more finished requests, and it is executing until they are counted, or
// until owedExpiry passes with the queue at 0 and the count unmoved. With the queue unknown
// (metrics unreadable), a model that finished requests since the last loop counts one
// executing. A finished count below the last (Triton restarted) starts afresh.
func (c *Controller) inFlightLocked(name string, finished uint64, queued int, now time.Time) (q, executing int) {
	w := c.work[name]
	if finished < w.finished {
		w = work{}
	}
	active := finished > w.finished
	// While the queue is unknown (queued < 0) the expiry's clock does not run: it measures
	// only time with a known queue, so an outage of the metrics writes nothing off.
	if active || queued != 0 || w.moved.IsZero() {
		w.moved = now
	}
	if queued > 0 {
		w.owed = max(w.owed, addSatU(finished, uint64(queued)+1))
	}
	if queued == 0 && w.owed > finished && now.Sub(w.moved) >= owedExpiry {
		c.deps.Log.Warn("in-flight accounting expired: the requests a queue showed never counted as finished",
			"model", name, "requests_written_off", w.owed-finished, "finished", finished,
			"unmoved_for", now.Sub(w.moved), "expiry", owedExpiry)
		w.owed = finished
	}
	w.finished = finished
	c.work[name] = w
	if w.owed > finished {
		executing = int(min(w.owed-finished, 1<<20)) - max(queued, 0)
	}
	if queued < 0 && active {
		executing = max(executing, 1)
	}
	return max(queued, 0), max(executing, 0)
}

// readyAgainLocked forgets name's consecutive failed loads and backoff when it is seen READY
// (newly, so that a reload failing while the old copy serves still counts towards
// quarantine): a load Triton answered with an error that still ended READY is not one of a
// run of failures. c.mu is held.
func (c *Controller) readyAgainLocked(name string) {
	if n := c.failures[name]; n > 0 {
		c.deps.Log.Info("model READY; its failed loads are forgotten", "model", name, "failures", n)
		delete(c.failures, name)
		delete(c.backoffUntil, name)
	}
}

// noStatsEpisodeLocked warns once when READY models start missing from Triton's statistics
// (names, at most ten of them) and says once when none is. c.mu is held.
func (c *Controller) noStatsEpisodeLocked(names []string) {
	switch {
	case len(names) > 0 && !c.noStats:
		c.noStats = true
		slices.Sort(names)
		c.deps.Log.Warn("READY models missing from Triton's statistics; read from their queue and owed work, busy while their queue is unknown",
			"models", names[:min(len(names), 10)], "count", len(names))
	case len(names) == 0 && c.noStats:
		c.noStats = false
		c.deps.Log.Info("every READY model is in Triton's statistics again")
	}
}

// pruneLocked drops the per-model state of names in neither the catalog nor obs (this loop's
// index): a model that left Triton's index and was never in the catalog cannot be wanted again
// except as a new model, so its demand estimate, counts and in-flight accounting go. c.mu is
// held.
func (c *Controller) pruneLocked(cat plan.Catalog, obs plan.Observed) {
	gone := func(name string) bool {
		if _, ok := obs.Models[name]; ok {
			return false
		}
		_, ok := cat.Model(name)
		return !ok
	}
	for name := range c.est {
		if gone(name) {
			delete(c.est, name)
		}
	}
	for name := range c.lastCount {
		if gone(name) {
			delete(c.lastCount, name)
		}
	}
	for name := range c.work {
		if gone(name) {
			delete(c.work, name)
		}
	}
}

// demandWarning logs an unavailable demand of models not loaded once when it starts, then at
// most every deviceWarnEvery (its error cut to maxWarnErrBytes: it can quote the bundled query
// once per catalog model), and once when it is available again. Missing demand is not zero
// demand for loaded models (they use statistics); for the others it means no load is started
// on their behalf while it lasts. c.mu is held.
func (c *Controller) demandWarning(err error, now time.Time) {
	if err == nil {
		if !c.demandErrSince.IsZero() {
			c.deps.Log.Info("demand of models not loaded available again", "unavailable_for", now.Sub(c.demandErrSince))
			c.demandErrSince, c.demandWarnAt = time.Time{}, time.Time{}
		}
		return
	}
	if c.demandErrSince.IsZero() || now.Sub(c.demandWarnAt) >= deviceWarnEvery {
		c.deps.Log.Warn("demand of models not loaded unavailable; no load is started for them meanwhile",
			"err", errtext.Cut(err.Error(), maxWarnErrBytes), "next_warning_in", deviceWarnEvery)
		c.demandWarnAt = now
	}
	if c.demandErrSince.IsZero() {
		c.demandErrSince = now
	}
}

// maxWarnErrBytes bounds an error quoted in a rate-limited warning.
const maxWarnErrBytes = 1024

// queues is one loop's reading of Triton's queue lengths (readQueues).
type queues struct {
	read     bool // false: not configured or not readable (every queue unknown)
	reading  pendingReading
	allValid bool // false: a series without a model label is invalid (every queue invalid)
}

// of returns name's queue length, -1 when it is unknown, and whether it is unknown because
// Triton's series for it is not a queue length (invalid: the model counts as busy).
func (q queues) of(name string) (n int, invalid bool) {
	if !q.read {
		return -1, false
	}
	if _, bad := q.reading.bad[name]; bad {
		return -1, true
	}
	if !q.allValid {
		return -1, true // an invalid series of no model could be any model's
	}
	return int(q.reading.perModel[name]), false // at most MaxPendingRequests
}

// readQueues reads Triton's queue length per model (pendingRequests) from cfg.TritonMetricsURL.
// Unconfigured or unreadable, every queue is unknown (the failure is logged once when it starts,
// then at most every deviceWarnEvery); a series that is not a queue length makes its model's
// queue unknown and the model busy (warned once per episode, until a reading has none). Each
// loop that could not read them, or read an invalid series, counts in queue_read_errors_total.
func (c *Controller) readQueues(ctx context.Context, now time.Time) queues {
	if c.cfg.TritonMetricsURL == "" {
		return queues{}
	}
	fams, err := scrapeMetrics(ctx, c.metricsClient, c.cfg.TritonMetricsURL, metricPending)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.m.QueueReadErrors.Inc()
		if c.queueErrSince.IsZero() || now.Sub(c.queueWarnAt) >= deviceWarnEvery {
			c.deps.Log.Warn("triton queue lengths unreadable; models that served requests in the last loop count as busy",
				"err", err, "next_warning_in", deviceWarnEvery)
			c.queueWarnAt = now
		}
		if c.queueErrSince.IsZero() {
			c.queueErrSince = now
		}
		return queues{}
	}
	if !c.queueErrSince.IsZero() {
		c.deps.Log.Info("triton queue lengths readable again", "unreadable_for", now.Sub(c.queueErrSince))
		c.queueErrSince, c.queueWarnAt = time.Time{}, time.Time{}
	}
	r := pendingRequests(fams)
	_, unlabelled := r.bad[""]
	switch {
	case len(r.bad) > 0:
		c.m.QueueReadErrors.Inc()
		if !c.queueInvalid {
			c.queueInvalid = true
			c.deps.Log.Warn("triton queue lengths invalid; those models count as busy, never evicted, until they read as counts",
				"models", len(r.bad), "invalid", r.why(), "every_queue_unknown", unlabelled)
		}
	case c.queueInvalid:
		c.queueInvalid = false
		c.deps.Log.Info("triton queue lengths valid again")
	}
	return queues{read: true, reading: r, allValid: !unlabelled}
}
