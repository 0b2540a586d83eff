package replay

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scriptCtl answers a fixed replica count per decision time, holding the
// last one.
type scriptCtl struct {
	every time.Duration
	plan  map[time.Duration]int
	cur   int
}

func (c *scriptCtl) Interval() time.Duration { return c.every }
func (c *scriptCtl) Desired(s Signals) int {
	if n, ok := c.plan[s.Now]; ok {
		c.cur = n
	}
	return c.cur
}

func testPool(slots int) PoolConfig {
	cfg := DefaultPoolConfig()
	cfg.Slots = slots
	cfg.ColdStart = 10 * time.Second
	cfg.SLO = 1500 * time.Millisecond
	return cfg
}

func TestSimulateRequestsFIFOAndWaits(t *testing.T) {
	// One replica, one slot, three requests at 0.5 s needing 1 s each:
	// they start at 0.5, 1.5 and 2.5 s.
	w := &Workload{ArrivalS: []float64{0.5, 0.5, 0.5}, ServiceS: []float64{1, 1, 1}}
	r := simulateRequests(testPool(1), w, &staticCtl{n: 1}, runOptions{initial: 1, sampleStepS: 60, maxOverrunS: 100})
	if r.SLOMet != 2 || r.Requests != 3 {
		t.Errorf("SLO met %g of %g, want 2 of 3 (waits 0, 1, 2 s against 1.5 s)", r.SLOMet, r.Requests)
	}
	if r.WaitP99 < 2 || r.WaitP99 > 2.05 {
		t.Errorf("p99 wait %g s, want 2 s within the histogram's 2.2 %%", r.WaitP99)
	}
	// Billed until the last request finishes, at the first whole second
	// after: it starts at 2.5 s and ends at 3.5 s, the run ends at t = 4 s
	// (it ended at 3 s, when the queue was empty, before that request was
	// done).
	if r.ReplicaSeconds != 4 {
		t.Errorf("replica-seconds %g, want 4", r.ReplicaSeconds)
	}
}

