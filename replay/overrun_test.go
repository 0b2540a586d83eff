package replay

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestLongRequestBilledPastTheOverrunCap: the hostile-input repro. Fifty
// 1 s requests a minute apart, then one of 7 days (GenTD26's
// exec_time_seconds allows 604,800) at 3,030 s. The runs stopped 6 h after
// the last arrival and billed none of the request past it: every policy
// and the optimum at 6.84 GPU-hours against a bound of 42.00 ("gap
// -83.7%"), no mark. The work in service is now billed until it finishes:
// one replica held from 0 to 3,030 + 604,800 s.
func TestLongRequestBilledPastTheOverrunCap(t *testing.T) {
	w := &Workload{Name: "one 7-day request"}
	for m := range 50 {
		w.ArrivalS = append(w.ArrivalS, float64(60*m))
		w.ServiceS = append(w.ServiceS, 1)
	}
	w.ArrivalS = append(w.ArrivalS, 3030)
	w.ServiceS = append(w.ServiceS, 604800)
	c, err := Compare(DefaultPoolConfig(), Workloads{Name: w.Name, Requests: w}, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := c.Bound.ReplicaSeconds
	if want := (604800.0 + 50) / 4; bound < want {
		t.Fatalf("bound %g replica-s, want at least Σ service ÷ slots = %g", bound, want)
	}
	for _, r := range append(c.Best, c.Optimum) {
		if r.ReplicaSeconds < bound || r.Unserved != 0 {
			t.Errorf("%s %s: %g replica-s (bound %g), %g unserved; want ≥ the bound, 0", r.Policy, r.SettingSet, r.ReplicaSeconds, bound, r.Unserved)
		}
	}
	// inferscale keeps its one initial replica: billed to the request's end.
	if got := c.Best[0]; got.Policy != FamilyInferscale || got.ReplicaSeconds != 3030+604800 || got.DurationS != 3030+604800 {
		t.Errorf("%s %s: %g replica-s over %g s; want inferscale, 607830 and 607830", got.Policy, got.SettingSet, got.ReplicaSeconds, got.DurationS)
	}
	if gap := c.Gap(); !(gap >= 0) {
		t.Errorf("optimum ÷ bound − 1 = %g, want ≥ 0", gap)
	}
	if n := c.CutShortNote(); n != "" {
		t.Errorf("cut-short note %q on a run that served every request", n)
	}
}

// TestFinishInServiceAtTheCap: one replica busy with a 1 h request and two
// idle ones when the 100 s cap comes. The busy one is billed until the
// request ends (3,600 s); the idle ones stop at the cap, as at a run's
// normal end: 3 × 100 + 3,500 = 3,800 replica-seconds. The run stopped at
// the cap and billed 300.
func TestFinishInServiceAtTheCap(t *testing.T) {
	w := &Workload{ArrivalS: []float64{0}, ServiceS: []float64{3600}}
	r := simulateRequests(testPool(4), w, &staticCtl{n: 3}, runOptions{initial: 3, sampleStepS: 60, maxOverrunS: 100})
	if r.ReplicaSeconds != 3800 || r.DurationS != 3600 || r.Unserved != 0 || r.SLOMet != 1 {
		t.Errorf("replica-seconds %g, simulated %g s, unserved %g, met %g; want 3800, 3600, 0, 1", r.ReplicaSeconds, r.DurationS, r.Unserved, r.SLOMet)
	}
}

// TestCutShortIsMarked: one replica of one slot, max 1; a 100,000 s request
// holds it and two 1 s requests wait behind it past the 6 h cap, never
// served. The served request is billed to its end (100,000 s); the two are
// counted unserved, and the table and summary.json say so, since the
// GPU-hours (27.78) are below the bound (Σ service ÷ slots, 27.78 + 2 s).
// Before, the row was 6 h 0 m 1 s (6.00 GPU-h) against the bound with no
// mark.
func TestCutShortIsMarked(t *testing.T) {
	c := neverServed(t)
	r := c.Best[0]
	if r.Unserved != 2 || r.ReplicaSeconds != 1e5 || !r.CutShort() {
		t.Errorf("unserved %g, replica-seconds %g, cut short %v; want 2, 100000, true", r.Unserved, r.ReplicaSeconds, r.CutShort())
	}
	if r.ReplicaSeconds >= c.Bound.ReplicaSeconds {
		t.Errorf("replica-seconds %g, bound %g: the case no longer shows a cut-short run below the bound", r.ReplicaSeconds, c.Bound.ReplicaSeconds)
	}
	var tb bytes.Buffer
	if err := c.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| static | published | ×1 peak (1.67e+03) = 1667, held at max replicas 1 | 27.78 ‡ |",
		"Cut short (‡ after GPU-h): static published (2 of 3 requests), static tuned (2 of 3 requests) stopped 6 h after the last arrival with requests never served; they count as missing the SLO and their work is not billed, so these GPU-hours can be below the bound",
		"No optimum row: the offline optimum search was skipped (--optimum=false).",
	} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	data, err := json.Marshal(c.Summary())
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Rows[0].UnservedRequests != 2 || !strings.HasPrefix(s.CutShortNote, "Cut short") || s.OptimumNote == "" {
		t.Errorf("summary unservedRequests %g, cutShortNote %q, optimumNote %q; want 2 and both notes", s.Rows[0].UnservedRequests, s.CutShortNote, s.OptimumNote)
	}
	if bound := s.Rows[len(s.Rows)-1]; bound.SettingSet != SetBound || bound.UnservedRequests != 0 || strings.Contains(string(data), `"unservedRequests":0`) {
		t.Errorf("bound row %+v; want no unservedRequests key", bound)
	}
}

