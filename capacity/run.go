package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/replay"
	"github.com/inferscale/inferscale/residency/gpu"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
)

// ErrRefused is returned by Run when the record's verdict is refused (the record is still
// written).
var ErrRefused = errors.New("admission refused")

// ErrUnreachable is wrapped when the target does not answer.
var ErrUnreachable = errors.New("target unreachable")

// Protocols Run speaks.
const (
	ProtocolTriton = "triton-grpc"
	ProtocolOpenAI = "openai"
)

// Config is one capacity measurement: what to measure, how, and where the record goes.
type Config struct {
	// Protocol is ProtocolTriton (Target host:port of Triton's gRPC endpoint) or
	// ProtocolOpenAI (Target the server's base URL, http://host:port).
	Protocol, Target string
	// Model is the model's name on the server; Digest its immutable artifact digest ("" when
	// unknown: the record says so).
	Model, Digest string
	// Profile is the MIG profile (or whole-GPU name) measured on.
	Profile string
	// BudgetBytes is the profile's usable memory; 0 means NVML's reading of the device, else
	// the profile table (residency/plan). ReserveBytes is kept back from it. Range: >= 0.
	BudgetBytes, ReserveBytes int64
	// MetricsURL is Triton's Prometheus endpoint (nv_gpu_memory_used_bytes); "" means
	// http://<target host>:8002/metrics.
	MetricsURL string
	// NVML is "auto" (use it when the device opens), "on" (fail without it) or "off".
	NVML string
	// Request is the ModelInfer request (Triton); built by InferRequest.
	Request *inference.ModelInferRequest
	// OpenAI is the request shape for ProtocolOpenAI (BaseURL and Model are filled from Target
	// and Model).
	OpenAI OpenAITarget
	// Trace, when set, is a request trace (any format package replay reads) whose
	// inter-arrival shape replaces Poisson arrivals (Generator.UseTraceShape).
	Trace string
	// Measure and Search configure the load search; Seed the arrival schedule.
	Measure MeasureConfig
	Search  SearchConfig
	Seed    uint64
	// SkipMemory leaves out the load/unload/reload steps (a server in default model-control
	// mode, or an OpenAI endpoint, which has no repository API). Without it, each of the up to
	// three loads is bounded by triton.DefaultConfig's LoadTimeout (10 min, the bound the
	// residency controller loads the model under in production), the wait for Triton to report
	// the model unloaded by 5 min, and the other repository calls by its CallTimeout (10 s);
	// these bounds are fixed, not flags.
	SkipMemory bool
	// OutDir is the folder the record is written to, as <model>.<profile>.yaml.
	OutDir string
	// ConnectTimeout bounds the first contact with the target (Triton's ServerLive, or GET
	// /v1/models), each read of MetricsURL, and each new connection the load opens: the
	// connect attempt of the gRPC channel, the dial and TLS handshake of the OpenAI client
	// Run builds. Each request is bounded by Measure.RequestTimeout. Range:
	// (0, MaxConnectTimeout].
	ConnectTimeout time.Duration
}

// MaxConnectTimeout bounds Config.ConnectTimeout: a target that accepts connections and never
// answers ends the run within it (the first contact) instead of after an unbounded wait.
const MaxConnectTimeout = 5 * time.Minute

// DefaultConfig measures a Triton model with DefaultMeasureConfig and DefaultSearchConfig,
// the first rate probed (Search.StartRPS 0).
func DefaultConfig() Config {
	return Config{
		Protocol: ProtocolTriton, NVML: "auto", ReserveBytes: 256 << 20,
		Measure: DefaultMeasureConfig(), Search: probed(DefaultSearchConfig()), Seed: 1,
		OpenAI:         OpenAITarget{PromptTokens: 128, MaxTokens: 128},
		ConnectTimeout: 5 * time.Second, OutDir: ".",
	}
}

