// Package kube reads, from the Kubernetes API through client-go informers, what the scaler
// needs about each KEDA ScaledObject: the replica bounds (spec.minReplicaCount, KEDA default 0;
// spec.maxReplicaCount, KEDA default 100) and the replicas of its scale target
// (status.readyReplicas and spec.replicas of a Deployment or StatefulSet), and the target's
// measured cold start: pod creation to Ready over its recent pods (the pods it controls, found
// through a pod index by controller, so one Lookup reads only the target's own pods; needs
// list/watch on pods, and is simply absent without it). Reads come from informer caches and
// never call the API server.
//
// Memory: the package links only client-go's dynamic client and tools/cache, not the typed
// clientset, its informer factory or KEDA's API types, whose scheme registration (every
// built-in API group, controller-runtime) cost ≈ 25 MiB of RSS at start-up. A transform
// ([cache.TransformFunc]) replaces each listed or watched object, before it reaches the
// cache, with a small object holding only namespace, name, resourceVersion and the fields
// read here, so managedFields, annotations, pod templates and status conditions are never cached.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The resources the informers watch.
var (
	ScaledObjects = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	Deployments   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	StatefulSets  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	Pods          = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// Cold-start measurement: H is the ColdStartQuantile (nearest rank) of the creation → Ready
// times of the ColdStartSamples most recently created ready pods of the scale target. A pod
// is a sample only when its Ready=True condition's lastTransitionTime is after its
// creationTimestamp and at most MaxColdStart after it: that time is the pod's last transition
// to Ready, so a pod that failed its readiness probe once, days after it started, would read
// as a cold start of days (and a lastTransitionTime of 9999-12-31 as Go's largest duration).
const (
	ColdStartSamples  = 20
	ColdStartQuantile = 0.9
	// MaxColdStart is the longest creation → Ready time taken as a start: the upper end of
	// the coldStart metadata key's range, (0s, 1h] (package scaler). A longer one is most
	// likely a readiness flap of a long-running pod, not a start, and is skipped.
	MaxColdStart = time.Hour
)

// KEDA's defaults for bounds the ScaledObject leaves unset.
const (
	DefaultMinReplicas int32 = 0
	DefaultMaxReplicas int32 = 100
)

// ErrNotSynced is returned by WaitForSync when ctx ends before the caches have synced.
var ErrNotSynced = errors.New("kube: informer caches not synced")

// Config configures a [Cluster].
type Config struct {
	// Namespace limits the lists and watches to one namespace (a namespaced Role
	// suffices); empty watches all namespaces (a ClusterRole). Default "", otherwise a
	// DNS-1123 label. Lookup reports objects of other namespaces as not found.
	Namespace string
	// Resync is the informers' resync period; 0 disables resync. Default 10m, range
	// 0 or [1m, 24h].
	Resync time.Duration
}

// DefaultConfig returns the defaults documented on [Config].
func DefaultConfig() Config { return Config{Resync: 10 * time.Minute} }

// Validate returns every violation in c, each naming the field and the accepted range.
func (c Config) Validate() error {
	var errs []error
	if c.Namespace != "" {
		if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("Namespace %q: must be empty (all namespaces) or a DNS-1123 label: %s", c.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if c.Resync != 0 && (c.Resync < time.Minute || c.Resync > 24*time.Hour) {
		errs = append(errs, fmt.Errorf("Resync %v: must be 0 or in [1m, 24h]", c.Resync))
	}
	return errors.Join(errs...)
}

// Target is what the cluster says about one ScaledObject.
type Target struct {
	// Min and Max are the ScaledObject's replica bounds, with KEDA's defaults filled in.
	Min, Max int32
	// Ready is the scale target's status.readyReplicas; meaningful only when ReadyKnown.
	Ready int32
	// Current is the scale target's spec.replicas (what the HPA last set), meaningful only
	// when CurrentKnown; the scaler seeds a new trigger's history with it, so that a restart
	// never scales down before one down-window has passed (DESIGN.md).
	Current int32
	// Known is true when the ScaledObject exists in the cache and its bounds are valid
	// (0 <= Min <= Max, Max >= 1).
	Known bool
	// ReadyKnown is true when the scale target exists and is a Deployment or StatefulSet
	// (apps/v1) whose status.readyReplicas is absent (0) or an integer in [0, MaxInt32], so
	// Ready is read from its status; any other value is missing data (Problem names it).
	ReadyKnown bool
	// CurrentKnown is true when ReadyKnown and the scale target has spec.replicas.
	CurrentKnown bool
	// ColdStart is the measured time from a pod's creation to its Ready condition for the
	// scale target's pods: the ColdStartQuantile of the ColdStartSamples most recently created
	// ready pods the target controls (a StatefulSet's pods, whose controller is the
	// StatefulSet; a Deployment's, whose controller is a ReplicaSet named
	// <deployment>-<pod-template-hash label>). Pods whose Ready time is not after their
	// creation, or more than MaxColdStart after it (a readiness flap, not a start), are no
	// samples. ColdStartKnown is false without a sample, or before the pod cache has synced
	// (the scaler may lack RBAC for pods: the measurement is then absent, not an error).
	ColdStart      time.Duration
	ColdStartKnown bool
	// Problem says why Known or ReadyKnown is false, for logs and metrics; empty otherwise.
	Problem string
	// UID is the ScaledObject's metadata.uid, for the events written on it.
	UID string
	// TargetAPIVersion, TargetKind and TargetName are the ScaledObject's spec.scaleTargetRef
	// with KEDA's defaults filled in (apps/v1, Deployment), set whenever Known: the scaler
	// names the target's controller by them (OpenCost's replica-hour price).
	TargetAPIVersion, TargetKind, TargetName string
}

// scaledObject is the part of a ScaledObject the scaler needs, parsed once per watch event.
type scaledObject struct {
	min, max   int32
	kind, name string
	apiVersion string
	problem    string
	uid        string
}

// object is what the caches hold for every watched object: its identity and the few fields
// read from it, 64 bytes (plus the strings; a ScaledObject adds its parsed scaledObject). It
// is the output of the informers' transform. It carries no metav1.ObjectMeta (≈ 260 bytes of
// mostly empty fields): client-go reaches namespace, name and resourceVersion through
// meta.Accessor (k8s.io/apimachinery/pkg/api/meta), which accepts a [metav1.ObjectMetaAccessor].
type object struct {
	namespace, name, resourceVersion string
	ready                            int32         // status.readyReplicas (Deployment, StatefulSet)
	current                          int32         // spec.replicas (Deployment, StatefulSet); -1 unset
	problem                          string        // Deployment, StatefulSet: why ready is unusable; "" when usable
	so                               *scaledObject // ScaledObjects only
	owner                            string        // Pods: "Deployment/<name>" or "StatefulSet/<name>" controlling it; "" none
	created                          time.Time     // Pods: creationTimestamp
	start                            time.Duration // Pods: creation → Ready, in (0, MaxColdStart]; 0: no cold-start sample
}

// GetObjectMeta implements [metav1.ObjectMetaAccessor] for client-go's key functions.
func (o *object) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, ResourceVersion: o.resourceVersion}
}

// GetObjectKind implements [runtime.Object]; cached objects carry no kind.
func (o *object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements [runtime.Object]; an object is never modified once made.
func (o *object) DeepCopyObject() runtime.Object { c := *o; return &c }

// Cluster watches ScaledObjects, Deployments and StatefulSets. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg                Config
	log                *slog.Logger
	sos, deploys, sets cache.SharedIndexInformer
	pods               cache.SharedIndexInformer // not waited for: cold-start measurement only
	infs               []cache.SharedIndexInformer
}

// New returns a Cluster that talks to the API server at cfg. It starts nothing; call Run.
func New(restCfg *rest.Config, cfg Config, log *slog.Logger) (*Cluster, error) {
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kube: dynamic client: %w", err)
	}
	return NewForClient(dyn, cfg, log)
}