// TestBinnedBacklogBilledPastTheCap: one request of 1,000,000 slot-seconds
// on one replica of 4 slots. The fluid pool serves 4 slot-seconds a
// second; the run stopped at the cap (103 s) and billed 103 replica-s. Now
// the ready pool serves the rest at its capacity: 1e6 ÷ 4 = 250,000. With
// no replica at all the backlog is never served, and is reported so.
func TestBinnedBacklogBilledPastTheCap(t *testing.T) {
	b := &Binned{Arrivals: []float64{1}, WorkS: []float64{1e6}}
	r := simulateBinned(testPool(4), b, &staticCtl{n: 1}, runOptions{initial: 1, sampleStepS: 60, maxOverrunS: 100})
	if r.ReplicaSeconds != 250000 || r.DurationS != 250000 || r.Unserved != 0 {
		t.Errorf("replica-seconds %g over %g s, unserved %g; want 250000, 250000, 0", r.ReplicaSeconds, r.DurationS, r.Unserved)
	}
	cfg := testPool(4)
	cfg.MinReplicas = 0
	r = simulateBinned(cfg, b, &staticCtl{n: 0}, runOptions{initial: 0, sampleStepS: 60, maxOverrunS: 100})
	if r.ReplicaSeconds != 0 || r.Unserved != 1 || r.SLOMet != 0 {
		t.Errorf("no replicas: replica-seconds %g, unserved %g, met %g; want 0, 1, 0", r.ReplicaSeconds, r.Unserved, r.SLOMet)
	}
}

