package residency

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
)

// ErrNotInCluster is returned by NewKubeEvents outside a Kubernetes pod; the sidecar then
// records no events.
var ErrNotInCluster = errors.New("not running in a Kubernetes cluster")

// KubeEvents records events.k8s.io/v1 Events about the sidecar's pod through client-go's event
// broadcaster (which aggregates repeats into series).
type KubeEvents struct {
	b   events.EventBroadcaster
	rec events.EventRecorder
	pod *corev1.ObjectReference
}

// NewKubeEvents records events about pod namespace/name with the in-cluster configuration;
// ErrNotInCluster outside a cluster. Close stops it.
func NewKubeEvents(ctx context.Context, namespace, name string) (*KubeEvents, error) {
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, ErrNotInCluster
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewKubeEventsFor(ctx, cs, namespace, name)
}

// NewKubeEventsFor is NewKubeEvents over a given clientset (a fake one in tests).
func NewKubeEventsFor(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*KubeEvents, error) {
	if namespace == "" || name == "" {
		return nil, fmt.Errorf("pod namespace %q and name %q: both required (set POD_NAMESPACE and POD_NAME from the downward API)", namespace, name)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("start event recording: %w", err)
	}
	return &KubeEvents{b: b, rec: b.NewRecorder(scheme.Scheme, "inferscale-residency"),
		pod: &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name}}, nil
}

// Event implements Events.
func (k *KubeEvents) Event(warning bool, reason, message string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	k.rec.Eventf(k.pod, nil, typ, reason, "Residency", "%s", message)
}

// Close flushes and stops the broadcaster.
func (k *KubeEvents) Close() { k.b.Shutdown() }
