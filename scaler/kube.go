package scaler

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/inferscale/inferscale/internal/kubeconfigfile"
	"github.com/inferscale/inferscale/scaler/kube"
)

// kubeSyncTimeout bounds the wait for the informer caches at start-up; a
// scaler without RBAC for ScaledObjects, Deployments and StatefulSets fails
// instead of serving metadata bounds that KEDA would contradict.
const kubeSyncTimeout = 60 * time.Second

// startTargets connects to Kubernetes when the scaler can (a --kubeconfig,
// or in-cluster credentials), starts the informers in g and waits for their
// caches. nil means no Kubernetes access: bounds come from metadata and
// ready replicas from readyQuery or the preset's pod count. A --kubeconfig, or a
// certificate, key or token file its current context names, that is not a regular
// file of at most kubeconfigfile.MaxBytes (1 MiB) is an error naming the flag;
// each is opened once and read to at most that bound (kubeconfigfile.LoadFile;
// client-go re-reads a token file itself to follow a rotation).
func startTargets(ctx context.Context, g *errgroup.Group, cfg Config, log *slog.Logger) (Targets, error) {
	var rc *rest.Config
	var err error
	switch {
	case cfg.Kubeconfig != "":
		// clientcmd reads the file, and the certificate files it names, whole, with no
		// bound: --kubeconfig=/dev/zero (or /proc/self/pagemap, or a certificate-authority
		// of /dev/zero) ran the scaler out of memory. kubeconfigfile reads them bounded;
		// only --kubeconfig is read, never $KUBECONFIG or ~/.kube/config.
		file, err := kubeconfigfile.LoadFile("Kubeconfig (--kubeconfig)", cfg.Kubeconfig)
		if err != nil {
			return nil, err
		}
		rc, err = kubeconfigfile.RESTConfig(file)
		if err != nil {
			return nil, fmt.Errorf("Kubeconfig (--kubeconfig) %q: %w", cfg.Kubeconfig, err)
		}
	case os.Getenv("KUBERNETES_SERVICE_HOST") != "":
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster Kubernetes config: %w", err)
		}
	default:
		log.Info("no Kubernetes access (no --kubeconfig, not in a pod): bounds from metadata, ready replicas from readyQuery")
		return nil, nil
	}
	kc := kube.DefaultConfig()
	kc.Namespace = cfg.WatchNamespace
	cluster, err := kube.New(rc, kc, log)
	if err != nil {
		return nil, err
	}
	g.Go(func() error { return cluster.Run(ctx) })
	sctx, cancel := context.WithTimeout(ctx, kubeSyncTimeout)
	defer cancel()
	if err := cluster.WaitForSync(sctx); err != nil {
		return nil, fmt.Errorf("Kubernetes informers (ScaledObjects, Deployments, StatefulSets in %s; check RBAC) not synced within %v: %w", watchScope(cfg.WatchNamespace), kubeSyncTimeout, err)
	}
	log.Info("Kubernetes informers synced", "watchNamespace", cfg.WatchNamespace)
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client for events: %w", err)
	}
	ev := NewEvents(dc, "", log)
	g.Go(func() error { return ev.Run(ctx) })
	return clusterTargets{c: cluster, ev: ev}, nil
}

// clusterTargets adapts *kube.Cluster to Targets. A ScaledObject the
// cluster does not know, or whose bounds are invalid, falls back to the
// metadata bounds.
type clusterTargets struct {
	c  *kube.Cluster
	ev *Events // nil: no events (tests)
}

func (ct clusterTargets) Lookup(namespace, name string) (Target, bool) {
	t, ok := ct.c.Lookup(namespace, name)
	if !ok || !t.Known {
		return Target{}, false
	}
	return Target{MinReplicas: t.Min, MaxReplicas: t.Max, ReadyReplicas: t.Ready, ReadyKnown: t.ReadyKnown,
		CurrentReplicas: t.Current, CurrentKnown: t.CurrentKnown, ColdStart: t.ColdStart, ColdStartKnown: t.ColdStartKnown,
		Workload: workloadOf(t.TargetAPIVersion, t.TargetKind, t.TargetName)}, true
}

// workloadOf names a scale target as OpenCost names its controller: an apps/v1 Deployment is
// "deployment" (OpenCost resolves a pod's ReplicaSet to its Deployment), an apps/v1
// StatefulSet "statefulset"; any other target has no Workload (and no OpenCost price).
func workloadOf(apiVersion, kind, name string) Workload {
	if apiVersion != "apps/v1" || name == "" {
		return Workload{}
	}
	switch kind {
	case "Deployment":
		return Workload{Kind: "deployment", Name: name}
	case "StatefulSet":
		return Workload{Kind: "statefulset", Name: name}
	}
	return Workload{}
}

// watchScope names what the informers watch, for errors.
func watchScope(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return fmt.Sprintf("namespace %q", ns)
}
