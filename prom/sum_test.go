package prom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeAnswers is a Prometheus that answers each query (by its exact text) with a result body
// the test sets; a query it does not know gets an empty vector.
type fakeAnswers struct {
	mu sync.Mutex
	by map[string]string // query → the JSON of data
}

func (f *fakeAnswers) set(query, data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.by[query] = data
}

func (f *fakeAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	data, ok := f.by[r.FormValue("query")]
	f.mu.Unlock()
	if !ok {
		data = `{"resultType":"vector","result":[]}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"status":"success","data":%s}`, data)
}

// vec is the data of a vector answer, one series per "labels=value" pair (labels as JSON).
func vec(series ...string) string {
	parts := make([]string, len(series))
	for i, s := range series {
		labels, value, _ := strings.Cut(s, "=")
		parts[i] = fmt.Sprintf(`{"metric":%s,"value":[1767225600,%q]}`, labels, value)
	}
	return `{"resultType":"vector","result":[` + strings.Join(parts, ",") + `]}`
}

// TestSumOfInvalidSeriesIsNotUsable: a vector the poller sums is summed only when every
// series is a finite number ≥ 0; one NaN, ±Inf or negative series makes the key's Err wrap
// ErrInvalidValue naming the signal, the series, its value and the accepted range (before,
// {-5, 10} read as a queue of 5 and {NaN, 10} as NaN). One series or a scalar is passed on as
// Prometheus returned it, as before, and valid vectors are summed as before. The same holds
// for the series of one model of a split custom query and of one group of a preset bundle.
func TestSumOfInvalidSeriesIsNotUsable(t *testing.T) {
	f := &fakeAnswers{by: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	var logs lockedBuffer
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL
	p, err := NewPoller(cfg, reg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const rest = ", outside the accepted range [0, +Inf) (a finite number ≥ 0), so the 2 series the query returned are not summed and the sample is not usable"
	custom := []struct {
		name   string
		kind   Kind
		data   string
		want   float64
		errMsg string // "" when Value is want
	}{
		{"negative", KindQueue, vec(`{"pod":"a"}=-5`, `{"pod":"b"}=10`), 0, `invalid value: queue: series {pod="a"} is -5` + rest},
		{"NaN", KindServiceTime, vec(`{"pod":"a"}=10`, `{"pod":"b"}=NaN`), 0, `invalid value: serviceTime: series {pod="b"} is NaN` + rest},
		{"+Inf", KindRate, vec(`{"pod":"a"}=+Inf`, `{"pod":"b"}=1`), 0, `invalid value: rate: series {pod="a"} is +Inf` + rest},
		{"-Inf", KindActivity, vec(`{"pod":"a"}=0.5`, `{"pod":"b"}=-Inf`), 0, `invalid value: activity: series {pod="b"} is -Inf` + rest},
		{"tiny negative", KindRunning, vec(`{"pod":"a"}=3`, `{"pod":"b"}=-1e-300`), 0, `invalid value: running: series {pod="b"} is -1e-300` + rest},
		{"valid", KindQueue, vec(`{"pod":"a"}=3`, `{"pod":"b"}=4`, `{"pod":"c"}=0`), 7, ""},
		{"one negative series", KindQueue, vec(`{"pod":"a"}=-5`), -5, ""},
		{"scalar", KindReady, `{"resultType":"scalar","result":[1767225600,"-2"]}`, -2, ""},
	}
	keys := make([]Key, len(custom))
	for i, c := range custom {
		q := fmt.Sprintf("q_%d", i)
		f.set(fmt.Sprintf(`q_%d{namespace="a"}`, i), c.data)
		keys[i] = subscribe(t, p, Request{Namespace: "a", Kind: c.kind, Query: q})
	}

	// A custom query split by model: model m sums two series, one negative; n is valid.
	splitQ := `sum by (model, pod) (demand)`
	f.set(`sum by (model, pod) (demand{namespace="a"})`, vec(`{"model":"m","pod":"a"}=-1`, `{"model":"m","pod":"b"}=4`, `{"model":"n","pod":"a"}=2`, `{"model":"n","pod":"b"}=3`))
	kM := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Query: splitQ, ModelLabel: "model", Model: "m"})
	kN := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Query: splitQ, ModelLabel: "model", Model: "n"})

	// A preset bundle whose (a, m, queue) group has two series, one NaN.
	bundle, err := PresetBundle(EngineTriton, Labels{Namespace: "namespace", Pod: "pod"})
	if err != nil {
		t.Fatal(err)
	}
	f.set(bundle, vec(`{"namespace":"a","model":"m","inferscale_signal":"queue","pod":"p1"}=NaN`,
		`{"namespace":"a","model":"m","inferscale_signal":"queue","pod":"p2"}=3`,
		`{"namespace":"a","model":"m","inferscale_signal":"rate","pod":"p1"}=1.5`,
		`{"namespace":"a","model":"m","inferscale_signal":"dispersion"}=NaN`))
	kBQueue := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Engine: EngineTriton, Model: "m"})
	kBRate := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Engine: EngineTriton, Model: "m"})
	kBDisp := subscribe(t, p, Request{Namespace: "a", Kind: KindDispersion, Engine: EngineTriton, Model: "m"})

	ctx := context.Background()
	p.Refresh(ctx)
	for i, c := range custom {
		got := p.Result(keys[i])
		if c.errMsg == "" {
			if got.Err != nil || got.Empty || got.Value != c.want {
				t.Errorf("%s: Result = %+v, want Value %v", c.name, got, c.want)
			}
			continue
		}
		want := fmt.Sprintf(`query %s "q_%d{namespace=\"a\"}": %s`, srv.URL, i, c.errMsg)
		if got.Err == nil || got.Err.Error() != want || !errors.Is(got.Err, ErrInvalidValue) {
			t.Errorf("%s: Result.Err = %v,\nwant %s (wrapping ErrInvalidValue)", c.name, got.Err, want)
		}
		if got.Value != 0 || got.Empty || got.EvaluatedAt.IsZero() || !got.SampleTime.IsZero() {
			t.Errorf("%s: Result = %+v, want no value, evaluated", c.name, got)
		}
	}

	got := p.Result(kM)
	wantM := `invalid value: rate: series {model="m", pod="a"} is -1, outside the accepted range [0, +Inf) (a finite number ≥ 0), so the 2 series of model "m" are not summed and the sample is not usable`
	if got.Err == nil || got.Err.Error() != wantM || !errors.Is(got.Err, ErrInvalidValue) || got.EvaluatedAt.IsZero() {
		t.Errorf("split model m: Result = %+v,\nwant Err %s", got, wantM)
	}
	wantValue(t, p, kN, 5)

	got = p.Result(kBQueue)
	wantQ := `invalid value: queue: series {inferscale_signal="queue", model="m", namespace="a", pod="p1"} is NaN, outside the accepted range [0, +Inf) (a finite number ≥ 0), so the 2 series of namespace "a", model "m" are not summed and the sample is not usable`
	if got.Err == nil || got.Err.Error() != wantQ || !errors.Is(got.Err, ErrInvalidValue) {
		t.Errorf("bundle queue: Result = %+v,\nwant Err %s", got, wantQ)
	}
	wantValue(t, p, kBRate, 1.5)
	// One series, NaN (the dispersion preset of a pool idle throughout: 0/0): passed on.
	if got := p.Result(kBDisp); got.Err != nil || got.Empty || got.Value == got.Value {
		t.Errorf("bundle dispersion: Result = %+v, want Value NaN as Prometheus returned it", got)
	}

	// Invalid values are no failed queries: the error counter stays at zero, and one WARN per
	// query says why its keys are not usable.
	if n := testutil.CollectAndCount(reg, "inferscale_scaler_prom_query_errors_total"); n != 0 {
		t.Errorf("inferscale_scaler_prom_query_errors_total has %d series, want none", n)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="prometheus query result not usable: a series it sums is NaN, ±Inf or negative, or their sum passes float64"`); n != 7 {
		t.Errorf("%d warnings of unusable results, want 7 (5 custom, the split, the bundle):\n%s", n, out)
	}
	if strings.Contains(out, "prometheus query failing") {
		t.Errorf("invalid values logged as failing queries:\n%s", out)
	}

	// The next refresh logs nothing new; once the series are valid the keys read their sums.
	p.Refresh(ctx)
	if n := strings.Count(logs.String(), `msg="prometheus query result not usable`); n != 7 {
		t.Errorf("after a second refresh %d warnings, want still 7", n)
	}
	f.set(`q_0{namespace="a"}`, vec(`{"pod":"a"}=5`, `{"pod":"b"}=10`))
	f.set(`sum by (model, pod) (demand{namespace="a"})`, vec(`{"model":"m","pod":"a"}=1`, `{"model":"m","pod":"b"}=4`))
	p.Refresh(ctx)
	wantValue(t, p, keys[0], 15)
	wantValue(t, p, kM, 5)
	if n := strings.Count(logs.String(), `msg="prometheus query result usable again"`); n != 2 {
		t.Errorf("%d 'usable again' lines, want 2:\n%s", n, logs.String())
	}
}

