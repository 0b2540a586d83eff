package kube

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	goruntime "runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
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

// workload is an apps/v1 object as the API server serves it, with the fields the transform
// must drop (managedFields, a pod template, conditions) filled in.
func workload(kind, ns, name string, ready int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       kind,
		"metadata": map[string]any{"namespace": ns, "name": name,
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update"}},
			"annotations":   map[string]any{"deployment.kubernetes.io/revision": "3"}},
		"spec": map[string]any{"replicas": int64(4), "template": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "triton", "image": "nvcr.io/triton"}}}}},
		"status": map[string]any{"readyReplicas": ready, "conditions": []any{map[string]any{"type": "Available"}}},
	}}
}

func deployment(ns, name string, ready int64) *unstructured.Unstructured {
	return workload("Deployment", ns, name, ready)
}

type env struct {
	c   *Cluster
	dyn *dynamicfake.FakeDynamicClient
}

var listKinds = map[schema.GroupVersionResource]string{
	ScaledObjects: "ScaledObjectList", Deployments: "DeploymentList", StatefulSets: "StatefulSetList", Pods: "PodList",
}

func start(t *testing.T, objs ...runtime.Object) env {
	t.Helper()
	return startWith(t, DefaultConfig(), objs...)
}

func startWith(t *testing.T, cfg Config, objs ...runtime.Object) env {
	t.Helper()
	return startLog(t, cfg, nil, objs...)
}

func startLog(t *testing.T, cfg Config, log *slog.Logger, objs ...runtime.Object) env {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	return env{c: run(t, dyn, cfg, log), dyn: dyn}
}

