package sidecar

import (
	"context"
	"fmt"
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

	"github.com/inferscale/inferscale/internal/promtest"
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
//
// Triton runs on a fake clock that stands still until the drain has answered "next"'s requests,
// so "slow" is LOADING however long the eight requests take to be held (CI's race run is
// several times slower); then it runs at real speed, so the load ends 2 s into the drain.
func TestRunDrainFinishesHeldLoad(t *testing.T) {
	const load = 2 * time.Second
	clock := tritontest.NewFakeClock(time.Unix(0, 0))
	ts := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30, Clock: clock,
		Models: []tritontest.Model{
			{Name: "slow", MemoryBytes: 1 << 30, LoadTime: load, ServiceTime: time.Millisecond, Concurrency: 4},
			{Name: "next", MemoryBytes: 1 << 30, LoadTime: load, ServiceTime: time.Millisecond, Concurrency: 4},
		}})
	runClock := clockAtRealSpeed(t, clock)
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
	t.Cleanup(runClock) // a test that failed before runClock: the sidecar stops without waiting out its drain
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
	// Every request held (the loop is busy loading "slow", one at a time) before the drain.
	held := func(model string) float64 {
		return sidecarMetric(t, cfg.ListenAddress, "inferscale_front_held_requests", model)
	}
	awaitCond(t, func() bool { return held("slow") == 5 && held("next") == 3 },
		func() string {
			return fmt.Sprintf("front holds %v for slow, %v for next; want 5 and 3", held("slow"), held("next"))
		})
	if st, _ := ts.Model("slow"); st.State != "LOADING" {
		t.Fatalf("slow is %s before the drain, want LOADING (the test needs its load under way)", st.State)
	}

	type drainAnswer struct {
		code int
		body []byte
		err  error
		at   time.Time
	}
	drained := make(chan drainAnswer, 1)
	go func() {
		resp, err := http.Post("http://"+cfg.ListenAddress+"/drain", "text/plain", nil)
		if err != nil {
			drained <- drainAnswer{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		drained <- drainAnswer{code: resp.StatusCode, body: body, at: time.Now()}
	}()
	// The drain answers "next"'s held requests at once; until then "slow"'s load stands still,
	// so none of it can finish before the drain began (nor "next"'s load start).
	var got []result
	for nexts := 0; nexts < 3; {
		r := <-results // every request ends by its 20 s deadline
		got = append(got, r)
		if r.model == "next" {
			nexts++
		}
	}
	runClock()
	var d drainAnswer
	select {
	case d = <-drained:
	case <-time.After(time.Minute):
		t.Fatal("POST /drain unanswered a minute after the clock ran")
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	drainedAt := d.at
	if d.code != http.StatusOK {
		t.Fatalf("POST /drain = %d %q, want 200", d.code, d.body)
	}
	wg.Wait()
	close(results)
	for r := range results {
		got = append(got, r)
	}
	served := 0
	for _, r := range got {
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

// sidecarMetric reads a gauge's or a counter's value from the sidecar's GET /metrics at addr
// (Config.ListenAddress), as Prometheus would scrape it: the series of name whose model label
// is model, or that has none for model ""; 0 while there is no such series.
func sidecarMetric(t *testing.T, addr, name, model string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	return promtest.ModelValue(t, resp.Body, name, model)
}

// awaitCond waits until cond holds, however slowly the machine runs, and fails the test with
// what's answer if it still does not after a minute.
func awaitCond(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %s", what())
		}
	}
}

// clockAtRealSpeed returns start, which sets clock running at real speed; until then it stands
// still. Call it before startSidecar, so that the clock runs until the sidecar has stopped, and
// register start as a cleanup after startSidecar, so that a test that failed before starting
// the clock does not leave the sidecar's shutdown waiting on it.
func clockAtRealSpeed(t *testing.T, clock *tritontest.FakeClock) (start func()) {
	ctx, stop := context.WithCancel(context.Background())
	release, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		for last := time.Now(); ctx.Err() == nil; {
			time.Sleep(time.Millisecond)
			now := time.Now()
			clock.Advance(now.Sub(last))
			last = now
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	var once sync.Once
	return func() { once.Do(func() { close(release) }) }
}
