package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/inferscale/inferscale/internal/kubeevent"
	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
)

// retryMeta: rate and unique rate behind a gateway, S = 1 s (μ = 1), T 2 s, q 0.99.
func retryMeta(kv ...string) map[string]string {
	m := map[string]string{
		"scalerAddress":     "inferscale:9090",
		"rateQuery":         "sum(rate(backend_requests_total[1m]))",
		"uniqueRateQuery":   `sum(rate(gateway_requests_total{attempt="1"}[1m]))`,
		"replicaThroughput": "1",
		"staleAfter":        "20s",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Rate 30/s with unique 10/s: capped to 14 replicas (12/s), the reason logged says
// retry-capped. Then the unique rate goes missing while the rate stays healthy: no cap,
// degraded, and the rate falling to 3/s does not scale the pool down while degraded.
func TestRetryUniqueMissingThroughServer(t *testing.T) {
	h := newHarness(t, nil)
	var logs syncBuffer
	h.srv.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: t0})
	r := ref("team-a", "pool", retryMeta())
	mv, err := h.metrics(t, r)
	if err != nil || mv.MetricValue != 14 {
		t.Fatalf("GetMetrics = %v, %v; want 14 (sized on 12/s)", mv, err)
	}
	if !strings.Contains(logs.String(), "retry-capped") {
		t.Errorf("decision log does not say retry-capped:\n%s", logs.String())
	}

	// The gateway's counter vanishes; the rate is fresh at every refresh.
	h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Empty: true, EvaluatedAt: t0.Add(30 * time.Second)})
	at := t0.Add(30 * time.Second)
	h.clock.set(at)
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: at})
	h.srv.Refresh(at)
	rec := h.rec(t, "team-a", "pool", retryMeta())
	if rec.RetryCapped || !rec.Degraded || rec.Amplification != -1 || rec.Replicas < 14 {
		t.Fatalf("unique rate out: replicas %d capped %v degraded %v amplification %v; want ≥ 14, uncapped, degraded, -1",
			rec.Replicas, rec.RetryCapped, rec.Degraded, rec.Amplification)
	}
	uncapped := rec.Replicas
	if uncapped <= 14 {
		t.Errorf("uncapped at 30/s: %d replicas, want more than the capped 14", uncapped)
	}
	at = at.Add(30 * time.Second)
	h.clock.set(at)
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 3, EvaluatedAt: at})
	h.srv.Refresh(at)
	if rec := h.rec(t, "team-a", "pool", retryMeta()); rec.Replicas < 14 || !rec.Degraded {
		t.Errorf("unique rate out, rate 3/s: %d replicas (degraded %v), want ≥ 14: a missing signal never scales down", rec.Replicas, rec.Degraded)
	}
}

// rec returns the stored decision of a registered trigger.
func (h *harness) rec(t *testing.T, ns, name string, meta map[string]string) decision.Recommendation {
	t.Helper()
	h.srv.mu.RLock()
	tr, ok := h.srv.triggers[MetricName(ns, name, meta)]
	h.srv.mu.RUnlock()
	if !ok {
		t.Fatalf("trigger %s/%s not registered", ns, name)
	}
	rec, _ := tr.snapshot()
	return rec
}