// run starts a Cluster on dyn, stopped when tb ends, and waits until its caches are synced.
func run(tb testing.TB, dyn *dynamicfake.FakeDynamicClient, cfg Config, log *slog.Logger) *Cluster {
	tb.Helper()
	c, err := NewForClient(dyn, cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := c.WaitForSync(sctx); err != nil || !cache.WaitForCacheSync(sctx.Done(), c.pods.HasSynced) {
		tb.Fatal("caches not synced", err)
	}
	return c
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
	e := start(t, append(sos,
		deployment("a", "triton-pool", 3),
		deployment("a", "vllm", 0),
		workload("StatefulSet", "a", "llm", 2),
		deployment("b", "triton-pool", 9),
		workload("StatefulSet", "a", "triton-pool", 7), // same name, other kind: not read
	)...)
	tests := []struct {
		ns, name string
		want     Target
		wantOK   bool
	}{
		{"a", "triton", Target{Min: 1, Max: 8, Ready: 3, Current: 4, Known: true, ReadyKnown: true, CurrentKnown: true,
			TargetAPIVersion: "apps/v1", TargetKind: "Deployment", TargetName: "triton-pool"}, true},
		{"a", "defaults", Target{Min: 0, Max: 100, Ready: 0, Current: 4, Known: true, ReadyKnown: true, CurrentKnown: true,
			TargetAPIVersion: "apps/v1", TargetKind: "Deployment", TargetName: "vllm"}, true},
		{"a", "sts", Target{Min: 0, Max: 4, Ready: 2, Current: 4, Known: true, ReadyKnown: true, CurrentKnown: true,
			TargetAPIVersion: "apps/v1", TargetKind: "StatefulSet", TargetName: "llm"}, true},
		{"a", "rollout", Target{Min: 0, Max: 100, Known: true, Problem: `scale target argoproj.io/v1alpha1 Rollout/r: ready replicas are read only for apps/v1 Deployment and StatefulSet`,
			TargetAPIVersion: "argoproj.io/v1alpha1", TargetKind: "Rollout", TargetName: "r"}, true},
		{"a", "no-target", Target{Min: 0, Max: 100, Known: true, Problem: `Deployment a/missing not found`,
			TargetAPIVersion: "apps/v1", TargetKind: "Deployment", TargetName: "missing"}, true},
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
	e := start(t, so, deployment("a", "pool", 1))
	ctx := context.Background()

	d := deployment("a", "pool", 4)
	if _, err := e.dyn.Resource(Deployments).Namespace("a").UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
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

	so = newScaledObject("a", "pool", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}})
	if _, err := e.dyn.Resource(ScaledObjects).Namespace("a").Create(ctx, so, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.dyn.Resource(Deployments).Namespace("a").Delete(ctx, "pool", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { got, ok := e.c.Lookup("a", "pool"); return ok && !got.ReadyKnown })
}

// TestTransformKeepsOnlyReadFields: the cache holds *object with identity and the read fields,
// never the managedFields, pod template or conditions of the listed object.
func TestTransformKeepsOnlyReadFields(t *testing.T) {
	tf := transform((&Cluster{log: slog.New(slog.DiscardHandler)}).fillReplicas)
	d := deployment("a", "pool", 3)
	d.SetResourceVersion("42")
	got, err := tf(d)
	if err != nil {
		t.Fatal(err)
	}
	want := &object{namespace: "a", name: "pool", resourceVersion: "42", ready: 3, current: 4}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(object{})); diff != "" {
		t.Errorf("transform (-want +got):\n%s", diff)
	}
	again, err := tf(got)
	if err != nil || again != got {
		t.Errorf("transform of a transformed object = %v, %v; want it unchanged", again, err)
	}
	// client-go's key function reads the identity through meta.Accessor.
	if key, err := cache.MetaNamespaceKeyFunc(got); err != nil || key != "a/pool" {
		t.Errorf("MetaNamespaceKeyFunc = %q, %v; want a/pool", key, err)
	}
	// Without spec.replicas the current count is unknown (-1), not 0.
	unstructured.RemoveNestedField(d.Object, "spec", "replicas")
	got, err = tf(d)
	if err != nil {
		t.Fatal(err)
	}
	want.current = -1
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(object{})); diff != "" {
		t.Errorf("transform without spec.replicas (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		spec map[string]any
		want scaledObject
	}{
		{"defaults", map[string]any{"scaleTargetRef": map[string]any{"name": "d"}},
			scaledObject{min: 0, max: 100, kind: "Deployment", apiVersion: "apps/v1", name: "d"}},
		{"bounds and kind", map[string]any{"minReplicaCount": int64(2), "maxReplicaCount": int64(9),
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"}},
			scaledObject{min: 2, max: 9, kind: "StatefulSet", apiVersion: "apps/v1", name: "s"}},
		{"string bound", map[string]any{"maxReplicaCount": "9", "scaleTargetRef": map[string]any{"name": "d"}},
			scaledObject{min: 0, max: 100, kind: "Deployment", apiVersion: "apps/v1", name: "d", problem: "decode: spec.maxReplicaCount 9: must be an int32"}},
		{"bound over int32", map[string]any{"minReplicaCount": int64(1) << 40, "scaleTargetRef": map[string]any{"name": "d"}},
			scaledObject{min: 0, max: 100, kind: "Deployment", apiVersion: "apps/v1", name: "d", problem: "decode: spec.minReplicaCount 1099511627776: must be an int32"}},
		{"negative min", map[string]any{"minReplicaCount": int64(-1), "scaleTargetRef": map[string]any{"name": "d"}},
			scaledObject{min: -1, max: 100, kind: "Deployment", apiVersion: "apps/v1", name: "d", problem: "spec.minReplicaCount -1: must be >= 0"}},
		{"no target", map[string]any{},
			scaledObject{min: 0, max: 100, kind: "Deployment", apiVersion: "apps/v1", problem: "spec.scaleTargetRef.name is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parse(newScaledObject("a", "so", tt.spec).Object)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(scaledObject{})); diff != "" {
				t.Errorf("parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	if err := (Config{Resync: time.Second}).Validate(); err == nil {
		t.Fatal("Resync 1s accepted, want an error naming Resync")
	}
	if err := (Config{Namespace: "team-a"}).Validate(); err != nil {
		t.Fatalf("Namespace team-a: %v", err)
	}
	err := (Config{Namespace: "Team_A"}).Validate()
	if err == nil || !strings.Contains(err.Error(), `Namespace "Team_A": must be empty (all namespaces) or a DNS-1123 label`) {
		t.Fatalf("Namespace Team_A: %v, want an error naming Namespace and the accepted form", err)
	}
}

// TestWatchNamespace: with Namespace set, every list and watch of the three resources is
// confined to it (a namespaced Role suffices) and objects elsewhere never reach the caches.
func TestWatchNamespace(t *testing.T) {
	so := func(ns string) *unstructured.Unstructured {
		return newScaledObject(ns, "pool", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}, "maxReplicaCount": int64(6)})
	}
	cfg := DefaultConfig()
	cfg.Namespace = "a"
	e := startWith(t, cfg, so("a"), deployment("a", "pool", 2), so("b"), deployment("b", "pool", 5))
	if got, ok := e.c.Lookup("a", "pool"); !ok || got != (Target{Min: 0, Max: 6, Ready: 2, Current: 4, Known: true, ReadyKnown: true, CurrentKnown: true,
		TargetAPIVersion: "apps/v1", TargetKind: "Deployment", TargetName: "pool"}) {
		t.Errorf("Lookup(a/pool) = %+v, %v; want max 6, ready 2, current 4", got, ok)
	}
	if got, ok := e.c.Lookup("b", "pool"); ok || got.Problem != "scaledobject b/pool not found" {
		t.Errorf("Lookup(b/pool) = %+v, %v; want not found (outside the watched namespace)", got, ok)
	}

	// A ScaledObject created in b, then one in a: once a's reaches the cache, b's would
	// have too had the watch covered b.
	ctx := context.Background()
	other := newScaledObject("b", "late", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}})
	if _, err := e.dyn.Resource(ScaledObjects).Namespace("b").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mine := newScaledObject("a", "late", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}})
	if _, err := e.dyn.Resource(ScaledObjects).Namespace("a").Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := e.c.Lookup("a", "late"); return ok })
	if _, ok := e.c.Lookup("b", "late"); ok {
		t.Error("Lookup(b/late) found an object outside the watched namespace")
	}

	if !cache.WaitForCacheSync(t.Context().Done(), e.c.pods.HasSynced) { // not part of WaitForSync
		t.Fatal("pod cache not synced")
	}
	seen := map[string]bool{}
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			continue
		}
		if a.GetNamespace() != "a" {
			t.Errorf("%s %s in namespace %q, want only namespace a", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		}
		seen[a.GetVerb()+" "+a.GetResource().Resource] = true
	}
	want := map[string]bool{}
	for _, r := range []string{"scaledobjects", "deployments", "statefulsets", "pods"} {
		want["list "+r], want["watch "+r] = true, true
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("list/watch actions (-want +got):\n%s", diff)
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
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds,
		newScaledObject("a", "pool", map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}}),
		deployment("a", "pool", 3))
	c := run(b, dyn, DefaultConfig(), nil)
	for b.Loop() {
		if got, _ := c.Lookup("a", "pool"); got.Ready != 3 {
			b.Fatalf("Ready = %d", got.Ready)
		}
	}
}