// NewForClient is New with the client supplied (a fake dynamic client in tests).
func NewForClient(dyn dynamic.Interface, cfg Config, log *slog.Logger) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kube config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{cfg: cfg, log: log}
	for _, w := range []struct {
		inf  *cache.SharedIndexInformer
		gvr  schema.GroupVersionResource
		fill func(*unstructured.Unstructured, *object)
	}{
		{&c.sos, ScaledObjects, c.fillScaledObject},
		{&c.deploys, Deployments, c.fillReplicas},
		{&c.sets, StatefulSets, c.fillReplicas},
		{&c.pods, Pods, c.fillPod},
	} {
		inf := newInformer(dyn, w.gvr, cfg)
		if err := inf.SetTransform(transform(w.fill)); err != nil {
			return nil, fmt.Errorf("kube: %s transform: %w", w.gvr.Resource, err)
		}
		*w.inf = inf
		c.infs = append(c.infs, inf)
	}
	return c, nil
}

// newInformer is dynamicinformer.NewFilteredDynamicInformer without the informers package
// (which links every typed API group).
func newInformer(dyn dynamic.Interface, gvr schema.GroupVersionResource, cfg Config) cache.SharedIndexInformer {
	r := dyn.Resource(gvr).Namespace(cfg.Namespace)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(ctx, o)
		},
	}, dyn)
	opts := cache.SharedIndexInformerOptions{ResyncPeriod: cfg.Resync, ObjectDescription: gvr.String()}
	if gvr == Pods { // pods are read per scale target
		opts.Indexers = cache.Indexers{ownerIndex: indexByOwner}
	}
	return cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, opts)
}

