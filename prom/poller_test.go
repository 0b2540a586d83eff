package prom

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/inferscale/inferscale/internal/promtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 60 * time.Second

func subscribe(t *testing.T, p *Poller, r Request) Key {
	t.Helper()
	k, err := p.Subscribe(r)
	if err != nil {
		t.Fatalf("Subscribe(%+v): %v", r, err)
	}
	return k
}

func wantValue(t *testing.T, p *Poller, k Key, want float64) {
	t.Helper()
	got := p.Result(k)
	if got.Err != nil || got.Empty || math.Abs(got.Value-want) > 1e-9 {
		t.Errorf("Result(%v) = %+v, want Value %v", k, got, want)
	}
	if got.EvaluatedAt.IsZero() || got.SampleTime.IsZero() {
		t.Errorf("Result(%v): EvaluatedAt %v, SampleTime %v; want both set", k, got.EvaluatedAt, got.SampleTime)
	}
}

func wantEmpty(t *testing.T, p *Poller, k Key) {
	t.Helper()
	if got := p.Result(k); got.Err != nil || !got.Empty || got.EvaluatedAt.IsZero() {
		t.Errorf("Result(%v) = %+v, want Empty after an evaluation", k, got)
	}
}

// TestPollerAgainstPrometheus drives exporter values through a real Prometheus into the
// poller and reads them back per key.
func TestPollerAgainstPrometheus(t *testing.T) {
	exp := promtest.NewExporter(t)
	srv := promtest.Start(t, exp.Target())
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL()
	p, err := NewPoller(cfg, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	pending := exp.Gauge("nv_inference_pending_request_count", "namespace", "pod", "model", "version")
	dcgm := exp.Gauge("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "namespace", "pod", "gpu")
	success := exp.Counter("nv_inference_request_success", "namespace", "pod", "model", "version")
	failure := exp.Counter("nv_inference_request_failure", "namespace", "pod", "model", "version")
	waiting := exp.Gauge("vllm:num_requests_waiting", "namespace", "pod", "model_name")
	finished := exp.Counter("vllm:request_success_total", "namespace", "pod", "model_name", "finished_reason")

	// Pool (a, m) = pods p1, p2; p2 also serves m2; p3 has a GPU but no Triton (not in a pool).
	pending.WithLabelValues("a", "p1", "m", "1").Set(4)
	pending.WithLabelValues("a", "p2", "m", "1").Set(3)
	pending.WithLabelValues("a", "p2", "m2", "1").Set(1)
	pending.WithLabelValues("team-b", "q1", "m", "1").Set(5)
	exp.Gauge("team_b_secret", "namespace").WithLabelValues("team-b").Set(42)
	dcgm.WithLabelValues("a", "p1", "0").Set(0.2)
	dcgm.WithLabelValues("a", "p1", "1").Set(0.4)
	dcgm.WithLabelValues("a", "p2", "0").Set(0.9)
	dcgm.WithLabelValues("a", "p3", "0").Set(1)
	waiting.WithLabelValues("a", "v1", "llama").Set(2)
	waiting.WithLabelValues("a", "v2", "llama").Set(6)
	for _, c := range []*prometheus.CounterVec{success, failure} {
		c.WithLabelValues("a", "p1", "m", "1")
		c.WithLabelValues("a", "p2", "m", "1")
		c.WithLabelValues("team-b", "q1", "m", "1")
	}
	finished.WithLabelValues("a", "v1", "llama", "stop")
	srv.WaitFor(t, `count(nv_inference_request_success) + count(vllm:request_success_total)`, promtest.HasValue(4), waitTimeout)
	// Counters move only after a first zero sample, so rate() sees an increase.
	success.WithLabelValues("a", "p1", "m", "1").Add(120)
	failure.WithLabelValues("a", "p2", "m", "1").Add(30)
	success.WithLabelValues("team-b", "q1", "m", "1").Add(600)
	finished.WithLabelValues("a", "v1", "llama", "stop").Add(60)
	srv.WaitFor(t, `sum(nv_inference_request_success) + sum(nv_inference_request_failure) + sum(vllm:request_success_total)`, promtest.HasValue(810), waitTimeout)

	triton := func(kind Kind, model string) Request {
		return Request{Namespace: "a", Kind: kind, Engine: EngineTriton, Model: model}
	}
	kQueue := subscribe(t, p, triton(KindQueue, "m"))
	kQueue2 := subscribe(t, p, triton(KindQueue, "m2"))
	kRate := subscribe(t, p, triton(KindRate, "m"))
	kAct := subscribe(t, p, triton(KindActivity, "m"))
	kAct2 := subscribe(t, p, triton(KindActivity, "m2"))
	kReady := subscribe(t, p, triton(KindReady, "m"))
	kReady2 := subscribe(t, p, triton(KindReady, "m2"))
	kMissing := subscribe(t, p, triton(KindQueue, "nope"))
	kVQueue := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Engine: EngineVLLM, Model: "llama"})
	kVRate := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Engine: EngineVLLM, Model: "llama"})
	kB := subscribe(t, p, Request{Namespace: "team-b", Kind: KindQueue, Engine: EngineTriton, Model: "m"})
	kSteal := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(nv_inference_pending_request_count{namespace="team-b"})`})
	kSecret := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `team_b_secret{namespace="team-b"}`})
	kSecretB := subscribe(t, p, Request{Namespace: "team-b", Kind: KindQueue, Query: `team_b_secret`})
	kStealRe := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(nv_inference_pending_request_count{namespace=~".*", model="m"})`})
	kSplit := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Model: "m", ModelLabel: "model", Query: `sum by (model) (nv_inference_pending_request_count{namespace="team-b"})`})
	kSplit2 := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Model: "m2", ModelLabel: "model", Query: `sum by (model) (nv_inference_pending_request_count{namespace="team-b"})`})
	kSplitB := subscribe(t, p, Request{Namespace: "team-b", Kind: KindRate, Model: "m", ModelLabel: "model", Query: `sum by (model) (nv_inference_pending_request_count{namespace="team-b"})`})
	kScalar := subscribe(t, p, Request{Namespace: "a", Kind: KindReady, Query: `scalar(count(DCGM_FI_PROF_GR_ENGINE_ACTIVE))`})

	// Evaluate at a fixed instant so the expected rates can be computed by Prometheus itself
	// at the same instant with plain, per-namespace selectors.
	evalAt := time.Now()
	p.now = func() time.Time { return evalAt }
	p.Refresh(ctx)

	t.Run("queue", func(t *testing.T) {
		wantValue(t, p, kQueue, 7)  // 4 + 3, pods p1 and p2
		wantValue(t, p, kQueue2, 1) // m2 only on p2
		wantValue(t, p, kB, 5)      // team-b's own ScaledObject reads team-b
		wantValue(t, p, kVQueue, 8) // vLLM: 2 + 6
		wantEmpty(t, p, kMissing)
	})
	t.Run("rate", func(t *testing.T) {
		want := instant(t, srv, evalAt, `sum(rate(nv_inference_request_success{namespace="a",model="m"}[1m])) + sum(rate(nv_inference_request_failure{namespace="a",model="m"}[1m]))`)
		if want <= 0 {
			t.Fatalf("expected rate %v, want > 0", want)
		}
		wantValue(t, p, kRate, want)
		wantValue(t, p, kVRate, instant(t, srv, evalAt, `sum(rate(vllm:request_success_total{namespace="a",model_name="llama"}[1m]))`))
	})
	t.Run("activity is the mean of the pool's pods", func(t *testing.T) {
		wantValue(t, p, kAct, (0.3+0.9)/2) // p1 = mean(0.2, 0.4), p2 = 0.9; p3 is not in the pool
		wantValue(t, p, kAct2, 0.9)
	})
	t.Run("ready counts the pool's pods", func(t *testing.T) {
		wantValue(t, p, kReady, 2)
		wantValue(t, p, kReady2, 1)
	})
	t.Run("confinement", func(t *testing.T) {
		if diff := kSteal.Query(); diff != `sum(nv_inference_pending_request_count{namespace="a"})` {
			t.Errorf("confined query = %s", diff)
		}
		wantValue(t, p, kSteal, 8)   // a's own series (4 + 3 + 1), never team-b's 5
		wantValue(t, p, kStealRe, 7) // namespace=~".*" is replaced: only a's model m series (4 + 3)
		wantEmpty(t, p, kSecret)     // the series exists only in team-b
		wantValue(t, p, kSecretB, 42)
	})
	t.Run("custom query split by model", func(t *testing.T) {
		if kSplit.Query() != kSplit2.Query() || kSplit.q != kSplit2.q {
			t.Errorf("two models of one namespace do not share the evaluation: %v vs %v", kSplit, kSplit2)
		}
		wantValue(t, p, kSplit, 7)  // a's model m: 4 + 3 (confined, never team-b's 5)
		wantValue(t, p, kSplit2, 1) // a's model m2
		wantValue(t, p, kSplitB, 5) // team-b's own
	})
	t.Run("scalar custom query", func(t *testing.T) {
		wantValue(t, p, kScalar, 4) // DCGM series of namespace a only (p1 x2, p2, p3)
	})
	t.Run("metrics", func(t *testing.T) {
		if got := testutil.ToFloat64(p.m.perRefresh); got != float64(p.Queries()) || got != 9 {
			t.Errorf("queries_per_refresh = %v, want 9 (2 preset bundles, Triton and vLLM, + 5 custom + 2 split custom)", got)
		}
		if n, err := testutil.GatherAndCount(reg, "inferscale_scaler_prom_query_duration_seconds", "inferscale_scaler_prom_snapshot_age_seconds", "inferscale_scaler_prom_subscriptions"); err != nil || n == 0 {
			t.Errorf("poller metrics not gathered: n=%d err=%v", n, err)
		}
	})

	t.Run("presets and confined queries run on this Prometheus", func(t *testing.T) {
		var queries []string
		for _, engine := range []string{EngineTriton, EngineVLLM} {
			for _, kind := range Kinds {
				q, err := PresetQuery(engine, kind, testLabels)
				if err != nil {
					t.Fatal(err)
				}
				queries = append(queries, q)
			}
			b, err := PresetBundle(engine, testLabels)
			if err != nil {
				t.Fatal(err)
			}
			queries = append(queries, b)
		}
		for _, q := range []string{
			`sum by (model) (rate(nv_inference_request_success{namespace="b",model=~"m.*"}[1m]))`,
			`max_over_time(nv_inference_pending_request_count[5m:30s] offset 1m)`,
			`a / on (pod) group_left () b{namespace=~".+"}`,
			`histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))`,
			`{__name__=~"nv_.*"} @ 1609746000`,
		} {
			c, err := Confine(q, "a", "namespace")
			if err != nil {
				t.Fatal(err)
			}
			queries = append(queries, c)
		}
		for _, q := range queries {
			if _, _, _, err := srv.API().Query(ctx, q, evalAt); err != nil {
				t.Errorf("Prometheus rejects %q: %v", q, err)
			}
		}
	})
	t.Run("series disappearing is empty", func(t *testing.T) {
		pending.DeleteLabelValues("a", "p2", "m2", "1")
		srv.WaitFor(t, `nv_inference_pending_request_count{model="m2"}`, promtest.IsEmpty, waitTimeout)
		evalAt = time.Now()
		p.Refresh(ctx)
		wantEmpty(t, p, kQueue2)
		wantValue(t, p, kQueue, 7)
	})
}

