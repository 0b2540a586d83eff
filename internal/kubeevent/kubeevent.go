// Package kubeevent writes events.k8s.io/v1 Events through client-go's dynamic client.
//
// Both running parts record Events (the scaler on ScaledObjects, the residency sidecar on its
// pod) and neither may import the other, so the one write both need lives here. It uses the
// dynamic client rather than the typed clientset on purpose: a typed client
// (k8s.io/client-go/kubernetes/...) links k8s.io/client-go/kubernetes/scheme, which registers
// every built-in API group at start-up. In the sidecar that cost about 15 MiB of resident
// memory (BENCHMARKS.md); in the scaler it doubled the binary (30.8 MB → 59.6 MB) and its
// file-backed resident pages (RssFile 19 → 28–31 MiB).
package kubeevent

import (
	"context"
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// GVR is events.k8s.io/v1 events.
var GVR = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}

// Create writes ev in ev.Namespace. Errors: the conversion to unstructured (wrapped), or the
// API server's answer as the dynamic client returns it.
func Create(ctx context.Context, c dynamic.Interface, ev *eventsv1.Event) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return fmt.Errorf("event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("events.k8s.io/v1")
	u.SetKind("Event")
	_, err = c.Resource(GVR).Namespace(ev.Namespace).Create(ctx, u, metav1.CreateOptions{})
	return err
}
