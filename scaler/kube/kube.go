// Package kube reads, from the Kubernetes API through client-go informers, what the scaler
// needs about each KEDA ScaledObject: the replica bounds (spec.minReplicaCount, KEDA default 0;
// spec.maxReplicaCount, KEDA default 100) and the ready replicas of its scale target
// (status.readyReplicas of a Deployment or StatefulSet). Reads come from informer caches and
// never call the API server.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// ScaledObjects is the resource the informer watches.
var ScaledObjects = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}

// KEDA's defaults for bounds the ScaledObject leaves unset.
const (
	DefaultMinReplicas int32 = 0
	DefaultMaxReplicas int32 = 100
)

// ErrNotSynced is returned by WaitForSync when ctx ends before the caches have synced.
var ErrNotSynced = errors.New("kube: informer caches not synced")

// Config configures a [Cluster].
type Config struct {
	// Namespace limits the watch to one namespace; empty watches all namespaces.
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
	// Known is true when the ScaledObject exists in the cache and its bounds are valid
	// (0 <= Min <= Max, Max >= 1).
	Known bool
	// ReadyKnown is true when the scale target exists and is a Deployment or StatefulSet
	// (apps/v1), so Ready is read from its status.
	ReadyKnown bool
	// Problem says why Known or ReadyKnown is false, for logs and metrics; empty otherwise.
	Problem string
}

// scaledObject is the part of a ScaledObject the scaler needs, parsed once per watch event.
type scaledObject struct {
	min, max   int32
	kind, name string
	apiVersion string
	problem    string
}

type nsName struct{ namespace, name string }

// Cluster watches ScaledObjects, Deployments and StatefulSets. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg     Config
	log     *slog.Logger
	dynF    dynamicinformer.DynamicSharedInformerFactory
	kubeF   informers.SharedInformerFactory
	soInf   cache.SharedIndexInformer
	deploys appslisters.DeploymentLister
	sets    appslisters.StatefulSetLister
	synced  []cache.InformerSynced

	mu  sync.RWMutex
	sos map[nsName]scaledObject
}

// New returns a Cluster that talks to the API server at cfg. It starts nothing; call Run.
func New(restCfg *rest.Config, cfg Config, log *slog.Logger) (*Cluster, error) {
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kube: dynamic client: %w", err)
	}
	kc, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kube: clientset: %w", err)
	}
	return NewForClients(dyn, kc, cfg, log)
}

// NewForClients is New with clients supplied (fake clientsets in tests).
func NewForClients(dyn dynamic.Interface, kc kubernetes.Interface, cfg Config, log *slog.Logger) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kube config: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{
		cfg:   cfg,
		log:   log,
		dynF:  dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, cfg.Resync, cfg.Namespace, nil),
		kubeF: informers.NewSharedInformerFactoryWithOptions(kc, cfg.Resync, informers.WithNamespace(cfg.Namespace)),
		sos:   map[nsName]scaledObject{},
	}
	c.soInf = c.dynF.ForResource(ScaledObjects).Informer()
	if _, err := c.soInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.upsert,
		UpdateFunc: func(_, obj any) { c.upsert(obj) },
		DeleteFunc: c.remove,
	}); err != nil {
		return nil, fmt.Errorf("kube: scaledobject handler: %w", err)
	}
	d := c.kubeF.Apps().V1().Deployments()
	s := c.kubeF.Apps().V1().StatefulSets()
	c.deploys, c.sets = d.Lister(), s.Lister()
	c.synced = []cache.InformerSynced{c.soInf.HasSynced, d.Informer().HasSynced, s.Informer().HasSynced}
	return c, nil
}

// Run starts the informers and blocks until ctx is done; then it stops them and waits for
// their goroutines to end. It returns nil.
func (c *Cluster) Run(ctx context.Context) error {
	c.dynF.Start(ctx.Done())
	c.kubeF.Start(ctx.Done())
	<-ctx.Done()
	c.dynF.Shutdown()
	c.kubeF.Shutdown()
	return nil
}