// Cost: 14 desired replicas at 2.5 per replica-hour cost 35 per hour; with 0.5 verified
// results per second (1,800 per hour) that is 35 ÷ 1,800 × 1,000 = 19.44 per 1,000.
func TestCostMetricsThroughServer(t *testing.T) {
	h := newHarness(t, nil)
	h.reg.MustRegister(newCostCollector(newDecisionCollector(h.srv)))
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 0.5, EvaluatedAt: t0})
	meta := retryMeta("gpuHourPrice", "2.5", "verifiedQuery", `sum(rate(eval_passed_total[5m]))`)
	if mv, err := h.metrics(t, ref("team-a", "pool", meta)); err != nil || mv.MetricValue != 14 {
		t.Fatalf("GetMetrics = %v, %v; want 14", mv, err)
	}
	name := MetricName("team-a", "pool", meta)
	want := fmt.Sprintf(`
# HELP inferscale_scaler_cost_per_thousand_verified_results Cost per 1,000 verified results: cost_per_hour ÷ (verified rate × 3600) × 1000 (absent without a price or a positive, fresh verified rate, and while the result is not a finite number, logged once).
# TYPE inferscale_scaler_cost_per_thousand_verified_results gauge
inferscale_scaler_cost_per_thousand_verified_results{metric=%[1]q,namespace="team-a",scaledobject="pool"} 19.444444444444446
# HELP inferscale_scaler_cost_per_hour Desired replicas × replica_hour_price: the pool's cost rate per hour (absent without a price).
# TYPE inferscale_scaler_cost_per_hour gauge
inferscale_scaler_cost_per_hour{metric=%[1]q,namespace="team-a",scaledobject="pool"} 35
# HELP inferscale_scaler_verified_results_rate Verified results per second: verifiedQuery's value, or on vLLM without it the requests that waited at most sloWaitSeconds (absent without a fresh valid value).
# TYPE inferscale_scaler_verified_results_rate gauge
inferscale_scaler_verified_results_rate{metric=%[1]q,namespace="team-a",scaledobject="pool"} 0.5
`, name)
	names := []string{"inferscale_scaler_cost_per_hour", "inferscale_scaler_cost_per_thousand_verified_results", "inferscale_scaler_verified_results_rate"}
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// No verified results (or a stale value): the cost rate stays, the cost per result goes.
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 0, EvaluatedAt: t0})
	if n, err := testutil.GatherAndCount(h.reg, "inferscale_scaler_cost_per_thousand_verified_results", "inferscale_scaler_cost_per_hour"); err != nil || n != 1 {
		t.Errorf("verified rate 0: %d series, %v; want only cost_per_hour", n, err)
	}
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 0.5, EvaluatedAt: t0})
	h.clock.set(t0.Add(time.Minute)) // older than staleAfter 20s
	if n, err := testutil.GatherAndCount(h.reg, "inferscale_scaler_cost_per_thousand_verified_results", "inferscale_scaler_verified_results_rate"); err != nil || n != 0 {
		t.Errorf("stale verified rate: %d series, %v; want none", n, err)
	}
	// Without gpuHourPrice: no cost series at all.
	h2 := newHarness(t, nil)
	h2.reg.MustRegister(newCostCollector(newDecisionCollector(h2.srv)))
	h2.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	if _, err := h2.metrics(t, ref("team-a", "pool", retryMeta())); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(h2.reg, names...); err != nil || n != 0 {
		t.Errorf("no gpuHourPrice: %d cost series, %v; want none", n, err)
	}
}

func TestRetryKeysInvalidArgument(t *testing.T) {
	h := newHarness(t, nil)
	r := ref("team-a", "pool", retryMeta("retryBudget", "0.5", "gpuHourPrice", "0", "verifiedQuery", "sum(rate(x[5m])"))
	_, err := h.client.GetMetricSpec(context.Background(), r)
	st := status.Convert(err)
	for _, s := range []string{"retryBudget must be a number in [1, 10]", "gpuHourPrice must be a number in (0, 1e9]", "verifiedQuery must be a PromQL expression"} {
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), s) {
			t.Errorf("GetMetricSpec: %v, want InvalidArgument containing %q", err, s)
		}
	}
	for _, v := range []string{"1e308", "1000000000.5", "-1"} {
		if _, err := ParseMetadata(retryMeta("gpuHourPrice", v), Defaults{PrometheusAddress: "http://prometheus:9090"}); err == nil || !strings.Contains(err.Error(), "gpuHourPrice must be a number in (0, 1e9]") {
			t.Errorf("gpuHourPrice %s: %v, want the key and range", v, err)
		}
	}
	if p, err := ParseMetadata(retryMeta("gpuHourPrice", "1e9"), Defaults{PrometheusAddress: "http://prometheus:9090"}); err != nil || p.GPUHourPrice != 1e9 {
		t.Errorf("gpuHourPrice 1e9 (the bound): %v, %v; want accepted", p.GPUHourPrice, err)
	}
	for _, v := range []string{"11", "NaN", "Inf", "1e400"} {
		if _, err := ParseMetadata(retryMeta("retryBudget", v), Defaults{PrometheusAddress: "http://prometheus:9090"}); err == nil || !strings.Contains(err.Error(), "retryBudget must be a number in [1, 10]") {
			t.Errorf("retryBudget %s: %v, want the key and range", v, err)
		}
	}
	p, err := ParseMetadata(retryMeta("gpuHourPrice", "3.2", "verifiedQuery", "sum(rate(ok_total[5m]))"), Defaults{PrometheusAddress: "http://prometheus:9090"})
	if err != nil || p.GPUHourPrice != 3.2 || p.VerifiedQuery != "sum(rate(ok_total[5m]))" || p.RetryBudget != 1.2 {
		t.Errorf("ParseMetadata = price %v, verified %q, budget %v, %v; want 3.2, the query, the default 1.2", p.GPUHourPrice, p.VerifiedQuery, p.RetryBudget, err)
	}
}