// BenchmarkMemory10000 reports the live heap the Cluster holds for 10,000 ScaledObjects and
// their 10,000 Deployments (the fake client's own copies excluded): the transformed cache
// entries and the lookup tables.
// Run: go test -run '^$' -bench Memory -benchtime 1x ./scaler/kube/
func BenchmarkMemory10000(b *testing.B) {
	const n = 10000
	objs := make([]runtime.Object, 0, 2*n)
	for i := range n {
		ns, name := fmt.Sprintf("team-%03d", i%100), fmt.Sprintf("pool-%05d", i)
		objs = append(objs, newScaledObject(ns, name, map[string]any{
			"scaleTargetRef": map[string]any{"name": name}, "minReplicaCount": int64(1), "maxReplicaCount": int64(8),
		}), deployment(ns, name, 3))
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
	objs = nil
	before := liveHeap()
	c := run(b, dyn, DefaultConfig(), nil)
	if got, _ := c.Lookup("team-042", "pool-09942"); got.Ready != 3 {
		b.Fatalf("Lookup = %+v", got)
	}
	held := liveHeap() - before
	for b.Loop() {
	}
	goruntime.KeepAlive(c)
	b.ReportMetric(float64(held)/(1<<20), "live-heap-MiB")
	b.ReportMetric(float64(held)/(2*n), "B/object")
}

func liveHeap() uint64 {
	goruntime.GC()
	goruntime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func pod(ns, name string, labels map[string]any, created time.Time, ready time.Duration, isReady bool) *unstructured.Unstructured {
	status := "False"
	if isReady {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels,
			"creationTimestamp": created.UTC().Format(time.RFC3339)},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "PodScheduled", "status": "True", "lastTransitionTime": created.UTC().Format(time.RFC3339)},
			map[string]any{"type": "Ready", "status": status, "lastTransitionTime": created.Add(ready).UTC().Format(time.RFC3339)},
		}},
	}}
}

