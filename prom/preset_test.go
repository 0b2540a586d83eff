package prom

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
)

var testLabels = Labels{Namespace: "namespace", Pod: "pod"}

func TestPresetQuery(t *testing.T) {
	tests := []struct {
		engine string
		kind   Kind
		want   string
	}{
		{EngineTriton, KindQueue, `sum by (namespace, model) ({__name__=~"nv_inference_pending_request_count|inferscale_front_held_requests"})`},
		{EngineTriton, KindRate, `sum by (namespace, model) (rate(nv_inference_request_success[1m])) + sum by (namespace, model) (rate(nv_inference_request_failure[1m]))`},
		{EngineTriton, KindActivity, `avg by (namespace, model) (group by (namespace, pod, model) (nv_inference_pending_request_count) * on (namespace, pod) group_left () avg by (namespace, pod) (DCGM_FI_PROF_GR_ENGINE_ACTIVE))`},
		{EngineTriton, KindReady, `count by (namespace, model) (group by (namespace, pod, model) (nv_inference_pending_request_count))`},
		{EngineVLLM, KindQueue, `sum by (namespace, model_name) (vllm:num_requests_waiting)`},
		{EngineVLLM, KindRate, `sum by (namespace, model_name) (rate(vllm:request_success_total[1m]))`},
		{EngineVLLM, KindActivity, `avg by (namespace, model_name) (group by (namespace, pod, model_name) (vllm:num_requests_waiting) * on (namespace, pod) group_left () avg by (namespace, pod) (DCGM_FI_PROF_GR_ENGINE_ACTIVE))`},
		{EngineVLLM, KindReady, `count by (namespace, model_name) (group by (namespace, pod, model_name) (vllm:num_requests_waiting))`},
		{EngineTriton, KindRunning, `(clamp_min(sum by (namespace, model) (rate(inferscale_front_forwarding_seconds_total[1m])) - sum by (namespace, model) (avg_over_time(nv_inference_pending_request_count[1m])), 0) >= (sum by (namespace, model) (rate(nv_inference_request_duration_us[1m])) - sum by (namespace, model) (rate(nv_inference_queue_duration_us[1m]))) * 0.000001) or (sum by (namespace, model) (rate(nv_inference_request_duration_us[1m])) - sum by (namespace, model) (rate(nv_inference_queue_duration_us[1m]))) * 0.000001 or clamp_min(sum by (namespace, model) (rate(inferscale_front_forwarding_seconds_total[1m])) - sum by (namespace, model) (avg_over_time(nv_inference_pending_request_count[1m])), 0)`},
		{EngineTriton, KindServiceTime, `(60 * (sum by (namespace, model) (rate(nv_inference_request_duration_us[1m])) - sum by (namespace, model) (rate(nv_inference_queue_duration_us[1m]))) * 0.000001 + 4 * ((sum by (namespace, model) (rate(nv_inference_request_duration_us[10m])) - sum by (namespace, model) (rate(nv_inference_queue_duration_us[10m]))) * 0.000001 / sum by (namespace, model) (rate(nv_inference_request_success[10m])))) / (60 * sum by (namespace, model) (rate(nv_inference_request_success[1m])) + 4)`},
		{EngineTriton, KindDispersion, `30 * quantile_over_time(0.5, (((sum by (namespace, model) (rate(nv_inference_request_success[1m])) + sum by (namespace, model) (rate(nv_inference_request_failure[1m]))) - (sum by (namespace, model) (rate(nv_inference_request_success[1m] offset 1m)) + sum by (namespace, model) (rate(nv_inference_request_failure[1m] offset 1m)))) ^ 2)[10m:1m]) / (0.4549 * avg_over_time((sum by (namespace, model) (rate(nv_inference_request_success[1m])) + sum by (namespace, model) (rate(nv_inference_request_failure[1m])))[10m:1m]))`},
		{EngineVLLM, KindRunning, `sum by (namespace, model_name) (vllm:num_requests_running)`},
		{EngineVLLM, KindServiceTime, `(60 * (sum by (namespace, model_name) (rate(vllm:e2e_request_latency_seconds_sum[1m])) - sum by (namespace, model_name) (rate(vllm:request_queue_time_seconds_sum[1m]))) + 4 * ((sum by (namespace, model_name) (rate(vllm:e2e_request_latency_seconds_sum[10m])) - sum by (namespace, model_name) (rate(vllm:request_queue_time_seconds_sum[10m]))) / sum by (namespace, model_name) (rate(vllm:e2e_request_latency_seconds_count[10m])))) / (60 * sum by (namespace, model_name) (rate(vllm:e2e_request_latency_seconds_count[1m])) + 4)`},
		{EngineVLLM, KindDispersion, `30 * quantile_over_time(0.5, (((sum by (namespace, model_name) (rate(vllm:request_success_total[1m]))) - (sum by (namespace, model_name) (rate(vllm:request_success_total[1m] offset 1m)))) ^ 2)[10m:1m]) / (0.4549 * avg_over_time((sum by (namespace, model_name) (rate(vllm:request_success_total[1m])))[10m:1m]))`},
	}
	for _, tt := range tests {
		t.Run(tt.engine+"/"+string(tt.kind), func(t *testing.T) {
			got, err := PresetQuery(tt.engine, tt.kind, testLabels)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PresetQuery (-want +got):\n%s", diff)
			}
			// The text must be what Prometheus's parser prints back, so the query a user
			// sees in logs and docs is the one evaluated.
			expr, err := promqlParser.ParseExpr(got)
			if err != nil {
				t.Fatalf("preset does not parse: %v", err)
			}
			if diff := cmp.Diff(got, expr.String()); diff != "" {
				t.Errorf("preset is not in canonical form (-preset +printed):\n%s", diff)
			}
			// The poller applies the budget to every query it evaluates.
			if err := CheckBudget(got); err != nil {
				t.Errorf("preset exceeds the PromQL budget: %v", err)
			}
		})
	}
}