// Validate returns every violation, each naming its flag and range.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	switch c.Protocol {
	case ProtocolTriton:
		if _, _, err := net.SplitHostPort(c.Target); err != nil {
			bad("--target %q: want host:port of Triton's gRPC endpoint (e.g. localhost:8001)", c.Target)
		}
	case ProtocolOpenAI:
		if u, err := url.Parse(c.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("--target %q: want the server's base URL (e.g. http://localhost:8000)", c.Target)
		}
		if c.OpenAI.PromptTokens < 1 || c.OpenAI.PromptTokens > MaxOpenAITokens {
			bad("--prompt-tokens %d: want 1..%d", c.OpenAI.PromptTokens, MaxOpenAITokens)
		}
		if c.OpenAI.MaxTokens < 1 || c.OpenAI.MaxTokens > MaxOpenAITokens {
			bad("--max-tokens %d: want 1..%d", c.OpenAI.MaxTokens, MaxOpenAITokens)
		}
	default:
		bad("--protocol %q: want %s or %s", c.Protocol, ProtocolTriton, ProtocolOpenAI)
	}
	if c.Model == "" {
		bad("--model is required: the model's name on the server")
	}
	if !plan.ValidProfile(c.Profile) {
		bad("--mig-profile %q: want a profile name (lower case, e.g. 1g.10gb or h100-80gb)", c.Profile)
	}
	if c.BudgetBytes < 0 || c.BudgetBytes > plan.MaxMemoryBytes {
		bad("--budget-bytes %d: want 0 (NVML or the profile table) to %d", c.BudgetBytes, plan.MaxMemoryBytes)
	}
	if c.BudgetBytes == 0 {
		if _, ok := plan.ProfileBytes(c.Profile); !ok && c.NVML == "off" && plan.ValidProfile(c.Profile) {
			bad("--mig-profile %q is not in the profile table (%s) and NVML is off: set --budget-bytes", c.Profile, strings.Join(plan.Profiles(), ", "))
		}
	}
	if c.ReserveBytes < 0 || c.ReserveBytes > plan.MaxMemoryBytes {
		bad("--reserve-bytes %d: want 0 to %d", c.ReserveBytes, plan.MaxMemoryBytes)
	}
	if c.NVML != "auto" && c.NVML != "on" && c.NVML != "off" {
		bad("--nvml %q: want auto, on or off", c.NVML)
	}
	if c.MetricsURL != "" {
		if u, err := url.Parse(c.MetricsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("--metrics-url %q: want http://host:port/metrics", c.MetricsURL)
		}
	}
	if c.OutDir == "" {
		bad("--out is empty: want the folder to write the record to")
	}
	if c.ConnectTimeout <= 0 || c.ConnectTimeout > MaxConnectTimeout {
		bad("--connect-timeout %v: want (0, %v]", c.ConnectTimeout, MaxConnectTimeout)
	}
	// Each request in flight holds its own encoded copy until it is sent: a 65 MiB request at
	// the default --max-in-flight of 4096 is 260 GiB.
	if c.Request != nil && c.Measure.MaxInFlight > 0 {
		if n := int64(proto.Size(c.Request)); n*int64(c.Measure.MaxInFlight) > MaxInFlightBytes {
			bad("--max-in-flight %d × a %d-byte request (--input, --input-data) is %d bytes in flight, over the %d-byte (4 GiB) bound; want --max-in-flight at most %d, or a smaller request",
				c.Measure.MaxInFlight, n, n*int64(c.Measure.MaxInFlight), int64(MaxInFlightBytes), max(1, MaxInFlightBytes/n))
		}
	}
	// StartRPS 0 is probed by Run. The rates are held to RateFloor of --min-window-requests
	// (when that is in range; else to MinRate, its own error said by Measure.Validate).
	mwr := c.Measure.MinWindowRequests
	if mwr < 1 || mwr > MaxWindowRequests {
		mwr = 1
	}
	return errors.Join(append(errs, c.Measure.Validate(), c.Search.validate(true, mwr))...)
}

// MaxInFlightBytes bounds --max-in-flight × the request's encoded size (bytes): the memory the
// generator's requests in flight may hold at once.
const MaxInFlightBytes = 4 << 30

// probeRequests is how many requests, one at a time, estimate the service time when
// Search.StartRPS is 0.
const probeRequests = 20

// probeStart returns the search's first rate when none is given: half the rate one
// execution slot serves, 0.5 ÷ S, with S the median latency of probeRequests requests sent one
// after another (no queueing) — a rate any model handles, reached in few doublings.
func probeStart(ctx context.Context, t Target, cfg SearchConfig, timeout time.Duration) (float64, error) {
	lat := make([]float64, 0, probeRequests)
	var codes []string
	// Once more than half have failed the probe has failed: a server that holds every request
	// took all 20 request timeouts (10 minutes at the default 30 s) to say so.
	for len(codes) <= probeRequests/2 && len(lat)+len(codes) < probeRequests {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		out := t.Send(rctx, time.Now)
		cancel()
		if out.Code != "" {
			codes = append(codes, out.Code)
			continue
		}
		lat = append(lat, out.Done.Sub(start).Seconds())
	}
	if len(lat) < probeRequests/2 {
		if !slices.ContainsFunc(codes, func(c string) bool { return c != codeTimeout }) {
			return 0, fmt.Errorf("%w: probe: %d of %d requests timed out: %s did not answer within --request-timeout %v",
				ErrUnreachable, len(codes), len(codes)+len(lat), requestName(t), timeout)
		}
		hint := "check --model and the request (--input, --input-data)"
		if _, ok := t.(OpenAITarget); ok {
			hint = "check --model (the served model name), --prompt-tokens and --max-tokens"
		}
		return 0, fmt.Errorf("probe: %d of %d requests failed (%s; it stops once more than half of its %d fail): %s", len(codes), len(codes)+len(lat), countCodes(codes), probeRequests, hint)
	}
	slices.Sort(lat)
	s := max(Quantile(lat, 0.5), 1e-6)
	return min(max(cfg.MinRPS, 0.5/s), cfg.MaxRPS), nil
}

// codeTimeout is Outcome.Code of a request not answered within its timeout.
const codeTimeout = "DeadlineExceeded"

// requestName names the request t sends, for errors.
func requestName(t Target) string {
	switch t.(type) {
	case TritonTarget:
		return "ModelInfer"
	case OpenAITarget:
		return "POST /v1/completions"
	}
	return "the target"
}

