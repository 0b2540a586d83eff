package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// fakeLikeExample is cmd/tritonfake/example.yaml with load times cut for a test, and no
// startup models, so that the sidecar has to load the P0 model itself.
func fakeLikeExample() tritontest.Config {
	return tritontest.Config{
		ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10307921510,
		GPUUUID: "MIG-5a0f3b6e-0000-4000-8000-000000000001",
		Models: []tritontest.Model{
			{Name: "embedding-v3", MemoryBytes: 2 << 30, LoadTime: 100 * time.Millisecond, ServiceTime: 15 * time.Millisecond, Concurrency: 2},
			{Name: "classifier-v5", MemoryBytes: 1 << 30, LoadTime: 40 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4},
			{Name: "asr-v2", MemoryBytes: 4 << 30, LoadTime: 300 * time.Millisecond, ServiceTime: 400 * time.Millisecond},
			{Name: "doc-extract", Version: "3", MemoryBytes: 3 << 30, LoadTime: 150 * time.Millisecond, ServiceTime: 120 * time.Millisecond,
				Fault: tritontest.Fault{UnloadLeakBytes: 256 << 20}},
			{Name: "broken-model", MemoryBytes: 1 << 30, LoadTime: 20 * time.Millisecond,
				Fault: tritontest.Fault{FailLoad: "Internal: onnx runtime error 6: CUDA failure 2: out of memory"}},
		},
	}
}

// sidecarProc is a running cmd/residency process.
type sidecarProc struct {
	cmd  *exec.Cmd
	addr string
	// front is the inference front's address; empty without --inference-listen.
	front string
	lines chan map[string]any
	done  chan error
}

// startSidecar builds cmd/residency into a temporary directory and runs it against fake with
// the example catalog, with extra flags appended and env added to its environment.
func startSidecar(tb testing.TB, fake *tritontest.Server, env []string, extra ...string) *sidecarProc {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds and runs the sidecar binary")
	}
	bin := filepath.Join(tb.TempDir(), "residency")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--triton-address="+fake.GRPCAddr(), "--triton-metrics-url="+fake.MetricsURL(),
		"--catalog=example-catalog.yaml", "--budget-bytes=10307921510", "--mig-profile=1g.10gb", "--nvml=off",
		"--listen=127.0.0.1:0", "--loop-interval=100ms", "--propagation-delay=0s",
		"--drain-poll-interval=50ms")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(append(os.Environ(), "KUBERNETES_SERVICE_HOST="), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &sidecarProc{cmd: cmd, lines: make(chan map[string]any, 1024), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				select {
				case s.lines <- m:
				default:
				}
			}
		}
		close(s.lines)
		s.done <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	for s.addr == "" { // the front logs its address before the sidecar's "serving"
		m := s.waitLog(tb, "")
		switch m["msg"] {
		case "inference front":
			s.front = m["addr"].(string)
		case "serving":
			s.addr = m["addr"].(string)
		}
	}
	return s
}

// waitLog returns the first log line with msg (any line when msg is empty), failing after 30 s.
func (s *sidecarProc) waitLog(tb testing.TB, msg string) map[string]any {
	tb.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-s.lines:
			if !ok {
				tb.Fatalf("sidecar exited before logging %q", msg)
			}
			if msg == "" || m["msg"] == msg {
				return m
			}
		case <-timeout:
			tb.Fatalf("no %q log line in 30s", msg)
		}
	}
}

func (s *sidecarProc) rssBytes(tb testing.TB) int64 {
	tb.Helper()
	return s.statusKB(tb, "VmRSS") << 10
}

// statusKB reads a kB field of the process's /proc/PID/status (VmRSS, VmHWM).
func (s *sidecarProc) statusKB(tb testing.TB, field string) int64 {
	tb.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/status")
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, s.cmd.Process.Pid)
	return 0
}

