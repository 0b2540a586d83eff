package scaler

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/inferscale/inferscale/internal/kubeevent"
	"github.com/inferscale/inferscale/scaler/decision"
)

// Event reasons the scaler writes on a ScaledObject (events.k8s.io/v1, so `kubectl describe
// scaledobject` and `kubectl get events` show why the pool has the size it has).
const (
	// EventTermChanged (Normal): the decision's winning term changed, e.g. slo → drain.
	EventTermChanged = "DecisionTermChanged"
	// EventDegraded (Warning): a signal is out; the decision uses the healthy ones and does not
	// go below its last good result.
	EventDegraded = "Degraded"
	// EventRecovered (Normal): every signal the decision uses is fresh again.
	EventRecovered = "Recovered"
	// EventUnavailable (Warning): every signal is out; RPCs answer Unavailable and KEDA's
	// fallback takes over after fallback.failureThreshold failures.
	EventUnavailable = "Unavailable"
)

// EventMinInterval is the least time between two events of one reason on one ScaledObject:
// a term that flips every refresh writes one event per 5 minutes, not one per refresh. The
// API server keeps events for an hour (kube-apiserver --event-ttl), so at most 12 per reason.
const EventMinInterval = 5 * time.Minute

// eventSpec is one event to write: type (Normal, Warning), reason and note.
type eventSpec struct {
	Type, Reason, Note string
}

// decisionEvents returns the events a new evaluation rec warrants after prev (hadPrev false:
// the trigger's first evaluation, which writes nothing: a new trigger's first answer may come
// before its queries were evaluated). Pure: the transitions are
//
//	a good answer after a good answer with another Term → DecisionTermChanged
//	good, not degraded → degraded                        → Degraded
//	degraded → good, not degraded                        → Recovered
//	good → no data (Err)                                 → Unavailable
func decisionEvents(prev decision.Recommendation, hadPrev bool, rec decision.Recommendation) []eventSpec {
	if !hadPrev {
		return nil
	}
	var out []eventSpec
	switch {
	case rec.Err != nil && prev.Err == nil:
		out = append(out, eventSpec{Type: corev1.EventTypeWarning, Reason: EventUnavailable,
			Note: fmt.Sprintf("no usable data: RPCs answer Unavailable, KEDA's fallback takes over: %v", rec.Err)})
	case rec.Err != nil:
	case prev.Err != nil:
		out = append(out, eventSpec{Type: corev1.EventTypeNormal, Reason: EventRecovered,
			Note: fmt.Sprintf("data again: desired %d replicas (%s): %s", rec.Replicas, rec.Term, rec.Reason)})
	default:
		if rec.Term != prev.Term {
			out = append(out, eventSpec{Type: corev1.EventTypeNormal, Reason: EventTermChanged,
				Note: fmt.Sprintf("desired %d replicas, decided by %s (was %s): %s", rec.Replicas, rec.Term, prev.Term, rec.Reason)})
		}
		switch {
		case rec.Degraded && !prev.Degraded:
			out = append(out, eventSpec{Type: corev1.EventTypeWarning, Reason: EventDegraded,
				Note: fmt.Sprintf("a signal is out or refused; deciding on the healthy ones, not below the last good result: %s", rec.Reason)})
		case !rec.Degraded && prev.Degraded:
			out = append(out, eventSpec{Type: corev1.EventTypeNormal, Reason: EventRecovered,
				Note: fmt.Sprintf("every signal fresh again: desired %d replicas (%s)", rec.Replicas, rec.Term)})
		}
	}
	return out
}

// eventRecorder is implemented by Targets that can write events (the cluster's).
// recordEvents reports whether every spec was queued (Events.Record); a caller
// that owes an event offers it again when one was not.
type eventRecorder interface {
	recordEvents(namespace, name string, specs []eventSpec) bool
}

// recordEvents is the server's one hook: after each evaluation it hands the transitions to
// the Targets when they can write events; otherwise (no Kubernetes) nothing happens.
func (s *Server) recordEvents(tr *trigger, prev decision.Recommendation, hadPrev bool, rec decision.Recommendation) {
	r, ok := s.targets.(eventRecorder)
	if !ok {
		return
	}
	if specs := decisionEvents(prev, hadPrev, rec); len(specs) > 0 {
		r.recordEvents(tr.namespace, tr.name, specs)
	}
}

// Limits of events.k8s.io/v1 validation.
const (
	maxEventNote  = 1024
	maxEventField = 128
)

