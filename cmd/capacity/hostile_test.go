package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// rewrittenMetrics serves the fake's metrics with edit applied to the text.
func rewrittenMetrics(t *testing.T, from string, edit func(string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(from)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprint(w, edit(string(b)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// TestMetricsTypeIsRead: nv_gpu_memory_used_bytes without a TYPE line (untyped) was read as
// a gauge, 0 bytes: the 1 GiB model was admitted with peak 0 from triton-metrics. Untyped is
// now read; a counter is no reading, and the limit names the metric and its type.
func TestMetricsTypeIsRead(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(string) string
		wantSource string
		wantLimit  string // part of one limit; "" for none about the device reading
	}{
		{name: "untyped", wantSource: "triton-metrics", edit: func(s string) string {
			var keep []string
			for _, l := range strings.Split(s, "\n") {
				if !strings.HasPrefix(l, "# TYPE ") {
					keep = append(keep, l)
				}
			}
			return strings.Join(keep, "\n")
		}},
		{name: "counter", wantSource: "triton-statistics", wantLimit: "nv_gpu_memory_used_bytes is of type counter, want a gauge (as Triton exports it) or untyped",
			edit: func(s string) string {
				return strings.ReplaceAll(s, "# TYPE nv_gpu_memory_used_bytes gauge", "# TYPE nv_gpu_memory_used_bytes counter")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startFake(t, tritontest.Model{Name: "m", MemoryBytes: 1 << 30, LoadTime: 10 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
			dir := t.TempDir()
			rec := measureRecord(t, dir, append([]string{"--target=" + srv.GRPCAddr(), "--metrics-url=" + rewrittenMetrics(t, srv.MetricsURL(), tt.edit), "--model=m", "--mig-profile=1g.10gb",
				"--slo-latency=500ms", "--start-rate=50", "--max-rate=50", "--out=" + dir}, short...))
			limits := strings.Join(rec.Verdict.Limits, "; ")
			if rec.Memory.SteadyBytes != 1<<30 || rec.Memory.PeakBytes != 1<<30 || rec.Runtime.MemorySource != tt.wantSource ||
				(tt.wantLimit != "") != strings.Contains(limits, "no device memory reading") || !strings.Contains(limits, tt.wantLimit) {
				t.Errorf("memory %+v from %q, limits %q; want steady and peak 1 GiB from %s, limit %q", rec.Memory, rec.Runtime.MemorySource, limits, tt.wantSource, tt.wantLimit)
			}
		})
	}
}

// TestSkipMemoryClaimsNoHeadroom: --skip-memory on Triton wrote peak 0, headroom the whole
// budget and allowed, with no limit saying memory was not measured (one said "memory from
// the server's own figures"). Now headroom is 0, allowed rests on μ alone, and a limit
// says so; the scaler's metadata is still printed.
func TestSkipMemoryClaimsNoHeadroom(t *testing.T) {
	srv := startFake(t, tritontest.Model{Name: "m", MemoryBytes: 1 << 30, LoadTime: 10 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := append([]string{"--target=" + srv.GRPCAddr(), "--metrics-url=" + srv.MetricsURL(), "--model=m", "--mig-profile=1g.10gb", "--skip-memory",
		"--slo-latency=500ms", "--start-rate=20", "--max-rate=20", "--out=" + dir}, short...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rec, err := record.Read(filepath.Join(dir, "m.1g.10gb.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "memory and load time not measured (--skip-memory): peakBytes, swapPeakBytes and loadTimeSeconds are 0 for unknown, " +
		"headroomBytes is not computed (0), and allowed is judged on the SLO alone; do not take memory or load time from this record"
	v := rec.Verdict
	if !v.Allowed || v.HeadroomBytes != 0 || v.BudgetBytes != 9856<<20 || rec.Runtime.MemorySource != "none" || !slices.Contains(v.Limits, want) {
		t.Errorf("verdict %+v, memorySource %q; want allowed, headroom 0 of budget %d, source none, limit %q", v, rec.Runtime.MemorySource, 9856<<20, want)
	}
	for _, l := range v.Limits {
		if strings.Contains(l, "memory from the server's own figures") {
			t.Errorf("limit %q: no memory figures were taken", l)
		}
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("replicaThroughput: \"%.4g\"", rec.SLOThroughputRPS)) || rec.SLOThroughputRPS <= 0 {
		t.Errorf("stdout %q lacks the metadata", stdout.String())
	}
}

// TestEveryRequestRejectedStops: a model that is not loaded answers NotFound to every
// request; the search halved the rate down to --min-rate (about 40 minutes), and with a
// tight --max-lag blamed the generator. It now stops after the first window, naming the code,
// its count and a sample message.
func TestEveryRequestRejectedStops(t *testing.T) {
	for _, lag := range []string{"10ms", "1ns"} {
		t.Run("max-lag "+lag, func(t *testing.T) {
			m := tritontest.Model{Name: "asr", MemoryBytes: 1 << 30, LoadTime: 10 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4}
			srv := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30, Models: []tritontest.Model{m}})
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			args := []string{"--target=" + srv.GRPCAddr(), "--model=asr", "--mig-profile=1g.10gb", "--skip-memory", "--nvml=off",
				"--slo-latency=500ms", "--max-lag=" + lag, "--start-rate=100", "--min-rate=25", "--window=200ms", "--min-window-requests=20", "--out=" + dir}
			start := time.Now()
			code := run(context.Background(), args, &stdout, &stderr)
			took := time.Since(start)
			// However many of the first window's arrivals have answered by its end.
			want := regexp.MustCompile("\ncapacity: every request rejected at 100 req/s: all ([1-9][0-9]*) requests completed in window 1 failed: ([1-9][0-9]*) × NotFound " +
				"\\(NotFound: \"Request for unknown model: 'asr' has no available versions\"\\)\n$")
			got := want.FindStringSubmatch(stderr.String())
			if code != 1 || got == nil || got[1] != got[2] || took > 5*time.Second {
				t.Errorf("exit %d after %v, stderr %q; want 1 within 5s, matching %s", code, took, stderr.String(), want)
			}
			if _, err := os.Stat(filepath.Join(dir, "asr.1g.10gb.yaml")); err == nil {
				t.Errorf("a record was written for a model that answered nothing")
			}
		})
	}
}

// TestRefusedPrintsNoMetadata: a refused record (no rate met a 1 ms SLO on a 5 ms model)
// printed replicaThroughput "0" and replicaConcurrency "1" as trigger metadata.
func TestRefusedPrintsNoMetadata(t *testing.T) {
	srv := startFake(t, tritontest.Model{Name: "m", MemoryBytes: 1 << 30, LoadTime: 10 * time.Millisecond, ServiceTime: 5 * time.Millisecond, Concurrency: 4})
	var stdout, stderr bytes.Buffer
	args := append([]string{"--target=" + srv.GRPCAddr(), "--model=m", "--mig-profile=1g.10gb", "--skip-memory",
		"--slo-latency=1ms", "--max-lag=50ms", "--request-timeout=1s", "--start-rate=20", "--min-rate=10", "--out=" + t.TempDir()}, short...)
	if code := run(context.Background(), args, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1 (refused): %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	want := "no ScaledObject trigger metadata: the record refuses m on 1g.10gb (verdict.allowed false; its verdict.limits say why)"
	if len(lines) != 2 || !strings.Contains(lines[0], "allowed false") || lines[1] != want {
		t.Errorf("stdout %q; want the wrote line and %q; stderr %s", stdout.String(), want, stderr.String())
	}
}

// TestHugeRequestIsABadFlag: 30 tensors of 64 MiB each, and --input-data=/dev/zero, are
// refused at flag parsing (exit 2) naming the flag, the total and the bound.
func TestHugeRequestIsABadFlag(t *testing.T) {
	args := []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb"}
	for i := range 30 {
		args = append(args, fmt.Sprintf("--input=X%d:FP64:8388608", i))
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"30 tensors of 64 MiB", args, `capacity: --input "X1:FP64:8388608": the --input tensors come to 134217731 bytes of request with it, over the 68157440-byte bound on one request (64 MiB of tensors + 1 MiB, all inputs together)` + "\n"},
		// One 32 MiB tensor fits one request, but 4096 of them in flight would hold 128 GiB.
		{"request × --max-in-flight", []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--out=" + t.TempDir(), "--input=X:FP64:4194304"},
			"capacity: invalid config: --max-in-flight 4096 × a 33554457-byte request (--input, --input-data) is 137439055872 bytes in flight, over the 4294967296-byte (4 GiB) bound; want --max-in-flight at most 127, or a smaller request\n"},
		{"input data from a device", []string{"--target=localhost:8001", "--model=m", "--mig-profile=1g.10gb", "--input-data=/dev/zero"},
			"capacity: --input-data: /dev/zero is a device (Dcrw-rw-rw-); want a file or a pipe holding a ModelInferRequest in protobuf JSON\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || stderr.String() != tt.want {
				t.Errorf("exit %d, stderr %q; want 2, %q", code, stderr.String(), tt.want)
			}
		})
	}
}
