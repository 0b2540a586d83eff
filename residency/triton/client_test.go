package triton_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stub is a scripted Triton: it records requests and answers from fields.
type stub struct {
	inference.UnimplementedGRPCInferenceServiceServer
	mu        sync.Mutex
	requests  []proto.Message
	deadlines []bool
	index     [][]*inference.RepositoryIndexResponse_ModelIndex // answered in turn, last repeated
	err       error
	stats     *inference.ModelStatisticsResponse
	// block: load and index answer only when the call's context ends, with its error, as a
	// gRPC server's handler does; a success sent then could reach the client before its own
	// timer fired (seen under the race detector), and the call would not have timed out.
	block bool
}

func (s *stub) record(ctx context.Context, req proto.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := ctx.Deadline()
	s.deadlines = append(s.deadlines, ok)
	s.requests = append(s.requests, req)
	return s.err
}

func (s *stub) RepositoryModelLoad(ctx context.Context, req *inference.RepositoryModelLoadRequest) (*inference.RepositoryModelLoadResponse, error) {
	if s.block {
		<-ctx.Done()
		_ = s.record(ctx, req)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &inference.RepositoryModelLoadResponse{}, s.record(ctx, req)
}

func (s *stub) RepositoryModelUnload(ctx context.Context, req *inference.RepositoryModelUnloadRequest) (*inference.RepositoryModelUnloadResponse, error) {
	return &inference.RepositoryModelUnloadResponse{}, s.record(ctx, req)
}

func (s *stub) RepositoryIndex(ctx context.Context, req *inference.RepositoryIndexRequest) (*inference.RepositoryIndexResponse, error) {
	if err := s.record(ctx, req); err != nil {
		return nil, err
	}
	if s.block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	models := s.index[0]
	if len(s.index) > 1 {
		s.index = s.index[1:]
	}
	return &inference.RepositoryIndexResponse{Models: models}, nil
}

func (s *stub) ModelStatistics(ctx context.Context, req *inference.ModelStatisticsRequest) (*inference.ModelStatisticsResponse, error) {
	return s.stats, s.record(ctx, req)
}

func startStub(t *testing.T, s *stub, cfg triton.Config) *triton.Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	inference.RegisterGRPCInferenceServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := triton.New(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return c
}

func TestLoadSendsConfigParameterAndDeadline(t *testing.T) {
	s := &stub{}
	c := startStub(t, s, triton.DefaultConfig())
	cfg := `{"max_batch_size": 8}`
	if err := c.Load(context.Background(), "asr-v2", triton.LoadOptions{ConfigJSON: cfg}); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background(), "plain", triton.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []proto.Message{
		&inference.RepositoryModelLoadRequest{ModelName: "asr-v2", Parameters: map[string]*inference.ModelRepositoryParameter{
			"config": {ParameterChoice: &inference.ModelRepositoryParameter_StringParam{StringParam: cfg}},
		}},
		&inference.RepositoryModelLoadRequest{ModelName: "plain"},
	}
	if diff := cmp.Diff(want, s.requests, protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, true}, s.deadlines); diff != "" {
		t.Errorf("deadline set (-want +got):\n%s", diff)
	}
}