// WaitForSync blocks until every cache has synced (true) or ctx is done (ErrNotSynced).
func (c *Cluster) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ErrNotSynced
	}
	return nil
}

// Synced reports whether every cache has synced; before that Lookup may miss objects.
func (c *Cluster) Synced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Lookup returns the bounds and ready replicas of the ScaledObject namespace/name from the
// caches. ok is false when the ScaledObject is not in the cache (Target.Known is then false).
func (c *Cluster) Lookup(namespace, name string) (Target, bool) {
	c.mu.RLock()
	so, ok := c.sos[nsName{namespace, name}]
	c.mu.RUnlock()
	if !ok {
		return Target{Problem: fmt.Sprintf("scaledobject %s/%s not found", namespace, name)}, false
	}
	t := Target{Min: so.min, Max: so.max, Known: so.problem == "", Problem: so.problem}
	if !t.Known {
		return t, true
	}
	if so.apiVersion != "apps/v1" {
		t.Problem = fmt.Sprintf("scale target %s %s/%s: ready replicas are read only for apps/v1 Deployment and StatefulSet", so.apiVersion, so.kind, so.name)
		return t, true
	}
	switch so.kind {
	case "Deployment":
		d, err := c.deploys.Deployments(namespace).Get(so.name)
		if err != nil {
			t.Problem = fmt.Sprintf("deployment %s/%s: %v", namespace, so.name, err)
			return t, true
		}
		t.Ready, t.ReadyKnown = d.Status.ReadyReplicas, true
	case "StatefulSet":
		s, err := c.sets.StatefulSets(namespace).Get(so.name)
		if err != nil {
			t.Problem = fmt.Sprintf("statefulset %s/%s: %v", namespace, so.name, err)
			return t, true
		}
		t.Ready, t.ReadyKnown = s.Status.ReadyReplicas, true
	default:
		t.Problem = fmt.Sprintf("scale target kind %q: ready replicas are read only for Deployment and StatefulSet", so.kind)
	}
	return t, true
}

func (c *Cluster) upsert(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	so := parse(u)
	if so.problem != "" {
		c.log.Warn("scaledobject unusable", "namespace", u.GetNamespace(), "name", u.GetName(), "problem", so.problem)
	}
	c.mu.Lock()
	c.sos[nsName{u.GetNamespace(), u.GetName()}] = so
	c.mu.Unlock()
}

func (c *Cluster) remove(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	c.mu.Lock()
	delete(c.sos, nsName{u.GetNamespace(), u.GetName()})
	c.mu.Unlock()
}

// parse reads a ScaledObject through KEDA's own API types and fills KEDA's defaults.
func parse(u *unstructured.Unstructured) scaledObject {
	var so kedav1alpha1.ScaledObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &so); err != nil {
		return scaledObject{problem: fmt.Sprintf("decode: %v", err)}
	}
	out := scaledObject{min: DefaultMinReplicas, max: DefaultMaxReplicas, kind: "Deployment", apiVersion: "apps/v1"}
	if m := so.Spec.MinReplicaCount; m != nil {
		out.min = *m
	}
	if m := so.Spec.MaxReplicaCount; m != nil {
		out.max = *m
	}
	ref := so.Spec.ScaleTargetRef
	switch {
	case ref == nil || ref.Name == "":
		out.problem = "spec.scaleTargetRef.name is empty"
	case out.min < 0:
		out.problem = fmt.Sprintf("spec.minReplicaCount %d: must be >= 0", out.min)
	case out.max < 1 || out.max < out.min:
		out.problem = fmt.Sprintf("spec.maxReplicaCount %d: must be >= 1 and >= minReplicaCount (%d)", out.max, out.min)
	}
	if ref != nil {
		out.name = ref.Name
		if ref.Kind != "" {
			out.kind = ref.Kind
		}
		if ref.APIVersion != "" {
			out.apiVersion = ref.APIVersion
		}
	}
	return out
}
