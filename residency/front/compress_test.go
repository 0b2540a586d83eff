package front_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
)

// TestCompressedRequests: requests compressed with gzip or deflate, which Triton's gRPC server
// and tritonclient.grpc take, pass through the front and are answered in kind; before, they
// failed UNIMPLEMENTED ("Decompressor is not installed for grpc-encoding"). A message that
// decompresses past --max-request-bytes is refused RESOURCE_EXHAUSTED, however small on the
// wire: 4 MiB + 1 of zeros is a few KiB compressed.
func TestCompressedRequests(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestBytes = minBytes
	tc := oneModel("a", 0)
	tc.StartupModels = []string{"a"}
	h := start(t, tc, cfg, false, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, enc := range []string{"gzip", "deflate"} {
		resp, err := h.client.ModelInfer(ctx, sizedRequest(t, "a", 64<<10), grpc.UseCompressor(enc))
		if err != nil || resp.GetId() != "sized" {
			t.Errorf("%s ModelInfer through the front: %v (id %q), want answered", enc, err, resp.GetId())
		}
		if _, err := h.client.ServerLive(ctx, &inference.ServerLiveRequest{}, grpc.UseCompressor(enc)); err != nil {
			t.Errorf("%s ServerLive through the front: %v", enc, err)
		}
		_, err = h.client.ModelInfer(ctx, sizedRequest(t, "a", minBytes+1), grpc.UseCompressor(enc))
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("%s request of %d bytes decompressed: %v, want RESOURCE_EXHAUSTED", enc, minBytes+1, err)
		}
	}
}