// instant evaluates q at ts on srv and returns its single value.
func instant(t *testing.T, srv *promtest.Server, ts time.Time, q string) float64 {
	t.Helper()
	v, _, _, err := srv.API().Query(context.Background(), q, ts)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 {
		t.Fatalf("query %q = %v, want one sample", q, v)
	}
	return float64(vec[0].Value)
}

// TestPollerFailures: a failing address sets Err on its keys only; the snapshot of other
// keys is kept; a held (slow) query never blocks Result; Run ends all goroutines.
func TestPollerFailures(t *testing.T) {
	exp := promtest.NewExporter(t)
	exp.Gauge("nv_inference_pending_request_count", "namespace", "model").WithLabelValues("a", "m").Set(7)
	srv := promtest.Start(t, exp.Target())
	srv.WaitFor(t, `nv_inference_pending_request_count`, promtest.HasValue(7), waitTimeout)
	proxy := promtest.NewSlowProxy(t, srv.URL(), 0)

	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL()
	cfg.QueryTimeout = 30 * time.Second
	cfg.RefreshInterval = 100 * time.Millisecond
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Namespace: "a", Kind: KindQueue, Engine: EngineTriton, Model: "m"}
	direct := subscribe(t, p, req)
	req.Address = proxy.URL()
	viaProxy := subscribe(t, p, req)

	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return p.Run(ctx) })
	defer func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// Run evaluates at once; wait for both keys' first evaluation.
	waitResult(t, p, direct, func(r Result) bool { return r.Value == 7 })
	waitResult(t, p, viaProxy, func(r Result) bool { return r.Value == 7 })

	// A query held by a slow Prometheus does not block readers: Result answers from the
	// snapshot while the proxy holds the query.
	proxy.SetDelay(time.Hour)
	waitFor(t, func() bool { return proxy.Held() > 0 })
	if got := p.Result(viaProxy); got.Value != 7 || got.Err != nil {
		t.Errorf("Result while the query is held = %+v, want the last snapshot (7)", got)
	}
	// Meanwhile the direct key keeps being refreshed: the held query does not stall the loop.
	held := p.Result(direct).EvaluatedAt
	waitResult(t, p, direct, func(r Result) bool { return r.EvaluatedAt.After(held) && r.Value == 7 })

	// Closing the proxy fails its key; the direct key keeps its value.
	proxy.Close()
	waitResult(t, p, viaProxy, func(r Result) bool { return r.Err != nil })
	if got := p.Result(direct); got.Value != 7 || got.Err != nil {
		t.Errorf("direct key after the proxy failed = %+v, want 7", got)
	}

	// Killing Prometheus fails the direct key too.
	srv.Kill()
	waitResult(t, p, direct, func(r Result) bool { return r.Err != nil })
	if got := p.Result(direct); got.Value != 0 || got.EvaluatedAt.IsZero() {
		t.Errorf("Result after kill = %+v, want Err with zero Value and EvaluatedAt set", got)
	}
}

