package residency

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/inferscale/inferscale/internal/kubeevent"
)

func TestKubeEvents(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := eventsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClient(scheme)
	k, err := NewKubeEventsFor(client, "ml", "triton-0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	k.now = func() time.Time { return t0 }
	k.Event(true, "OverPeak", "fat measured 3.00GiB, above its admitted peak 2.00GiB")
	k.Event(true, "OverPeak", "fat measured 3.00GiB, above its admitted peak 2.00GiB") // deduplicated
	k.Event(false, "Loaded", strings.Repeat("x", 2000))
	k.Close()
	k.Event(true, "AfterClose", "dropped, not a send on the closed queue")
	k.Close()

	var got []eventsv1.Event
	for _, a := range client.Actions() {
		c, ok := a.(k8stesting.CreateAction)
		if !ok || a.GetResource() != kubeevent.GVR || a.GetNamespace() != "ml" {
			t.Fatalf("unexpected action %#v", a)
		}
		var ev eventsv1.Event
		u := c.GetObject().(interface{ UnstructuredContent() map[string]any })
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 2 {
		t.Fatalf("%d events created, want 2 (one deduplicated)", len(got))
	}
	pod := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ml", Name: "triton-0"}
	e := got[0]
	if diff := cmp.Diff([]string{"Warning", "OverPeak", "fat measured 3.00GiB, above its admitted peak 2.00GiB", "inferscale.io/residency", "triton-0", "Residency", "triton-0."},
		[]string{e.Type, e.Reason, e.Note, e.ReportingController, e.ReportingInstance, e.Action, e.GenerateName}); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	if e.Regarding != pod || !e.EventTime.Time.Equal(t0) {
		t.Errorf("regarding %+v, time %v", e.Regarding, e.EventTime)
	}
	if n := len(got[1].Note); n != maxEventNote || got[1].Type != "Normal" {
		t.Errorf("long note: %d bytes, type %q; want truncated to %d, Normal", n, got[1].Type, maxEventNote)
	}
	if _, err := NewKubeEventsFor(client, "", "x", nil); err == nil {
		t.Error("empty namespace accepted")
	}
}

func TestNewKubeEventsOutsideCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := NewKubeEvents("ml", "p", nil); err != ErrNotInCluster {
		t.Errorf("err = %v, want ErrNotInCluster", err)
	}
}
