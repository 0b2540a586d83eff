package residency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// fakeTriton is a scripted residency.Triton: an index and statistics the test sets, loads and
// unloads answered by hooks (default: the model turns READY, or UNAVAILABLE "unloaded").
type fakeTriton struct {
	mu      sync.Mutex
	index   map[string]triton.ModelIndex
	stats   map[string]triton.ModelStats // listed in Statistics
	onLoad  func(f *fakeTriton, name string) error
	onUnld  func(f *fakeTriton, name string) error
	idxErrs int                 // Index calls that fail next, with Unavailable
	before  []triton.ModelIndex // listed ahead of index's entries (more versions of a model)
	loads   map[string]int
	unloads map[string]int
}

func newFakeTriton() *fakeTriton {
	return &fakeTriton{index: map[string]triton.ModelIndex{}, stats: map[string]triton.ModelStats{},
		loads: map[string]int{}, unloads: map[string]int{}}
}

// setLocked sets name's index entry (f.mu held).
func (f *fakeTriton) setLocked(name string, st triton.State, reason string) {
	f.index[name] = triton.ModelIndex{Name: name, Version: "1", State: st, Reason: reason}
}

func (f *fakeTriton) set(name string, st triton.State, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(name, st, reason)
}

func (f *fakeTriton) Index(context.Context, bool) ([]triton.ModelIndex, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idxErrs > 0 {
		f.idxErrs--
		return nil, &triton.StatusError{Op: "repository index", Code: codes.Unavailable, Message: "connection refused"}
	}
	out := make([]triton.ModelIndex, 0, len(f.index))
	for _, e := range f.index {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b triton.ModelIndex) int { return strings.Compare(a.Name, b.Name) })
	return append(slices.Clone(f.before), out...), nil
}

func (f *fakeTriton) Load(_ context.Context, name string, _ triton.LoadOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads[name]++
	if f.onLoad != nil {
		return f.onLoad(f, name)
	}
	f.setLocked(name, triton.StateReady, "")
	return nil
}

func (f *fakeTriton) Unload(_ context.Context, name string, _ triton.UnloadOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unloads[name]++
	if f.onUnld != nil {
		return f.onUnld(f, name)
	}
	f.setLocked(name, triton.StateUnavailable, "unloaded")
	return nil
}

func (f *fakeTriton) Statistics(context.Context, string) ([]triton.ModelStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]triton.ModelStats, 0, len(f.stats))
	for _, s := range f.stats {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeTriton) count(m map[string]int, name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return m[name]
}

// metricsBody is an httptest server answering Triton's /metrics with a body the test sets.
type metricsBody struct {
	mu   sync.Mutex
	body string
	srv  *httptest.Server
}

func newMetricsBody(t *testing.T, body string) *metricsBody {
	t.Helper()
	b := &metricsBody{body: body}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.mu.Lock()
		body := b.body
		b.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *metricsBody) set(body string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.body = body
}

// recordedEvents is an Events that keeps what it is sent.
type recordedEvents struct {
	mu  sync.Mutex
	got []string // "Reason: message"
}

func (e *recordedEvents) Event(_ bool, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, reason+": "+msg)
}

func (e *recordedEvents) count(reason string) (n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.got {
		if strings.HasPrefix(g, reason+": ") {
			n++
		}
	}
	return n
}

type fakeHarness struct {
	t      *testing.T
	clock  *tritontest.FakeClock
	ft     *fakeTriton
	ctl    *Controller
	m      *Metrics
	demand *staticDemand
	logs   *syncBuffer
	events *recordedEvents
}

// syncBuffer is a bytes.Buffer safe for the controller's concurrent loads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(msg string) int { return strings.Count(s.String(), `"msg":"`+msg) }

// newFakeHarness runs a controller over ft with metricsURL as Triton's metrics ("" for none).
func newFakeHarness(t *testing.T, ft *fakeTriton, metricsURL string, cat plan.Catalog, budget plan.Budget) *fakeHarness {
	t.Helper()
	h := &fakeHarness{t: t, clock: tritontest.NewFakeClock(t0), ft: ft, demand: &staticDemand{rates: map[string]float64{}},
		logs: &syncBuffer{}, events: &recordedEvents{}}
	var err error
	if h.m, err = NewMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = metricsURL
	h.ctl, err = NewController(cfg, cat, budget, Deps{Triton: ft, Demand: h.demand, Clock: h.clock, Metrics: h.m,
		Log: NewLogger(h.logs, slog.LevelInfo), Events: h.events})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *fakeHarness) step() bool {
	h.t.Helper()
	acted, err := h.ctl.Step(context.Background())
	if err != nil {
		h.t.Fatalf("Step: %v", err)
	}
	return acted
}

const pendingType = "# TYPE nv_inference_pending_request_count gauge\n"

