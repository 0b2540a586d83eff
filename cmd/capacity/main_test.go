package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

func TestBadFlagsNameTheFlag(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  []string
		exact string // the whole of stderr, when set
	}{
		{name: "required flags", args: nil, want: []string{`--target ""`, "--model is required", `--mig-profile ""`}},
		{name: "ranges", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--slo-quantile=1.5", "--slo-latency=-1s", "--step-factor=1", "--window=0s"},
			want: []string{"--slo-quantile", "--slo-latency", "--step-factor", "--window"}},
		// Reported with the other bad flags; a request meeting the SLO timed out first before.
		{name: "request timeout below the SLO latency", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--slo-latency=500ms", "--request-timeout=200ms", "--window=0s"},
			exact: "capacity: invalid config: window (--window) is 0s, want (0, 1h0m0s]\n" +
				"capacity: invalid config: requestTimeout (--request-timeout) is 200ms, want >= slo.latency (--slo-latency) 500ms: a request that would meet the SLO would time out first and count as an error\n"},
		{name: "target without port", args: []string{"--target=localhost", "--model=m", "--mig-profile=1g.10gb"}, want: []string{`--target "localhost": want host:port`}},
		{name: "bad input tensor", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--input=X:FP33:1"}, want: []string{`--input "X:FP33:1": datatype "FP33"`}},
		// 6 GB of prompt per request before.
		{name: "openai prompt too long", args: []string{"--protocol=openai", "--target=http://localhost:8000", "--model=m", "--mig-profile=1g.10gb", "--prompt-tokens=2000000000", "--max-tokens=0"},
			want: []string{"--prompt-tokens 2000000000: want 1..1000000", "--max-tokens 0: want 1..1000000"}},
		// Each did nothing with the other protocol.
		{name: "openai flags with triton", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--max-tokens=64", "--ignore-eos"},
			want: []string{"--ignore-eos, --max-tokens: not used with --protocol=triton-grpc"}},
		{name: "triton flags with openai", args: []string{"--protocol=openai", "--target=http://localhost:8000", "--model=m", "--mig-profile=1g.10gb", "--input=X:FP32:1"},
			want: []string{"--input: not used with --protocol=openai"}},
		// Each also blamed --max-rate and --min-rate, at their defaults, against the bad start.
		{name: "start rate NaN", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--start-rate=NaN"}, exact: "capacity: invalid config: startRPS (--start-rate) is NaN, want [0.01389, 1e+06], or 0 to probe it\n"},
		{name: "start rate Inf", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--start-rate=Inf"}, exact: "capacity: invalid config: startRPS (--start-rate) is +Inf, want [0.01389, 1e+06], or 0 to probe it\n"},
		{name: "start rate negative", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--start-rate=-1"}, exact: "capacity: invalid config: startRPS (--start-rate) is -1, want [0.01389, 1e+06], or 0 to probe it\n"},
		// Past MaxRate: it was blamed on --max-rate at its default ("maxRPS (--max-rate) is 100000,
		// want [startRPS 2e+06, 1e+06]", an empty range).
		{name: "start rate past the generator", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--start-rate=2e6"}, exact: "capacity: invalid config: startRPS (--start-rate) is 2e+06, want [0.01389, 1e+06], or 0 to probe it\n"},
		{name: "max rate Inf, start probed", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--max-rate=Inf"}, exact: "capacity: invalid config: maxRPS (--max-rate) is +Inf, want [0.01389, 1e+06]\n"},
		{name: "min rate Inf", args: []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--start-rate=10", "--min-rate=Inf"}, exact: "capacity: invalid config: minRPS (--min-rate) is +Inf, want [0.01389, startRPS 10]\n"},
		{name: "openai target must be a URL", args: []string{"--protocol=openai", "--target=localhost:8000", "--model=m", "--mig-profile=1g.10gb"}, want: []string{"want the server's base URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2 (stderr %s)", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not contain %q", stderr.String(), w)
				}
			}
			if tt.exact != "" && stderr.String() != tt.exact {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.exact)
			}
		})
	}
}

func TestUnreachableNamesTheAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--target=" + addr, "--model=m", "--mig-profile=1g.10gb", "--nvml=off", "--connect-timeout=500ms", "--out=" + t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "target unreachable: --target "+addr) {
		t.Errorf("exit %d, stderr %q; want 1 naming --target %s", code, stderr.String(), addr)
	}
}

// short are flags that keep a run against the fake to a few seconds: 200 ms windows of at
// least 20 requests, at most 6 windows, a 20 % bisection.
var short = []string{"--window=200ms", "--min-window-requests=20", "--max-windows=6", "--precision=0.2", "--nvml=off"}

func startFake(t *testing.T, m tritontest.Model) *tritontest.Server {
	t.Helper()
	return tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		Models: []tritontest.Model{m}, StartupModels: []string{m.Name}})
}

