package kubeevent

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestCreate writes one Event and reads back, from the create action the dynamic client
// sent, every field a `kubectl describe` shows, with the apiVersion and kind the API server
// needs on an unstructured object.
func TestCreate(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := eventsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := dynamicfake.NewSimpleDynamicClient(scheme)
	at := time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.UTC)
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "team-a", Name: "resnet50.1"},
		EventTime:           metav1.NewMicroTime(at),
		ReportingController: "inferscale.io/scaler",
		ReportingInstance:   "scaler-0",
		Action:              "Decide",
		Reason:              "Unavailable",
		Type:                corev1.EventTypeWarning,
		Note:                "no usable data",
		Regarding:           corev1.ObjectReference{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Namespace: "team-a", Name: "resnet50"},
	}
	if err := Create(context.Background(), c, ev); err != nil {
		t.Fatal(err)
	}
	acts := c.Actions()
	if len(acts) != 1 {
		t.Fatalf("%d actions, want 1 create", len(acts))
	}
	ca, ok := acts[0].(k8stesting.CreateAction)
	if !ok || ca.GetResource() != GVR || ca.GetNamespace() != "team-a" {
		t.Fatalf("action %#v, want a create of %v in team-a", acts[0], GVR)
	}
	u := ca.GetObject().(runtime.Unstructured).UnstructuredContent()
	var got eventsv1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, &got); err != nil {
		t.Fatal(err)
	}
	if u["apiVersion"] != "events.k8s.io/v1" || u["kind"] != "Event" {
		t.Errorf("apiVersion %v kind %v, want events.k8s.io/v1 Event", u["apiVersion"], u["kind"])
	}
	if !got.EventTime.Time.Equal(at) || got.Reason != "Unavailable" || got.Type != corev1.EventTypeWarning || got.Note != "no usable data" ||
		got.Regarding.Kind != "ScaledObject" || got.Regarding.Name != "resnet50" || got.ReportingController != "inferscale.io/scaler" {
		t.Errorf("written event %+v, want the one given (event time %v)", got, at)
	}
}
