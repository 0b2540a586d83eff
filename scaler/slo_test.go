package scaler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
)

// Probes through KEDA's own client stubs: every SLO key's bad values make all four RPCs
// answer InvalidArgument naming the key and its accepted range.
func TestSLOKeysBadValuesAreInvalidArgument(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	tests := []struct {
		key, value, want string
	}{
		{KeySLOWaitSeconds, "0", "sloWaitSeconds must be a number of seconds in (0, 86400]"},
		{KeySLOWaitSeconds, "2s", "sloWaitSeconds must be a number of seconds in (0, 86400]"},
		{KeySLOWaitSeconds, "1e6", "sloWaitSeconds must be a number of seconds in (0, 86400]"},
		{KeySLOQuantile, "0.49", "sloQuantile must be a number in [0.5, 0.9999]"},
		{KeySLOQuantile, "99", "sloQuantile must be a number in [0.5, 0.9999]"},
		{KeySLOQuantile, "NaN", "sloQuantile must be a number in [0.5, 0.9999]"},
		{KeyReplicaConcurrency, "0", "replicaConcurrency must be an integer in [1, 1000000]"},
		{KeyReplicaConcurrency, "4.5", "replicaConcurrency must be an integer in [1, 1000000]"},
		{KeyReplicaConcurrency, "1_000", "replicaConcurrency must be an integer in [1, 1000000]"},
		{KeyColdStart, "0s", "coldStart must be a duration in (0s, 1h]"},
		{KeyColdStart, "90", "coldStart must be a duration in (0s, 1h]"},
		{KeyColdStart, "61m", "coldStart must be a duration in (0s, 1h]"},
		{KeyServiceTimeQuery, "rate(x[1m]", "serviceTimeQuery must be a PromQL expression"},
		{KeyRunningQuery, "x[5m]", "runningQuery must be a PromQL expression of instant-vector or scalar type"},
		{KeyDispersionQuery, "", "dispersionQuery must be a PromQL expression"},
		{KeyTargetUtilization, "0", "targetUtilization must be a number in (0, 1]"},
		{KeyReplicaThroughput, "0x10", "replicaThroughput must be a number ≥ 1e-6"},
		{KeyRetryBudget, "0.9", "retryBudget must be a number in [1, 10]"},
		{KeyRetryBudget, "11", "retryBudget must be a number in [1, 10]"},
		{KeyUniqueRateQuery, "sum(rate(x[1m])", "uniqueRateQuery must be a PromQL expression"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			r := ref("team-a", "pool-"+tt.key, queueMeta(tt.key, tt.value))
			for name, call := range h.everyRPC(ctx, r) {
				st := status.Convert(call())
				if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.want) {
					t.Errorf("%s: %v, want InvalidArgument containing %q", name, st.Err(), tt.want)
				}
			}
		})
	}
}

