package scaler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/opencost"
)

// fakeOpenCost answers OpenCost's Allocation API from a per-namespace body, in OpenCost's
// envelope, and records every query.
type fakeOpenCost struct {
	mu      sync.Mutex
	status  int               // 0: 200
	pods    map[string]string // namespace → the data set's entries (JSON object members)
	queries []url.Values
	paths   []string
	got     chan string // when set, receives each query's namespace filter
}

func (f *fakeOpenCost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.Query())
	f.paths = append(f.paths, r.URL.Path)
	status, got := f.status, f.got
	var ns string
	if _, err := fmt.Sscanf(r.URL.Query().Get("filter"), "namespace:%q", &ns); err != nil {
		ns = ""
	}
	body := `{"code":200,"data":[{` + f.pods[ns] + `}]}`
	f.mu.Unlock()
	if status != 0 && status != http.StatusOK {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"code":%d,"message":"Error: failed to query Prometheus: connection refused"}`, status)
	} else {
		fmt.Fprint(w, body)
	}
	if got != nil {
		got <- ns
	}
}

func (f *fakeOpenCost) set(status int) { f.mu.Lock(); f.status = status; f.mu.Unlock() }

func (f *fakeOpenCost) setPods(ns, pods string) { f.mu.Lock(); f.pods[ns] = pods; f.mu.Unlock() }

func (f *fakeOpenCost) recorded() ([]url.Values, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.queries...), append([]string(nil), f.paths...)
}

// ocPod is one OpenCost allocation entry (aggregate=pod).
func ocPod(ns, kind, controller, pod string, minutes, cost float64) string {
	return fmt.Sprintf(`%[1]q:{"name":%[1]q,"properties":{"cluster":"default-cluster","namespace":%[2]q,"controllerKind":%[3]q,"controller":%[4]q,"pod":%[1]q},`+
		`"window":{"start":"2026-03-01T11:00:00Z","end":"2026-03-01T12:00:00Z"},"start":"2026-03-01T11:00:00Z","end":"2026-03-01T12:00:00Z",`+
		`"minutes":%[5]v,"cpuCost":0,"gpuCost":%[6]v,"ramCost":0,"pvCost":0,"networkCost":0,"totalCost":%[6]v}`, pod, ns, kind, controller, minutes, cost)
}

// teamAPods: Deployment llm at $2 per replica-hour (3.0 over 90 min and 1.0 over 30 min),
// StatefulSet llm (same name) at $4, OpenCost's idle entry.
var teamAPods = strings.Join([]string{
	ocPod("team-a", "deployment", "llm", "llm-7d9f-a", 90, 3.0),
	ocPod("team-a", "deployment", "llm", "llm-7d9f-b", 30, 1.0),
	ocPod("team-a", "statefulset", "llm", "llm-0", 60, 4.0),
	`"__idle__":{"name":"__idle__","properties":{"cluster":"default-cluster"},"minutes":60,"totalCost":100}`,
}, ",")

// openCostHarness is the server harness with OpenCost on: triggers team-a/pool (Deployment
// llm, no gpuHourPrice), team-a/sts (StatefulSet llm), team-a/priced (Deployment llm with
// gpuHourPrice 2.5) and team-b/priced (gpuHourPrice only), all at 14 desired replicas.
type openCostHarness struct {
	*harness
	oc     *fakeOpenCost
	prices *openCostPrices
	addr   string
	logs   *syncBuffer
}

func newOpenCostHarness(t *testing.T) *openCostHarness {
	t.Helper()
	known := func(kind string) Target {
		return Target{MinReplicas: 0, MaxReplicas: 100, Workload: Workload{Kind: kind, Name: "llm"}}
	}
	h := newHarness(t, fakeTargets{
		"team-a/pool": known("deployment"), "team-a/sts": known("statefulset"),
		"team-a/priced": known("deployment"), "team-b/priced": known("deployment"),
	})
	oc := &fakeOpenCost{pods: map[string]string{"team-a": teamAPods}}
	srv := httptest.NewServer(oc)
	t.Cleanup(srv.Close)
	addr := srv.URL + "/?token=s3cret"
	client, err := opencost.New(opencost.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p := newOpenCostPrices(client, time.Hour, 10*time.Minute, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	p.now = h.clock.now
	h.srv.prices = p
	h.reg.MustRegister(newCostCollector(newDecisionCollector(h.srv)), p.failures, p.refused)
	for _, ns := range []string{"team-a", "team-b"} {
		h.sig.set(ns, prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
		h.sig.set(ns, prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: t0})
		h.sig.set(ns, prom.KindVerified, prom.Result{Value: 0.5, EvaluatedAt: t0})
	}
	verified := "verifiedQuery"
	for _, r := range []*pb.ScaledObjectRef{
		ref("team-a", "pool", retryMeta(verified, `sum(rate(eval_passed_total[5m]))`)),
		ref("team-a", "sts", retryMeta(verified, `sum(rate(eval_passed_total[5m]))`)),
		ref("team-a", "priced", retryMeta("gpuHourPrice", "2.5", verified, `sum(rate(eval_passed_total[5m]))`)),
		ref("team-b", "priced", retryMeta("gpuHourPrice", "2.5")),
	} {
		if mv, err := h.metrics(t, r); err != nil || mv.MetricValue != 14 {
			t.Fatalf("GetMetrics %s/%s = %v, %v; want 14", r.Namespace, r.Name, mv, err)
		}
	}
	return &openCostHarness{harness: h, oc: oc, prices: p, addr: srv.URL, logs: logs}
}

// scrape reads /metrics through the scaler's real handler.
func (h *openCostHarness) scrape(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(metricsHandler(h.reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func series(name, ns, so string, meta map[string]string, extra string, v float64) string {
	return fmt.Sprintf(`inferscale_scaler_%s{metric=%q,namespace=%q,scaledobject=%q%s} %v`, name, MetricName(ns, so, meta), ns, so, extra, v)
}

// per1k is the cost per 1,000 verified results at 0.5 per second (1,800 per hour) of a
// cost rate per hour, in float64 arithmetic (a constant expression would be exact).
func per1k(ratePerHour float64) float64 { return ratePerHour / 1800 * 1000 }

var verifiedKV = []string{"verifiedQuery", `sum(rate(eval_passed_total[5m]))`}

// OpenCost prices the triggers without gpuHourPrice: the Deployment llm at $2 per
// replica-hour (4.0 over two pod-hours), the StatefulSet of the same name at $4; 14 desired
// replicas cost 28 and 56 per hour, and with 0.5 verified results per second (1,800 per
// hour) 28 ÷ 1,800 × 1,000 per 1,000. The trigger with gpuHourPrice keeps 2.5 (the metadata
// wins: never both, never summed), and team-b, which has only a metadata price, is never
// queried. One query per namespace per refresh, the documented one.
func TestOpenCostPricesThroughMetrics(t *testing.T) {
	h := newOpenCostHarness(t)
	h.srv.Refresh(t0)
	if len(h.prices.kick) != 1 {
		t.Errorf("a namespace needing a price for the first time does not wake the loop")
	}
	h.prices.refreshOnce(context.Background(), false)

	queries, paths := h.oc.recorded()
	want := url.Values{"window": {"1h"}, "aggregate": {"pod"}, "accumulate": {"true"}, "filter": {`namespace:"team-a"`}, "token": {"s3cret"}}
	if len(queries) != 1 || paths[0] != "/allocation" || fmt.Sprint(queries[0]) != fmt.Sprint(want) {
		t.Fatalf("OpenCost got %v at %v; want one query %v at /allocation", queries, paths, want)
	}

	body := h.scrape(t)
	pool := retryMeta(verifiedKV...)
	priced := retryMeta("gpuHourPrice", "2.5", verifiedKV[0], verifiedKV[1])
	for _, w := range []string{
		series("replica_hour_price", "team-a", "pool", pool, `,source="opencost"`, 2),
		series("replica_hour_price", "team-a", "sts", pool, `,source="opencost"`, 4),
		series("replica_hour_price", "team-a", "priced", priced, `,source="gpuHourPrice"`, 2.5),
		series("replica_hour_price", "team-b", "priced", retryMeta("gpuHourPrice", "2.5"), `,source="gpuHourPrice"`, 2.5),
		series("cost_per_hour", "team-a", "pool", pool, "", 28),
		series("cost_per_hour", "team-a", "sts", pool, "", 56),
		series("cost_per_hour", "team-a", "priced", priced, "", 35),
		series("cost_per_thousand_verified_results", "team-a", "pool", pool, "", per1k(28)),
		series("cost_per_thousand_verified_results", "team-a", "sts", pool, "", per1k(56)),
		series("cost_per_thousand_verified_results", "team-a", "priced", priced, "", per1k(35)),
		"inferscale_scaler_opencost_refresh_failures_total 0",
	} {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	if n := strings.Count(body, "inferscale_scaler_replica_hour_price{"); n != 4 {
		t.Errorf("%d replica_hour_price series, want 4 (one per trigger, one source each)", n)
	}
	if strings.Contains(body, "s3cret") {
		t.Errorf("/metrics shows OpenCost's token")
	}
}

// A namespace's prices last 3 refresh intervals past their last good answer: OpenCost
// failing counts every failed refresh, logs the failure once, keeps the price until it is
// 30 minutes old, then drops it (absent) and logs the drop once, with the address redacted.
// The metadata price is untouched; a good answer brings the price back. The count of refused
// controllers goes with the dropped answer (it stayed at the dropped answer's count).
func TestOpenCostStalePriceDropped(t *testing.T) {
	h := newOpenCostHarness(t)
	h.srv.Refresh(t0)
	ctx := context.Background()
	h.prices.refreshOnce(ctx, false)
	pool := retryMeta(verifiedKV...)
	price := series("replica_hour_price", "team-a", "pool", pool, `,source="opencost"`, 2)
	const refused = `inferscale_scaler_opencost_refused_controllers{namespace="team-a"} 0`

	h.oc.set(http.StatusInternalServerError)
	for _, m := range []time.Duration{10, 20, 30} {
		h.clock.set(t0.Add(m * time.Minute))
		h.prices.refreshOnce(ctx, false)
	}
	body := h.scrape(t)
	if !strings.Contains(body, price+"\n") || !strings.Contains(body, "inferscale_scaler_opencost_refresh_failures_total 3\n") || !strings.Contains(body, refused+"\n") {
		t.Errorf("at 30 minutes (3 refreshes): want the price kept, 3 failures and the refused count kept:\n%s", grepLines(body, "replica_hour_price", "opencost_refresh", "refused"))
	}
	h.clock.set(t0.Add(30*time.Minute + time.Second))
	if n, err := testutil.GatherAndCount(h.reg, "inferscale_scaler_replica_hour_price"); err != nil || n != 2 {
		t.Errorf("past 30 minutes: %d price series (%v), want 2 (the gpuHourPrice ones)", n, err)
	}
	for _, m := range []time.Duration{40, 50} {
		h.clock.set(t0.Add(m * time.Minute))
		h.prices.refreshOnce(ctx, false)
	}
	body = h.scrape(t)
	if strings.Contains(body, `source="opencost"`) || strings.Contains(body, `scaledobject="pool"} 28`) || strings.Contains(body, "opencost_refused_controllers{") {
		t.Errorf("stale: OpenCost's price, its cost or its refused count still exported:\n%s", grepLines(body, "replica_hour_price", "cost_per_hour", "refused"))
	}
	if !strings.Contains(body, series("cost_per_hour", "team-a", "priced", retryMeta("gpuHourPrice", "2.5", verifiedKV[0], verifiedKV[1]), "", 35)+"\n") ||
		!strings.Contains(body, "inferscale_scaler_opencost_refresh_failures_total 5\n") {
		t.Errorf("stale: want the metadata-priced cost kept and 5 failures:\n%s", grepLines(body, "cost_per_hour", "opencost_refresh"))
	}
	logs := h.logs.String()
	if n := strings.Count(logs, "OpenCost refresh failed"); n != 1 {
		t.Errorf("failure logged %d times, want once per episode:\n%s", n, logs)
	}
	if n := strings.Count(logs, "OpenCost prices dropped: no successful refresh for 30m0s"); n != 1 {
		t.Errorf("drop logged %d times, want once per episode:\n%s", n, logs)
	}
	if !strings.Contains(logs, `opencostAddress="`+h.addr+`/?token=xxxxx"`) || strings.Contains(logs, "s3cret") {
		t.Errorf("logs do not show the redacted address:\n%s", logs)
	}

	h.oc.set(http.StatusOK)
	h.clock.set(t0.Add(time.Hour))
	h.prices.refreshOnce(ctx, false)
	if body := h.scrape(t); !strings.Contains(body, price+"\n") || !strings.Contains(body, refused+"\n") || !strings.Contains(h.logs.String(), "OpenCost refresh succeeded again") {
		t.Errorf("recovered: want the price and the refused count back and the recovery logged:\n%s", grepLines(body, "replica_hour_price", "refused"))
	}
}

// An entry OpenCost answers and the price refuses (a pod's negative totalCost) is logged at
// WARN once when its controller starts being refused, at DEBUG on each refresh that still
// refuses it, and at INFO once an answer accepts it again (one line each, with the count and
// the names); it was logged at WARN on every refresh. inferscale_scaler_opencost_refused_controllers counts it meanwhile, and the
// controller has no price (the rest of the namespace keeps theirs).
func TestOpenCostRefusedEntryLoggedOncePerEpisode(t *testing.T) {
	h := newOpenCostHarness(t)
	logs := &syncBuffer{}
	h.prices.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.srv.Refresh(t0)
	ctx := context.Background()
	h.prices.refreshOnce(ctx, false)
	pool := retryMeta(verifiedKV...)
	poolPrice := series("replica_hour_price", "team-a", "pool", pool, `,source="opencost"`, 2)
	stsPrice := series("replica_hour_price", "team-a", "sts", pool, `,source="opencost"`, 4)
	refused := func(n int) string {
		return fmt.Sprintf(`inferscale_scaler_opencost_refused_controllers{namespace="team-a"} %d`, n)
	}
	if body := h.scrape(t); !strings.Contains(body, poolPrice+"\n") || !strings.Contains(body, refused(0)+"\n") {
		t.Fatalf("before: want the pool priced and no refused controller:\n%s", grepLines(body, "replica_hour_price", "refused"))
	}

	h.oc.setPods("team-a", strings.Join([]string{
		ocPod("team-a", "deployment", "llm", "llm-7d9f-a", 90, 3.0),
		ocPod("team-a", "deployment", "llm", "llm-7d9f-b", 30, -1),
		ocPod("team-a", "statefulset", "llm", "llm-0", 60, 4.0),
	}, ","))
	for _, m := range []time.Duration{10, 20, 30} {
		h.clock.set(t0.Add(m * time.Minute))
		h.prices.refreshOnce(ctx, false)
		body := h.scrape(t)
		if strings.Contains(body, `scaledobject="pool",source="opencost"`) || !strings.Contains(body, stsPrice+"\n") || !strings.Contains(body, refused(1)+"\n") {
			t.Errorf("refused at %v: want the pool unpriced, the StatefulSet at 4, one refused controller:\n%s", m*time.Minute, grepLines(body, "replica_hour_price", "refused"))
		}
	}
	h.oc.setPods("team-a", teamAPods)
	h.clock.set(t0.Add(40 * time.Minute))
	h.prices.refreshOnce(ctx, false)
	if body := h.scrape(t); !strings.Contains(body, poolPrice+"\n") || !strings.Contains(body, refused(0)+"\n") {
		t.Errorf("accepted again: want the pool priced at 2 and no refused controller:\n%s", grepLines(body, "replica_hour_price", "refused"))
	}

	where := ` opencostAddress="` + h.addr + `/?token=xxxxx" namespace=team-a count=1 controllers="deployment team-a/llm"`
	cause := " err=" + strconv.Quote(`opencost: deployment team-a/llm: pod "llm-7d9f-b": totalCost -1: must be ≥ 0`)
	want := []string{
		`level=WARN msg="OpenCost entries refused: no price for these controllers"` + where + cause,
		`level=DEBUG msg="OpenCost entries still refused: no price for these controllers"` + where + cause,
		`level=DEBUG msg="OpenCost entries still refused: no price for these controllers"` + where + cause,
		`level=INFO msg="OpenCost entries no longer refused"` + where + " priced=1",
	}
	var got []string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if i := strings.Index(l, " level="); i >= 0 && strings.Contains(l, "OpenCost entries") {
			got = append(got, l[i+1:]) // without the time
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("OpenCost entry logs (-want +got):\n%s", d)
	}
}

// A trigger's scale target unknown (no Kubernetes, or a target that is not an apps/v1
// Deployment or StatefulSet): no OpenCost price, and its namespace is not queried.
func TestOpenCostNeedsAKnownTarget(t *testing.T) {
	h := newHarness(t, nil)
	oc := &fakeOpenCost{pods: map[string]string{"team-a": teamAPods}}
	srv := httptest.NewServer(oc)
	defer srv.Close()
	client, err := opencost.New(opencost.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	h.srv.prices = newOpenCostPrices(client, time.Hour, 10*time.Minute, nil)
	h.reg.MustRegister(newCostCollector(newDecisionCollector(h.srv)))
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	if _, err := h.metrics(t, ref("team-a", "pool", retryMeta())); err != nil {
		t.Fatal(err)
	}
	h.srv.Refresh(t0)
	h.srv.prices.refreshOnce(context.Background(), false)
	if q, _ := oc.recorded(); len(q) != 0 {
		t.Errorf("OpenCost queried %v without a known scale target", q)
	}
	if n, err := testutil.GatherAndCount(h.reg, "inferscale_scaler_replica_hour_price", "inferscale_scaler_cost_per_hour"); err != nil || n != 0 {
		t.Errorf("%d cost series (%v), want none", n, err)
	}
	for in, want := range map[[3]string]Workload{
		{"apps/v1", "Deployment", "llm"}:         {"deployment", "llm"},
		{"apps/v1", "StatefulSet", "llm"}:        {"statefulset", "llm"},
		{"argoproj.io/v1alpha1", "Rollout", "r"}: {},
		{"apps/v1beta1", "Deployment", "llm"}:    {},
	} {
		if got := workloadOf(in[0], in[1], in[2]); got != want {
			t.Errorf("workloadOf%v = %v, want %v", in, got, want)
		}
	}
}

// The loop queries a namespace that needs a price for the first time at once (not a refresh
// interval later), and only that namespace.
func TestOpenCostLoopQueriesNewNamespace(t *testing.T) {
	got := make(chan string, 4)
	oc := &fakeOpenCost{pods: map[string]string{"team-a": teamAPods}, got: got}
	srv := httptest.NewServer(oc)
	defer srv.Close()
	client, err := opencost.New(opencost.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	p := newOpenCostPrices(client, time.Hour, time.Hour, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	p.want(map[string]map[opencost.Controller]struct{}{"team-a": {{Namespace: "team-a", Kind: "deployment", Name: "llm"}: {}}})
	select {
	case ns := <-got:
		if ns != "team-a" {
			t.Errorf("queried %q, want team-a", ns)
		}
	case <-time.After(30 * time.Second): // a bound on a failing test, not a timing assertion
		t.Fatal("no query for a namespace that needs a price")
	}
}

// serve with --opencost-address: the failure counter is on the real /metrics, and a
// gpuHourPrice trigger's price says its source. Without Kubernetes the start-up says that
// no trigger can be priced by OpenCost.
func TestOpenCostThroughServe(t *testing.T) {
	oc := &fakeOpenCost{pods: map[string]string{}}
	ocs := httptest.NewServer(oc)
	defer ocs.Close()
	gl, hl, cfg := serveConfig(t)
	cfg.PrometheusAddress = "http://prometheus:9090"
	cfg.OpenCostAddress = ocs.URL + "/?token=s3cret"
	var logs syncBuffer
	log, err := NewLogger(cfg, &logs)
	if err != nil {
		t.Fatal(err)
	}
	sig := newFakeSignals()
	sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: time.Now()})
	sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 10, EvaluatedAt: time.Now()})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, cfg, log, gl, hl, sig) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	conn, c := dial(t, gl.Addr().String())
	defer conn.Close()
	meta := retryMeta("gpuHourPrice", "2.5", "staleAfter", "10m")
	waitValue(t, c, ref("team-a", "pool", meta), 14, 30*time.Second)
	resp, err := http.Get("http://" + hl.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range []string{
		series("replica_hour_price", "team-a", "pool", meta, `,source="gpuHourPrice"`, 2.5),
		series("cost_per_hour", "team-a", "pool", meta, "", 35),
		"inferscale_scaler_opencost_refresh_failures_total 0",
	} {
		if !strings.Contains(string(b), w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	if out := logs.String(); !strings.Contains(out, "no trigger's scale target is known") || strings.Contains(out, "s3cret") {
		t.Errorf("logs: want the no-Kubernetes warning, the address redacted:\n%s", out)
	}
}

// grepLines returns body's lines containing any of subs (for failure messages).
func grepLines(body string, subs ...string) string {
	var out []string
	for l := range strings.SplitSeq(body, "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// OpenCost's price of a replica-hour is held to gpuHourPrice's range (0, 1e9]: totalCost 1e307
// over 30 pod-minutes exported a price of 2e307 and a cost rate saturated at 1.8e308 with no
// word, and totalCost 0 a free replica-hour. Either is a refused entry: the Deployment has no
// price and no cost series, the refusal is logged naming the controller and the range and
// counted, and the StatefulSet keeps its price.
func TestOpenCostPriceOutOfRangeRefused(t *testing.T) {
	tests := []struct {
		name  string
		cost  float64
		price string
	}{
		{"2e307 per replica-hour", 1e307, "2e+307"},
		{"free", 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newOpenCostHarness(t)
			h.oc.setPods("team-a", ocPod("team-a", "deployment", "llm", "llm-a", 30, tt.cost)+","+ocPod("team-a", "statefulset", "llm", "llm-0", 60, 4))
			h.srv.Refresh(t0)
			h.prices.refreshOnce(context.Background(), false)
			body := h.scrape(t)
			pool := retryMeta(verifiedKV...)
			if strings.Contains(body, `scaledobject="pool",source="opencost"`) || strings.Contains(body, `inferscale_scaler_cost_per_hour{metric="`+MetricName("team-a", "pool", pool)) ||
				!strings.Contains(body, series("replica_hour_price", "team-a", "sts", pool, `,source="opencost"`, 4)+"\n") ||
				!strings.Contains(body, `inferscale_scaler_opencost_refused_controllers{namespace="team-a"} 1`+"\n") {
				t.Errorf("want the Deployment unpriced, the StatefulSet at 4, one refused controller:\n%s", grepLines(body, "replica_hour_price", "cost_per", "refused"))
			}
			want := `level=WARN msg="OpenCost entries refused: no price for these controllers" opencostAddress="` + h.addr + `/?token=xxxxx" namespace=team-a count=1 controllers="deployment team-a/llm" err=` +
				strconv.Quote(`opencost: deployment team-a/llm: price `+tt.price+` per replica-hour (Σ totalCost ÷ (Σ minutes ÷ 60) over 30 pod-minutes): must be in (0, 1e9], gpuHourPrice's range`)
			if !strings.Contains(h.logs.String(), want) {
				t.Errorf("logs lack %s:\n%s", want, h.logs.String())
			}
		})
	}
}

