package front

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
)

// sentWait bounds how long the release of a model's held requests waits for one request to go
// upstream before releasing the next (a stuck request must not hold up the rest).
const sentWait = time.Second

// hasQueue reports whether requests for the model are held or being released now.
func (f *Front) hasQueue(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queues[name] != nil
}

// hold queues a request of size bytes for the model and waits until it is released (w, nil:
// forward it and close w.sent once sent), refused (nil, r) or given up by the client (nil, nil).
// arrived is when the front received the request: the queue keeps arrival order by it, so that
// a request held again after a stale READY (it was forwarded, and Triton answered NOT_FOUND)
// takes its place ahead of requests that arrived after it, and Held reports the oldest arrival.
// The wait ends at the hold timeout or the client's deadline, whichever comes first. A request
// the model's queue cannot take (count, or bytes held plus chunked bodies being read for the
// model) fails UNAVAILABLE (queue_full); one that would pass the pod's MaxTotalHeldBytes fails
// RESOURCE_EXHAUSTED (hold_budget).
func (f *Front) hold(ctx context.Context, name string, size int64, arrived time.Time) (*waiter, *refusal) {
	f.mu.Lock()
	q := f.queues[name]
	if size > f.cfg.MaxHeldBytes {
		f.mu.Unlock()
		f.m.FastFailed.WithLabelValues(name, "queue_full").Inc()
		return nil, f.unavailable("queue_full", fmt.Sprintf("model %q is not ready and the request's %d bytes exceed the hold bound %d", name, size, f.cfg.MaxHeldBytes))
	}
	var n int
	var b int64
	if q != nil {
		n, b = len(q.held), q.bytes
	}
	// HTTP requests whose bodies are being read to be held count against the model's bounds
	// as they do in readHeldBody (their reader's own reservation has ended when it calls hold).
	n += f.readers[name]
	b += f.reading[name]
	if n+1 > f.cfg.MaxHeldRequests || b+size > f.cfg.MaxHeldBytes {
		f.mu.Unlock()
		f.m.FastFailed.WithLabelValues(name, "queue_full").Inc()
		return nil, f.unavailable("queue_full", fmt.Sprintf("model %q is not ready and its hold queue is full (%d requests, %d bytes held or being read; bounds %d, %d)",
			name, n, b, f.cfg.MaxHeldRequests, f.cfg.MaxHeldBytes))
	}
	if f.heldTotal+size > f.cfg.MaxTotalHeldBytes {
		held := f.heldTotal
		f.mu.Unlock()
		f.m.FastFailed.WithLabelValues(name, "hold_budget").Inc()
		return nil, f.holdBudgetFull(name, held, size)
	}
	select {
	case <-f.done:
		f.mu.Unlock()
		return nil, f.unavailable("shutdown", "front is shutting down")
	default:
	}
	if f.noHolds {
		f.mu.Unlock()
		f.m.FastFailed.WithLabelValues(name, "draining").Inc()
		return nil, f.unavailable("draining", fmt.Sprintf("model %q is not ready and the pod is draining (it loads nothing more): retry on another replica", name))
	}
	if q == nil {
		q = &queue{kick: make(chan struct{}, 1)}
		f.queues[name] = q
		f.wg.Add(1)
		go f.watch(name, q)
	}
	w := &waiter{size: size, arrived: arrived, queued: time.Now(), ready: make(chan struct{}), sent: make(chan struct{})}
	i := len(q.held) // behind every request that arrived before it (nearly always the end)
	for i > 0 && q.held[i-1].arrived.After(arrived) {
		i--
	}
	q.held = slices.Insert(q.held, i, w)
	q.bytes += size
	f.heldTotal += size
	first := len(q.held) == 1
	f.mu.Unlock()
	f.m.HeldRequests.WithLabelValues(name).Inc()
	if first && f.deps.OnHold != nil {
		f.deps.OnHold(name)
	}

	timer := time.NewTimer(f.cfg.HoldTimeout)
	defer timer.Stop()
	var gaveUp *refusal
	select {
	case <-w.ready:
	case <-timer.C:
		gaveUp = f.unavailable("hold_timeout", fmt.Sprintf("model %q was not ready within the hold timeout %s", name, f.cfg.HoldTimeout))
	case <-ctx.Done():
		gaveUp = &refusal{reason: "cancelled"}
	}
	if gaveUp != nil {
		f.mu.Lock()
		if !w.released { // still queued: leave the queue
			if i := slices.Index(q.held, w); i >= 0 {
				q.held = slices.Delete(q.held, i, i+1)
				q.bytes -= w.size
				f.heldTotal -= w.size
			}
			f.mu.Unlock()
			f.left(name, w, gaveUp.reason)
			if gaveUp.reason == "cancelled" {
				return nil, nil
			}
			return nil, gaveUp
		}
		f.mu.Unlock() // released meanwhile: ready is closed, go on as released
	}
	if w.err != nil {
		return nil, w.err
	}
	return w, nil
}

