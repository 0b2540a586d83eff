package triton

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/proto/inference"
)

// Sentinel errors. A *StatusError matches the ones that apply with
// errors.Is; WaitState returns ErrWaitTimeout and ErrLoadFailed itself.
var (
	// ErrModelNotFound: Triton does not know the model (gRPC NotFound, or a
	// message saying the model is unknown or not found).
	ErrModelNotFound = errors.New("triton: model not found")
	// ErrLoadFailed: a load ended without the model becoming READY; the
	// error text keeps Triton's reason (out of memory, a bad config, ...).
	ErrLoadFailed = errors.New("triton: model load failed")
	// ErrModelControlDisabled: the server does not run with
	// --model-control-mode=explicit, so repository load and unload are refused.
	ErrModelControlDisabled = errors.New("triton: explicit model control is disabled")
	// ErrUnavailable: the server could not be reached or refused the call
	// as unavailable (gRPC Unavailable).
	ErrUnavailable = errors.New("triton: unavailable")
	// ErrWaitTimeout: WaitState gave up before the model reached the state.
	ErrWaitTimeout = errors.New("triton: timed out waiting for model state")
	// ErrInvalidArgument: a bad argument, in the request or in the Config.
	ErrInvalidArgument = errors.New("triton: invalid argument")
)

// State is a model state as Triton's repository index reports it.
type State string

// The states of Triton's model lifecycle as RepositoryIndex spells them.
const (
	StateUnknown     State = "" // in the repository, never loaded
	StateReady       State = "READY"
	StateLoading     State = "LOADING"
	StateUnloading   State = "UNLOADING"
	StateUnavailable State = "UNAVAILABLE"
)

// ModelIndex is one entry of Triton's repository index.
type ModelIndex struct {
	Name    string
	Version string // empty for a model that was never loaded
	State   State
	Reason  string // why the model is in State, e.g. "unloaded" or a load error
}

// DurationStat is a count and a cumulative duration, as Triton's
// StatisticDuration (nanoseconds on the wire).
type DurationStat struct {
	Count    uint64
	Duration time.Duration
}

// MemoryUsage is memory a model holds on one device, measured by Triton
// during the load (documented by Triton as an estimate).
type MemoryUsage struct {
	Type     string // "GPU", "CPU" or "CPU_PINNED"
	DeviceID int64
	Bytes    uint64
}

// ModelStats are the cumulative statistics of one model version.
type ModelStats struct {
	Name    string
	Version string
	// LastInference is the time of the last inference request; the zero
	// time when the model was never used (Triton sends 0 ms).
	LastInference  time.Time
	InferenceCount uint64 // successful inferences, each batch element counted
	ExecutionCount uint64 // successful model executions
	Success        DurationStat
	Fail           DurationStat
	Queue          DurationStat
	ComputeInput   DurationStat
	ComputeInfer   DurationStat
	ComputeOutput  DurationStat
	MemoryUsage    []MemoryUsage
}

// GPUBytes returns the GPU memory the model reported, summed over devices.
func (s ModelStats) GPUBytes() uint64 {
	var n uint64
	for _, m := range s.MemoryUsage {
		if m.Type == "GPU" {
			n += m.Bytes
		}
	}
	return n
}

// LoadOptions are the optional parameters of a load.
type LoadOptions struct {
	// ConfigJSON, when not empty, is a model configuration in JSON that
	// overrides the repository's config.pbtxt; sent as the "config"
	// string parameter.
	ConfigJSON string
}

// UnloadOptions are the optional parameters of an unload.
type UnloadOptions struct {
	// UnloadDependents also unloads models only loaded for this one (the
	// parts of an ensemble); sent as the "unload_dependents" bool parameter.
	UnloadDependents bool
}

// Clock is the time source of WaitState: real time in production, a fake
// one (tritontest.FakeClock) in tests.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Client.
type Config struct {
	// CallTimeout bounds every call but Load whose context has no deadline.
	// Range: > 0.
	CallTimeout time.Duration
	// LoadTimeout bounds Load when its context has no deadline; Triton's
	// load call returns only when the load has finished. Range: > 0.
	LoadTimeout time.Duration
	// PollInterval is the period at which WaitState reads the index.
	// Range: > 0.
	PollInterval time.Duration
	// Clock drives WaitState's polling and timeout; nil means RealClock.
	Clock Clock
	// MaxRecvBytes bounds one answer the client receives, in bytes, on connections Dial
	// opens (New's caller sets its own, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize));
	// 0 means DefaultMaxRecvBytes. Range: 0, or [1, 2^31 − 1] (Triton's own bound).
	MaxRecvBytes int
}

