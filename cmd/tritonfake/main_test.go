package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExampleConfigLoads(t *testing.T) {
	cfg, err := loadConfig("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(cfg.Models), 5; got != want {
		t.Errorf("models = %d, want %d", got, want)
	}
	want := tritontest.Model{
		Name: "doc-extract", Version: "3", MemoryBytes: 3 << 30, LoadTime: 12 * time.Second, ServiceTime: 120 * time.Millisecond,
		Fault: tritontest.Fault{UnloadLeakBytes: 256 << 20},
	}
	if diff := cmp.Diff(want, cfg.Models[3]); diff != "" {
		t.Errorf("models[3] (-want +got):\n%s", diff)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string
	}{
		{name: "unknown field", give: "deviceMemoryBytes: 10\nmodels: []\nbogus: 1\n", want: []string{"config.yaml: bogus: unknown field (line 3)"}},
		{name: "bad duration", give: "deviceMemoryBytes: 10\nmodels:\n- name: a\n  memoryBytes: 1\n- name: b\n- name: c\n  loadTime: banana\n",
			want: []string{`config.yaml: models[2].loadTime: time: invalid duration "banana" (line 7)`}},
		{name: "misspelled fault field", give: "deviceMemoryBytes: 10\nmodels:\n- name: a\n  fault: {failLoads: x}\n",
			want: []string{"models[0].fault.failLoads: unknown field (line 4)"}},
		{name: "wrong type", give: "deviceMemoryBytes: ten\nmodels: []\n", want: []string{`deviceMemoryBytes: "ten": want an integer (line 1)`}},
		{
			name: "ranges",
			give: "modelControlMode: poll\ndeviceMemoryBytes: 0\nmodels:\n- name: a\n  memoryBytes: -1\n",
			want: []string{`modelControlMode is "poll"`, "deviceMemoryBytes is 0, want > 0", "models[0].memoryBytes is -1, want >= 0"},
		},
		{
			// Two startup models of 2^62 bytes summed to -2^63 and fit a 1-byte device
			// (nv_gpu_memory_used_bytes -9.2e18); 2562047h service times summed negative.
			name: "wrapping values",
			give: "deviceMemoryBytes: 1\nstartupModels: [a, b]\nmodels:\n- name: a\n  memoryBytes: 4611686018427387904\n  serviceTime: 2562047h\n  fault: {extraServiceTime: 2562047h}\n- name: b\n  memoryBytes: 4611686018427387904\n",
			want: []string{
				"models[0].memoryBytes is 4611686018427387904, want >= 0 and <= 1125899906842624 (1 PiB)",
				"models[1].memoryBytes is 4611686018427387904, want >= 0 and <= 1125899906842624 (1 PiB)",
				"models[0].serviceTime is 2562047h0m0s, want >= 0 and <= 1h0m0s",
				"models[0].fault.extraServiceTime is 2562047h0m0s, want >= 0 and <= 1h0m0s",
			},
		},
		{
			// Accepted before, while serviceTime was capped at 1h.
			name: "load time and concurrency past their bounds",
			give: "deviceMemoryBytes: 1\nmodels:\n- name: a\n  loadTime: 100000h\n  concurrency: 99999999999\n",
			want: []string{
				"models[0].loadTime is 100000h0m0s, want >= 0 and <= 1h0m0s",
				"models[0].concurrency is 99999999999, want 0..65536 (0 means 1)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(writeConfig(t, tt.give))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestConfigBounded: --config is read at most 1 MiB (/dev/zero was read until 24 GB).
func TestConfigBounded(t *testing.T) {
	if _, err := loadConfig("/dev/zero"); err == nil || err.Error() != "read --config: file too large: /dev/zero: larger than 1048576 bytes" {
		t.Errorf("loadConfig(/dev/zero) = %v; want the 1 MiB bound", err)
	}
}

func TestFlagErrors(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"--grpc-listen=", "--exit-timeout=-1s"}, &out, nil)
	for _, w := range []string{"--config is required", "--grpc-listen is empty", "--exit-timeout is -1s, want >= 0"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("run() = %v, want it to contain %q", err, w)
		}
	}
}

// TestRunServesTriton runs the command on free ports with the real clock and
// talks to it with the client, then stops it as SIGTERM would.
func TestRunServesTriton(t *testing.T) {
	path := writeConfig(t, `
modelControlMode: explicit
deviceMemoryBytes: 3000
gpuUUID: GPU-cmd
startupModels: [a]
models:
- name: a
  memoryBytes: 1000
- name: b
  memoryBytes: 1500
- name: c
  memoryBytes: 1000
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type addrs struct{ grpc, metrics string }
	started := make(chan addrs, 1)
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--config=" + path, "--grpc-listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0", "--exit-timeout=5s"}, &logs,
			func(g, m string) { started <- addrs{g, m} })
	}()
	var a addrs
	select {
	case a = <-started:
	case err := <-done:
		t.Fatalf("run returned early: %v\n%s", err, logs.String())
	}

	c, err := triton.Dial(a.grpc, triton.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(ctx, "b", triton.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	err = c.Load(ctx, "c", triton.LoadOptions{})
	if !errors.Is(err, triton.ErrLoadFailed) || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("load beyond the device: %v, want out of memory", err)
	}
	idx, err := c.Index(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := []triton.ModelIndex{
		{Name: "a", Version: "1", State: triton.StateReady},
		{Name: "b", Version: "1", State: triton.StateReady},
		{Name: "c", Version: "1", State: triton.StateUnavailable, Reason: "failed to load 'c' version 1: Internal: out of memory: the model needs 1000 bytes, GPU 0 has 500 of 3000 bytes free"},
	}
	if diff := cmp.Diff(wantIdx, idx); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}

	conn, err := grpc.NewClient(a.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := inference.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, &inference.ModelInferRequest{ModelName: "a", Id: "42"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetModelName() != "a" || resp.GetModelVersion() != "1" || resp.GetId() != "42" {
		t.Errorf("infer response = %v", resp)
	}

	mresp, err := http.Get(a.metrics)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(mresp.Body)
	mresp.Body.Close()
	for _, w := range []string{`nv_inference_request_success{model="a",version="1"} 1`, `nv_gpu_memory_used_bytes{gpu_uuid="GPU-cmd"} 2500`} {
		if !strings.Contains(body.String(), w) {
			t.Errorf("/metrics lacks %q:\n%s", w, body.String())
		}
	}

	cancel() // SIGTERM
	if err := <-done; err != nil {
		t.Fatalf("run = %v", err)
	}
	if !strings.Contains(logs.String(), "stopping") {
		t.Errorf("logs lack the stop message:\n%s", logs.String())
	}
}

// FuzzParseConfig: any input gives a config that validates, or an error;
// never a panic.
func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile("example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte("deviceMemoryBytes: 1\nmodels: [{name: a, memoryBytes: 2, loadTime: 1s}]\nstartupModels: [a]\n"))
	// Issue 12: names YAML 1.1 reads as booleans stay names.
	f.Add([]byte("deviceMemoryBytes: 10\nmodels: [{name: on}, {name: y}, {name: no, version: 1.10}]\nstartupModels: [on, no]\n"))
	f.Add([]byte("deviceMemoryBytes: 10\nmodels: [{name: m, serviceTime: 1s, serviceDistribution: lognormal, serviceCV: 0.5}]\nseed: 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := tritontest.ParseConfig(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that does not validate: %v", err)
		}
	})
}

// TestHelp: -h and --help print the usage and succeed (main exits 0).
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{arg}, &out, nil); err != nil {
			t.Errorf("run(%s) = %v, want nil", arg, err)
		}
		if !strings.Contains(out.String(), "-config") || !strings.Contains(out.String(), "-exit-timeout") {
			t.Errorf("run(%s) printed %q, want the usage", arg, out.String())
		}
	}
}
