package replay

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// sharedTrace returns the path of a file under the project's shared/traces
// (beside the repository), or skips the test when it is absent: only the
// Azure traces may be committed.
func sharedTrace(tb testing.TB, rel string) string {
	tb.Helper()
	for _, root := range []string{os.Getenv("INFERSCALE_TRACES"), "../../shared/traces", "../shared/traces"} {
		if root == "" {
			continue
		}
		p := filepath.Join(root, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	tb.Skipf("shared trace %s not present", rel)
	return ""
}

// benchWorkload is n Poisson arrivals at 50 req/s with service times drawn
// from the embedded Azure code trace under the default service model.
func benchWorkload(tb testing.TB, n int) *Workload {
	tr, err := DemoTrace()
	if err != nil {
		tb.Fatal(err)
	}
	mix := NewWorkload(tr, DefaultServiceModel()).ServiceS
	rng := rand.New(rand.NewPCG(1, 2))
	w := &Workload{ArrivalS: make([]float64, n), ServiceS: make([]float64, n)}
	t := 0.0
	for i := range n {
		t += rng.ExpFloat64() / 50
		w.ArrivalS[i] = t
		w.ServiceS[i] = mix[rng.IntN(len(mix))]
	}
	return w
}

// BenchmarkSimulateRequests measures per-request mode: simulated requests
// per second of one core, a fixed pool of 20 replicas × 4 slots at about
// 70 % busy.
func BenchmarkSimulateRequests(b *testing.B) {
	w := benchWorkload(b, 1_000_000)
	cfg := DefaultPoolConfig()
	opt := runOptions{initial: 20, sampleStepS: 60, maxOverrunS: 3600, noSeries: true}
	b.ReportAllocs()
	var n float64
	for b.Loop() {
		r := simulateRequests(cfg, w, &staticCtl{n: 20}, opt)
		n += r.Requests
	}
	b.ReportMetric(n/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkSimulateRequestsInferscale is the same with decision.Recommend
// deciding every 15 s behind the HPA and KEDA layers.
func BenchmarkSimulateRequestsInferscale(b *testing.B) {
	w := benchWorkload(b, 1_000_000)
	cfg := DefaultPoolConfig()
	p := InferscalePolicy(1.75, 0, cfg)
	opt := runOptions{initial: 20, sampleStepS: 60, maxOverrunS: 3600, noSeries: true}
	b.ReportAllocs()
	var n float64
	for b.Loop() {
		r := simulateRequests(cfg, w, p.New(), opt)
		n += r.Requests
	}
	b.ReportMetric(n/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkArrivalLoopBaseline is the floor to compare with: one pass over
// the same arrivals doing the least a simulator must (read arrival and
// service, compare with a running clock).
func BenchmarkArrivalLoopBaseline(b *testing.B) {
	w := benchWorkload(b, 1_000_000)
	var n float64
	var sink float64
	for b.Loop() {
		busyUntil := 0.0
		for i, a := range w.ArrivalS {
			if a > busyUntil {
				busyUntil = a
			}
			busyUntil += w.ServiceS[i] / 80
		}
		sink += busyUntil
		n += float64(len(w.ArrivalS))
	}
	b.ReportMetric(n/b.Elapsed().Seconds(), "requests/s")
	_ = sink
}

// BenchmarkBinnedServeGen14Days replays ServeGen's m-large model (14 days,
// 1.2 M one-second bins) in binned mode: one inferscale run, and the whole
// comparison (every policy and sweep) as a separate metric.
func BenchmarkBinnedServeGen14Days(b *testing.B) {
	f, err := os.Open(sharedTrace(b, "servegen-bailian-clients/servegen_clients_m-large_m-small_mm-image.csv"))
	if err != nil {
		b.Fatal(err)
	}
	sg, err := ReadServeGen(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	if sg, err = sg.FilterModels([]string{"m-large"}); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultPoolConfig()
	bins := sg.Binned(cfg.Service, cfg.Seed, 1)
	p := InferscalePolicy(10, 0, cfg)
	opt := defaultRunOptions(float64(len(bins.Arrivals)), 1)
	for b.Loop() {
		simulateBinned(cfg, bins, p.New(), opt)
	}
	b.ReportMetric(float64(len(bins.Arrivals))/86400, "days")
	start := time.Now()
	if _, err := Compare(cfg, Workloads{Name: "m-large", Bins: bins}, CompareOptions{Hindsight: true}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds(), "s/full-comparison")
}

// TestSharedTracesLoad reads every shared trace when present.
func TestSharedTracesLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 20 MB of traces")
	}
	tests := []struct {
		rel    string
		format Format
	}{
		{"azure-llm-2023/AzureLLMInferenceTrace_conv.csv", FormatAzureLLM},
		{"alibaba-gentd26-diffusion-multimodel/lora_request_trace.csv", FormatGenTD26},
		{"azure-functions-2019-invitro-sample/azure2019_1350func_invocations_per_minute.csv", FormatAzureFunctions},
		{"servegen-bailian-clients/servegen_clients_m-large_m-small_mm-image.csv", FormatServeGen},
		{"alibaba-dlrm-2025-instances/disaggregated_DLRM_trace.csv", FormatDLRMInstances},
	}
	for _, tt := range tests {
		t.Run(string(tt.format), func(t *testing.T) {
			l, err := Load(sharedTrace(t, tt.rel), "", 1)
			if err != nil {
				t.Fatal(err)
			}
			if l.Format != tt.format {
				t.Errorf("detected %q, want %q", l.Format, tt.format)
			}
			switch {
			case l.Trace != nil && len(l.Trace.Requests) == 0, l.ServeGen != nil && len(l.ServeGen.Windows) == 0, l.Instances != nil && len(l.Instances.Apps) == 0:
				t.Error("no data read")
			}
		})
	}
	// Figures from the traces' READMEs.
	if l, err := Load(sharedTrace(t, "alibaba-gentd26-diffusion-multimodel/lora_request_trace.csv"), "", 1); err == nil {
		if got := len(l.Trace.Requests) + l.Trace.Skipped; got != 26823 {
			t.Errorf("GenTD26 rows %d, want 26,823", got)
		}
		if got := len(l.Trace.Models); got != 86 {
			t.Errorf("GenTD26 models %d, want 86 named checkpoints (87 counting the empty id)", got)
		}
	}
	if l, err := Load(sharedTrace(t, "azure-functions-2019-invitro-sample/azure2019_1350func_invocations_per_minute.csv"), "", 1); err == nil {
		if got := len(l.Trace.Requests); got != 927272 {
			t.Errorf("Azure Functions invocations %d, want 927,272", got)
		}
	}
}