// Of an OpenCost answer only the prices of the controllers the triggers price (their scale
// targets) are kept: every controller of every answer was, so memory grew with the answers.
// A controller a trigger targets for the first time in a namespace already queried is
// queried at once.
func TestOpenCostKeepsOnlyWantedControllers(t *testing.T) {
	h := newOpenCostHarness(t)
	var b strings.Builder
	b.WriteString(teamAPods)
	for i := range 5000 {
		fmt.Fprintf(&b, ",%s", ocPod("team-a", "deployment", fmt.Sprintf("other-%d", i), fmt.Sprintf("other-%d-a", i), 60, 1))
	}
	h.oc.setPods("team-a", b.String())
	h.srv.Refresh(t0)
	h.prices.refreshOnce(context.Background(), false)
	h.prices.mu.Lock()
	got := h.prices.byNS["team-a"].prices
	h.prices.mu.Unlock()
	want := map[opencost.Controller]float64{
		{Namespace: "team-a", Kind: "deployment", Name: "llm"}:  2,
		{Namespace: "team-a", Kind: "statefulset", Name: "llm"}: 4,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("prices kept of an answer with 5,002 controllers (-want +got):\n%s", d)
	}
	<-h.prices.kick // the first Refresh's: team-a had never been queried
	h.srv.Refresh(t0)
	if len(h.prices.kick) != 0 {
		t.Fatal("the loop is woken with every wanted controller covered")
	}
	// A trigger targeting other-7 appears: its namespace is queried again at once.
	h.prices.want(map[string]map[opencost.Controller]struct{}{"team-a": {
		{Namespace: "team-a", Kind: "deployment", Name: "llm"}:     {},
		{Namespace: "team-a", Kind: "deployment", Name: "other-7"}: {},
	}})
	if len(h.prices.kick) != 1 {
		t.Fatal("a newly wanted controller does not wake the loop")
	}
	h.prices.refreshOnce(context.Background(), true)
	if v, ok := h.prices.price(opencost.Controller{Namespace: "team-a", Kind: "deployment", Name: "other-7"}, t0); !ok || v != 1 {
		t.Errorf("other-7 after the wake-up: %v, %v; want 1", v, ok)
	}
	if q, _ := h.oc.recorded(); len(q) != 2 {
		t.Errorf("%d queries, want 2 (the refresh, then the wake-up for other-7)", len(q))
	}
}