func TestRetryEpisode(t *testing.T) {
	var e retryEpisode
	type step struct {
		after   time.Duration
		a       float64
		queued  bool   // the recorder queues the event owed (false: rate-limited)
		want    string // event reason owed, "" none
		changed bool   // the episode starts or ends (logged)
	}
	for i, s := range []step{
		{0, 3, true, "", false},                         // above, not yet sustained
		{30 * time.Second, 2, true, "", false},          // still above
		{time.Minute, 1.6, true, EventRetryStorm, true}, // sustained a minute: one event
		{90 * time.Second, 4, true, "", false},          // same episode: nothing more
		{100 * time.Second, -1, true, "", false},        // no amplification: neither starts nor ends
		{2 * time.Minute, 1.5, true, EventRetryStormEnded, true},
		{130 * time.Second, 1.2, true, "", false}, // ended once
		{140 * time.Second, 9, true, "", false},   // a new run starts
		{190 * time.Second, 1.4, true, "", false}, // broken before a minute: no episode
		{200 * time.Second, 9, true, "", false},
		{260 * time.Second, 9, false, EventRetryStorm, true},  // a new episode; its event is rate-limited
		{265 * time.Second, 9, false, EventRetryStorm, false}, // still owed: offered again, not logged again
		{270 * time.Second, -1, true, "", false},              // no amplification: nothing offered
		{275 * time.Second, 9, true, EventRetryStorm, false},  // queued at last
		{280 * time.Second, 9, true, "", false},
		{285 * time.Second, 1, false, EventRetryStormEnded, true}, // ended; rate-limited
		{290 * time.Second, 9, true, EventRetryStormEnded, false}, // a new run, no episode yet: the end is still owed, and queued
		{300 * time.Second, 9, true, "", false},
		{350 * time.Second, 9, false, EventRetryStorm, true}, // sustained since +290s: an episode; rate-limited
		{355 * time.Second, 1, true, "", true},               // over before its start was queued: nothing owed (the last event says ended)
	} {
		ev, owed, changed := e.step(s.a, t0.Add(s.after))
		got := ""
		if owed {
			got = ev.Reason
			if s.queued {
				e.written(ev)
			}
		}
		if got != s.want || changed != s.changed {
			t.Errorf("step %d (A %v at +%v): event %q, changed %v; want %q, %v", i, s.a, s.after, got, changed, s.want, s.changed)
		}
		if owed && ev.Reason == EventRetryStorm && (ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "above 1.5")) {
			t.Errorf("step %d: %+v, want a Warning naming the level", i, ev)
		}
	}
}

// A sustained storm through the server: logged once per episode.
func TestRetryEpisodeLoggedOnce(t *testing.T) {
	h := newHarness(t, nil)
	var logs syncBuffer
	h.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	r := ref("team-a", "pool", retryMeta())
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: t0})
	if _, err := h.metrics(t, r); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 24; i++ { // two minutes of 5 s refreshes
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		h.clock.set(at)
		h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: at})
		h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: at})
		h.srv.Refresh(at)
	}
	if n := strings.Count(logs.String(), "retry storm: amplification above 1.5"); n != 1 {
		t.Errorf("retry storm logged %d times over two minutes, want once:\n%s", n, logs.String())
	}
}

