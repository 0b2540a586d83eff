package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEveryRunStartsFromTheSameInitialPool: a burst needing 20 replicas
// arrives in the first minute. Every policy, the hindsight sweeps and the
// optimum start from the one ready replica of InitialReplicas; none is
// sized from the arrivals (the old warm start gave every run the first
// five minutes' peak need, 20 replicas here).
func TestEveryRunStartsFromTheSameInitialPool(t *testing.T) {
	var w Workload
	for i := range 400 {
		w.ArrivalS = append(w.ArrivalS, 10+float64(i)*0.05) // 20 req/s for 20 s
		w.ServiceS = append(w.ServiceS, 4)                  // 80 busy slots = 20 replicas
	}
	for i := range 600 {
		w.ArrivalS = append(w.ArrivalS, 31+float64(i)) // then one per second for 10 min
		w.ServiceS = append(w.ServiceS, 1)
	}
	cfg := DefaultPoolConfig()
	c, err := Compare(cfg, Workloads{Name: "burst", Requests: &w}, CompareOptions{Hindsight: true})
	if err != nil {
		t.Fatal(err)
	}
	runs := append(slices.Clone(c.All), c.Optimum)
	for _, r := range runs {
		if len(r.Series) == 0 || r.Series[0].TimeS != 60 {
			t.Fatalf("%s %s: series starts %v, want a sample at 60 s", r.Policy, r.Setting, r.Series[:min(1, len(r.Series))])
		}
		// No replica asked for after t = 0 is ready before the 60 s cold
		// start ends, so the ready count at 60 s is the initial pool's.
		if got := r.Series[0].Ready; got != cfg.InitialReplicas {
			t.Errorf("%s %s (%s): %d ready at 60 s, want the initial %d", r.Policy, r.Setting, r.SettingSet, got, cfg.InitialReplicas)
		}
	}
}

// TestInferscaleRunsWithChartTolerance: the chart sets the HPA tolerance to
// 0 for inferscale, so a 5 % step is applied; the other HPAs keep
// Kubernetes' default 0.1 and hold. The old replay ran inferscale with 0.1.
func TestInferscaleRunsWithChartTolerance(t *testing.T) {
	cfg := DefaultPoolConfig()
	is := InferscalePolicy(1, 0, cfg).New().(*inferscaleCtl)
	if is.hpa.b.Tolerance != 0 {
		t.Errorf("inferscale HPA tolerance %g, want 0 (the chart's)", is.hpa.b.Tolerance)
	}
	if got := is.hpa.ratioDesired(20, 21.0/20, 21); got != 21 {
		t.Errorf("inferscale: 20 → proposal 21 gives %d, want 21", got)
	}
	hg := HPAGPUPolicy(0.5, cfg).New().(*hpaGPUCtl)
	if got := hg.hpa.ratioDesired(20, 21.0/20, 21); got != 20 {
		t.Errorf("hpa-gpu: 20 → proposal 21 within 10 %% gives %d, want 20", got)
	}
	kq := KEDAQueuePolicy(5, 1, false, cfg).New().(*kedaQueueCtl)
	if kq.hpa.b.Tolerance != 0.1 {
		t.Errorf("keda-queue HPA tolerance %g, want the default 0.1", kq.hpa.b.Tolerance)
	}
}

// TestBinnedDrainIsBilled: 2 replicas × 2 slots hold 40 slot-seconds of
// 10 s requests; at t = 1 s the controller removes one. It drains for one
// mean service time (10 s) and is billed until then: seconds 0–1 bill 2,
// seconds 2–17 bill the remaining replica (the backlog of 32 slot-seconds
// clears at 2 per second), seconds 2–11 also the draining one: 30
// replica-seconds. The old binned mode removed it at once and billed 20.
func TestBinnedDrainIsBilled(t *testing.T) {
	b := &Binned{Arrivals: []float64{4}, WorkS: []float64{40}}
	cfg := testPool(2)
	ctl := &scriptCtl{every: time.Second, plan: map[time.Duration]int{time.Second: 1}, cur: 2}
	r := simulateBinned(cfg, b, ctl, runOptions{initial: 2, sampleStepS: 60, maxOverrunS: 100})
	if r.ReplicaSeconds != 30 {
		t.Errorf("replica-seconds %g, want 30 (drain billed)", r.ReplicaSeconds)
	}
}

