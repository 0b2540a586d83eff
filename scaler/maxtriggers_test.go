package scaler

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/prom"
)

// TestMaxTriggers: any gRPC caller can invent ScaledObjects (or metadata) and each
// registered trigger costs memory and queries per refresh (20,000 custom triggers
// measured 597 MiB RSS). Past MaxTriggers a new one is ResourceExhausted naming the
// flag, registers nothing and subscribes no query; registered triggers keep being
// served; a forgotten one frees its place.
func TestMaxTriggers(t *testing.T) {
	h := newHarnessConfig(t, nil, func(c *ServerConfig) { c.MaxTriggers = 3 })
	ctx := context.Background()
	for i := range 3 {
		if _, err := h.client.GetMetricSpec(ctx, ref("team-a", fmt.Sprintf("pool-%d", i), queueMeta())); err != nil {
			t.Fatalf("pool-%d: %v", i, err)
		}
	}
	subs := func() int { h.sig.mu.Lock(); defer h.sig.mu.Unlock(); return len(h.sig.subs) }
	subscribed := subs()

	_, err := h.client.GetMetricSpec(ctx, ref("team-a", "pool-3", queueMeta()))
	const want = "ScaledObject team-a/pool-3: not registered: the scaler already serves 3 triggers, its limit (--max-triggers); a trigger KEDA has not called about for --forget-after (10m0s) is dropped and frees a place"
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != want {
		t.Fatalf("4th trigger: %v, want ResourceExhausted %q", err, want)
	}
	// The same ScaledObject with other metadata is another trigger: refused too.
	if _, err := h.client.GetMetricSpec(ctx, ref("team-a", "pool-0", queueMeta("sloWaitSeconds", "1"))); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("pool-0 with new metadata: %v, want ResourceExhausted", err)
	}
	if got := h.srv.Triggers(); got != 3 {
		t.Errorf("Triggers() = %d, want 3", got)
	}
	if got := subs(); got != subscribed {
		t.Errorf("refused triggers subscribed %d queries", got-subscribed)
	}
	// A registered trigger is still served.
	if _, err := h.client.GetMetricSpec(ctx, ref("team-a", "pool-1", queueMeta())); err != nil {
		t.Errorf("registered pool-1: %v", err)
	}

	// pool-0 and pool-2 go unused past ForgetAfter; pool-1 is asked about.
	h.clock.add(9 * time.Minute)
	if _, err := h.client.GetMetricSpec(ctx, ref("team-a", "pool-1", queueMeta())); err != nil {
		t.Fatal(err)
	}
	h.clock.add(2 * time.Minute)
	h.srv.Refresh(h.clock.now())
	if got := h.srv.Triggers(); got != 1 {
		t.Fatalf("Triggers() after forgetting = %d, want 1", got)
	}
	if _, err := h.client.GetMetricSpec(ctx, ref("team-a", "pool-3", queueMeta())); err != nil {
		t.Errorf("pool-3 after two were forgotten: %v", err)
	}
}

func TestMaxTriggersConfig(t *testing.T) {
	c := DefaultConfig()
	if c.MaxTriggers != 10000 {
		t.Errorf("DefaultConfig().MaxTriggers = %d, want 10000", c.MaxTriggers)
	}
	for _, v := range []int{0, -1, 1000001} {
		c.MaxTriggers = v
		want := fmt.Sprintf("MaxTriggers (--max-triggers) %d: must be in [1, 1000000]", v)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("MaxTriggers %d: Validate() = %v, want %q", v, err, want)
		}
	}
	if _, err := NewServer(ServerConfig{RefreshInterval: time.Second, ForgetAfter: time.Second, MaxTriggers: -1}, newFakeSignals(), nil, nil, nil); err == nil || !strings.Contains(err.Error(), "MaxTriggers -1: must be ≥ 0") {
		t.Errorf("NewServer(MaxTriggers -1) = %v", err)
	}
}