// busyVictimSetup: busy (P2, 6 GiB, READY since t0, in statistics with 10 requests finished)
// and want (P1, 6 GiB, wanted at 5 req/s) on a 10 GiB slice: only one fits, and the plan evicts
// busy for want unless busy is busy.
func busyVictimSetup(t *testing.T, metricsURL string, inStats bool) *fakeHarness {
	t.Helper()
	ft := newFakeTriton()
	ft.set("busy", triton.StateReady, "")
	if inStats {
		ft.stats["busy"] = triton.ModelStats{Name: "busy", Version: "1", Success: triton.DurationStat{Count: 10}}
	}
	cat := catalog(model("busy", plan.TierP2, 6, time.Second), model("want", plan.TierP1, 6, time.Second))
	h := newFakeHarness(t, ft, metricsURL, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	return h
}

// TestPendingGaugeHostileValuesKeepModelBusy: a model whose queue reads as anything but a count
// is busy, never evicted, and the reading is reported once per episode and counted. Before,
// int(max(v, 0)) turned NaN, ±Inf and 1e19 into math.MinInt64, -3 into 0, and an untyped or
// counter-typed series read 0 (no Gauge): queued 0, busy false, and busy was unloaded while its
// requests waited.
func TestPendingGaugeHostileValuesKeepModelBusy(t *testing.T) {
	series := func(v string) string {
		return `nv_inference_pending_request_count{model="busy",version="1"} ` + v + "\n"
	}
	tests := []struct {
		name       string
		body       string
		wantQueued int
		wantExec   int
		invalid    bool
	}{
		{name: "NaN", body: pendingType + series("NaN"), wantExec: 1, invalid: true},
		{name: "+Inf", body: pendingType + series("+Inf"), wantExec: 1, invalid: true},
		{name: "-Inf", body: pendingType + series("-Inf"), wantExec: 1, invalid: true},
		{name: "1e19", body: pendingType + series("1e19"), wantExec: 1, invalid: true},
		{name: "past 1e9", body: pendingType + series("1000000001"), wantExec: 1, invalid: true},
		{name: "negative", body: pendingType + series("-3"), wantExec: 1, invalid: true},
		{name: "counter-typed", body: "# TYPE nv_inference_pending_request_count counter\n" + series("3"), wantExec: 1, invalid: true},
		{name: "a valid and an invalid version", body: pendingType + series("3") +
			`nv_inference_pending_request_count{model="busy",version="2"} NaN` + "\n", wantExec: 1, invalid: true},
		{name: "untyped", body: series("3"), wantQueued: 3, wantExec: 1},
		{name: "two versions summed", body: pendingType + series("2") +
			`nv_inference_pending_request_count{model="busy",version="2"} 1.5` + "\n", wantQueued: 4, wantExec: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mb := newMetricsBody(t, pendingType+series("0"))
			h := busyVictimSetup(t, mb.srv.URL, true)
			h.step() // busy seen READY at t0, idle
			h.clock.Advance(3 * time.Minute)
			mb.set(tt.body)
			h.demand.set("want", 5)
			for range 3 {
				h.step()
				h.clock.Advance(5 * time.Second)
			}
			st := h.ctl.Status().Observed.Models["busy"]
			if n := h.ft.count(h.ft.unloads, "busy"); n != 0 || st.Queued != tt.wantQueued || st.Executing != tt.wantExec {
				t.Fatalf("busy: %d unloads, queued %d, executing %d; want 0 unloads, queued %d, executing %d",
					n, st.Queued, st.Executing, tt.wantQueued, tt.wantExec)
			}
			wantWarn, wantErrs := 0, 0.0
			if tt.invalid {
				wantWarn, wantErrs = 1, 3
			}
			if got := h.logs.count("triton queue lengths invalid"); got != wantWarn {
				t.Errorf("%d invalid-queue warnings in 3 loops, want %d:\n%s", got, wantWarn, h.logs)
			}
			if got := testutil.ToFloat64(h.m.QueueReadErrors); got != wantErrs {
				t.Errorf("queue_read_errors_total = %v, want %v", got, wantErrs)
			}
			if tt.invalid && !strings.Contains(h.logs.String(), `nv_inference_pending_request_count{model=\"busy\"`) {
				t.Errorf("the warning does not name the series:\n%s", h.logs)
			}
			// Valid again: the episode ends (logged once), and busy, idle once what a valid queue
			// showed is written off (owedExpiry), makes room for want.
			mb.set(pendingType + series("0"))
			h.step()
			h.clock.Advance(owedExpiry)
			h.step()
			if tt.invalid && h.logs.count("triton queue lengths valid again") != 1 {
				t.Errorf("no end-of-episode log:\n%s", h.logs)
			}
			if n := h.ft.count(h.ft.unloads, "busy"); n != 1 {
				t.Errorf("busy unloaded %d times once idle, want 1", n)
			}
		})
	}
}

