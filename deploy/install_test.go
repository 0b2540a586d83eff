package deploy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// renderOn renders like render, on a cluster of the given Kubernetes version.
func renderOn(t *testing.T, kube string, vals map[string]any) (*release.Release, error) {
	t.Helper()
	kv, err := chartutil.ParseKubeVersion(kube)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = releaseName, namespace
	inst.KubeVersion = kv
	inst.APIVersions = chartutil.VersionSet{"keda.sh/v1alpha1"}
	return inst.RunWithContext(context.Background(), loadChart(t), vals)
}

// withSet applies --set and --set-json arguments over vals with Helm's own parsers
// (pkg/strvals, what `helm install --set` calls), so the types are exactly the CLI's:
// --set a=0.7 gives the string "0.7", --set-json a=0.7 the number 0.7.
func withSet(t *testing.T, vals map[string]any, set, setJSON []string) map[string]any {
	t.Helper()
	for _, s := range set {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	for _, s := range setJSON {
		if err := strvals.ParseJSON(s, vals); err != nil {
			t.Fatalf("--set-json %s: %v", s, err)
		}
	}
	return vals
}

// TestSetFloats: a fractional value given with --set arrives as a string; the schema accepts
// its decimal text within the same range as the number, and the trigger carries it unchanged.
func TestSetFloats(t *testing.T) {
	tests := []struct {
		name    string
		set     []string
		setJSON []string
		want    map[string]string // trigger metadata keys → values
		wantErr string
	}{
		{name: "--set targetUtilization=0.7", set: []string{"scaling.targetUtilization=0.7"},
			want: map[string]string{"targetUtilization": "0.7"}},
		{name: "--set-json targetUtilization=0.7", setJSON: []string{"scaling.targetUtilization=0.7"},
			want: map[string]string{"targetUtilization": "0.7"}},
		{name: "--set on a pool, several floats", set: []string{"pools[0].scaling.activityCeiling=0.33", "pools[0].scaling.warmFraction=0.25", "pools[0].scaling.burstFactor=1.5", "pools[0].scaling.replicaThroughput=2.5"},
			want: map[string]string{"activityCeiling": "0.33", "warmFraction": "0.25", "burstFactor": "1.5", "replicaThroughput": "2.5"}},
		{name: "--set integer stays an integer", set: []string{"scaling.drainSeconds=45"},
			want: map[string]string{"drainSeconds": "45"}},
		{name: "--set out of range is still refused", set: []string{"scaling.targetUtilization=1.5"},
			wantErr: "/scaling/targetUtilization"},
		{name: "--set not a number is refused", set: []string{"scaling.activityTarget=high"},
			wantErr: "/scaling/activityTarget"},
		{name: "--set zero where > 0 is required", set: []string{"pools[0].scaling.replicaThroughput=0.0"},
			wantErr: "/pools/0/scaling/replicaThroughput"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := withSet(t, map[string]any{"pools": []any{minimalPool()}}, tt.set, tt.setJSON)
			rel, err := render(t, vals)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("render error %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o, err := decodeRelease(rel)
			if err != nil {
				t.Fatal(err)
			}
			meta := o.scaledObjects["rel-inferscale-p"].Spec.Triggers[0].Metadata
			got := map[string]string{}
			for k := range tt.want {
				got[k] = meta[k]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("trigger metadata (-want +got)\n%s", diff)
			}
		})
	}
}

// TestToleranceState: the ScaledObject carries tolerance 0 unless the KEDA version lacks the
// field, and NOTES.txt says in each case whether tolerance 0 is in force.
func TestToleranceState(t *testing.T) {
	tests := []struct {
		name      string
		kube      string
		keda      string
		zero      bool
		wantField bool
		wantNotes string
	}{
		{name: "1.35 with KEDA unknown", kube: "v1.35.0", zero: true, wantField: true,
			wantNotes: "HPA tolerance 0 for pool p: in force (Kubernetes v1.35.0, HPAConfigurableTolerance on by default; assumes KEDA >= 2.18"},
		{name: "1.37 with KEDA 2.21", kube: "v1.37.2", keda: "2.21.0", zero: true, wantField: true,
			wantNotes: "HPA tolerance 0 for pool p: in force (Kubernetes v1.37.2, HPAConfigurableTolerance on by default)."},
		{name: "KEDA 2.17 has no field", kube: "v1.35.0", keda: "2.17", zero: true, wantField: false,
			wantNotes: "NOT in force: KEDA 2.17's ScaledObject CRD has no tolerance"},
		{name: "1.33 needs the alpha gate", kube: "v1.33.1", keda: "2.18.0", zero: true, wantField: true,
			wantNotes: "NOT in force unless the cluster enables the\n  HPAConfigurableTolerance feature gate"},
		{name: "1.32 has no per-HPA tolerance", kube: "v1.32.4", zero: true, wantField: true,
			wantNotes: "NOT in force: Kubernetes v1.32.4 has no per-HPA"},
		{name: "zeroTolerance false", kube: "v1.35.0", zero: false, wantField: false, wantNotes: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{"pools": []any{minimalPool()}, "kedaVersion": tt.keda,
				"keda": map[string]any{"hpa": map[string]any{"zeroTolerance": tt.zero}}}
			rel, err := renderOn(t, tt.kube, vals)
			if err != nil {
				t.Fatal(err)
			}
			o, err := decodeRelease(rel)
			if err != nil {
				t.Fatal(err)
			}
			b := o.scaledObjects["rel-inferscale-p"].Spec.Advanced.HorizontalPodAutoscalerConfig.Behavior
			for dir, r := range map[string]bool{"scaleUp": b.ScaleUp.Tolerance != nil, "scaleDown": b.ScaleDown.Tolerance != nil} {
				if r != tt.wantField {
					t.Errorf("%s.tolerance present %t, want %t", dir, r, tt.wantField)
				}
			}
			if tt.wantField && b.ScaleUp.Tolerance.String() != "0" {
				t.Errorf("scaleUp.tolerance = %s, want 0", b.ScaleUp.Tolerance)
			}
			notes := rel.Info.Notes
			if tt.wantNotes == "" && strings.Contains(notes, "HPA tolerance 0") {
				t.Errorf("NOTES mention tolerance with zeroTolerance false:\n%s", notes)
			}
			if !strings.Contains(notes, tt.wantNotes) {
				t.Errorf("NOTES do not say %q:\n%s", tt.wantNotes, notes)
			}
		})
	}
}