// DefaultMaxRecvBytes is Dial's bound on one answer: 64 MiB. grpc-go's default of 4 MiB
// refused a RepositoryIndex of 100,000 models ("received message larger than max (4200000 vs.
// 4194304)"), which made the controller's every loop fail and the pod never ready; Triton
// sends up to 2^31 − 1 bytes (MAX_GRPC_MESSAGE_SIZE = INT32_MAX in its src/grpc). 64 MiB holds
// an index of about 1.5 million short model names or statistics of about 100,000 model
// versions (~600 bytes each), and bounds what one answer can cost the sidecar.
const DefaultMaxRecvBytes = 64 << 20

// DefaultConfig returns 10 s calls, 10 min loads, a 250 ms poll and answers of up to
// DefaultMaxRecvBytes.
func DefaultConfig() Config {
	return Config{
		CallTimeout:  10 * time.Second,
		LoadTimeout:  10 * time.Minute,
		PollInterval: 250 * time.Millisecond,
		MaxRecvBytes: DefaultMaxRecvBytes,
	}
}

// Validate returns every violation, each naming the field and its range.
func (c Config) Validate() error {
	var errs []error
	if c.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: CallTimeout is %v, want > 0", ErrInvalidArgument, c.CallTimeout))
	}
	if c.LoadTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: LoadTimeout is %v, want > 0", ErrInvalidArgument, c.LoadTimeout))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: PollInterval is %v, want > 0", ErrInvalidArgument, c.PollInterval))
	}
	if c.MaxRecvBytes < 0 || c.MaxRecvBytes > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("%w: MaxRecvBytes is %d, want 0 (DefaultMaxRecvBytes) or [1, %d]", ErrInvalidArgument, c.MaxRecvBytes, math.MaxInt32))
	}
	return errors.Join(errs...)
}

// Client calls one Triton server. It is safe for concurrent use.
type Client struct {
	rpc   inference.GRPCInferenceServiceClient
	conn  *grpc.ClientConn // owned, closed by Close; nil when given to New
	cfg   Config
	clock Clock
}

// New returns a client over conn, which the caller keeps and closes.
func New(conn grpc.ClientConnInterface, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	clock := cfg.Clock
	if clock == nil {
		clock = RealClock{}
	}
	return &Client{rpc: inference.NewGRPCInferenceServiceClient(conn), cfg: cfg, clock: clock}, nil
}

// Dial returns a client of the Triton gRPC endpoint at target ("host:8001"),
// without TLS unless opts say otherwise, receiving answers of up to cfg.MaxRecvBytes (opts may
// override it). Connecting is lazy: an unreachable server shows as ErrUnavailable on the first
// call. Close releases it.
func Dial(target string, cfg Config, opts ...grpc.DialOption) (*Client, error) {
	if target == "" {
		return nil, fmt.Errorf("%w: target is empty, want host:port", ErrInvalidArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	recv := cfg.MaxRecvBytes
	if recv == 0 {
		recv = DefaultMaxRecvBytes
	}
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(recv))}, opts...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("triton dial %q: %w", target, err)
	}
	c, err := New(conn, cfg)
	if err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	c.conn = conn
	return c, nil
}

// Close closes the connection Dial opened; a no-op for New's clients.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// ctx bounds a call by d unless ctx has a deadline of its own; when d ends the call, the
// context's cause is a *ClientTimeout naming the bound (field: "CallTimeout" or
// "LoadTimeout"), which wrap adds to the error.
func (c *Client) ctx(ctx context.Context, d time.Duration, field string) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, &ClientTimeout{Field: field, Timeout: d})
}

// ClientTimeout is the cause of a call that the client's own bound ended (the context had
// no deadline of its own): Field is the Config field, Timeout its value. A StatusError for
// such a call carries it, so its text says which bound ran out.
type ClientTimeout struct {
	Field   string
	Timeout time.Duration
}

// Error reads "no answer within 10m0s (triton.Config.LoadTimeout, the client's bound on a
// load)".
func (e *ClientTimeout) Error() string {
	what := "a call"
	if e.Field == "LoadTimeout" {
		what = "a load"
	}
	return fmt.Sprintf("no answer within %s (triton.Config.%s, the client's bound on %s)", e.Timeout, e.Field, what)
}