func (s *sidecarProc) readyz(tb testing.TB) int {
	tb.Helper()
	resp, err := http.Get("http://" + s.addr + "/readyz")
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// runToReady starts the fake and the sidecar and waits until the sidecar loaded the P0 model
// and reports ready.
func runToReady(tb testing.TB) (*tritontest.Server, *sidecarProc) {
	fake := tritontest.Start(tb, fakeLikeExample())
	s := startSidecar(tb, fake, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.Await(ctx, func() bool { st, _ := fake.Model("embedding-v3"); return st.State == triton.StateReady }); err != nil {
		tb.Fatalf("P0 model never loaded: %v", err)
	}
	// The sidecar sees READY on its next 100ms loop; readiness is polled over HTTP like a kubelet.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.readyz(tb) != http.StatusOK {
		select {
		case <-tick.C:
		case <-ctx.Done():
			tb.Fatal("sidecar never ready")
		}
	}
	return fake, s
}

func TestSidecarProcess(t *testing.T) {
	fake, s := runToReady(t)
	for name, st := range fake.Models() {
		if name != "embedding-v3" && st.State == triton.StateReady {
			t.Errorf("%s loaded without demand", name)
		}
	}
	t.Logf("sidecar RSS after reaching ready: %.1f MiB", float64(s.rssBytes(t))/(1<<20))
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.waitLog(t, "drain: done")
	if err := <-s.done; err != nil {
		t.Fatalf("sidecar exit after SIGTERM: %v", err)
	}
}

// BenchmarkSidecarRSS reports the resident memory of the sidecar process (cmd/residency) once
// it has loaded the example catalog's P0 model into a fake Triton and turned ready. Target:
// ≤ 32 MiB.
func BenchmarkSidecarRSS(b *testing.B) {
	_, s := runToReady(b)
	var rss int64
	for b.Loop() {
		rss = s.rssBytes(b)
	}
	b.ReportMetric(float64(rss)/(1<<20), "MiB-RSS")
}

// holdRounds is how many times BenchmarkSidecarHoldRSS fills and releases the hold budget.
const holdRounds = 15

// BenchmarkSidecarHoldRSS runs the sidecar as the chart does (its inference front with
// --hold-max-total-bytes 64 MiB, --hold-max-bytes above it so that the total binds, GOMEMLIMIT from $SIDECAR_BENCH_GOMEMLIMIT, default the chart's
// 96MiB; "off" for none) and, holdRounds times, fills the hold budget with 128 KiB ModelInfer
// requests for a model whose load never ends within the round (the rest are refused
// RESOURCE_EXHAUSTED), then cancels them. It reports the process's peak resident set (VmHWM),
// MiB, against the chart's 128Mi limit: the held bytes are live, and each round's are garbage
// in the next.
func BenchmarkSidecarHoldRSS(b *testing.B) {
	const size = 128 << 10
	const budget = 64 << 20
	gml := cmp.Or(os.Getenv("SIDECAR_BENCH_GOMEMLIMIT"), "96MiB")
	var env []string
	if gml != "off" {
		env = []string{"GOMEMLIMIT=" + gml}
	}
	cfg := fakeLikeExample()
	for i := range cfg.Models {
		if cfg.Models[i].Name == "asr-v2" {
			cfg.Models[i].LoadTime = time.Hour
		}
	}
	for b.Loop() {
		fake := tritontest.Start(b, cfg)
		s := startSidecar(b, fake, env, "--inference-listen=127.0.0.1:0", "--hold-timeout=10m",
			"--hold-max-bytes="+strconv.Itoa(2*budget), "--hold-max-total-bytes="+strconv.Itoa(budget))
		cc, err := grpc.NewClient(s.front, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		client := inference.NewGRPCInferenceServiceClient(cc)
		req := &inference.ModelInferRequest{ModelName: "asr-v2",
			Inputs:           []*inference.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "UINT8", Shape: []int64{size}}},
			RawInputContents: [][]byte{make([]byte, size)}}
		for range holdRounds {
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var exhausted atomic.Int64
			for range budget/size + 8 {
				wg.Go(func() {
					_, err := client.ModelInfer(ctx, req)
					if status.Code(err) == codes.ResourceExhausted {
						exhausted.Add(1)
					}
				})
			}
			// Every request is either held or refused: the refusals come at once, and the
			// held bytes reach the budget less one request.
			deadline := time.Now().Add(30 * time.Second)
			for exhausted.Load() < 8 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := exhausted.Load(); n < 8 {
				b.Fatalf("%d requests refused RESOURCE_EXHAUSTED within 30s, want at least 8", n)
			}
			cancel()
			wg.Wait()
		}
		b.ReportMetric(float64(s.statusKB(b, "VmHWM"))/1024, "MiB-peak-RSS")
		_ = cc.Close()
	}
}
