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
		// not loaded do.
		a.finished += s.Success.Count + s.Fail.Count
		// Each GPUBytes is at most triton.MaxStatisticsBytes (2^50); the sums over versions and
		// models saturate rather than wrap (a 4 MiB answer can list 2^17 entries).
		a.bytes = addSat(a.bytes, int64(s.GPUBytes()))
		per[s.Name] = a
		o.statsBytes = addSat(o.statsBytes, int64(s.GPUBytes()))
	}
	queued := c.readQueues(ctx, now) // nil: unknown

	var notLoaded []string
	c.mu.Lock()
	for name, st := range o.obs.Models {
		if st.State == plan.StateReady {
			if _, ok := c.firstReady[name]; !ok {
				c.firstReady[name] = now
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
		if a, ok := per[name]; ok {
			st.LastUsed, st.MeasuredBytes = a.last, a.bytes
			o.demand[name] = c.arrivedLocked(name, now, a.finished)
			q, known := queued[name]
			if queued == nil {
				q = -1
			} else if !known {
				q = 0
			}
			st.Queued, st.Executing = c.inFlightLocked(name, a.finished, q)
		} else {
			delete(c.lastCount, name)
			delete(c.work, name)
		}
		o.obs.Models[name] = st
	}
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
}

// inFlightLocked returns the queued and executing requests of name from its finished-request
// count and its queue length (Triton's nv_inference_pending_request_count; -1: unknown).
//
// Triton reports the queue but not what executes. A request leaves the queue when it starts
// executing and counts as finished when it ends, so when the queue holds q requests at least
// one request executes ahead of them (every instance is busy, or nothing would wait): the
// model owes q + 1 more finished requests, and it is executing until they are counted. With
// the queue unknown (metrics unreadable), a model that finished requests since the last loop
// counts one executing. A finished count below the last (Triton restarted) starts afresh.
func (c *Controller) inFlightLocked(name string, finished uint64, queued int) (q, executing int) {
	w := c.work[name]
	if finished < w.finished {
		w = work{}
	}
	active := finished > w.finished
	if queued > 0 {
		w.owed = max(w.owed, finished+uint64(queued)+1)
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

// readQueues reads Triton's queue length per model (nv_inference_pending_request_count, summed
// over versions) from cfg.TritonMetricsURL; nil when it is not configured or not readable (the
// failure is logged once when it starts, then at most every deviceWarnEvery).
func (c *Controller) readQueues(ctx context.Context, now time.Time) map[string]int {
	if c.cfg.TritonMetricsURL == "" {
		return nil
	}
	fams, err := scrapeMetrics(ctx, c.metricsClient, c.cfg.TritonMetricsURL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.queueErrSince.IsZero() || now.Sub(c.queueWarnAt) >= deviceWarnEvery {
			c.deps.Log.Warn("triton queue lengths unreadable; models that served requests in the last loop count as busy",
				"err", err, "next_warning_in", deviceWarnEvery)
			c.queueWarnAt = now
		}
		if c.queueErrSince.IsZero() {
			c.queueErrSince = now
		}
		return nil
	}
	if !c.queueErrSince.IsZero() {
		c.deps.Log.Info("triton queue lengths readable again", "unreadable_for", now.Sub(c.queueErrSince))
		c.queueErrSince, c.queueWarnAt = time.Time{}, time.Time{}
	}
	out := map[string]int{}
	for _, f := range fams {
		if f.GetName() != metricPending {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" {
					out[l.GetValue()] += int(max(m.GetGauge().GetValue(), 0))
				}
			}
		}
	}
	return out
}

// addSat is a + b for a, b ≥ 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