// TestBinnedCarriesBacklog: 4 slot-seconds per second of capacity; 8
// arrive in second 0 (4 carried), 4 in second 1, whose arrivals wait for
// the carried backlog: (4 + 2 − 2)/4 = 1 s. (The old binned mode carried
// the backlog too; this pins it.)
func TestBinnedCarriesBacklog(t *testing.T) {
	b := &Binned{Arrivals: []float64{8, 4}, WorkS: []float64{8, 4}}
	cfg := testPool(2)
	cfg.SLO = 900 * time.Millisecond
	r := simulateBinned(cfg, b, &staticCtl{n: 2}, runOptions{initial: 2, sampleStepS: 60, maxOverrunS: 10})
	if r.SLOMet != 8 || r.Requests != 12 {
		t.Errorf("met %g of %g, want 8 of 12 (second 1 waits 1 s > 0.9 s)", r.SLOMet, r.Requests)
	}
}

// TestSpreadCoarse: arrivals on a 1 s grid with shared stamps are spread
// evenly over each step; fine timestamps are left alone. The old replay
// replayed them as synchronized bursts.
func TestSpreadCoarse(t *testing.T) {
	w := &Workload{ArrivalS: []float64{0, 0, 0, 1, 3, 3}, ServiceS: make([]float64, 6)}
	g := SpreadCoarse(w)
	if diff := cmp.Diff([]float64{0, 1.0 / 3, 2.0 / 3, 1, 3, 3.5}, w.ArrivalS); diff != "" {
		t.Errorf("spread (-want +got):\n%s", diff)
	}
	if g.StepS != 1 || g.Shared != 5 {
		t.Errorf("grid %+v, want step 1 s, 5 shared", g)
	}
	if !strings.Contains(g.String(), "1s grid") {
		t.Errorf("header %q does not name the grid", g.String())
	}
	fine := &Workload{ArrivalS: []float64{0.1234567, 0.1234567, 0.5}, ServiceS: make([]float64, 3)}
	if g := SpreadCoarse(fine); g.StepS != 0 || fine.ArrivalS[1] != 0.1234567 {
		t.Errorf("fine timestamps: grid %+v, arrivals %v; want untouched", g, fine.ArrivalS)
	}
	minute := &Workload{ArrivalS: []float64{0, 0, 60, 120, 120, 120, 120}, ServiceS: make([]float64, 7)}
	if g := SpreadCoarse(minute); g.StepS != 60 || minute.ArrivalS[1] != 30 || minute.ArrivalS[6] != 165 {
		t.Errorf("minute grid: %+v, arrivals %v; want step 60, 30 and 165", g, minute.ArrivalS)
	}
}

