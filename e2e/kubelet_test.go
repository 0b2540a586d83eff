//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// pairLauncher starts the processes of one pool pod: the Triton fake and
// its residency sidecar. Implemented in pair_test.go.
type pairLauncher interface {
	// launch starts the pair for the pod and returns it once the
	// processes run (not yet ready).
	launch(ctx context.Context, pod *corev1.Pod) (*pair, error)
}

// pair is one pod's running processes and addresses.
type pair struct {
	triton, sidecar *proc
	grpcAddr        string // Triton gRPC, host:port
	frontAddr       string // the sidecar's inference front, host:port; "" when it runs none
	metricsAddr     string // Triton /metrics, host:port
	sidecarAddr     string // residency HTTP: /readyz, /metrics, POST /drain
	frontHTTPAddr   string // the sidecar's HTTP/REST inference front, host:port
	tritonHTTPAddr  string // where the front sends HTTP/REST: cmd/tritonfake serves none
	dir             string
}

// podRuntime is the harness-kubelet's view of one pod.
type podRuntime struct {
	name      string
	uid       types.UID
	created   time.Time
	pair      *pair
	ready     atomic.Bool // the pod's Ready condition as last written
	stopping  atomic.Bool // deletion seen: endpoint removed, drain under way
	cancel    context.CancelFunc
	done      chan struct{}
	drainTook time.Duration
	// notReadyInDrain: the sidecar's readiness failed while the pod was
	// draining, before its processes were stopped.
	notReadyInDrain atomic.Bool
}

// drainRecord is what the kubelet saw of one drained pod.
type drainRecord struct {
	took     time.Duration
	notReady bool
}

// kubelet plays the kubelet for the pool's pods on the fake node: it runs
// a process pair per bound pod after a cold-start delay, reports the pod
// Ready when the sidecar's /readyz passes (a readiness probe), and on
// deletion drains the pair through the sidecar's POST /drain before
// killing it and confirming the deletion, as the kubelet does after
// preStop and the grace period.
type kubelet struct {
	c         *cluster
	ns        string
	selector  string
	launcher  pairLauncher
	prom      *promServer
	coldStart time.Duration

	lister listersv1.PodLister
	stopCh chan struct{}
	wake   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	pods    map[types.UID]*podRuntime
	drains  map[string]drainRecord // pod name -> drain
	started int                    // pairs ever started
	drained int                    // pairs drained and stopped
}

func startKubelet(c *cluster, ns, selector string, launcher pairLauncher, prom *promServer, coldStart time.Duration) *kubelet {
	k := &kubelet{c: c, ns: ns, selector: selector, launcher: launcher, prom: prom, coldStart: coldStart,
		stopCh: make(chan struct{}), wake: make(chan struct{}, 1), pods: map[types.UID]*podRuntime{}, drains: map[string]drainRecord{}}
	f := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods()
	k.lister = inf.Lister()
	poke := func(any) { k.poke() }
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, n any) { k.poke() },
	})
	f.Start(k.stopCh)
	f.WaitForCacheSync(k.stopCh)
	k.wg.Add(1)
	go k.loop()
	return k
}

func (k *kubelet) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *kubelet) loop() {
	defer k.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-k.stopCh:
			return
		case <-k.wake:
		case <-t.C:
		}
		k.sync()
	}
}