// countCodes words error codes by count, most frequent first: "20 × http 404" (each of the
// 20 was listed before).
func countCodes(codes []string) string {
	n := map[string]int{}
	var order []string
	for _, c := range codes {
		if n[c] == 0 {
			order = append(order, c)
		}
		n[c]++
	}
	return wordCounts(n, order)
}

// countByCode words per-code counts as countCodes does, most frequent first, then by name.
func countByCode(n map[string]int) string {
	return wordCounts(n, slices.Sorted(maps.Keys(n)))
}

// wordCounts words n[c] for each code of order, most frequent first (ties in order).
func wordCounts(n map[string]int, order []string) string {
	slices.SortStableFunc(order, func(a, b string) int { return n[b] - n[a] })
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = fmt.Sprintf("%d × %s", n[c], c)
	}
	return strings.Join(parts, ", ")
}

// timedOut counts the requests of levels that timed out.
func timedOut(levels []Level) int {
	n := 0
	for _, l := range levels {
		n += l.ErrorsByCode[codeTimeout]
	}
	return n
}

// Written is what Run produced.
type Written struct {
	Record record.Record
	// Path is the record's file.
	Path string
	// ClientBound is the level that ended the search client-bound after an earlier level had
	// passed (nil when none did): the record's μ is then a lower bound (LowerBoundNote).
	ClientBound *Level
	// Best is the highest passing level, whose served rate (capped at its offered rate) is the
	// record's μ (Result.Best; zero when no level passed).
	Best Level
}

// MuNote is what the command prints after μ: the offered and served rates of the level that
// set it ("" when no level passed), so that a μ below the rate offered reads as measured.
func (w Written) MuNote() string {
	if w.Record.SLOThroughputRPS <= 0 {
		return ""
	}
	return fmt.Sprintf(" (served at the highest passing level: %.4g req/s offered, %.4g served)", w.Best.OfferedRPS, w.Best.ThroughputRPS)
}

// LowerBoundNote is the line the command prints after the record's when a level turned
// client-bound after an earlier one passed: the level's rate, why, and that μ is only a lower
// bound. "" when no level did.
func (w Written) LowerBoundNote() string {
	if w.ClientBound == nil {
		return ""
	}
	return fmt.Sprintf("μ %.4g req/s is a lower bound: the level at %.4g req/s was client-bound (%s), so no higher rate was measured",
		w.Record.SLOThroughputRPS, w.ClientBound.OfferedRPS, w.ClientBound.ClientBoundReason)
}