// left records a held request leaving the queue; reason "" means released to be forwarded.
func (f *Front) left(name string, w *waiter, reason string) {
	f.m.HeldRequests.WithLabelValues(name).Dec()
	f.m.HoldSeconds.WithLabelValues(name).Observe(time.Since(w.queued).Seconds())
	if reason != "" {
		f.m.HoldFailed.WithLabelValues(name, reason).Inc()
	}
}

// watch serves one model's queue until it is empty: it fails the held requests when the model
// can no longer be served here (out of the catalog, quarantined, never fits, or not loading
// while the pod drains), and releases them in arrival order once Triton reports the model
// ready; between checks it waits RecheckInterval, a Recheck or StartDrain.
func (f *Front) watch(name string, q *queue) {
	defer f.wg.Done()
	tick := time.NewTicker(f.cfg.RecheckInterval)
	defer tick.Stop()
	for {
		f.mu.Lock()
		if len(q.held) == 0 {
			delete(f.queues, name)
			f.mu.Unlock()
			return
		}
		select {
		case <-f.done:
			f.failHeldLocked(name, q, f.unavailable("shutdown", "front is shutting down"))
			f.mu.Unlock()
			continue
		default:
		}
		noLoads := f.noHolds // a drain has begun: the pod starts no load
		f.mu.Unlock()
		var r *refusal
		ready := false
		switch v := f.deps.Readiness.Verdict(name); v {
		case NotInCatalog:
			r = &refusal{code: codes.NotFound, reason: "not_found", msg: fmt.Sprintf("model %q left this pool's catalog while held", name)}
		case Quarantined:
			r = f.unavailable("quarantined", fmt.Sprintf("model %q was quarantined while held (repeated failed loads)", name))
		case NeverFits:
			r = f.unavailable("never_fits", fmt.Sprintf("model %q can never be loaded in this pod", name))
		case NotReady:
			// While draining, no load is under way (that would be Loading) and none will start,
			// so these requests would wait out the drain for nothing: served elsewhere instead.
			// Triton is asked first, since the verdict can trail a load that has just finished.
			ready = f.modelReady(context.Background(), name)
			if !ready && noLoads {
				r = f.unavailable("draining", fmt.Sprintf("model %q is not loaded and the pod is draining (it loads nothing more): retry on another replica", name))
			}
		default:
			ready = f.modelReady(context.Background(), name)
		}
		if r != nil {
			f.mu.Lock()
			f.failHeldLocked(name, q, r)
			f.mu.Unlock()
			continue
		}
		if ready {
			f.release(name, q)
			continue
		}
		select {
		case <-tick.C:
		case <-q.kick:
		case <-f.done:
		}
	}
}

// release lets the held requests go, one at a time in arrival order, each once the one before
// it is on its way upstream; requests that arrive meanwhile queue behind and go too.
func (f *Front) release(name string, q *queue) {
	for {
		f.mu.Lock()
		if len(q.held) == 0 {
			f.mu.Unlock()
			return
		}
		w := q.held[0]
		q.held = q.held[1:]
		q.bytes -= w.size
		f.heldTotal -= w.size
		w.released = true
		close(w.ready)
		f.mu.Unlock()
		f.left(name, w, "")
		select {
		case <-w.sent:
		case <-time.After(sentWait):
		case <-f.done:
			return
		}
	}
}

// failHeldLocked refuses every request held for the model with r. f.mu is held.
func (f *Front) failHeldLocked(name string, q *queue, r *refusal) {
	for _, w := range q.held {
		w.released, w.err = true, r
		close(w.ready)
		f.left(name, w, r.reason)
	}
	f.heldTotal -= q.bytes
	q.held, q.bytes = nil, 0
}