// TestClientTimeoutNamed checks that a call ended by the client's own bound says which bound
// and its value (a load past 10 minutes read only "DeadlineExceeded: context deadline
// exceeded"), keeps the code, and that a call ended by the caller's deadline does not blame
// the client's bound.
func TestClientTimeoutNamed(t *testing.T) {
	s := &stub{block: true, index: [][]*inference.RepositoryIndexResponse_ModelIndex{nil}}
	cfg := triton.DefaultConfig()
	cfg.LoadTimeout, cfg.CallTimeout = 40*time.Millisecond, 30*time.Millisecond
	c := startStub(t, s, cfg)

	// grpc-go's message is "context deadline exceeded" when the client's timer fires first, and
	// "stream terminated by RST_STREAM with error code: CANCEL" when the server's copy of the
	// deadline (grpc-timeout) does: the prefix and the named bound are the client's.
	named := func(err error, prefix, suffix string) bool {
		return err != nil && strings.HasPrefix(err.Error(), prefix) && strings.HasSuffix(err.Error(), suffix)
	}
	err := c.Load(context.Background(), "asr", triton.LoadOptions{})
	want := `triton load "asr": DeadlineExceeded: … no answer within 40ms (triton.Config.LoadTimeout, the client's bound on a load)`
	if !named(err, `triton load "asr": DeadlineExceeded: `, `: no answer within 40ms (triton.Config.LoadTimeout, the client's bound on a load)`) {
		t.Errorf("Load past LoadTimeout: %v\nwant %s", err, want)
	}
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Load past LoadTimeout: code %v, errors.Is(context.DeadlineExceeded) %v", status.Code(err), errors.Is(err, context.DeadlineExceeded))
	}

	_, err = c.Index(context.Background(), false)
	want = `triton repository index: DeadlineExceeded: … no answer within 30ms (triton.Config.CallTimeout, the client's bound on a call)`
	if !named(err, `triton repository index: DeadlineExceeded: `, `: no answer within 30ms (triton.Config.CallTimeout, the client's bound on a call)`) {
		t.Errorf("Index past CallTimeout: %v\nwant %s", err, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = c.Load(ctx, "asr", triton.LoadOptions{})
	var se *triton.StatusError
	if !errors.As(err, &se) || se.Code != codes.DeadlineExceeded || se.Timeout != nil {
		t.Errorf("Load past the caller's deadline: %#v, want DeadlineExceeded with no client timeout", err)
	}
}

func TestUnloadSendsUnloadDependents(t *testing.T) {
	s := &stub{}
	c := startStub(t, s, triton.DefaultConfig())
	if err := c.Unload(context.Background(), "doc-extract", triton.UnloadOptions{UnloadDependents: true}); err != nil {
		t.Fatal(err)
	}
	want := []proto.Message{&inference.RepositoryModelUnloadRequest{ModelName: "doc-extract", Parameters: map[string]*inference.ModelRepositoryParameter{
		"unload_dependents": {ParameterChoice: &inference.ModelRepositoryParameter_BoolParam{BoolParam: true}},
	}}}
	if diff := cmp.Diff(want, s.requests, protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		give     error
		call     func(*triton.Client) error
		wantNil  bool
		wantIs   []error
		wantNot  []error
		wantText string
	}{
		{
			name:    "unload of unknown model is done (NotFound)",
			give:    status.Error(codes.NotFound, "Request for unknown model: 'gone' is not found"),
			call:    func(c *triton.Client) error { return c.Unload(context.Background(), "gone", triton.UnloadOptions{}) },
			wantNil: true,
		},
		{
			name:    "unload of unknown model is done (text, other code)",
			give:    status.Error(codes.InvalidArgument, "failed to unload: no such model 'gone'"),
			call:    func(c *triton.Client) error { return c.Unload(context.Background(), "gone", triton.UnloadOptions{}) },
			wantNil: true,
		},
		{
			name:     "load failure keeps reason",
			give:     status.Error(codes.Internal, "load failed for model 'big': version 1 is at UNAVAILABLE state: Internal: out of memory;"),
			call:     func(c *triton.Client) error { return c.Load(context.Background(), "big", triton.LoadOptions{}) },
			wantIs:   []error{triton.ErrLoadFailed},
			wantNot:  []error{triton.ErrModelNotFound, triton.ErrUnavailable, triton.ErrModelControlDisabled},
			wantText: `triton load "big": Internal: load failed for model 'big': version 1 is at UNAVAILABLE state: Internal: out of memory;`,
		},
		{
			name:     "default mode refuses load",
			give:     status.Error(codes.Unavailable, "explicit model load / unload is not allowed if polling is enabled"),
			call:     func(c *triton.Client) error { return c.Load(context.Background(), "m", triton.LoadOptions{}) },
			wantIs:   []error{triton.ErrModelControlDisabled},
			wantNot:  []error{triton.ErrLoadFailed, triton.ErrUnavailable},
			wantText: "explicit model load / unload is not allowed",
		},
		{
			name:     "default mode refuses unload",
			give:     status.Error(codes.Unavailable, "explicit model load / unload is not allowed if polling is enabled"),
			call:     func(c *triton.Client) error { return c.Unload(context.Background(), "m", triton.UnloadOptions{}) },
			wantIs:   []error{triton.ErrModelControlDisabled},
			wantText: `triton unload "m"`,
		},
		{
			name:    "unavailable server on index",
			give:    status.Error(codes.Unavailable, "connection refused"),
			call:    func(c *triton.Client) error { _, err := c.Index(context.Background(), false); return err },
			wantIs:  []error{triton.ErrUnavailable},
			wantNot: []error{triton.ErrLoadFailed, triton.ErrModelNotFound},
		},
		{
			name:    "empty model name",
			call:    func(c *triton.Client) error { return c.Load(context.Background(), "", triton.LoadOptions{}) },
			wantIs:  []error{triton.ErrInvalidArgument},
			wantNot: []error{triton.ErrLoadFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startStub(t, &stub{err: tt.give, index: [][]*inference.RepositoryIndexResponse_ModelIndex{nil}}, triton.DefaultConfig())
			err := tt.call(c)
			if tt.wantNil != (err == nil) {
				t.Fatalf("err = %v, want nil: %v", err, tt.wantNil)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			for _, target := range tt.wantNot {
				if errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = true", err, target)
				}
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}

func TestStatusErrorKeepsCode(t *testing.T) {
	c := startStub(t, &stub{err: status.Error(codes.Internal, "boom")}, triton.DefaultConfig())
	err := c.Load(context.Background(), "m", triton.LoadOptions{})
	if got := status.Code(err); got != codes.Internal {
		t.Errorf("status.Code = %v, want Internal", got)
	}
	var se *triton.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("%v is not a *StatusError", err)
	}
	if diff := cmp.Diff(&triton.StatusError{Op: "load", Model: "m", Code: codes.Internal, Message: "boom"}, se); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestIndexAndStatistics(t *testing.T) {
	s := &stub{
		index: [][]*inference.RepositoryIndexResponse_ModelIndex{{
			{Name: "a", Version: "1", State: "READY"},
			{Name: "b", Version: "1", State: "UNAVAILABLE", Reason: "unloaded"},
			{Name: "c"},
		}},
		stats: &inference.ModelStatisticsResponse{ModelStats: []*inference.ModelStatistics{{
			Name: "a", Version: "1", LastInference: 1764408000123, InferenceCount: 10, ExecutionCount: 4,
			InferenceStats: &inference.InferStatistics{
				Success: &inference.StatisticDuration{Count: 10, Ns: 5e9},
				Queue:   &inference.StatisticDuration{Count: 10, Ns: 1e9},
			},
			MemoryUsage: []*inference.MemoryUsage{{Type: "GPU", Id: 0, ByteSize: 7 << 30}, {Type: "CPU", ByteSize: 1 << 20}},
		}, {Name: "never", Version: "1"}}},
	}
	c := startStub(t, s, triton.DefaultConfig())
	idx, err := c.Index(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := []triton.ModelIndex{
		{Name: "a", Version: "1", State: triton.StateReady},
		{Name: "b", Version: "1", State: triton.StateUnavailable, Reason: "unloaded"},
		{Name: "c", State: triton.StateUnknown},
	}
	if diff := cmp.Diff(wantIdx, idx); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&inference.RepositoryIndexRequest{Ready: true}, s.requests[0], protocmp.Transform()); diff != "" {
		t.Errorf("index request (-want +got):\n%s", diff)
	}
	st, err := c.Statistics(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	want := []triton.ModelStats{{
		Name: "a", Version: "1", LastInference: time.Date(2025, 11, 29, 9, 20, 0, 123e6, time.UTC),
		InferenceCount: 10, ExecutionCount: 4,
		Success:     triton.DurationStat{Count: 10, Duration: 5 * time.Second},
		Queue:       triton.DurationStat{Count: 10, Duration: time.Second},
		MemoryUsage: []triton.MemoryUsage{{Type: "GPU", Bytes: 7 << 30}, {Type: "CPU", Bytes: 1 << 20}},
	}, {Name: "never", Version: "1"}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("statistics (-want +got):\n%s", diff)
	}
	if got := st[0].GPUBytes(); got != 7<<30 {
		t.Errorf("GPUBytes = %d, want %d", got, 7<<30)
	}
}

// TestStatisticsOutOfRange: unsigned wire values that do not fit their Go types are refused,
// naming the model, the field and the range, never wrapped into a negative duration, size or year.
func TestStatisticsOutOfRange(t *testing.T) {
	ok := func() *inference.ModelStatistics {
		return &inference.ModelStatistics{Name: "a", Version: "1", LastInference: 1764408000123,
			InferenceStats: &inference.InferStatistics{Success: &inference.StatisticDuration{Count: 1, Ns: 5e9}},
			MemoryUsage:    []*inference.MemoryUsage{{Type: "GPU", ByteSize: 7 << 30}}}
	}
	tests := []struct {
		name string
		mod  func(*inference.ModelStatistics)
		want string
	}{
		{"duration past int64", func(m *inference.ModelStatistics) {
			m.InferenceStats.Queue = &inference.StatisticDuration{Count: 1, Ns: 1 << 63}
		}, `triton: statistics of model "a": inference_stats.queue.ns = 9223372036854775808: want at most 9223372036854775807 (292 years)`},
		{"last inference past the year 9999", func(m *inference.ModelStatistics) { m.LastInference = 1 << 63 },
			`triton: statistics of model "a": last_inference = 9223372036854775808 ms: want at most 253402300799999 (the year 9999)`},
		{"one size past 1 PiB", func(m *inference.ModelStatistics) {
			m.MemoryUsage = append(m.MemoryUsage, &inference.MemoryUsage{Type: "CPU", ByteSize: 1 << 63})
		}, `triton: statistics of model "a": memory_usage[1].byte_size = 9223372036854775808: want at most 1125899906842624 (1 PiB)`},
		{"GPU sum past 1 PiB", func(m *inference.ModelStatistics) {
			m.MemoryUsage = []*inference.MemoryUsage{{Type: "GPU", ByteSize: 1 << 49}, {Type: "GPU", ByteSize: 1 << 49}, {Type: "GPU", ByteSize: 1}}
		}, `triton: statistics of model "a": memory_usage GPU byte_size sum 1125899906842625: want at most 1125899906842624 (1 PiB)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ok()
			tt.mod(m)
			c := startStub(t, &stub{stats: &inference.ModelStatisticsResponse{ModelStats: []*inference.ModelStatistics{m}}}, triton.DefaultConfig())
			st, err := c.Statistics(context.Background(), "")
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Statistics = %v, %v; want error %s", st, err, tt.want)
			}
		})
	}
	// At the bounds the values are kept exactly.
	m := ok()
	m.InferenceStats.Queue = &inference.StatisticDuration{Count: 1, Ns: math.MaxInt64}
	m.LastInference = 253402300799999
	m.MemoryUsage = []*inference.MemoryUsage{{Type: "GPU", ByteSize: 1 << 49}, {Type: "GPU", ByteSize: 1 << 49}}
	c := startStub(t, &stub{stats: &inference.ModelStatisticsResponse{ModelStats: []*inference.ModelStatistics{m}}}, triton.DefaultConfig())
	st, err := c.Statistics(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Queue.Duration != math.MaxInt64 || st[0].GPUBytes() != 1<<50 || st[0].LastInference.Year() != 9999 {
		t.Errorf("at the bounds: queue %d, GPU bytes %d, last inference %v", st[0].Queue.Duration, st[0].GPUBytes(), st[0].LastInference)
	}
}

// instantClock fires every After at once, so WaitState polls without
// waiting; its timeout never fires before maxPolls polls.
type instantClock struct{ polls, maxPolls int }

func (c *instantClock) Now() time.Time { return time.Time{} }
func (c *instantClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.polls++
	if c.polls != 1 || c.maxPolls == 0 { // the first After is the timeout
		ch <- time.Time{}
	}
	return ch
}

func TestWaitState(t *testing.T) {
	loading := []*inference.RepositoryIndexResponse_ModelIndex{{Name: "m", Version: "1", State: "LOADING"}}
	tests := []struct {
		name      string
		index     [][]*inference.RepositoryIndexResponse_ModelIndex
		wantReady bool
		want      triton.ModelIndex
		wantErr   error
	}{
		{
			name:      "ready after loading",
			index:     [][]*inference.RepositoryIndexResponse_ModelIndex{loading, loading, {{Name: "m", Version: "1", State: "READY"}}},
			wantReady: true,
			want:      triton.ModelIndex{Name: "m", Version: "1", State: triton.StateReady},
		},
		{
			name:      "failed load fails fast with reason",
			index:     [][]*inference.RepositoryIndexResponse_ModelIndex{loading, {{Name: "m", Version: "1", State: "UNAVAILABLE", Reason: "failed to load 'm' version 1: Internal: out of memory"}}},
			wantReady: true,
			want:      triton.ModelIndex{Name: "m", Version: "1", State: triton.StateUnavailable, Reason: "failed to load 'm' version 1: Internal: out of memory"},
			wantErr:   triton.ErrLoadFailed,
		},
		{
			name: "unavailable after unloading",
			index: [][]*inference.RepositoryIndexResponse_ModelIndex{
				{{Name: "m", Version: "1", State: "UNLOADING"}},
				{{Name: "m", Version: "1", State: "UNAVAILABLE", Reason: "unloaded"}},
			},
			want: triton.ModelIndex{Name: "m", Version: "1", State: triton.StateUnavailable, Reason: "unloaded"},
		},
		{
			name:  "missing from index counts as unloaded",
			index: [][]*inference.RepositoryIndexResponse_ModelIndex{{{Name: "other"}}},
			want:  triton.ModelIndex{Name: "m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := triton.DefaultConfig()
			cfg.Clock = &instantClock{maxPolls: 10}
			c := startStub(t, &stub{index: tt.index}, cfg)
			got, err := c.WaitState(context.Background(), "m", tt.wantReady, time.Minute)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitStateTimeout(t *testing.T) {
	cfg := triton.DefaultConfig()
	cfg.Clock = &instantClock{} // the timeout fires with the first poll
	c := startStub(t, &stub{index: [][]*inference.RepositoryIndexResponse_ModelIndex{{{Name: "m", Version: "1", State: "UNLOADING"}}}}, cfg)
	got, err := c.WaitState(context.Background(), "m", false, time.Second)
	if !errors.Is(err, triton.ErrWaitTimeout) {
		t.Fatalf("err = %v, want ErrWaitTimeout", err)
	}
	if got.State != triton.StateUnloading || !strings.Contains(err.Error(), "UNLOADING") {
		t.Errorf("got %+v, %v; want the last state UNLOADING named", got, err)
	}
}

func TestConfigValidate(t *testing.T) {
	err := triton.Config{}.Validate()
	for _, field := range []string{"CallTimeout", "LoadTimeout", "PollInterval"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want it to name %s", err, field)
		}
	}
	if err := triton.DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
	if _, err := triton.Dial("", triton.DefaultConfig()); !errors.Is(err, triton.ErrInvalidArgument) {
		t.Errorf("Dial(\"\") = %v, want ErrInvalidArgument", err)
	}
}

// TestDialReceivesLargeIndex: a RepositoryIndex of 100,000 models (5.4 MB) is received whole by
// a Dial client with DefaultConfig (DefaultMaxRecvBytes, 64 MiB). Before, Dial kept grpc-go's
// 4 MiB bound ("received message larger than max (…vs. 4194304)"): the controller's every loop
// failed and the pod never turned ready. An answer past the configured bound is still refused.
func TestDialReceivesLargeIndex(t *testing.T) {
	const n = 100_000
	models := make([]*inference.RepositoryIndexResponse_ModelIndex, n)
	for i := range models {
		models[i] = &inference.RepositoryIndexResponse_ModelIndex{Name: fmt.Sprintf("tenant-model-with-a-long-name-%010d", i), Version: "1", State: "READY"}
	}
	size := proto.Size(&inference.RepositoryIndexResponse{Models: models})
	if size <= 4<<20 {
		t.Fatalf("index of %d bytes; want it past grpc-go's 4 MiB default", size)
	}
	s := &stub{index: [][]*inference.RepositoryIndexResponse_ModelIndex{models}}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	inference.RegisterGRPCInferenceServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	dial := func(cfg triton.Config) *triton.Client {
		t.Helper()
		c, err := triton.Dial("passthrough:///bufnet", cfg, dialer)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	idx, err := dial(triton.DefaultConfig()).Index(context.Background(), false)
	if err != nil || len(idx) != n || idx[n-1].Name != models[n-1].Name {
		t.Fatalf("Index of a %d-byte answer: %d entries, %v; want %d", size, len(idx), err, n)
	}
	small := triton.DefaultConfig()
	small.MaxRecvBytes = 4 << 20
	if _, err := dial(small).Index(context.Background(), false); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Index past MaxRecvBytes 4 MiB: %v; want ResourceExhausted", err)
	}
	bad := triton.DefaultConfig()
	bad.MaxRecvBytes = -1
	if _, err := triton.Dial("passthrough:///bufnet", bad); !errors.Is(err, triton.ErrInvalidArgument) || !strings.Contains(err.Error(), "MaxRecvBytes is -1") {
		t.Errorf("Dial with MaxRecvBytes -1 = %v, want ErrInvalidArgument naming it", err)
	}
}
