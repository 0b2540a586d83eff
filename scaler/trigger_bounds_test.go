package scaler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
)

// staleAfter below 2 × --refresh-interval flapped the trigger between a value and Unavailable
// (4s at a 5s refresh), and 1ns read every valid value as "never": it is refused, on every
// RPC, naming both values and the accepted range. The harness refreshes every 5s.
func TestStaleAfterBelowTwoRefreshesRefused(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 5, EvaluatedAt: t0})
	for _, v := range []string{"1ns", "1s", "4s", "9.999s"} {
		r := ref("team-a", "pool", queueMeta("staleAfter", v))
		want := fmt.Sprintf(`staleAfter must be a duration in [10s, 1h] (at least 2 × the scaler's --refresh-interval 5s) (a Go duration such as "30s"), got %q`, v)
		_, err := h.client.GetMetricSpec(ctx, r)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) {
			t.Errorf("staleAfter %s: GetMetricSpec %v, want InvalidArgument containing %q", v, err, want)
		}
		if _, err := h.client.IsActive(ctx, r); status.Code(err) != codes.InvalidArgument {
			t.Errorf("staleAfter %s: IsActive %v, want InvalidArgument", v, err)
		}
	}
	// The floor itself is accepted and answers the queue.
	if mv, err := h.metrics(t, ref("team-a", "pool", queueMeta("staleAfter", "10s"))); err != nil || mv.MetricValue != 5 {
		t.Errorf("staleAfter 10s: %v %v, want 5", mv, err)
	}
}

// Without staleAfter the default is 60s, or 2 × --refresh-interval when that is longer.
func TestStaleAfterDefaultFollowsRefresh(t *testing.T) {
	meta := queueMeta()
	for _, tt := range []struct {
		refresh, want time.Duration
	}{
		{0, time.Minute},
		{5 * time.Second, time.Minute},
		{10 * time.Minute, 20 * time.Minute},
	} {
		p, err := ParseMetadata(meta, Defaults{PrometheusAddress: "http://prometheus:9090", RefreshInterval: tt.refresh})
		if err != nil || p.StaleAfter != tt.want {
			t.Errorf("refresh %v: staleAfter %v %v, want %v", tt.refresh, p.StaleAfter, err, tt.want)
		}
	}
}

// A bad trigger is InvalidArgument naming its key even when the scaler is full; a good one past
// the limit is still ResourceExhausted and subscribes nothing.
func TestBadTriggerWhenFullIsInvalidArgument(t *testing.T) {
	h := newHarnessConfig(t, nil, func(c *ServerConfig) { c.MaxTriggers = 2 })
	ctx := context.Background()
	for i := range 2 {
		if _, err := h.client.GetMetricSpec(ctx, ref("team-a", fmt.Sprintf("pool-%d", i), queueMeta())); err != nil {
			t.Fatal(err)
		}
	}
	subs := func() int { h.sig.mu.Lock(); defer h.sig.mu.Unlock(); return len(h.sig.subs) }
	subscribed := subs()
	_, err := h.client.GetMetricSpec(ctx, ref("team-a", "typo", map[string]string{"queueQuery": "up"}))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "serviceTimeQuery or replicaThroughput is required") {
		t.Errorf("bad trigger on a full scaler: %v, want InvalidArgument naming replicaThroughput", err)
	}
	if _, err := h.client.GetMetricSpec(ctx, ref("team-a", "pool-2", queueMeta())); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("good trigger on a full scaler: %v, want ResourceExhausted", err)
	}
	if got := subs(); got != subscribed {
		t.Errorf("refused triggers subscribed %d queries", got-subscribed)
	}
}