// Refused controllers are logged in one line per refresh, for the controllers triggers need:
// an answer with 20,000 refused controllers wrote 20,000 WARN lines. Here the two scale
// targets are refused among 20,000 others: one WARN line with the count and both names.
func TestOpenCostRefusedLoggedInOneLine(t *testing.T) {
	h := newOpenCostHarness(t)
	var b strings.Builder
	b.WriteString(ocPod("team-a", "deployment", "llm", "llm-a", 60, -1) + "," + ocPod("team-a", "statefulset", "llm", "llm-0", 60, -1))
	for i := range 20000 {
		fmt.Fprintf(&b, `,"p%d":{"name":"p%d","properties":{"namespace":"team-a","controllerKind":"deployment","controller":"c%d","pod":"p%d"},"minutes":null,"totalCost":1}`, i, i, i, i)
	}
	h.oc.setPods("team-a", b.String())
	h.srv.Refresh(t0)
	h.prices.refreshOnce(context.Background(), false)
	var lines []string
	for l := range strings.SplitSeq(h.logs.String(), "\n") {
		if strings.Contains(l, "OpenCost entr") {
			lines = append(lines, l)
		}
	}
	want := `level=WARN msg="OpenCost entries refused: no price for these controllers" opencostAddress="` + h.addr + `/?token=xxxxx" namespace=team-a count=2 controllers="deployment team-a/llm, statefulset team-a/llm" err=`
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("log lines %q, want one containing %q", lines, want)
	}
	if body := h.scrape(t); !strings.Contains(body, `inferscale_scaler_opencost_refused_controllers{namespace="team-a"} 2`+"\n") {
		t.Errorf("refused count: want 2 (the scale targets):\n%s", grepLines(body, "refused"))
	}
	var cs []opencost.Controller
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		cs = append(cs, opencost.Controller{Namespace: "team-a", Kind: "deployment", Name: name})
	}
	if got, want := controllerList(cs), "deployment team-a/a, deployment team-a/b, deployment team-a/c and 2 more"; got != want {
		t.Errorf("controllerList = %q, want %q", got, want)
	}
}