// TestColdStartMeasured: H is the 0.9 quantile (nearest rank) of creation → Ready over the
// target's 20 most recently created ready pods, the pods it controls: pods of other
// controllers (labels matching or not), bare pods, pods of another namespace and pods not
// ready do not count; a selector with matchExpressions does not matter.
func TestColdStartMeasured(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sel := func(d *unstructured.Unstructured, selector map[string]any) *unstructured.Unstructured {
		d.Object["spec"].(map[string]any)["selector"] = selector
		return d
	}
	triton := map[string]any{"matchLabels": map[string]any{"app": "triton"}}
	objs := []runtime.Object{
		newScaledObject("a", "pool", map[string]any{"scaleTargetRef": map[string]any{"name": "triton"}}),
		newScaledObject("a", "exprs", map[string]any{"scaleTargetRef": map[string]any{"name": "exprs"}}),
		newScaledObject("a", "nopods", map[string]any{"scaleTargetRef": map[string]any{"name": "nopods"}}),
		newScaledObject("a", "sts", map[string]any{"scaleTargetRef": map[string]any{"kind": "StatefulSet", "name": "llm"}}),
		sel(deployment("a", "triton", 3), triton),
		sel(deployment("a", "exprs", 1), map[string]any{"matchLabels": map[string]any{"app": "exprs"},
			"matchExpressions": []any{map[string]any{"key": "tier", "operator": "In", "values": []any{"gpu"}}}}),
		sel(deployment("a", "nopods", 1), triton), // its selector matches triton's pods, which it does not control
		sel(workload("StatefulSet", "a", "llm", 2), map[string]any{"matchLabels": map[string]any{"app": "llm"}}),
	}
	// 22 starts of the target, oldest first: the two oldest (600 s each) fall out of the 20.
	// The 20 kept take 10 s, 20 s, …, 200 s: the 0.9 quantile (18th of 20) is 180 s.
	objs = append(objs,
		ownedPod("a", "old-0", "Deployment", "triton", map[string]any{"app": "triton"}, base, 600*time.Second),
		ownedPod("a", "old-1", "Deployment", "triton", map[string]any{"app": "triton"}, base.Add(time.Minute), 600*time.Second))
	for i := range 20 {
		objs = append(objs, ownedPod("a", fmt.Sprintf("p-%d", i), "Deployment", "triton", map[string]any{"app": "triton"},
			base.Add(time.Hour+time.Duration(i)*time.Minute), time.Duration(10*(i+1))*time.Second))
	}
	starting := ownedPod("a", "starting", "Deployment", "triton", map[string]any{"app": "triton"}, base.Add(2*time.Hour), 900*time.Second)
	starting.Object["status"].(map[string]any)["conditions"].([]any)[1].(map[string]any)["status"] = "False"
	bare := pod("a", "bare", map[string]any{"app": "triton"}, base.Add(2*time.Hour), 900*time.Second, true)
	objs = append(objs, starting, bare,
		ownedPod("a", "other", "Deployment", "vllm", map[string]any{"app": "triton"}, base.Add(2*time.Hour), 900*time.Second),
		ownedPod("b", "elsewhere", "Deployment", "triton", map[string]any{"app": "triton"}, base.Add(2*time.Hour), 900*time.Second),
		ownedPod("a", "exprs-0", "Deployment", "exprs", map[string]any{"app": "exprs", "tier": "gpu"}, base, 45*time.Second),
		ownedPod("a", "llm-0", "StatefulSet", "llm", map[string]any{"app": "llm"}, base, 300*time.Second),
		ownedPod("a", "llm-1", "StatefulSet", "llm", map[string]any{"app": "llm"}, base.Add(time.Minute), 240*time.Second))
	e := start(t, objs...)
	if !cache.WaitForCacheSync(t.Context().Done(), e.c.pods.HasSynced) {
		t.Fatal("pod cache not synced")
	}
	tests := []struct {
		name  string
		want  time.Duration
		known bool
	}{
		{"pool", 180 * time.Second, true},
		{"exprs", 45 * time.Second, true},
		{"nopods", 0, false},
		{"sts", 300 * time.Second, true},
	}
	for _, tt := range tests {
		got, _ := e.c.Lookup("a", tt.name)
		if got.ColdStart != tt.want || got.ColdStartKnown != tt.known {
			t.Errorf("%s: cold start %v known %v, want %v %v", tt.name, got.ColdStart, got.ColdStartKnown, tt.want, tt.known)
		}
	}
}

