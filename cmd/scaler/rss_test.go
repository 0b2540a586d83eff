package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/internal/promtest"
)

// BenchmarkProcess10000ScaledObjects builds cmd/scaler, runs it against a
// real Prometheus scraping Triton, vLLM and DCGM series for 100 namespaces ×
// 20 models, registers 10,000 preset ScaledObjects through KEDA's stubs,
// waits until every one answers from real data plus a few refreshes, and
// reports the process's VmRSS and VmHWM and the Prometheus queries per
// refresh. Run: go test -run '^$' -bench Process -benchtime 1x ./cmd/scaler/
// (SCALER_BENCH_GOMEMLIMIT=off runs without a memory limit, =64MiB with
// another; SCALER_BENCH_ARGS adds flags, e.g. "--object-metrics-max-triggers=0"
// to measure a scrape with every per-ScaledObject series.)
func BenchmarkProcess10000ScaledObjects(b *testing.B) {
	const namespaces, models, objects = 100, 20, 10000
	exp := promtest.NewExporter(b)
	tq := exp.Gauge("nv_inference_pending_request_count", "namespace", "model", "pod")
	ts := exp.Counter("nv_inference_request_success", "namespace", "model", "pod")
	tf := exp.Counter("nv_inference_request_failure", "namespace", "model", "pod")
	vq := exp.Gauge("vllm:num_requests_waiting", "namespace", "model_name", "pod")
	vs := exp.Counter("vllm:request_success_total", "namespace", "model_name", "pod")
	act := exp.Gauge("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "namespace", "pod", "gpu")
	for n := range namespaces {
		ns := fmt.Sprintf("team-%03d", n)
		for m := range models {
			pod := fmt.Sprintf("pool-%02d-0", m)
			mdl := fmt.Sprintf("model-%02d", m)
			tq.WithLabelValues(ns, mdl, pod).Set(float64((n + m) % 30))
			ts.WithLabelValues(ns, mdl, pod).Add(1)
			tf.WithLabelValues(ns, mdl, pod).Add(0)
			vq.WithLabelValues(ns, mdl, "v"+pod).Set(float64((n * m) % 17))
			vs.WithLabelValues(ns, mdl, "v"+pod).Add(1)
			act.WithLabelValues(ns, pod, "0").Set(0.4)
			act.WithLabelValues(ns, "v"+pod, "0").Set(0.5)
		}
	}
	ps := promtest.Start(b, exp.Target())
	ps.WaitFor(b, `count(nv_inference_pending_request_count)`, promtest.HasValue(namespaces*models), 60*time.Second)

	bin := filepath.Join(b.TempDir(), "scaler")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	args := []string{"--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0", "--prometheus-address=" + ps.URL(),
		"--refresh-interval=1s", "--log-level=info"}
	cmd := exec.Command(bin, append(args, strings.Fields(os.Getenv("SCALER_BENCH_ARGS"))...)...)
	// A memory limit is how the chart bounds the garbage headroom; the
	// figures below are under it.
	limit := memLimit
	if l := os.Getenv("SCALER_BENCH_GOMEMLIMIT"); l != "" {
		limit = l
	}
	cmd.Env = os.Environ()
	if limit != "off" {
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+limit)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	// The first line names the bound addresses; the rest is drained.
	sc := bufio.NewScanner(stderr)
	var addrs struct{ Msg, GRPC, Metrics string }
	for addrs.Msg != "scaler serving" && sc.Scan() {
		_ = json.Unmarshal(sc.Bytes(), &addrs)
	}
	if addrs.GRPC == "" {
		b.Fatalf("scaler did not report its addresses: %v", sc.Err())
	}
	go io.Copy(io.Discard, stderr)
	rssIdle := procStatus(b, cmd.Process.Pid, "VmRSS")

	conn, err := grpc.NewClient(addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewExternalScalerClient(conn)
	ctx := context.Background()
	reqs := make([]*pb.GetMetricsRequest, objects)
	for i := range reqs {
		r := &pb.ScaledObjectRef{Namespace: fmt.Sprintf("team-%03d", i%namespaces), Name: fmt.Sprintf("pool-%05d", i), ScalerMetadata: map[string]string{
			"scalerAddress": "scaler:9090", "engine": []string{"triton", "vllm"}[i%2], "model": fmt.Sprintf("model-%02d", i%models),
			"replicaThroughput": "12", "warmReplicas": "1",
		}}
		spec, err := c.GetMetricSpec(ctx, r)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = &pb.GetMetricsRequest{ScaledObjectRef: r, MetricName: spec.MetricSpecs[0].MetricName}
	}
	rssRegistered := procStatus(b, cmd.Process.Pid, "VmRSS")
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < len(reqs); {
		if _, err := c.GetMetrics(ctx, reqs[i]); err != nil {
			if time.Now().After(deadline) {
				b.Fatalf("ScaledObject %d never answered: %v", i, err)
			}
			time.Sleep(200 * time.Millisecond) // a benchmark waiting for the poller, not a test assertion
			continue
		}
		i++
	}
	time.Sleep(5 * time.Second) // five refreshes with every trigger live
	rss := procStatus(b, cmd.Process.Pid, "VmRSS")
	hwm := procStatus(b, cmd.Process.Pid, "VmHWM")
	anon := procStatus(b, cmd.Process.Pid, "RssAnon")
	file := procStatus(b, cmd.Process.Pid, "RssFile")
	qpr := scrape(b, "http://"+addrs.Metrics+"/metrics", "inferscale_scaler_prom_queries_per_refresh")
	rssScraped := procStatus(b, cmd.Process.Pid, "VmRSS")
	for b.Loop() {
	}
	b.ReportMetric(rssIdle/(1<<20), "idle-VmRSS-MiB")
	b.ReportMetric(rssRegistered/(1<<20), "registered-VmRSS-MiB")
	b.ReportMetric(rss/(1<<20), "VmRSS-MiB")
	b.ReportMetric(rssScraped/(1<<20), "after-metrics-scrape-VmRSS-MiB")
	b.ReportMetric(hwm/(1<<20), "VmHWM-MiB")
	// VmRSS = RssAnon (heap, stacks, runtime) + RssFile (the binary's
	// mapped pages, shared and reclaimable) + RssShmem.
	b.ReportMetric(anon/(1<<20), "RssAnon-MiB")
	b.ReportMetric(file/(1<<20), "RssFile-MiB")
	b.ReportMetric(qpr, "prom-queries/refresh")
}

// memLimit is the GOMEMLIMIT the benchmark runs the scaler under: the
// setting suggested for a 64 MiB pod. GOMEMLIMIT bounds the Go runtime's
// memory (RssAnon); the binary's mapped pages (RssFile, ≈ 20 MiB) come on
// top, so 64 MiB − 20 MiB − a few MiB of margin.
const memLimit = "40MiB"

func procStatus(tb testing.TB, pid int, field string) float64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb * 1024
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

func scrape(tb testing.TB, url, metric string) float64 {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), metric+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return v
		}
	}
	tb.Fatalf("%s not in /metrics", metric)
	return 0
}