// ServerLive reports whether Triton is live.
func (c *Client) ServerLive(ctx context.Context) (bool, error) {
	ctx, cancel := c.ctx(ctx, c.cfg.CallTimeout, "CallTimeout")
	defer cancel()
	resp, err := c.rpc.ServerLive(ctx, &inference.ServerLiveRequest{})
	if err != nil {
		return false, wrap(ctx, "server live", "", err)
	}
	return resp.GetLive(), nil
}

// ServerReady reports whether Triton is ready for inference.
func (c *Client) ServerReady(ctx context.Context) (bool, error) {
	ctx, cancel := c.ctx(ctx, c.cfg.CallTimeout, "CallTimeout")
	defer cancel()
	resp, err := c.rpc.ServerReady(ctx, &inference.ServerReadyRequest{})
	if err != nil {
		return false, wrap(ctx, "server ready", "", err)
	}
	return resp.GetReady(), nil
}

// ModelReady reports whether a version of the model ("" lets Triton pick)
// is ready for inference.
func (c *Client) ModelReady(ctx context.Context, name, version string) (bool, error) {
	ctx, cancel := c.ctx(ctx, c.cfg.CallTimeout, "CallTimeout")
	defer cancel()
	resp, err := c.rpc.ModelReady(ctx, &inference.ModelReadyRequest{Name: name, Version: version})
	if err != nil {
		return false, wrap(ctx, "model ready", name, err)
	}
	return resp.GetReady(), nil
}

// Index returns the repository index in Triton's order; readyOnly asks for
// READY models only.
func (c *Client) Index(ctx context.Context, readyOnly bool) ([]ModelIndex, error) {
	ctx, cancel := c.ctx(ctx, c.cfg.CallTimeout, "CallTimeout")
	defer cancel()
	resp, err := c.rpc.RepositoryIndex(ctx, &inference.RepositoryIndexRequest{Ready: readyOnly})
	if err != nil {
		return nil, wrap(ctx, "repository index", "", err)
	}
	out := make([]ModelIndex, 0, len(resp.GetModels()))
	for _, m := range resp.GetModels() {
		out = append(out, ModelIndex{Name: m.GetName(), Version: m.GetVersion(), State: State(m.GetState()), Reason: m.GetReason()})
	}
	return out, nil
}

// Load loads the model, or reloads it when it is already loaded (the old
// copy serves until the new one is READY). It returns when Triton reports
// the load finished; a failed load's error matches ErrLoadFailed and keeps
// Triton's reason.
func (c *Client) Load(ctx context.Context, name string, opts LoadOptions) error {
	if name == "" {
		return fmt.Errorf("%w: model name is empty", ErrInvalidArgument)
	}
	ctx, cancel := c.ctx(ctx, c.cfg.LoadTimeout, "LoadTimeout")
	defer cancel()
	req := &inference.RepositoryModelLoadRequest{ModelName: name}
	if opts.ConfigJSON != "" {
		req.Parameters = map[string]*inference.ModelRepositoryParameter{
			"config": {ParameterChoice: &inference.ModelRepositoryParameter_StringParam{StringParam: opts.ConfigJSON}},
		}
	}
	if _, err := c.rpc.RepositoryModelLoad(ctx, req); err != nil {
		return wrap(ctx, "load", name, err)
	}
	return nil
}

