package residency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/inferscale/inferscale/internal/kubeevent"
)

// ErrNotInCluster is returned by NewKubeEvents outside a Kubernetes pod; the sidecar then
// records no events.
var ErrNotInCluster = errors.New("not running in a Kubernetes cluster")

// Event limits of events.k8s.io/v1 validation.
const (
	maxEventNote   = 1024
	maxEventReason = 128
)

// KubeEvents records events.k8s.io/v1 Events about the sidecar's pod, asynchronously so that
// the controller never waits on the API server. It writes them with client-go's dynamic client
// rather than its typed clientset and event broadcaster: those register every built-in API
// type at start-up, which alone costs about 15 MiB of the sidecar's resident memory. An event
// equal (type, reason, note) to one sent within DedupWindow is dropped; so are events while
// the queue is full (both counted in the log).
type KubeEvents struct {
	client   dynamic.Interface
	pod      corev1.ObjectReference
	instance string
	log      *slog.Logger
	now      func() time.Time
	queue    chan *eventsv1.Event
	done     chan struct{}

	mu     sync.Mutex
	closed bool // set by Close; queue is closed and Event is a no-op
	sent   map[string]time.Time
}

// DedupWindow is the period within which an identical event is sent once.
const DedupWindow = 5 * time.Minute

// NewKubeEvents records events about pod namespace/name with the in-cluster configuration;
// ErrNotInCluster outside a cluster. Close flushes and stops it.
func NewKubeEvents(namespace, name string, log *slog.Logger) (*KubeEvents, error) {
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, ErrNotInCluster
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewKubeEventsFor(client, namespace, name, log)
}

// NewKubeEventsFor is NewKubeEvents over a given client (a fake one in tests).
func NewKubeEventsFor(client dynamic.Interface, namespace, name string, log *slog.Logger) (*KubeEvents, error) {
	if namespace == "" || name == "" {
		return nil, fmt.Errorf("pod namespace %q and name %q: both required (set POD_NAMESPACE and POD_NAME from the downward API)", namespace, name)
	}
	if log == nil {
		log = slog.Default()
	}
	k := &KubeEvents{client: client, instance: name, log: log, now: time.Now,
		pod:   corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: namespace, Name: name},
		queue: make(chan *eventsv1.Event, 64), done: make(chan struct{}), sent: map[string]time.Time{}}
	go k.run()
	return k, nil
}

// Event implements Events.
func (k *KubeEvents) Event(warning bool, reason, note string) {
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if len(reason) > maxEventReason {
		reason = reason[:maxEventReason]
	}
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	now := k.now()
	key := typ + "\x00" + reason + "\x00" + note
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	if last, ok := k.sent[key]; ok && now.Sub(last) < DedupWindow {
		return
	}
	k.sent[key] = now
	for kk, t := range k.sent {
		if now.Sub(t) >= DedupWindow {
			delete(k.sent, kk)
		}
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: k.pod.Name + ".", Namespace: k.pod.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: "inferscale.io/residency",
		ReportingInstance:   k.instance,
		Action:              "Residency",
		Reason:              reason,
		Regarding:           k.pod,
		Note:                note,
		Type:                typ,
	}
	// The send never blocks, so it is made under mu: Close cannot close the queue between
	// the closed check above and the send.
	select {
	case k.queue <- ev:
	default:
		k.log.Warn("event dropped: queue full", "reason", reason, "note", note)
	}
}

func (k *KubeEvents) run() {
	defer close(k.done)
	for ev := range k.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := kubeevent.Create(ctx, k.client, ev)
		cancel()
		if err != nil {
			k.log.Warn("event not recorded", "reason", ev.Reason, "err", err)
		}
	}
}

// Close sends the queued events and stops. Events recorded after Close are dropped; Close
// may be called more than once.
func (k *KubeEvents) Close() {
	k.mu.Lock()
	if !k.closed {
		k.closed = true
		close(k.queue)
	}
	k.mu.Unlock()
	<-k.done
}
