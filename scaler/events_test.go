package scaler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/inferscale/inferscale/internal/kubeevent"
	"github.com/inferscale/inferscale/scaler/decision"
)

func TestDecisionEvents(t *testing.T) {
	good := func(term decision.Term, degraded bool) decision.Recommendation {
		return decision.Recommendation{Replicas: 4, Term: term, Degraded: degraded, Reason: "r"}
	}
	out := decision.Recommendation{Err: errors.New("every signal is out")}
	tests := []struct {
		name    string
		prev    decision.Recommendation
		hadPrev bool
		rec     decision.Recommendation
		want    []string // reasons
	}{
		{name: "first evaluation writes nothing", rec: good(decision.TermSLO, false), want: nil},
		{name: "first evaluation without data writes nothing", rec: out, want: nil},
		{name: "same term", prev: good(decision.TermSLO, false), hadPrev: true, rec: good(decision.TermSLO, false), want: nil},
		{name: "term changes", prev: good(decision.TermSLO, false), hadPrev: true, rec: good(decision.TermDrain, false), want: []string{EventTermChanged}},
		{name: "degrades", prev: good(decision.TermSLO, false), hadPrev: true, rec: good(decision.TermDegraded, true), want: []string{EventTermChanged, EventDegraded}},
		{name: "stays degraded", prev: good(decision.TermDegraded, true), hadPrev: true, rec: good(decision.TermDegraded, true), want: nil},
		{name: "recovers", prev: good(decision.TermSLO, true), hadPrev: true, rec: good(decision.TermSLO, false), want: []string{EventRecovered}},
		{name: "loses all data", prev: good(decision.TermSLO, false), hadPrev: true, rec: out, want: []string{EventUnavailable}},
		{name: "stays without data", prev: out, hadPrev: true, rec: out, want: nil},
		{name: "data back", prev: out, hadPrev: true, rec: good(decision.TermSLO, false), want: []string{EventRecovered}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range decisionEvents(tt.prev, tt.hadPrev, tt.rec) {
				got = append(got, e.Reason)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	note := decisionEvents(good(decision.TermSLO, false), true, good(decision.TermDrain, false))[0]
	if want := "desired 4 replicas, decided by drain (was slo): r"; note.Note != want || note.Type != corev1.EventTypeNormal {
		t.Errorf("term event %+v, want a Normal event with note %q", note, want)
	}
}

func TestEventsRecordRateLimitAndWrite(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := eventsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dc := dynamicfake.NewSimpleDynamicClient(scheme)
	e := NewEvents(dc, "scaler-0", nil)
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	now := t0
	e.now = func() time.Time { return now }
	spec := []eventSpec{{Type: corev1.EventTypeWarning, Reason: EventUnavailable, Note: "no usable data"}}
	e.Record("team-a", "resnet50", "uid-1", spec)
	now = t0.Add(EventMinInterval - time.Second)
	e.Record("team-a", "resnet50", "uid-1", spec) // within the interval: dropped
	e.Record("team-b", "resnet50", "uid-2", spec) // another ScaledObject: written
	now = t0.Add(EventMinInterval)
	e.Record("team-a", "resnet50", "uid-1", spec) // interval over: written
	if got := len(e.queue); got != 3 {
		t.Fatalf("queued %d events, want 3 (one suppressed by EventMinInterval)", got)
	}

	for len(e.queue) > 0 {
		e.send(context.Background(), <-e.queue)
	}
	ul, err := dc.Resource(kubeevent.GVR).Namespace("team-a").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ul.Items) != 2 {
		t.Fatalf("team-a has %d events, want 2", len(ul.Items))
	}
	var ev eventsv1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ul.Items[0].Object, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Regarding.Kind != "ScaledObject" || ev.Regarding.APIVersion != "keda.sh/v1alpha1" || ev.Regarding.Name != "resnet50" ||
		string(ev.Regarding.UID) != "uid-1" || ev.Reason != EventUnavailable || ev.Type != corev1.EventTypeWarning ||
		ev.ReportingController != "inferscale.io/scaler" || ev.ReportingInstance != "scaler-0" || ev.Action == "" || ev.EventTime.IsZero() {
		t.Errorf("event %+v: want a Warning Unavailable on keda.sh/v1alpha1 ScaledObject team-a/resnet50 (uid-1) from inferscale.io/scaler", ev)
	}
}

// TestEventsRateLimitEntriesPruned: the per-reason rate-limit table keeps only entries that
// still limit something. Before, every ScaledObject and reason ever recorded stayed in it,
// so triggers invented and forgotten one after another grew it without end.
func TestEventsRateLimitEntriesPruned(t *testing.T) {
	e := NewEvents(nil, "scaler-0", nil)
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	now := t0
	e.now = func() time.Time { return now }
	spec := []eventSpec{{Type: corev1.EventTypeWarning, Reason: EventUnavailable, Note: "no usable data"}}
	for round := range 10 {
		now = t0.Add(time.Duration(round) * EventMinInterval)
		for i := range 100 {
			e.Record("team-a", fmt.Sprintf("pool-%d-%d", round, i), "", spec)
			<-e.queue
		}
	}
	if got := len(e.last); got != 100 {
		t.Errorf("rate-limit table holds %d entries after 10 intervals of 100 new ScaledObjects each, want 100 (the last interval's)", got)
	}
	// Pruning never lifts a limit still running: one recorded just now is still suppressed.
	e.Record("team-a", "pool-9-0", "", spec)
	if got := len(e.queue); got != 0 {
		t.Errorf("queued %d events for a reason written this interval, want 0", got)
	}
	// Two names that would join into one "namespace/name/reason" string are two keys.
	e.Record("a", "b/c", "", spec)
	e.Record("a/b", "c", "", spec)
	if got := len(e.queue); got != 2 {
		t.Errorf("queued %d events for a/(b/c) and (a/b)/c, want 2 (two ScaledObjects)", got)
	}
}

// TestEventsRecordReportsDrops: Record says whether every event was queued, and counts the
// events EventMinInterval drops as it counts those a full queue drops; a drop for a full
// queue is not a write, so the same reason goes out once the queue has room.
func TestEventsRecordReportsDrops(t *testing.T) {
	e := NewEvents(nil, "scaler-0", nil)
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	now := t0
	e.now = func() time.Time { return now }
	storm := []eventSpec{{Type: corev1.EventTypeWarning, Reason: EventRetryStorm, Note: "storm"}}
	if !e.Record("team-a", "pool", "", storm) {
		t.Fatal("first RetryStorm: not queued")
	}
	now = t0.Add(time.Minute)
	if e.Record("team-a", "pool", "", storm) || e.limited != 1 || len(e.queue) != 1 {
		t.Errorf("RetryStorm again within EventMinInterval: limited %d, %d queued; want refused (false), 1 limited, 1 queued", e.limited, len(e.queue))
	}
	// A full queue: the event is dropped, counted, reported, and not taken for a write.
	other := []eventSpec{{Type: corev1.EventTypeWarning, Reason: EventUnavailable, Note: "no data"}}
	for i := 0; len(e.queue) < cap(e.queue); i++ {
		e.Record("team-b", fmt.Sprintf("filler-%d", i), "", other)
	}
	if e.Record("team-a", "pool", "", other) || e.dropped != 1 {
		t.Errorf("full queue: dropped %d, want the event refused (false) and counted once", e.dropped)
	}
	<-e.queue
	if !e.Record("team-a", "pool", "", other) {
		t.Error("after a drop for a full queue, the same reason is refused as if it had been written")
	}
}