// TestRecordEndToEnd: against the fake (1 GiB model, 300 ms load (three 100 ms memory samples), 5 ms × 4), the command writes
// records/<model>.<profile>.yaml with every field, the swap peak shows both copies, and the
// residency catalog takes its peak and load time through record:.
func TestRecordEndToEnd(t *testing.T) {
	srv := startFake(t, tritontest.Model{Name: "on", MemoryBytes: 1 << 30, LoadTime: 300 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"--target=" + srv.GRPCAddr(), "--metrics-url=" + srv.MetricsURL(), "--model=on", "--mig-profile=1g.10gb",
		"--slo-latency=500ms", "--out=" + filepath.Join(dir, "records"), "--digest=sha256:1ddc87c7174a6290c013f11b6ced738b0f7855bc240a12904ca65b0ed85d22dc"}, short...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	path := filepath.Join(dir, "records", "on.1g.10gb.yaml")
	rec, err := record.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Model != "on" || rec.SLOThroughputRPS <= 0 || rec.SLOThroughputRPS > 800 || rec.Memory.SteadyBytes != 1<<30 ||
		rec.Memory.PeakBytes != 1<<30 || rec.Memory.SwapPeakBytes != 2<<30 || !rec.Memory.ReturnedAfterUnload ||
		rec.LoadTimeSeconds < 0.3 || !rec.Verdict.Allowed || len(rec.Curve) < 2 || rec.LatencySeconds.P99 <= 0 || rec.Runtime.MemorySource != "triton-metrics" {
		t.Errorf("record = %+v", rec)
	}
	// Every top-level key, as other tools read them.
	data, _ := os.ReadFile(path)
	for _, key := range []string{"model", "digest", "profile", "runtime", "loadShape", "latencySeconds", "successRate", "sloThroughputRPS", "memory", "loadTimeSeconds", "verdict", "curve"} {
		if !bytes.Contains(data, []byte("\n"+key+":")) && !bytes.HasPrefix(data, []byte(key+":")) {
			t.Errorf("record has no top-level key %s", key)
		}
	}
	for _, want := range []string{`replicaConcurrency: "`, `replicaThroughput: "`} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout %q lacks %s", stdout.String(), want)
		}
	}
	if st, _ := srv.Model("on"); st.State != "READY" {
		t.Errorf("model left %s, want READY as found", st.State)
	}
	catalog := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catalog, []byte("models:\n  - name: on\n    digest: sha256:1ddc87c7174a6290c013f11b6ced738b0f7855bc240a12904ca65b0ed85d22dc\n    tier: P1\n    record: records/on.1g.10gb.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := residency.LoadCatalog(catalog)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cat.Model("on")
	if m.PeakMemoryBytes["1g.10gb"] != 1<<30 || m.SwapOverheadBytes != 1<<30 || m.LoadTime != time.Duration(rec.LoadTimeSeconds*float64(time.Second)) {
		t.Errorf("catalog model %+v, want the record's figures", m)
	}
}

