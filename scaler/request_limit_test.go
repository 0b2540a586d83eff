package scaler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestRequestSizeBounded: the served gRPC server reads at most MaxRequestBytes per request.
// Before, gRPC's 4 MiB default let one call of 100,000 tiny metadata entries decode into a
// map (≈ 17 MiB of heap at 4 MiB) before checkRef refused it; now gRPC refuses it from the
// frame's length, before reading it. Metadata just past MaxMetadataBytes still gets checkRef's
// InvalidArgument naming the limit.
func TestRequestSizeBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PrometheusAddress = "http://127.0.0.1:1"
	r := startScaler(t, cfg)
	conn, c := dial(t, r.grpcAddr)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	over := ref("team-a", "pool", queueMeta("model", strings.Repeat("m", MaxMetadataBytes)))
	_, err := c.GetMetricSpec(ctx, over)
	n := metadataBytes(over)
	want := fmt.Sprintf(`ScaledObject team-a/pool: scalerMetadata is %d bytes (keys and values), the largest "model" (%d bytes); the limit is 163840 bytes`, n, MaxMetadataBytes+len("model"))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), want) {
		t.Errorf("metadata of %d bytes: %v %q, want InvalidArgument starting %q", n, st.Code(), st.Message(), want)
	}

	md := make(map[string]string, 100000)
	for i := range 100000 {
		md[fmt.Sprintf("%06x", i)] = ""
	}
	tiny := ref("team-a", "pool", md)
	_, err = c.GetMetricSpec(ctx, tiny)
	want = fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", proto.Size(tiny), MaxRequestBytes)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != want {
		t.Errorf("100,000 tiny entries: %v %q, want ResourceExhausted %q", st.Code(), st.Message(), want)
	}
	if MaxRequestBytes != 262144 {
		t.Errorf("MaxRequestBytes = %d, want 262144 (256 KiB)", MaxRequestBytes)
	}
}

// TestModelBounded: model is at most 1024 bytes, refused by name with its range. Before, a
// 17,000-byte model on a vLLM trigger with gpuHourPrice was accepted and the trigger then
// failed "verifiedQuery: verifiedQuery: … the query is 17083 bytes", naming a key the user
// never wrote. At the bound, even a model of control characters (4 bytes each once quoted)
// registers on the real poller.
func TestModelBounded(t *testing.T) {
	vllm := func(model string) map[string]string {
		return map[string]string{"engine": "vllm", "model": model, "gpuHourPrice": "1"}
	}
	_, err := ParseMetadata(vllm(strings.Repeat("m", 1025)), Defaults{PrometheusAddress: "http://127.0.0.1:1"})
	want := `invalid scaler metadata: model must be a model label value of at most 1024 bytes, got "` + strings.Repeat("m", 64) + `"… (1025 bytes)`
	if err == nil || err.Error() != want {
		t.Errorf("1025-byte model: %v, want exactly %q (and no \"model is required\")", err, want)
	}

	cfg := DefaultConfig()
	cfg.PrometheusAddress = "http://127.0.0.1:1"
	r := startScaler(t, cfg)
	conn, c := dial(t, r.grpcAddr)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.GetMetricSpec(ctx, ref("team-a", "llama", vllm(strings.Repeat("m", 17000))))
	want = `ScaledObject team-a/llama: invalid scaler metadata: model must be a model label value of at most 1024 bytes, got "` + strings.Repeat("m", 64) + `"… (17000 bytes)`
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != want {
		t.Errorf("17,000-byte model: %v %q, want InvalidArgument %q", st.Code(), st.Message(), want)
	}
	if _, err := c.GetMetricSpec(ctx, ref("team-a", "llama", vllm(strings.Repeat("\x01", 1024)))); err != nil {
		t.Errorf("1024-byte model of control characters: %v, want registered", err)
	}
}
