//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// renderChart renders deploy/helm/inferscale with the Helm SDK (values
// validated against values.schema.json) and returns the objects, test
// hooks and NOTES left out.
func renderChart(release, ns string, values map[string]any) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(filepath.Join(suite.root, "deploy", "helm", "inferscale"))
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	rv, err := chartutil.ToRenderValues(chrt, values, chartutil.ReleaseOptions{
		Name: release, Namespace: ns, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	files, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, n := range names {
		if strings.Contains(n, "/templates/tests/") || !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(files[n]) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			objs = append(objs, u)
		}
	}
	return objs, nil
}

// poolKinds are the rendered kinds the suite applies. The scaler's own
// Deployment, Service and PodDisruptionBudget are left out: the suite runs
// cmd/scaler as a process on loopback.
var poolKinds = map[string]schema.GroupVersionResource{
	"ServiceAccount":        {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":             {Version: "v1", Resource: "configmaps"},
	"Secret":                {Version: "v1", Resource: "secrets"},
	"Service":               {Version: "v1", Resource: "services"},
	"Role":                  {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"Deployment":            {Group: "apps", Version: "v1", Resource: "deployments"},
	"ScaledObject":          gvrScaledObj,
	"TriggerAuthentication": gvrTriggerAuth,
}

// applyPool creates the chart's pool objects. mutate may adjust an object
// before it is created (the scaler address: the chart names the scaler's
// Service DNS name, which loopback processes cannot resolve).
func applyPool(ctx context.Context, c *cluster, objs []*unstructured.Unstructured, mutate func(*unstructured.Unstructured) error) ([]string, error) {
	// Dependencies first, as helm install orders kinds: the pods' ServiceAccount
	// must exist before the ReplicaSet creates them, the Deployment before
	// KEDA reconciles the ScaledObject.
	order := []string{"ServiceAccount", "Secret", "ConfigMap", "Role", "RoleBinding", "Service",
		"Deployment", "TriggerAuthentication", "ScaledObject"}
	rank := map[string]int{}
	for i, k := range order {
		rank[k] = i
	}
	objs = append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(objs, func(i, j int) bool { return rank[objs[i].GetKind()] < rank[objs[j].GetKind()] })
	var applied []string
	for _, u := range objs {
		gvr, ok := poolKinds[u.GetKind()]
		if !ok {
			continue
		}
		comp := u.GetLabels()["app.kubernetes.io/component"]
		if comp == "scaler" && (u.GetKind() == "Deployment" || u.GetKind() == "Service") {
			continue
		}
		if mutate != nil {
			if err := mutate(u); err != nil {
				return applied, err
			}
		}
		_, err := c.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return applied, fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		applied = append(applied, u.GetKind()+"/"+u.GetName())
	}
	return applied, nil
}