// TestModelLeftAsFound: a model that was not loaded before the run is unloaded after it (the
// run loads it to measure, and the reload and unload measure the swap peak and the memory's
// return); one that was loaded is left READY (TestRecordEndToEnd).
func TestModelLeftAsFound(t *testing.T) {
	m := tritontest.Model{Name: "off", MemoryBytes: 1 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4}
	srv := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30, Models: []tritontest.Model{m}})
	if st, _ := srv.Model("off"); st.State == "READY" {
		t.Fatalf("model %s before the run, want not loaded", st.State)
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"--target=" + srv.GRPCAddr(), "--metrics-url=" + srv.MetricsURL(), "--model=off", "--mig-profile=1g.10gb",
		"--slo-latency=500ms", "--out=" + t.TempDir()}, short...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if st, _ := srv.Model("off"); st.State != "UNAVAILABLE" {
		t.Errorf("model left %s, want UNAVAILABLE as found", st.State)
	}
}

// TestPeakOverBudgetIsRefused: a 2 GiB model on a profile given 1 GiB gets a record with
// verdict refused, and the command exits 1.
func TestPeakOverBudgetIsRefused(t *testing.T) {
	srv := startFake(t, tritontest.Model{Name: "big", MemoryBytes: 2 << 30, LoadTime: 300 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"--target=" + srv.GRPCAddr(), "--metrics-url=" + srv.MetricsURL(), "--model=big", "--mig-profile=1g.10gb",
		"--budget-bytes=1073741824", "--reserve-bytes=0", "--out=" + dir}, short...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	rec, err := record.Read(filepath.Join(dir, "big.1g.10gb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Verdict.Allowed || rec.Verdict.HeadroomBytes != -(3<<30) || !strings.Contains(strings.Join(rec.Verdict.Limits, ";"), "refused: peak 2.00GiB + reserve 0.0MiB exceeds the 1g.10gb budget 1.00GiB") {
		t.Errorf("verdict %+v, want refused with headroom −3 GiB (swap peak 4 GiB in 1 GiB)", rec.Verdict)
	}
	if !strings.Contains(stderr.String(), "admission refused") {
		t.Errorf("stderr %q does not say refused", stderr.String())
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openAIServer is an OpenAI-compatible server streaming as vLLM does: GET /v1/models lists
// model; POST /v1/completions is handed to complete (which reads the request) and, when it
// returns true, answered with one streamed token and [DONE] (false: nothing is written); any
// other path is 404. It returns the base URL; the server is closed when the test ends.
func openAIServer(t *testing.T, model string, complete func(r *http.Request) bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprintf(w, `{"data":[{"id":%q}]}`, model)
		case "/v1/completions":
			if !complete(r) {
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOpenAIWithTrace: --protocol=openai against a server streaming as vLLM does, with the
// Azure LLM code trace's arrival shape and token columns: the record says so, the server sees
// the trace's varied max_tokens, and the catalog-facing memory figures are not claimed.
func TestOpenAIWithTrace(t *testing.T) {
	url, maxTokens := maxTokensServer(t, "meta/llama")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	// A served model name with a slash, as vLLM's are: the record is one file in --out.
	args := append([]string{"--protocol=openai", "--target=" + url, "--model=meta/llama", "--mig-profile=h100-80gb", "--slo-latency=1s",
		"--trace=../../replay/demo/AzureLLMInferenceTrace_code.csv", "--start-rate=50", "--max-rate=50", "--min-rate=50", "--max-lag=1s", "--out=" + dir}, short...)
	// The trace is bursty (lulls of a minute): whether 50 req/s in its shape passes in these
	// short windows is not the point here; allowed (0) or refused (1), the record is written.
	// Its bursts are many times the mean (about 500 req/s over 1 s at a 50 req/s mean): a send
	// may start up to 1 s late before the level counts as client-bound, which ends the run
	// with exit 1 and no record. (At 200 req/s and the default 100 ms, a loaded machine under
	// the race detector once ended with no record, most likely so.)
	code := run(context.Background(), args, &stdout, &stderr)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rec, err := record.Read(filepath.Join(dir, "meta_llama.h100-80gb.yaml"))
	if err != nil {
		t.Fatalf("exit %d, %v; stderr:\n%s", code, err, stderr.String())
	}
	if rec.LoadShape.Arrivals != "trace AzureLLMInferenceTrace_code.csv" || !strings.Contains(rec.LoadShape.Request, "trace requests in turn") ||
		rec.Memory.SwapPeakBytes != 0 || rec.LoadTimeSeconds != 0 || len(rec.Curve) == 0 {
		t.Errorf("record %+v", rec)
	}
	if n := len(maxTokens()); n < 10 {
		t.Errorf("server saw %d distinct max_tokens, want the trace's variety", n)
	}
}

// TestBadInputRefusedBeforeMeasuring: a bad --trace or an unwritable --out is exit 2 naming
// the flag, found before the model is touched (before: the trace was read after loading the
// model, and --out only after the whole search, minutes later); a huge --input-data is
// refused without reading it all; values that made a run endless are out of range.
func TestBadInputRefusedBeforeMeasuring(t *testing.T) {
	fake := startFake(t, tritontest.Model{Name: "m", MemoryBytes: 1 << 30, LoadTime: 10 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.csv")
	if err := os.WriteFile(junk, []byte("\x00\x01\x02 not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 2<<30); err != nil { // sparse: 2 GiB of zeros, no disk
		t.Fatal(err)
	}
	base := append([]string{"--target=" + fake.GRPCAddr(), "--metrics-url=" + fake.MetricsURL(), "--model=m", "--mig-profile=1g.10gb"}, short...)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"junk trace", []string{"--trace=" + junk, "--out=" + dir}, "capacity: invalid config: --trace " + junk + ": unknown trace format"},
		{"out is a file", []string{"--out=" + filepath.Join(notDir, "records")}, "capacity: invalid config: --out: mkdir " + notDir + ": not a directory"},
		{"2 GiB input data", []string{"--input-data=" + huge, "--out=" + dir}, "--input-data: " + huge + " is over 268435456 bytes"},
		// 1e-300 bisected for ever (adjacent floats never get within it).
		{"precision too fine", []string{"--precision=1e-300", "--out=" + dir}, "precision (--precision) is 1e-300, want [0.001, 1)"},
		{"window of 114 years", []string{"--window=1000000h", "--out=" + dir}, "window (--window) is 1000000h0m0s, want (0, 1h0m0s]"},
		{"two billion requests a window", []string{"--min-window-requests=2000000000", "--out=" + dir}, "minWindowRequests (--min-window-requests) is 2000000000, want 1..100000"},
		// A level at 1e9 req/s walked a billion arrivals per window it could never send. The
		// floor is --min-window-requests 20 ÷ 1 h here.
		{"rate past the generator", []string{"--start-rate=1e9", "--max-rate=1e12", "--out=" + dir}, "startRPS (--start-rate) is 1e+09, want [0.005556, 1e+06], or 0 to probe it\ncapacity: invalid config: maxRPS (--max-rate) is 1e+12, want [0.005556, 1e+06]\n"},
		// The start rate is probed here: the error is --min-rate's own, not "startRPS is NaN".
		{"min rate NaN", []string{"--min-rate=NaN", "--out=" + dir}, "capacity: invalid config: minRPS (--min-rate) is NaN, want [0.005556, maxRPS 100000]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(append([]string(nil), base...), tt.args...), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 containing %q", code, stderr.String(), tt.want)
			}
			if strings.Contains(stderr.String(), "capacity: capacity:") || !slices.Contains(tt.args, "--start-rate=1e9") && strings.Contains(stderr.String(), "startRPS") {
				t.Errorf("stderr %q: doubled prefix or a flag not given", stderr.String())
			}
			if st, _ := fake.Model("m"); st.Loads != 1 || st.Unloads != 0 {
				t.Errorf("model loads/unloads = %d/%d, want 1/0 (the startup load only): the bad run touched it", st.Loads, st.Unloads)
			}
		})
	}
}

// TestSkipMemoryHelpGivesTheLoadBound: --skip-memory's help names the fixed bound of each
// load, which is the Triton client's default (the one the residency controller loads under),
// so the help cannot drift from it.
func TestSkipMemoryHelpGivesTheLoadBound(t *testing.T) {
	var stdout, stderr bytes.Buffer
	want := "each load is bounded by " + triton.DefaultConfig().LoadTimeout.String() + " and each unload's wait by 5m0s (fixed)"
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), want) {
		t.Errorf("--help: exit %d, stderr %q; want 0 and %q", code, stderr.String(), want)
	}
}

// TestVersion: --version prints the module version line and measures nothing, as every command.
func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, &stdout, &stderr); code != 0 ||
		!strings.HasPrefix(stdout.String(), "capacity ") || !strings.Contains(stdout.String(), "github.com/inferscale/inferscale") || stderr.Len() != 0 {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want 0 and one version line", code, stdout.String(), stderr.String())
	}
}