// sloMeta is a custom trigger on rate, running, service time and dispersion queries.
func sloMeta(kv ...string) map[string]string {
	m := map[string]string{
		"scalerAddress":    "inferscale:9090",
		"rateQuery":        "sum(rate(gateway_requests_total[1m]))",
		"serviceTimeQuery": "sum(rate(busy_seconds_total[1m])) / sum(rate(done_total[1m]))",
		"dispersionQuery":  "scalar(vector(1))",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestSLOTermsMissingData: the new terms through the server, with the values an
// independent Erlang C computation gives (decision's tables): λ 7/s and S 1 s need 9
// servers, 11 at dispersion 3.
func TestSLOTermsMissingData(t *testing.T) {
	h := newHarness(t, nil)
	set := func(ns string, k prom.Kind, v float64) {
		h.sig.set(ns, k, prom.Result{Value: v, EvaluatedAt: t0})
	}
	empty := func(ns string, k prom.Kind) { h.sig.set(ns, k, prom.Result{Empty: true, EvaluatedAt: t0}) }

	// Measured S and dispersion 1.
	set("measured", prom.KindRate, 7)
	set("measured", prom.KindServiceTime, 1)
	set("measured", prom.KindDispersion, 1)
	// Bursty arrivals: dispersion 3.
	set("bursty", prom.KindRate, 7)
	set("bursty", prom.KindServiceTime, 1)
	set("bursty", prom.KindDispersion, 3)
	// S missing (no series yet), replicaThroughput 1: S = k/μ = 1 s; dispersion missing: 1.
	set("fallback", prom.KindRate, 7)
	empty("fallback", prom.KindServiceTime)
	empty("fallback", prom.KindDispersion)
	// No S at all, no μ: the queue and running requests size by occupancy, ⌈(5 + 3)/2⌉.
	set("occupancy", prom.KindQueue, 3)
	set("occupancy", prom.KindRunning, 5)
	empty("occupancy", prom.KindServiceTime)

	tests := []struct {
		ns   string
		meta map[string]string
		want int64
	}{
		{"measured", sloMeta(), 9},
		{"bursty", sloMeta(), 11},
		{"fallback", sloMeta("replicaThroughput", "1"), 9},
		{"occupancy", map[string]string{"queueQuery": "sum(q)", "runningQuery": "sum(r)", "serviceTimeQuery": "sum(s)", "replicaConcurrency": "2"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.ns, func(t *testing.T) {
			mv, err := h.metrics(t, ref(tt.ns, "pool", tt.meta))
			if err != nil || mv.MetricValue != tt.want {
				t.Fatalf("GetMetrics = %v, %v; want %d replicas", mv, err, tt.want)
			}
		})
	}
	name := map[string]string{}
	for _, tt := range tests {
		name[tt.ns] = MetricName(tt.ns, "pool", tt.meta)
	}
	series := func(metric, ns, extra string, v float64) string {
		return fmt.Sprintf("%s{metric=%q,namespace=%q,scaledobject=\"pool\"%s} %g\n", metric, name[ns], ns, extra, v)
	}
	want := "# HELP inferscale_scaler_service_time_seconds S as used: mean seconds of service per request, measured or k/μ (absent when unknown).\n" +
		"# TYPE inferscale_scaler_service_time_seconds gauge\n" +
		series("inferscale_scaler_service_time_seconds", "bursty", `,source="measured"`, 1) +
		series("inferscale_scaler_service_time_seconds", "fallback", `,source="replicaThroughput"`, 1) +
		series("inferscale_scaler_service_time_seconds", "measured", `,source="measured"`, 1) +
		"# HELP inferscale_scaler_arrival_dispersion I as used: index of dispersion of arrival counts (1 when not measured: Poisson).\n" +
		"# TYPE inferscale_scaler_arrival_dispersion gauge\n" +
		series("inferscale_scaler_arrival_dispersion", "bursty", "", 3) +
		series("inferscale_scaler_arrival_dispersion", "fallback", "", 1) +
		series("inferscale_scaler_arrival_dispersion", "measured", "", 1) +
		series("inferscale_scaler_arrival_dispersion", "occupancy", "", 1)
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "inferscale_scaler_service_time_seconds", "inferscale_scaler_arrival_dispersion"); err != nil {
		t.Error(err)
	}
	const notDegraded = `
# HELP inferscale_scaler_triggers_degraded Triggers whose decision is degraded (a once-valid signal out past staleAfter, or a unique rate refused as implausible).
# TYPE inferscale_scaler_triggers_degraded gauge
inferscale_scaler_triggers_degraded 0
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(notDegraded), "inferscale_scaler_triggers_degraded"); err != nil {
		t.Errorf("a missing service time or dispersion that never existed is not degradation: %v", err)
	}
}

// TestColdStartFromKubernetes: H comes from the scale target's measured pod starts unless
// coldStart overrides it; /metrics says which.
func TestColdStartFromKubernetes(t *testing.T) {
	h := newHarness(t, fakeTargets{
		"team-a/measured": {MaxReplicas: 10, ReadyReplicas: 1, ReadyKnown: true, ColdStart: 95 * time.Second, ColdStartKnown: true},
		"team-a/override": {MaxReplicas: 10, ReadyReplicas: 1, ReadyKnown: true, ColdStart: 95 * time.Second, ColdStartKnown: true},
		"team-a/unknown":  {MaxReplicas: 10, ReadyReplicas: 1, ReadyKnown: true},
	})
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 1, EvaluatedAt: t0})
	metas := map[string]map[string]string{
		"measured": sloMeta("replicaThroughput", "1"),
		"override": sloMeta("replicaThroughput", "1", "coldStart", "30s"),
		"unknown":  sloMeta("replicaThroughput", "1"),
	}
	want := "# HELP inferscale_scaler_cold_start_seconds H as used: from a scale-up decision to a ready replica, seconds.\n" +
		"# TYPE inferscale_scaler_cold_start_seconds gauge\n"
	for _, c := range []struct {
		name, source string
		seconds      float64
	}{{"measured", "measured", 95}, {"override", "coldStart", 30}, {"unknown", "default", 60}} {
		if _, err := h.metrics(t, ref("team-a", c.name, metas[c.name])); err != nil {
			t.Fatal(err)
		}
		want += fmt.Sprintf("inferscale_scaler_cold_start_seconds{metric=%q,namespace=\"team-a\",scaledobject=%q,source=%q} %g\n",
			MetricName("team-a", c.name, metas[c.name]), c.name, c.source, c.seconds)
	}
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "inferscale_scaler_cold_start_seconds"); err != nil {
		t.Error(err)
	}
}

// Issue 14: rate 30/s of which 10/s unique, retryBudget 1.2: sized for 12/s (14 servers at
// S = 1 s), amplification 3 exported, the cap flagged.
func TestRetryCapThroughServer(t *testing.T) {
	h := newHarness(t, nil)
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: t0})
	meta := map[string]string{"rateQuery": "sum(rate(backend_requests_total[1m]))",
		"uniqueRateQuery": `sum(rate(gateway_requests_total{attempt="1"}[1m]))`, "replicaThroughput": "1"}
	mv, err := h.metrics(t, ref("team-a", "pool", meta))
	if err != nil || mv.MetricValue != 14 {
		t.Fatalf("GetMetrics = %v, %v; want 14 (sized on 12/s, not 30/s: 33)", mv, err)
	}
	name := MetricName("team-a", "pool", meta)
	want := fmt.Sprintf(`
# HELP inferscale_scaler_retry_amplification Retry amplification: rate ÷ uniqueRateQuery's unique rate (absent without a unique rate; alert above 1.5).
# TYPE inferscale_scaler_retry_amplification gauge
inferscale_scaler_retry_amplification{metric=%q,namespace="team-a",scaledobject="pool"} 3
# HELP inferscale_scaler_retry_capped 1 when the amplification exceeded retryBudget and the load was sized on unique rate × retryBudget.
# TYPE inferscale_scaler_retry_capped gauge
inferscale_scaler_retry_capped{metric=%q,namespace="team-a",scaledobject="pool"} 1
`, name, name)
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "inferscale_scaler_retry_amplification", "inferscale_scaler_retry_capped"); err != nil {
		t.Error(err)
	}
}