// TestReadyModelMissingFromStatistics: a READY model that Triton's statistics leave out keeps
// its queue from the gauge and is busy while it has one, or while its queue is unknown. Before,
// its queue was read only for models in the statistics: queued 0, and it was evicted with 3
// requests waiting.
func TestReadyModelMissingFromStatistics(t *testing.T) {
	t.Run("queue 3 from the gauge", func(t *testing.T) {
		mb := newMetricsBody(t, pendingType+`nv_inference_pending_request_count{model="busy",version="1"} 3`+"\n")
		h := busyVictimSetup(t, mb.srv.URL, false)
		h.step()
		h.clock.Advance(3 * time.Minute)
		h.demand.set("want", 5)
		h.step()
		st := h.ctl.Status().Observed.Models["busy"]
		if n := h.ft.count(h.ft.unloads, "busy"); n != 0 || st.Queued != 3 || st.Executing != 1 {
			t.Fatalf("busy: %d unloads, queued %d, executing %d; want 0 unloads, 3 queued, 1 executing", n, st.Queued, st.Executing)
		}
		if got := h.logs.count("READY models missing from Triton's statistics"); got != 1 {
			t.Errorf("%d warnings in 2 loops, want 1:\n%s", got, h.logs)
		}
		// The gauge reads 0: the 4 requests it owes (3 queued, 1 ahead) are still executing.
		mb.set(pendingType + `nv_inference_pending_request_count{model="busy",version="1"} 0` + "\n")
		h.step()
		if st := h.ctl.Status().Observed.Models["busy"]; st.Executing != 4 || h.ft.count(h.ft.unloads, "busy") != 0 {
			t.Errorf("busy executing %d (unloads %d) once its queue drained; want 4 owed, not unloaded", st.Executing, h.ft.count(h.ft.unloads, "busy"))
		}
	})
	t.Run("queue unknown", func(t *testing.T) {
		h := busyVictimSetup(t, "", false)
		h.step()
		h.clock.Advance(3 * time.Minute)
		h.demand.set("want", 5)
		h.step()
		if st := h.ctl.Status().Observed.Models["busy"]; !st.Busy() || h.ft.count(h.ft.unloads, "busy") != 0 {
			t.Fatalf("busy %+v, %d unloads; want busy, never a victim, while neither statistics nor queue say", st, h.ft.count(h.ft.unloads, "busy"))
		}
		h.ft.mu.Lock()
		h.ft.stats["busy"] = triton.ModelStats{Name: "busy", Version: "1", Success: triton.DurationStat{Count: 10}}
		h.ft.mu.Unlock()
		h.step()
		if got := h.logs.count("every READY model is in Triton's statistics again"); got != 1 {
			t.Errorf("no end-of-episode log:\n%s", h.logs)
		}
	})
}

// TestDrainReadHostilePending: the drain reads the queue as the controller does (one reader):
// untyped is read, a series that is not a count makes the reading invalid — never 0 — and sums
// saturate. Before, untyped read 0, +Inf became math.MinInt64 (logged "pending":"unknown"), and
// a -3 series cancelled a real 3.
func TestDrainReadHostilePending(t *testing.T) {
	p := func(model, v string) string {
		return `nv_inference_pending_request_count{model="` + model + `",version="1"} ` + v + "\n"
	}
	tests := []struct {
		name        string
		body        string
		wantPending int64
		wantInvalid string // substring; "" for a valid reading
		wantString  string
	}{
		{name: "untyped", body: p("a", "3"), wantPending: 3, wantString: "pending 3, finished 0"},
		{name: "summed", body: pendingType + p("a", "3") + p("b", "4"), wantPending: 7, wantString: "pending 7, finished 0"},
		{name: "+Inf", body: pendingType + p("a", "+Inf"), wantPending: -1, wantInvalid: `model="a",version="1"}: value +Inf`,
			wantString: "pending invalid, finished 0 (queue length unknown: "},
		{name: "-3 does not cancel 3", body: pendingType + p("a", "3") + p("b", "-3"), wantPending: -1, wantInvalid: "value -3"},
		{name: "NaN", body: pendingType + p("a", "NaN"), wantPending: -1, wantInvalid: "value NaN"},
		{name: "counter NaN", body: pendingType + p("a", "0") + "# TYPE nv_inference_request_success counter\n" +
			`nv_inference_request_success{model="a",version="1"} NaN` + "\n", wantPending: 0, wantInvalid: "finished requests unknown"},
		{name: "counters untyped", body: pendingType + p("a", "0") + `nv_inference_request_success{model="a",version="1"} 5` + "\n" +
			`nv_inference_request_failure{model="a",version="1"} 2` + "\n", wantPending: 0, wantString: "pending 0, finished 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mb := newMetricsBody(t, tt.body)
			h := newFakeHarness(t, newFakeTriton(), mb.srv.URL, catalog(model("a", plan.TierP1, 1, time.Second)), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
			cfg := DefaultConfig()
			cfg.TritonMetricsURL = mb.srv.URL
			w, err := NewDrainer(cfg, h.ctl, nil).Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if w.Pending != tt.wantPending || !strings.Contains(w.Invalid, tt.wantInvalid) || (tt.wantInvalid == "") != (w.Invalid == "") {
				t.Errorf("Read = %+v; want pending %d, invalid containing %q", w, tt.wantPending, tt.wantInvalid)
			}
			if tt.wantString != "" && !strings.HasPrefix(w.String(), tt.wantString) {
				t.Errorf("String() = %q, want it to start %q", w.String(), tt.wantString)
			}
		})
	}
}