// recordingTargets is a Targets that can write events, as the cluster's can: it keeps them.
type recordingTargets struct {
	fakeTargets
	mu  sync.Mutex
	got []string // namespace/name reason type
}

func (rt *recordingTargets) recordEvents(namespace, name string, specs []eventSpec) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, sp := range specs {
		rt.got = append(rt.got, namespace+"/"+name+" "+sp.Reason+" "+sp.Type)
	}
	return true
}

func (rt *recordingTargets) reasons(reason string) []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []string
	for _, g := range rt.got {
		if strings.Contains(g, " "+reason+" ") {
			out = append(out, g)
		}
	}
	return out
}

// The storm and its end are written as events on the ScaledObject, once each.
func TestRetryStormEvents(t *testing.T) {
	rt := &recordingTargets{fakeTargets: fakeTargets{}}
	h := newHarness(t, rt)
	r := ref("team-a", "pool", retryMeta())
	set := func(at time.Time, rate float64) {
		h.clock.set(at)
		h.sig.set("team-a", prom.KindRate, prom.Result{Value: rate, EvaluatedAt: at})
		h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: at})
	}
	set(t0, 30)
	if _, err := h.metrics(t, r); err != nil {
		t.Fatal(err)
	}
	at := t0
	for range 24 { // two minutes at amplification 3
		at = at.Add(5 * time.Second)
		set(at, 30)
		h.srv.Refresh(at)
	}
	for range 3 { // back to 1.1
		at = at.Add(5 * time.Second)
		set(at, 11)
		h.srv.Refresh(at)
	}
	storm, ended := rt.reasons(EventRetryStorm), rt.reasons(EventRetryStormEnded)
	if len(storm) != 1 || storm[0] != "team-a/pool RetryStorm Warning" || len(ended) != 1 || ended[0] != "team-a/pool RetryStormEnded Normal" {
		t.Errorf("events %v, want one RetryStorm Warning and one RetryStormEnded Normal on team-a/pool", rt.got)
	}
}

// Without verifiedQuery, a vLLM pool with a price reads verified results from the
// queue-time histogram's bucket at T; a custom or Triton pool has no fallback.
func TestVerifiedFallbackQuery(t *testing.T) {
	base := func(kv ...string) map[string]string {
		m := map[string]string{"engine": "vllm", "model": `meta-llama/Meta-Llama-3-8B-Instruct`, "gpuHourPrice": "2.5"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		meta     map[string]string
		openCost bool // --opencost-address set
		want     string
	}{
		{"vllm, T 2 s", base(), false, `sum(rate(vllm:request_queue_time_seconds_bucket{model_name="meta-llama/Meta-Llama-3-8B-Instruct", le=~"2|2\\.0"}[5m]))`},
		{"vllm, T 0.5 s", base("sloWaitSeconds", "0.5"), false, `sum(rate(vllm:request_queue_time_seconds_bucket{model_name="meta-llama/Meta-Llama-3-8B-Instruct", le=~"0\\.5"}[5m]))`},
		{"verifiedQuery wins", base("verifiedQuery", "sum(rate(ok_total[5m]))"), false, "sum(rate(ok_total[5m]))"},
		{"no price: no fallback", map[string]string{"engine": "vllm", "model": "m"}, false, ""},
		{"OpenCost prices it: fallback", map[string]string{"engine": "vllm", "model": "m"}, true,
			`sum(rate(vllm:request_queue_time_seconds_bucket{model_name="m", le=~"2|2\\.0"}[5m]))`},
		{"triton: no histogram", map[string]string{"engine": "triton", "model": "m", "gpuHourPrice": "1"}, false, ""},
		{"triton with OpenCost: no histogram", map[string]string{"engine": "triton", "model": "m"}, true, ""},
	}
	for _, tt := range tests {
		p, err := ParseMetadata(tt.meta, Defaults{PrometheusAddress: "http://prometheus:9090"})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := verifiedQueryOf(p, p.GPUHourPrice > 0 || tt.openCost)
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
		if got != "" {
			if err := checkQuery(got); err != nil {
				t.Errorf("%s: %q does not parse: %v", tt.name, got, err)
			}
		}
	}
	// Through the server: the fallback is subscribed as the verified signal.
	h := newHarness(t, nil)
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 1, EvaluatedAt: t0})
	if _, err := h.client.GetMetricSpec(context.Background(), ref("team-a", "llama", base())); err != nil {
		t.Fatal(err)
	}
	found := false
	h.sig.mu.Lock()
	defer h.sig.mu.Unlock()
	for _, r := range h.sig.subs {
		if r.Kind == prom.KindVerified && strings.Contains(r.Query, "vllm:request_queue_time_seconds_bucket") {
			found = true
		}
	}
	if !found {
		t.Errorf("subscriptions %v: want the queue-time histogram as the verified signal", h.sig.subs)
	}
}