// prometheusAddress present but empty says so, whether or not the scaler has an address.
func TestEmptyPrometheusAddress(t *testing.T) {
	meta := queueMeta("prometheusAddress", " ")
	for _, tt := range []struct {
		defaults Defaults
		want     string
	}{
		{Defaults{PrometheusAddress: "http://prometheus:9090"}, "prometheusAddress is empty: remove the key to use the scaler's --prometheus-address, or give an http or https URL"},
		{Defaults{}, "prometheusAddress is empty: give an http or https URL (the scaler has no --prometheus-address)"},
	} {
		_, err := ParseMetadata(meta, tt.defaults)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "is required") {
			t.Errorf("defaults %+v: %v, want %q", tt.defaults, err, tt.want)
		}
	}
	// Absent, the scaler's address is used; absent without one, it is required.
	if p, err := ParseMetadata(queueMeta(), Defaults{PrometheusAddress: "http://prometheus:9090"}); err != nil || p.PrometheusAddress != "http://prometheus:9090" {
		t.Errorf("absent: %q %v", p.PrometheusAddress, err)
	}
}

// replicaThroughput and drainSeconds divide: a denormal answered maxReplicas without a word.
func TestThroughputAndDrainLowerBounds(t *testing.T) {
	for _, tt := range []struct {
		key, give, want string
	}{
		{"replicaThroughput", "5e-324", "replicaThroughput must be a number ≥ 1e-6 (requests per second), got \"5e-324\""},
		{"replicaThroughput", "9.9e-7", "replicaThroughput must be a number ≥ 1e-6 (requests per second), got \"9.9e-7\""},
		{"drainSeconds", "5e-324", "drainSeconds must be a number of seconds ≥ 0.1, got \"5e-324\""},
		{"drainSeconds", "0.09", "drainSeconds must be a number of seconds ≥ 0.1, got \"0.09\""},
	} {
		_, err := ParseMetadata(queueMeta(tt.key, tt.give), testDefaults)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: %v, want %q", tt.key, tt.give, err, tt.want)
		}
	}
	p, err := ParseMetadata(queueMeta("replicaThroughput", "1e-6", "drainSeconds", "0.1"), testDefaults)
	if err != nil || p.ReplicaThroughput != 1e-6 || p.DrainSeconds != 0.1 {
		t.Errorf("the bounds themselves: %v %v %v", p.ReplicaThroughput, p.DrainSeconds, err)
	}
}

// A cost per 1,000 verified results that does not fit a float64 (verifiedQuery 1e-300 with
// gpuHourPrice 1e9: +Inf) is not exported, and that is logged once per episode, not dropped
// without a word; the verified rate is still exported, and the series returns with the ratio.
func TestCostPerVerifiedNotFiniteLogged(t *testing.T) {
	h := newHarness(t, nil)
	var logs syncBuffer
	h.srv.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h.reg.MustRegister(newCostCollector(newDecisionCollector(h.srv)))
	h.sig.set("team-a", prom.KindRate, prom.Result{Value: 30, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindUniqueRate, prom.Result{Value: 30, EvaluatedAt: t0})
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 1e-300, EvaluatedAt: t0})
	meta := retryMeta("gpuHourPrice", "1e9", "verifiedQuery", "vector(1e-300)")
	if _, err := h.metrics(t, ref("team-a", "pool", meta)); err != nil {
		t.Fatal(err)
	}
	count := func(name string) int {
		n, err := testutil.GatherAndCount(h.reg, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const warn = "cost per 1,000 verified results not exported"
	for range 3 { // three scrapes, one line
		if n, v := count("inferscale_scaler_cost_per_thousand_verified_results"), count("inferscale_scaler_verified_results_rate"); n != 0 || v != 1 {
			t.Fatalf("cost per 1,000: %d series, verified rate %d; want 0 and 1", n, v)
		}
	}
	if got := strings.Count(logs.String(), warn); got != 1 {
		t.Errorf("%d warnings %q, want 1:\n%s", got, warn, logs.String())
	}
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 0.5, EvaluatedAt: t0})
	if n := count("inferscale_scaler_cost_per_thousand_verified_results"); n != 1 {
		t.Errorf("verified 0.5: %d series, want 1", n)
	}
	if !strings.Contains(logs.String(), "cost per 1,000 verified results exported again") {
		t.Errorf("no end of episode logged:\n%s", logs.String())
	}
	h.sig.set("team-a", prom.KindVerified, prom.Result{Value: 1e-300, EvaluatedAt: t0})
	count("inferscale_scaler_cost_per_thousand_verified_results")
	if got := strings.Count(logs.String(), warn); got != 2 {
		t.Errorf("second episode: %d warnings, want 2", got)
	}
}