// TestHostileRefs: a reference no ScaledObject can have is refused before anything is
// kept, and no error repeats more than 64 bytes of what the caller sent (a 3 MiB metric
// name came back whole in the NotFound message).
func TestHostileRefs(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	tests := []struct {
		name string
		give *pb.ScaledObjectRef
		want string
	}{
		{"namespace past 63 bytes", ref(strings.Repeat("n", 64), "pool", queueMeta()),
			`scaledObjectRef.namespace "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn": must be a Kubernetes namespace name, at most 63 bytes`},
		{"1 MiB namespace", ref(strings.Repeat("n", 1<<20), "pool", queueMeta()), `… (1048576 bytes): must be a Kubernetes namespace name, at most 63 bytes`},
		{"name past 253 bytes", ref("team-a", strings.Repeat("p", 254), queueMeta()), `… (254 bytes): must be a Kubernetes object name, at most 253 bytes`},
		{"metadata past 160 KiB", ref("team-a", "pool", queueMeta("model", strings.Repeat("m", 160<<10))),
			`ScaledObject team-a/pool: scalerMetadata is 163956 bytes (keys and values), the largest "model" (163845 bytes); the limit is 163840 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, call := range h.everyRPC(ctx, tt.give) {
				st := status.Convert(call())
				if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.want) {
					t.Errorf("%s: %v %.300q, want InvalidArgument containing %q", name, st.Code(), st.Message(), tt.want)
				}
				if len(st.Message()) > 400 {
					t.Errorf("%s: a %d-byte message", name, len(st.Message()))
				}
			}
		})
	}
	if got := h.srv.Triggers(); got != 0 {
		t.Errorf("Triggers() = %d after refused refs, want 0", got)
	}

	r := ref("team-a", "pool", queueMeta())
	if _, err := h.client.GetMetricSpec(ctx, r); err != nil {
		t.Fatal(err)
	}
	_, err := h.client.GetMetrics(ctx, &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: strings.Repeat("z", 3<<20)})
	st := status.Convert(err)
	if want := `metric "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"… (3145728 bytes) is not served for ScaledObject team-a/pool`; st.Code() != codes.NotFound || !strings.HasPrefix(st.Message(), want) || len(st.Message()) > 400 {
		t.Errorf("GetMetrics with a 3 MiB name: %v %.300q (%d bytes), want NotFound starting %q", st.Code(), st.Message(), len(st.Message()), want)
	}
}

// TestMaxStreams: at most MaxTriggers StreamIsActive calls are open at once (KEDA keeps one
// per external-push trigger); one more is ResourceExhausted, and a closed stream frees its
// place. Before, one trigger took any number of streams (≈ 27 KiB each).
func TestMaxStreams(t *testing.T) {
	h := newHarnessConfig(t, nil, func(c *ServerConfig) { c.MaxTriggers = 2 })
	h.sig.set("team-a", prom.KindQueue, prom.Result{Value: 1, EvaluatedAt: t0})
	r := ref("team-a", "pool", queueMeta())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(ctx context.Context) (pb.ExternalScaler_StreamIsActiveClient, error) {
		s, err := h.client.StreamIsActive(ctx, r)
		if err != nil {
			return nil, err
		}
		_, err = s.Recv() // the first push, or the refusal
		return s, err
	}
	for i := range 2 {
		if _, err := open(ctx); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	_, err := open(ctx3)
	const want = "ScaledObject team-a/pool: StreamIsActive: 2 streams are open, the limit (--max-triggers: KEDA keeps one per external-push trigger)"
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != want {
		t.Fatalf("third stream: %v, want ResourceExhausted %q", err, want)
	}
	cancel() // both close
	deadline := time.Now().Add(5 * time.Second)
	for h.srv.streams.Load() != 0 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if _, err := open(ctx3); err != nil {
		t.Errorf("a stream after the others closed: %v", err)
	}
}

// TestMaxTotalMetadataBytes: with MaxTriggers set, the registered triggers' metadata together
// holds at most MaxTotalMetadataBytes (10,000 triggers of 160 KiB each would hold 1.6 GB); a
// trigger past it is ResourceExhausted and a forgotten one gives its bytes back.
func TestMaxTotalMetadataBytes(t *testing.T) {
	h := newHarnessConfig(t, nil, func(c *ServerConfig) { c.MaxTriggers = 1000 })
	ctx := context.Background()
	big := strings.Repeat("m", 150<<10)
	meta := queueMeta("caCert", big) // a key KEDA forwards and the scaler ignores
	per := metadataBytes(ref("team-a", "x", meta))
	fit := MaxTotalMetadataBytes / per
	for i := range fit {
		if _, err := h.client.GetMetricSpec(ctx, ref("team-a", fmt.Sprintf("pool-%d", i), meta)); err != nil {
			t.Fatalf("trigger %d of %d: %v", i, fit, err)
		}
	}
	_, err := h.client.GetMetricSpec(ctx, ref("team-a", "one-more", meta))
	want := fmt.Sprintf("ScaledObject team-a/one-more: not registered: the registered triggers' metadata holds %d bytes and this one's %d would pass 16777216 (16 MiB, MaxTotalMetadataBytes)", fit*per, per)
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != want {
		t.Fatalf("past the total: %v, want ResourceExhausted %q", err, want)
	}
	h.clock.add(11 * time.Minute) // every trigger unused past ForgetAfter
	h.srv.Refresh(h.clock.now())
	if _, err := h.client.GetMetricSpec(ctx, ref("team-a", "one-more", meta)); err != nil {
		t.Errorf("after the others were forgotten: %v", err)
	}
}