// eventTargets writes events through the real Events writer, as the cluster's Targets do.
type eventTargets struct {
	fakeTargets
	ev *Events
}

func (et eventTargets) recordEvents(namespace, name string, specs []eventSpec) bool {
	return et.ev.Record(namespace, name, "uid", specs)
}

// A second storm within EventMinInterval of the first: its RetryStorm event was refused by
// the rate limit while the episode counted as reported, so a storm of 30 minutes had no
// event and the last one on the ScaledObject read RetryStormEnded. The event stays owed
// until the limit lets it through: A = 3 for 70 s (storm at +60 s), 1.1 for one refresh
// (ended at +75 s), then 3 for 30 minutes (a storm from +140 s, written at +6 m, 5 minutes
// after the first).
func TestRetryStormEventOwedPastRateLimit(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := eventsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dc := dynamicfake.NewSimpleDynamicClient(scheme)
	ev := NewEvents(dc, "scaler-0", nil)
	h := newHarness(t, eventTargets{fakeTargets: fakeTargets{}, ev: ev})
	ev.now = h.clock.now
	var logs syncBuffer
	h.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
	r := ref("team-a", "pool", retryMeta())
	at := t0
	set := func(rate float64) {
		h.clock.set(at)
		h.sig.set("team-a", prom.KindRate, prom.Result{Value: rate, EvaluatedAt: at})
		h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: at})
	}
	set(30)
	if _, err := h.metrics(t, r); err != nil {
		t.Fatal(err)
	}
	step := func(n int, rate float64) {
		for range n {
			at = at.Add(5 * time.Second)
			set(rate)
			h.srv.Refresh(at)
		}
	}
	step(14, 30)
	step(1, 11)
	step(360, 30)
	for len(ev.queue) > 0 {
		ev.send(context.Background(), <-ev.queue)
	}
	ul, err := dc.Resource(kubeevent.GVR).Namespace("team-a").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range ul.Items {
		var e eventsv1.Event
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.EventTime.Sub(t0).String()+" "+e.Reason+" "+e.Type)
	}
	sort.Slice(got, func(i, j int) bool { return eventAt(got[i]) < eventAt(got[j]) })
	want := []string{"1m0s RetryStorm Warning", "1m15s RetryStormEnded Normal", "6m0s RetryStorm Warning"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if n := strings.Count(logs.String(), "retry storm: amplification above 1.5"); n != 2 {
		t.Errorf("storm logged %d times, want twice (once per episode, not per offer of the owed event):\n%s", n, logs.String())
	}
}

// eventAt is the offset an event line of TestRetryStormEventOwedPastRateLimit starts with.
func eventAt(line string) time.Duration {
	d, _ := time.ParseDuration(strings.Fields(line)[0])
	return d
}