// TestSumPastFloat64IsNotUsable: series that are each valid but sum past the largest float64
// (two of 1e308) read +Inf with no error, which the decision dropped without a word; the key
// now has no value and an Err wrapping ErrInvalidValue that says so, for a custom query and
// for one model of a split query (the other model's sum is kept).
func TestSumPastFloat64IsNotUsable(t *testing.T) {
	f := &fakeAnswers{by: map[string]string{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL
	p, err := NewPoller(cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f.set(`q{namespace="a"}`, vec(`{"pod":"a"}=1e308`, `{"pod":"b"}=1e308`))
	k := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Query: "q"})
	splitQ := `sum by (model, pod) (demand)`
	f.set(`sum by (model, pod) (demand{namespace="a"})`, vec(`{"model":"m","pod":"a"}=1.5e308`, `{"model":"m","pod":"b"}=1e308`, `{"model":"n","pod":"a"}=1e308`, `{"model":"n","pod":"b"}=3`))
	kM := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Query: splitQ, ModelLabel: "model", Model: "m"})
	kN := subscribe(t, p, Request{Namespace: "a", Kind: KindRate, Query: splitQ, ModelLabel: "model", Model: "n"})
	p.Refresh(context.Background())

	got := p.Result(k)
	want := fmt.Sprintf(`query %s "q{namespace=\"a\"}": invalid value: rate: the 2 series the query returned sum past the largest float64 (1.7976931348623157e+308), so the sample is not usable`, srv.URL)
	if got.Err == nil || got.Err.Error() != want || !errors.Is(got.Err, ErrInvalidValue) || got.Value != 0 {
		t.Errorf("custom: Result = %+v,\nwant Err %s", got, want)
	}
	got = p.Result(kM)
	wantM := `invalid value: rate: the 2 series of model "m" sum past the largest float64 (1.7976931348623157e+308), so the sample is not usable`
	if got.Err == nil || got.Err.Error() != wantM || !errors.Is(got.Err, ErrInvalidValue) || got.Value != 0 {
		t.Errorf("split model m: Result = %+v,\nwant Err %s", got, wantM)
	}
	wantValue(t, p, kN, 1e308+3)
}