func TestPresetQueryErrors(t *testing.T) {
	for _, tt := range []struct {
		engine string
		kind   Kind
	}{{"tgi", KindQueue}, {EngineCustom, KindQueue}, {EngineTriton, "latency"}} {
		if _, err := PresetQuery(tt.engine, tt.kind, testLabels); !errors.Is(err, ErrBadRequest) {
			t.Errorf("PresetQuery(%q, %q) error = %v, want ErrBadRequest", tt.engine, tt.kind, err)
		}
	}
}

func TestSubscribeErrors(t *testing.T) {
	p := newTestPoller(t, "http://127.0.0.1:1")
	tests := []struct {
		name    string
		give    Request
		wantErr error
	}{
		{"unknown kind", Request{Namespace: "a", Kind: "latency", Engine: EngineTriton, Model: "m"}, ErrBadRequest},
		{"no namespace", Request{Kind: KindQueue, Engine: EngineTriton, Model: "m"}, ErrBadRequest},
		{"no model for preset", Request{Namespace: "a", Kind: KindQueue, Engine: EngineTriton}, ErrBadRequest},
		{"unknown engine", Request{Namespace: "a", Kind: KindQueue, Engine: "tgi", Model: "m"}, ErrBadRequest},
		{"custom without query", Request{Namespace: "a", Kind: KindQueue, Engine: EngineCustom}, ErrBadRequest},
		{"bad address", Request{Address: "localhost:9090", Namespace: "a", Kind: KindQueue, Engine: EngineTriton, Model: "m"}, ErrBadRequest},
		{"bad PromQL", Request{Namespace: "a", Kind: KindQueue, Query: `sum(`}, ErrBadQuery},
		{"range vector result", Request{Namespace: "a", Kind: KindQueue, Query: `foo[1m]`}, ErrBadQuery},
		{"string result", Request{Namespace: "a", Kind: KindQueue, Query: `"x"`}, ErrBadQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Subscribe(tt.give)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Subscribe error = %v, want %v", err, tt.wantErr)
			}
		})
	}
	if n := p.Subscriptions(); n != 0 {
		t.Errorf("Subscriptions = %d after only bad requests, want 0", n)
	}
}

func TestSubscribeIdempotentAndConfined(t *testing.T) {
	p := newTestPoller(t, "http://127.0.0.1:1")
	r := Request{Namespace: "team-a", Kind: KindQueue, Query: `sum(foo{namespace="team-b"})`}
	k1, err := p.Subscribe(r)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := p.Subscribe(r)
	if err != nil {
		t.Fatal(err)
	}
	if k1 != k2 {
		t.Errorf("Subscribe twice gave different keys %v and %v", k1, k2)
	}
	if diff := cmp.Diff(`sum(foo{namespace="team-a"})`, k1.Query()); diff != "" {
		t.Errorf("evaluated query (-want +got):\n%s", diff)
	}
	if got := p.Result(k1); got.Err != nil || !got.EvaluatedAt.IsZero() {
		t.Errorf("Result before any refresh = %+v, want zero", got)
	}
	p.Unsubscribe(k1)
	if got := p.Result(k1); !errors.Is(got.Err, ErrNotSubscribed) {
		t.Errorf("Result after Unsubscribe: Err = %v, want ErrNotSubscribed", got.Err)
	}
}

