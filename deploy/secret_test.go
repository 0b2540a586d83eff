package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/inferscale/inferscale/internal/envflag"
)

// addressFrom is where a container gets one address: a flag in its arguments, or the variable
// cmd/* falls back to (internal/envflag), from a Secret.
type addressFrom struct {
	Arg    *string // --<flag>=<value>, nil: no such argument
	Secret string  // "<Secret>/<key>" of the variable's secretKeyRef; "": no variable
}

func addressOf(t *testing.T, c corev1.Container, flag, env string) addressFrom {
	t.Helper()
	var a addressFrom
	for _, arg := range c.Args {
		if v, ok := strings.CutPrefix(arg, "--"+flag+"="); ok {
			a.Arg = &v
		}
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env })
	if i < 0 {
		return a
	}
	e := c.Env[i]
	// The point of the variable: the address is in the Secret, never in the pod spec.
	if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("container %s: $%s = %+v, want only valueFrom.secretKeyRef", c.Name, env, e)
	}
	a.Secret = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
	return a
}

func arg(s string) *string { return &s }

// TestAddressSecrets: with prometheus.addressSecret (and scaler.config.opencostAddressSecret)
// every container that queries the address gets it as $INFERSCALE_PROMETHEUS_ADDRESS
// ($INFERSCALE_OPENCOST_ADDRESS) from the Secret and no argument, which would win over the
// variable even empty; without them the render is as before; a plain per-container override
// still wins for its container.
func TestAddressSecrets(t *testing.T) {
	chartProm := loadChart(t).Values["prometheus"].(map[string]any)["address"].(string)
	promSecret := map[string]any{"name": "prom-credentials", "key": "url"}
	ledger := map[string]any{"enabled": true, "services": []any{
		map[string]any{"name": "embedding", "tier": "P0", "profile": "1g.10gb", "peakRPS": 60, "safeRPSPerReplica": 40}}}
	type want struct{ Scaler, OpenCost, Sidecar, Ledger addressFrom }
	tests := []struct {
		name string
		give map[string]any
		want want
	}{
		{name: "defaults: arguments, as before",
			give: map[string]any{},
			want: want{Scaler: addressFrom{Arg: arg(chartProm)}, OpenCost: addressFrom{Arg: arg("")},
				Sidecar: addressFrom{Arg: arg(chartProm)}, Ledger: addressFrom{Arg: arg(chartProm)}}},
		{name: "prometheus.addressSecret: every container from the Secret",
			give: map[string]any{"prometheus": map[string]any{"address": "", "addressSecret": promSecret}},
			want: want{Scaler: addressFrom{Secret: "prom-credentials/url"}, OpenCost: addressFrom{Arg: arg("")},
				Sidecar: addressFrom{Secret: "prom-credentials/url"}, Ledger: addressFrom{Secret: "prom-credentials/url"}}},
		{name: "opencostAddressSecret: the scaler's OpenCost address from the Secret",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostAddressSecret": map[string]any{"name": "opencost"}}}},
			want: want{Scaler: addressFrom{Arg: arg(chartProm)}, OpenCost: addressFrom{Secret: "opencost/address"},
				Sidecar: addressFrom{Arg: arg(chartProm)}, Ledger: addressFrom{Arg: arg(chartProm)}}},
		{name: "plain per-container overrides win over prometheus.addressSecret",
			give: map[string]any{"prometheus": map[string]any{"address": "", "addressSecret": promSecret},
				"scaler": map[string]any{"config": map[string]any{"prometheusAddress": "http://scaler-prom:9090"}},
				"pools":  []any{tritonPool("p", map[string]any{"residency": withKey(minimalPool()["residency"], "prometheusAddress", "http://pool-prom:9090")})}},
			want: want{Scaler: addressFrom{Arg: arg("http://scaler-prom:9090")}, OpenCost: addressFrom{Arg: arg("")},
				Sidecar: addressFrom{Arg: arg("http://pool-prom:9090")}, Ledger: addressFrom{Secret: "prom-credentials/url"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{"pools": []any{minimalPool()}, "ledger": ledger}
			for k, v := range tt.give {
				vals[k] = v
			}
			rel, err := render(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			o, err := decodeRelease(rel)
			if err != nil {
				t.Fatal(err)
			}
			scalerC := o.deployments[scalerName].Spec.Template.Spec.Containers[0]
			sc, ok := sidecar(o.deployments["rel-inferscale-p"].Spec.Template.Spec)
			if !ok {
				t.Fatal("no sidecar")
			}
			cron := o.cronJobs["rel-inferscale-ledger"]
			if cron == nil {
				t.Fatal("no ledger CronJob")
			}
			ledgerC := cron.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
			got := want{
				Scaler:   addressOf(t, scalerC, "prometheus-address", envflag.PrometheusAddress),
				OpenCost: addressOf(t, scalerC, "opencost-address", envflag.OpenCostAddress),
				Sidecar:  addressOf(t, sc, "prometheus-address", envflag.PrometheusAddress),
				Ledger:   addressOf(t, ledgerC, "prometheus-address", envflag.PrometheusAddress),
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("where the containers get the addresses (-want +got):\n%s", diff)
			}
			// The rest of each command line is still one its command accepts.
			if err := scalerConfig(t, o.deployments[scalerName]).Validate(); err != nil {
				t.Errorf("the scaler refuses the chart's flags: %v", err)
			}
			if err := residencyConfig(t, residencyFlagDecls(t), sc).Validate(); err != nil {
				t.Errorf("the sidecar refuses the chart's flags: %v", err)
			}
			for _, m := range lint.AllWithKubeVersion(chartPath, vals, namespace, &kubeVersion).Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %v", m)
				}
			}
		})
	}
}

// withKey returns a copy of the map m (an any holding a map[string]any) with k set to v.
func withKey(m any, k string, v any) map[string]any {
	out := map[string]any{}
	for mk, mv := range m.(map[string]any) {
		out[mk] = mv
	}
	out[k] = v
	return out
}

// TestAddressSecretKeyPattern: the schema's pattern of a Secret key accepts what Kubernetes
// accepts as a secretKeyRef key (validation.IsConfigMapKey) and nothing else: ".", ".." and
// a key starting with ".." rendered, and the API server refused the Deployments.
func TestAddressSecretKeyPattern(t *testing.T) {
	data, err := os.ReadFile(chartPath + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"prometheus", "addressSecret"}, {"scaler", "config", "opencostAddressSecret"}} {
		node := schema
		for _, p := range path {
			node = node["properties"].(map[string]any)[p].(map[string]any)
		}
		pattern := node["properties"].(map[string]any)["key"].(map[string]any)["pattern"].(string)
		re := regexp.MustCompile(pattern)
		for _, key := range []string{"address", "url", ".x", "a..", "a.b_c-D", "_", "-", ".", "..", "..x", "a/b", "a b", ""} {
			if got, want := re.MatchString(key), len(validation.IsConfigMapKey(key)) == 0; got != want {
				t.Errorf("%s.key pattern %s: key %q matches %v, Kubernetes accepts it %v", strings.Join(path, "."), pattern, key, got, want)
			}
		}
	}
}
