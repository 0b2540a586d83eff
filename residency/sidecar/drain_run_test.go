package sidecar

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestRunDrainFinishesHeldLoad: the whole sidecar before tritontest, one load at a time. Five
// requests are held for "slow" (a 2 s load, under way) and three for "next" (waiting behind
// it) when POST /drain arrives. A draining pod starts no load, so the requests held for "next"
// are answered UNAVAILABLE with the retry pushback at once, to go to another replica; the load
// of "slow" finishes, its five requests are served, and only then does POST /drain answer
// drained, after which "slow" is unloaded (the drain's confirmation). Before, the requests
// held for "next" waited out their hold for a load that never came and failed at its end (here
// the client's 20 s deadline), and the drain read only Triton's counters, which never see a held
// request (TestDrainWaitsForFront pins that race down on a fake clock).
func TestRunDrainFinishesHeldLoad(t *testing.T) {
	const load = 2 * time.Second
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		Models: []tritontest.Model{
			{Name: "slow", MemoryBytes: 1 << 30, LoadTime: load, ServiceTime: time.Millisecond, Concurrency: 4},
			{Name: "next", MemoryBytes: 1 << 30, LoadTime: load, ServiceTime: time.Millisecond, Concurrency: 4},
		}})
	cfg, client := startSidecar(t, ts, `models:
  - name: slow
    digest: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
    tier: P2
    peakMemoryBytes: {1g.10gb: 1Gi}
    loadTime: 2s
  - name: next
    digest: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
    tier: P2
    peakMemoryBytes: {1g.10gb: 1Gi}
    loadTime: 2s
`, func(cfg *residency.Config) {
		cfg.ListenAddress = freeAddr(t)
		cfg.PropagationDelay, cfg.DrainPollInterval, cfg.DrainTimeout = 0, 100*time.Millisecond, 30*time.Second
		cfg.MaxConcurrentLoads = 1
	})
	ctx := context.Background()

	type result struct {
		model string
		err   error
		trl   metadata.MD
		at    time.Time
	}
	results := make(chan result, 8)
	var wg sync.WaitGroup
	send := func(model string, i int) {
		wg.Go(func() {
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			defer rcancel()
			var trl metadata.MD
			_, err := client.ModelInfer(rctx, &inference.ModelInferRequest{ModelName: model, Id: strconv.Itoa(i)}, grpc.Trailer(&trl))
			results <- result{model, err, trl, time.Now()}
		})
	}
	for i := range 5 {
		send("slow", i)
	}
	if err := ts.Await(ctx, func() bool { st, _ := ts.Model("slow"); return st.State == "LOADING" }); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		send("next", i)
	}
	// Give "next"'s requests time to be held (the loop is busy loading "slow", one at a time).
	time.Sleep(200 * time.Millisecond)
	if st, _ := ts.Model("slow"); st.State != "LOADING" {
		t.Fatalf("slow is %s before the drain, want LOADING (the test needs its load under way)", st.State)
	}

	resp, err := http.Post("http://"+cfg.ListenAddress+"/drain", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	drainedAt := time.Now()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /drain = %d %q, want 200", resp.StatusCode, body)
	}
	wg.Wait()
	close(results)
	served := 0
	for r := range results {
		switch r.model {
		case "slow":
			if r.err != nil {
				t.Errorf("request for slow (load under way at the drain): %v, want served", r.err)
				continue
			}
			served++
			if r.at.After(drainedAt) {
				t.Errorf("request for slow answered at %s, after POST /drain answered at %s", r.at.Format(time.StampMicro), drainedAt.Format(time.StampMicro))
			}
		case "next":
			if status.Code(r.err) != codes.Unavailable || len(r.trl.Get(front.PushbackKey)) != 1 {
				t.Errorf("request for next (not loading at the drain): %v, trailer %v; want Unavailable with the pushback", r.err, r.trl)
			}
		}
	}
	if served != 5 {
		t.Errorf("%d of 5 requests for slow served", served)
	}
	if st, _ := ts.Model("next"); st.Loads != 0 {
		t.Errorf("next loaded %d times during the drain, want 0", st.Loads)
	}
	if st, _ := ts.Model("slow"); st.State == "READY" {
		t.Errorf("slow is still READY after the drain, want unloaded (the drain's confirmation)")
	}
}