// Run measures cfg.Model, writes its admission record to cfg.OutDir and returns it. Progress
// goes to log (one line per level). A record whose verdict is refused is written and Run
// returns ErrRefused with it; a client-bound search writes no record and returns
// ErrClientBound.
func Run(ctx context.Context, cfg Config, log io.Writer) (Written, error) {
	if err := cfg.Validate(); err != nil {
		return Written{}, err
	}
	rec := record.Record{
		Model: cfg.Model, Digest: cfg.Digest, Profile: cfg.Profile,
		Runtime: record.Runtime{Target: cfg.Target, Protocol: cfg.Protocol, MIGProfile: cfg.Profile, MemorySource: "none",
			MeasuredAt: time.Now().UTC().Format(time.RFC3339)},
		LoadShape: record.LoadShape{Arrivals: "poisson", SLOLatencySeconds: cfg.Measure.SLO.Latency.Seconds(),
			SLOQuantile: cfg.Measure.SLO.Quantile, MaxErrorRate: cfg.Measure.SLO.MaxErrorRate,
			WindowSeconds: cfg.Measure.Window.Seconds(), MaxWindows: cfg.Measure.MaxWindows, Stability: cfg.Measure.Stability, Seed: cfg.Seed},
	}
	// Bad input files are refused before the target is contacted or a model loaded.
	var loaded *replay.Loaded
	if cfg.Trace != "" {
		l, err := replay.Load(cfg.Trace, "", cfg.Seed)
		if err != nil {
			return Written{}, traceError(cfg.Trace, err)
		}
		if l.Trace == nil {
			return Written{}, fmt.Errorf("%w: --trace %s: a %s trace has no per-request arrival times", ErrInvalidConfig, cfg.Trace, l.Format)
		}
		loaded = l
	}
	// A record that cannot be written is found out now, not after minutes of measuring.
	if err := checkWritable(cfg.OutDir); err != nil {
		return Written{}, fmt.Errorf("%w: --out: %w", ErrInvalidConfig, err)
	}
	var limits []string
	note := func(format string, args ...any) { limits = append(limits, fmt.Sprintf(format, args...)) }
	if cfg.Digest == "" {
		note("no --digest given: the record cannot be matched to an immutable artifact")
	}
	note("the server's version is not readable through inferscale's Triton protocol subset (no ServerMetadata)")

	mem := memSource{metricsURL: cfg.MetricsURL, client: &http.Client{Timeout: cfg.ConnectTimeout}}
	// Without a load there are no memory figures at all, the server's or any other.
	memFrom := "; memory from the server's own figures"
	if cfg.SkipMemory || cfg.Protocol == ProtocolOpenAI {
		memFrom = ""
	}
	if cfg.NVML == "off" {
		note("--nvml=off: no GPU product, driver or CUDA version%s", memFrom)
	} else {
		dev, closeDev, err := gpu.System(os.Getenv("NVIDIA_VISIBLE_DEVICES"))
		switch {
		case err == nil:
			defer closeDev()
			mem.nvml = dev
			rec.Runtime.GPUProduct = dev.Name
			rec.Runtime.DriverVersion, rec.Runtime.CUDAVersion = driverVersions()
			if dev.Profile != "" {
				rec.Runtime.MIGProfile = dev.Profile
			}
			if cfg.BudgetBytes == 0 {
				cfg.BudgetBytes = dev.TotalBytes
			}
		case cfg.NVML == "on":
			return Written{}, fmt.Errorf("--nvml=on: %w", err)
		default:
			note("NVML not available (%v): no GPU product, driver or CUDA version%s", err, memFrom)
		}
	}
	if cfg.BudgetBytes == 0 {
		b, ok := plan.ProfileBytes(cfg.Profile)
		if !ok {
			return Written{}, fmt.Errorf("%w: --mig-profile %q is not in the profile table and NVML is not available: set --budget-bytes", ErrInvalidConfig, cfg.Profile)
		}
		cfg.BudgetBytes = b
	}

	var target Target
	var tc *triton.Client
	switch cfg.Protocol {
	case ProtocolTriton:
		if mem.metricsURL == "" {
			host, _, _ := net.SplitHostPort(cfg.Target)
			mem.metricsURL = "http://" + net.JoinHostPort(host, "8002") + "/metrics"
		}
		conn, err := grpc.NewClient(cfg.Target, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: cfg.ConnectTimeout}))
		if err != nil {
			return Written{}, fmt.Errorf("--target %s: %w", cfg.Target, err)
		}
		defer conn.Close()
		tc, err = triton.New(conn, triton.DefaultConfig())
		if err != nil {
			return Written{}, err
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
		live, err := tc.ServerLive(cctx)
		cancel()
		if err := liveError(cctx, live, err, cfg.ConnectTimeout); err != nil {
			return Written{}, fmt.Errorf("%w: --target %s: %w", ErrUnreachable, cfg.Target, err)
		}
		req := cfg.Request
		if req == nil {
			req = &inference.ModelInferRequest{ModelName: cfg.Model}
		}
		target = TritonTarget{Client: inference.NewGRPCInferenceServiceClient(conn), Request: req}
	case ProtocolOpenAI:
		o := cfg.OpenAI
		o.BaseURL, o.Model = cfg.Target, cfg.Model
		if o.Client == nil {
			tr := &http.Transport{MaxIdleConnsPerHost: cfg.Measure.MaxInFlight, TLSHandshakeTimeout: cfg.ConnectTimeout, ForceAttemptHTTP2: true, // as http.DefaultTransport: a custom DialContext turns HTTP/2 off otherwise
				DialContext: (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext}
			defer tr.CloseIdleConnections()
			o.Client = &http.Client{Transport: tr}
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
		req, _ := http.NewRequestWithContext(cctx, http.MethodGet, strings.TrimSuffix(cfg.Target, "/")+"/v1/models", nil)
		resp, err := o.Client.Do(req)
		if err != nil {
			cancel()
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() { // the dial's or the context's
				return Written{}, fmt.Errorf("%w: --target %s: GET /v1/models did not answer within --connect-timeout %v", ErrUnreachable, cfg.Target, cfg.ConnectTimeout)
			}
			return Written{}, fmt.Errorf("%w: --target %s: GET /v1/models: %v", ErrUnreachable, cfg.Target, err)
		}
		note, err := checkModelList(resp, cfg.Target, cfg.Model)
		resp.Body.Close()
		cancel()
		if err != nil {
			return Written{}, err
		}
		if note != "" {
			fmt.Fprintf(log, "--model %s not checked: %s\n", errtext.Quote(cfg.Model, 64), note)
		}
		target = o
		cfg.SkipMemory = true
	}
	rec.LoadShape.Request = target.Describe()

	var baseline int64
	var wasLoaded bool   // READY or LOADING before the run: left READY after it
	var devReadings bool // device memory was read at the load (NVML or Triton's metrics)
	var err error
	if !cfg.SkipMemory {
		fmt.Fprintf(log, "loading %s through Triton's repository API (EXPLICIT mode)\n", cfg.Model)
		b, loadTime, steady, loaded, baseErr, lerr := loadFresh(ctx, tc, &mem, cfg.Model)
		if err = lerr; err != nil {
			return Written{}, err
		}
		baseline, wasLoaded = b, loaded
		rec.LoadTimeSeconds = loadTime.Seconds()
		rec.Memory.SteadyBytes = steady
		rec.Runtime.MemorySource = mem.source
		if devReadings = baseErr == nil; !devReadings {
			// Said nowhere before: the swap peak was recorded as the peak and the unload
			// as "did not return", both unmeasured.
			note("no device memory reading (%v): steady and peak memory come from Triton's memory_usage statistics at load (memorySource %s), the swap peak was not measured (recorded as the peak), nor whether memory returned after the unload", baseErr, mem.source)
		}
	}

	var trace []time.Duration // arrival times of --trace
	if l := loaded; l != nil {
		var pairs [][2]int
		for _, r := range l.Trace.Requests {
			trace = append(trace, r.At)
			if r.InputTokens != replay.Unknown && r.OutputTokens != replay.Unknown {
				pairs = append(pairs, [2]int{int(r.InputTokens), int(r.OutputTokens)})
			}
		}
		rec.LoadShape.Arrivals = "trace " + l.Name
		if o, ok := target.(OpenAITarget); ok && len(pairs) > 0 {
			if o.Lengths, err = NewTokenLengths(pairs, cfg.Seed); err != nil {
				return Written{}, traceError(cfg.Trace, err)
			}
			target = o
			rec.LoadShape.Request = o.Describe()
		}
	}
	if cfg.Search.StartRPS == 0 {
		if cfg.Search.StartRPS, err = probeStart(ctx, target, cfg.Search, cfg.Measure.RequestTimeout); err != nil {
			return Written{}, err
		}
		fmt.Fprintf(log, "starting at %.4g req/s (half of one execution slot's rate, from %d probe requests)\n", cfg.Search.StartRPS, probeRequests)
	}
	gen, err := NewGenerator(target, nil, cfg.Measure, cfg.Seed)
	if err != nil {
		return Written{}, err
	}
	if trace != nil {
		if err := gen.UseTraceShape(trace); err != nil {
			return Written{}, traceError(cfg.Trace, err)
		}
	}
	peak := startSampler(ctx, &mem)
	res, err := Search(ctx, cfg.Search, func(ctx context.Context, r float64) (Level, error) {
		l, err := gen.Measure(ctx, r)
		if err == nil {
			bound := ""
			if l.ClientBound {
				bound = ", client-bound: " + l.ClientBoundReason
			}
			if len(l.ErrorsByCode) > 0 {
				bound += ", errors: " + countByCode(l.ErrorsByCode)
			}
			fmt.Fprintf(log, "%9.2f req/s offered: %9.2f served, p50 %.4fs p99 %.4fs, success %.4f, stable %v, passed %v (%d windows)%s\n",
				l.OfferedRPS, l.ThroughputRPS, l.P50, l.P99, l.SuccessRate, l.Stable, l.Passes(), len(l.Windows), bound)
		}
		return l, err
	})
	maxUsed := peak()
	if err != nil {
		return Written{}, err
	}
	limits = append(limits, res.Limits...)
	if n := timedOut(res.Curve); res.MuRPS == 0 && n > 0 {
		// Said in the refusal, not only in the curve: a server that stopped answering reads
		// otherwise as a model that met no SLO.
		note("%d requests timed out: %s did not answer within --request-timeout %v", n, requestName(target), cfg.Measure.RequestTimeout)
	}
	fillFromSearch(&rec, res)
	if !cfg.SkipMemory {
		rec.Memory.PeakBytes = max(rec.Memory.SteadyBytes, maxUsed-baseline)
		swap, returned, err := reloadAndUnload(ctx, tc, &mem, cfg.Model, baseline, rec.Memory.PeakBytes, wasLoaded)
		if err != nil {
			return Written{}, err
		}
		rec.Memory.SwapPeakBytes = max(swap, rec.Memory.PeakBytes)
		rec.Memory.ReturnedAfterUnload = returned
		if !returned && devReadings {
			note("device memory did not return to its level before the load within 10 s of the unload")
		}
	}
	unmeasured := ""
	switch {
	case cfg.Protocol == ProtocolOpenAI:
		unmeasured = "OpenAI-compatible endpoint: no repository API"
	case cfg.SkipMemory:
		unmeasured = "--skip-memory"
	case rec.Runtime.MemorySource == "none":
		unmeasured = "no device memory reading" // the limit above says why
	}
	rec.Verdict = Verdict(rec, cfg.BudgetBytes, cfg.ReserveBytes, unmeasured)
	rec.Verdict.Limits = append(limits, rec.Verdict.Limits...)

	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return Written{}, fmt.Errorf("--out: %w", err)
	}
	path := filepath.Join(cfg.OutDir, record.FileName(cfg.Model, cfg.Profile))
	b, err := record.Marshal(rec)
	if err != nil {
		return Written{}, err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return Written{}, fmt.Errorf("--out: %w", err)
	}
	out := Written{Record: rec, Path: path, ClientBound: res.ClientBound, Best: res.Best}
	if !rec.Verdict.Allowed {
		return out, fmt.Errorf("%w: %s on %s: %s", ErrRefused, cfg.Model, cfg.Profile, strings.Join(rec.Verdict.Limits, "; "))
	}
	return out, nil
}