// records is a slog handler keeping every record's message and attributes.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	r.mu.Lock()
	r.msgs = append(r.msgs, b.String())
	r.mu.Unlock()
	return nil
}

func (r *records) find(sub string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			return m
		}
	}
	return ""
}

// readyAt is a pod of the Deployment triton created at created and Ready at the RFC 3339 time
// ready (its Ready condition's lastTransitionTime, as the kubelet writes it).
func readyAt(name string, created time.Time, ready string) *unstructured.Unstructured {
	p := ownedPod("a", name, "Deployment", "triton", map[string]any{"app": "triton"}, created, 0)
	p.Object["status"].(map[string]any)["conditions"].([]any)[1].(map[string]any)["lastTransitionTime"] = ready
	return p
}

// TestColdStartSkipsReadinessFlaps: the Ready condition's lastTransitionTime is the pod's LAST
// transition to Ready, so a pod that failed its readiness probe long after it started reads
// as a start of days. A pod Ready more than MaxColdStart (1 h, the coldStart key's bound)
// after its creation is no sample, like one Ready before its creation; each is logged.
// Before, H read 72 h (or Go's largest duration, 292 years, for a Ready time of 9999-12-31)
// and the forecast over H sent the pool to maxReplicas.
func TestColdStartSkipsReadinessFlaps(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	so := func(name string) *unstructured.Unstructured {
		return newScaledObject("a", name, map[string]any{"scaleTargetRef": map[string]any{"name": name}})
	}
	d := deployment("a", "triton", 3)
	d.Object["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "triton"}}
	flapOnly := deployment("a", "flaponly", 1)
	flapOnly.Object["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": "flaponly"}}
	onlyFlap := ownedPod("a", "flaponly-0", "Deployment", "flaponly", map[string]any{"app": "flaponly"}, base, 72*time.Hour)
	log := &records{}
	e := startLog(t, DefaultConfig(), slog.New(log), so("triton"), so("flaponly"), d, flapOnly, onlyFlap,
		readyAt("start-40s", base.Add(-3*time.Hour), rfc(base.Add(-3*time.Hour+40*time.Second))),
		readyAt("start-50s", base.Add(-2*time.Hour), rfc(base.Add(-2*time.Hour+50*time.Second))),
		readyAt("start-1h", base.Add(-time.Hour), rfc(base)), // exactly MaxColdStart: a (slow) start
		// Newer pods whose Ready time is no start: a flap 72 h after creation, one second
		// past MaxColdStart, 9999-12-31, and Ready before creation.
		readyAt("flap-72h", base.Add(time.Minute), rfc(base.Add(time.Minute+72*time.Hour))),
		readyAt("flap-1h1s", base.Add(2*time.Minute), rfc(base.Add(2*time.Minute+time.Hour+time.Second))),
		readyAt("flap-9999", base.Add(3*time.Minute), "9999-12-31T23:59:59Z"),
		readyAt("before-creation", base.Add(4*time.Minute), rfc(base)))
	if !cache.WaitForCacheSync(t.Context().Done(), e.c.pods.HasSynced) {
		t.Fatal("pod cache not synced")
	}
	// The samples are 40 s, 50 s and 1 h: the 0.9 quantile (3rd of 3) is 1 h.
	if got, _ := e.c.Lookup("a", "triton"); got.ColdStart != time.Hour || !got.ColdStartKnown {
		t.Errorf("triton: cold start %v known %v, want 1h0m0s true (the flapped pods skipped)", got.ColdStart, got.ColdStartKnown)
	}
	if got, _ := e.c.Lookup("a", "flaponly"); got.ColdStart != 0 || got.ColdStartKnown {
		t.Errorf("flaponly: cold start %v known %v, want 0 false (its only pod flapped: no sample)", got.ColdStart, got.ColdStartKnown)
	}
	for _, want := range []string{
		"pod=flap-72h created=2026-03-01 12:01:00 +0000 UTC ready=2026-03-04 12:01:00 +0000 UTC start=72h0m0s max=1h0m0s",
		"pod=flap-1h1s created=2026-03-01 12:02:00 +0000 UTC ready=2026-03-01 13:02:01 +0000 UTC start=1h0m1s max=1h0m0s",
		"pod=flap-9999 created=2026-03-01 12:03:00 +0000 UTC ready=9999-12-31 23:59:59 +0000 UTC start=2562047h47m16.854775807s max=1h0m0s",
	} {
		if m := log.find(want); !strings.HasPrefix(m, "DEBUG pod's Ready time is no cold start: more than MaxColdStart after its creation (a readiness flap, not a start) namespace=a ") {
			t.Errorf("no debug record with %q; got %q", want, m)
		}
	}
	if m := log.find("pod=before-creation"); !strings.HasPrefix(m, "DEBUG pod's Ready time is no cold start: not after its creation") {
		t.Errorf("Ready before creation: record %q, want the debug record saying so", m)
	}
	if m := log.find("pod=start-1h"); m != "" {
		t.Errorf("a start of exactly MaxColdStart was logged as skipped: %q", m)
	}

	// A Ready time that moves past MaxColdStart on an update (the probe failed and recovered)
	// takes the pod out of the samples.
	p := readyAt("start-50s", base.Add(-2*time.Hour), rfc(base.Add(70*time.Hour)))
	if _, err := e.dyn.Resource(Pods).Namespace("a").UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return log.find("pod=start-50s") != "" })
	if got, _ := e.c.Lookup("a", "triton"); got.ColdStart != time.Hour || !got.ColdStartKnown {
		t.Errorf("after start-50s flapped: cold start %v known %v, want 1h0m0s true", got.ColdStart, got.ColdStartKnown)
	}
	// The index holds the two samples left.
	if keys, err := e.c.pods.GetIndexer().IndexKeys(ownerIndex, "a/Deployment/triton"); err != nil || len(keys) != 2 {
		t.Errorf("owner index a/Deployment/triton = %v, %v; want the 2 samples start-40s and start-1h", keys, err)
	}
}

