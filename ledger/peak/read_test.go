package peak

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/prom"
)

// stubAPI answers every Query with value and err; the rest of v1.API is left unimplemented.
type stubAPI struct {
	v1.API
	value model.Value
	err   error
}

func (s stubAPI) Query(context.Context, string, time.Time, ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	return s.value, nil, nil, s.err
}

// sample is a vector sample of v with the label pairs kv.
func sample(v float64, kv ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i < len(kv); i += 2 {
		m[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

// TestReadAnswers: what Read makes of Prometheus's answer, without a Prometheus. A preset's
// answer is one series per (namespace, model): the group of the source's namespace and model
// is its peak (the largest, should several match); a rateQuery's series are all the
// source's. A peak of 0 and one of ledger.MaxRPS are peaks; a value past MaxRPS, negative,
// NaN or infinite is no rate, and an answer without a sample is ErrNoData, not 0.
func TestReadAnswers(t *testing.T) {
	triton := Source{Namespace: "ml", ScaledObject: "chat", Engine: "triton", Model: "chat"}
	custom := Source{Namespace: "ml", ScaledObject: "chat", RateQuery: "req_rate"}
	tests := []struct {
		name    string
		src     Source
		answer  model.Value
		want    float64
		wantErr string // "" for a peak
	}{
		{"preset: the source's group", triton, model.Vector{
			sample(5, "namespace", "ml", "model", "chat"),
			sample(100, "namespace", "ml", "model", "other"),
			sample(200, "namespace", "other", "model", "chat"),
			sample(300, "model", "chat"),
		}, 5, ""},
		{"preset: the largest of the groups that match", triton, model.Vector{
			sample(5, "namespace", "ml", "model", "chat", "pod", "a"),
			sample(7, "namespace", "ml", "model", "chat", "pod", "b"),
			sample(6, "namespace", "ml", "model", "chat", "pod", "c"),
		}, 7, ""},
		{"preset: no group matches", triton, model.Vector{sample(5, "namespace", "ml", "model", "other")}, 0, "no samples for ml/chat"},
		{"rateQuery: a peak of 0", custom, model.Vector{sample(0)}, 0, ""},
		{"rateQuery: the largest sample", custom, model.Vector{sample(3), sample(9), sample(4)}, 9, ""},
		{"rateQuery: MaxRPS", custom, model.Vector{sample(ledger.MaxRPS)}, ledger.MaxRPS, ""},
		{"rateQuery: past MaxRPS", custom, model.Vector{sample(math.Nextafter(ledger.MaxRPS, math.Inf(1)))}, 0, "is outside [0, 1e+09] req/s"},
		{"rateQuery: negative", custom, model.Vector{sample(3), sample(-0.5)}, 0, "value -0.5 is not a rate"},
		{"rateQuery: NaN", custom, model.Vector{sample(math.NaN())}, 0, "value NaN is not a rate"},
		{"rateQuery: +Inf", custom, model.Vector{sample(math.Inf(1))}, 0, "value +Inf is not a rate"},
		{"rateQuery: no sample", custom, model.Vector{}, 0, "no samples for ml/chat"},
		{"scalar", custom, &model.Scalar{Value: 42}, 42, ""},
		{"matrix", custom, model.Matrix{}, 0, "returns a matrix, want an instant vector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, q, err := Read(context.Background(), stubAPI{value: tt.answer}, tt.src, time.Hour, time.Minute, time.Now())
			wantQ, _, qerr := Query(tt.src, time.Hour, time.Minute)
			if qerr != nil || q != wantQ {
				t.Errorf("query %q, want %q (%v)", q, wantQ, qerr)
			}
			switch {
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Errorf("Read = %v, %v; want %v", got, err, tt.want)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Read = %v, %v; want the error %q", got, err, tt.wantErr)
			}
		})
	}
	_, _, err := Read(context.Background(), stubAPI{value: model.Vector{}}, custom, time.Hour, time.Minute, time.Now())
	if !errors.Is(err, ErrNoData) {
		t.Errorf("no sample: %v, want ErrNoData", err)
	}
	api := stubAPI{err: errors.New("connection refused")}
	if _, q, err := Read(context.Background(), api, custom, time.Hour, time.Minute, time.Now()); err == nil || err.Error() != "query "+q+": connection refused" {
		t.Errorf("API error: %v, want it after the query", err)
	}
}

// TestQueryWindowAndStep: the step may be as long as the window and no longer; a step or a
// window of 0 is refused.
func TestQueryWindowAndStep(t *testing.T) {
	src := Source{Namespace: "ml", RateQuery: "req_rate"}
	tests := []struct {
		name         string
		window, step time.Duration
		wantRange    string // "" for refused
	}{
		{"step = window", time.Hour, time.Hour, "[1h:1h]"},
		{"step < window", time.Hour, time.Minute, "[1h:1m]"},
		{"step > window", time.Hour, time.Hour + time.Second, ""},
		{"step 0", time.Hour, 0, ""},
		{"window 0", 0, 0, ""},
		{"negative step", time.Hour, -time.Minute, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _, err := Query(src, tt.window, tt.step)
			switch {
			case tt.wantRange != "" && (err != nil || !strings.HasSuffix(q, tt.wantRange+")")):
				t.Errorf("Query = %q, %v; want a subquery ending %s", q, err, tt.wantRange)
			case tt.wantRange == "" && !errors.Is(err, prom.ErrBadRequest):
				t.Errorf("Query = %q, %v; want ErrBadRequest", q, err)
			}
		})
	}
}