// TestCutShortNeverMeetsTheSLO: a run that stops with requests never served
// does not meet the SLO, whatever its attainment, and its unserved requests
// count as missed in binned mode too, which judges a request when it
// arrives. Binned: ten requests of 1 s in second 0 on one replica of four
// slots, judged met at arrival (a 0.75 s fluid wait); the pool then goes to
// 0 replicas at the first decision (15 s) with 2 slot-seconds of backlog
// left, 2 requests: 8 met, not meeting. Before, 10 of 10 met and the run met
// the SLO. Per request: 1,000 short requests, then six of 10^5 s on one
// slot: 995 + 1 of 1,006 start in time (99.5 %, above the 99 % target),
// five never start; before, that run met the SLO at 0.17× the bound and
// headed the table.
func TestCutShortNeverMeetsTheSLO(t *testing.T) {
	cfg := testPool(4)
	cfg.MinReplicas = 0
	r := simulateBinned(cfg, &Binned{Arrivals: []float64{10}, WorkS: []float64{10}}, &staticCtl{n: 0}, runOptions{initial: 1, sampleStepS: 60, maxOverrunS: 100})
	if r.Unserved != 2 || r.SLOMet != 8 || r.MeetsSLO || r.WorstHourAttainment != 0.8 {
		t.Errorf("binned: unserved %g, met %g of %g, meets %v, worst hour %g; want 2, 8 of 10, false, 0.8", r.Unserved, r.SLOMet, r.Requests, r.MeetsSLO, r.WorstHourAttainment)
	}

	w := &Workload{}
	for i := range 1000 {
		w.ArrivalS, w.ServiceS = append(w.ArrivalS, float64(i)), append(w.ServiceS, 0.01)
	}
	for range 6 {
		w.ArrivalS, w.ServiceS = append(w.ArrivalS, 1000), append(w.ServiceS, 1e5)
	}
	pc := testPool(1)
	pc.MaxReplicas = 1
	res := simulateRequests(pc, w, &staticCtl{n: 1}, runOptions{initial: 1, sampleStepS: 60, maxOverrunS: defaultMaxOverrunS})
	if res.Unserved != 5 || res.Attainment() < pc.SLOTarget || res.MeetsSLO {
		t.Errorf("per request: unserved %g, attainment %g (target %g), meets %v; want 5, at or above the target, false", res.Unserved, res.Attainment(), pc.SLOTarget, res.MeetsSLO)
	}
}

// TestOptimumWithShortColdStart: a cold start under the SLO + 2 s gave the
// optimum's search no windows, and the optimum row, the "Optimum ÷ bound"
// header and summary.json's optimum row were left out without a word
// (--cold-start=3s, 1s, 0s). The search now runs on 1 s windows.
func TestOptimumWithShortColdStart(t *testing.T) {
	tr, err := DemoTrace()
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range []time.Duration{0, time.Second, 3 * time.Second} {
		cfg := DefaultPoolConfig()
		cfg.ColdStart = cs
		c, err := Compare(cfg, Workloads{Name: tr.Name, Requests: NewWorkload(tr, cfg.Service)}, CompareOptions{Families: []string{FamilyStatic}})
		if err != nil {
			t.Fatal(err)
		}
		o := c.Optimum
		if o.Policy != "optimum" || !o.MeetsSLO || o.ReplicaSeconds < c.Bound.ReplicaSeconds || c.OptimumNote() != "" {
			t.Errorf("cold start %v: optimum %q meets SLO %v at %g replica-s (bound %g), note %q; want a row meeting it, ≥ the bound, no note",
				cs, o.Policy, o.MeetsSLO, o.ReplicaSeconds, c.Bound.ReplicaSeconds, c.OptimumNote())
		}
		var tb bytes.Buffer
		if err := c.WriteTable(&tb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(tb.String(), "Optimum ÷ bound = ") || !strings.Contains(tb.String(), "| optimum | optimum | offline plan, L=1s,") {
			t.Errorf("cold start %v: table lacks the optimum:\n%s", cs, tb.String())
		}
		n := 0
		for _, r := range c.Summary().Rows {
			if r.SettingSet == SetOptimum {
				n++
			}
		}
		if n != 1 {
			t.Errorf("cold start %v: %d optimum rows in summary.json, want 1", cs, n)
		}
	}
}

// neverServed compares static on one replica of one slot with three
// requests at t = 0: the first (10^5 s) holds the slot past the 6 h overrun,
// so the other two are never served.
func neverServed(t *testing.T) *Comparison {
	t.Helper()
	w := &Workload{ArrivalS: []float64{0, 0, 0}, ServiceS: []float64{1e5, 1, 1}}
	cfg := testPool(1)
	cfg.MaxReplicas = 1
	c, err := Compare(cfg, Workloads{Name: "never served", Requests: w}, CompareOptions{Families: []string{FamilyStatic}, NoOptimum: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
