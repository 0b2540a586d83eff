package residency

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

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

// countSample is one reading of a model's cumulative inference count.
type countSample struct {
	at    time.Time
	count uint64
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

// observe re-reads Triton's index and statistics, the device and the demand source; nothing
// about Triton's state is carried over from earlier loops except the time each model was first
// seen READY and the statistics samples for demand. c.mu must not be held.
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
		last  time.Time
		count uint64
		bytes int64
	}
	per := make(map[string]agg, len(stats))
	for _, s := range stats {
		a := per[s.Name]
		if s.LastInference.After(a.last) {
			a.last = s.LastInference
		}
		a.count += s.InferenceCount
		a.bytes += int64(s.GPUBytes())
		per[s.Name] = a
		o.statsBytes += int64(s.GPUBytes())
	}

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
			o.demand[name] = c.rateLocked(name, now, a.count)
		} else {
			delete(c.samples, name)
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
		if err != nil {
			// Missing demand is not zero demand for loaded models (they use statistics); for the
			// others it means no load is started on their behalf this loop.
			c.deps.Log.Warn("demand of models not loaded unavailable", "err", err)
		}
		for _, name := range notLoaded {
			if r, ok := rates[name]; ok && !math.IsNaN(r) && !math.IsInf(r, 0) && r >= 0 {
				o.demand[name] = r
			}
		}
	}

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

// rateLocked records count for name at now and returns the request rate over the demand
// window: (newest − oldest count) ÷ their time apart, 0 with a single sample. A count below
// the previous one (Triton restarted) starts the history again.
func (c *Controller) rateLocked(name string, now time.Time, count uint64) float64 {
	h := c.samples[name]
	if n := len(h); n > 0 && count < h[n-1].count {
		h = h[:0]
	}
	h = append(h, countSample{at: now, count: count})
	// Keep the newest sample at or before the window's start as the baseline.
	cut := 0
	for i := range h {
		if !h[i].at.After(now.Add(-c.cfg.DemandWindow)) {
			cut = i
		}
	}
	h = h[cut:]
	c.samples[name] = h
	first, last := h[0], h[len(h)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(last.count-first.count) / dt
}