// TestGrouping subscribes 1,000 preset ScaledObjects (each with all seven signals, half
// Triton and half vLLM, across 50 namespaces) and counts distinct queries.
func TestGrouping(t *testing.T) {
	p := newTestPoller(t, "http://127.0.0.1:1")
	const scaledObjects = 1000
	perTrigger := 0
	strs := map[*byte]bool{}
	for i := range scaledObjects {
		engine := EngineTriton
		if i%2 == 1 {
			engine = EngineVLLM
		}
		for _, kind := range Kinds {
			k, err := p.Subscribe(Request{Namespace: fmt.Sprintf("ns-%d", i%50), Kind: kind, Engine: engine, Model: fmt.Sprintf("model-%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			strs[unsafe.StringData(k.q.promql)] = true
			perTrigger++
		}
	}
	// The 7,000 keys share their query's one PromQL string (a bundle is ~1.8 KB).
	if len(strs) != 2 {
		t.Errorf("the keys hold %d distinct PromQL strings, want 2 (one per bundle)", len(strs))
	}
	if got, want := p.Queries(), 2; got != want {
		t.Errorf("distinct queries for %d preset ScaledObjects = %d, want %d (one bundle per engine)", scaledObjects, got, want)
	}
	if got := p.Subscriptions(); got != perTrigger {
		t.Errorf("Subscriptions = %d, want %d", got, perTrigger)
	}
	t.Logf("%d preset ScaledObjects x 7 signals: %d queries per refresh (a per-trigger scaler: %d)", scaledObjects, p.Queries(), perTrigger)
}

// TestSplit checks the grouped split on a hand-built vector: each key reads its own
// (namespace, model) series, a missing one is empty.
func TestSplit(t *testing.T) {
	v := model.Vector{
		{Metric: model.Metric{"namespace": "a", "model": "m"}, Value: 7, Timestamp: 1000},
		{Metric: model.Metric{"namespace": "b", "model": "m"}, Value: 9, Timestamp: 1000},
		{Metric: model.Metric{"namespace": "a", "model": "n"}, Value: 1, Timestamp: 1000},
	}
	series, _, _, _, err := split(v, KindQueue, true, false, "namespace", "model")
	if err != nil {
		t.Fatal(err)
	}
	got := map[group]float64{}
	for g, s := range series {
		got[g] = s.value
	}
	want := map[group]float64{{"a", "m", ""}: 7, {"b", "m", ""}: 9, {"a", "n", ""}: 1}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(group{})); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
	_, _, total, empty, err := split(v, KindQueue, false, false, "namespace", "model")
	if err != nil || empty || total.value != 17 {
		t.Errorf("custom split = %v, empty %v, err %v; want the sum 17", total.value, empty, err)
	}
	// A bundle's series are split by signal too; outside a bundle the label is not read.
	v = append(v, &model.Sample{Metric: model.Metric{"namespace": "a", "model": "m", SignalLabel: "rate"}, Value: 3, Timestamp: 1000})
	v[0].Metric = model.Metric{"namespace": "a", "model": "m", SignalLabel: "queue"}
	series, _, _, _, err = split(v, "presets/triton", true, true, "namespace", "model")
	if err != nil {
		t.Fatal(err)
	}
	got = map[group]float64{}
	for g, s := range series {
		got[g] = s.value
	}
	want = map[group]float64{{"a", "m", KindQueue}: 7, {"a", "m", KindRate}: 3, {"b", "m", ""}: 9, {"a", "n", ""}: 1}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(group{})); diff != "" {
		t.Errorf("bundle split (-want +got):\n%s", diff)
	}
	if _, _, _, empty, _ := split(model.Vector{}, KindQueue, false, false, "namespace", "model"); !empty {
		t.Errorf("custom split of an empty vector: empty = false, want true")
	}
	if _, _, _, _, err := split(model.Matrix{}, KindQueue, false, false, "namespace", "model"); err == nil {
		t.Errorf("split of a matrix: no error")
	}
}

func BenchmarkSplitGrouped1000(b *testing.B) {
	v := make(model.Vector, 1000)
	for i := range v {
		v[i] = &model.Sample{Metric: model.Metric{
			"namespace": model.LabelValue(fmt.Sprintf("ns-%d", i%50)),
			"model":     model.LabelValue(fmt.Sprintf("model-%d", i)),
		}, Value: model.SampleValue(i), Timestamp: 1000}
	}
	for b.Loop() {
		if _, _, _, _, err := split(v, KindQueue, true, false, "namespace", "model"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResult(b *testing.B) {
	p := newTestPoller(b, "http://127.0.0.1:1")
	k, err := p.Subscribe(Request{Namespace: "a", Kind: KindQueue, Engine: EngineTriton, Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = p.Result(k)
		}
	})
}

func newTestPoller(t testing.TB, addr string) *Poller {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DefaultAddress = addr
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BenchmarkSubscribe1000Presets subscribes 1,000 preset ScaledObjects x 7 signals and reports
// the distinct queries per refresh next to what a per-trigger scaler would issue.
func BenchmarkSubscribe1000Presets(b *testing.B) {
	var p *Poller
	for b.Loop() {
		p = newTestPoller(b, "http://127.0.0.1:1")
		for i := range 1000 {
			engine := EngineTriton
			if i%2 == 1 {
				engine = EngineVLLM
			}
			for _, kind := range Kinds {
				if _, err := p.Subscribe(Request{Namespace: fmt.Sprintf("ns-%d", i%50), Kind: kind, Engine: engine, Model: fmt.Sprintf("model-%d", i)}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(p.Queries()), "queries/refresh")
	b.ReportMetric(float64(p.Subscriptions()), "per-trigger-queries/refresh")
}
