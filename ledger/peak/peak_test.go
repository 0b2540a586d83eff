package peak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/internal/promtest"
	"github.com/inferscale/inferscale/prom"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

func TestQuery(t *testing.T) {
	tests := []struct {
		name  string
		give  Source
		want  string
		match map[string]string
	}{
		{"rateQuery confined", Source{Namespace: "ml", RateQuery: `sum(rate(gateway_requests_total{namespace="other"}[1m]))`},
			`max_over_time(((sum((sum(rate(gateway_requests_total{namespace="ml"}[1m])))) unless on () ((sum(rate(gateway_requests_total{namespace="ml"}[1m]))) < 0)) < +Inf)[1w:1m])`, nil},
		{"rateQuery of several series is summed", Source{Namespace: "ml", RateQuery: `rate(req_total[1m])`},
			`max_over_time(((sum((rate(req_total{namespace="ml"}[1m]))) unless on () ((rate(req_total{namespace="ml"}[1m])) < 0)) < +Inf)[1w:1m])`, nil},
		{"scalar rateQuery", Source{Namespace: "ml", RateQuery: `scalar(sum(rate(req_total[1m])))`},
			`max_over_time(((sum(vector(scalar(sum(rate(req_total{namespace="ml"}[1m]))))) unless on () (vector(scalar(sum(rate(req_total{namespace="ml"}[1m])))) < 0)) < +Inf)[1w:1m])`, nil},
		// The preset is one series per (namespace, model) already: kept apart, not summed.
		{"triton preset", Source{Namespace: "ml", Engine: "triton", Model: "chat"},
			`max_over_time((sum by (namespace, model) (rate(nv_inference_request_success[1m])) + sum by (namespace, model) (rate(nv_inference_request_failure[1m])))[1w:1m])`,
			map[string]string{"namespace": "ml", "model": "chat"}},
		{"vllm preset", Source{Namespace: "ml", Engine: "vllm", Model: "chat"},
			`max_over_time((sum by (namespace, model_name) (rate(vllm:request_success_total[1m])))[1w:1m])`,
			map[string]string{"namespace": "ml", "model_name": "chat"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, match, err := Query(tt.give, 7*24*time.Hour, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && q != tt.want {
				t.Errorf("query %s, want %s", q, tt.want)
			}
			if len(match) != len(tt.match) {
				t.Errorf("match %v, want %v", match, tt.match)
			}
			for k, v := range tt.match {
				if match[k] != v {
					t.Errorf("match %v, want %v", match, tt.match)
				}
			}
		})
	}
	if _, _, err := Query(Source{Namespace: "ml", Engine: "tgi"}, time.Hour, time.Minute); !errors.Is(err, prom.ErrBadRequest) {
		t.Errorf("unknown engine: %v, want ErrBadRequest", err)
	}
	if _, _, err := Query(Source{Namespace: "ml", RateQuery: "x"}, time.Minute, time.Hour); !errors.Is(err, prom.ErrBadRequest) {
		t.Errorf("step > window: %v, want ErrBadRequest", err)
	}
	if _, _, err := Query(Source{Namespace: "ml", RateQuery: "req_total[1m]"}, time.Hour, time.Minute); !errors.Is(err, prom.ErrBadQuery) || !strings.Contains(err.Error(), "returns a matrix") {
		t.Errorf("range rateQuery: %v, want ErrBadQuery naming the matrix", err)
	}
}

// TestReadSumsSeries: the scaler scales a custom rateQuery on the sum of its series, so the
// peak is the largest sum: pods at 30 and 20 req/s are a peak of 50, not 30 (the busiest
// series, as the ledger read it). A step where one series is negative is no value for the
// scaler (prom.ErrInvalidValue) and none for the peak: 200 and -100 is not a demand of 100,
// nor of 200. A scalar rateQuery is read too (a subquery of it did not parse).
func TestReadSumsSeries(t *testing.T) {
	exp := promtest.NewExporter(t)
	srv := promtest.Start(t, exp.Target())
	rps := exp.Gauge("ledger_sum_rps", "namespace", "pod")
	rps.WithLabelValues("ml", "a").Set(30)
	rps.WithLabelValues("ml", "b").Set(20)
	rps.WithLabelValues("other", "c").Set(1000) // another namespace: confined out
	// The subquery's steps are whole seconds: wait until one sees both series.
	srv.WaitFor(t, `max_over_time(sum(ledger_sum_rps{namespace="ml"})[1m:1s])`, promtest.HasValue(50), 30*time.Second)
	ctx := context.Background()
	src := Source{Namespace: "ml", ScaledObject: "chat", RateQuery: "ledger_sum_rps"}
	got, q, err := Read(ctx, srv.API(), src, time.Minute, time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got != 50 {
		t.Errorf("peak %v from %s, want 50 (30 + 20)", got, q)
	}

	rps.WithLabelValues("ml", "a").Set(200)
	rps.WithLabelValues("ml", "b").Set(-100)
	// A plain sum's peak is 100 once a step sees 200 and -100.
	srv.WaitFor(t, `max_over_time(sum(ledger_sum_rps{namespace="ml"})[1m:1s])`, promtest.HasValue(100), 30*time.Second)
	got, q, err = Read(ctx, srv.API(), src, time.Minute, time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got != 50 {
		t.Errorf("peak %v from %s with pod b at -100, want 50 (the steps with a negative series left out)", got, q)
	}

	// A step with a +Inf series is left out too (one +Inf step failed the whole window: "value
	// +Inf is not a rate"); the scaler takes no value from it either.
	rps.WithLabelValues("ml", "a").Set(math.Inf(1))
	rps.WithLabelValues("ml", "b").Set(20)
	srv.WaitFor(t, `count_over_time((ledger_sum_rps{namespace="ml",pod="a"} == +Inf)[1m:1s])`, promtest.HasValue(2), 30*time.Second)
	got, q, err = Read(ctx, srv.API(), src, time.Minute, time.Second, time.Now())
	if err != nil || got != 50 {
		t.Errorf("peak %v, %v from %s with pod a at +Inf, want 50 (those steps left out)", got, err, q)
	}
	// Finite series whose sum passes float64 are left out the same way.
	rps.WithLabelValues("ml", "a").Set(1e308)
	rps.WithLabelValues("ml", "b").Set(1e308)
	srv.WaitFor(t, `count_over_time((sum(ledger_sum_rps{namespace="ml"}) == +Inf)[1m:1s])`, promtest.HasValue(2), 30*time.Second)
	got, q, err = Read(ctx, srv.API(), src, time.Minute, time.Second, time.Now())
	if err != nil || got != 50 {
		t.Errorf("peak %v, %v from %s with two series of 1e308, want 50 (the overflowing steps left out)", got, err, q)
	}
	// Series that differ only in their metric name are summed: the filters compare with
	// numbers, not vectors (R != R had failed as many-to-many matching).
	rps.WithLabelValues("ml", "a").Set(30)
	rps.WithLabelValues("ml", "b").Set(20)
	other := exp.Gauge("ledger_sum_rps_other", "namespace", "pod")
	other.WithLabelValues("ml", "a").Set(7)
	// The subquery's steps are whole seconds: wait until one sees the three series.
	srv.WaitFor(t, `max_over_time((sum({__name__=~"ledger_sum_rps|ledger_sum_rps_other",namespace="ml"}) == 57)[1m:1s])`, promtest.HasValue(57), 30*time.Second)
	named := Source{Namespace: "ml", ScaledObject: "chat", RateQuery: `{__name__=~"ledger_sum_rps|ledger_sum_rps_other"}`}
	got, q, err = Read(ctx, srv.API(), named, time.Minute, time.Second, time.Now())
	if err != nil || got != 57 {
		t.Errorf("peak %v, %v from %s over two metric names, want 57 (30 + 20 + 7)", got, err, q)
	}
	rps.WithLabelValues("ml", "a").Set(200)
	rps.WithLabelValues("ml", "b").Set(-100)

	scalar := Source{Namespace: "ml", ScaledObject: "chat", RateQuery: "scalar(sum(ledger_sum_rps))"}
	got, q, err = Read(ctx, srv.API(), scalar, time.Minute, time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got != 100 { // the scalar's own value, 200 - 100: a scalar has no series to judge
		t.Errorf("scalar rateQuery: peak %v from %s, want 100", got, q)
	}
}

// TestReadCutsErrorType: Prometheus's error answer sets errorType and error; both are the
// server's, any size. A 4 MiB errorType was kept whole in the error, the report and the
// ConfigMap; it is cut like the message.
func TestReadCutsErrorType(t *testing.T) {
	typ := strings.Repeat("T", 4<<20)
	msg := strings.Repeat("m", 4<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"status":"error","errorType":%q,"error":%q}`, typ, msg)
	}))
	defer srv.Close()
	api, err := prom.NewLimitedAPI(srv.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Read(context.Background(), api, Source{Namespace: "ml", ScaledObject: "chat", RateQuery: "x"}, time.Hour, time.Minute, time.Now())
	var apiErr *v1.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err %v, want a *v1.Error", err)
	}
	wantType := strings.Repeat("T", maxErrorTypeBytes) + fmt.Sprintf("… (%d bytes)", len(typ))
	if string(apiErr.Type) != wantType {
		t.Errorf("errorType %d bytes (%.80q…), want %d: %q", len(apiErr.Type), apiErr.Type, len(wantType), wantType)
	}
	wantMsg := strings.Repeat("m", maxErrorMessageBytes) + fmt.Sprintf("… (%d bytes)", len(msg))
	if apiErr.Msg != wantMsg {
		t.Errorf("message %d bytes, want %d", len(apiErr.Msg), len(wantMsg))
	}
	if apiErr.Detail != "" {
		t.Errorf("detail %d bytes, want none", len(apiErr.Detail))
	}
	if n := len(err.Error()); n > 2048 {
		t.Errorf("error is %d bytes, want ≤ 2048", n)
	}
}

// TestReadAgainstPrometheus drives a request-rate gauge through a real
// Prometheus: 50 req/s, then 20; the peak over the window is 50, and a
// namespace the rate never had reads as no data, not zero.
func TestReadAgainstPrometheus(t *testing.T) {
	exp := promtest.NewExporter(t)
	srv := promtest.Start(t, exp.Target())
	rps := exp.Gauge("ledger_test_rps", "namespace")
	rps.WithLabelValues("ml").Set(50)
	src := Source{Namespace: "ml", ScaledObject: "chat", RateQuery: "ledger_test_rps"}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	lowered := false
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no peak of 50 after the rate fell to 20\n%s", srv.Logs())
		}
		v, err := srv.Query(ctx, `ledger_test_rps{namespace="ml"}`)
		if err == nil && len(v) == 1 {
			if !lowered && float64(v[0].Value) == 50 {
				rps.WithLabelValues("ml").Set(20)
				lowered = true
			}
			if lowered && float64(v[0].Value) == 20 {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	got, q, err := Read(ctx, srv.API(), src, time.Minute, time.Second, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got != 50 {
		t.Errorf("peak %v from %s, want 50", got, q)
	}
	_, _, err = Read(ctx, srv.API(), Source{Namespace: "other", RateQuery: "ledger_test_rps"}, time.Minute, time.Second, time.Now())
	if !errors.Is(err, ErrNoData) {
		t.Errorf("other namespace: %v, want ErrNoData", err)
	}
}
