package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/scaler"
	"github.com/inferscale/inferscale/scaler/decision"
)

// minimalPool is the smallest Triton pool the chart accepts: it takes every scaling and
// residency default from the chart.
func minimalPool() map[string]any {
	return map[string]any{
		"name":            "p",
		"image":           map[string]any{"repository": "nvcr.io/nvidia/tritonserver", "tag": "25.01-py3"},
		"migProfile":      "1g.10gb",
		"modelRepository": "s3://m",
		"scaling":         map[string]any{"engine": "custom", "queueQuery": "sum(q)", "replicaThroughput": 1},
		"residency": map[string]any{"catalog": map[string]any{"models": []any{map[string]any{
			"name": "m", "digest": "sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9",
			"tier": "P0", "peakMemoryBytes": map[string]any{"1g.10gb": "1Gi"},
		}}}},
	}
}

// TestChartDefaultsEqualGoDefaults: the chart's defaults, as the processes will see them,
// equal scaler.DefaultConfig(), decision.DefaultPolicy() and residency.DefaultConfig(). Each side
// is read by the real code: rendered flags through the commands' own flag declarations, rendered
// trigger metadata through scaler.ParseMetadata.
func TestChartDefaultsEqualGoDefaults(t *testing.T) {
	rel, err := render(t, map[string]any{"pools": []any{minimalPool()}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeRelease(rel)
	if err != nil {
		t.Fatal(err)
	}
	chartProm := loadChart(t).Values["prometheus"].(map[string]any)["address"].(string)

	t.Run("scaler config", func(t *testing.T) {
		want := scaler.DefaultConfig()
		// Deliberate difference: the Go default has no Prometheus; in a cluster the chart names one.
		want.PrometheusAddress = chartProm
		// Deliberate difference: the Go default watches every namespace; the chart (one
		// release per inference namespace) confines the scaler to its own.
		want.WatchNamespace = namespace
		if diff := cmp.Diff(want, scalerConfig(t, o.deployments[scalerName])); diff != "" {
			t.Errorf("rendered scaler flags differ from scaler.DefaultConfig() (-want +got):\n%s", diff)
		}
	})

	t.Run("scaler policy", func(t *testing.T) {
		so := o.scaledObjects["rel-inferscale-p"]
		got, err := scaler.ParseMetadata(so.Spec.Triggers[0].Metadata, scaler.Defaults{PrometheusAddress: chartProm})
		if err != nil {
			t.Fatal(err)
		}
		want := decision.DefaultPolicy()
		// What the minimal pool itself sets.
		want.QueueQuery, want.ReplicaThroughput, want.PrometheusAddress = "sum(q)", 1, chartProm
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("policy from the chart's scaling defaults differs from decision.DefaultPolicy() (-want +got):\n%s", diff)
		}
	})

	t.Run("scaling keys", func(t *testing.T) {
		// Every metadata key the scaler accepts is either a chart default or per-pool only.
		perPool := []string{"engine", "model", "prometheusAddress", "queueQuery", "rateQuery", "activityQuery", "readyQuery", "replicaThroughput", "zeroWhenAbsent",
			"runningQuery", "serviceTimeQuery", "dispersionQuery", "coldStart", "targetUtilization", "uniqueRateQuery", "retryBudget",
			"gpuHourPrice", "verifiedQuery"}
		keys := slices.Collect(mapKeys(loadChart(t).Values["scaling"].(map[string]any)))
		keys = append(keys, perPool...)
		sort.Strings(keys)
		want := scaler.MetadataKeys()
		sort.Strings(want)
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("chart scaling keys + per-pool keys vs scaler.MetadataKeys() (-want +got):\n%s", diff)
		}
		// And the schema accepts exactly those keys.
		var schema struct {
			Properties struct {
				Scaling struct {
					Properties map[string]any `json:"properties"`
				} `json:"scaling"`
			} `json:"properties"`
		}
		data, err := os.ReadFile(chartPath + "/values.schema.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(mapKeys(schema.Properties.Scaling.Properties))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("values.schema.json scaling properties vs scaler.MetadataKeys() (-want +got):\n%s", diff)
		}
	})

	t.Run("residency config", func(t *testing.T) {
		decls := residencyFlagDecls(t)
		sc, ok := sidecar(o.deployments["rel-inferscale-p"].Spec.Template.Spec)
		if !ok {
			t.Fatal("no sidecar")
		}
		want := residency.DefaultConfig()
		// Deliberate differences: per pod, from the pool and the downward API.
		want.MIGProfile, want.PrometheusAddress, want.Namespace = "1g.10gb", chartProm, namespace
		// The inference front takes the pool's gRPC and HTTP ports; Triton's own move behind it.
		want.InferenceListen, want.TritonAddress = ":8001", "127.0.0.1:8101"
		want.InferenceHTTPListen, want.TritonHTTPURL = ":8000", "http://127.0.0.1:8100"
		// The held-bytes bound fits the container's 128Mi memory limit (values.yaml).
		want.HoldMaxTotalBytes = 64 << 20
		if diff := cmp.Diff(want, residencyConfig(t, decls, sc)); diff != "" {
			t.Errorf("rendered sidecar flags differ from residency.DefaultConfig() (-want +got):\n%s", diff)
		}
	})

	t.Run("residency values", func(t *testing.T) {
		// Without cmd/residency's flags, compare values.yaml with residency.DefaultConfig()
		// field by field.
		v := loadChart(t).Values["residency"].(map[string]any)["config"].(map[string]any)
		d := residency.DefaultConfig()
		dur := func(k string) time.Duration {
			x, err := time.ParseDuration(v[k].(string))
			if err != nil {
				t.Fatalf("residency.config.%s: %v", k, err)
			}
			return x
		}
		num := func(k string) int64 { return int64(v[k].(float64)) }
		type pair struct{ Chart, Go any }
		got := map[string]pair{
			"port":               {fmt.Sprintf(":%d", num("port")), d.ListenAddress},
			"reserveBytes":       {num("reserveBytes"), d.ReserveBytes},
			"nvml":               {v["nvml"], d.NVML},
			"loopInterval":       {dur("loopInterval"), d.LoopInterval},
			"freeIdle":           {v["freeIdle"], d.FreeIdle},
			"maxConcurrentLoads": {int(num("maxConcurrentLoads")), d.MaxConcurrentLoads},
			"failureBackoff":     {dur("failureBackoff"), d.FailureBackoff},
			"failureBackoffMax":  {dur("failureBackoffMax"), d.FailureBackoffMax},
			"quarantineAfter":    {int(num("quarantineAfter")), d.QuarantineAfter},
			"drainTimeout":       {dur("drainTimeout"), d.DrainTimeout},
			"propagationDelay":   {dur("propagationDelay"), d.PropagationDelay},
			"drainPollInterval":  {dur("drainPollInterval"), d.DrainPollInterval},
			// Deliberately below cmd/residency's 256 MiB: half the sidecar's 128Mi limit.
			"holdMaxTotalBytes": {num("holdMaxTotalBytes"), int64(64 << 20)},
		}
		for k, p := range got {
			if !cmp.Equal(p.Chart, p.Go) {
				t.Errorf("residency.config.%s = %v, residency.DefaultConfig() has %v", k, p.Chart, p.Go)
			}
		}
		if len(got) != len(v) {
			t.Errorf("residency.config has %d keys, the test compares %d: compare the new ones", len(v), len(got))
		}
	})
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestSchemaRejectsBadValues: helm refuses bad values before rendering, with a message naming
// the field (values.schema.json), or with the template's own message where a rule spans fields.
func TestSchemaRejectsBadValues(t *testing.T) {
	pool := func(patch map[string]any) map[string]any {
		p := minimalPool()
		for k, v := range patch {
			p[k] = v
		}
		return p
	}
	tests := []struct {
		name string
		give map[string]any
		want []string // substrings of the error
	}{
		{
			name: "utilization above 1",
			give: map[string]any{"scaling": map[string]any{"targetUtilization": 1.5}},
			want: []string{"/scaling/targetUtilization", "maximum"},
		},
		{
			name: "window not a duration",
			give: map[string]any{"scaling": map[string]any{"scaleDownWindow": "5 minutes"}},
			want: []string{"/scaling/scaleDownWindow", "does not match pattern"},
		},
		{
			name: "unknown scaling key",
			give: map[string]any{"pools": []any{pool(map[string]any{"scaling": map[string]any{"replicaThroughput": 1, "targetUtilisation": 0.5}})}},
			want: []string{"/pools/0/scaling", "targetUtilisation"},
		},
		{
			name: "removed residency key (demandWindow, no longer a flag)",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"demandWindow": "1m"}}},
			want: []string{"/residency/config", "demandWindow"},
		},
		{
			name: "freeIdle not a bool",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"freeIdle": "yes"}}},
			want: []string{"/residency/config/freeIdle", "boolean"},
		},
		{
			name: "trigger type",
			give: map[string]any{"keda": map[string]any{"triggerType": "poll"}},
			want: []string{"/keda/triggerType", "external"},
		},
		{
			name: "fallback behavior",
			give: map[string]any{"keda": map[string]any{"fallback": map[string]any{"behavior": "zero"}}},
			want: []string{"/keda/fallback/behavior"},
		},
		{
			name: "pool name",
			give: map[string]any{"pools": []any{pool(map[string]any{"name": "Embed_Pool"})}},
			want: []string{"/pools/0/name", "does not match pattern"},
		},
		{
			name: "replicas on a pool",
			give: map[string]any{"pools": []any{pool(map[string]any{"replicas": 3})}},
			want: []string{"/pools/0", "replicas"},
		},
		{
			name: "mig profile",
			give: map[string]any{"pools": []any{pool(map[string]any{"migProfile": "1g-10gb"})}},
			want: []string{"/pools/0/migProfile"},
		},
		{
			name: "concurrent loads",
			give: map[string]any{"residency": map[string]any{"config": map[string]any{"maxConcurrentLoads": 0}}},
			want: []string{"/residency/config/maxConcurrentLoads", "minimum"},
		},
		{
			name: "log level",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"logLevel": "verbose"}}},
			want: []string{"/scaler/config/logLevel"},
		},
		{
			name: "opencost address not a URL",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostAddress": "opencost:9003"}}},
			want: []string{"/scaler/config/opencostAddress", "does not match pattern"},
		},
		{
			name: "GOMEMLIMIT not in Go's syntax",
			give: map[string]any{"scaler": map[string]any{"goMemLimit": "40MB"}},
			want: []string{"/scaler/goMemLimit"},
		},
		{
			name: "sidecar GOMEMLIMIT not in Go's syntax",
			give: map[string]any{"residency": map[string]any{"goMemLimit": "96 MiB"}},
			want: []string{"/residency/goMemLimit"},
		},
		{
			name: "watchAllNamespaces not a boolean",
			give: map[string]any{"scaler": map[string]any{"watchAllNamespaces": "yes"}},
			want: []string{"/scaler/watchAllNamespaces"},
		},
		{
			name: "misspelt top-level key",
			give: map[string]any{"scaller": map[string]any{}},
			want: []string{"scaller"},
		},
		{
			name: "tier",
			give: map[string]any{"pools": []any{pool(map[string]any{"residency": map[string]any{"catalog": map[string]any{"models": []any{map[string]any{
				"name": "m", "digest": "sha256:00", "tier": "P3", "peakMemoryBytes": map[string]any{}}}}}})}},
			want: []string{"/pools/0/residency/catalog/models/0/tier"},
		},
		// Rules across fields, enforced by the templates.
		{
			name: "duplicate pool names",
			give: map[string]any{"pools": []any{minimalPool(), minimalPool()}},
			want: []string{`pools: name "p" is used twice`},
		},
		{
			name: "triton without model repository",
			give: map[string]any{"pools": []any{func() map[string]any { p := minimalPool(); delete(p, "modelRepository"); return p }()}},
			want: []string{"pools[p].modelRepository: required"},
		},
		{
			name: "triton without catalog",
			give: map[string]any{"pools": []any{pool(map[string]any{"residency": map[string]any{}})}},
			want: []string{"pools[p].residency.catalog: required"},
		},
		{
			name: "min above max",
			give: map[string]any{"pools": []any{pool(map[string]any{"scaling": map[string]any{"replicaThroughput": 1, "minReplicas": 5, "maxReplicas": 2}})}},
			want: []string{"minReplicas (5) must be <= maxReplicas (2)"},
		},
		{
			name: "prometheus address and addressSecret both set",
			give: map[string]any{"prometheus": map[string]any{"addressSecret": map[string]any{"name": "prom-credentials"}}},
			want: []string{`prometheus.address and prometheus.addressSecret.name ("prom-credentials") are both set: set prometheus.address to "" to read the address from the Secret`},
		},
		{
			name: "neither prometheus address nor addressSecret",
			give: map[string]any{"prometheus": map[string]any{"address": ""}},
			want: []string{"prometheus: set address or addressSecret.name"},
		},
		{
			name: "opencost address and opencostAddressSecret both set",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostAddress": "http://opencost.opencost.svc:9003",
				"opencostAddressSecret": map[string]any{"name": "opencost"}}}},
			want: []string{`scaler.config.opencostAddress and scaler.config.opencostAddressSecret.name ("opencost") are both set: keep one`},
		},
		{
			name: "addressSecret name not a Secret name",
			give: map[string]any{"prometheus": map[string]any{"address": "", "addressSecret": map[string]any{"name": "Prom_Credentials"}}},
			want: []string{"/prometheus/addressSecret/name", "does not match pattern"},
		},
		{
			name: "addressSecret with an empty key",
			give: map[string]any{"prometheus": map[string]any{"address": "", "addressSecret": map[string]any{"name": "p", "key": ""}}},
			want: []string{"/prometheus/addressSecret/key", "does not match pattern"},
		},
		{
			name: "addressSecret key '..' (the API server refuses it as a Secret key)",
			give: map[string]any{"prometheus": map[string]any{"address": "", "addressSecret": map[string]any{"name": "p", "key": ".."}}},
			want: []string{"/prometheus/addressSecret/key", "does not match pattern"},
		},
		{
			name: "addressSecret key '.'",
			give: map[string]any{"prometheus": map[string]any{"address": "", "addressSecret": map[string]any{"name": "p", "key": "."}}},
			want: []string{"/prometheus/addressSecret/key", "does not match pattern"},
		},
		{
			name: "opencostAddressSecret key starting with '..'",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostAddressSecret": map[string]any{"name": "opencost", "key": "..url"}}}},
			want: []string{"/scaler/config/opencostAddressSecret/key", "does not match pattern"},
		},
		{
			name: "opencostAddressSecret with a misspelt key",
			give: map[string]any{"scaler": map[string]any{"config": map[string]any{"opencostAddressSecret": map[string]any{"secretName": "opencost"}}}},
			want: []string{"/scaler/config/opencostAddressSecret", "secretName"},
		},
		{
			name: "tls without material",
			give: map[string]any{"scaler": map[string]any{"tls": map[string]any{"enabled": true}}},
			want: []string{"scaler.tls: with enabled true, set existingSecret"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.give)
			if err == nil {
				t.Fatal("render succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestBadValuesFile: the documented bad values file fails with every field named.
func TestBadValuesFile(t *testing.T) {
	_, err := render(t, readValues(t, "testdata/bad-values.yaml"))
	if err == nil {
		t.Fatal("render succeeded, want a schema error")
	}
	for _, w := range []string{"/scaling/targetUtilization", "/keda/triggerType", "/pools/0/name", "'replicas'"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not name %s:\n%v", w, err)
		}
	}
}

// TestLint runs helm lint (the SDK's lint.All rules: Chart.yaml, values, schema, templates,
// rendered YAML) for every values case; warnings fail too.
func TestLint(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartPath, readValues(t, rc.files...), namespace, &kubeVersion)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %v", m)
				}
			}
		})
	}
}

