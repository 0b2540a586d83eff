package scaler

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/kube"
)

// fakeCluster starts scaler/kube's informers, confined to watchNamespace, on client-go's
// fake dynamic client holding objs, and returns them as the server's Targets.
func fakeCluster(t *testing.T, watchNamespace string, objs ...runtime.Object) Targets {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kube.ScaledObjects: "ScaledObjectList", kube.Deployments: "DeploymentList", kube.StatefulSets: "StatefulSetList", kube.Pods: "PodList",
	}, objs...)
	kc := kube.DefaultConfig()
	kc.Namespace = watchNamespace
	c, err := kube.NewForClient(dyn, kc, nil)
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
	return clusterTargets{c: c}
}

func clusterObjects(ns string, maxReplicas, ready int64) []runtime.Object {
	return []runtime.Object{
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
			"metadata": map[string]any{"namespace": ns, "name": "pool"},
			"spec":     map[string]any{"scaleTargetRef": map[string]any{"name": "pool"}, "maxReplicaCount": maxReplicas},
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"namespace": ns, "name": "pool"},
			"status":   map[string]any{"readyReplicas": ready},
		}},
	}
}

// TestWatchNamespace: a scaler with --watch-namespace=team-a reads team-a's bounds from its
// (namespaced) informers, and answers every RPC for a ScaledObject in team-b InvalidArgument
// naming both namespaces — even though team-b's ScaledObject exists in the cluster and its
// queries would be confined to team-b — instead of serving it from metadata bounds.
func TestWatchNamespace(t *testing.T) {
	objs := append(clusterObjects("team-a", 6, 3), clusterObjects("team-b", 50, 9)...)
	for _, tc := range []struct {
		name    string
		targets func(t *testing.T) Targets
	}{
		{"cluster", func(t *testing.T) Targets { return fakeCluster(t, "team-a", objs...) }},
		{"no cluster access", func(*testing.T) Targets { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessIn(t, tc.targets(t), "team-a")
			h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 10, EvaluatedAt: t0})
			h.sig.set("team-b", prom.KindQueue, prom.Result{Value: 10, EvaluatedAt: t0})
			mv, err := h.metrics(t, ref("team-a", "pool", queueMeta()))
			if err != nil {
				t.Fatalf("team-a GetMetrics: %v", err)
			}
			// ⌈Q⌉ = 10; the cluster's maxReplicaCount 6 caps it, metadata's default does not.
			want := int64(10)
			if tc.name == "cluster" {
				want = 6
			}
			if mv.MetricValue != want {
				t.Errorf("team-a GetMetrics = %d, want %d", mv.MetricValue, want)
			}

			ctx := context.Background()
			r := ref("team-b", "pool", queueMeta())
			for name, call := range h.everyRPC(ctx, r) {
				err := call()
				st := status.Convert(err)
				if st.Code() != codes.InvalidArgument ||
					!strings.Contains(st.Message(), `namespace "team-b" is not served: this scaler watches only namespace "team-a" (--watch-namespace)`) {
					t.Errorf("%s for team-b/pool: %v, want InvalidArgument naming team-b and team-a", name, err)
				}
			}
			if got := h.srv.Triggers(); got != 1 {
				t.Errorf("Triggers() = %d, want 1 (team-b/pool never registered)", got)
			}
		})
	}
}
