package scaler

import (
	"errors"
	"fmt"
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

	sloPolicy := decision.DefaultPolicy()
	sloPolicy.Engine, sloPolicy.Model, sloPolicy.PrometheusAddress = decision.EngineVLLM, "llama", "http://prometheus:9090"
	sloPolicy.SLOWaitSeconds, sloPolicy.SLOQuantile, sloPolicy.ReplicaConcurrency = 0.5, 0.999, 64
	sloPolicy.ColdStart = 90 * time.Second
	sloPolicy.ServiceTimeQuery = `sum(rate(x_sum[1m])) / sum(rate(x_count[1m]))`
	sloPolicy.TargetUtilization = 0.9

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
			name: "vllm preset with the SLO keys and no replicaThroughput",
			give: map[string]string{
				"engine": "vllm", "model": "llama", "sloWaitSeconds": "0.5", "sloQuantile": "0.999",
				"replicaConcurrency": "64", "coldStart": "90s", "targetUtilization": "9e-1",
				"serviceTimeQuery": `sum(rate(x_sum[1m])) / sum(rate(x_count[1m]))`,
			},
			want: sloPolicy,
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
		{
			// An empty model is no model: what a chart writes for a pool without one.
			name: "custom with an empty model",
			give: map[string]string{
				"prometheusAddress": "https://thanos.example:10902", "model": "",
				"queueQuery": `sum(gateway_queue_depth{pool="chat"})`, "activityQuery": `avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE)`,
				"replicaThroughput": "2.5", "targetUtilization": "1", "drainSeconds": "12.5", "activityCeiling": "0.33",
				"minReplicas": "2", "maxReplicas": "8", "scaleDownMaxFraction": "1", "scaleDownPeriod": "30s",
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
		{"NaN throughput", base("replicaThroughput", "NaN"), testDefaults, []string{"replicaThroughput must be a number ≥ 1e-6"}},
		{"negative warm", base("warmReplicas", "-1"), testDefaults, []string{"warmReplicas must be an integer in [0, 100000]"}},
		{"bad window", base("scaleDownWindow", "5 minutes"), testDefaults, []string{`scaleDownWindow must be a duration in [0s, 1h]`}},
		{"burst below 1", base("burstFactor", "0.5"), testDefaults, []string{"burstFactor must be a number ≥ 1"}},
		{"unknown engine", base("engine", "tgi"), testDefaults, []string{"engine must be one of triton, vllm, custom"}},
		{"preset without model", map[string]string{"engine": "triton", "replicaThroughput": "3"}, testDefaults, []string{"model is required with engine \"triton\""}},
		// Nothing reads a model without a preset: it was accepted and dropped.
		{"model with engine custom", map[string]string{"engine": "custom", "model": "llama", "queueQuery": "sum(q)", "replicaThroughput": "3"}, testDefaults, []string{"model is set with engine \"custom\", whose queries are all given: the model selects the series of the triton and vllm presets, so it has no effect; set engine to triton or vllm, or remove model"}},
		{"model without an engine", map[string]string{"model": "llama", "queueQuery": "sum(q)", "replicaThroughput": "3"}, testDefaults, []string{"model is set with engine \"custom\""}},
		{"custom queue without a service time", map[string]string{"queueQuery": "sum(q)"}, testDefaults, []string{"serviceTimeQuery or replicaThroughput is required with a queue or rate signal"}},
		{"custom without a query", map[string]string{}, testDefaults, []string{"queueQuery, rateQuery, runningQuery or activityQuery is required"}},
		// Only the query's own error: not also "required", for a key that was written.
		{"custom with a bad query only", map[string]string{"queueQuery": "sum(rate(x[1m])"}, testDefaults, []string{"queueQuery must be a PromQL expression"}},
		{"SLO wait zero", base("sloWaitSeconds", "0"), testDefaults, []string{"sloWaitSeconds must be a number of seconds in (0, 86400]"}},
		{"SLO wait negative", base("sloWaitSeconds", "-2"), testDefaults, []string{"sloWaitSeconds must be a number of seconds in (0, 86400]"}},
		{"SLO quantile below 0.5", base("sloQuantile", "0.3"), testDefaults, []string{"sloQuantile must be a number in [0.5, 0.9999]"}},
		{"SLO quantile 1", base("sloQuantile", "1"), testDefaults, []string{"sloQuantile must be a number in [0.5, 0.9999]"}},
		{"concurrency zero", base("replicaConcurrency", "0"), testDefaults, []string{"replicaConcurrency must be an integer in [1, 1000000]"}},
		{"concurrency fractional", base("replicaConcurrency", "1.5"), testDefaults, []string{"replicaConcurrency must be an integer in [1, 1000000]"}},
		{"cold start without unit", base("coldStart", "60"), testDefaults, []string{`coldStart must be a duration in (0s, 1h] (a Go duration such as "30s"), got "60"`}},
		{"cold start negative", base("coldStart", "-5s"), testDefaults, []string{"coldStart must be a duration in (0s, 1h]"}},
		{"cold start over an hour", base("coldStart", "2h"), testDefaults, []string{"coldStart must be a duration in (0s, 1h]"}},
		{"bad service-time promql", base("serviceTimeQuery", "sum(x"), testDefaults, []string{"serviceTimeQuery must be a PromQL expression"}},
		{"bad running promql", base("runningQuery", "x[1m]"), testDefaults, []string{"runningQuery must be a PromQL expression of instant-vector or scalar type"}},
		{"bad dispersion promql", base("dispersionQuery", "x +"), testDefaults, []string{"dispersionQuery must be a PromQL expression"}},
		// Issue 12: numbers are plain decimal or exponent notation, not Go literals.
		{"Go digit separator", base("replicaThroughput", "1_000"), testDefaults, []string{`replicaThroughput must be a number ≥ 1e-6 (requests per second), got "1_000"`}},
		{"hex float", base("replicaThroughput", "0x1p4"), testDefaults, []string{`replicaThroughput must be a number ≥ 1e-6`}},
		{"infinity spelled out", base("sloWaitSeconds", "Infinity"), testDefaults, []string{`sloWaitSeconds must be a number of seconds`}},
		{"integer separator", base("maxReplicas", "1_0"), testDefaults, []string{`maxReplicas must be an integer in [1, 100000], got "1_0"`}},
		{"hex integer", base("warmReplicas", "0x2"), testDefaults, []string{`warmReplicas must be an integer in [0, 100000]`}},
		{"no prometheus", base(), Defaults{}, []string{"prometheusAddress is required"}},
		{"bad prometheus", base("prometheusAddress", "prometheus:9090"), testDefaults, []string{`prometheusAddress must be an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address, got "prometheus:9090": must be an http:// or https:// URL with a host`}},
		{"bad promql", base("queueQuery", "sum(rate(x[5m])"), testDefaults, []string{"queueQuery must be a PromQL expression"}},
		{"range vector", base("rateQuery", "x[5m]"), testDefaults, []string{"rateQuery must be a PromQL expression of instant-vector or scalar type"}},
		{"unknown key", base("replicaThroughPut", "3"), testDefaults, []string{`unknown keys "replicaThroughPut" (known keys: engine,`}},
		{"zeroWhenAbsent typo", base("zeroWhenAbsent", "queue,latency"), testDefaults, []string{"zeroWhenAbsent must be a comma list of queue, rate, activity, ready"}},
		{"min above max", base("minReplicas", "5", "maxReplicas", "3"), testDefaults, []string{"minReplicas (5) must be ≤ maxReplicas (3)"}},
		{"both key and FromEnv", base("model", "a", "modelFromEnv", "b"), testDefaults, []string{"model and modelFromEnv are both set"}},
		{
			"every violation reported",
			base("targetUtilization", "2", "drainSeconds", "-1", "activityTarget", "x", "staleAfter", "0s", "scaleDownMaxFraction", "0"),
			testDefaults,
			[]string{"targetUtilization", "drainSeconds must be a number of seconds ≥ 0.1", "activityTarget", "staleAfter must be a duration in (0s, 1h]", "scaleDownMaxFraction must be a number in (0, 1]"},
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
	f.Add("replicaThroughput", "1_000", "sloQuantile", "0x1p-1", "replicaConcurrency", "1_0")
	f.Add("sloWaitSeconds", "1e-400", "coldStart", "1h1ns", "serviceTimeQuery", "")
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
		if p.MinReplicas > p.MaxReplicas || p.TargetUtilization < 0 || p.TargetUtilization > 1 ||
			p.BurstFactor < 1 || p.StaleAfter <= 0 || p.ScaleDownMaxFraction <= 0 || p.ActivityCeiling <= 0 ||
			!(p.SLOWaitSeconds > 0) || p.SLOQuantile < 0.5 || p.SLOQuantile > 0.9999 || p.ReplicaConcurrency < 1 || p.ColdStart < 0 {
			t.Fatalf("accepted an out-of-range policy: %+v", p)
		}
	})
}

func namesAKey(line string) bool {
	if strings.Contains(line, "unknown keys") {
		return true
	}
	for _, k := range allKeys {
		if strings.Contains(line, k) {
			return true
		}
	}
	return false
}

// Issue 12: an error repeats at most maxEcho bytes of a value, with its
// length, and names the known keys once however many keys are unknown.
func TestParseMetadataBoundedErrors(t *testing.T) {
	huge := strings.Repeat("9", 1<<20)
	_, err := ParseMetadata(map[string]string{"engine": "vllm", "model": "m", "sloWaitSeconds": huge}, testDefaults)
	if err == nil || len(err.Error()) > 512 || !strings.Contains(err.Error(), "(1048576 bytes)") || !strings.Contains(err.Error(), "sloWaitSeconds") {
		t.Errorf("1 MB value: %d-byte error %.300q, want under 512 bytes naming the key and the length", len(err.Error()), err)
	}
	_, err = ParseMetadata(map[string]string{"engine": "vllm", "model": "m", "queueQuery": "sum(" + huge}, testDefaults)
	if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), "queueQuery") {
		t.Errorf("1 MB query: %d-byte error, want under 1 KiB naming queueQuery", len(err.Error()))
	}
	meta := map[string]string{"engine": "vllm", "model": "m"}
	for i := range 5000 {
		meta[fmt.Sprintf("junk%04d", i)] = "1"
	}
	_, err = ParseMetadata(meta, testDefaults)
	msg := err.Error()
	if len(msg) > 2048 || strings.Count(msg, KeySLOQuantile) != 1 || !strings.Contains(msg, `"junk0000"`) || !strings.Contains(msg, "and 4992 more") {
		t.Errorf("5,000 unknown keys: %d-byte error %.400q, want under 2 KiB, the known keys once, 8 named and 4992 more", len(msg), msg)
	}
}
