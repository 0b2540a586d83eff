package capacity_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/capacity"
	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/tritontest"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// sim runs the generator against a real tritontest server (real gRPC on loopback) on one
// simulated clock: a discrete-event simulation. The generator sleeps through simClock; the
// server waits on the FakeClock; the pump advances the FakeClock to the next event once
// everything is parked — every request sent has reached the server, every executing request
// has its timer set, every finished one is recorded, and the generator sleeps — so latencies
// are exact queueing times, whatever the machine's load, and a level of minutes takes
// milliseconds per request.
type sim struct {
	fake *tritontest.FakeClock
	srv  *tritontest.Server
	gen  *capacity.Generator

	mu       sync.Mutex
	sleeping bool
	until    time.Time
	wake     chan struct{}
	// at, when not nil, runs once the clock reaches atTime (a fault switched on mid-run).
	at     func()
	atTime time.Time
}

func (s *sim) Now() time.Time { return s.fake.Now() }

func (s *sim) SleepUntil(ctx context.Context, t time.Time) error {
	s.mu.Lock()
	if !t.After(s.fake.Now()) {
		s.mu.Unlock()
		return ctx.Err()
	}
	ch := make(chan struct{})
	s.sleeping, s.until, s.wake = true, t, ch
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// state is what the pump watches: requests in the generator, executing and queued in the
// server, timers set on the fake clock.
type state struct{ inFlight, exec, pend, waiters int }

func (s *sim) state() state {
	st := state{inFlight: s.gen.InFlight(), waiters: s.fake.Waiters()}
	for _, m := range s.srv.Models() {
		st.exec += m.Executing
		st.pend += m.Pending
	}
	return st
}

// quiet reports whether nothing but the clock can make progress: every request the generator
// holds is at the server, and every executing one has its timer set.
func (st state) quiet() bool { return st.inFlight == st.exec+st.pend && st.waiters == st.exec }

// pump advances the clock from event to event until ctx ends. Requests cancelled at a level's
// end leave the server executing work the generator no longer holds (fewer in the generator
// than at the server), so quiet() cannot hold while they finish; then, and only then, a state
// unchanged for 5 ms of real time counts as quiet (the drain between levels and the warm-up
// window after it; neither is measured). Otherwise the pump waits for quiet() however long the
// machine takes, so a loaded machine cannot shift a measured time.
func (s *sim) pump(ctx context.Context) {
	var last state
	lastChange := time.Now()
	for ctx.Err() == nil {
		s.mu.Lock()
		sleeping, until := s.sleeping, s.until
		s.mu.Unlock()
		st := s.state()
		if st != last {
			last, lastChange = st, time.Now()
		}
		orphans := st.inFlight < st.exec+st.pend // the server runs requests the generator gave up
		if !sleeping || (!st.quiet() && (!orphans || time.Since(lastChange) < 5*time.Millisecond)) {
			time.Sleep(20 * time.Microsecond)
			continue
		}
		now := s.fake.Now()
		target := until
		if next, ok := s.fake.Next(); ok && next.Before(target) {
			target = next
		}
		if s.at != nil && !s.atTime.After(target) {
			s.fake.Advance(s.atTime.Sub(now))
			s.at()
			s.at = nil
			continue
		}
		s.fake.Advance(target.Sub(now))
		lastChange = time.Now()
		if !target.Before(until) {
			s.mu.Lock()
			s.sleeping = false
			close(s.wake)
			s.mu.Unlock()
		}
	}
}

// startSim serves model on a FakeClock and returns a generator wired to it, the pump running.
func startSim(t *testing.T, model tritontest.Model, cfg capacity.MeasureConfig) *sim {
	t.Helper()
	fake := tritontest.NewFakeClock(t0)
	srv := tritontest.Start(t, tritontest.Config{
		ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		Models: []tritontest.Model{model}, StartupModels: []string{model.Name}, Clock: fake,
	})
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := &sim{fake: fake, srv: srv}
	target := capacity.TritonTarget{Client: inference.NewGRPCInferenceServiceClient(conn), Request: &inference.ModelInferRequest{ModelName: model.Name}}
	s.gen, err = capacity.NewGenerator(target, s, cfg, simSeed)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.pump(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return s
}

// mdcWaitTail estimates P(W > wait) in the M/D/c queue (Poisson arrivals at rate λ,
// deterministic service d, c servers, FCFS) by the Kiefer–Wolfowitz recursion over n
// customers: the workload vector V (each server's remaining work, sorted) evolves as
// V ← sort(max(V − A, 0) with d added to its least element); the customer's wait is that least
// element. Common random numbers (one seed) make the estimate monotone in λ.
func mdcWaitTail(lambda float64, c int, d, wait float64, n int) float64 {
	rng := rand.New(rand.NewPCG(7, 7))
	v := make([]float64, c)
	over := 0
	for range n {
		a := rng.ExpFloat64() / lambda
		for i := range v {
			v[i] = max(v[i]-a, 0)
		}
		if v[0] > wait {
			over++
		}
		v[0] += d
		for i := 1; i < c && v[i-1] > v[i]; i++ { // v[0] grew: bubble it into place
			v[i-1], v[i] = v[i], v[i-1]
		}
	}
	return float64(over) / float64(n)
}

// sloCapacityMDc is the highest λ with P(latency > slo) ≤ 1 − q, latency = wait + d, found by
// bisection on mdcWaitTail.
func sloCapacityMDc(c int, d, slo, q float64) float64 {
	lo, hi := 0.75*float64(c)/d, float64(c)/d // the answer lies above 75 % load for this SLO
	for hi-lo > 0.01 {
		mid := (lo + hi) / 2
		if mdcWaitTail(mid, c, d, slo-d, 2_000_000) <= 1-q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// simMeasure is the measurement used on the simulated clock: windows of 10 s (≥ 300 requests
// near capacity, so the 0.99 quantile rests on a few samples above it per window rather than
// on the maximum), up to 12 windows.
func simMeasure() capacity.MeasureConfig {
	cfg := capacity.DefaultMeasureConfig()
	cfg.Window = 10 * time.Second
	cfg.MaxWindows = 12
	cfg.SLO = capacity.SLO{Latency: time.Second, Quantile: 0.99, MaxErrorRate: 0.001}
	return cfg
}

// TestSearchMatchesMDc: one model, 4 concurrent executions, 100 ms deterministic service,
// SLO 1 s at the 0.99 quantile. Under Poisson arrivals that is an M/D/4 queue; its SLO capacity
// λ* solves P(wait > 0.9 s) = 0.01. Computed here (Kiefer–Wolfowitz, 2·10⁶ customers): λ* ≈
// 37.7 req/s, below the saturation rate c/d = 40 req/s. μ must land within 10 % of λ* and
// never above 40.
func TestSearchMatchesMDc(t *testing.T) {
	if testing.Short() {
		t.Skip("simulated search: a few seconds")
	}
	const c, d, slo, q = 4, 0.1, 1.0, 0.99
	want := sloCapacityMDc(c, d, slo, q)
	t.Logf("M/D/%d SLO capacity λ* = %.2f req/s (saturation %.0f req/s)", c, want, c/d)
	if want < 35 || want > 39.9 {
		t.Fatalf("λ* = %.2f: the queueing computation is off (expected ≈ 37)", want)
	}
	s := startSim(t, tritontest.Model{Name: "m", MemoryBytes: 1 << 30, ServiceTime: 100 * time.Millisecond, Concurrency: c}, simMeasure())
	res, err := capacity.Search(context.Background(), capacity.SearchConfig{StartRPS: 5, StepFactor: 2, Precision: 0.03, MaxRPS: 1000, MinRPS: 0.5}, s.gen.Measure)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("μ = %.2f req/s", res.MuRPS)
	for _, l := range res.Curve {
		t.Logf("offered %6.2f: throughput %6.2f p50 %.3f p99 %.3f stable %v keepsUp %v slo %v windows %d",
			l.OfferedRPS, l.ThroughputRPS, l.P50, l.P99, l.Stable, l.KeepsUp, l.MeetsSLO, len(l.Windows))
	}
	if res.MuRPS > 40 || math.Abs(res.MuRPS/want-1) > 0.10 {
		t.Errorf("μ = %.2f req/s, want within 10 %% of λ* = %.2f and at most 40", res.MuRPS, want)
	}
	if !slices.IsSortedFunc(res.Curve, func(a, b capacity.Level) int { return int(a.OfferedRPS - b.OfferedRPS) }) {
		t.Errorf("curve not sorted by rate")
	}
}

// simSeed seeds the simulated arrivals; figures for seeds 1–4 are in BENCHMARKS.md.
var simSeed uint64 = 1

// TestFaultMidLevelIsNotStable: at 20 req/s the model (4 × 100 ms) runs at half load and the
// level turns stable; with ExtraServiceTime 200 ms switched on 25 s into the level, service
// becomes 300 ms (capacity 13.3 req/s < 20), the backlog grows every window, and the level is
// neither stable nor passing: it ends once three windows in a row miss the SLO (or at
// MaxWindows).
func TestFaultMidLevelIsNotStable(t *testing.T) {
	model := tritontest.Model{Name: "m", MemoryBytes: 1 << 30, ServiceTime: 100 * time.Millisecond, Concurrency: 4}
	cfg := simMeasure()
	cfg.MaxWindows = 8

	calm := startSim(t, model, cfg)
	l, err := calm.gen.Measure(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Stable || !l.Passes() {
		t.Fatalf("without the fault: stable %v passes %v (windows %d), want a stable passing level", l.Stable, l.Passes(), len(l.Windows))
	}

	s := startSim(t, model, cfg)
	s.atTime = t0.Add(25 * time.Second)
	s.at = func() {
		if err := s.srv.SetFault("m", tritontest.Fault{ExtraServiceTime: 200 * time.Millisecond}); err != nil {
			t.Error(err)
		}
	}
	l, err = s.gen.Measure(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	if l.Stable || l.Passes() || !(l.Exhausted || l.Failed) {
		t.Errorf("with the fault: stable %v passes %v exhausted %v failed %v (p99 %.2f s, windows %d), want an unstable, failing level",
			l.Stable, l.Passes(), l.Exhausted, l.Failed, l.P99, len(l.Windows))
	}
}

// TestTraceShapeKeepsTheRate: with a bursty trace shape (gaps 0, 0, 0, 4 s: bursts of four),
// the offered rate is still the one asked for, and the bursts queue where Poisson would not:
// 4 arrivals at once on a model of 2 executions × 100 ms wait 100 ms in half the cases.
func TestTraceShapeKeepsTheRate(t *testing.T) {
	cfg := simMeasure()
	cfg.MaxWindows = 5
	s := startSim(t, tritontest.Model{Name: "m", ServiceTime: 100 * time.Millisecond, Concurrency: 2}, cfg)
	if err := s.gen.UseTraceShape([]time.Duration{0, 0, 0, 0, 4 * time.Second}); err != nil {
		t.Fatal(err)
	}
	l, err := s.gen.Measure(context.Background(), 4)
	if err != nil {
		t.Fatal(err)
	}
	var sent int
	var secs float64
	for _, w := range l.Windows {
		sent += w.Sent
		secs += l.WindowSeconds
	}
	if got := float64(sent) / secs; math.Abs(got/4-1) > 0.05 {
		t.Errorf("offered %.2f req/s, want 4 ± 5 %%", got)
	}
	if l.P50 < 0.099 || l.P99 < 0.199 {
		t.Errorf("p50 %.3f s, p99 %.3f s; want bursts of 4 on 2 slots: p50 ≥ 0.1, p99 ≥ 0.2", l.P50, l.P99)
	}
	if err := s.gen.UseTraceShape([]time.Duration{time.Second, time.Second}); err == nil {
		t.Error("a trace with all arrivals at one time was accepted")
	}
}
