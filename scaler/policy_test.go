package scaler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/scaler/decision"
)

var testDefaults = Defaults{PrometheusAddress: "http://prometheus:9090"}

func TestParseMetadataValid(t *testing.T) {
	tritonPolicy := decision.DefaultPolicy()
	tritonPolicy.Engine = decision.EngineTriton
	tritonPolicy.Model = "resnet50"
	tritonPolicy.PrometheusAddress = "http://prometheus:9090"
	tritonPolicy.ReplicaThroughput = 40
	tritonPolicy.WarmReplicas = 1
	tritonPolicy.ScaleDownWindow = 10 * time.Minute
	tritonPolicy.ZeroWhenAbsent = decision.SignalSet(0).With(decision.SignalQueue).With(decision.SignalRate)

	custom := decision.DefaultPolicy()
	custom.PrometheusAddress = "https://thanos.example:10902"
	custom.QueueQuery = `sum(gateway_queue_depth{pool="chat"})`
	custom.ReplicaThroughput = 2.5
	custom.TargetUtilization = 1
	custom.DrainSeconds = 12.5
	custom.ActivityCeiling = 0.33
	custom.ActivityQuery = `avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE)`
	custom.MinReplicas = 2
	custom.MaxReplicas = 8
	custom.ScaleDownMaxFraction = 1
	custom.ScaleDownPeriod = 30 * time.Second

	tests := []struct {
		name string
		give map[string]string
		want decision.Policy
	}{
		{
			name: "triton preset with KEDA's own keys",
			give: map[string]string{
				"scalerAddress": "inferscale-scaler.inference:9090", "enableTLS": "false",
				"engine": "triton", "model": "resnet50", "replicaThroughput": "40",
				"warmReplicas": "1", "scaleDownWindow": "10m", "zeroWhenAbsent": "queue, rate",
			},
			want: tritonPolicy,
		},
		{
			name: "custom with FromEnv resolved by KEDA",
			give: map[string]string{
				"prometheusAddress":    "https://thanos.example:10902",
				"queueQueryFromEnv":    `sum(gateway_queue_depth{pool="chat"})`,
				"activityQuery":        `avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE)`,
				"replicaThroughput":    "2.5",
				"targetUtilization":    "1",
				"drainSeconds":         "12.5",
				"activityCeiling":      "0.33",
				"minReplicas":          "2",
				"maxReplicas":          "8",
				"scaleDownMaxFraction": "1",
				"scaleDownPeriod":      "30s",
			},
			want: custom,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetadata(tt.give, testDefaults)
			if err != nil {
				t.Fatalf("ParseMetadata: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMetadataErrors(t *testing.T) {
	base := func(kv ...string) map[string]string {
		m := map[string]string{"engine": "vllm", "model": "llama", "replicaThroughput": "3"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name string
		give map[string]string
		defs Defaults
		want []string // substrings, one per expected violation
	}{
		{"utilization above 1", base("targetUtilization", "1.5"), testDefaults, []string{"targetUtilization must be a number in (0, 1]"}},
		{"utilization zero", base("targetUtilization", "0"), testDefaults, []string{"targetUtilization must be a number in (0, 1]"}},
		{"NaN throughput", base("replicaThroughput", "NaN"), testDefaults, []string{"replicaThroughput must be a number > 0"}},
		{"negative warm", base("warmReplicas", "-1"), testDefaults, []string{"warmReplicas must be an integer in [0, 100000]"}},
		{"bad window", base("scaleDownWindow", "5 minutes"), testDefaults, []string{`scaleDownWindow must be a duration in [0s, 1h]`}},
		{"burst below 1", base("burstFactor", "0.5"), testDefaults, []string{"burstFactor must be a number ≥ 1"}},
		{"unknown engine", base("engine", "tgi"), testDefaults, []string{"engine must be one of triton, vllm, custom"}},
		{"preset without model", map[string]string{"engine": "triton", "replicaThroughput": "3"}, testDefaults, []string{"model is required with engine \"triton\""}},
		{"preset without throughput", map[string]string{"engine": "triton", "model": "m"}, testDefaults, []string{"replicaThroughput is required with a queue or rate signal"}},
		{"custom without a query", map[string]string{}, testDefaults, []string{"queueQuery, rateQuery or activityQuery is required"}},
		{"no prometheus", base(), Defaults{}, []string{"prometheusAddress is required"}},
		{"bad prometheus", base("prometheusAddress", "prometheus:9090"), testDefaults, []string{"prometheusAddress must be an http or https URL"}},
		{"bad promql", base("queueQuery", "sum(rate(x[5m])"), testDefaults, []string{"queueQuery must be a PromQL expression"}},
		{"range vector", base("rateQuery", "x[5m]"), testDefaults, []string{"rateQuery must be a PromQL expression of instant-vector or scalar type"}},
		{"unknown key", base("replicaThroughPut", "3"), testDefaults, []string{`unknown key "replicaThroughPut"`}},
		{"zeroWhenAbsent typo", base("zeroWhenAbsent", "queue,latency"), testDefaults, []string{"zeroWhenAbsent must be a comma list of queue, rate, activity, ready"}},
		{"min above max", base("minReplicas", "5", "maxReplicas", "3"), testDefaults, []string{"minReplicas (5) must be ≤ maxReplicas (3)"}},
		{"both key and FromEnv", base("model", "a", "modelFromEnv", "b"), testDefaults, []string{"model and modelFromEnv are both set"}},
		{
			"every violation reported",
			base("targetUtilization", "2", "drainSeconds", "-1", "activityTarget", "x", "staleAfter", "0s", "scaleDownMaxFraction", "0"),
			testDefaults,
			[]string{"targetUtilization", "drainSeconds must be a number of seconds > 0", "activityTarget", "staleAfter must be a duration in (0s, 1h]", "scaleDownMaxFraction must be a number in (0, 1]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMetadata(tt.give, tt.defs)
			if !errors.Is(err, ErrInvalidMetadata) {
				t.Fatalf("error %v does not wrap ErrInvalidMetadata", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("got %d violations, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func FuzzParseMetadata(f *testing.F) {
	f.Add("engine", "triton", "model", "m", "replicaThroughput", "1e309")
	f.Add("queueQuery", "sum(x)", "replicaThroughput", "3", "scaleDownWindow", "-5m")
	f.Add("zeroWhenAbsent", ",,", "warmFraction", "NaN", "minReplicas", "99999999999")
	f.Add("rateQuery", `rate(x{a="\xff"}[1m])`, "staleAfter", "1h0m1s", "burstFactor", "+Inf")
	// Over the PromQL budget (prom.CheckBudget): refused before the parser sees them.
	f.Add("queueQuery", strings.Repeat("a+", 1<<19)+"a", "rateQuery", strings.Repeat("(", 8000)+"up"+strings.Repeat(")", 8000), "engine", "custom")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string) {
		meta := map[string]string{k1: v1, k2: v2, k3: v3}
		p, err := ParseMetadata(meta, testDefaults)
		if err != nil {
			if !errors.Is(err, ErrInvalidMetadata) {
				t.Fatalf("error does not wrap ErrInvalidMetadata: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !namesAKey(line) {
					t.Fatalf("violation names no key: %q", line)
				}
			}
			return
		}
		if p.MinReplicas > p.MaxReplicas || p.TargetUtilization <= 0 || p.TargetUtilization > 1 ||
			p.BurstFactor < 1 || p.StaleAfter <= 0 || p.ScaleDownMaxFraction <= 0 || p.ActivityCeiling <= 0 {
			t.Fatalf("accepted an out-of-range policy: %+v", p)
		}
	})
}

func namesAKey(line string) bool {
	if strings.Contains(line, "unknown key") {
		return true
	}
	for _, k := range allKeys {
		if strings.Contains(line, k) {
			return true
		}
	}
	return false
}