// transform returns the informer transform: an *unstructured.Unstructured becomes an *object
// filled by fill; anything else (an already transformed object) passes unchanged, so the
// transform is idempotent as client-go requires.
func transform(fill func(*unstructured.Unstructured, *object)) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		o := &object{namespace: u.GetNamespace(), name: u.GetName(), resourceVersion: u.GetResourceVersion()}
		fill(u, o)
		return o, nil
	}
}

// fillReplicas reads a Deployment's or StatefulSet's status.readyReplicas (absent: 0; not an
// integer in [0, MaxInt32]: o.problem, logged here once per event) and spec.replicas (absent
// or not an int32: -1, unknown; the API server defaults it to 1, so a served object always
// has it).
func (c *Cluster) fillReplicas(u *unstructured.Unstructured, o *object) {
	if r, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "readyReplicas"); found && r != nil {
		if n, ok := r.(int64); ok && n >= 0 && n <= math.MaxInt32 {
			o.ready = int32(n)
		} else {
			o.problem = fmt.Sprintf("status.readyReplicas %v: must be an integer in [0, %d]", r, math.MaxInt32)
			c.log.Warn("scale target's ready replicas unusable", "namespace", o.namespace, "name", o.name,
				"kind", u.GetKind(), "problem", o.problem)
		}
	}
	o.current = -1
	if n, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas"); found && err == nil && n >= 0 && n <= math.MaxInt32 {
		o.current = int32(n)
	}
}

// ownerIndex indexes the pod cache by the scale target controlling each pod that is a
// cold-start sample: "<namespace>/Deployment/<name>" or "<namespace>/StatefulSet/<name>".
const ownerIndex = "owner"

func indexByOwner(obj any) ([]string, error) {
	o, ok := obj.(*object)
	if !ok || o.owner == "" || o.start <= 0 {
		return nil, nil
	}
	return []string{o.namespace + "/" + o.owner}, nil
}

