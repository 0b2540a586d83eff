// Package peak reads a service's peak demand from Prometheus: the
// max_over_time, over a window a flag names (a full business cycle), of
// the request rate its ScaledObject scales on — the sum of the series of
// the trigger's own rateQuery, confined to the ScaledObject's namespace
// as the scaler confines it (the scaler adds a custom query's series),
// or the engine preset's rate query (prom.PresetQuery) for its model.
package peak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/prom"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

// maxErrorMessageBytes bounds the Prometheus error message an error keeps,
// and maxErrorTypeBytes its errorType (Prometheus's are a word: "bad_data",
// "timeout"; the server's JSON may hold any size).
const (
	maxErrorMessageBytes = 512
	maxErrorTypeBytes    = 64
)

// promqlParser is Prometheus's parser with default options, as prom.Confine's.
var promqlParser = parser.NewParser(parser.Options{})

// ErrNoData is returned when the query has no sample: an empty result is
// not a peak of zero.
var ErrNoData = errors.New("no samples")

// Source is where one ScaledObject's request rate comes from: the
// trigger metadata keys engine, model and rateQuery of an inferscale
// external scaler trigger.
type Source struct {
	Namespace, ScaledObject string
	Engine, Model           string
	RateQuery               string
}

// Labels are the label names preset queries group on.
var Labels = prom.Labels{Namespace: "namespace", Pod: "pod"}

// Query builds the PromQL for src's peak over window, evaluated as a
// subquery at step resolution.
//
// A rateQuery R is read as the scaler reads it: the scaler adds the series
// of a custom query and scales on their sum (prom.Request.Query), so the
// peak is the largest sum, max_over_time(((sum(R) unless on () (R < 0))
// < +Inf)[window:step]), not the largest series (pods at 30 and 20 req/s
// are a demand of 50). A step where a series of R is negative is left out,
// and one whose sum is +Inf or NaN (a series that is, or finite series
// summing past float64), as the scaler takes no value from such a sum
// (prom.ErrInvalidValue; one +Inf step had failed the whole window). The
// filters compare with numbers only, so series of R that differ only in
// their metric name need no vector matching. A scalar R is read through
// vector(R).
//
// A preset's rate query is already one series per (namespace, model), the
// groups the scaler splits it into: max_over_time((preset)[window:step])
// keeps them apart, and match are the label values that pick src's group
// (nil for a rateQuery, whose series are all src's).
//
// Errors wrap prom's ErrBadQuery or ErrBadRequest.
func Query(src Source, window, step time.Duration) (q string, match map[string]string, err error) {
	if window <= 0 || step <= 0 || step > window {
		return "", nil, fmt.Errorf("%w: window %v and step %v: want 0 < step ≤ window", prom.ErrBadRequest, window, step)
	}
	var rate string
	switch {
	case src.RateQuery != "":
		if rate, err = prom.Confine(src.RateQuery, src.Namespace, Labels.Namespace); err != nil {
			return "", nil, err
		}
		expr, err := promqlParser.ParseExpr(rate)
		if err != nil { // Confine printed it from a parsed tree
			return "", nil, fmt.Errorf("%w: parse confined rateQuery %q: %w", prom.ErrBadQuery, rate, err)
		}
		switch t := expr.Type(); t {
		case parser.ValueTypeVector:
			rate = "(" + rate + ")"
		case parser.ValueTypeScalar:
			rate = "vector(" + rate + ")"
		default:
			return "", nil, fmt.Errorf("rateQuery %q: %w: returns a %s; it must return an instant vector or a scalar", src.RateQuery, prom.ErrBadQuery, t)
		}
		rate = fmt.Sprintf("(sum(%[1]s) unless on () (%[1]s < 0)) < +Inf", rate)
	default:
		if rate, err = prom.PresetQuery(src.Engine, prom.KindRate, Labels); err != nil {
			return "", nil, err
		}
		match = map[string]string{Labels.Namespace: src.Namespace, prom.Presets[src.Engine].ModelLabel: src.Model}
	}
	return fmt.Sprintf("max_over_time((%s)[%s:%s])", rate, model.Duration(window), model.Duration(step)), match, nil
}

// Read evaluates src's peak at now and returns it in requests per second:
// the largest sum of a rateQuery's series (see Query), or the peak of the
// preset group that matches (should several match, the largest). Errors: ErrNoData, a NaN,
// negative or infinite value, one past ledger.MaxRPS, or the API's error
// (its message cut to maxErrorMessageBytes; an answer past the client's
// limit, prom.NewLimitedAPI's, wraps prom.ErrResponseTooLarge).
func Read(ctx context.Context, api v1.API, src Source, window, step time.Duration, now time.Time) (float64, string, error) {
	q, match, err := Query(src, window, step)
	if err != nil {
		return 0, "", err
	}
	res, _, _, err := api.Query(ctx, q, now)
	if err != nil {
		var apiErr *v1.Error
		if errors.As(err, &apiErr) {
			// The message is the server's, any size; Detail holds the whole body.
			err = &v1.Error{Type: v1.ErrorType(errtext.Cut(string(apiErr.Type), maxErrorTypeBytes)), Msg: errtext.Cut(apiErr.Msg, maxErrorMessageBytes)}
		}
		return 0, q, fmt.Errorf("query %s: %w", q, err)
	}
	var samples []float64
	switch v := res.(type) {
	case model.Vector:
		for _, s := range v {
			ok := true
			for k, want := range match {
				if string(s.Metric[model.LabelName(k)]) != want {
					ok = false
				}
			}
			if ok {
				samples = append(samples, float64(s.Value))
			}
		}
	case *model.Scalar:
		samples = append(samples, float64(v.Value))
	default:
		return 0, q, fmt.Errorf("query %s: returns a %s, want an instant vector", q, res.Type())
	}
	if len(samples) == 0 {
		return 0, q, fmt.Errorf("%w for %s/%s: %s", ErrNoData, src.Namespace, src.ScaledObject, q)
	}
	peak := math.Inf(-1)
	for _, s := range samples {
		if math.IsNaN(s) || s < 0 || math.IsInf(s, 0) {
			return 0, q, fmt.Errorf("query %s: value %v is not a rate", q, s)
		}
		if s > ledger.MaxRPS {
			// The spec's bound on peakRPS: past it, Validate reported the value as the spec's.
			return 0, q, fmt.Errorf("query %s: value %v is outside [0, %g] req/s, the range of a peakRPS", q, s, ledger.MaxRPS)
		}
		peak = max(peak, s)
	}
	return peak, q, nil
}
