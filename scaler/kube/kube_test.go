package kube

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newScaledObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1",
		"kind":       "ScaledObject",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
}

func deployment(ns, name string, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Status:     appsv1.DeploymentStatus{ReadyReplicas: ready},
	}
}

type env struct {
	c    *Cluster
	dyn  *dynamicfake.FakeDynamicClient
	kube *fake.Clientset
}

func start(t *testing.T, sos []runtime.Object, objs ...runtime.Object) env {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ScaledObjects: "ScaledObjectList"}, sos...)
	kc := fake.NewClientset(objs...)
	c, err := NewForClients(dyn, kc, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := c.WaitForSync(sctx); err != nil {
		t.Fatal(err)
	}
	return env{c: c, dyn: dyn, kube: kc}
}

func TestLookup(t *testing.T) {
	sos := []runtime.Object{
		newScaledObject("a", "triton", map[string]any{
			"scaleTargetRef":  map[string]any{"name": "triton-pool"},
			"minReplicaCount": int64(1), "maxReplicaCount": int64(8),
		}),
		newScaledObject("a", "defaults", map[string]any{"scaleTargetRef": map[string]any{"name": "vllm"}}),
		newScaledObject("a", "sts", map[string]any{
			"scaleTargetRef":  map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "llm"},
			"maxReplicaCount": int64(4),
		}),
		newScaledObject("a", "rollout", map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r"},
		}),
		newScaledObject("a", "no-target", map[string]any{"scaleTargetRef": map[string]any{"name": "missing"}}),
		newScaledObject("a", "inverted", map[string]any{
			"scaleTargetRef":  map[string]any{"name": "triton-pool"},
			"minReplicaCount": int64(5), "maxReplicaCount": int64(2),
		}),
	}
	e := start(t, sos,
		deployment("a", "triton-pool", 3),
		deployment("a", "vllm", 0),
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "llm"}, Status: appsv1.StatefulSetStatus{ReadyReplicas: 2}},
		deployment("b", "triton-pool", 9),
	)
	tests := []struct {
		ns, name string
		want     Target
		wantOK   bool
	}{
		{"a", "triton", Target{Min: 1, Max: 8, Ready: 3, Known: true, ReadyKnown: true}, true},
		{"a", "defaults", Target{Min: 0, Max: 100, Ready: 0, Known: true, ReadyKnown: true}, true},
		{"a", "sts", Target{Min: 0, Max: 4, Ready: 2, Known: true, ReadyKnown: true}, true},
		{"a", "rollout", Target{Min: 0, Max: 100, Known: true, Problem: `scale target argoproj.io/v1alpha1 Rollout/r: ready replicas are read only for apps/v1 Deployment and StatefulSet`}, true},
		{"a", "no-target", Target{Min: 0, Max: 100, Known: true, Problem: `deployment a/missing: deployment.apps "missing" not found`}, true},
		{"a", "inverted", Target{Min: 5, Max: 2, Problem: "spec.maxReplicaCount 2: must be >= 1 and >= minReplicaCount (5)"}, true},
		{"b", "triton", Target{Problem: "scaledobject b/triton not found"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.ns+"/"+tt.name, func(t *testing.T) {
			got, ok := e.c.Lookup(tt.ns, tt.name)
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lookup (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLookupFollowsChanges: ready replicas, bounds and deletion reach Lookup through the
// watches.
func TestLookupFollowsChanges(t *testing.T) {
	so := newScaledObject("a", "pool", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}, "maxReplicaCount": int64(8)})
	e := start(t, []runtime.Object{so}, deployment("a", "pool", 1))
	ctx := context.Background()

	d := deployment("a", "pool", 4)
	if _, err := e.kube.AppsV1().Deployments("a").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { got, _ := e.c.Lookup("a", "pool"); return got.Ready == 4 })

	so = so.DeepCopy()
	if err := unstructured.SetNestedField(so.Object, int64(12), "spec", "maxReplicaCount"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(ScaledObjects).Namespace("a").Update(ctx, so, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { got, _ := e.c.Lookup("a", "pool"); return got.Max == 12 })

	if err := e.dyn.Resource(ScaledObjects).Namespace("a").Delete(ctx, "pool", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := e.c.Lookup("a", "pool"); return !ok })
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if err := (Config{Resync: time.Second}).Validate(); err == nil {
		t.Fatal("Resync 1s accepted, want an error naming Resync")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatal("condition not met within 30s")
		case <-tick.C:
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ScaledObjects: "ScaledObjectList"},
		newScaledObject("a", "pool", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}}))
	c, err := NewForClients(dyn, fake.NewClientset(deployment("a", "pool", 3)), DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if err := c.WaitForSync(ctx); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if got, _ := c.Lookup("a", "pool"); got.Ready != 3 {
			b.Fatalf("Ready = %d", got.Ready)
		}
	}
}
