package decision

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// An Unavailable answer says why the polls failed, not only that the signals never were valid:
// a Prometheus that answers 401 to every query read "queue never, rate never" before.
func TestNoDataNamesPollErrors(t *testing.T) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress = EngineTriton, "resnet", "http://prometheus:9090"
	p.ReplicaThroughput = 1
	unauthorized := errors.New("prometheus query: 401 Unauthorized: bad credentials")

	var o Observation
	for _, s := range AllSignals() {
		o.Samples[s] = Sample{Err: unauthorized, EvaluatedAt: t0}
	}
	rec, _ := Recommend(p, o, State{}, t0)
	if !errors.Is(rec.Err, ErrNoData) {
		t.Fatalf("err %v, want ErrNoData", rec.Err)
	}
	msg := rec.Err.Error()
	// One distinct error, said once, after the first configured signal that failed.
	if got := strings.Count(msg, "401 Unauthorized"); got != 1 {
		t.Fatalf("401 said %d times, want 1: %q", got, msg)
	}
	if !strings.Contains(msg, "; queue: prometheus query: 401 Unauthorized: bad credentials") {
		t.Fatalf("err %q: want the queue poll's error named", msg)
	}
	// The unique rate is unconfigured: its sample's error is not the pool's.
	if strings.Contains(msg, "uniqueRate:") {
		t.Fatalf("err %q names an unconfigured signal", msg)
	}

	// Distinct errors: at most two, then "more poll errors"; each cut to 512 bytes.
	long := strings.Repeat("x", 1000)
	o.Samples[SignalQueue].Err = errors.New("queue failed " + long)
	o.Samples[SignalRate].Err = errors.New("rate failed")
	o.Samples[SignalRunning].Err = errors.New("running failed")
	rec, _ = Recommend(p, o, State{}, t0.Add(time.Second))
	msg = rec.Err.Error()
	if !strings.Contains(msg, "; queue: queue failed x") || strings.Contains(msg, long[:600]) {
		t.Fatalf("err %q: want the queue error cut to 512 bytes", msg)
	}
	if !strings.Contains(msg, "; rate: rate failed") || strings.Contains(msg, "running failed") ||
		!strings.HasSuffix(msg, "; more poll errors") {
		t.Fatalf("err %q: want two errors, then \"more poll errors\"", msg)
	}

	// No poll failed (every signal empty): nothing added.
	for _, s := range AllSignals() {
		o.Samples[s] = Sample{Empty: true, EvaluatedAt: t0.Add(2 * time.Second)}
	}
	o.ReadyReplicas, o.ReadyKnown = 2, true
	rec, _ = Recommend(p, o, State{}, t0.Add(2*time.Second))
	if rec.Err == nil || strings.Contains(rec.Err.Error(), "; queue:") {
		t.Fatalf("err %v: want no-data with no poll error", rec.Err)
	}
}

// A poll error longer than 512 bytes keeps its end, where the cause is: the preset bundle's
// PromQL alone is kilobytes, and a cut of the end kept "query <address> <PromQL…" and dropped
// the 401 the answer is to show.
func TestNoDataPollErrorKeepsItsCause(t *testing.T) {
	p := DefaultPolicy()
	p.Engine, p.Model, p.PrometheusAddress = EngineTriton, "resnet", "http://prometheus:9090"
	p.ReplicaThroughput = 1
	query := `"label_replace(sum by (namespace, model) (` + strings.Repeat("é", 1500) + `))"`
	bundle := errors.New("query http://reader:xxxxx@prometheus:9090 " + query + ": client_error: client error: 401")
	var o Observation
	for _, s := range AllSignals() {
		o.Samples[s] = Sample{Err: bundle, EvaluatedAt: t0}
	}
	rec, _ := Recommend(p, o, State{}, t0)
	msg := rec.Err.Error()
	_, polls, _ := strings.Cut(msg, "; queue: ")
	const wantHead = `query http://reader:xxxxx@prometheus:9090 "label_replace(sum by (namespace, model) (`
	if !strings.HasPrefix(polls, wantHead) || !strings.HasSuffix(polls, `))": client_error: client error: 401`) {
		t.Fatalf("err %q: want the poll error's start and its cause, the 401", msg)
	}
	marker := fmt.Sprintf("… (%d bytes) …", len(bundle.Error()))
	if !utf8.ValidString(polls) || len(polls) > maxPollErrorBytes+len(marker) || strings.Count(polls, marker) != 1 {
		t.Fatalf("poll errors %q (%d bytes): want valid UTF-8 of at most 512 bytes and one cut, marked %q", polls, len(polls), marker)
	}
}
