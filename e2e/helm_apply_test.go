//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// applyCases are every values set a user is pointed at — the defaults and each file under
// deploy/examples — plus the chart's own TLS, monitoring and shared-scaler test values. Paths
// are relative to the repository root, applied in order like repeated `helm install -f`.
func applyCases(t *testing.T) map[string][]string {
	t.Helper()
	cases := map[string][]string{"defaults": nil}
	examples, err := filepath.Glob(filepath.Join(suite.root, "deploy", "examples", "*.yaml"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("deploy/examples/*.yaml: %v (found %d)", err, len(examples))
	}
	for _, f := range examples {
		cases["examples/"+filepath.Base(f)] = []string{f}
	}
	for _, f := range []string{"tls.yaml", "monitoring.yaml", "shared-scaler.yaml"} {
		cases["testdata/"+f] = []string{filepath.Join(suite.root, "deploy", "testdata", f)}
	}
	return cases
}

// renderAll renders the chart for release in ns, hooks (helm test's Pod) included, NOTES left
// out, with the e2e cluster's version as the capability.
func renderAll(release, ns string, files []string) ([]*unstructured.Unstructured, error) {
	chrt, err := loader.Load(filepath.Join(suite.root, "deploy", "helm", "inferscale"))
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, err
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	caps.APIVersions = append(caps.APIVersions, "keda.sh/v1alpha1", "monitoring.coreos.com/v1")
	rv, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: release, Namespace: ns, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	out, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	slices.Sort(names)
	var objs []*unstructured.Unstructured
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(out[n]) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// TestHelmApplyServerSide sends every object of every render to the real kube-apiserver as a
// server-side apply with dryRun=All and fieldValidation=Strict, KEDA's CRDs installed: an
// unknown or misspelt field, a value the OpenAPI schema or a CRD rejects, an RBAC rule that
// does not parse, or an admission error fails here, where the deploy package's decoding into
// Go types cannot see it. The ScaledObject the server returns must still carry tolerance 0
// (a CRD that pruned it would leave the HPA's 10 % dead band in force). Objects of the
// Prometheus Operator (PodMonitor, ServiceMonitor) are logged and skipped: its CRDs are not
// part of the suite.
func TestHelmApplyServerSide(t *testing.T) {
	c := suite.cluster
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.kube.Discovery()))
	cases := applyCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("apply-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			objs, err := renderAll("inferscale", ns, cases[name])
			if err != nil {
				t.Fatal(err)
			}
			var applied, skipped []string
			for _, u := range objs {
				id := u.GetKind() + "/" + u.GetName()
				gvk := u.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if meta.IsNoMatchError(err) && gvk.Group == "monitoring.coreos.com" {
					skipped = append(skipped, id)
					continue
				}
				if err != nil {
					t.Errorf("%s: no such kind on the API server: %v", id, err)
					continue
				}
				body, err := json.Marshal(u.Object)
				if err != nil {
					t.Fatal(err)
				}
				force := true
				opts := metav1.PatchOptions{FieldManager: "helm", Force: &force, DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
				r := c.dyn.Resource(m.Resource)
				var got *unstructured.Unstructured
				if m.Scope.Name() == meta.RESTScopeNameNamespace {
					if u.GetNamespace() == "" {
						u.SetNamespace(ns) // helm install -n sets it on objects that name none
						if body, err = json.Marshal(u.Object); err != nil {
							t.Fatal(err)
						}
					}
					got, err = r.Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
				} else {
					got, err = r.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
				}
				if err != nil {
					t.Errorf("server-side apply of %s (namespace %q): %v", id, u.GetNamespace(), err)
					continue
				}
				applied = append(applied, id)
				if u.GetKind() == "ScaledObject" {
					for _, dir := range []string{"scaleUp", "scaleDown"} {
						path := []string{"spec", "advanced", "horizontalPodAutoscalerConfig", "behavior", dir, "tolerance"}
						want, wantOK, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
						have, haveOK, _ := unstructured.NestedFieldNoCopy(got.Object, path...)
						if wantOK != haveOK || fmt.Sprint(want) != fmt.Sprint(have) {
							t.Errorf("%s: %s.tolerance sent %v (%t), the API server kept %v (%t)", id, dir, want, wantOK, have, haveOK)
						}
					}
				}
			}
			if len(applied) == 0 {
				t.Fatal("no object applied")
			}
			t.Logf("%d objects accepted: %v; skipped (no Prometheus Operator CRDs): %v", len(applied), applied, skipped)
		})
	}
}