// TestDrainNotDrainedWhileQueueInvalid: with the queue reading +Inf and every counter quiet, the
// drain does not report drained; it ends at its deadline, having warned once. Before, +Inf read
// as math.MinInt64 ≤ 0 and the drain reported drained while requests were queued.
func TestDrainNotDrainedWhileQueueInvalid(t *testing.T) {
	mb := newMetricsBody(t, pendingType+`nv_inference_pending_request_count{model="a",version="1"} +Inf`+"\n")
	ft := newFakeTriton()
	ft.set("a", triton.StateReady, "")
	ft.stats["a"] = triton.ModelStats{Name: "a", Version: "1"}
	h := newFakeHarness(t, ft, mb.srv.URL, catalog(model("a", plan.TierP1, 1, time.Second)), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	cfg := DefaultConfig()
	cfg.TritonMetricsURL = mb.srv.URL
	cfg.PropagationDelay, cfg.DrainPollInterval, cfg.DrainTimeout = 0, time.Second, 10*time.Second
	dr := NewDrainer(cfg, h.ctl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- dr.Drain(ctx) }()
	drive(ctx, t, h.clock, 1, dr.Done())
	if err := <-errc; !errors.Is(err, ErrDrainTimeout) || !strings.Contains(err.Error(), "pending invalid") {
		t.Fatalf("Drain = %v; want ErrDrainTimeout with the last reading invalid", err)
	}
	if n := ft.count(ft.unloads, "a"); n != 0 {
		t.Errorf("a unloaded %d times: the drain confirmed on an invalid reading", n)
	}
	if got := h.logs.count("drain: Triton's metrics are not counts"); got != 1 {
		t.Errorf("%d invalid-reading warnings, want 1 per episode:\n%s", got, h.logs)
	}
}

// TestTritonMemoryProbeHostileValues: Triton's nv_gpu_memory_used_bytes that is not a byte count
// is an error naming the series and the value; duplicate series of one GPU count once (their
// largest), distinct GPUs are summed. Before, NaN, +Inf and 1e19 gave math.MinInt64 with a nil
// error and -5 gave -5 (negative: unknown, no check), untyped read 0, duplicates were summed.
func TestTritonMemoryProbeHostileValues(t *testing.T) {
	const typ = "# TYPE nv_gpu_memory_used_bytes gauge\n"
	used := func(uuid, v string) string { return `nv_gpu_memory_used_bytes{gpu_uuid="` + uuid + `"} ` + v + "\n" }
	tests := []struct {
		name    string
		body    string
		want    int64
		wantErr string
	}{
		{name: "NaN", body: typ + used("GPU-a", "NaN"), wantErr: `nv_gpu_memory_used_bytes{gpu_uuid="GPU-a"}: value NaN`},
		{name: "+Inf", body: typ + used("GPU-a", "+Inf"), wantErr: "value +Inf"},
		{name: "1e19", body: typ + used("GPU-a", "1e19"), wantErr: "value 1e+19; want a count in [0, 1125899906842624]"},
		{name: "-5", body: typ + used("GPU-a", "-5"), wantErr: "value -5"},
		{name: "counter-typed", body: "# TYPE nv_gpu_memory_used_bytes counter\n" + used("GPU-a", "5"), wantErr: "type counter; Triton exports it as a gauge"},
		{name: "untyped", body: used("GPU-a", "5"), want: 5},
		{name: "duplicate series of one GPU", body: typ + used("GPU-a", "4294967296") + used("GPU-a", "4294967296"), want: 4 << 30},
		{name: "two GPUs", body: typ + used("GPU-a", "4294967296") + used("GPU-b", "6442450944"), want: 10 << 30},
		{name: "absent", body: "# TYPE nv_inference_count counter\nnv_inference_count{model=\"m\",version=\"1\"} 3\n", want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mb := newMetricsBody(t, tt.body)
			got, err := TritonMemoryProbe(mb.srv.URL, nil)()
			if tt.wantErr == "" && (err != nil || got != tt.want) {
				t.Fatalf("probe = %d, %v; want %d", got, err, tt.want)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || got != 0) {
				t.Fatalf("probe = %d, %v; want an error containing %q", got, err, tt.wantErr)
			}
		})
	}
	// In the controller such a reading counts in device_memory_read_errors_total and warns.
	mb := newMetricsBody(t, typ+used("GPU-a", "NaN"))
	h := busyVictimSetup(t, "", true)
	h.ctl.deps.DeviceUsedBytes = TritonMemoryProbe(mb.srv.URL, nil)
	h.step()
	h.step()
	if got := testutil.ToFloat64(h.m.DeviceReadErrors); got != 2 {
		t.Errorf("device_memory_read_errors_total = %v, want 2", got)
	}
	if got := h.logs.count("device memory unreadable"); got != 1 || !strings.Contains(h.logs.String(), "value NaN") {
		t.Errorf("%d warnings, want 1 naming the value:\n%s", got, h.logs)
	}
}