// TestReadyReplicasOutOfRange: status.readyReplicas outside [0, MaxInt32], or not an integer,
// is missing data (ReadyKnown false, Problem naming the field and range, a warning), never
// wrapped to int32: 4294967297 read as 1 ready replica before.
func TestReadyReplicasOutOfRange(t *testing.T) {
	tests := []struct {
		name  string
		ready any // nil: absent
		want  Target
	}{
		{"wrap", int64(4294967297), Target{Problem: "Deployment a/wrap: status.readyReplicas 4294967297: must be an integer in [0, 2147483647]"}},
		{"over", int64(math.MaxInt32) + 1, Target{Problem: "Deployment a/over: status.readyReplicas 2147483648: must be an integer in [0, 2147483647]"}},
		{"negative", int64(-1), Target{Problem: "Deployment a/negative: status.readyReplicas -1: must be an integer in [0, 2147483647]"}},
		{"string", "3", Target{Problem: "Deployment a/string: status.readyReplicas 3: must be an integer in [0, 2147483647]"}},
		{"fraction", 2.5, Target{Problem: "Deployment a/fraction: status.readyReplicas 2.5: must be an integer in [0, 2147483647]"}},
		{"max", int64(math.MaxInt32), Target{Ready: math.MaxInt32, ReadyKnown: true, Current: 4, CurrentKnown: true}},
		{"zero", int64(0), Target{Ready: 0, ReadyKnown: true, Current: 4, CurrentKnown: true}},
		{"absent", nil, Target{Ready: 0, ReadyKnown: true, Current: 4, CurrentKnown: true}},
	}
	var objs []runtime.Object
	for _, tt := range tests {
		d := deployment("a", tt.name, 0)
		if tt.ready == nil {
			delete(d.Object["status"].(map[string]any), "readyReplicas")
		} else {
			d.Object["status"].(map[string]any)["readyReplicas"] = tt.ready
		}
		objs = append(objs, d, newScaledObject("a", tt.name, map[string]any{"scaleTargetRef": map[string]any{"name": tt.name}}))
	}
	log := &records{}
	e := startLog(t, DefaultConfig(), slog.New(log), objs...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			want.Min, want.Max, want.Known = 0, 100, true
			want.TargetAPIVersion, want.TargetKind, want.TargetName = "apps/v1", "Deployment", tt.name
			got, ok := e.c.Lookup("a", tt.name)
			if diff := cmp.Diff(want, got); !ok || diff != "" {
				t.Errorf("Lookup ok %v (-want +got):\n%s", ok, diff)
			}
		})
	}
	if m := log.find("name=wrap"); m != "WARN scale target's ready replicas unusable namespace=a name=wrap kind=Deployment problem=status.readyReplicas 4294967297: must be an integer in [0, 2147483647]" {
		t.Errorf("warning for a/wrap = %q", m)
	}
	// A valid value on the next status update makes the replicas known again.
	d := deployment("a", "wrap", 5)
	if _, err := e.dyn.Resource(Deployments).Namespace("a").UpdateStatus(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		got, _ := e.c.Lookup("a", "wrap")
		return got.ReadyKnown && got.Ready == 5 && got.Problem == ""
	})
}