// waitResult waits until pred accepts k's result (Run refreshes every 100 ms).
func waitResult(t *testing.T, p *Poller, k Key, pred func(Result) bool) {
	t.Helper()
	waitFor(t, func() bool { return pred(p.Result(k)) })
}

// waitFor polls cond every 20 ms up to waitTimeout.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatal("condition not met within", waitTimeout)
		case <-tick.C:
		}
	}
}

func TestForgetUnread(t *testing.T) {
	p := newTestPoller(t, "http://127.0.0.1:1")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	p.now = func() time.Time { return now }
	kRead := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Engine: EngineTriton, Model: "m"})
	kIdle := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Engine: EngineTriton, Model: "m"})
	// Two spellings of one custom query share a key; forgetting it drops both.
	kC1 := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
	kC2 := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum( x{namespace="b"} )`})
	if kC1 != kC2 {
		t.Fatalf("equivalent custom queries got keys %v and %v", kC1, kC2)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no Prometheus needed: forgetting happens before evaluation
	now = t0.Add(p.cfg.ForgetAfter / 2)
	p.Result(kRead)
	now = t0.Add(p.cfg.ForgetAfter + time.Second)
	p.Refresh(ctx)
	if got := p.Result(kIdle); !errors.Is(got.Err, ErrNotSubscribed) {
		t.Errorf("idle key after ForgetAfter: Err = %v, want ErrNotSubscribed", got.Err)
	}
	if got := p.Result(kRead); got.Err != nil {
		t.Errorf("read key after ForgetAfter: Err = %v, want still subscribed", got.Err)
	}
	if got := p.Queries(); got != 1 {
		t.Errorf("Queries = %d, want 1 (the idle keys' queries are dropped)", got)
	}
	if got := len(p.reqs); got != 1 {
		t.Errorf("cached requests = %d, want 1 (only the read key's)", got)
	}
	// Subscribing again brings it back.
	if k := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Engine: EngineTriton, Model: "m"}); k != kIdle {
		t.Errorf("re-subscribed key %v != %v", k, kIdle)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	bad := PollerConfig{DefaultAddress: "prom:9090", NamespaceLabel: "k8s-ns", PodLabel: ""}
	err := bad.Validate()
	for _, field := range []string{"DefaultAddress", "RefreshInterval", "QueryTimeout", "Concurrency", "NamespaceLabel", "PodLabel"} {
		if err == nil || !containsField(err.Error(), field) {
			t.Errorf("Validate error %v does not name %s", err, field)
		}
	}
}

// TestConfigValidateLabelClashes: the namespace and pod labels must differ from each other,
// from every preset's model label, which the presets group and join by beside them
// (--pod-label=namespace made the ready preset count 1 per pool whatever its pods), and from
// SignalLabel, which a preset bundle's label_replace writes over (the namespace of every
// series would read as a signal's name).
func TestConfigValidateLabelClashes(t *testing.T) {
	for _, tc := range []struct {
		ns, pod, want string
	}{
		{"namespace", "namespace", `PodLabel "namespace": must differ from NamespaceLabel`},
		{"model", "pod", `NamespaceLabel "model": must not be the triton preset's model label`},
		{"model_name", "pod", `NamespaceLabel "model_name": must not be the vllm preset's model label`},
		{"namespace", "model", `PodLabel "model": must not be the triton preset's model label`},
		{"namespace", "model_name", `PodLabel "model_name": must not be the vllm preset's model label`},
		{SignalLabel, "pod", `NamespaceLabel "inferscale_signal": must not be inferscale_signal, the label the preset bundles name each signal's series by`},
		{"namespace", SignalLabel, `PodLabel "inferscale_signal": must not be inferscale_signal`},
	} {
		c := DefaultConfig()
		c.NamespaceLabel, c.PodLabel = tc.ns, tc.pod
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("namespace %q, pod %q: Validate = %v, want it to say %q", tc.ns, tc.pod, err, tc.want)
		}
		if err != nil && strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("namespace %q, pod %q: Validate = %v, want one violation", tc.ns, tc.pod, err)
		}
	}
	c := DefaultConfig()
	c.NamespaceLabel, c.PodLabel = "kubernetes_namespace", "kubernetes_pod_name"
	if err := c.Validate(); err != nil {
		t.Errorf("distinct labels: Validate = %v, want nil", err)
	}
}

func containsField(msg, field string) bool {
	for i := 0; i+len(field) <= len(msg); i++ {
		if msg[i:i+len(field)] == field {
			return true
		}
	}
	return false
}

// TestEvaluatedClosesOnFirstEvaluation: the first-evaluation channel is open
// until the query's first evaluation is stored (a failing one counts), and
// closed for keys the poller does not know.
func TestEvaluatedClosesOnFirstEvaluation(t *testing.T) {
	p := newTestPoller(t, "http://127.0.0.1:1") // connection refused: evaluations fail at once
	k := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
	select {
	case <-p.Evaluated(k):
		t.Fatal("Evaluated closed before any evaluation")
	default:
	}
	p.Refresh(context.Background())
	select {
	case <-p.Evaluated(k):
	default:
		t.Fatalf("Evaluated still open after Refresh (Result %+v)", p.Result(k))
	}
	if r := p.Result(k); r.Err == nil || r.EvaluatedAt.IsZero() {
		t.Errorf("Result = %+v, want the failed first evaluation", r)
	}
	select {
	case <-p.Evaluated(Key{}):
	default:
		t.Error("Evaluated of an unknown key is open, want closed")
	}
}