// TestMetricsBodyBounded: a metrics body past MaxMetricsBytes is refused naming the bound, read
// no further. Before, the whole body was decoded (100 MiB of junk: 517 MiB of heap retained,
// 1.35 GB allocated per read).
func TestMetricsBodyBounded(t *testing.T) {
	junk := strings.Repeat("# junk comment line of an exposition that never ends\n", MaxMetricsBytes/52+1)
	mb := newMetricsBody(t, junk+"nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-a\"} 5\n")
	got, err := TritonMemoryProbe(mb.srv.URL, nil)()
	if !errors.Is(err, ErrMetricsTooLarge) || !strings.Contains(err.Error(), "over 16777216 bytes (residency.MaxMetricsBytes)") {
		t.Fatalf("probe of a %d-byte body = %d, %v; want ErrMetricsTooLarge naming the bound", len(junk), got, err)
	}
}

// TestScrapeKeepsOnlyFamiliesRead: families the sidecar does not read are skipped line by line
// as they arrive; an exposition of 12 MiB of them costs a small fraction of its size, where the
// decoder had parsed all of them.
func TestScrapeKeepsOnlyFamiliesRead(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 12<<20; i++ {
		fmt.Fprintf(&b, "# HELP nv_inference_count_%d Number of inferences\n# TYPE nv_inference_count_%d counter\nnv_inference_count_%d{model=\"m%d\",version=\"1\"} %d\n", i, i, i, i, i)
	}
	b.WriteString(pendingType + `nv_inference_pending_request_count{model="m",version="1"} 2` + "\n")
	mb := newMetricsBody(t, b.String())
	client := &http.Client{Timeout: 30 * time.Second}
	fams, err := scrapeMetrics(context.Background(), client, mb.srv.URL, metricPending, metricGPUUsed)
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || fams[0].GetName() != metricPending || pendingRequests(fams).perModel["m"] != 2 {
		t.Fatalf("families %v; want only %s, m at 2", fams, metricPending)
	}
	allocs := testing.AllocsPerRun(2, func() {
		if _, err := scrapeMetrics(context.Background(), client, mb.srv.URL, metricPending); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations to read a %d-byte exposition", allocs, b.Len())
	// The ~230,000 skipped lines allocate nothing each; the HTTP client's reads a few hundred.
	if allocs > 5000 {
		t.Errorf("%.0f allocations to read a %d-byte exposition; want < 5000 (nothing per skipped line)", allocs, b.Len())
	}
}

// TestLoadAnsweredOKNotReadyIsFailure: a load Triton answers OK whose model the index does not
// then show READY is a failed load: backoff, then quarantine after --quarantine-after. Before,
// the answer alone was success: 40 loads in 40 s, 0 failures, 40 Loaded events.
func TestLoadAnsweredOKNotReadyIsFailure(t *testing.T) {
	ft := newFakeTriton()
	ft.set("p0", triton.StateUnavailable, "unloaded")
	ft.onLoad = func(*fakeTriton, string) error { return nil } // stays UNAVAILABLE
	h := newFakeHarness(t, ft, "", catalog(model("p0", plan.TierP0, 2, time.Second)), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	for range 40 {
		h.step()
		h.clock.Advance(time.Second)
	}
	// Backoff 10 s, then 20 s: tries at 0, 10 and 30 s, the third quarantines.
	if n := ft.count(ft.loads, "p0"); n != 3 {
		t.Errorf("%d loads in 40 s, want 3", n)
	}
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); got != 3 {
		t.Errorf("loads_total{failure} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(h.m.Loads.WithLabelValues("success")); got != 0 {
		t.Errorf("loads_total{success} = %v, want 0", got)
	}
	if got := testutil.ToFloat64(h.m.Quarantined); got != 1 {
		t.Errorf("quarantined_models = %v, want 1", got)
	}
	if n := h.events.count("Loaded"); n != 0 {
		t.Errorf("%d Loaded events, want 0", n)
	}
	if n := h.events.count("LoadFailed"); n != 3 || !strings.Contains(h.events.got[len(h.events.got)-1],
		`Triton answered the load OK, but its index then shows the model UNAVAILABLE (reason "unloaded"), not READY`) {
		t.Errorf("%d LoadFailed events, want 3 saying why: %q", n, h.events.got)
	}
}

// TestUnloadWithoutEffectNotReissuedEverySettle: an unload Triton answers OK while the model
// stays READY is re-issued only after the failure backoff (10 s, then 20 s), counted as one
// eviction, and warned about once. Before, every settle step (250 ms) issued it again: 50
// steps, ~47 unloads, evictions_total 47, an INFO log and an Unload event each.
func TestUnloadWithoutEffectNotReissuedEverySettle(t *testing.T) {
	mb := newMetricsBody(t, pendingType+`nv_inference_pending_request_count{model="busy",version="1"} 0`+"\n")
	h := busyVictimSetup(t, mb.srv.URL, true)
	h.ft.onUnld = func(*fakeTriton, string) error { return nil } // stays READY
	h.step()
	h.clock.Advance(3 * time.Minute)
	h.demand.set("want", 5)
	acted := 0
	for range 50 {
		if h.step() {
			acted++
		}
		h.clock.Advance(h.ctl.cfg.Settle())
	}
	// Issued at 0 s and again at 10 s; the next is due at 30 s.
	if n := h.ft.count(h.ft.unloads, "busy"); n != 2 || acted != 2 {
		t.Errorf("%d unloads (%d steps acted) in 50 settle steps, want 2", n, acted)
	}
	if got := testutil.ToFloat64(h.m.Evictions); got != 1 {
		t.Errorf("evictions_total = %v, want 1", got)
	}
	if n := h.events.count("Unload"); n != 1 {
		t.Errorf("%d Unload events, want 1", n)
	}
	if got := h.logs.count("unload had no effect"); got != 1 {
		t.Errorf("%d no-effect warnings, want 1:\n%s", got, h.logs)
	}
	h.ft.mu.Lock()
	want := h.ft.index["want"]
	h.ft.mu.Unlock()
	if want.State == triton.StateReady {
		t.Error("want loaded while busy still held its memory")
	}
	// The unload takes effect: the tracking ends, want loads.
	h.ft.set("busy", triton.StateUnavailable, "unloaded")
	h.step()
	if _, ok := h.ctl.unloadIssued["busy"]; ok || h.logs.count("unload took effect") != 1 {
		t.Errorf("unload still tracked (%v) or not logged once:\n%s", ok, h.logs)
	}
}

// TestLoadUnavailableWhileTritonReachable: a load answered UNAVAILABLE ("CUDA out of memory")
// while the index shows the load's outcome is a failed load, backing off and quarantined; only
// when the index cannot be read (or shows the model forgotten, a restart) is it an
// interruption. Before, every UNAVAILABLE was "Triton restarted": 40 loads in 40 s, 0 failures.
func TestLoadUnavailableWhileTritonReachable(t *testing.T) {
	oom := &triton.StatusError{Op: "load", Model: "p0", Code: codes.Unavailable, Message: "failed to load 'p0': CUDA out of memory"}
	// The second case lists the model twice, a version never loaded (no state, no reason)
	// ahead of the one whose load failed: the failure's entry decides, not the first listed.
	for _, c := range []struct {
		name   string
		before []triton.ModelIndex
	}{
		{"index shows the failure", nil},
		{"index shows the failure behind a version never loaded", []triton.ModelIndex{{Name: "p0", Version: "2"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft := newFakeTriton()
			ft.set("p0", triton.StateUnavailable, "unloaded")
			ft.before = c.before
			ft.onLoad = func(f *fakeTriton, name string) error {
				f.setLocked(name, triton.StateUnavailable, "CUDA out of memory")
				return oom
			}
			h := newFakeHarness(t, ft, "", catalog(model("p0", plan.TierP0, 2, time.Second)), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
			for range 40 {
				h.step()
				h.clock.Advance(time.Second)
			}
			if n, f := ft.count(ft.loads, "p0"), testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); n != 3 || f != 3 {
				t.Errorf("%d loads, %v failures in 40 s; want 3 and 3 (backoff 10 s, 20 s, then quarantine)", n, f)
			}
			if got := testutil.ToFloat64(h.m.Quarantined); got != 1 {
				t.Errorf("quarantined_models = %v, want 1", got)
			}
			if got := h.logs.count("load interrupted"); got != 0 {
				t.Errorf("%d interruption warnings, want 0", got)
			}
		})
	}
	t.Run("index unreachable", func(t *testing.T) {
		ft := newFakeTriton()
		ft.set("p0", triton.StateUnavailable, "unloaded")
		ft.onLoad = func(f *fakeTriton, _ string) error {
			f.idxErrs = 1 // the confirmation's index read fails: Triton went away
			return oom
		}
		h := newFakeHarness(t, ft, "", catalog(model("p0", plan.TierP0, 2, time.Second)), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
		h.step()
		h.step() // no backoff: loads again at once
		if n, f := ft.count(ft.loads, "p0"), testutil.ToFloat64(h.m.Loads.WithLabelValues("failure")); n != 2 || f != 0 {
			t.Errorf("%d loads, %v failures; want 2 and 0 (an interruption)", n, f)
		}
		if got := h.logs.count("load interrupted: Triton restarted or is unreachable"); got != 2 {
			t.Errorf("%d interruption warnings, want 2:\n%s", got, h.logs)
		}
	})
}

// TestFailuresForgottenWhenReady: three loads answered Internal "late error" while the model
// still became READY (and later left) do not quarantine it: observed READY, its consecutive
// failures are forgotten. Before, the third quarantined it and no fourth load was tried.
func TestFailuresForgottenWhenReady(t *testing.T) {
	ft := newFakeTriton()
	ft.set("p0", triton.StateUnavailable, "unloaded")
	ft.onLoad = func(f *fakeTriton, name string) error {
		f.setLocked(name, triton.StateReady, "")
		return &triton.StatusError{Op: "load", Model: name, Code: codes.Internal, Message: "late error"}
	}
	h := newFakeHarness(t, ft, "", catalog(model("p0", plan.TierP0, 2, time.Second)), plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	for range 3 {
		h.step() // load: an error, yet READY
		h.step() // observed READY
		if n := h.ctl.failures["p0"]; n != 0 {
			t.Fatalf("failures of p0 = %d after it was observed READY, want 0", n)
		}
		ft.set("p0", triton.StateUnavailable, "unloaded") // lost again
		h.clock.Advance(time.Minute)
	}
	h.step()
	if n := ft.count(ft.loads, "p0"); n != 4 {
		t.Errorf("%d loads, want 4 (never quarantined)", n)
	}
	if got := testutil.ToFloat64(h.m.Quarantined); got != 0 {
		t.Errorf("quarantined_models = %v, want 0", got)
	}
}

// owedHarness is a controller over one READY model m with 10 requests finished and a queue of
// queued on Triton's metrics; executing observes at a time and returns m's executing count.
func owedHarness(t *testing.T, queued int) (*metricsBody, *fakeHarness, func(time.Time) int) {
	t.Helper()
	mb := newMetricsBody(t, pendingType+fmt.Sprintf(`nv_inference_pending_request_count{model="m",version="1"} %d`, queued)+"\n")
	ft := newFakeTriton()
	ft.set("m", triton.StateReady, "")
	ft.stats["m"] = triton.ModelStats{Name: "m", Version: "1", Success: triton.DurationStat{Count: 10}}
	cat := catalog(model("m", plan.TierP1, 1, time.Second))
	h := newFakeHarness(t, ft, mb.srv.URL, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	return mb, h, func(at time.Time) int {
		t.Helper()
		o, err := h.ctl.observe(context.Background(), cat, at)
		if err != nil {
			t.Fatal(err)
		}
		return o.obs.Models["m"].Executing
	}
}

// TestOwedWorkExpires: a queue of 3 seen once, then 0, with the finished count never moving,
// keeps the model executing (4 owed) until owedExpiry, then is written off (logged once) and
// the model is idle. Before, it was executing 4, busy and never a victim after 24 h.
func TestOwedWorkExpires(t *testing.T) {
	mb, h, executing := owedHarness(t, 0)
	executing(t0)
	mb.set(pendingType + `nv_inference_pending_request_count{model="m",version="1"} 3` + "\n")
	if got := executing(t0.Add(5 * time.Second)); got != 1 {
		t.Fatalf("executing %d with 3 queued, want 1", got)
	}
	mb.set(pendingType + `nv_inference_pending_request_count{model="m",version="1"} 0` + "\n")
	if got := executing(t0.Add(10 * time.Second)); got != 4 {
		t.Fatalf("executing %d once the queue read 0, want the 4 owed", got)
	}
	if got := executing(t0.Add(5*time.Second + owedExpiry - time.Second)); got != 4 {
		t.Fatalf("executing %d just within %s, want 4", got, owedExpiry)
	}
	if got := executing(t0.Add(5*time.Second + owedExpiry)); got != 0 {
		t.Fatalf("executing %d after %s unmoved, want 0", got, owedExpiry)
	}
	if got := executing(t0.Add(24 * time.Hour)); got != 0 {
		t.Fatalf("executing %d after 24 h, want 0", got)
	}
	if got := h.logs.count("in-flight accounting expired"); got != 1 || !strings.Contains(h.logs.String(), `"requests_written_off":4`) {
		t.Errorf("%d expiry warnings, want 1 writing off 4:\n%s", got, h.logs)
	}
}

// TestPerModelStatePrunedWhenNamesLeave: names outside the catalog that leave Triton's index
// take their demand estimate, counts and in-flight accounting with them. Before, 100 new READY
// names per loop for 200 loops left 20,000 entries in each map.
func TestPerModelStatePrunedWhenNamesLeave(t *testing.T) {
	ft := newFakeTriton()
	cat := catalog(model("kept", plan.TierP1, 1, time.Second))
	h := newFakeHarness(t, ft, "", cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	h.ctl.est["kept"] = plan.DecayedRate{}.Add(5, t0, plan.DefaultHalfLife) // a catalog model's history stays
	ctx := context.Background()
	for loop := range 200 {
		ft.mu.Lock()
		clear(ft.index)
		clear(ft.stats)
		for i := range 100 {
			name := fmt.Sprintf("tenant-%d-%d", loop, i)
			ft.setLocked(name, triton.StateReady, "")
			ft.stats[name] = triton.ModelStats{Name: name, Version: "1", Success: triton.DurationStat{Count: uint64(loop)}}
		}
		ft.mu.Unlock()
		if _, err := h.ctl.observe(ctx, cat, t0.Add(time.Duration(loop)*5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	h.ctl.mu.Lock()
	defer h.ctl.mu.Unlock()
	if len(h.ctl.est) != 101 || len(h.ctl.lastCount) != 100 || len(h.ctl.work) != 100 {
		t.Errorf("est %d, lastCount %d, work %d entries after 200 loops; want 101 (this loop's 100 and kept), 100, 100",
			len(h.ctl.est), len(h.ctl.lastCount), len(h.ctl.work))
	}
	if _, ok := h.ctl.est["kept"]; !ok {
		t.Error("the catalog model's demand history was pruned")
	}
}

// FuzzFilterText: the metrics line filter never panics, keeps only lines of the families asked
// for, and what it keeps parses as the text format whenever the whole input did.
func FuzzFilterText(f *testing.F) {
	f.Add([]byte(pendingType + `nv_inference_pending_request_count{model="m",version="1"} 3` + "\n# HELP x y\nx 1\n"))
	f.Add([]byte("nv_inference_pending_request_count_sum 3\n\t nv_gpu_memory_used_bytes{gpu_uuid=\"a\"} 5"))
	f.Add([]byte("#TYPE nv_gpu_memory_used_bytes gauge\n{\"nv_gpu_memory_used_bytes\"} 1\n\n"))
	names := []string{metricPending, metricGPUUsed}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := filterText(bytes.NewReader(in), names)
		if err != nil {
			return
		}
		for _, line := range bytes.SplitAfter(out, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if _, keep := lineFamily(line, names); !keep {
				t.Fatalf("kept %q, which is of no family asked for", line)
			}
		}
		if len(out) > len(in)+bytes.Count(in, []byte("\n"))+1 {
			t.Fatalf("kept %d bytes of %d", len(out), len(in))
		}
		whole, part := expfmt.NewTextParser(pmodel.UTF8Validation), expfmt.NewTextParser(pmodel.UTF8Validation)
		if _, err := whole.TextToMetricFamilies(bytes.NewReader(in)); err != nil {
			return
		}
		if _, err := part.TextToMetricFamilies(bytes.NewReader(out)); err != nil {
			t.Fatalf("the input parses, the %q kept of it does not: %v", out, err)
		}
	})
}

// TestOwedWorkSurvivesMetricsOutage: the expiry of owed work counts only time with a known
// queue. With the metrics unreadable for longer than owedExpiry, the first reading of 0 after
// the outage writes nothing off; the expiry runs from there.
func TestOwedWorkSurvivesMetricsOutage(t *testing.T) {
	mb, _, executing := owedHarness(t, 3)
	if got := executing(t0); got != 1 {
		t.Fatalf("executing %d with 3 queued, want 1", got)
	}
	mb.set(pendingType + `nv_inference_pending_request_count{model="m" 3` + "\n") // unparseable: the queue is unknown
	executing(t0.Add(time.Minute))
	executing(t0.Add(owedExpiry + time.Minute))
	mb.set(pendingType + `nv_inference_pending_request_count{model="m",version="1"} 0` + "\n")
	at := t0.Add(owedExpiry + 2*time.Minute)
	if got := executing(at); got != 4 {
		t.Fatalf("executing %d at the first reading after a %s outage, want the 4 owed", got, owedExpiry+time.Minute)
	}
	if got := executing(at.Add(owedExpiry)); got != 0 {
		t.Fatalf("executing %d %s after the outage with the queue at 0, want 0", got, owedExpiry)
	}
}