// Rate 30/s over a unique rate of 1e-308: rate ÷ unique overflows. It capped the pool to one
// replica while the note read "∞ (no unique requests)"; now it is sized as without a unique
// rate (30 replicas at 1 s each and T 2 s), degraded, with no amplification series and no storm.
func TestRetryAmplificationOverflowThroughServer(t *testing.T) {
	rt := &recordingTargets{fakeTargets: fakeTargets{}}
	h := newHarness(t, rt)
	r := ref("team-a", "pool", retryMeta())
	var at time.Time
	for i := range 25 { // two minutes
		at = t0.Add(time.Duration(i) * 5 * time.Second)
		h.clock.set(at)
		h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: at})
		h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 1e-308, EvaluatedAt: at})
		if i == 0 {
			if _, err := h.metrics(t, r); err != nil {
				t.Fatal(err)
			}
			continue
		}
		h.srv.Refresh(at)
	}
	rec := h.rec(t, "team-a", "pool", retryMeta())
	h2 := newHarness(t, nil)
	h2.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	plain, err := h2.metrics(t, ref("team-a", "pool", map[string]string{"rateQuery": "sum(rate(backend_requests_total[1m]))", "replicaThroughput": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	if rec.RetryCapped || rec.Amplification != -1 || !rec.Degraded || int64(rec.Replicas) != plain.MetricValue || rec.Replicas <= 1 {
		t.Errorf("unique 1e-308: replicas %d capped %v amplification %v degraded %v; want %d as without a unique rate, uncapped, -1, degraded",
			rec.Replicas, rec.RetryCapped, rec.Amplification, rec.Degraded, plain.MetricValue)
	}
	if n, err := testutil.GatherAndCount(h.reg, "inferscale_scaler_retry_amplification", "inferscale_scaler_retry_capped"); err != nil || n != 0 {
		t.Errorf("%d amplification series (%v), want none", n, err)
	}
	if s := rt.reasons(EventRetryStorm); len(s) != 0 {
		t.Errorf("events %v, want no RetryStorm: no amplification was measured", s)
	}
}

// A verified rate of 5e304 or more overflowed verified × 3600 and exported a cost per 1,000
// verified results of 0; the cost per result is now computed in an order that does not
// overflow first, and a result that underflows to 0 from a positive cost is not exported.
func TestCostPer1kVerifiedBounds(t *testing.T) {
	tests := []struct {
		name           string
		rate, verified float64
		want           float64
		ok             bool
	}{
		{"35 per hour, 0.5 per second", 35, 0.5, 19.444444444444446, true},
		{"verified 1e305", 35, 1e305, 35.0 / 3600 / 1e305 * 1000, true},
		{"verified 1e308", 35, 1e308, 35.0 / 3600 / 1e308 * 1000, true},
		{"no replicas: free", 0, 1e308, 0, true},
		{"verified 1e-300 at the largest cost: overflows", 1e9 * 100000, 1e-300, 0, false},
		{"underflows to 0", 5e-324, 1e10, 0, false},
		{"no verified results", 35, 0, 0, false},
	}
	for _, tt := range tests {
		got, ok := costPer1kVerified(tt.rate, tt.verified)
		if math.Abs(got-tt.want) > 1e-12*tt.want || ok != tt.ok { // want is exact (constant arithmetic)
			t.Errorf("%s: costPer1kVerified(%g, %g) = %v, %v; want %v, %v", tt.name, tt.rate, tt.verified, got, ok, tt.want, tt.ok)
		}
		if ok && tt.rate > 0 && !(got > 0) {
			t.Errorf("%s: %v exported for a positive cost", tt.name, got)
		}
	}
	// The cost rate never saturates: at the largest price and replica count it is exact.
	if got, want := costRate(math.MaxInt32, maxGPUHourPrice), 2147483647e9; got != want {
		t.Errorf("costRate(MaxInt32, %g) = %v, want %v", float64(maxGPUHourPrice), got, want)
	}
}

// A verifiedQuery answering -1, NaN or +Inf (one series is passed on as Prometheus returned
// it) left the verified rate and the cost per 1,000 absent with no word. It is logged at WARN
// once per episode, naming the ScaledObject and the value, and at INFO when the value is
// valid again.
func TestVerifiedInvalidValueLogged(t *testing.T) {
	for _, v := range []float64{-1, math.NaN(), math.Inf(1)} {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			h := newHarness(t, nil)
			var logs syncBuffer
			h.srv.log = slog.New(slog.NewTextHandler(&logs, nil))
			h.reg.MustRegister(newCostCollector(newDecisionCollector(h.srv)))
			h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
			h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: t0})
			h.sig.set("team-a", prom.KindVerified, prom.Result{Value: v, EvaluatedAt: t0})
			meta := retryMeta("gpuHourPrice", "2.5", "verifiedQuery", `sum(rate(eval_passed_total[5m]))`)
			if _, err := h.metrics(t, ref("team-a", "pool", meta)); err != nil {
				t.Fatal(err)
			}
			names := []string{"inferscale_scaler_verified_results_rate", "inferscale_scaler_cost_per_thousand_verified_results"}
			for range 3 {
				if n, err := testutil.GatherAndCount(h.reg, names...); err != nil || n != 0 {
					t.Errorf("verified %v: %d series (%v), want none", v, n, err)
				}
			}
			want := fmt.Sprintf(`level=WARN msg="verified results rate not usable: the verified query's value must be a finite number ≥ 0; verified_results_rate and cost_per_thousand_verified_results are absent" namespace=team-a scaledObject=pool metric=%s value=%v`,
				MetricName("team-a", "pool", meta), v)
			if n := strings.Count(logs.String(), want); n != 1 {
				t.Errorf("verified %v over 3 scrapes: %d lines %q, want once:\n%s", v, n, want, logs.String())
			}
			h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 0.5, EvaluatedAt: t0})
			if n, err := testutil.GatherAndCount(h.reg, names...); err != nil || n != 2 || !strings.Contains(logs.String(), `level=INFO msg="verified results rate no longer invalid" namespace=team-a scaledObject=pool`) {
				t.Errorf("valid again: %d series (%v), want 2 and the end logged:\n%s", n, err, logs.String())
			}
		})
	}
}