// liveError says why Triton's ServerLive (called under ctx, bounded by timeout) did not
// answer true: nil when it did. A refused connection fails at once and is said as such (it
// was reported as "did not answer true within 5s").
func liveError(ctx context.Context, live bool, err error, timeout time.Duration) error {
	switch {
	case err == nil && live:
		return nil
	case err == nil:
		return errors.New("Triton's ServerLive answered false: the server is not live")
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("Triton's ServerLive did not answer within --connect-timeout %v: %w", timeout, err)
	case strings.Contains(err.Error(), "connection refused"):
		return fmt.Errorf("connection refused (nothing listens there; want Triton's gRPC endpoint, port 8001 by default): %w", err)
	}
	return fmt.Errorf("Triton's ServerLive failed: %w", err)
}

// traceError is an error of --trace: bad input, ErrInvalidConfig once at the front (it came
// after "--trace <path>:" from the generator's errors), and in capacity's words where
// package replay's name a flag of cmd/replay that capacity does not have.
func traceError(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), ErrInvalidConfig.Error()+": ")
	switch {
	case errors.Is(err, replay.ErrUnknownFormat):
		if i := strings.Index(msg, "; pass --format"); i >= 0 {
			msg = msg[:i] + fmt.Sprintf("; capacity detects the format from the header, and reads %v", replay.Formats())
		}
	case errors.Is(err, replay.ErrNotRequests):
		if i := strings.Index(msg, ": pass it as --cold-start"); i >= 0 {
			msg = msg[:i] + " (cmd/replay's --cold-start), not a request trace; --trace wants a request trace"
		}
	}
	if !strings.HasPrefix(msg, path) {
		msg = path + ": " + msg
	}
	return &traceErr{msg: fmt.Sprintf("%v: --trace %s", ErrInvalidConfig, msg), err: err}
}