// sync reconciles the running pairs with the pods bound to the node.
func (k *kubelet) sync() {
	pods, err := k.lister.List(labels.Everything())
	if err != nil {
		return
	}
	seen := map[types.UID]bool{}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range pods {
		if p.Spec.NodeName != nodeName {
			continue // not scheduled yet
		}
		seen[p.UID] = true
		rt, known := k.pods[p.UID]
		switch {
		case p.DeletionTimestamp != nil && known:
			if rt.stopping.CompareAndSwap(false, true) {
				logf("kubelet: pod %s deleted: draining", p.Name)
				k.wg.Add(1)
				go func() { defer k.wg.Done(); k.terminate(rt) }()
			}
		case p.DeletionTimestamp != nil:
			// Deleted before it ever ran: confirm at once.
			k.wg.Add(1)
			go func() { defer k.wg.Done(); k.confirmDeletion(p.Name, p.UID) }()
		case !known:
			ctx, cancel := context.WithCancel(context.Background())
			rt = &podRuntime{name: p.Name, uid: p.UID, created: time.Now(), cancel: cancel, done: make(chan struct{})}
			k.pods[p.UID] = rt
			k.started++
			k.wg.Add(1)
			go k.run(ctx, rt, p.DeepCopy())
		}
	}
	for uid, rt := range k.pods {
		if !seen[uid] && !rt.stopping.Load() {
			// Force-deleted (or the namespace went away): kill without drain.
			rt.stopping.Store(true)
			rt.cancel()
		}
	}
}

// run starts the pod's pair after the cold start and acts as its
// readiness probe until the pod is deleted.
func (k *kubelet) run(ctx context.Context, rt *podRuntime, pod *corev1.Pod) {
	defer k.wg.Done()
	defer close(rt.done)
	select { // image pull, container start: the cold start before the pair exists
	case <-ctx.Done():
		return
	case <-time.After(k.coldStart):
	}
	pr, err := k.launcher.launch(ctx, pod)
	if err != nil {
		logf("kubelet: pod %s: %v", rt.name, err)
		return
	}
	k.mu.Lock()
	rt.pair = pr
	k.mu.Unlock()
	_ = k.prom.setTarget(pr.metricsAddr, map[string]string{"namespace": k.ns, "pod": rt.name, "container": "triton"})
	_ = k.prom.setTarget(pr.sidecarAddr, map[string]string{"namespace": k.ns, "pod": rt.name, "container": "residency"})
	defer func() {
		_ = k.prom.setTarget(pr.metricsAddr, nil)
		_ = k.prom.setTarget(pr.sidecarAddr, nil)
		pr.sidecar.stop(5 * time.Second)
		pr.triton.stop(5 * time.Second)
	}()
	probe := httpOK(plainClient, "http://"+pr.sidecarAddr+"/readyz")
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if done, err := pr.triton.exited(); done {
			logf("kubelet: pod %s: triton exited: %v", rt.name, err)
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ready := probe(pctx) == nil
		cancel()
		if ready != rt.ready.Load() && ctx.Err() == nil {
			if err := k.setReady(ctx, rt, ready); err != nil {
				logf("kubelet: pod %s: status: %v", rt.name, err)
				continue
			}
			rt.ready.Store(ready)
			if !ready && rt.stopping.Load() {
				rt.notReadyInDrain.Store(true)
			}
			logf("kubelet: pod %s ready=%v (%.1fs after creation)", rt.name, ready, time.Since(rt.created).Seconds())
		}
	}
}

// terminate drains the pod's pair, stops it and confirms the deletion.
func (k *kubelet) terminate(rt *podRuntime) {
	start := time.Now()
	k.mu.Lock()
	pr := rt.pair
	k.mu.Unlock()
	if pr != nil {
		if err := k.drain(pr); err != nil {
			logf("kubelet: pod %s: drain: %v", rt.name, err)
		}
	}
	rt.cancel()
	<-rt.done
	rt.drainTook = time.Since(start)
	k.mu.Lock()
	delete(k.pods, rt.uid)
	k.drained++
	k.drains[rt.name] = drainRecord{took: rt.drainTook, notReady: rt.notReadyInDrain.Load()}
	k.mu.Unlock()
	logf("kubelet: pod %s drained and stopped in %.1fs", rt.name, rt.drainTook.Seconds())
	k.confirmDeletion(rt.name, rt.uid)
}

// drain calls the sidecar's POST /drain, which answers when Triton has no
// queued or running work (or the drain deadline passed): what Triton's
// preStop hook waits on in the chart.
func (k *kubelet) drain(pr *pair) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+pr.sidecarAddr+"/drain", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /drain: %s", resp.Status)
	}
	return nil
}

