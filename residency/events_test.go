package residency

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

func TestKubeEvents(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := cs.EventsV1().Events("ml").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	k, err := NewKubeEventsFor(ctx, cs, "ml", "triton-0")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	k.Event(true, "OverPeak", "fat measured 3.00GiB, above its admitted peak 2.00GiB")
	select {
	case ev := <-w.ResultChan():
		e, ok := ev.Object.(*eventsv1.Event)
		if ev.Type != watch.Added || !ok {
			t.Fatalf("watch event %v %T", ev.Type, ev.Object)
		}
		if e.Type != corev1.EventTypeWarning || e.Reason != "OverPeak" || e.Regarding.Kind != "Pod" || e.Regarding.Name != "triton-0" ||
			e.Note != "fat measured 3.00GiB, above its admitted peak 2.00GiB" || e.ReportingController != "inferscale-residency" {
			t.Errorf("event = %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("no event recorded")
	}
	if _, err := NewKubeEventsFor(ctx, cs, "", "x"); err == nil {
		t.Error("empty namespace accepted")
	}
}

func TestNewKubeEventsOutsideCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := NewKubeEvents(context.Background(), "ml", "p"); err != ErrNotInCluster {
		t.Errorf("err = %v, want ErrNotInCluster", err)
	}
}
