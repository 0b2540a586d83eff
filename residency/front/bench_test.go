package front_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// callers is the number of concurrent clients of the overhead benchmark (the target).
const callers = 8

// measure sends n small ModelInfer requests from callers goroutines over one connection and
// returns every request's latency and the throughput in requests per second.
func measure(b *testing.B, c inference.GRPCInferenceServiceClient, n int) ([]time.Duration, float64) {
	b.Helper()
	lat := make([]time.Duration, n)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				t0 := time.Now()
				if _, err := infer(context.Background(), c, "small", "1", nil); err != nil {
					b.Error(err)
					return
				}
				lat[k] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	return lat, float64(n) / time.Since(start).Seconds()
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkOverhead compares a small ModelInfer (one 1×4 FP32 input, 16 bytes of tensor)
// through the front with the same call straight to tritontest, both on loopback, 8 concurrent
// callers, in the same run: b.N requests each way, in alternating blocks. Targets (issue 17): front p99 ≤
// 1.2 × direct p99 + 200 µs (p99_budget_us) and throughput ≥ 0.8 × direct (rps_ratio).
// service is tritontest's compute time per request: 0 measures the bare overhead, 1ms a small
// model on a GPU.
func BenchmarkOverhead(b *testing.B) {
	for _, service := range []time.Duration{0, time.Millisecond} {
		b.Run("service="+service.String(), func(b *testing.B) {
			tc := tritontest.DefaultConfig()
			tc.Models = []tritontest.Model{{Name: "small", MemoryBytes: 1 << 20, ServiceTime: service, Concurrency: callers}}
			tc.StartupModels = []string{"small"}
			h := start(b, tc, testConfig(), false, "small")
			measure(b, h.direct, 200) // warm both connections
			measure(b, h.client, 200)
			// Alternate blocks of 500 requests, so that both paths see the same machine load.
			const block = 500
			var dLat, fLat []time.Duration
			var dSec, fSec float64
			b.ResetTimer()
			var dCPU, fCPU time.Duration // process CPU time (client, front and tritontest together)
			for done := 0; done < b.N; done += block {
				n := min(block, b.N-done)
				c0 := cpuTime(b)
				l, r := measure(b, h.direct, n)
				c1 := cpuTime(b)
				dLat, dSec, dCPU = append(dLat, l...), dSec+float64(n)/r, dCPU+c1-c0
				l, r = measure(b, h.client, n)
				fLat, fSec, fCPU = append(fLat, l...), fSec+float64(n)/r, fCPU+cpuTime(b)-c1
			}
			b.StopTimer()
			dRPS, fRPS := float64(b.N)/dSec, float64(b.N)/fSec
			us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
			dP99, fP99 := quantile(dLat, 0.99), quantile(fLat, 0.99)
			b.ReportMetric(us(quantile(dLat, 0.5)), "direct_p50_us")
			b.ReportMetric(us(quantile(fLat, 0.5)), "front_p50_us")
			b.ReportMetric(us(dP99), "direct_p99_us")
			b.ReportMetric(us(fP99), "front_p99_us")
			b.ReportMetric(1.2*us(dP99)+200, "p99_budget_us")
			b.ReportMetric(dRPS, "direct_rps")
			b.ReportMetric(fRPS, "front_rps")
			b.ReportMetric(fRPS/dRPS, "rps_ratio")
			b.ReportMetric(us(dCPU)/float64(b.N), "direct_cpu_us/req")
			b.ReportMetric(us(fCPU)/float64(b.N), "front_cpu_us/req")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// holdClientEnv carries the front's address to TestHoldClientProcess.
const holdClientEnv = "INFERSCALE_FRONT_HOLD_CLIENT"

// heldForMemory is how many requests BenchmarkHoldMemory holds (the figure).
const heldForMemory = 1000

// BenchmarkHoldMemory holds 1,000 small ModelInfer requests for a model that is not loaded
// and reports the memory the front then uses (heap in use and goroutine stacks, after a GC)
// above its idle baseline. The clients run in a child process (TestHoldClientProcess), so
// only the front's memory (and an idle tritontest's) is counted. Target (issue 17): ≤ 16 MiB.
func BenchmarkHoldMemory(b *testing.B) {
	for range b.N {
		tc := tritontest.DefaultConfig()
		tc.Models = []tritontest.Model{{Name: "small", MemoryBytes: 1 << 20}}
		cfg := testConfig()
		cfg.MaxHeldRequests = heldForMemory
		h := start(b, tc, cfg, false, "small")
		// The front's connection to Triton is part of its idle baseline.
		if _, err := h.client.ServerReady(context.Background(), &inference.ServerReadyRequest{}); err != nil {
			b.Fatal(err)
		}
		var stack uint64
		inUse := func() uint64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			stack = ms.StackInuse - stack
			return ms.HeapInuse + ms.StackInuse
		}
		before := inUse()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHoldClientProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), holdClientEnv+"="+h.addr)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		waitHeld(b, h, "small", heldForMemory)
		after := inUse()
		_ = stdin.Close() // the client cancels its calls and exits
		_ = cmd.Wait()
		waitHeld(b, h, "small", 0)
		b.ReportMetric(float64(after-before)/(1<<20), "MiB_held")
		b.ReportMetric(float64(after-before)/heldForMemory, "B/held_request")
		b.ReportMetric(float64(stack)/heldForMemory, "stack_B/held_request")
	}
	b.ReportMetric(0, "ns/op")
}

// TestHoldClientProcess is BenchmarkHoldMemory's client, run by it as a child process: it
// starts heldForMemory small ModelInfer calls to the front at $INFERSCALE_FRONT_HOLD_CLIENT
// and keeps them open until its stdin closes. Skipped otherwise.
func TestHoldClientProcess(t *testing.T) {
	addr := os.Getenv(holdClientEnv)
	if addr == "" {
		t.Skip("the client process of BenchmarkHoldMemory")
	}
	cc := dial(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := &inference.ModelInferRequest{ModelName: "small", Id: "1",
		Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{make([]byte, 16)}}
	for range heldForMemory {
		cs, err := cc.NewStream(ctx, &grpc.StreamDesc{}, inference.GRPCInferenceService_ModelInfer_FullMethodName)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.SendMsg(req); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}