// confirmDeletion removes the pod object as the kubelet does once its
// containers are gone (grace period 0, pinned to the UID).
func (k *kubelet) confirmDeletion(name string, uid types.UID) {
	err := k.c.kube.CoreV1().Pods(k.ns).Delete(context.Background(), name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logf("kubelet: confirm deletion of %s: %v", name, err)
	}
}

// setReady writes the pod status a kubelet would: Running on 127.0.0.1
// with every container running and the Ready condition as probed.
func (k *kubelet) setReady(ctx context.Context, rt *podRuntime, ready bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := k.c.kube.CoreV1().Pods(k.ns).Get(ctx, rt.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID != rt.uid {
			return fmt.Errorf("pod %s was replaced", rt.name)
		}
		now := metav1.Now()
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
		p.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
		p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.1"}}
		if p.Status.StartTime == nil {
			p.Status.StartTime = &now
		}
		setCond := func(t corev1.PodConditionType, s corev1.ConditionStatus) {
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == t {
					if p.Status.Conditions[i].Status != s {
						p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = s, now
					}
					return
				}
			}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
		}
		setCond(corev1.PodInitialized, corev1.ConditionTrue)
		setCond(corev1.ContainersReady, st)
		setCond(corev1.PodReady, st)
		statuses := func(cs []corev1.Container) []corev1.ContainerStatus {
			var out []corev1.ContainerStatus
			for _, c := range cs {
				out = append(out, corev1.ContainerStatus{
					Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: ready, Started: ptr.To(true),
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *p.Status.StartTime}},
				})
			}
			return out
		}
		p.Status.ContainerStatuses = statuses(p.Spec.Containers)
		p.Status.InitContainerStatuses = statuses(p.Spec.InitContainers)
		_, err = k.c.kube.CoreV1().Pods(k.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}

// endpoint is a ready, not terminating pod: what an EndpointSlice lists.
type endpoint struct {
	pod      string
	grpcAddr string
}

// clientAddr is where the pod's clients send inference requests (the load generator's
// endpoint): the sidecar's front when it runs one, as the chart's Service does, else Triton.
func (p *pair) clientAddr() string {
	if p.frontAddr != "" {
		return p.frontAddr
	}
	return p.grpcAddr
}

// endpoints returns the pods traffic may go to, sorted by name.
func (k *kubelet) endpoints() []endpoint {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []endpoint
	for _, rt := range k.pods {
		if rt.pair != nil && rt.ready.Load() && !rt.stopping.Load() {
			out = append(out, endpoint{pod: rt.name, grpcAddr: rt.pair.clientAddr()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod < out[j].pod })
	return out
}

// counts returns the running pairs, and of them the ready ones.
func (k *kubelet) counts() (running, ready int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, rt := range k.pods {
		if rt.pair != nil {
			running++
			if rt.ready.Load() && !rt.stopping.Load() {
				ready++
			}
		}
	}
	return running, ready
}

// stop kills every pair (no drain: the test is over) and waits.
func (k *kubelet) stop() {
	close(k.stopCh)
	k.mu.Lock()
	for _, rt := range k.pods {
		rt.cancel()
	}
	k.mu.Unlock()
	k.wg.Wait()
}

// pairDir is the scratch directory of one pod's processes.
func pairDir(root, pod string) string { return filepath.Join(root, "pods", pod) }

// addr formats a loopback address.
func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// onlyPair returns the pair of the single running, ready pod.
func (k *kubelet) onlyPair(t *testing.T) *pair {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*pair
	for _, rt := range k.pods {
		if rt.pair != nil && rt.ready.Load() && !rt.stopping.Load() {
			out = append(out, rt.pair)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d ready pods, want 1", len(out))
	}
	return out[0]
}

// drainedCount is the number of pairs drained and stopped so far.
func (k *kubelet) drainedCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.drained
}

// drainOf returns what the kubelet saw of a pod's drain, if it was drained.
func (k *kubelet) drainOf(pod string) (drainRecord, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.drains[pod]
	return r, ok
}