// TestDocScaledObjectsMatchDefaultInstall: every ScaledObject in README.md and docs/scaler.md
// names the scaler that the chart's default install (a release named "inferscale" in the
// ScaledObject's own namespace) serves it from, so a reader who copies one gets answers, not
// InvalidArgument from a scaler that serves another namespace.
func TestDocScaledObjectsMatchDefaultInstall(t *testing.T) {
	type so struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Triggers []struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"triggers"`
		} `json:"spec"`
	}
	found := 0
	for _, doc := range []string{"../README.md", "../docs/scaler.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			var o so
			if err := yaml.Unmarshal([]byte(block), &o); err != nil || o.Kind != "ScaledObject" {
				continue
			}
			found++
			ns := o.Metadata.Namespace
			inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
			inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
			inst.ReleaseName, inst.Namespace = "inferscale", ns
			inst.KubeVersion = &kubeVersion
			inst.APIVersions = chartutil.VersionSet{"keda.sh/v1alpha1"}
			rel, err := inst.RunWithContext(context.Background(), loadChart(t), map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeRelease(rel)
			if err != nil {
				t.Fatal(err)
			}
			svc := objs.services["inferscale-scaler"]
			if svc == nil {
				t.Fatalf("default install as release inferscale renders no Service inferscale-scaler: %v", objs.kinds)
			}
			want := fmt.Sprintf("%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port)
			for _, tr := range o.Spec.Triggers {
				if got := tr.Metadata["scalerAddress"]; got != want {
					t.Errorf("%s: ScaledObject %s/%s has scalerAddress %q; the default install in %s serves it at %q",
						doc, ns, o.Metadata.Name, got, ns, want)
				}
			}
			if d := objs.deployments["inferscale-scaler"]; d == nil || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--watch-namespace="+ns) {
				t.Errorf("default install in %s: the scaler does not watch %s", ns, ns)
			}
		}
	}
	if found < 4 {
		t.Errorf("found %d ScaledObjects in README.md and docs/scaler.md, want at least 4", found)
	}
}

// TestScalerMonitorsHonorLabels: the scaler's PodMonitor and ServiceMonitor keep the
// namespace label the scaler puts on its per-ScaledObject series (the ScaledObject's), so the
// dashboard's namespace variable works when one scaler serves several namespaces.
func TestScalerMonitorsHonorLabels(t *testing.T) {
	o := renderObjects(t, renderCase{name: "monitoring", files: []string{"testdata/monitoring.yaml"}})
	for id, field := range map[string]string{"PodMonitor/" + scalerName: "podMetricsEndpoints", "ServiceMonitor/" + scalerName: "endpoints"} {
		m := o.monitors[id]
		if m == nil {
			t.Fatalf("%s not rendered", id)
		}
		eps, _, _ := unstructured.NestedSlice(m.Object, "spec", field)
		if len(eps) != 1 {
			t.Fatalf("%s: %d endpoints, want 1", id, len(eps))
		}
		if h, _ := eps[0].(map[string]any)["honorLabels"].(bool); !h {
			t.Errorf("%s endpoint %v: want honorLabels: true", id, eps[0])
		}
	}
}
