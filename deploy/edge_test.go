package deploy

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/inferscale/inferscale/scaler"
)

// renderAs renders like render, as another release in another namespace.
func renderAs(t *testing.T, rel, ns string, vals map[string]any) (*release.Release, error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = rel, ns
	inst.KubeVersion = &kubeVersion
	inst.APIVersions = chartutil.VersionSet{"keda.sh/v1alpha1", "monitoring.coreos.com/v1"}
	return inst.RunWithContext(context.Background(), loadChart(t), vals)
}

// tritonPool is minimalPool with another name and the given keys replaced.
func tritonPool(name string, patch map[string]any) map[string]any {
	p := minimalPool()
	p["name"] = name
	maps.Copy(p, patch)
	return p
}

func vllmPool(name string) map[string]any {
	return map[string]any{
		"name": name, "engine": "vllm", "model": "m",
		"image":   map[string]any{"repository": "vllm/vllm-openai", "tag": "v0.11.0"},
		"scaling": map[string]any{"replicaThroughput": 2},
	}
}

// simulatedPodNames are the names Kubernetes gives the pods of Deployment d: its ReplicaSet is
// "<d>-<pod-template-hash>" (1 to 10 characters), and a pod's generated name is that plus "-",
// cut to 58 characters, plus 5 random characters (apiserver's SimpleNameGenerator).
func simulatedPodNames(d string) []string {
	var out []string
	for n := 1; n <= 10; n++ {
		base := d + "-" + strings.Repeat("c", n-1) + "7" + "-"
		if len(base) > 58 {
			base = base[:58]
		}
		out = append(out, base+"x2z9q")
	}
	return out
}

var podRegexRE = regexp.MustCompile(`pod=~"([^"]+)"`)

// checkRendered applies what the API server, KEDA, the scaler and the sidecar check to a
// render: object names per kind, label keys and values, the scaler's and every sidecar's
// flags, every trigger's metadata, pod regexes against the pods Kubernetes would name, and a
// drain hook on every pool.
func checkRendered(t *testing.T, o *objects) {
	t.Helper()
	var all []metav1.Object
	add := func(kind string, objs []metav1.Object) {
		for _, ob := range objs {
			all = append(all, ob)
			name := ob.GetName()
			var errs []string
			switch kind {
			case "Service":
				errs = validation.IsDNS1035Label(name)
			case "CronJob":
				errs = validation.IsDNS1123Subdomain(name)
				if len(name) > 52 {
					errs = append(errs, "a CronJob name must be no more than 52 characters")
				}
			case "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
				errs = content.IsPathSegmentName(name)
			default:
				errs = validation.IsDNS1123Subdomain(name)
			}
			for _, e := range errs {
				t.Errorf("%s %q: %s", kind, name, e)
			}
		}
	}
	add("Deployment", values(o.deployments))
	add("Service", values(o.services))
	add("ServiceAccount", values(o.serviceAccts))
	add("ConfigMap", values(o.configMaps))
	add("Secret", values(o.secrets))
	add("Role", values(o.roles))
	add("RoleBinding", values(o.roleBindings))
	add("ClusterRole", values(o.clusterRoles))
	add("ClusterRoleBinding", values(o.clusterBinds))
	add("PodDisruptionBudget", values(o.pdbs))
	add("ScaledObject", values(o.scaledObjects))
	add("TriggerAuthentication", values(o.triggerAuths))
	add("Pod", values(o.testPods))
	add("CronJob", values(o.cronJobs))
	add("Monitor", values(o.monitors))

	checkLabels := func(where string, l map[string]string) {
		for k, v := range l {
			for _, e := range validation.IsQualifiedName(k) {
				t.Errorf("%s: label key %q: %s", where, k, e)
			}
			for _, e := range validation.IsValidLabelValue(v) {
				t.Errorf("%s: label %s=%q: %s", where, k, v, e)
			}
		}
	}
	for _, ob := range all {
		checkLabels(ob.GetName(), ob.GetLabels())
	}
	for _, d := range o.deployments {
		checkLabels(d.Name+" pod template", d.Spec.Template.Labels)
	}
	for _, c := range o.cronJobs {
		checkLabels(c.Name+" pod template", c.Spec.JobTemplate.Spec.Template.Labels)
	}

	cfg := scalerConfig(t, o.deployments[scalerNameOf(o)])
	if err := cfg.Validate(); err != nil {
		t.Errorf("the scaler refuses the chart's flags: %v", err)
	}
	decls := residencyFlagDecls(t)
	for _, d := range o.deployments {
		if d.Labels["app.kubernetes.io/component"] != "pool" {
			continue
		}
		spec := d.Spec.Template.Spec
		if sc, ok := sidecar(spec); ok {
			if err := residencyConfig(t, decls, sc).Validate(); err != nil {
				t.Errorf("%s: the sidecar refuses the chart's flags: %v", d.Name, err)
			}
		} else if c := spec.Containers[0]; c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
			t.Errorf("%s: container %s has no sidecar and no preStop sleep: it gets SIGTERM while its endpoints still route to it", d.Name, c.Name)
		}
		so := o.scaledObjects[d.Name]
		if so == nil {
			t.Errorf("%s: no ScaledObject", d.Name)
			continue
		}
		meta := so.Spec.Triggers[0].Metadata
		if _, err := scaler.ParseMetadata(meta, scaler.Defaults{PrometheusAddress: cfg.PrometheusAddress}); err != nil {
			t.Errorf("%s: the scaler refuses the trigger: %v", so.Name, err)
		}
		for k, v := range meta {
			m := podRegexRE.FindStringSubmatch(v)
			if m == nil {
				continue
			}
			re := regexp.MustCompile("^(?:" + m[1] + ")$")
			for _, pod := range simulatedPodNames(d.Name) {
				if !re.MatchString(pod) {
					t.Errorf("%s: %s's pod regex %q does not match its pod %q", so.Name, k, m[1], pod)
				}
			}
			for other := range o.deployments {
				if other == d.Name {
					continue
				}
				for _, pod := range simulatedPodNames(other) {
					if re.MatchString(pod) {
						t.Errorf("%s: %s's pod regex %q matches %q, a pod of %s", so.Name, k, m[1], pod, other)
					}
				}
			}
		}
	}
}