// traceErr keeps the wrapped error (replay's sentinels) under traceError's rewording.
type traceErr struct {
	msg string
	err error
}

func (e *traceErr) Error() string { return e.msg }

// Unwrap returns ErrInvalidConfig and the original error.
func (e *traceErr) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

// checkModelList checks the answer to GET /v1/models: any status but 200 (a wrong base URL,
// a server that is not OpenAI-compatible) was taken as reachable, and every completion then
// failed with the probe blaming --input and --input-data, flags openai refuses. When the
// answer is an OpenAI model list ({"data":[{"id":…}]}), model must be in it; a body that is
// not one (or is longer than maxModelListBytes) is not judged, and note says why, for the log.
func checkModelList(resp *http.Response, target, model string) (note string, err error) {
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: --target %s: GET /v1/models answered HTTP %d; want an OpenAI-compatible server's base URL (e.g. http://localhost:8000, without /v1)", ErrUnreachable, target, resp.StatusCode)
	}
	var list struct {
		Data *[]struct {
			ID string `json:"id"`
		} `json:"data"` // nil: no "data" (or null): not a model list
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxModelListBytes+1))
	switch {
	case err != nil:
		return "GET /v1/models: reading the answer: " + errtext.Quote(err.Error(), 256), nil
	case len(b) > maxModelListBytes:
		return "GET /v1/models answered more than 1 MiB (the most read)", nil
	case json.Unmarshal(b, &list) != nil || list.Data == nil:
		return `GET /v1/models answered no OpenAI model list ({"data":[{"id":…}]})`, nil
	case len(*list.Data) == 0:
		return "GET /v1/models lists no model", nil
	}
	var ids []string
	for _, m := range *list.Data {
		if m.ID == model {
			return "", nil
		}
		ids = append(ids, errtext.Quote(m.ID, 64))
	}
	more := ""
	if len(ids) > 10 {
		ids, more = ids[:10], fmt.Sprintf(" and %d more", len(ids)-10)
	}
	return "", fmt.Errorf("--model %s: not served by %s (GET /v1/models lists %s%s)", errtext.Quote(model, 64), target, strings.Join(ids, ", "), more)
}

// maxModelListBytes is the most of GET /v1/models' answer checkModelList reads.
const maxModelListBytes = 1 << 20

// checkWritable makes dir (as the record's write will) and creates and removes a file in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".capacity-write-check-*")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// fillFromSearch puts μ (Result.MuRPS: the highest passing level's served rate, at most its
// offered rate), the figures at μ, the curve and the scaler's k and S in rec.
func fillFromSearch(rec *record.Record, res Result) {
	rec.SLOThroughputRPS = res.MuRPS
	rec.LatencySeconds = record.Latency{P50: res.Best.P50, P95: res.Best.P95, P99: res.Best.P99}
	rec.SuccessRate = res.Best.SuccessRate
	var maxThroughput float64
	for _, l := range res.Curve {
		rec.Curve = append(rec.Curve, record.Point{OfferedRPS: l.OfferedRPS, ThroughputRPS: l.ThroughputRPS,
			P50: l.P50, P95: l.P95, P99: l.P99, TTFTP50: l.TTFTP50, TTFTP99: l.TTFTP99, SuccessRate: l.SuccessRate,
			Stable: l.Stable, Passed: l.Passes(), Windows: len(l.Windows), ErrorsByCode: nonEmpty(l.ErrorsByCode)})
		maxThroughput = max(maxThroughput, l.ThroughputRPS)
	}
	if len(res.Curve) > 0 {
		rec.LoadShape.ServiceTimeSeconds = res.Curve[0].P50
		rec.LoadShape.ReplicaConcurrency = max(1, int(math.Round(maxThroughput*rec.LoadShape.ServiceTimeSeconds)))
	}
}

func nonEmpty(m map[string]int) map[string]int {
	if len(m) == 0 {
		return nil
	}
	return m
}

