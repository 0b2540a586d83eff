package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const (
	chartPath   = "helm/inferscale"
	releaseName = "rel"
	namespace   = "team-a"
)

// kubeVersion is the cluster version renders assume: the first with HPAConfigurableTolerance
// (alpha) and well above the chart's kubeVersion floor.
var kubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// renderCase is one values set the chart is rendered with. files are relative to deploy/ and
// applied in order, like repeated `helm install -f`.
type renderCase struct {
	name  string
	files []string
	// sharedScaler: the case sets scaler.watchAllNamespaces (ClusterRole, no --watch-namespace).
	sharedScaler bool
}

var renderCases = []renderCase{
	{name: "defaults"},
	{name: "triton-example", files: []string{"examples/triton-mig-1g10gb.yaml"}},
	{name: "vllm-example", files: []string{"examples/vllm-llama.yaml"}},
	{name: "tls", files: []string{"testdata/tls.yaml"}},
	{name: "monitoring", files: []string{"testdata/monitoring.yaml"}},
	{name: "shared-scaler", files: []string{"testdata/shared-scaler.yaml"}, sharedScaler: true},
}

// readValues reads and merges values files, later files winning.
func readValues(t *testing.T, files ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			t.Fatalf("read values %s: %v", f, err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	return vals
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartPath)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return c
}

// render installs the chart client-only (what `helm install --dry-run` and `helm template` do):
// values are validated against values.schema.json, templates rendered, hooks kept apart.
func render(t *testing.T, vals map[string]any) (*release.Release, error) {
	t.Helper()
	cfg := &action.Configuration{Log: func(string, ...any) {}}
	inst := action.NewInstall(cfg)
	inst.DryRun = true
	inst.ClientOnly = true
	inst.Replace = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.KubeVersion = &kubeVersion
	inst.APIVersions = chartutil.VersionSet{"keda.sh/v1alpha1", "monitoring.coreos.com/v1"}
	return inst.RunWithContext(context.Background(), loadChart(t), vals)
}

// objects holds every rendered object, decoded strictly into its typed struct.
type objects struct {
	deployments    map[string]*appsv1.Deployment
	services       map[string]*corev1.Service
	serviceAccts   map[string]*corev1.ServiceAccount
	configMaps     map[string]*corev1.ConfigMap
	secrets        map[string]*corev1.Secret
	roles          map[string]*rbacv1.Role
	roleBindings   map[string]*rbacv1.RoleBinding
	clusterRoles   map[string]*rbacv1.ClusterRole
	clusterBinds   map[string]*rbacv1.ClusterRoleBinding
	pdbs           map[string]*policyv1.PodDisruptionBudget
	scaledObjects  map[string]*kedav1alpha1.ScaledObject
	triggerAuths   map[string]*kedav1alpha1.TriggerAuthentication
	monitors       map[string]*unstructured.Unstructured // "PodMonitor/name", "ServiceMonitor/name"
	testPods       map[string]*corev1.Pod
	cronJobs       map[string]*batchv1.CronJob
	kinds          []string // "Kind/name", sorted
	renderedOutput string   // manifest, hooks and NOTES, for the golden file
}