// fillPod reads a Pod's controller (owner), its creationTimestamp and, as start, the time from
// it to the lastTransitionTime of its Ready=True condition when that is a cold-start sample
// (after creation and at most MaxColdStart later); a pod Ready at another time is logged
// (debug) once per event and is no sample.
func (c *Cluster) fillPod(u *unstructured.Unstructured, o *object) {
	o.owner = podOwner(u)
	o.created = u.GetCreationTimestamp().Time
	var readyAt time.Time
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conds {
		m, ok := cond.(map[string]any)
		if !ok || m["type"] != "Ready" || m["status"] != "True" {
			continue
		}
		if s, ok := m["lastTransitionTime"].(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				readyAt = t
			}
		}
	}
	if readyAt.IsZero() || o.created.IsZero() || o.owner == "" {
		return
	}
	switch d := readyAt.Sub(o.created); { // Sub saturates: 9999-12-31 reads as Go's largest duration
	case d <= 0:
		c.log.Debug("pod's Ready time is no cold start: not after its creation", "namespace", o.namespace, "pod", o.name,
			"created", o.created, "ready", readyAt)
	case d > MaxColdStart:
		c.log.Debug("pod's Ready time is no cold start: more than MaxColdStart after its creation (a readiness flap, not a start)",
			"namespace", o.namespace, "pod", o.name, "created", o.created, "ready", readyAt, "start", d, "max", MaxColdStart)
	default:
		o.start = d
	}
}

// podOwner names the scale target controlling the pod: its controller ownerReference (apps/v1)
// is a StatefulSet, or a ReplicaSet named <deployment>-<hash> where hash is the pod's
// pod-template-hash label (the name the Deployment controller gives its ReplicaSets); "" else.
func podOwner(u *unstructured.Unstructured) string {
	for _, r := range u.GetOwnerReferences() {
		if r.Controller == nil || !*r.Controller || r.APIVersion != "apps/v1" {
			continue
		}
		switch r.Kind {
		case "StatefulSet":
			return "StatefulSet/" + r.Name
		case "ReplicaSet":
			hash := u.GetLabels()["pod-template-hash"]
			if d, ok := strings.CutSuffix(r.Name, "-"+hash); ok && hash != "" && d != "" {
				return "Deployment/" + d
			}
		}
		return ""
	}
	return ""
}

// fillScaledObject parses the ScaledObject; an unusable one is logged here, once per add or
// update event (the transform sees each event once).
func (c *Cluster) fillScaledObject(u *unstructured.Unstructured, o *object) {
	so := parse(u.Object)
	so.uid = string(u.GetUID())
	if so.problem != "" {
		c.log.Warn("scaledobject unusable", "namespace", o.namespace, "name", o.name, "problem", so.problem)
	}
	o.so = &so
}

// Run starts the informers and blocks until ctx is done; then it waits for their goroutines
// to end. It returns nil.
func (c *Cluster) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, inf := range c.infs {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	wg.Wait()
	return nil
}

// WaitForSync blocks until every cache has synced (true) or ctx is done (ErrNotSynced). The
// pod cache, which only measures cold starts, is not waited for.
func (c *Cluster) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.sos.HasSynced, c.deploys.HasSynced, c.sets.HasSynced) {
		return ErrNotSynced
	}
	return nil
}

// get returns the cached object namespace/name of inf, or nil.
func get(inf cache.SharedIndexInformer, namespace, name string) *object {
	v, ok, err := inf.GetIndexer().GetByKey(cache.ObjectName{Namespace: namespace, Name: name}.String())
	if err != nil || !ok {
		return nil
	}
	o, _ := v.(*object)
	return o
}

// Lookup returns the bounds and ready replicas of the ScaledObject namespace/name from the
// caches. ok is false when the ScaledObject is not in the cache (Target.Known is then false).
func (c *Cluster) Lookup(namespace, name string) (Target, bool) {
	o := get(c.sos, namespace, name)
	if o == nil || o.so == nil {
		return Target{Problem: fmt.Sprintf("scaledobject %s/%s not found", namespace, name)}, false
	}
	so := o.so
	t := Target{Min: so.min, Max: so.max, Known: so.problem == "", Problem: so.problem, UID: so.uid}
	if !t.Known {
		return t, true
	}
	t.TargetAPIVersion, t.TargetKind, t.TargetName = so.apiVersion, so.kind, so.name
	if so.apiVersion != "apps/v1" {
		t.Problem = fmt.Sprintf("scale target %s %s/%s: ready replicas are read only for apps/v1 Deployment and StatefulSet", so.apiVersion, so.kind, so.name)
		return t, true
	}
	var inf cache.SharedIndexInformer
	switch so.kind {
	case "Deployment":
		inf = c.deploys
	case "StatefulSet":
		inf = c.sets
	default:
		t.Problem = fmt.Sprintf("scale target kind %q: ready replicas are read only for Deployment and StatefulSet", so.kind)
		return t, true
	}
	w := get(inf, namespace, so.name)
	if w == nil {
		t.Problem = fmt.Sprintf("%s %s/%s not found", so.kind, namespace, so.name)
		return t, true
	}
	if w.problem != "" {
		t.Problem = fmt.Sprintf("%s %s/%s: %s", so.kind, namespace, so.name, w.problem)
		return t, true
	}
	t.Ready, t.ReadyKnown = w.ready, true
	if w.current >= 0 {
		t.Current, t.CurrentKnown = w.current, true
	}
	t.ColdStart, t.ColdStartKnown = c.coldStart(namespace, so.kind, so.name)
	return t, true
}