// TestWorkRunningAtTheEndIsBilled: one request of 3,600 s arriving at the
// trace's only instant is billed until it finishes. The run stopped once
// the queue was empty, with the request in service: 0.00 GPU-hours against
// a bound of 0.25 (3,600 s ÷ 4 slots).
func TestWorkRunningAtTheEndIsBilled(t *testing.T) {
	w := &Workload{ArrivalS: []float64{0}, ServiceS: []float64{3600}}
	r := simulateRequests(testPool(4), w, &staticCtl{n: 1}, defaultRunOptions(0, 1))
	// It finishes at 3,600 s; the tick at 3,600 s sees it done and ends the run.
	if r.ReplicaSeconds != 3600 || r.SLOMet != 1 || r.DurationS != 3600 {
		t.Errorf("replica-seconds %g, SLO met %g, simulated %g s; want 3600, 1, 3600", r.ReplicaSeconds, r.SLOMet, r.DurationS)
	}
	// Past the overrun cap too: a 1 h request with a 100 s cap is billed
	// until it finishes (it was billed for the 100 s after the end, below
	// the bound; TestLongRequestBilledPastTheOverrunCap).
	r = simulateRequests(testPool(4), w, &staticCtl{n: 1}, runOptions{initial: 1, sampleStepS: 60, maxOverrunS: 100})
	if r.ReplicaSeconds != 3600 || r.Unserved != 0 {
		t.Errorf("replica-seconds with a 100 s overrun cap: %g, unserved %g; want 3600, 0", r.ReplicaSeconds, r.Unserved)
	}
	c, err := Compare(testPool(4), Workloads{Name: "one long request", Requests: w}, CompareOptions{Families: []string{FamilyStatic}, NoOptimum: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, bound := c.Best[0].GPUHours(1), c.BoundGPUHours(); got < bound || bound != 0.25 {
		t.Errorf("static %g GPU-h, bound %g; want ≥ the bound, 0.25", got, bound)
	}
}

func TestSimulateRequestsColdStart(t *testing.T) {
	// Pool at zero; the controller asks for one replica at t = 1 s; it is
	// ready at 11 s; the request that arrived at 0.5 s waits 10.5 s.
	w := &Workload{ArrivalS: []float64{0.5}, ServiceS: []float64{1}}
	ctl := &scriptCtl{every: time.Second, plan: map[time.Duration]int{time.Second: 1}}
	cfg := testPool(2)
	r := simulateRequests(cfg, w, ctl, runOptions{initial: 0, sampleStepS: 60, maxOverrunS: 100})
	if r.ColdStarts != 1 || r.SLOMet != 0 {
		t.Errorf("cold starts %d, SLO met %g; want 1 and 0", r.ColdStarts, r.SLOMet)
	}
	if math.Abs(r.WaitP50-10.5) > 10.5*0.025 {
		t.Errorf("wait %g s, want 10.5 s", r.WaitP50)
	}
}

func TestScaleDownDrainsBusyReplica(t *testing.T) {
	// Two replicas, one slot each, both busy until 20 s; the controller
	// asks for 0 at 5 s. Neither is removed before its request finishes, so
	// billing is 2 × 20 replica-seconds, not 2 × 5.
	w := &Workload{ArrivalS: []float64{0, 0, 30}, ServiceS: []float64{20, 20, 1}}
	ctl := &scriptCtl{every: time.Second, plan: map[time.Duration]int{0: 2, 5 * time.Second: 0, 29 * time.Second: 1}}
	r := simulateRequests(testPool(1), w, ctl, runOptions{initial: 2, sampleStepS: 60, maxOverrunS: 100})
	// 40 s of draining replicas, then one cold replica from 29 s to the end
	// (31 s, when the queue is empty after the 30 s arrival started at 39 s:
	// cold start 10 s).
	if r.ReplicaSeconds < 40 {
		t.Errorf("replica-seconds %g, want ≥ 40: busy replicas must drain before removal", r.ReplicaSeconds)
	}
	if r.SLOMet != 2 {
		t.Errorf("SLO met %g, want 2 (the third waits for a cold start)", r.SLOMet)
	}
}

func TestHPAStep(t *testing.T) {
	tests := []struct {
		name    string
		steps   [][3]int // now (s), current, proposal
		wantOut []int
	}{
		{"tolerance keeps 11 at ratio 12/11", nil, nil},
		{"scale up limited to max(4 pods, 100 %) per 15 s", [][3]int{{0, 1, 50}, {15, 5, 50}, {30, 10, 50}}, []int{5, 10, 20}},
		{"scale down waits for the 300 s window", [][3]int{{0, 10, 10}, {15, 10, 2}, {300, 10, 2}, {316, 10, 2}}, []int{10, 10, 10, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hpa{b: DefaultHPABehavior(), max: 1000}
			if tt.steps == nil {
				// 12/11 = 1.09: within 10 %, the HPA keeps 11. (At exactly
				// 11/10 float64 gives |1−1.1| = 0.10000000000000009 > 0.1,
				// and the HPA, which computes the same expression, scales.)
				if got := h.ratioDesired(11, 12.0/11, 12); got != 11 {
					t.Errorf("ratioDesired = %d, want 11", got)
				}
				if got := h.ratioDesired(10, 1.11, 12); got != 12 {
					t.Errorf("ratioDesired past tolerance = %d, want 12", got)
				}
				return
			}
			var got []int
			for _, s := range tt.steps {
				got = append(got, h.step(time.Duration(s[0])*time.Second, s[1], s[2]))
			}
			if diff := cmp.Diff(tt.wantOut, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestKEDAActivationAndCooldown(t *testing.T) {
	k := keda{polling: 30 * time.Second, cooldown: 300 * time.Second}
	hpaStep := func() int { return 3 }
	steps := []struct {
		now     time.Duration
		current int
		active  bool
		want    int
	}{
		{0, 0, false, 0},
		{15 * time.Second, 0, true, 0}, // not a polling instant
		{30 * time.Second, 0, true, 1}, // activation: 0 → 1
		{45 * time.Second, 1, false, 3},
		{60 * time.Second, 3, false, 3},  // inactive, within cooldown: the HPA decides
		{330 * time.Second, 3, false, 0}, // 300 s after the last active poll
	}
	for _, s := range steps {
		active := s.active
		if got := k.step(s.now, s.current, func() bool { return active }, hpaStep); got != s.want {
			t.Errorf("at %v: got %d, want %d", s.now, got, s.want)
		}
	}
}

func TestKnativePanicNeverScalesDown(t *testing.T) {
	c := &knativeCtl{target: 0.7 * 4, max: 100}
	// Ready 2, 6 s concurrency 20: ⌈20/2.8⌉ = 8 pods, 8/2 ≥ 2: panic, 8.
	if got := c.Desired(Signals{Now: 60 * time.Second, Concurrency6s: 20, Concurrency60s: 2, Ready: 2, Current: 2}); got != 8 {
		t.Errorf("panic answer %d, want 8", got)
	}
	// Burst gone but still within 60 s of panic: stays at 8.
	if got := c.Desired(Signals{Now: 90 * time.Second, Concurrency6s: 1, Concurrency60s: 3, Ready: 8, Current: 8}); got != 8 {
		t.Errorf("in panic %d, want 8", got)
	}
	// Exactly 60 s after the last panic tick Knative still panics
	// (panicTime.Add(StableWindow).Before(now) is false).
	if got := c.Desired(Signals{Now: 120 * time.Second, Concurrency6s: 1, Concurrency60s: 3, Ready: 8, Current: 8}); got != 8 {
		t.Errorf("at 60 s after panic %d, want 8", got)
	}
	// Out of panic: stable ⌈3/2.8⌉ = 2, but at most ÷2 per step: 4.
	if got := c.Desired(Signals{Now: 122 * time.Second, Concurrency6s: 1, Concurrency60s: 3, Ready: 8, Current: 8}); got != 4 {
		t.Errorf("after panic %d, want 4 (÷2 bound)", got)
	}
}

func TestKnativeDecider(t *testing.T) {
	tests := []struct {
		name     string
		minScale int
		delay    time.Duration
		steps    []Signals
		want     []int
	}{{
		// Pods still starting do not count: ready 1 bounds the scale-down
		// to ⌊1/2⌋ = 0, so 10 requested pods fall to ⌈2/2.8⌉ = 1.
		name:  "starting pods not protected",
		steps: []Signals{{Now: time.Minute, Concurrency6s: 2, Concurrency60s: 2, Ready: 1, Current: 10}},
		want:  []int{1},
	}, {
		// The first stable window only scales up (the run starts warm
		// with nothing in flight).
		name:  "warm start holds",
		steps: []Signals{{Now: 2 * time.Second, Concurrency6s: 1, Concurrency60s: 1, Ready: 10, Current: 10}, {Now: 60 * time.Second, Concurrency6s: 1, Concurrency60s: 1, Ready: 10, Current: 10}},
		want:  []int{10, 5},
	}, {
		// scale-down-delay 60 s: the largest desired of the last minute.
		name:  "scale-down delay",
		delay: time.Minute,
		steps: []Signals{
			{Now: 60 * time.Second, Concurrency6s: 14, Concurrency60s: 14, Ready: 5, Current: 5},
			{Now: 62 * time.Second, Concurrency6s: 3, Concurrency60s: 3, Ready: 5, Current: 5},
			{Now: 118 * time.Second, Concurrency6s: 3, Concurrency60s: 3, Ready: 5, Current: 5},
			{Now: 120 * time.Second, Concurrency6s: 3, Concurrency60s: 3, Ready: 5, Current: 5},
		},
		want: []int{5, 5, 5, 2},
	}, {
		// Scale to zero after 30 s of desired 0; min-scale 1 never does.
		name: "scale to zero grace",
		steps: []Signals{
			{Now: 100 * time.Second, Ready: 1, Current: 1},
			{Now: 128 * time.Second, Ready: 1, Current: 1},
			{Now: 130 * time.Second, Ready: 1, Current: 1},
		},
		want: []int{1, 1, 0},
	}, {
		name:     "min-scale 1",
		minScale: 1,
		steps:    []Signals{{Now: 100 * time.Second, Ready: 1, Current: 1}, {Now: 200 * time.Second, Ready: 1, Current: 1}},
		want:     []int{1, 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := KnativePolicy(0.7, tt.minScale, tt.delay, testPool(4)).New()
			var got []int
			for _, s := range tt.steps {
				got = append(got, c.Desired(s))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestKnativeSteadyStreamNoFlapping replays one hour of a constant stream
// (2 req/s of 10 s each: 20 in flight) on a warm pool with a 60 s cold
// start. Knative at target 70 % of 4 slots wants ⌈20/2.8⌉ = 8 pods and
// must hold them: a handful of scale events, no cold start beyond that.
// Before the decider let its first stable window fill, the partial window
// of a pool with nothing yet in flight cut the warm pool to 1, the queue
// grew through a 60 s cold start and panic overshot.
func TestKnativeSteadyStreamNoFlapping(t *testing.T) {
	cfg := testPool(4)
	cfg.ColdStart = time.Minute
	var w Workload
	for i := range 7200 {
		w.ArrivalS = append(w.ArrivalS, float64(i)/2)
		w.ServiceS = append(w.ServiceS, 10)
	}
	for _, delay := range []time.Duration{0, 5 * time.Minute} {
		r := simulateRequests(cfg, &w, KnativePolicy(0.7, 0, delay, cfg).New(), defaultRunOptions(w.DurationS(), 8))
		if r.ScaleEvents > 3 || r.ColdStarts > 2 {
			t.Errorf("delay %v: %d scale events, %d cold starts in 1 h; want ≤ 3 and ≤ 2", delay, r.ScaleEvents, r.ColdStarts)
		}
		if r.Attainment() < 0.999 {
			t.Errorf("delay %v: SLO attainment %.4f, want ≥ 0.999", delay, r.Attainment())
		}
	}
}

func TestSimulateBinnedFluid(t *testing.T) {
	// 2 replicas × 2 slots = 4 slot-seconds per second; 8 slot-seconds
	// arrive in second 0: the first second's arrivals wait (0+4−2)/4 = 0.5 s
	// on average, the backlog of 4 clears in second 1.
	b := &Binned{Arrivals: []float64{8, 0, 0}, WorkS: []float64{8, 0, 0}}
	cfg := testPool(2)
	r := simulateBinned(cfg, b, &staticCtl{n: 2}, runOptions{initial: 2, sampleStepS: 60, maxOverrunS: 10})
	if r.Requests != 8 || r.SLOMet != 8 {
		t.Errorf("requests %g, met %g; want 8 and 8 (0.5 s wait ≤ 1.5 s)", r.Requests, r.SLOMet)
	}
	if math.Abs(r.WaitP50-0.5) > 0.02 {
		t.Errorf("wait %g, want 0.5", r.WaitP50)
	}
	if r.ReplicaSeconds != 6 {
		t.Errorf("replica-seconds %g, want 6 (3 s × 2)", r.ReplicaSeconds)
	}
}

func TestProbeThroughput(t *testing.T) {
	// Deterministic 1 s service, one slot, SLO 1.5 s at 99 %: an M/D/1 queue.
	// Its mean wait ρ/(2(1−ρ)) s exceeds 1.5 s above ρ = 0.75, and the 99th
	// percentile is much longer than the mean, so μ is well below 0.75/s and
	// well above 0.
	cfg := testPool(1)
	mu := ProbeThroughput(cfg, []float64{1})
	if mu < 0.2 || mu > 0.7 {
		t.Errorf("μ = %g req/s, want within (0.2, 0.7)", mu)
	}
	cfg.Slots = 4
	if mu4 := ProbeThroughput(cfg, []float64{1}); mu4 < 4*mu {
		t.Errorf("4 slots: μ = %g, want ≥ 4 × %g (pooling helps)", mu4, mu)
	}
}

func demoCompare(t *testing.T) *Comparison {
	t.Helper()
	tr, err := DemoTrace()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultPoolConfig()
	c, err := Compare(cfg, Workloads{Name: tr.Name, Requests: NewWorkload(tr, cfg.Service)}, CompareOptions{Hindsight: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompareDemoDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := demoCompare(t).WriteTable(&a); err != nil {
		t.Fatal(err)
	}
	c := demoCompare(t)
	if err := c.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two runs differ:\n%s\n%s", a.String(), b.String())
	}
	if c.Requests != 8819 {
		t.Errorf("requests %g, want 8819", c.Requests)
	}
	// Every policy uses at least the lower bound, and the static row is the
	// smallest count that meets the SLO.
	for _, r := range c.Best {
		if gh := r.GPUHours(1); gh < c.BoundGPUHours() {
			t.Errorf("%s uses %g GPU-h, below the lower bound %g", r.Policy, gh, c.BoundGPUHours())
		}
	}
	for _, r := range c.Best {
		if r.Policy == FamilyStatic && r.SettingSet == SetHindsight && !r.MeetsSLO {
			t.Errorf("static hindsight %q misses the SLO", r.Setting)
		}
	}
	if !strings.Contains(a.String(), "| bound | bound |") || !strings.Contains(a.String(), "| optimum | optimum |") || !strings.Contains(a.String(), "| inferscale | published |") {
		t.Errorf("table lacks rows:\n%s", a.String())
	}
}

func TestRunWritesSelfContainedReport(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultRunConfig()
	cfg.OutDir = dir
	cfg.Policies = []string{FamilyInferscale, FamilyStatic}
	var out, errOut bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errOut
	if err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "<link", "src=\"http", "href=\"http", "@import"} {
		if bytes.Contains(html, []byte(bad)) {
			t.Errorf("report.html contains %q: not self-contained", bad)
		}
	}
	if !bytes.Contains(html, []byte("<svg")) {
		t.Error("report.html has no SVG chart")
	}
	csvData, err := os.ReadFile(filepath.Join(dir, "timeseries.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(csvData), "policy,set,setting,time_s,arrivals_rps,queue,ready,replicas,live,busy_fraction,max_wait_s,misses\n") {
		t.Errorf("timeseries.csv header: %.80q", csvData)
	}
	table, _ := os.ReadFile(filepath.Join(dir, "table.md"))
	if !bytes.Equal(table, out.Bytes()) {
		t.Error("table.md differs from what was printed")
	}
}

func TestRunConfigValidate(t *testing.T) {
	cfg := DefaultRunConfig()
	cfg.Pool.Slots = 0
	cfg.Mode = "fast"
	cfg.Policies = []string{"magic"}
	err := cfg.Validate()
	for _, want := range []string{"slots = 0: want 1..1024", `mode "fast"`, `policy "magic"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}

func TestResidencyPolicies(t *testing.T) {
	// Two models that each take the whole budget, requested alternately
	// every 100 s: every policy must load on every request; with model 0
	// requested twice in a row the second is a hit.
	tr := &Trace{Name: "r", Models: []string{"a", "b"}}
	for i, m := range []int32{0, 1, 0, 0, 1} {
		tr.Requests = append(tr.Requests, Request{At: time.Duration(i*100) * time.Second, Model: m, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown})
	}
	sizes := []int64{4 << 30, 4 << 30}
	loads := []time.Duration{10 * time.Second, 10 * time.Second}
	cfg := DefaultResidencyConfig()
	for _, p := range []string{ResidencyLRU, ResidencyLFU, ResidencyBelady} {
		r := runCache(tr, cfg, sizes, loads, 4<<30, p, 60)
		if r.Loads != 4 || r.Hits != 1 || r.WaitS != 40 {
			t.Errorf("%s: loads %d hits %d wait %g; want 4, 1, 40", p, r.Loads, r.Hits, r.WaitS)
		}
	}
	r, err := runPlan(tr, cfg, sizes, loads, 4<<30, 60)
	if err != nil {
		t.Fatal(err)
	}
	// The plan sees demand at its next 5 s loop, then loads (10 s), and a
	// model idle 100 s is still within minResidency (2 m) when the other is
	// requested: it waits until it may be evicted.
	if r.Loads < 3 || r.Unserved != 0 || r.Hits < 1 {
		t.Errorf("plan: loads %d hits %d unserved %d; want ≥ 3 loads, ≥ 1 hit, none unserved", r.Loads, r.Hits, r.Unserved)
	}
}

func TestResidencyConfigValidate(t *testing.T) {
	if err := DefaultResidencyConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	c := DefaultResidencyConfig()
	c.BudgetModels, c.LoopInterval = 0.5, 0
	err := c.Validate()
	for _, want := range []string{"BudgetModels = 0.5", "LoopInterval = 0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}

func TestCompareResidencyDeterministic(t *testing.T) {
	// 12 models with skewed, interleaved demand over two hours.
	tr := &Trace{Name: "skew"}
	for m := range 12 {
		tr.Models = append(tr.Models, modelName(m))
	}
	for i := range 3000 {
		m := int32((i * i) % 12)
		if i%3 == 0 {
			m = 0
		}
		tr.Requests = append(tr.Requests, Request{At: time.Duration(i) * 2400 * time.Millisecond, Model: m, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown})
	}
	var a, b bytes.Buffer
	for _, buf := range []*bytes.Buffer{&a, &b} {
		rc, err := CompareResidency(tr, DefaultResidencyConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.WriteTable(buf); err != nil {
			t.Fatal(err)
		}
		for _, r := range rc.Results {
			if r.Hits+r.Unserved > r.Requests || r.Requests != 3000 {
				t.Errorf("%s: hits %d unserved %d of %d", r.Policy, r.Hits, r.Unserved, r.Requests)
			}
			if r.Policy == ResidencyBelady && r.Hits < rc.Results[1].Hits {
				t.Errorf("Belady hits %d below LRU's %d", r.Hits, rc.Results[1].Hits)
			}
		}
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("two runs differ:\n%s\n%s", a.String(), b.String())
	}
}

// TestScaleDownVictims: a scale-down cancels starting replicas first, highest id first, then
// drains ready ones with the fewest busy slots, highest id first among equals; an idle one goes
// at once, a busy one drains.
func TestScaleDownVictims(t *testing.T) {
	s := &sim{cfg: PoolConfig{Slots: 4, MaxReplicas: 100}}
	for _, r := range []struct {
		state uint8
		busy  int32
	}{{stReady, 2}, {stStarting, 0}, {stReady, 0}, {stReady, 0}, {stStarting, 0}, {stReady, 1}} {
		s.reps = append(s.reps, replica{state: r.state, busy: r.busy})
		s.spec++
		s.live++
		if r.state == stReady {
			s.ready++
			s.freeN += 4 - int(r.busy)
		}
	}
	s.scaleTo(2) // four go: starting 4 and 1, then the idle 3 and 2
	want := []uint8{stReady, stGone, stGone, stGone, stGone, stReady}
	for id, w := range want {
		if s.reps[id].state != w {
			t.Errorf("after scaleTo(2): replica %d state %d, want %d", id, s.reps[id].state, w)
		}
	}
	s.scaleTo(1) // then the one with 1 busy slot, which drains
	if s.reps[5].state != stDraining || s.reps[0].state != stReady || s.spec != 1 || s.ready != 1 || s.freeN != 2 {
		t.Errorf("after scaleTo(1): states %d, %d; spec %d, ready %d, free slots %d; want replica 5 draining, 0 ready, 1, 1, 2",
			s.reps[5].state, s.reps[0].state, s.spec, s.ready, s.freeN)
	}
}

// TestNeverServedWaitIsNotAFigure: a quantile landing past the wait
// histogram's top edge (2^26 ms) is +Inf, shown as ">67108.9s" and in
// summary.json as that edge marked waitP99Overflow; it was reported as a
// wait of exactly 67108.9 s. Waits below the edge keep their bucket.
func TestNeverServedWaitIsNotAFigure(t *testing.T) {
	var h waitHist
	h.add(60000, 1)
	if got := h.quantile(1); got < 60000 || got > 60000*1.022 {
		t.Errorf("quantile of a 60,000 s wait = %g, want within 2.2 %% above it", got)
	}
	h.add(70000, 1)       // past the top edge, served
	h.add(math.Inf(1), 2) // never served
	if got := h.quantile(0.5); !math.IsInf(got, 1) {
		t.Errorf("median of 60,000 s, 70,000 s, ∞, ∞ = %g, want +Inf", got)
	}
	if got := fwait(h.quantile(0.99)); got != ">67108.9s" {
		t.Errorf("fwait = %q, want >67108.9s", got)
	}
	c := neverServed(t)
	r := c.Best[0]
	if r.SLOMet != 1 || !math.IsInf(r.WaitP50, 1) || !math.IsInf(r.WaitP99, 1) {
		t.Errorf("SLO met %g, waits p50 %g, p99 %g; want 1 (waits 0, ∞, ∞), +Inf, +Inf", r.SLOMet, r.WaitP50, r.WaitP99)
	}
	var tb bytes.Buffer
	if err := c.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "| >67108.9s | >67108.9s | >67108.9s |") {
		t.Errorf("table does not show the waits past the histogram:\n%s", tb.String())
	}
	row := c.Summary().Rows[0]
	if row.WaitP99Seconds == nil || *row.WaitP99Seconds != 67108.864 || !row.WaitP99Overflow {
		t.Errorf("summary waitP99Seconds %v, overflow %v; want 67108.864 (the top edge), true", row.WaitP99Seconds, row.WaitP99Overflow)
	}
	if c.Summary().Rows[len(c.Summary().Rows)-1].WaitP99Overflow {
		t.Error("the bound row is marked waitP99Overflow")
	}
}

// TestStaticLabelHeldToBounds: under --max-replicas=1 the static row said
// "= 71 replicas" while it ran one.
func TestStaticLabelHeldToBounds(t *testing.T) {
	fs, _ := familySpec(FamilyStatic)
	tests := []struct {
		name     string
		min, max int
		want     string
	}{
		{"within", 0, 10000, "×1 peak (70.5) = 71 replicas"},
		{"max", 0, 1, "×1 peak (70.5) = 71, held at max replicas 1"},
		{"min", 80, 100, "×1 peak (70.5) = 71, held at min replicas 80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := DefaultPoolConfig()
			pool.MinReplicas, pool.MaxReplicas = tt.min, tt.max
			p := fs.Policy(1, PolicyEnv{Pool: pool, PeakReplicas: 70.5})
			if p.Setting != tt.want {
				t.Errorf("setting %q, want %q", p.Setting, tt.want)
			}
		})
	}
}