// typeMeta reads apiVersion and kind only.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// decodeStrict decodes one YAML document into the typed struct of its kind. Unknown fields,
// duplicate fields and unknown kinds are errors: every field the chart writes must be one the
// API server (or KEDA's CRD) knows. Prometheus Operator objects decode into unstructured (its
// Go types module is not a dependency of this repository); their fields are checked by hand.
func decodeStrict(doc string, into *objects) error {
	var tm typeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return fmt.Errorf("read kind: %w", err)
	}
	strict := func(obj any) error {
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
		}
		// sigs.k8s.io/yaml's typed Unmarshal turns a scalar into a string where the target
		// field is a string, so `inferscale.io/pool: 123` or `on` decodes above. Helm sends
		// the API server the untyped conversion (YAMLToJSON: 123 a number, on a boolean), which
		// the server refuses for a string field; decode that JSON into the same type too.
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(reflect.New(reflect.TypeOf(obj).Elem()).Interface()); err != nil {
			return fmt.Errorf("%s %s as the API server reads it: %w", tm.APIVersion, tm.Kind, err)
		}
		return nil
	}
	var name string
	var err error
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		name, err = put(into.deployments, &appsv1.Deployment{}, strict)
	case "v1 Service":
		name, err = put(into.services, &corev1.Service{}, strict)
	case "v1 ServiceAccount":
		name, err = put(into.serviceAccts, &corev1.ServiceAccount{}, strict)
	case "v1 ConfigMap":
		name, err = put(into.configMaps, &corev1.ConfigMap{}, strict)
	case "v1 Secret":
		name, err = put(into.secrets, &corev1.Secret{}, strict)
	case "v1 Pod":
		name, err = put(into.testPods, &corev1.Pod{}, strict)
	case "rbac.authorization.k8s.io/v1 Role":
		name, err = put(into.roles, &rbacv1.Role{}, strict)
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		name, err = put(into.roleBindings, &rbacv1.RoleBinding{}, strict)
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		name, err = put(into.clusterRoles, &rbacv1.ClusterRole{}, strict)
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		name, err = put(into.clusterBinds, &rbacv1.ClusterRoleBinding{}, strict)
	case "batch/v1 CronJob":
		name, err = put(into.cronJobs, &batchv1.CronJob{}, strict)
	case "policy/v1 PodDisruptionBudget":
		name, err = put(into.pdbs, &policyv1.PodDisruptionBudget{}, strict)
	case "keda.sh/v1alpha1 ScaledObject":
		name, err = put(into.scaledObjects, &kedav1alpha1.ScaledObject{}, strict)
	case "keda.sh/v1alpha1 TriggerAuthentication":
		name, err = put(into.triggerAuths, &kedav1alpha1.TriggerAuthentication{}, strict)
	case "monitoring.coreos.com/v1 PodMonitor", "monitoring.coreos.com/v1 ServiceMonitor":
		o := &unstructured.Unstructured{}
		if err = strict(&o.Object); err == nil {
			name = o.GetName()
			into.monitors[tm.Kind+"/"+name] = o
		}
	default:
		return fmt.Errorf("unexpected object %s %s: the chart renders no such kind", tm.APIVersion, tm.Kind)
	}
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%s without metadata.name", tm.Kind)
	}
	// Two objects of one kind and name replace each other (or fail the install).
	if slices.Contains(into.kinds, tm.Kind+"/"+name) {
		return fmt.Errorf("%s %s is rendered twice", tm.Kind, name)
	}
	into.kinds = append(into.kinds, tm.Kind+"/"+name)
	return nil
}

// put decodes into o and files it under its name.
func put[T metav1.Object](m map[string]T, o T, strict func(any) error) (string, error) {
	if err := strict(o); err != nil {
		return "", err
	}
	m[o.GetName()] = o
	return o.GetName(), nil
}