// Verdict judges rec against the profile's budget: allowed when μ > 0 and both the peak and
// the swap peak, plus the reserve, fit budgetBytes; headroom = budget − reserve −
// max(peak, swap peak).
//
// unmeasured, when not "", says why the memory (and, with no load time, the load time) was
// not measured (--skip-memory, an OpenAI endpoint, or no device memory reading: memorySource
// none): the record's zero figures are then no measurement, so the verdict claims no headroom
// (HeadroomBytes 0, not the whole budget), judges allowed on μ alone, and a limit says so.
func Verdict(rec record.Record, budgetBytes, reserveBytes int64, unmeasured string) record.Verdict {
	v := record.Verdict{BudgetBytes: budgetBytes, ReserveBytes: reserveBytes, Allowed: true}
	if unmeasured != "" {
		what, fields, take := "memory and load time", "peakBytes, swapPeakBytes and loadTimeSeconds are", "memory or load time"
		if rec.LoadTimeSeconds > 0 {
			what, fields, take = "memory", "peakBytes and swapPeakBytes are", "memory"
		}
		v.Limits = append(v.Limits, fmt.Sprintf("%s not measured (%s): %s 0 for unknown, "+
			"headroomBytes is not computed (0), and allowed is judged on the SLO alone; do not take %s from this record", what, unmeasured, fields, take))
		if rec.SLOThroughputRPS <= 0 {
			v.Allowed = false
			v.Limits = append(v.Limits, "refused: no rate met the SLO")
		}
		return v
	}
	need := max(rec.Memory.PeakBytes, rec.Memory.SwapPeakBytes)
	v.HeadroomBytes = budgetBytes - reserveBytes - need
	if rec.Memory.PeakBytes+reserveBytes > budgetBytes {
		v.Allowed = false
		v.Limits = append(v.Limits, fmt.Sprintf("refused: peak %s + reserve %s exceeds the %s budget %s",
			plan.FormatBytes(rec.Memory.PeakBytes), plan.FormatBytes(reserveBytes), rec.Profile, plan.FormatBytes(budgetBytes)))
	} else if rec.Memory.SwapPeakBytes+reserveBytes > budgetBytes {
		v.Allowed = false
		v.Limits = append(v.Limits, fmt.Sprintf("refused: swap peak %s + reserve %s exceeds the %s budget %s (a reload would not fit)",
			plan.FormatBytes(rec.Memory.SwapPeakBytes), plan.FormatBytes(reserveBytes), rec.Profile, plan.FormatBytes(budgetBytes)))
	}
	if rec.SLOThroughputRPS <= 0 {
		v.Allowed = false
		v.Limits = append(v.Limits, "refused: no rate met the SLO")
	}
	return v
}

// memSource reads the device memory in use: NVML when the device opened, else Triton's
// nv_gpu_memory_used_bytes (summed over the GPUs the endpoint reports).
type memSource struct {
	nvml       *gpu.Device
	metricsURL string
	client     *http.Client
	source     string
}