// flipWriter is a log writer that calls flip once, at the first per-level progress line.
type flipWriter struct {
	bytes.Buffer
	once sync.Once
	flip func()
}

func (w *flipWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("req/s offered")) {
		w.once.Do(w.flip)
	}
	return w.Buffer.Write(p)
}

// TestClientBoundAfterPassSaysLowerBound: the first level (100 req/s, answered in 20 ms)
// passes; from then on the server holds every request, so at 200 req/s the generator's 50
// in flight are all taken and the level is client-bound. μ is what the 100 req/s level served
// (at most 100), a lower bound: the record's limits said so, but stdout printed μ as if
// measured and the level only as "passed false". Now stdout says it in one line, and the
// level's progress line says why.
func TestClientBoundAfterPassSaysLowerBound(t *testing.T) {
	var hold atomic.Bool
	url := openAIServer(t, "m", func(r *http.Request) bool {
		_, _ = io.Copy(io.Discard, r.Body) // the server sees the client's cancel only once the body is read
		if hold.Load() {
			<-r.Context().Done() // until the level's end cancels it
			return false
		}
		time.Sleep(20 * time.Millisecond)
		return true
	})
	dir := t.TempDir()
	var stdout bytes.Buffer
	stderr := &flipWriter{flip: func() { hold.Store(true) }}
	// Four windows a level whatever the latencies (max-windows 4), so the seeded schedule sends
	// the same arrivals every run; stability 1 keeps a slow machine's jitter from failing the
	// first level as growing.
	args := []string{"--protocol=openai", "--target=" + url, "--model=m", "--mig-profile=h100-80gb", "--slo-latency=10s",
		"--start-rate=100", "--max-rate=1000", "--max-in-flight=50", "--window=200ms", "--min-window-requests=20", "--max-windows=4", "--stability=1",
		"--nvml=off", "--digest=sha256:1ddc87c7174a6290c013f11b6ced738b0f7855bc240a12904ca65b0ed85d22dc", "--out=" + dir}
	if code := run(context.Background(), args, &stdout, stderr); code != 0 {
		t.Fatalf("exit %d, want 0 (the verdict allows the μ served at 100 req/s): %s", code, stderr.String())
	}
	const reason = "114 of 164 arrivals not sent: the generator's in-flight cap (50) was reached, below the 2000 in flight the rate needs at the SLO latency"
	rec, err := record.Read(filepath.Join(dir, "m.h100-80gb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// μ is the 100 req/s level's served rate (the seeded schedule puts fewer than 100 × 0.6 s
	// arrivals in its last three windows), capped at 100.
	var served float64
	for _, p := range rec.Curve {
		if p.OfferedRPS == 100 && p.Passed {
			served = p.ThroughputRPS
		}
	}
	if served <= 0 || served > 100 {
		t.Fatalf("curve %+v: want a passing 100 req/s level that served (0, 100] req/s", rec.Curve)
	}
	lines := strings.Split(stdout.String(), "\n")
	want := fmt.Sprintf("μ %.4g req/s is a lower bound: the level at 200 req/s was client-bound (%s), so no higher rate was measured", served, reason)
	if len(lines) < 2 || lines[1] != want {
		t.Errorf("stdout line 2 = %q, want %q\nstdout:\n%s", lines[min(1, len(lines)-1)], want, stdout.String())
	}
	if !strings.Contains(stderr.String(), "passed false (4 windows), client-bound: "+reason+"\n") {
		t.Errorf("stderr does not give the client-bound level's reason:\n%s", stderr.String())
	}
	wantLimit := "client-bound at 200 req/s (" + reason + "): μ is from the highest rate measured before, a lower bound"
	if rec.SLOThroughputRPS != served || !slices.Contains(rec.Verdict.Limits, wantLimit) || !rec.Verdict.Allowed {
		t.Errorf("record μ %v, verdict %+v; want μ %v (served at 100 req/s), allowed, limit %q", rec.SLOThroughputRPS, rec.Verdict, served, wantLimit)
	}
}

// TestMetricsOutOfRange: Triton's nv_gpu_memory_used_bytes reading 1e30 or NaN was converted
// to int64 as math.MinInt64, so baseline and every sample were the same wrapped number, the
// model's steady and peak memory came out 0 bytes and it was admitted; a negative reading
// made the sampler's initial 0 look like 5 GB above it. Such a reading is now an error: the
// figures come from Triton's memory_usage statistics (1 GiB here), and the record says the
// device was not read and the swap peak not measured — instead of claiming the memory "did not
// return" after the unload.
func TestMetricsOutOfRange(t *testing.T) {
	for _, v := range []string{"1e30", "NaN", "-5e9"} {
		t.Run(v, func(t *testing.T) {
			srv := startFake(t, tritontest.Model{Name: "m", MemoryBytes: 1 << 30, LoadTime: 10 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
			metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "# TYPE nv_gpu_memory_used_bytes gauge\nnv_gpu_memory_used_bytes{gpu_uuid=\"GPU-0\"} %s\n", v)
			}))
			defer metrics.Close()
			dir := t.TempDir()
			rec := measureRecord(t, dir, append([]string{"--target=" + srv.GRPCAddr(), "--metrics-url=" + metrics.URL + "/metrics", "--model=m", "--mig-profile=1g.10gb",
				"--slo-latency=500ms", "--start-rate=50", "--max-rate=50", "--out=" + dir}, short...))
			value := map[string]string{"1e30": "1e+30", "NaN": "NaN", "-5e9": "-5e+09"}[v]
			want := "no device memory reading (--metrics-url " + metrics.URL + "/metrics: nv_gpu_memory_used_bytes " + value +
				" is outside [0, 1125899906842624]): steady and peak memory come from Triton's memory_usage statistics at load (memorySource triton-statistics)," +
				" the swap peak was not measured (recorded as the peak), nor whether memory returned after the unload"
			if rec.Memory.SteadyBytes != 1<<30 || rec.Memory.PeakBytes != 1<<30 || rec.Runtime.MemorySource != "triton-statistics" || !slices.Contains(rec.Verdict.Limits, want) {
				t.Errorf("memory %+v from %q, limits %q; want 1 GiB from triton-statistics and the limit %q", rec.Memory, rec.Runtime.MemorySource, rec.Verdict.Limits, want)
			}
			for _, l := range rec.Verdict.Limits {
				if strings.Contains(l, "did not return") {
					t.Errorf("limit %q: the return was not measured", l)
				}
			}
		})
	}
}