// decodeRelease splits the manifest and the hooks and decodes every document.
func decodeRelease(rel *release.Release) (*objects, error) {
	o := &objects{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		serviceAccts: map[string]*corev1.ServiceAccount{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, roles: map[string]*rbacv1.Role{},
		roleBindings: map[string]*rbacv1.RoleBinding{}, clusterRoles: map[string]*rbacv1.ClusterRole{},
		clusterBinds: map[string]*rbacv1.ClusterRoleBinding{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		scaledObjects: map[string]*kedav1alpha1.ScaledObject{}, triggerAuths: map[string]*kedav1alpha1.TriggerAuthentication{},
		monitors: map[string]*unstructured.Unstructured{}, testPods: map[string]*corev1.Pod{}, cronJobs: map[string]*batchv1.CronJob{},
	}
	docs := []string{}
	for _, d := range releaseutil.SplitManifests(rel.Manifest) {
		docs = append(docs, d)
	}
	hooks := make([]string, 0, len(rel.Hooks))
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
		hooks = append(hooks, fmt.Sprintf("# Hook: %s (%v)\n%s", h.Path, h.Events, strings.TrimSpace(h.Manifest)))
	}
	sort.Strings(hooks)
	for _, d := range docs {
		if strings.TrimSpace(stripComments(d)) == "" {
			continue
		}
		if err := decodeStrict(d, o); err != nil {
			return nil, err
		}
	}
	sort.Strings(o.kinds)
	o.renderedOutput = strings.TrimSpace(rel.Manifest) + "\n---\n" + strings.Join(hooks, "\n---\n") +
		"\n---\n# NOTES.txt\n" + commentOut(rel.Info.Notes)
	return o, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func commentOut(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("# "+l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// renderObjects renders a case and decodes it; any failure is fatal.
func renderObjects(t *testing.T, rc renderCase) *objects {
	t.Helper()
	rel, err := render(t, readValues(t, rc.files...))
	if err != nil {
		t.Fatalf("render %s: %v", rc.name, err)
	}
	o, err := decodeRelease(rel)
	if err != nil {
		t.Fatalf("decode %s: %v", rc.name, err)
	}
	return o
}

// TestGolden renders every case and compares it with testdata/golden/<case>.yaml; run
// `go test ./deploy -run TestGolden -update` after an intended change and review the diff.
func TestGolden(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			got := renderObjects(t, rc).renderedOutput
			path := filepath.Join("testdata", "golden", rc.name+".yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./deploy -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("render differs from %s (-want +got); rerun with -update if intended:\n%s", path, diff)
			}
		})
	}
}

// TestRenderedKinds pins which objects each case renders, so a template that silently renders
// nothing (or something extra) fails here.
func TestRenderedKinds(t *testing.T) {
	tests := []struct {
		rc   renderCase
		want []string
	}{
		{rc: renderCases[0], want: []string{
			"Deployment/rel-inferscale-scaler", "PodDisruptionBudget/rel-inferscale-scaler",
			"Pod/rel-inferscale-scaler-test-health", "Role/rel-inferscale-scaler", "RoleBinding/rel-inferscale-scaler",
			"Service/rel-inferscale-scaler", "ServiceAccount/rel-inferscale-scaler",
		}},
		{rc: renderCases[1], want: []string{
			"ConfigMap/rel-inferscale-embed-catalog", "Deployment/rel-inferscale-embed", "Deployment/rel-inferscale-scaler",
			"PodDisruptionBudget/rel-inferscale-scaler", "Pod/rel-inferscale-scaler-test-health",
			"Role/rel-inferscale-pool", "Role/rel-inferscale-scaler", "RoleBinding/rel-inferscale-pool", "RoleBinding/rel-inferscale-scaler",
			"ScaledObject/rel-inferscale-embed", "Service/rel-inferscale-embed", "Service/rel-inferscale-scaler",
			"ServiceAccount/rel-inferscale-pool", "ServiceAccount/rel-inferscale-scaler",
		}},
		{rc: renderCases[2], want: []string{
			"Deployment/rel-inferscale-llama", "Deployment/rel-inferscale-scaler",
			"PodDisruptionBudget/rel-inferscale-scaler", "Pod/rel-inferscale-scaler-test-health",
			"Role/rel-inferscale-scaler", "RoleBinding/rel-inferscale-scaler",
			"ScaledObject/rel-inferscale-llama", "Service/rel-inferscale-llama", "Service/rel-inferscale-scaler",
			"ServiceAccount/rel-inferscale-pool", "ServiceAccount/rel-inferscale-scaler",
		}},
		{rc: renderCases[3], want: []string{
			"ConfigMap/rel-inferscale-small-catalog", "Deployment/rel-inferscale-scaler", "Deployment/rel-inferscale-small",
			"PodDisruptionBudget/rel-inferscale-scaler", "Pod/rel-inferscale-scaler-test-health",
			"Role/rel-inferscale-pool", "Role/rel-inferscale-scaler", "RoleBinding/rel-inferscale-pool", "RoleBinding/rel-inferscale-scaler",
			"ScaledObject/rel-inferscale-small", "Secret/rel-inferscale-scaler-client-tls", "Secret/rel-inferscale-scaler-tls",
			"Service/rel-inferscale-scaler", "Service/rel-inferscale-small",
			"ServiceAccount/rel-inferscale-pool", "ServiceAccount/rel-inferscale-scaler",
			"TriggerAuthentication/rel-inferscale-scaler-tls",
		}},
		{rc: renderCases[4], want: []string{
			"ConfigMap/rel-inferscale-dashboard", "ConfigMap/rel-inferscale-tail-catalog",
			"Deployment/rel-inferscale-chat", "Deployment/rel-inferscale-scaler", "Deployment/rel-inferscale-tail",
			"PodDisruptionBudget/rel-inferscale-scaler", "PodMonitor/rel-inferscale-chat", "PodMonitor/rel-inferscale-scaler",
			"PodMonitor/rel-inferscale-tail", "Pod/rel-inferscale-scaler-test-health",
			"Role/rel-inferscale-pool", "Role/rel-inferscale-scaler", "RoleBinding/rel-inferscale-pool", "RoleBinding/rel-inferscale-scaler",
			"ScaledObject/rel-inferscale-chat", "ScaledObject/rel-inferscale-tail",
			"Service/rel-inferscale-chat", "Service/rel-inferscale-scaler", "Service/rel-inferscale-tail",
			"ServiceAccount/rel-inferscale-pool", "ServiceAccount/rel-inferscale-scaler", "ServiceMonitor/rel-inferscale-scaler",
		}},
		{rc: renderCases[5], want: []string{
			"Deployment/rel-inferscale-scaler", "PodDisruptionBudget/rel-inferscale-scaler",
			"Pod/rel-inferscale-scaler-test-health", "Role/rel-inferscale-scaler", "ClusterRole/team-a-rel-inferscale-scaler", "ClusterRoleBinding/team-a-rel-inferscale-scaler", "RoleBinding/rel-inferscale-scaler",
			"Service/rel-inferscale-scaler", "ServiceAccount/rel-inferscale-scaler",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.rc.name, func(t *testing.T) {
			got := renderObjects(t, tt.rc).kinds
			sort.Strings(tt.want)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rendered objects (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStrictDecodeRejectsUnknownFields proves the decoder used above is strict: a misspelt
// field in a Deployment or a ScaledObject is an error, not silently dropped.
func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
		wantErr2           string // a second part the error must contain, where set
	}{
		{
			name:    "deployment",
			doc:     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n",
			wantErr: `unknown field "replica"`,
		},
		{
			name:    "scaledobject",
			doc:     "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec:\n  scaleTargetRef: {name: x}\n  cooldown: 3\n  triggers: []\n",
			wantErr: `unknown field "cooldown"`,
		},
		{
			name:    "unknown kind",
			doc:     "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\n",
			wantErr: "unexpected object batch/v1 Job",
		},
		{
			// sigs.k8s.io/yaml's typed Unmarshal would read 123 as "123"; the API server
			// receives a number and refuses it.
			name: "number as a label value",
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: x, labels: {inferscale.io/pool: 123}}\n",
			// (Go 1.26 names the field ObjectMeta.metadata.labels, Go 1.27 the label itself.)
			wantErr:  "cannot unmarshal number into Go struct field",
			wantErr2: "metadata.labels",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _ := decodeRelease(&release.Release{Info: &release.Info{}})
			err := decodeStrict(tt.doc, o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.wantErr2) {
				t.Fatalf("decodeStrict error = %v, want it to contain %q and %q", err, tt.wantErr, tt.wantErr2)
			}
		})
	}
}

var durationArgRE = regexp.MustCompile(`^--([a-z-]+)=(.*)$`)

// argMap splits --name=value arguments into a map.
func argMap(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		if s := durationArgRE.FindStringSubmatch(a); s != nil {
			m[s[1]] = s[2]
		}
	}
	return m
}