// ownedPod is pod with the controller ownerReference Kubernetes sets: a Deployment's pod is
// owned by its ReplicaSet <deployment>-<hash> and carries pod-template-hash=<hash>; a
// StatefulSet's pod by the StatefulSet.
func ownedPod(ns, name, kind, owner string, labels map[string]any, created time.Time, ready time.Duration) *unstructured.Unstructured {
	p := pod(ns, name, labels, created, ready, true)
	ownerName := owner
	if kind == "Deployment" {
		kind, ownerName = "ReplicaSet", owner+"-7d9f8c6b5"
		labels["pod-template-hash"] = "7d9f8c6b5"
	}
	p.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: ownerName, UID: types.UID("u-" + ownerName), Controller: new(true)}})
	return p
}

// BenchmarkLookupColdStart: Lookup, cold start included, with n Deployments of 3 pods each in
// one namespace; the server calls Lookup once per trigger per refresh, so n Lookups are one
// refresh's Kubernetes reads. The cost of one Lookup must not grow with n.
// Run: go test -run '^$' -bench LookupColdStart ./scaler/kube/
func BenchmarkLookupColdStart(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			objs := make([]runtime.Object, 0, 5*n)
			for i := range n {
				name := fmt.Sprintf("pool-%05d", i)
				d := deployment("a", name, 3)
				d.Object["spec"].(map[string]any)["selector"] = map[string]any{"matchLabels": map[string]any{"app": name}}
				objs = append(objs, newScaledObject("a", name, map[string]any{"scaleTargetRef": map[string]any{"name": name}}), d)
				for j := range 3 {
					objs = append(objs, ownedPod("a", fmt.Sprintf("%s-7d9f8c6b5-%d", name, j), "Deployment", name,
						map[string]any{"app": name}, base.Add(time.Duration(j)*time.Minute), time.Duration(30+10*j)*time.Second))
				}
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
			c := run(b, dyn, DefaultConfig(), nil)
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("pool-%05d", i)
			}
			i := 0
			for b.Loop() {
				got, _ := c.Lookup("a", names[i%n])
				if !got.ColdStartKnown || got.ColdStart != 50*time.Second {
					b.Fatalf("Lookup(a/%s) = %+v, want cold start 50s", names[i%n], got)
				}
				i++
			}
		})
	}
}
