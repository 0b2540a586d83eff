package prom

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferscale/inferscale/internal/promtest"
	"github.com/prometheus/common/model"
)

// timedExporter serves metric series to a real Prometheus, one sample per scrape with an
// explicit timestamp (Prometheus honours exposition timestamps by default), so that minutes
// of history reach it in seconds of one-second scrapes: the k-th scrape gets the samples at
// times[k], and every later one the last. Every series carries namespace="ns" and its model;
// families are written in the order their first series was added.
type timedExporter struct {
	mu     sync.Mutex
	times  []time.Time
	series []timedSeries
	next   int
}

// backfillTimes returns the instants a timedExporter serves: every step over span, ending at
// at, the minute before now's minute (so the last sample is already in the past).
func backfillTimes(span, step time.Duration) (at time.Time, times []time.Time) {
	at = time.Now().Truncate(time.Minute).Add(-time.Minute)
	for ts := at.Add(-span); !ts.After(at); ts = ts.Add(step) {
		times = append(times, ts)
	}
	return at, times
}

// timedSeries is one series of a timedExporter: its metric name, TYPE (counter or gauge),
// model label and value at each of the exporter's times.
type timedSeries struct {
	name, typ, model string
	values           []float64
}

// add appends a series; values has one entry per exporter time.
func (e *timedExporter) add(name, typ, model string, values []float64) {
	if len(values) != len(e.times) {
		panic(fmt.Sprintf("series %s{model=%q}: %d values for %d times", name, model, len(values), len(e.times)))
	}
	e.series = append(e.series, timedSeries{name: name, typ: typ, model: model, values: values})
}

func (e *timedExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	i := min(e.next, len(e.times)-1)
	e.next++
	e.mu.Unlock()
	ms := e.times[i].UnixMilli()
	var names []string
	byName := map[string][]timedSeries{}
	for _, s := range e.series {
		if _, ok := byName[s.name]; !ok {
			names = append(names, s.name)
		}
		byName[s.name] = append(byName[s.name], s)
	}
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s %s\n", n, byName[n][0].typ)
		for _, s := range byName[n] {
			fmt.Fprintf(&b, "%s{namespace=\"ns\",model=%q} %g %d\n", n, s.model, s.values[i], ms)
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// prometheus serves the exporter and starts a real Prometheus scraping it every second;
// both stop with the test.
func (e *timedExporter) prometheus(t *testing.T) *promtest.Server {
	t.Helper()
	exp := httptest.NewServer(e)
	t.Cleanup(exp.Close)
	return promtest.Start(t, strings.TrimPrefix(exp.URL, "http://"))
}

// waitBackfilled waits until Prometheus holds n samples of the series selector picks (one
// series) up to at: every timed sample the exporter served has been scraped and ingested.
func waitBackfilled(ctx context.Context, t *testing.T, srv *promtest.Server, selector string, at time.Time, n int) {
	t.Helper()
	for {
		v, _, _, err := srv.API().Query(ctx, "count_over_time("+selector+"[30m])", at)
		if err == nil {
			if vec, ok := v.(model.Vector); ok && len(vec) == 1 && int(vec[0].Value) == n {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus did not ingest %d backfilled samples: last %v, %v\n%s", n, v, err, srv.Logs())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// evalModel returns a function that evaluates a grouped query on srv at an instant and
// returns the value of the (namespace="ns", model) series; it fails the test when the query
// fails, when that series is absent or not alone, or when it carries labels other than namespace and
// model (the poller splits a preset's result on exactly those two).
func evalModel(ctx context.Context, t *testing.T, srv *promtest.Server) func(query, m string, at time.Time) float64 {
	return func(query, m string, at time.Time) float64 {
		t.Helper()
		v, _, _, err := srv.API().Query(ctx, query, at)
		if err != nil {
			t.Fatalf("query at %v: %v", at, err)
		}
		var found []float64
		for _, s := range v.(model.Vector) {
			if s.Metric["model"] == model.LabelValue(m) && s.Metric["namespace"] == "ns" {
				if len(s.Metric) != 2 {
					t.Errorf("result labels %v, want exactly namespace and model (the poller splits on them)", s.Metric)
				}
				found = append(found, float64(s.Value))
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d %s series at %v in %v, want one", len(found), m, at, v)
		}
		return found[0]
	}
}