var metricNameRE = regexp.MustCompile(`\binferscale_[a-z_]+`)

// TestDashboard: the dashboard is valid JSON, the chart ships the same file, and every
// inferscale_* metric it queries is one the scaler or the residency sidecar registers.
func TestDashboard(t *testing.T) {
	canonical, err := os.ReadFile("dashboards/inferscale.json")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(chartPath + "/dashboards/inferscale.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(canonical) != string(shipped) {
		t.Error("deploy/dashboards/inferscale.json and the chart's dashboards/inferscale.json differ; copy one over the other")
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(canonical, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}

	known := map[string]bool{}
	reg := prometheus.NewRegistry()
	rm, err := residency.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rm.OverPeak.WithLabelValues("probe") // a vector shows up in Gather only with a child
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		n := mf.GetName()
		known[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			known[n+s] = true
		}
	}
	// The scaler's decision metrics are built in an unexported collector; read their names
	// from its source (each d("name", …) is inferscale_scaler_<name>).
	var src []byte
	for _, f := range []string{"../scaler/metrics.go", "../scaler/cost.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for _, m := range regexp.MustCompile(`d\("([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		known["inferscale_scaler_"+m[1]] = true
	}
	for _, m := range regexp.MustCompile(`"(inferscale_scaler_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		known[m[1]] = true
	}

	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range metricNameRE.FindAllString(tg.Expr, -1) {
				used++
				if !known[name] {
					t.Errorf("panel %q queries %s, which neither the scaler nor the residency sidecar registers", p.Title, name)
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("dashboard queries only %d inferscale metrics", used)
	}
}

// TestEveryFlagHasAChartValue: a flag added to cmd/scaler or cmd/residency must get a chart
// value (and so a default checked above), or be listed here with the reason it has none.
func TestEveryFlagHasAChartValue(t *testing.T) {
	type flagCase struct {
		name       string
		decls      []flagDecl
		args       []string
		notByChart map[string]string // flag -> why the chart does not write it
	}
	rel, err := render(t, map[string]any{"pools": []any{minimalPool()}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeRelease(rel)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := sidecar(o.deployments["rel-inferscale-p"].Spec.Template.Spec)
	tests := []flagCase{
		{"scaler", scalerFlagDecls(t), o.deployments[scalerName].Spec.Template.Spec.Containers[0].Args,
			map[string]string{
				"kubeconfig":               "in a pod the scaler uses in-cluster credentials",
				"tls-cert-file":            "only with scaler.tls.enabled (the tls case checks the files are mounted)",
				"tls-key-file":             "only with scaler.tls.enabled",
				"tls-client-ca-file":       "only with scaler.tls.clientAuth",
				"max-triggers":             "cmd/scaler's default (10,000, the count the scaler's memory limit is sized for, docs/scaler.md); scaler.extraArgs overrides it",
				"query-max-response-bytes": "cmd/scaler's default (16 MiB, sized with max-triggers, docs/scaler-prom.md); scaler.extraArgs overrides it",
			}},
		{"residency", residencyFlagDecls(t), sc.Args, map[string]string{
			"namespace":         "defaults to $POD_NAMESPACE, which the chart sets from the downward API",
			"pod-name":          "defaults to $POD_NAME, which the chart sets from the downward API",
			"budget-bytes":      "only with pools[].residency.budgetBytes; otherwise the MIG profile's table entry",
			"demand-query":      "only with pools[].residency.demandQuery; otherwise Triton's preset",
			"hold-timeout":      "the inference front's bounds keep cmd/residency's defaults (docs/residency.md, Hold and fail fast); residency.extraArgs overrides them",
			"hold-max-requests": "as hold-timeout",
			"hold-max-bytes":    "as hold-timeout",
			"max-request-bytes": "as hold-timeout",
			// Its 16 MiB is counted in the chart's memory check (goMemLimit ≥ holdMaxTotalBytes
			// + 32 MiB), which refuses it in residency.extraArgs.
			"retain-max-total-bytes": "cmd/residency's default, counted in the chart's memory check",
			"retry-pushback":         "as hold-timeout",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rendered := argMap(tt.args)
			for _, d := range tt.decls {
				if _, ok := rendered[d.name]; !ok && tt.notByChart[d.name] == "" {
					t.Errorf("--%s (%s) is declared by cmd/%s but the chart never writes it: add a value", d.name, d.field, tt.name)
				}
			}
		})
	}
}