func (m *memSource) used(ctx context.Context) (int64, error) {
	if m.nvml != nil {
		m.source = "nvml"
		return m.nvml.UsedBytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.metricsURL, nil)
	if err != nil {
		return 0, fmt.Errorf("--metrics-url %s: %w", m.metricsURL, err)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("--metrics-url %s: %w", m.metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("--metrics-url %s: HTTP %d", m.metricsURL, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("--metrics-url %s: %w", m.metricsURL, err)
	}
	f, ok := fams["nv_gpu_memory_used_bytes"]
	if !ok {
		return 0, fmt.Errorf("--metrics-url %s: no nv_gpu_memory_used_bytes (is Triton's GPU metrics collection on?)", m.metricsURL)
	}
	// Triton exports a gauge; a text exposition without a TYPE line parses as untyped. Any
	// other type has no gauge value: GetGauge().GetValue() read it as 0 bytes, which made the
	// model's peak 0 bytes and admitted it.
	var value func(*dto.Metric) float64
	switch f.GetType() {
	case dto.MetricType_GAUGE:
		value = func(mt *dto.Metric) float64 { return mt.GetGauge().GetValue() }
	case dto.MetricType_UNTYPED:
		value = func(mt *dto.Metric) float64 { return mt.GetUntyped().GetValue() }
	default:
		return 0, fmt.Errorf("--metrics-url %s: nv_gpu_memory_used_bytes is of type %s, want a gauge (as Triton exports it) or untyped", m.metricsURL, strings.ToLower(f.GetType().String()))
	}
	if len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("--metrics-url %s: nv_gpu_memory_used_bytes has no samples (is Triton's GPU metrics collection on?)", m.metricsURL)
	}
	// Each value and the sum are checked before the conversion: int64(1e30) and int64(NaN)
	// are math.MinInt64 on amd64, which made the model's peak 0 bytes and admitted it.
	var sum float64
	for _, mt := range f.GetMetric() {
		v := value(mt)
		if !(v >= 0 && v <= float64(plan.MaxMemoryBytes)) {
			return 0, fmt.Errorf("--metrics-url %s: nv_gpu_memory_used_bytes %v is outside [0, %d]", m.metricsURL, v, plan.MaxMemoryBytes)
		}
		sum += v
	}
	if sum > float64(plan.MaxMemoryBytes) {
		return 0, fmt.Errorf("--metrics-url %s: nv_gpu_memory_used_bytes sums to %v, outside [0, %d]", m.metricsURL, sum, plan.MaxMemoryBytes)
	}
	m.source = "triton-metrics"
	return int64(sum), nil
}

// startSampler reads used memory every 100 ms until the returned function is called, which
// returns the highest reading (0 when none succeeded).
func startSampler(ctx context.Context, m *memSource) func() int64 {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var peak int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if u, err := m.used(ctx); err == nil {
				mu.Lock()
				peak = max(peak, u)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// unloadWait bounds the wait, after an unload, for Triton to report the model UNAVAILABLE
// (its in-flight requests finished and its memory released); unloading itself is quick.
const unloadWait = 5 * time.Minute

// loadFresh unloads the model if loaded (waiting until Triton reports it UNAVAILABLE), reads
// the baseline, loads it timing the call, and returns the baseline, the load time, the steady
// memory (device use above the baseline; Triton's memory_usage where no device reading is
// available: baseErr says why) and whether the model was loaded (READY or LOADING) before.
func loadFresh(ctx context.Context, tc *triton.Client, mem *memSource, model string) (baseline int64, loadTime time.Duration, steady int64, wasLoaded bool, baseErr, err error) {
	idx, err := tc.Index(ctx, false)
	if err != nil {
		return 0, 0, 0, false, nil, fmt.Errorf("repository index: %w", err)
	}
	found := false
	for _, m := range idx {
		if m.Name != model {
			continue
		}
		found = true
		if m.State == triton.StateReady || m.State == triton.StateLoading {
			wasLoaded = true
			if err := tc.Unload(ctx, model, triton.UnloadOptions{}); err != nil {
				return 0, 0, 0, false, nil, fmt.Errorf("unload %s before measuring its load: %w", model, err)
			}
			if _, err := tc.WaitState(ctx, model, false, unloadWait); err != nil {
				return 0, 0, 0, false, nil, fmt.Errorf("unload %s: %w", model, err)
			}
		}
	}
	if !found {
		return 0, 0, 0, false, nil, fmt.Errorf("--model %q is not in Triton's model repository", model)
	}
	baseline, baseErr = mem.used(ctx)
	start := time.Now()
	if err := tc.Load(ctx, model, triton.LoadOptions{}); err != nil {
		return 0, 0, 0, false, nil, fmt.Errorf("load %s: %w", model, err)
	}
	loadTime = time.Since(start)
	u, uErr := mem.used(ctx)
	if baseErr == nil {
		baseErr = uErr
	}
	if baseErr == nil {
		steady = u - baseline
	} else if st, err := tc.Statistics(ctx, model); err == nil && len(st) > 0 && st[0].GPUBytes() <= uint64(plan.MaxMemoryBytes) {
		steady = int64(st[0].GPUBytes())
		mem.source = "triton-statistics"
	} else {
		mem.source = "none"
	}
	return baseline, loadTime, steady, wasLoaded, baseErr, nil
}

// reloadAndUnload reloads the loaded model (Triton keeps the old copy serving while the new
// one loads) sampling memory, then unloads it and checks the memory returns to baseline
// (within 1 % of the model's peak: a device reading moves by allocator and driver noise); when
// the model was loaded before the run (wasLoaded) it loads it again, so that the model is left
// as found: READY if it was, unloaded if it was not. It returns the swap peak above baseline and
// whether the memory returned.
func reloadAndUnload(ctx context.Context, tc *triton.Client, mem *memSource, model string, baseline, peak int64, wasLoaded bool) (int64, bool, error) {
	sample := startSampler(ctx, mem)
	err := tc.Load(ctx, model, triton.LoadOptions{})
	maxUsed := sample()
	if err != nil {
		return 0, false, fmt.Errorf("reload %s: %w", model, err)
	}
	if err := tc.Unload(ctx, model, triton.UnloadOptions{}); err != nil {
		return 0, false, fmt.Errorf("unload %s: %w", model, err)
	}
	if _, err := tc.WaitState(ctx, model, false, unloadWait); err != nil {
		return 0, false, fmt.Errorf("unload %s: %w", model, err)
	}
	returned := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		u, err := mem.used(ctx)
		if err != nil {
			break
		}
		if u <= baseline+peak/100 {
			returned = true
			break
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if wasLoaded {
		if err := tc.Load(ctx, model, triton.LoadOptions{}); err != nil {
			return 0, false, fmt.Errorf("load %s again after the measurement: %w", model, err)
		}
	}
	return max(0, maxUsed-baseline), returned, nil
}

// ScaledObjectMetadata is the scaler trigger metadata a record implies, as the chart's values
// take it (strings): replicaConcurrency k, replicaThroughput μ (req/s at the SLO), and the
// measured service time S as a comment (the scaler measures S itself through
// serviceTimeQuery; with only replicaThroughput it uses S = k/μ).
func ScaledObjectMetadata(rec record.Record) string {
	return fmt.Sprintf("# ScaledObject trigger metadata for %s on %s (from %s):\n"+
		"replicaConcurrency: \"%d\"\nreplicaThroughput: \"%.4g\"\n# measured service time S ≈ %.4g s (median latency at the lowest rate)\n",
		rec.Model, rec.Profile, record.FileName(rec.Model, rec.Profile),
		rec.LoadShape.ReplicaConcurrency, rec.SLOThroughputRPS, rec.LoadShape.ServiceTimeSeconds)
}

func probed(c SearchConfig) SearchConfig {
	c.StartRPS = 0
	return c
}