// TestServeGenServiceTimeVariance: one window with mean 1000 input and 100
// output tokens; synthesized requests vary around those means (output
// exponential: CV 1; input log-normal σ 1: CV 1.31). The old synthesizer
// gave every request the means (CV 0).
func TestServeGenServiceTimeVariance(t *testing.T) {
	sg, err := ReadServeGen(strings.NewReader(servegenHeader + "language,m,0,0,3600,5,1,Gamma,1,0.2,1000,100\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadAll("sg", FormatServeGen, sg.Requests(1))
	if err != nil {
		t.Fatal(err)
	}
	stats := func(f func(Request) float64) (mean, cv float64) {
		var s, s2 float64
		for _, r := range tr.Requests {
			v := f(r)
			s += v
			s2 += v * v
		}
		n := float64(len(tr.Requests))
		mean = s / n
		return mean, math.Sqrt(s2/n-mean*mean) / mean
	}
	om, ocv := stats(func(r Request) float64 { return float64(r.OutputTokens) })
	im, icv := stats(func(r Request) float64 { return float64(r.InputTokens) })
	if math.Abs(om-100) > 5 || math.Abs(ocv-1) > 0.06 {
		t.Errorf("output tokens mean %.1f CV %.3f, want 100 ± 5 and 1 ± 0.06", om, ocv)
	}
	if math.Abs(im-1000) > 60 || icv < 1.1 || icv > 1.5 {
		t.Errorf("input tokens mean %.1f CV %.3f, want 1000 ± 60 and CV in [1.1, 1.5]", im, icv)
	}
}

// TestWorstHour: hour 0 meets the SLO for all 10 requests; in hour 1 ten
// requests arrive together on one 1-slot replica with 1 s service, so
// waits are 0..9 s and 2 meet a 1.5 s SLO. Overall 12/20 = 60 %, worst
// hour 20 %.
func TestWorstHour(t *testing.T) {
	var w Workload
	for i := range 10 {
		w.ArrivalS = append(w.ArrivalS, float64(i)*100)
		w.ServiceS = append(w.ServiceS, 1)
	}
	for range 10 {
		w.ArrivalS = append(w.ArrivalS, 4000)
		w.ServiceS = append(w.ServiceS, 1)
	}
	for _, mode := range []string{"request", "binned"} {
		var r Result
		opt := runOptions{initial: 1, sampleStepS: 60, maxOverrunS: 100}
		if mode == "request" {
			r = simulateRequests(testPool(1), &w, &staticCtl{n: 1}, opt)
		} else {
			// Binned: the second's 10 slot-seconds on 1 slot wait
			// (0 + 5 − 0.5)/1 = 4.5 s: all 10 miss.
			r = simulateBinned(testPool(1), BinWorkload(&w), &staticCtl{n: 1}, opt)
		}
		want := map[string][2]float64{"request": {0.6, 0.2}, "binned": {0.5, 0}}[mode]
		if math.Abs(r.Attainment()-want[0]) > 1e-9 || math.Abs(r.WorstHourAttainment-want[1]) > 1e-9 || r.WorstHour != 1 {
			t.Errorf("%s: attainment %g, worst hour %d at %g; want %g and hour 1 at %g", mode, r.Attainment(), r.WorstHour, r.WorstHourAttainment, want[0], want[1])
		}
	}
}

// TestBoundBurst: 8 requests of 10 s arrive at t = 100 s on 1-slot
// replicas, SLO 2 s for all of them, cold start 60 s. Any schedule needs 8
// ready replicas during the window holding t = 100 s. With K = 1 (L = 29
// s) each is billed at least the 29 s before the window: 8 × 29 = 232
// replica-seconds; with K = 3 (L = ⌊58/4⌋ = 14 s) the three 14 s pieces
// before it: 8 × 42 = 336, the bound kept. Both exceed Σ service ÷ slots
// = 80. The optimum meets the SLO and costs at least the bound.
func TestBoundBurst(t *testing.T) {
	w := &Workload{ArrivalS: slices.Repeat([]float64{100}, 8), ServiceS: slices.Repeat([]float64{10}, 8)}
	cfg := DefaultPoolConfig()
	cfg.Slots, cfg.SLOTarget = 1, 1
	c, err := Compare(cfg, Workloads{Name: "burst", Requests: w}, CompareOptions{Families: []string{FamilyStatic}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Bound.WindowS != 14 || c.Bound.K != 3 || c.Bound.WorkReplicaSeconds != 80 || math.Abs(c.Bound.ReplicaSeconds-336) > 1e-6 {
		t.Errorf("bound: window %g s, K %d, work %g, bound %g replica-s; want 14, 3, 80, 336", c.Bound.WindowS, c.Bound.K, c.Bound.WorkReplicaSeconds, c.Bound.ReplicaSeconds)
	}
	n, arr, miss := requestMiss(cfg, w, 29)
	if b := computeBound(cfg, 1, 29, n, arr, miss, w.TotalWorkS(), 8); math.Abs(b.CoverReplicaSeconds-232) > 1e-6 {
		t.Errorf("K = 1 bound %g replica-s, want 232", b.CoverReplicaSeconds)
	}
	if !c.Optimum.MeetsSLO || c.Optimum.ReplicaSeconds < c.Bound.ReplicaSeconds {
		t.Errorf("optimum meets %v at %g replica-s; want met and ≥ the bound %g", c.Optimum.MeetsSLO, c.Optimum.ReplicaSeconds, c.Bound.ReplicaSeconds)
	}
}

// TestBoundSLOUnreachable: 100 one-second requests, one a second from
// t = 0, on 1-slot replicas with none ready at start and a 10-minute cold
// start. Every request arrives before any replica can be ready, so all 100
// miss the 2 s wait and no schedule meets 99 % (1 miss allowed). The dual
// grew to its λ ≤ 1e9 search cap (254,947,226 GPU-hours on the coding
// trace); the bound is Σ service ÷ slots, 100 replica-seconds, and the
// header and summary.json say why.
func TestBoundSLOUnreachable(t *testing.T) {
	w := &Workload{ArrivalS: make([]float64, 100), ServiceS: slices.Repeat([]float64{1}, 100)}
	for i := range w.ArrivalS {
		w.ArrivalS[i] = float64(i)
	}
	cfg := DefaultPoolConfig()
	cfg.Slots, cfg.InitialReplicas, cfg.ColdStart = 1, 0, 10*time.Minute
	c, err := Compare(cfg, Workloads{Name: "unreachable", Requests: w}, CompareOptions{Families: []string{FamilyStatic}})
	if err != nil {
		t.Fatal(err)
	}
	b := c.Bound
	if !b.Unreachable || b.MinMisses != 100 || math.Abs(b.MissBudget-1) > 1e-9 || b.ReplicaSeconds != 100 || b.CoverReplicaSeconds != 0 {
		t.Errorf("bound: unreachable %v, at least %g misses of budget %g, %g replica-s (cover %g); want true, 100, 1, 100, 0",
			b.Unreachable, b.MinMisses, b.MissBudget, b.ReplicaSeconds, b.CoverReplicaSeconds)
	}
	var tb bytes.Buffer
	if err := c.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"The SLO cannot be met: with at most 10000 replicas (0 ready at start, none more ready before the first cold start ends) at least 100 of the 100 requests wait longer than 2s, over the 1 the SLO allows",
		"| bound | bound | Σ service ÷ slots (the SLO cannot be met within the pool's bounds) | 0.03 |",
	} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	s := c.Summary()
	if !s.SLOUnreachable || !strings.HasPrefix(s.SLOUnreachableNote, "The SLO cannot be met") {
		t.Errorf("summary sloUnreachable %v, note %q; want true and the header's note", s.SLOUnreachable, s.SLOUnreachableNote)
	}
	// A reachable SLO (the burst of TestBoundBurst) is not marked.
	burst := &Workload{ArrivalS: slices.Repeat([]float64{100}, 8), ServiceS: slices.Repeat([]float64{10}, 8)}
	cfg = DefaultPoolConfig()
	cfg.Slots, cfg.SLOTarget = 1, 1
	c, err = Compare(cfg, Workloads{Name: "burst", Requests: burst}, CompareOptions{Families: []string{FamilyStatic}, NoOptimum: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Bound.Unreachable || c.Summary().SLOUnreachable || c.UnreachableNote() != "" {
		t.Errorf("burst marked unreachable (at least %g misses of %g)", c.Bound.MinMisses, c.Bound.MissBudget)
	}
}

// TestDemoBoundAndOptimum: on the demo trace the bound exceeds Σ service ÷
// slots, no run meeting the SLO costs less than the bound, and the optimum
// meets the SLO and costs no more than any policy row meeting it.
func TestDemoBoundAndOptimum(t *testing.T) {
	c := demoCompare(t)
	if c.Bound.ReplicaSeconds <= c.Bound.WorkReplicaSeconds {
		t.Errorf("bound %g ≤ work bound %g: cold starts and whole replicas not counted", c.Bound.ReplicaSeconds, c.Bound.WorkReplicaSeconds)
	}
	if !c.Optimum.MeetsSLO {
		t.Fatalf("optimum misses the SLO: %.4f", c.Optimum.Attainment())
	}
	for _, r := range append(slices.Clone(c.All), c.Optimum) {
		if r.MeetsSLO && r.ReplicaSeconds < c.Bound.ReplicaSeconds {
			t.Errorf("%s %s meets the SLO at %g replica-s, below the bound %g", r.Policy, r.Setting, r.ReplicaSeconds, c.Bound.ReplicaSeconds)
		}
		if r.MeetsSLO && r.ReplicaSeconds < c.Optimum.ReplicaSeconds {
			t.Errorf("%s %s meets the SLO at %g replica-s, below the optimum %g", r.Policy, r.Setting, r.ReplicaSeconds, c.Optimum.ReplicaSeconds)
		}
	}
}

// TestSummarySchema: summary.json has exactly the documented fields, one
// row per policy row plus optimum and bound, and nulls where a row has no
// figure.
func TestSummarySchema(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultRunConfig()
	cfg.OutDir, cfg.Stdout, cfg.Stderr = dir, &bytes.Buffer{}, &bytes.Buffer{}
	if err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	if diff := cmp.Diff([]string{"requests", "rows", "slo", "trace"}, keys(top)); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var slo map[string]json.RawMessage
	_ = json.Unmarshal(top["slo"], &slo)
	if diff := cmp.Diff([]string{"quantile", "waitSeconds"}, keys(slo)); diff != "" {
		t.Errorf("slo keys (-want +got):\n%s", diff)
	}
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(top["rows"], &rows); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"coldStarts", "cost", "gpuHours", "policy", "scaleEventsPerHour", "setting", "settingSet", "sloPercent", "waitP99Seconds", "worstHourSloPercent"}
	sets := map[string]int{}
	for _, r := range rows {
		if diff := cmp.Diff(wantKeys, keys(r)); diff != "" {
			t.Errorf("row keys (-want +got):\n%s", diff)
		}
		var set string
		_ = json.Unmarshal(r["settingSet"], &set)
		sets[set]++
		if set == SetBound && (string(r["sloPercent"]) != "null" || string(r["coldStarts"]) != "null") {
			t.Errorf("bound row sloPercent %s, coldStarts %s; want null", r["sloPercent"], r["coldStarts"])
		}
	}
	n := len(Families())
	if diff := cmp.Diff(map[string]int{SetPublished: n, SetTuned: n, SetHindsight: n, SetOptimum: 1, SetBound: 1}, sets); diff != "" {
		t.Errorf("rows per setting set (-want +got):\n%s", diff)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Requests != 8819 || s.SLO.WaitSeconds != 2 || s.SLO.Quantile != 0.99 {
		t.Errorf("summary requests %g, slo %+v; want 8819, 2 s, 0.99", s.Requests, s.SLO)
	}
}

// TestSettingsFile: the committed file parses; both sets name every family
// inside its range; a bad value is an error naming set, family and range.
func TestSettingsFile(t *testing.T) {
	s, err := DefaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	for _, fs := range FamilySpecs() {
		for _, set := range []string{SetPublished, SetTuned} {
			e := s.Set(set)[fs.Family]
			if e.Source == "" {
				t.Errorf("%s.%s has no source", set, fs.Family)
			}
		}
	}
	if got := s.Published[FamilyKnative].Value; got != 0.7 {
		t.Errorf("published knative %g, want Knative's default target 70 %%", got)
	}
	data, err := MarshalSettings(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSettings(data)
	if err != nil || !cmp.Equal(s, back) {
		t.Errorf("round trip: %v, diff %s", err, cmp.Diff(s, back))
	}
	bad := strings.Replace(string(data), "value: 0.7", "value: 7", 1)
	if _, err := ParseSettings([]byte(bad)); err == nil || !strings.Contains(err.Error(), "published.knative.value = 7: want") {
		t.Errorf("bad knative value: %v", err)
	}
}

// TestSettingsFileRefusesWhatItIgnored: an empty settings file said
// "settings: EOF", value: null read as 0, and a second YAML document was
// dropped without a word.
func TestSettingsFileRefusesWhatItIgnored(t *testing.T) {
	good, err := os.ReadFile("settings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	nulled := strings.Replace(string(good), "value: 0.7", "value: null", 1)
	line := 1 + strings.Count(nulled[:strings.Index(nulled, "value: null")], "\n")
	tests := []struct{ name, give, want string }{
		{"empty", "", "settings: the file is empty; want the published and tuned sets, as in replay/settings.yaml"},
		{"comments only", "# nothing\n", "settings: the file is empty; want the published and tuned sets, as in replay/settings.yaml"},
		{"null value", nulled, fmt.Sprintf("settings published.knative.value: null (line %d); give a value", line)},
		{"second document", string(good) + "---\npublished: {}\n", fmt.Sprintf("settings: a second YAML document at line %d; the file must hold exactly one", 2+strings.Count(string(good), "\n"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ParseSettings([]byte(tt.give)); err == nil || err.Error() != tt.want {
				t.Errorf("ParseSettings = %v, want %q", err, tt.want)
			}
		})
	}
	// A trailing document marker with nothing after it is no second document.
	if _, err := ParseSettings(append(good, "---\n"...)); err != nil {
		t.Errorf("trailing ---: %v", err)
	}
}