// TestOpenAIEndpointAnswersWrongly: GET /v1/models answering 404 (a base URL ending in /v1, a
// server that is not OpenAI-compatible) passed as reachable, and a model the server does not
// list was measured anyway; both then failed every probe request with a list of 20 identical
// codes and a hint naming --input and --input-data, flags --protocol=openai refuses.
func TestOpenAIEndpointAnswersWrongly(t *testing.T) {
	tests := []struct {
		name     string
		models   int    // status of GET /v1/models
		list     string // its body
		model    string
		want     string // stderr after the URL
		wantErr  int
		wantSent int32 // completions the probe sent (all 20 before, however many had failed)
	}{
		{name: "models 404", models: 404, model: "m", wantErr: 1,
			want: ": GET /v1/models answered HTTP 404; want an OpenAI-compatible server's base URL (e.g. http://localhost:8000, without /v1)\n"},
		{name: "model not listed", models: 200, list: `{"data":[{"id":"llama"},{"id":"mistral"}]}`, model: "gpt", wantErr: 1,
			want: " (GET /v1/models lists \"llama\", \"mistral\")\n"},
		{name: "every completion 404", models: 200, list: `not a model list`, model: "m", wantErr: 1,
			want: "--model \"m\" not checked: GET /v1/models answered no OpenAI model list ({\"data\":[{\"id\":…}]})\n" +
				"capacity: probe: 11 of 11 requests failed (11 × http 404; it stops once more than half of its 20 fail): check --model (the served model name), --prompt-tokens and --max-tokens\n", wantSent: 11},
		{name: "a model list past 1 MiB", models: 200, list: `{"data":[{"id":"` + strings.Repeat("x", 1<<20) + `"}]}`, model: "m", wantErr: 1,
			want: "--model \"m\" not checked: GET /v1/models answered more than 1 MiB (the most read)\n" +
				"capacity: probe: 11 of 11 requests failed (11 × http 404; it stops once more than half of its 20 fail): check --model (the served model name), --prompt-tokens and --max-tokens\n", wantSent: 11},
		{name: "a JSON object that is no model list", models: 200, list: `{"object":"list"}`, model: "m", wantErr: 1,
			want: "--model \"m\" not checked: GET /v1/models answered no OpenAI model list ({\"data\":[{\"id\":…}]})\n" +
				"capacity: probe: 11 of 11 requests failed (11 × http 404; it stops once more than half of its 20 fail): check --model (the served model name), --prompt-tokens and --max-tokens\n", wantSent: 11},
		{name: "an empty model list", models: 200, list: `{"data":[]}`, model: "m", wantErr: 1,
			want: "--model \"m\" not checked: GET /v1/models lists no model\n" +
				"capacity: probe: 11 of 11 requests failed (11 × http 404; it stops once more than half of its 20 fail): check --model (the served model name), --prompt-tokens and --max-tokens\n", wantSent: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sent atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if r.URL.Path == "/v1/completions" {
					sent.Add(1)
				}
				if r.URL.Path == "/v1/models" {
					w.WriteHeader(tt.models)
					fmt.Fprint(w, tt.list)
					return
				}
				http.NotFound(w, r)
			}))
			defer srv.Close()
			var stdout, stderr bytes.Buffer
			args := []string{"--protocol=openai", "--target=" + srv.URL, "--model=" + tt.model, "--mig-profile=h100-80gb", "--nvml=off", "--out=" + t.TempDir()}
			code := run(context.Background(), args, &stdout, &stderr)
			want := tt.want
			switch tt.name {
			case "models 404":
				want = "capacity: target unreachable: --target " + srv.URL + want
			case "model not listed":
				want = "capacity: --model \"gpt\": not served by " + srv.URL + want
			}
			if code != tt.wantErr || stderr.String() != want || sent.Load() != tt.wantSent {
				t.Errorf("exit %d, stderr %q, %d completions sent; want %d, %q, %d", code, stderr.String(), sent.Load(), tt.wantErr, want, tt.wantSent)
			}
		})
	}
}

// measureRecord runs cmd/capacity with args, which must succeed, and returns the record it
// wrote for model m on 1g.10gb under dir.
func measureRecord(t *testing.T, dir string, args []string) record.Record {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rec, err := record.Read(filepath.Join(dir, "m.1g.10gb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
