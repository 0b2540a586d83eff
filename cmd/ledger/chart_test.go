package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/ledger/specfile"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestChartCronJob renders the chart with ledger.enabled and checks what
// the chart's CronJob runs against this command: its arguments parse with
// the command's own flags and pass Validate, the services ConfigMap is a
// spec the ledger accepts, and the RBAC only reads, but for get/update of
// the report ConfigMap.
func TestChartCronJob(t *testing.T) {
	chrt, err := loader.Load("../../deploy/helm/inferscale")
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = "rel", "ml"
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	inst.APIVersions = chartutil.VersionSet{"keda.sh/v1alpha1"}
	vals := map[string]any{"ledger": map[string]any{
		"enabled":     true,
		"pushgateway": "http://pushgateway.monitoring.svc:9091",
		"services": []any{
			map[string]any{"name": "embedding", "tier": "P0", "profile": "1g.10gb", "peakRPS": 60, "safeRPSPerReplica": 40},
			map[string]any{"name": "document-extraction", "tier": "P2", "profile": "1g.10gb"},
		},
	}}
	rel, err := inst.RunWithContext(context.Background(), chrt, vals)
	if err != nil {
		t.Fatal(err)
	}
	var (
		cron     *batchv1.CronJob
		services string
		report   bool
		cluster  []rbacv1.PolicyRule
		role     []rbacv1.PolicyRule
	)
	for name, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch meta.Kind {
		case "CronJob":
			cron = &batchv1.CronJob{}
			if err := yaml.UnmarshalStrict([]byte(doc), cron); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			switch cm.Name {
			case "rel-inferscale-ledger-services":
				services = cm.Data["services.yaml"]
			case "rel-inferscale-ledger-report":
				report = true
			}
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(r.Name, "ledger") {
				cluster = r.Rules
			}
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(r.Name, "ledger") {
				role = r.Rules
			}
		}
	}
	if cron == nil || services == "" || !report {
		t.Fatalf("rendered CronJob %v, services ConfigMap %q, report ConfigMap %v", cron != nil, services, report)
	}
	ctr := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	c, _, err := parseFlags(ctr.Args, io.Discard)
	if err != nil {
		t.Fatalf("args %v: %v", ctr.Args, err)
	}
	c.Namespace = "ml" // $POD_NAMESPACE in the pod
	if err := c.Validate(); err != nil {
		t.Errorf("args %v: %v", ctr.Args, err)
	}
	if !c.Live || c.ConfigMap != "rel-inferscale-ledger-report" || c.Pushgateway == "" || c.PrometheusAddress == "" || c.Format != "json" {
		t.Errorf("config %+v: want live, the report ConfigMap, a pushgateway, Prometheus and JSON", c)
	}
	spec, err := specfile.Parse([]byte(services), "services.yaml")
	if err != nil {
		t.Fatalf("services ConfigMap: %v\n%s", err, services)
	}
	if len(spec.Services) != 2 || spec.Services[0].SafeRPSPerReplica != 40 {
		t.Errorf("services %+v", spec.Services)
	}
	for _, r := range cluster {
		if !slices.Equal(r.Verbs, []string{"get", "list"}) {
			t.Errorf("ClusterRole rule %+v: want get and list only", r)
		}
	}
	if len(cluster) != 4 {
		t.Errorf("ClusterRole has %d rules, want 4 (nodes, HPAs, ScaledObjects, Knative Services)", len(cluster))
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"rel-inferscale-ledger-report"}, Verbs: []string{"get", "update"}}}
	if len(role) != 1 || !slices.Equal(role[0].Verbs, want[0].Verbs) || !slices.Equal(role[0].ResourceNames, want[0].ResourceNames) {
		t.Errorf("Role rules %+v, want %+v", role, want)
	}
	if sc := ctr.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem", sc)
	}
}