// Metadata that would do nothing is refused naming the keys: retryBudget without
// uniqueRateQuery (the budget bounds rate ÷ unique rate), and uniqueRateQuery (with or
// without retryBudget) on a pool without a rate signal.
func TestRetryKeysWithoutEffect(t *testing.T) {
	d := Defaults{PrometheusAddress: "http://prometheus:9090"}
	queueOnly := map[string]string{"queueQuery": "sum(q)", "replicaThroughput": "1"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	rate := map[string]string{"rateQuery": "sum(rate(x[1m]))", "replicaThroughput": "1"}
	tests := []struct {
		name string
		meta map[string]string
		want string // "" accepted
	}{
		{"retryBudget without uniqueRateQuery", with(rate, "retryBudget", "2"),
			"retryBudget is set without uniqueRateQuery: the budget bounds rate ÷ unique rate, so it has no effect"},
		{"uniqueRateQuery on a queue-only pool", with(queueOnly, "uniqueRateQuery", "sum(rate(g[1m]))"),
			"uniqueRateQuery needs a rate signal (rateQuery, or engine triton or vllm)"},
		{"both on a queue-only pool", with(queueOnly, "uniqueRateQuery", "sum(rate(g[1m]))", "retryBudget", "1.1"),
			"uniqueRateQuery and retryBudget need a rate signal (rateQuery, or engine triton or vllm)"},
		{"with a rate query", with(rate, "uniqueRateQuery", "sum(rate(g[1m]))", "retryBudget", "2"), ""},
		{"on a preset", map[string]string{"engine": "vllm", "model": "m", "uniqueRateQuery": "sum(rate(g[1m]))", "retryBudget": "2"}, ""},
	}
	for _, tt := range tests {
		_, err := ParseMetadata(tt.meta, d)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tt.name, err)
		case tt.want != "" && (err == nil || !errors.Is(err, ErrInvalidMetadata) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want InvalidArgument containing %q", tt.name, err, tt.want)
		}
	}
}