func values[T metav1.Object](m map[string]T) []metav1.Object {
	out := make([]metav1.Object, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// scalerNameOf finds the scaler's Deployment, whatever the release is called.
func scalerNameOf(o *objects) string {
	for name, d := range o.deployments {
		if d.Labels["app.kubernetes.io/component"] == "scaler" {
			return name
		}
	}
	return ""
}

var podRegexQuery = map[string]any{"engine": "custom", "replicaThroughput": 1,
	"queueQuery": `sum(nv_inference_pending_request_count{pod=~"{{ .pool.podRegex }}"})`}

// TestEdgeValuesRender: values at the edges that must render objects Kubernetes, KEDA, the
// scaler and the sidecar all accept.
func TestEdgeValuesRender(t *testing.T) {
	long := "inference-platform-production" // 29 characters
	tests := []struct {
		name, release, namespace string
		vals                     map[string]any
		check                    func(t *testing.T, o *objects)
	}{
		{
			// Pool names YAML reads as a boolean or a number: unquoted in a label, the API
			// server gets true or 123, not a string.
			name: "pool names on, 123, 7b; several pools", release: "rel", namespace: namespace,
			vals: map[string]any{"pools": []any{tritonPool("on", nil), tritonPool("123", nil), vllmPool("7b")}},
		},
		{
			name: "release name 2024x and nameOverride 1", release: "x2024", namespace: namespace,
			vals: map[string]any{"nameOverride": "1", "pools": []any{tritonPool("p", nil)}},
		},
		{
			name: "release name containing inferscale", release: "inferscale-prod", namespace: namespace,
			vals: map[string]any{"pools": []any{tritonPool("embed", map[string]any{"scaling": podRegexQuery}), tritonPool("embed-v2", map[string]any{"scaling": podRegexQuery})}},
			check: func(t *testing.T, o *objects) {
				if o.deployments["inferscale-prod-embed"] == nil || o.services["inferscale-prod-scaler"] == nil {
					t.Errorf("objects %v, want inferscale-prod-embed and inferscale-prod-scaler", o.kinds)
				}
			},
		},
		{
			// A pool's full name of exactly 46 characters: the longest whose pods keep
			// "-<hash>-" whole, so .pool.podRegex still tells them apart.
			name: "pool full name of 46 characters with podRegex", release: "rel", namespace: namespace,
			vals: map[string]any{"fullnameOverride": strings.Repeat("a", 41), "pools": []any{
				tritonPool("e", map[string]any{"scaling": podRegexQuery}), tritonPool("e-v2", map[string]any{"scaling": podRegexQuery})}},
		},
		{
			// A pool's full name cut at 63 characters is fine without .pool.podRegex.
			name: "long release and pool names", release: long, namespace: namespace,
			vals: map[string]any{"pools": []any{tritonPool("text-embedding-multilingual-large", nil)}},
			check: func(t *testing.T, o *objects) {
				if _, ok := o.services[long+"-inferscale-text-embedding-multili"]; !ok {
					t.Errorf("objects %v: want the pool's Service cut at 63 characters", o.kinds)
				}
			},
		},
		{
			// The ledger's CronJob: Kubernetes refuses a CronJob name of more than 52
			// characters; <fullname>-ledger was cut at 63.
			name: "ledger with a long release name, pushgateway on", release: long + "-serving", namespace: namespace,
			vals: map[string]any{"ledger": map[string]any{"enabled": true, "pushgateway": "http://pushgateway.monitoring.svc:9091"}},
			check: func(t *testing.T, o *objects) {
				c := o.cronJobs[long+"-serving-inferscale-led"]
				if c == nil {
					t.Fatalf("objects %v: want CronJob %s-serving-inferscale-led", o.kinds, long)
				}
				args := argMap(c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args)
				if args["pushgateway"] != "http://pushgateway.monitoring.svc:9091" || args["configmap"] != long+"-serving-inferscale-ledger-report" {
					t.Errorf("ledger args %v", args)
				}
			},
		},
		{
			name: "ledger on, pushgateway and Prometheus off", release: "rel", namespace: namespace,
			vals: map[string]any{"ledger": map[string]any{"enabled": true, "peakFromPrometheus": false}},
			check: func(t *testing.T, o *objects) {
				args := argMap(o.cronJobs["rel-inferscale-ledger"].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args)
				for _, k := range []string{"pushgateway", "prometheus-address", "peak-window"} {
					if _, ok := args[k]; ok {
						t.Errorf("ledger args %v: want no --%s", args, k)
					}
				}
			},
		},
		{
			// With a namespace of 50 characters, "<namespace>-<fullname>-scaler" and
			// "<namespace>-<fullname>-ledger" were both cut to 63 characters: one ClusterRole
			// name for two ClusterRoles (and for every release in the namespace).
			name: "shared scaler and ledger in a long namespace", release: "rel", namespace: strings.Repeat("n", 50),
			vals: map[string]any{"scaler": map[string]any{"watchAllNamespaces": true}, "ledger": map[string]any{"enabled": true}},
			check: func(t *testing.T, o *objects) {
				ns := strings.Repeat("n", 50)
				for _, n := range []string{ns + "-rel-inferscale-scaler", ns + "-rel-inferscale-ledger"} {
					if o.clusterRoles[n] == nil || o.clusterBinds[n] == nil {
						t.Errorf("ClusterRoles %v: want %s", o.kinds, n)
					}
				}
			},
		},
		{
			name: "minReplicas 0, maxReplicas 1", release: "rel", namespace: namespace,
			vals: map[string]any{"pools": []any{tritonPool("p", map[string]any{"scaling": map[string]any{"engine": "custom", "queueQuery": "sum(q)", "replicaThroughput": 1, "minReplicas": 0, "maxReplicas": 1}})}},
			check: func(t *testing.T, o *objects) {
				so := o.scaledObjects["rel-inferscale-p"]
				if *so.Spec.MinReplicaCount != 0 || *so.Spec.MaxReplicaCount != 1 {
					t.Errorf("min/max %d/%d, want 0/1", *so.Spec.MinReplicaCount, *so.Spec.MaxReplicaCount)
				}
			},
		},
		{
			// A Triton pool without the sidecar had no preStop at all: Triton got SIGTERM
			// while its endpoints still routed requests to it.
			name: "triton pool without the sidecar", release: "rel", namespace: namespace,
			vals: map[string]any{"pools": []any{tritonPool("plain", map[string]any{"residency": map[string]any{"enabled": false}})}},
			check: func(t *testing.T, o *objects) {
				spec := o.deployments["rel-inferscale-plain"].Spec.Template.Spec
				tr, _ := container(spec.Containers, "triton")
				if tr.Lifecycle == nil || tr.Lifecycle.PreStop == nil || tr.Lifecycle.PreStop.Sleep == nil || tr.Lifecycle.PreStop.Sleep.Seconds != 10 {
					t.Errorf("triton lifecycle %+v, want a preStop sleep of drain.preStopSleepSeconds (10)", tr.Lifecycle)
				}
				if g := *spec.TerminationGracePeriodSeconds; g != 40 {
					t.Errorf("terminationGracePeriodSeconds %d, want 10 + 30", g)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel, err := renderAs(t, tt.release, tt.namespace, tt.vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			o, err := decodeRelease(rel)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			checkRendered(t, o)
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

// TestPreStopSleepZero: Kubernetes below 1.33 refuses a preStop sleep of 0 seconds
// (PodLifecycleSleepActionAllowZero), and the chart supports 1.30; 0 means no hook.
func TestPreStopSleepZero(t *testing.T) {
	rel, err := render(t, map[string]any{"drain": map[string]any{"preStopSleepSeconds": 0}, "pools": []any{vllmPool("llama")}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeRelease(rel)
	if err != nil {
		t.Fatal(err)
	}
	d := o.deployments["rel-inferscale-llama"]
	if l := d.Spec.Template.Spec.Containers[0].Lifecycle; l != nil {
		t.Errorf("lifecycle %+v, want none with preStopSleepSeconds 0", l)
	}
	if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 30 {
		t.Errorf("terminationGracePeriodSeconds %d, want 30", g)
	}
}

// TestHostileValuesRefused: values that rendered objects Kubernetes, the scaler or the sidecar
// refuse (or that injected YAML) fail the render, naming the value.
func TestHostileValuesRefused(t *testing.T) {
	pool := func(patch map[string]any) []any { return []any{tritonPool("p", patch)} }
	long := strings.Repeat("a", 40)
	tests := []struct {
		name    string
		release string // default "rel"
		give    map[string]any
		set     []string
		want    []string
	}{
		// YAML injection through strings the templates wrote unquoted.
		{name: "prometheus.address with a newline adds a scaler flag",
			give: map[string]any{"prometheus": map[string]any{"address": "http://p:9090\n            - --kubeconfig=/tmp/k"}},
			want: []string{"/prometheus/address", "does not match pattern"}},
		{name: "modelRepository with ' #' cut at the comment",
			give: map[string]any{"pools": pool(map[string]any{"modelRepository": "s3://bucket #2"})},
			want: []string{"/pools/0/modelRepository"}},
		{name: "image repository with a newline",
			give: map[string]any{"pools": pool(map[string]any{"image": map[string]any{"repository": "nvcr.io/x\n          privileged: true"}})},
			want: []string{"/pools/0/image/repository"}},
		{name: "shmSize with a newline",
			give: map[string]any{"pools": pool(map[string]any{"shmSize": "1Gi\n            medium: Disk"})},
			want: []string{"/pools/0/shmSize"}},
		{name: "unquoted image tag 1.10 is the number 1.1",
			give: map[string]any{"pools": pool(map[string]any{"image": map[string]any{"repository": "nvcr.io/nvidia/tritonserver", "tag": 1.10}})},
			want: []string{"/pools/0/image/tag"}},
		{name: "a label value that is a number",
			give: map[string]any{"commonLabels": map[string]any{"team": 7}},
			want: []string{"/commonLabels/team"}},
		{name: "a label value with a space",
			give: map[string]any{"pools": pool(map[string]any{"podLabels": map[string]any{"team": "a b"}})},
			want: []string{"/pools/0/podLabels/team"}},
		{name: "a pod label that replaces a selector label",
			give: map[string]any{"pools": pool(map[string]any{"podLabels": map[string]any{"inferscale.io/pool": "other"}})},
			want: []string{"/pools/0/podLabels/inferscale.io~1pool", "'not' failed"}},
		{name: "a common label the chart sets itself",
			give: map[string]any{"commonLabels": map[string]any{"app.kubernetes.io/name": "x"}},
			want: []string{"/commonLabels/app.kubernetes.io~1name"}},
		{name: "an annotation that is a boolean",
			give: map[string]any{"scaler": map[string]any{"podAnnotations": map[string]any{"sidecar.istio.io/inject": false}}},
			want: []string{"/scaler/podAnnotations/sidecar.istio.io~1inject"}},
		{name: "fullnameOverride not a DNS label",
			give: map[string]any{"fullnameOverride": "Team_A"},
			want: []string{"/fullnameOverride"}},
		{name: "release name with a dot names Services no DNS label", release: "team.a",
			want: []string{`the chart's full name "team.a-inferscale"`, "DNS-1035"}},
		{name: "release name starting with a digit", release: "2024",
			want: []string{`the chart's full name "2024-inferscale"`, "starting with a letter"}},
		{name: "Prometheus Operator interval with a fraction",
			give: map[string]any{"monitoring": map[string]any{"podMonitor": map[string]any{"enabled": true, "interval": "1.5s"}}},
			want: []string{"/monitoring/podMonitor/interval"}},
		{name: "PDB maxUnavailable not a number or percentage",
			give: map[string]any{"scaler": map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": "one"}}},
			want: []string{"/scaler/podDisruptionBudget/maxUnavailable"}},
		{name: "budgetBytes past int64",
			give: map[string]any{"pools": pool(map[string]any{"residency": map[string]any{"budgetBytes": 1e20, "catalog": minimalPool()["residency"].(map[string]any)["catalog"]}})},
			want: []string{"/pools/0/residency/budgetBytes", "maximum"}},

		{name: "a pool with zero models (the sidecar refuses an empty catalog)",
			give: map[string]any{"pools": pool(map[string]any{"residency": map[string]any{"catalog": map[string]any{"models": []any{}}}})},
			want: []string{"/pools/0/residency/catalog/models", "minItems"}},

		// Trigger metadata the schema passed and the scaler refuses (InvalidArgument at runtime).
		{name: "activationActivity above 1",
			give: map[string]any{"scaling": map[string]any{"activationActivity": 2}},
			want: []string{"/scaling/activationActivity", "maximum"}},
		{name: "warmReplicas above 100000",
			give: map[string]any{"scaling": map[string]any{"warmReplicas": 200000}},
			want: []string{"/scaling/warmReplicas", "maximum"}},
		{name: "gpuHourPrice above 1e9",
			give: map[string]any{"scaling": map[string]any{"gpuHourPrice": 1e10}},
			want: []string{"/scaling/gpuHourPrice", "maximum"}},
		{name: "--set sloQuantile=0.99999",
			set:  []string{"scaling.sloQuantile=0.99999"},
			want: []string{"/scaling/sloQuantile", "does not match pattern"}},
		{name: "scaleDownWindow above 1h",
			give: map[string]any{"pools": pool(map[string]any{"scaling": map[string]any{"engine": "custom", "queueQuery": "sum(q)", "replicaThroughput": 1, "scaleDownWindow": "2h"}})},
			want: []string{`pools[p].scaling.scaleDownWindow: "2h" must be a duration in [0s, 1h] (the scaler refuses it)`}},
		{name: "staleAfter 0",
			give: map[string]any{"scaling": map[string]any{"staleAfter": "0s"}, "pools": pool(nil)},
			want: []string{`pools[p].scaling.staleAfter: "0s" must be a duration in (0s, 1h]`}},
		{name: "triton preset without a model",
			give: map[string]any{"pools": pool(map[string]any{"scaling": map[string]any{}})},
			want: []string{"pools[p]: the scaler's triton preset needs the model label value"}},
		{name: "vllm preset without a model",
			give: map[string]any{"pools": []any{func() map[string]any { p := vllmPool("llama"); delete(p, "model"); return p }()}},
			want: []string{"pools[llama]: the scaler's vllm preset needs the model label value"}},
		{name: "custom engine without a query",
			give: map[string]any{"pools": pool(map[string]any{"scaling": map[string]any{"engine": "custom"}})},
			want: []string{"pools[p].scaling: engine custom needs queueQuery, rateQuery, runningQuery or activityQuery"}},
		{name: "custom engine with a model",
			give: map[string]any{"pools": []any{tritonPool("p", map[string]any{"model": "m"})}},
			want: []string{"pools[p]: model has no effect with scaling.engine custom"}},
		{name: "custom queue without a service time",
			give: map[string]any{"pools": pool(map[string]any{"scaling": map[string]any{"engine": "custom", "queueQuery": "sum(q)"}})},
			want: []string{"pools[p].scaling: with engine custom, a queueQuery or rateQuery needs serviceTimeQuery or replicaThroughput"}},

		// Flags the schema passed and the processes refuse at start (a crash-looping pod).
		{name: "sidecar drainTimeout below 1s",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"drainTimeout": "500ms"}}, "pools": pool(nil)},
			want: []string{`pools[p].residency.config.drainTimeout: "500ms" must be a duration in [1s, 1h] (cmd/residency refuses it)`}},
		{name: "sidecar propagationDelay above 5m",
			give: map[string]any{"pools": pool(map[string]any{"residency": map[string]any{"config": map[string]any{"propagationDelay": "10m"}, "catalog": minimalPool()["residency"].(map[string]any)["catalog"]}})},
			want: []string{`pools[p].residency.config.propagationDelay: "10m" must be a duration in [0s, 5m]`}},
		{name: "sidecar failureBackoffMax below failureBackoff",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"failureBackoff": "1m", "failureBackoffMax": "30s"}}, "pools": pool(nil)},
			want: []string{`pools[p].residency.config.failureBackoffMax: "30s" must be a duration in [failureBackoff (1m), 24h]`}},
		{name: "scaler refreshInterval 0",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"refreshInterval": "0"}}},
			want: []string{`scaler.config.refreshInterval: "0" must be a duration in [100ms, 10m] (cmd/scaler refuses it)`}},
		{name: "scaler forgetAfter below refreshInterval",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"refreshInterval": "1m", "forgetAfter": "30s"}}},
			want: []string{`scaler.config.forgetAfter: "30s" must be at least scaler.config.refreshInterval (1m)`}},
		{name: "scaler opencostWindow below 10m",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostWindow": "5m"}}},
			want: []string{`scaler.config.opencostWindow: "5m" must be a duration in [10m, 168h] (cmd/scaler refuses it)`}},
		{name: "scaler opencostWindow not whole minutes",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostWindow": "10m30s"}}},
			want: []string{`scaler.config.opencostWindow: "10m30s" must be whole minutes (cmd/scaler refuses it)`}},
		{name: "scaler opencostRefresh above 1h",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostRefresh": "2h"}}},
			want: []string{`scaler.config.opencostRefresh: "2h" must be a duration in [1m, 1h] (cmd/scaler refuses it)`}},

		// The sidecar's memory against what its front may hold (BENCHMARKS.md "Sidecar memory while holding").
		{name: "sidecar GOMEMLIMIT above its memory limit",
			give: map[string]any{"residency": map[string]any{"goMemLimit": "1TiB"}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "1TiB" is above residency.resources.limits.memory (128Mi) − 20 MiB`}},
		{name: "sidecar GOMEMLIMIT just above limit − 20 MiB",
			give: map[string]any{"residency": map[string]any{"goMemLimit": "109MiB"}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "109MiB" is above residency.resources.limits.memory (128Mi) − 20 MiB`}},
		{name: "sidecar GOMEMLIMIT below the held bytes + 32 MiB",
			give: map[string]any{"residency": map[string]any{"goMemLimit": "95MiB"}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "95MiB" is below the sidecar's holdMaxTotalBytes (67108864 bytes; residency.config or pools[].residency.config) + 32 MiB (its own heap and the forwarded requests it keeps)`}},
		{name: "sidecar GOMEMLIMIT of one byte",
			give: map[string]any{"residency": map[string]any{"goMemLimit": "1B"}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "1B" is below`}},
		{name: "held bytes above half the sidecar's memory limit",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"holdMaxTotalBytes": 134217728}, "goMemLimit": ""}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.config.holdMaxTotalBytes (134217728 bytes) is more than half residency.resources.limits.memory (128Mi)`}},
		{name: "sidecar memory limit below the default GOMEMLIMIT",
			give: map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "64Mi"}}, "config": map[string]any{"holdMaxTotalBytes": 16777216}}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "96MiB" is above residency.resources.limits.memory (64Mi) − 20 MiB`}},
		{name: "sidecar memory limit a plain number from a values file (a float), below GOMEMLIMIT + 20 MiB",
			give: map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": float64(1e8)}}, "config": map[string]any{"holdMaxTotalBytes": 16777216}}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "96MiB" is above residency.resources.limits.memory (1e+08) − 20 MiB`}},
		{name: "sidecar memory limit in exponent form",
			give: map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1e8"}}, "config": map[string]any{"holdMaxTotalBytes": 16777216}}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.goMemLimit "96MiB" is above residency.resources.limits.memory (1e8) − 20 MiB`}},
		{name: "sidecar memory limit as a fraction, below twice the held bytes",
			give: map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "0.1Gi"}}, "goMemLimit": ""}, "pools": pool(nil)},
			want: []string{`pools[p]: residency.config.holdMaxTotalBytes (67108864 bytes) is more than half residency.resources.limits.memory (0.1Gi)`}},
		{name: "sidecar memory limit in millibytes",
			give: map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "128m"}}}, "pools": pool(nil)},
			want: []string{`is more than half residency.resources.limits.memory (128m)`}},
		{name: "sidecar memory limit not a quantity",
			give: map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "lots"}}}, "pools": pool(nil)},
			want: []string{`residency.resources.limits.memory: "lots" is not a memory quantity`}},
		{name: "GOMEMLIMIT in the sidecar's env",
			give: map[string]any{"residency": map[string]any{"env": []any{map[string]any{"name": "GOMEMLIMIT", "value": "1TiB"}}}, "pools": pool(nil)},
			want: []string{`residency.env sets GOMEMLIMIT, which residency.goMemLimit sets and the chart checks`}},
		{name: "--hold-max-total-bytes in the sidecar's extraArgs",
			give: map[string]any{"residency": map[string]any{"extraArgs": []any{"--hold-max-total-bytes=1073741824"}}, "pools": pool(nil)},
			want: []string{`residency.extraArgs sets --hold-max-total-bytes`}},
		{name: "--retain-max-total-bytes in the sidecar's extraArgs",
			give: map[string]any{"residency": map[string]any{"extraArgs": []any{"--retain-max-total-bytes=1073741824"}}, "pools": pool(nil)},
			want: []string{`residency.extraArgs sets --retain-max-total-bytes, which the chart's memory check counts at cmd/residency's default (16 MiB`}},
		{name: "GOMEMLIMIT in the scaler's env",
			give: map[string]any{"scaler": map[string]any{"env": []any{map[string]any{"name": "GOMEMLIMIT", "value": "1TiB"}}}},
			want: []string{`scaler.env sets GOMEMLIMIT`}},
		{name: "scaler GOMEMLIMIT of one kibibyte",
			give: map[string]any{"scaler": map[string]any{"goMemLimit": "1KiB"}},
			want: []string{`scaler.goMemLimit "1KiB" is below 16 MiB`}},
		{name: "scaler memory limit in exponent form below GOMEMLIMIT + 20 MiB",
			give: map[string]any{"scaler": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "5e7"}}}},
			want: []string{`scaler.goMemLimit "40MiB" is above scaler.resources.limits.memory (5e7) − 20 MiB`}},
		{name: "GOMEMLIMIT Go would read as an overflow",
			give: map[string]any{"residency": map[string]any{"goMemLimit": "99999999TiB"}},
			want: []string{"/residency/goMemLimit", "does not match pattern"}},
		{name: "scaler GOMEMLIMIT above its memory limit",
			give: map[string]any{"scaler": map[string]any{"goMemLimit": "1TiB"}},
			want: []string{`scaler.goMemLimit "1TiB" is above scaler.resources.limits.memory (128Mi) − 20 MiB`}},
		{name: "scaler GOMEMLIMIT just above limit − 20 MiB",
			give: map[string]any{"scaler": map[string]any{"goMemLimit": "109MiB"}},
			want: []string{`scaler.goMemLimit "109MiB" is above`}},
		{name: "scaler GOMEMLIMIT Go would read as an overflow",
			give: map[string]any{"scaler": map[string]any{"goMemLimit": "9999999999999999B"}},
			want: []string{"/scaler/goMemLimit", "does not match pattern"}},

		// Ports of one pod (one network namespace).
		{name: "Triton's HTTP port on its own gRPC port behind the sidecar",
			give: map[string]any{"pools": pool(map[string]any{"ports": map[string]any{"http": 8101}})},
			want: []string{"pools[p]: ports.http and ports.grpc + 100 (Triton's own gRPC, behind the sidecar's inference front) are both port 8101"}},
		{name: "Triton's own HTTP port behind the sidecar on Triton's metrics port",
			give: map[string]any{"pools": pool(map[string]any{"ports": map[string]any{"http": 7902}})},
			want: []string{"pools[p]: ports.metrics and ports.http + 100 (Triton's own HTTP, behind the sidecar's inference front) are both port 8002"}},
		{name: "Triton's own HTTP port behind the sidecar on the front's gRPC port",
			give: map[string]any{"pools": pool(map[string]any{"ports": map[string]any{"http": 7901}})},
			want: []string{"pools[p]: ports.grpc and ports.http + 100 (Triton's own HTTP, behind the sidecar's inference front) are both port 8001"}},
		{name: "sidecar port on Triton's own HTTP port",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"port": 8100}}, "pools": pool(nil)},
			want: []string{"pools[p]: ports.http + 100 (Triton's own HTTP, behind the sidecar's inference front) and residency.config.port are both port 8100"}},
		{name: "sidecar port on Triton's metrics port",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"port": 8002}}, "pools": pool(nil)},
			want: []string{"pools[p]: ports.metrics and residency.config.port are both port 8002"}},
		{name: "gRPC port + 100 past 65535",
			give: map[string]any{"pools": pool(map[string]any{"ports": map[string]any{"grpc": 65500}})},
			want: []string{"pools[p]: ports.grpc + 100 (Triton's own gRPC, behind the sidecar's inference front) is 65600, above 65535; lower ports.grpc"}},
		{name: "HTTP port + 100 past 65535",
			give: map[string]any{"pools": pool(map[string]any{"ports": map[string]any{"http": 65436}})},
			want: []string{"pools[p]: ports.http + 100 (Triton's own HTTP, behind the sidecar's inference front) is 65536, above 65535; lower ports.http"}},

		// Names cut at 63 characters.
		{name: "a pool named scaler",
			give: map[string]any{"pools": []any{tritonPool("scaler", nil)}},
			want: []string{`pools[scaler]: its objects would be named "rel-inferscale-scaler", the scaler's name`}},
		{name: "two pools equal once cut at 63 characters",
			give: map[string]any{"fullnameOverride": strings.Repeat("f", 58), "pools": []any{tritonPool("alpha-1", nil), tritonPool("alpha-2", nil)}},
			want: []string{`pools[alpha-2]: its objects would be named "` + strings.Repeat("f", 58) + `-alph", as pool alpha-1's are`}},
		{name: "podRegex with a pool name Kubernetes cuts in pod names",
			give: map[string]any{"fullnameOverride": long, "pools": []any{tritonPool("embedx", map[string]any{"scaling": podRegexQuery})}},
			want: []string{`pools[embedx].scaling.queueQuery uses .pool.podRegex, but the pool's name "` + long + `-embedx" has 47 characters`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := tt.give
			if vals == nil {
				vals = map[string]any{}
			}
			vals = withSet(t, vals, tt.set, nil)
			rel := tt.release
			if rel == "" {
				rel = "rel"
			}
			r, err := renderAs(t, rel, namespace, vals)
			if err == nil {
				o, derr := decodeRelease(r)
				t.Fatalf("render succeeded (decode: %v; objects %v), want an error naming %q", derr, kindsOf(o), tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func kindsOf(o *objects) []string {
	if o == nil {
		return nil
	}
	return o.kinds
}

// TestPodNameCut pins the bound .pool.podRegex relies on: up to 46 characters of Deployment name
// every pod is "<name>-<hash>-<5 random>" and the regex matches all of them; at 47 a 10-character
// hash is cut, and a pod of another pool whose name extends this one could look the same.
func TestPodNameCut(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want bool
	}{{46, true}, {47, false}} {
		d := strings.Repeat("d", tt.n)
		re := regexp.MustCompile("^(?:" + d + "-[a-z0-9]+-[a-z0-9]+)$")
		all := true
		for _, pod := range simulatedPodNames(d) {
			all = all && re.MatchString(pod)
		}
		if all != tt.want {
			t.Errorf("Deployment name of %d characters: pod regex matches every pod %v, want %v (%q)", tt.n, all, tt.want, simulatedPodNames(d))
		}
	}
}

// TestSidecarMemoryBounds: the render accepts GOMEMLIMIT at both ends of [held + 32 MiB,
// limit − 20 MiB] (96 MiB and 108 MiB with the chart's 64 MiB held and 128Mi limit), and
// with it unset ("" or off), where only the held-bytes bound applies; the scaler's the same
// values under its 128Mi limit; and the 128Mi limit written in any quantity form.
func TestSidecarMemoryBounds(t *testing.T) {
	for _, gml := range []string{"96MiB", "108MiB", "100663296", "00096MiB", "", "off"} {
		vals := map[string]any{"residency": map[string]any{"goMemLimit": gml}, "scaler": map[string]any{"goMemLimit": gml}, "pools": []any{tritonPool("p", nil)}}
		if _, err := renderAs(t, "rel", namespace, vals); err != nil {
			t.Errorf("goMemLimit %q: %v", gml, err)
		}
	}
	// The same 128 MiB limit in other quantity forms, and larger ones, pass with the defaults.
	for _, mem := range []any{float64(134217728), int64(134217728), "134217728", "+128Mi", "0.125Gi", "1.5Gi", "1.34217728e8"} {
		vals := map[string]any{"residency": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": mem}}},
			"scaler": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": mem}}}, "pools": []any{tritonPool("p", nil)}}
		if _, err := renderAs(t, "rel", namespace, vals); err != nil {
			t.Errorf("limits.memory %v: %v", mem, err)
		}
	}
}

// TestResidencyConfigNullRefused: for every key of residency.config in values.yaml,
// --set residency.config.<key>=null (which removes the chart's default before the schema sees
// it) is refused with an error naming the key, not rendered as an empty flag the sidecar
// crash-loops on.
func TestResidencyConfigNullRefused(t *testing.T) {
	defaults := readValues(t, chartPath+"/values.yaml")
	rc, ok := defaults["residency"].(map[string]any)["config"].(map[string]any)
	if !ok || len(rc) < 10 {
		t.Fatalf("values.yaml residency.config: %v", rc)
	}
	for _, k := range slices.Sorted(mapKeys(rc)) {
		vals := withSet(t, map[string]any{"pools": []any{tritonPool("p", nil)}}, []string{"residency.config." + k + "=null"}, nil)
		_, err := renderAs(t, "rel", namespace, vals)
		if want := "pools[p].residency.config." + k + " is null"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("residency.config.%s=null: got %v, want an error saying %q", k, err, want)
		}
	}
}

// TestRootDefaultsNullRefused: --set key=null deletes a chart default before the schema sees
// it. Each key below rendered before without it: an empty flag cmd/scaler refuses at start
// (--graceful-stop-timeout=), a different setting (objectMetricsMaxTriggers 0: no bound), an
// invalid ScaledObject (trigger type ""), or a grace period with no margin past the drain.
func TestRootDefaultsNullRefused(t *testing.T) {
	defaults := readValues(t, chartPath+"/values.yaml")
	sc := defaults["scaler"].(map[string]any)["config"].(map[string]any)
	var keys []string
	for _, k := range slices.Sorted(mapKeys(sc)) {
		if k != "opencostAddressSecret" { // null by default: no Secret
			keys = append(keys, "scaler.config."+k)
		}
	}
	if len(keys) < 15 {
		t.Fatalf("values.yaml scaler.config: %v", sc)
	}
	keys = append(keys, "drain.preStopSleepSeconds", "drain.marginSeconds", "keda.triggerType",
		"keda.pollingInterval", "keda.cooldownPeriod", "keda.fallback.failureThreshold",
		"keda.fallback.replicas", "keda.fallback.behavior", "scaling.minReplicas", "scaling.maxReplicas")
	for _, k := range keys {
		vals := withSet(t, map[string]any{"pools": []any{tritonPool("p", nil)}}, []string{k + "=null"}, nil)
		_, err := renderAs(t, "rel", namespace, vals)
		if want := k + " is null (--set " + k + "=null"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=null: got %v, want an error saying %q", k, err, want)
		}
	}
	// Null where the default is null stays accepted.
	vals := withSet(t, map[string]any{"pools": []any{tritonPool("p", nil)}}, []string{"scaler.config.opencostAddressSecret=null"}, nil)
	if _, err := renderAs(t, "rel", namespace, vals); err != nil {
		t.Errorf("scaler.config.opencostAddressSecret=null: %v", err)
	}
}

// TestScalerBoundsAtRender: values the scaler refuses with InvalidArgument fail the render
// instead — a staleAfter below 2 × scaler.config.refreshInterval (the trigger flapped between
// a value and Unavailable), and replicaThroughput or drainSeconds below the scaler's lower
// bounds (a denormal sized the pool to maxReplicas) — while the boundary values render.
func TestScalerBoundsAtRender(t *testing.T) {
	tests := []struct {
		name    string
		refresh string
		scaling map[string]any
		want    string // "" renders
	}{
		{"staleAfter below 2 × refresh", "40s", map[string]any{"staleAfter": "60s"},
			"pools[p].scaling.staleAfter 60s is below 2 × scaler.config.refreshInterval (40s): the trigger would flap between a value and Unavailable, and the scaler refuses it; raise staleAfter to at least 80s"},
		{"staleAfter exactly 2 × refresh", "30s", map[string]any{"staleAfter": "1m"}, ""},
		{"replicaThroughput denormal", "5s", map[string]any{"replicaThroughput": 5e-324},
			"pools[p].scaling.replicaThroughput 5e-324 is below 1e-06, the scaler's lower bound"},
		{"replicaThroughput at the bound", "5s", map[string]any{"replicaThroughput": 1e-6}, ""},
		{"drainSeconds below 0.1", "5s", map[string]any{"drainSeconds": 0.05},
			"pools[p].scaling.drainSeconds 0.05 is below 0.1, the scaler's lower bound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scaling := map[string]any{"engine": "custom", "queueQuery": "sum(q)", "replicaThroughput": 1}
			maps.Copy(scaling, tt.scaling)
			vals := map[string]any{"pools": []any{tritonPool("p", map[string]any{"scaling": scaling})},
				"scaler": map[string]any{"config": map[string]any{"refreshInterval": tt.refresh, "forgetAfter": "10m"}}}
			_, err := renderAs(t, "rel", namespace, vals)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("render: %v, want it to render", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("render: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