// coldStart measures the scale target's cold start from the pod cache (Target.ColdStart). It
// reads only the target's own samples (ownerIndex), never the namespace's other pods.
func (c *Cluster) coldStart(namespace, kind, name string) (time.Duration, bool) {
	if !c.pods.HasSynced() {
		return 0, false
	}
	objs, err := c.pods.GetIndexer().ByIndex(ownerIndex, namespace+"/"+kind+"/"+name)
	if err != nil || len(objs) == 0 {
		return 0, false
	}
	starts := make([]*object, 0, len(objs))
	for _, v := range objs {
		if p, ok := v.(*object); ok && p.start > 0 {
			starts = append(starts, p)
		}
	}
	if len(starts) == 0 {
		return 0, false
	}
	slices.SortFunc(starts, func(a, b *object) int { return b.created.Compare(a.created) }) // newest first
	starts = starts[:min(len(starts), ColdStartSamples)]
	ds := make([]time.Duration, len(starts))
	for i, p := range starts {
		ds[i] = p.start
	}
	slices.Sort(ds)
	return ds[max(0, int(math.Ceil(ColdStartQuantile*float64(len(ds))))-1)], true
}

// parse reads the fields of a ScaledObject (KEDA v1alpha1: spec.minReplicaCount and
// spec.maxReplicaCount, *int32; spec.scaleTargetRef {apiVersion, kind, name}) and fills KEDA's
// defaults (bounds 0 and 100; apps/v1 Deployment).
func parse(obj map[string]any) scaledObject {
	out := scaledObject{min: DefaultMinReplicas, max: DefaultMaxReplicas, kind: "Deployment", apiVersion: "apps/v1"}
	var errs []error
	bound := func(field string, dst *int32) {
		v, found, err := unstructured.NestedFieldNoCopy(obj, "spec", field)
		if !found || v == nil {
			return
		}
		n, ok := v.(int64)
		if err != nil || !ok || n != int64(int32(n)) {
			errs = append(errs, fmt.Errorf("spec.%s %v: must be an int32", field, v))
			return
		}
		*dst = int32(n)
	}
	bound("minReplicaCount", &out.min)
	bound("maxReplicaCount", &out.max)
	ref := map[string]string{}
	for _, f := range []string{"apiVersion", "kind", "name"} {
		v, _, err := unstructured.NestedString(obj, "spec", "scaleTargetRef", f)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.scaleTargetRef.%s: %w", f, err))
		}
		ref[f] = v
	}
	out.name = ref["name"]
	if ref["kind"] != "" {
		out.kind = ref["kind"]
	}
	if ref["apiVersion"] != "" {
		out.apiVersion = ref["apiVersion"]
	}
	switch {
	case len(errs) > 0:
		out.problem = "decode: " + errors.Join(errs...).Error()
	case out.name == "":
		out.problem = "spec.scaleTargetRef.name is empty"
	case out.min < 0:
		out.problem = fmt.Sprintf("spec.minReplicaCount %d: must be >= 0", out.min)
	case out.max < 1 || out.max < out.min:
		out.problem = fmt.Sprintf("spec.maxReplicaCount %d: must be >= 1 and >= minReplicaCount (%d)", out.max, out.min)
	}
	return out
}
