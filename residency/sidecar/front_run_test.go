package sidecar

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// freeAddr returns a loopback address with a port free a moment ago (Run takes addresses,
// not listeners).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRunHoldsThroughOnDemandLoad: the whole sidecar with its front before tritontest. A P2
// model nobody has asked for yet receives 20 requests at once through the front: the first
// held request wakes the loop, the held requests are the plan's queued work, the model loads
// (1 s), and every request succeeds — none fails NOT_FOUND as straight to Triton. The loop
// interval is 5 s, so a wait under it shows the loop was woken rather than reached.
func TestRunHoldsThroughOnDemandLoad(t *testing.T) {
	const load = time.Second
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		Models: []tritontest.Model{{Name: "ondemand", MemoryBytes: 1 << 30, LoadTime: load, ServiceTime: time.Millisecond, Concurrency: 4}}})
	cfg, client := startSidecar(t, ts, `models:
  - name: ondemand
    digest: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    tier: P2
    peakMemoryBytes: {1g.10gb: 1Gi}
    loadTime: 1s
`, func(cfg *residency.Config) {
		cfg.ListenAddress, cfg.PropagationDelay, cfg.DrainTimeout = "127.0.0.1:0", 0, time.Second
		// Triton's HTTP, for the HTTP front's pass-through (tritontest serves gRPC only).
		tritonHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "triton http "+r.URL.Path)
		}))
		t.Cleanup(tritonHTTP.Close)
		cfg.InferenceHTTPListen, cfg.TritonHTTPURL = freeAddr(t), tritonHTTP.URL
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	waits := make([]time.Duration, 20)
	for i := range waits {
		wg.Go(func() {
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
			defer rcancel()
			start := time.Now()
			resp, err := client.ModelInfer(rctx, &inference.ModelInferRequest{ModelName: "ondemand", Id: strconv.Itoa(i)})
			waits[i] = time.Since(start)
			if err != nil || resp.GetId() != strconv.Itoa(i) {
				t.Errorf("request %d: %v, %v", i, resp, err)
			}
		})
	}
	wg.Wait()
	longest := time.Duration(0)
	for _, w := range waits {
		longest = max(longest, w)
	}
	t.Logf("longest wait %s (load %s, loop interval %s)", longest, load, cfg.LoopInterval)
	if longest >= cfg.LoopInterval {
		t.Errorf("longest wait %s, want < the %s loop interval (the held request wakes the loop)", longest, cfg.LoopInterval)
	}
	if st, _ := ts.Model("ondemand"); st.Loads != 1 {
		t.Errorf("loads = %d, want 1", st.Loads)
	}
	resp, err := http.Get("http://" + cfg.InferenceHTTPListen + "/v2/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "triton http /v2/health/ready" {
		t.Errorf("GET /v2/health/ready through the HTTP front = %q, want Triton's answer", b)
	}
}

// startSidecar runs the whole sidecar (Run) before ts with the catalog given as YAML, the
// defaults tests share (profile 1g.10gb, NVML off, the front on a free port) and tweak's
// changes, until the test ends (Run must then return nil); it returns the configuration and a
// gRPC client of the front, once the front serves.
func startSidecar(t *testing.T, ts *tritontest.Server, catalog string, tweak func(*residency.Config)) (residency.Config, inference.GRPCInferenceServiceClient) {
	t.Helper()
	catPath := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(catPath, []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := residency.DefaultConfig()
	cfg.TritonAddress, cfg.TritonMetricsURL, cfg.CatalogPath = ts.GRPCAddr(), ts.MetricsURL(), catPath
	cfg.MIGProfile, cfg.BudgetBytes, cfg.NVML = "1g.10gb", 10307921510, "off"
	cfg.InferenceListen = freeAddr(t)
	tweak(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	cc, err := grpc.NewClient(cfg.InferenceListen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	client := inference.NewGRPCInferenceServiceClient(cc)
	// Wait until the front serves (and passes ServerReady through to Triton).
	for {
		r, err := client.ServerReady(ctx, &inference.ServerReadyRequest{}, grpc.WaitForReady(true))
		if err == nil && r.GetReady() {
			return cfg, client
		}
	}
}