// Events writes ScaledObject events through the events.k8s.io/v1 API (client-go's dynamic
// client, internal/kubeevent: the typed clientset doubled the binary), asynchronously: Record
// never blocks an evaluation (a full queue drops the event and counts it), each reason is
// written at most once per EventMinInterval per ScaledObject (an event past it is dropped
// and counted too), and a failed write is logged once per reason per interval too. Record
// reports the drops, so a caller that must get an event out (a retry storm) offers it again
// later. Run sends until its context ends.
type Events struct {
	client   dynamic.Interface
	instance string // reportingInstance: the pod's name
	log      *slog.Logger
	now      func() time.Time
	queue    chan *eventsv1.Event

	mu      sync.Mutex
	last    map[eventKey]time.Time // last written, per ScaledObject and reason; entries older than EventMinInterval are pruned
	swept   time.Time              // last prune of last
	dropped int                    // events dropped for a full queue
	limited int                    // events dropped by EventMinInterval
}

// eventKey is one ScaledObject's reason in Events.last (a struct: "a" + "/" + "b/c" and
// "a/b" + "/" + "c" are two keys, not one).
type eventKey struct{ namespace, name, reason string }

// NewEvents returns an Events writer; instance names this scaler replica (its pod name).
func NewEvents(client dynamic.Interface, instance string, log *slog.Logger) *Events {
	if instance == "" {
		instance, _ = os.Hostname()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Events{client: client, instance: truncate(instance, maxEventField), log: log, now: time.Now,
		queue: make(chan *eventsv1.Event, 256), last: map[eventKey]time.Time{}}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Record queues one event per spec on the ScaledObject namespace/name (uid: its UID, so
// `kubectl describe` finds them; may be empty), subject to EventMinInterval. It reports
// whether every spec was queued: false when one was dropped by EventMinInterval or for a
// full queue (a drop for a full queue does not count as a write for EventMinInterval).
func (e *Events) Record(namespace, name, uid string, specs []eventSpec) bool {
	now := e.now()
	e.mu.Lock()
	e.pruneLocked(now)
	e.mu.Unlock()
	queued := true
	for _, sp := range specs {
		key := eventKey{namespace, name, sp.Reason}
		e.mu.Lock()
		before, had := e.last[key]
		if had && now.Sub(before) < EventMinInterval {
			e.limited++
			e.mu.Unlock()
			queued = false
			continue
		}
		e.last[key] = now
		e.mu.Unlock()
		ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s.%x", truncate(name, 200), now.UnixNano())},
			EventTime:           metav1.NewMicroTime(now),
			ReportingController: "inferscale.io/scaler",
			ReportingInstance:   e.instance,
			Action:              "Decide",
			Reason:              sp.Reason,
			Type:                sp.Type,
			Note:                truncate(sp.Note, maxEventNote),
			Regarding: corev1.ObjectReference{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject",
				Namespace: namespace, Name: name, UID: types.UID(uid)},
		}
		select {
		case e.queue <- ev:
		default:
			e.mu.Lock()
			e.dropped++
			if had {
				e.last[key] = before
			} else {
				delete(e.last, key)
			}
			e.mu.Unlock()
			queued = false
		}
	}
	return queued
}

// pruneLocked drops, at most once per EventMinInterval, the entries of last that no longer
// limit anything (written EventMinInterval ago or earlier), so last holds only the keys of the
// last two intervals. Before, it kept one entry per ScaledObject and reason ever seen: every
// trigger a caller invents and --forget-after drops left one behind, without end.
func (e *Events) pruneLocked(now time.Time) {
	if now.Sub(e.swept) < EventMinInterval {
		return
	}
	for k, t := range e.last {
		if now.Sub(t) >= EventMinInterval {
			delete(e.last, k)
		}
	}
	e.swept = now
}

// Run writes queued events until ctx is done; it returns nil.
func (e *Events) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-e.queue:
			e.send(ctx, ev)
		}
	}
}

// send writes one event within 10 s; a failure is logged (Record's rate limit bounds how often).
func (e *Events) send(ctx context.Context, ev *eventsv1.Event) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := kubeevent.Create(wctx, e.client, ev); err != nil {
		e.log.Warn("event not written (check the events.k8s.io create RBAC in that namespace)",
			"namespace", ev.Namespace, "scaledObject", ev.Regarding.Name, "reason", ev.Reason, "err", err)
	}
}

// recordEvents implements eventRecorder for the cluster's Targets; without an Events writer
// there is nothing to write, and nothing is owed.
func (ct clusterTargets) recordEvents(namespace, name string, specs []eventSpec) bool {
	if ct.ev == nil {
		return true
	}
	t, _ := ct.c.Lookup(namespace, name)
	return ct.ev.Record(namespace, name, t.UID, specs)
}