// Unload asks Triton to unload the model. Triton answers at once: the model
// stays UNLOADING, holding its memory, until its in-flight requests finish;
// use WaitState to wait for UNAVAILABLE. Unloading a model Triton does not
// know returns nil.
func (c *Client) Unload(ctx context.Context, name string, opts UnloadOptions) error {
	if name == "" {
		return fmt.Errorf("%w: model name is empty", ErrInvalidArgument)
	}
	ctx, cancel := c.ctx(ctx, c.cfg.CallTimeout, "CallTimeout")
	defer cancel()
	req := &inference.RepositoryModelUnloadRequest{ModelName: name}
	if opts.UnloadDependents {
		req.Parameters = map[string]*inference.ModelRepositoryParameter{
			"unload_dependents": {ParameterChoice: &inference.ModelRepositoryParameter_BoolParam{BoolParam: true}},
		}
	}
	if _, err := c.rpc.RepositoryModelUnload(ctx, req); err != nil {
		err = wrap(ctx, "unload", name, err)
		if errors.Is(err, ErrModelNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// Statistics returns the statistics of the model's versions, or of every
// model when name is empty.
func (c *Client) Statistics(ctx context.Context, name string) ([]ModelStats, error) {
	ctx, cancel := c.ctx(ctx, c.cfg.CallTimeout, "CallTimeout")
	defer cancel()
	resp, err := c.rpc.ModelStatistics(ctx, &inference.ModelStatisticsRequest{Name: name})
	if err != nil {
		return nil, wrap(ctx, "model statistics", name, err)
	}
	out := make([]ModelStats, 0, len(resp.GetModelStats()))
	for _, s := range resp.GetModelStats() {
		st, err := statsFromProto(s)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Bounds on the statistics' unsigned wire values that become signed Go values: past them a
// conversion would wrap into a wrong number (a negative duration, size or year).
const (
	// MaxStatisticsBytes bounds a model's memory_usage byte_size, each entry and their GPU sum:
	// 1 PiB, the residency catalog's bound on every byte count (plan.MaxMemoryBytes).
	MaxStatisticsBytes = 1 << 50
	// maxLastInferenceMs is the last millisecond of the year 9999 (Unix milliseconds).
	maxLastInferenceMs = 253402300799999
)

// statsFromProto converts one model's statistics, refusing a value that does not fit its Go
// type: a duration past math.MaxInt64 ns (292 years), a memory size past MaxStatisticsBytes,
// a last_inference past the year 9999. The error names the model, the field and the range.
func statsFromProto(s *inference.ModelStatistics) (ModelStats, error) {
	var bad error
	dur := func(field string, d *inference.StatisticDuration) DurationStat {
		if ns := d.GetNs(); ns > math.MaxInt64 && bad == nil {
			bad = fmt.Errorf("triton: statistics of model %s: inference_stats.%s.ns = %d: want at most %d (292 years)", errtext.Quote(s.GetName(), 256), field, ns, int64(math.MaxInt64))
		}
		return DurationStat{Count: d.GetCount(), Duration: time.Duration(min(d.GetNs(), math.MaxInt64))}
	}
	st := s.GetInferenceStats()
	out := ModelStats{
		Name:           s.GetName(),
		Version:        s.GetVersion(),
		InferenceCount: s.GetInferenceCount(),
		ExecutionCount: s.GetExecutionCount(),
		Success:        dur("success", st.GetSuccess()),
		Fail:           dur("fail", st.GetFail()),
		Queue:          dur("queue", st.GetQueue()),
		ComputeInput:   dur("compute_input", st.GetComputeInput()),
		ComputeInfer:   dur("compute_infer", st.GetComputeInfer()),
		ComputeOutput:  dur("compute_output", st.GetComputeOutput()),
	}
	if bad != nil {
		return ModelStats{}, bad
	}
	name := errtext.Quote(s.GetName(), 256)
	if ms := s.GetLastInference(); ms > maxLastInferenceMs {
		return ModelStats{}, fmt.Errorf("triton: statistics of model %s: last_inference = %d ms: want at most %d (the year 9999)", name, ms, int64(maxLastInferenceMs))
	} else if ms > 0 {
		out.LastInference = time.UnixMilli(int64(ms)).UTC()
	}
	var gpu uint64
	for i, m := range s.GetMemoryUsage() {
		b := m.GetByteSize()
		if b > MaxStatisticsBytes {
			return ModelStats{}, fmt.Errorf("triton: statistics of model %s: memory_usage[%d].byte_size = %d: want at most %d (1 PiB)", name, i, b, int64(MaxStatisticsBytes))
		}
		if m.GetType() == "GPU" {
			if gpu += b; gpu > MaxStatisticsBytes {
				return ModelStats{}, fmt.Errorf("triton: statistics of model %s: memory_usage GPU byte_size sum %d: want at most %d (1 PiB)", name, gpu, int64(MaxStatisticsBytes))
			}
		}
		out.MemoryUsage = append(out.MemoryUsage, MemoryUsage{Type: m.GetType(), DeviceID: m.GetId(), Bytes: b})
	}
	return out, nil
}

// WaitState polls the index every PollInterval until the model is READY
// (wantReady) or UNAVAILABLE (!wantReady), and returns its last entry.
// Waiting for READY fails at once with ErrLoadFailed when the model is
// UNAVAILABLE with a reason other than "unloaded" (a failed load). A model
// missing from the index, or never loaded, counts as unloaded. The wait
// ends with ErrWaitTimeout after timeout on the client's Clock, or with
// ctx's error.
func (c *Client) WaitState(ctx context.Context, name string, wantReady bool, timeout time.Duration) (ModelIndex, error) {
	if timeout <= 0 {
		return ModelIndex{}, fmt.Errorf("%w: timeout is %v, want > 0", ErrInvalidArgument, timeout)
	}
	deadline := c.clock.After(timeout)
	for {
		idx, err := c.Index(ctx, false)
		if err != nil {
			return ModelIndex{}, err
		}
		got := ModelIndex{Name: name}
		for _, m := range idx {
			if m.Name == name {
				got = m
				break
			}
		}
		done, err := reached(got, wantReady)
		if done || err != nil {
			return got, err
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("wait for model %q: %w", name, ctx.Err())
		case <-deadline:
			return got, fmt.Errorf("wait for model %q (state %q, reason %q) after %v: %w", name, got.State, got.Reason, timeout, ErrWaitTimeout)
		case <-c.clock.After(c.cfg.PollInterval):
		}
	}
}

func reached(m ModelIndex, wantReady bool) (bool, error) {
	if !wantReady {
		return m.State == StateUnavailable || m.State == StateUnknown, nil
	}
	switch {
	case m.State == StateReady:
		return true, nil
	case m.State == StateUnavailable && m.Reason != "" && m.Reason != "unloaded":
		return false, fmt.Errorf("model %q is UNAVAILABLE: %s: %w", m.Name, m.Reason, ErrLoadFailed)
	}
	return false, nil
}

// StatusError is an error Triton (or the gRPC transport) returned, with the
// operation and model it concerned. Message is Triton's text, unchanged.
type StatusError struct {
	Op      string // "load", "unload", "repository index", ...
	Model   string // empty for server-wide calls
	Code    codes.Code
	Message string
	// Timeout is set when the client's own bound (Config.CallTimeout or LoadTimeout) ended
	// the call; nil when Triton answered or the caller's deadline or cancellation ended it.
	Timeout *ClientTimeout
}

// Error reads `triton load "asr": Internal: load failed for model 'asr': ...`, and with
// Timeout `triton load "asr": DeadlineExceeded: context deadline exceeded: no answer within
// 10m0s (triton.Config.LoadTimeout, the client's bound on a load)`.
func (e *StatusError) Error() string {
	msg := e.Message
	if e.Timeout != nil {
		msg += ": " + e.Timeout.Error()
	}
	if e.Model != "" {
		return fmt.Sprintf("triton %s %q: %s: %s", e.Op, e.Model, e.Code, msg)
	}
	return fmt.Sprintf("triton %s: %s: %s", e.Op, e.Code, msg)
}

// GRPCStatus lets status.FromError and status.Code see the original code.
func (e *StatusError) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// Is matches the sentinel errors that describe e, and the context errors
// for deadline and cancellation codes.
func (e *StatusError) Is(target error) bool {
	controlDisabled := strings.Contains(e.Message, "explicit model load / unload is not allowed")
	switch target {
	case ErrModelControlDisabled:
		return controlDisabled
	case ErrModelNotFound:
		return e.Code == codes.NotFound || (e.Op == "unload" && mentionsUnknownModel(e.Message))
	case ErrUnavailable:
		return e.Code == codes.Unavailable && !controlDisabled
	case ErrInvalidArgument:
		return e.Code == codes.InvalidArgument
	case ErrLoadFailed:
		switch e.Code {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unimplemented:
			return false
		}
		return e.Op == "load" && !controlDisabled
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	}
	return false
}

// mentionsUnknownModel recognises Triton's texts for a model it does not
// know, which some versions send with a code other than NotFound.
func mentionsUnknownModel(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"not found", "no such model", "unknown model"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func wrap(ctx context.Context, op, model string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("triton %s %q: %w", op, model, err)
	}
	se := &StatusError{Op: op, Model: model, Code: st.Code(), Message: st.Message()}
	if st.Code() == codes.DeadlineExceeded {
		// grpc-go sends the deadline to the server (the grpc-timeout header), and the server's
		// copy can fire first: its RST_STREAM then ends the call as DeadlineExceeded ("stream
		// terminated by RST_STREAM with error code: CANCEL") a moment before this context is
		// done, when its cause is not set yet. Wait for it, at most deadlineSlack past the
		// deadline, when that deadline is that close.
		if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && time.Until(dl) < deadlineSlack {
			t := time.NewTimer(time.Until(dl) + deadlineSlack)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		errors.As(context.Cause(ctx), &se.Timeout)
	}
	return se
}

// deadlineSlack is how close to its context's deadline a DeadlineExceeded answer must come for
// wrap to wait for that context, so that the client's own bound is named (ClientTimeout) when
// the server's copy of the deadline fired first.
const deadlineSlack = 50 * time.Millisecond
