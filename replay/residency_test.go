package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestResidencyGDS: GreedyDual-Size evicts by cost ÷ size, not recency. Budget 10 GiB; a (1 GiB,
// 60 s load: H = 60) and b (8 GiB, 8 s load: H = 1) are loaded, then c (2 GiB, 10 s) is
// requested: LRU evicts a (least recently used), GDS evicts b (lowest H), so a's next request is
// a hit under GDS and a miss under LRU.
func TestResidencyGDS(t *testing.T) {
	tr := &Trace{Name: "gds", Models: []string{"a", "b", "c"}}
	for i, m := range []int32{0, 1, 2, 0} {
		tr.Requests = append(tr.Requests, Request{At: time.Duration(i*100) * time.Second, Model: m, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown})
	}
	sizes := []int64{1 << 30, 8 << 30, 2 << 30}
	loads := []time.Duration{60 * time.Second, 8 * time.Second, 10 * time.Second}
	cfg := DefaultResidencyConfig()
	for _, tt := range []struct {
		policy      string
		loads, hits int
		waitS       float64
	}{
		{ResidencyLRU, 4, 0, 60 + 8 + 10 + 60},
		{ResidencyGDS, 3, 1, 60 + 8 + 10},
	} {
		r := runCache(tr, cfg, sizes, loads, 10<<30, tt.policy, 60)
		if r.Loads != tt.loads || r.Hits != tt.hits || r.WaitS != tt.waitS {
			t.Errorf("%s: loads %d hits %d wait %g; want %d, %d, %g", tt.policy, r.Loads, r.Hits, r.WaitS, tt.loads, tt.hits, tt.waitS)
		}
	}
}

// TestResidencyStallSources: the load stall split by what each request waited on, and the
// refusals counted by cause, on hand-checked timelines.
func TestResidencyStallSources(t *testing.T) {
	req := func(at float64, m int32) Request {
		return Request{At: time.Duration(at * 1e9), Model: m, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown}
	}
	cfg := DefaultResidencyConfig()
	t.Run("lru: behind another load", func(t *testing.T) {
		// a (60 s) requested at 0, b (8 s) at 1: a loads 0–60, b waits 1–60 behind it and
		// loads 60–68. Stall: a 60 own; b 59 behind + 8 own.
		tr := &Trace{Name: "behind", Models: []string{"a", "b"}, Requests: []Request{req(0, 0), req(1, 1)}}
		r := runCache(tr, cfg, []int64{1 << 30, 1 << 30}, []time.Duration{60 * time.Second, 8 * time.Second}, 4<<30, ResidencyLRU, 60)
		want := StallSources{OwnLoadS: 68, BehindS: 59}
		if r.Stall != want || r.WaitS != 127 {
			t.Errorf("stall %+v, wait %g; want %+v, 127", r.Stall, r.WaitS, want)
		}
	})
	t.Run("inferscale: loop not woken", func(t *testing.T) {
		// Without the wake on a held request, a request at 1 s waits for the 5 s tick: 4 s idle,
		// then its 10 s load.
		c := cfg
		c.WakeOnHeld = false
		tr := &Trace{Name: "tick", Models: []string{"a"}, Requests: []Request{req(1, 0)}}
		r, err := runPlan(tr, c, []int64{1 << 30}, []time.Duration{10 * time.Second}, 4<<30, 60)
		if err != nil {
			t.Fatal(err)
		}
		want := StallSources{OwnLoadS: 10, IdleS: 4}
		if r.Stall != want || r.WaitS != 14 || r.Refusals != (RefusalCounts{}) {
			t.Errorf("stall %+v, wait %g, refusals %+v; want %+v, 14, none", r.Stall, r.WaitS, r.Refusals, want)
		}
	})
	t.Run("inferscale: young model holds the memory", func(t *testing.T) {
		// a and b (6 GiB, 10 s) on 10 GiB. a requested at 0 loads 0–10; b at 11 finds a within
		// its minimum residency (k × 10 s, until 20): refused at the wake (11) and the tick
		// (16), a evicted at the tick at 21, b loads after the 250 ms pause, 21.25–31.25.
		tr := &Trace{Name: "young", Models: []string{"a", "b"}, Requests: []Request{req(0, 0), req(11, 1)}}
		r, err := runPlan(tr, cfg, []int64{6 << 30, 6 << 30}, []time.Duration{10 * time.Second, 10 * time.Second}, 10<<30, 60)
		if err != nil {
			t.Fatal(err)
		}
		want := StallSources{OwnLoadS: 20, IdleS: 10.25}
		if math.Abs(r.Stall.OwnLoadS-want.OwnLoadS) > 1e-6 || math.Abs(r.Stall.IdleS-want.IdleS) > 1e-6 || math.Abs(r.Stall.BehindS) > 1e-6 ||
			r.Refusals != (RefusalCounts{Young: 2}) {
			t.Errorf("stall %+v, refusals %+v; want %+v, 2 young", r.Stall, r.Refusals, want)
		}
	})
	t.Run("inferscale: woken when the busy model goes idle", func(t *testing.T) {
		// a and b (6 GiB, 10 s) on 10 GiB. a requested at 0 loads 0–10 and executes 10–40;
		// b at 26 finds a busy: refused at the wake (26) and the ticks at 31 and 36. With
		// WakeOnIdle the end of a's request wakes the loop at 40, a is evicted, b loads after
		// the 250 ms pause, 40.25–50.25: b waits 14.25 s idle and 10 s own load; without it the
		// tick at 41 evicts, one second later.
		execA := req(0, 0)
		execA.ExecSeconds = 30
		tr := &Trace{Name: "idle", Models: []string{"a", "b"}, Requests: []Request{execA, req(26, 1)}}
		for _, c := range []struct {
			wake     bool
			idle     float64
			refusals RefusalCounts
		}{{true, 14.25, RefusalCounts{NoRoom: 3}}, {false, 15.25, RefusalCounts{NoRoom: 3}}} {
			cfg := cfg
			cfg.WakeOnIdle = c.wake
			r, err := runPlan(tr, cfg, []int64{6 << 30, 6 << 30}, []time.Duration{10 * time.Second, 10 * time.Second}, 10<<30, 60)
			if err != nil {
				t.Fatal(err)
			}
			want := StallSources{OwnLoadS: 20, IdleS: c.idle}
			if math.Abs(r.Stall.OwnLoadS-want.OwnLoadS) > 1e-6 || math.Abs(r.Stall.IdleS-want.IdleS) > 1e-6 || math.Abs(r.Stall.BehindS) > 1e-6 ||
				r.Refusals != c.refusals {
				t.Errorf("WakeOnIdle %v: stall %+v, refusals %+v; want %+v, %+v", c.wake, r.Stall, r.Refusals, want, c.refusals)
			}
		}
	})
}

// TestResidencySummaryRows: one row per budget and policy, with the budget of each run.
func TestResidencySummaryRows(t *testing.T) {
	tr := &Trace{Name: "rows"}
	for m := range 6 {
		tr.Models = append(tr.Models, modelName(m))
	}
	for i := range 600 {
		tr.Requests = append(tr.Requests, Request{At: time.Duration(i) * 10 * time.Second, Model: int32(i % 6), InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown})
	}
	rc, err := CompareResidency(tr, DefaultResidencyConfig())
	if err != nil {
		t.Fatal(err)
	}
	rows := ResidencySummary(rc)
	if len(rc.Budgets) != 2 || len(rows) != 2*len(ResidencyPolicies()) {
		t.Fatalf("budgets %v, %d rows; want 2 budgets and %d rows", rc.Budgets, len(rows), 2*len(ResidencyPolicies()))
	}
	for i, r := range rows {
		if want := ResidencyPolicies()[i%5]; r.Policy != want || r.BudgetBytes != rc.Budgets[i/5] {
			t.Errorf("row %d: %s at %d; want %s at %d", i, r.Policy, r.BudgetBytes, want, rc.Budgets[i/5])
		}
		if r.FailedRequests != 0 || r.HitRatio <= 0 || r.HitRatio > 1 {
			t.Errorf("row %d (%s): failed %d, hit ratio %g", i, r.Policy, r.FailedRequests, r.HitRatio)
		}
	}
	// summary.json's "residency" array carries the field names, each row all of them.
	data, err := json.Marshal(Summary{Residency: rows})
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Residency []map[string]json.RawMessage `json:"residency"`
	}
	if err := json.Unmarshal(data, &top); err != nil || len(top.Residency) != len(rows) {
		t.Fatalf("summary.json residency: %d rows (%v), want %d", len(top.Residency), err, len(rows))
	}
	want := []string{"budgetBytes", "bytesLoaded", "failedRequests", "hitRatio", "loadStallSeconds", "loads", "policy"}
	for i, r := range top.Residency {
		got := slices.Sorted(maps.Keys(r))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("summary.json residency[%d] keys (-want +got):\n%s", i, diff)
		}
		if p := string(r["policy"]); p != strconv.Quote(rows[i].Policy) {
			t.Errorf("residency[%d].policy = %s, want %q", i, p, rows[i].Policy)
		}
	}
}

// TestResidencySharedTraces replays the residency comparison on GenTD26 and the Azure
// Functions sample when INFERSCALE_TRACES names the shared traces folder (they are not in the
// repository) and logs the tables; it asserts what the policy guarantees — no request failed
// or dropped — and reports the targets without asserting them.
func TestResidencySharedTraces(t *testing.T) {
	dir := os.Getenv("INFERSCALE_TRACES")
	if dir == "" {
		t.Skip("INFERSCALE_TRACES not set")
	}
	gentd := filepath.Join(dir, "alibaba-gentd26-diffusion-multimodel")
	for _, tt := range []struct{ name, path, coldStart string }{
		{"gentd26", gentd, filepath.Join(gentd, "basemodel_update_latency_anon.csv")},
		{"azure-functions", filepath.Join(dir, "azure-functions-2019-invitro-sample"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) { replayShared(t, tt.path, tt.coldStart) })
	}
}

func replayShared(t *testing.T, path, coldStart string) {
	{
		p, err := ResolvePath(path)
		if err != nil {
			t.Fatal(err)
		}
		l, err := Load(p, "", DefaultPoolConfig().Seed)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultResidencyConfig()
		cfg.Seed = DefaultPoolConfig().Seed
		if coldStart != "" {
			f, err := os.Open(coldStart)
			if err != nil {
				t.Fatal(err)
			}
			cfg.LoadTimeSamples, err = ReadLoadTimes(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		rc, err := CompareResidency(l.Trace, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := rc.WriteTable(&b); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s)\n%s", l.Name, time.Since(start).Round(time.Millisecond), b.String())
		for _, budget := range rc.Budgets {
			in, _ := rc.Result(ResidencyInferscale, budget)
			lru, _ := rc.Result(ResidencyLRU, budget)
			bel, _ := rc.Result(ResidencyBelady, budget)
			if in.Unserved != 0 {
				t.Errorf("%s at %d: %d requests failed or dropped", l.Name, budget, in.Unserved)
			}
			for _, r := range rc.Results {
				if r.BudgetBytes != budget {
					continue
				}
				st := r.Stall
				if sum := st.OwnLoadS + st.BehindS + st.IdleS + st.UnservedS; math.Abs(sum-r.WaitS) > 1e-6*r.WaitS {
					t.Errorf("%s at %d: stall sources sum to %g s, stall %g s", r.Policy, budget, sum, r.WaitS)
				}
				t.Logf("%s at %.1f GiB: stall %.1f h = own load %.1f + behind other loads %.1f + loader idle %.1f + unserved %.1f; refusals %+v",
					r.Policy, float64(budget)/(1<<30), r.WaitS/3600, st.OwnLoadS/3600, st.BehindS/3600, st.IdleS/3600, st.UnservedS/3600, r.Refusals)
			}
			t.Logf("targets at %.1f GiB: stall ÷ LRU %.2f (≤ 0.7), ÷ Belady %.2f (≤ 1.3), hit %.4f vs LRU %.4f",
				float64(budget)/(1<<30), in.WaitS/lru.WaitS, in.WaitS/bel.WaitS,
				float64(in.Hits)/float64(in.Requests), float64(lru.Hits)/float64(lru.Requests))
		}
	}
}

// TestResidencyBusyModelsStay: a request executing keeps its model loaded under every policy.
// a and b (6 GiB) on 10 GiB; a (10 s load) is requested at 0 with 50 s of execution, so it is
// READY at 10 and busy until 60; b (8 s load) is requested at 20.
func TestResidencyBusyModelsStay(t *testing.T) {
	tr := &Trace{Name: "busy", Models: []string{"a", "b"}, Requests: []Request{
		{At: 0, Model: 0, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: 50},
		{At: 20 * time.Second, Model: 1, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: 1},
	}}
	sizes := []int64{6 << 30, 6 << 30}
	loads := []time.Duration{10 * time.Second, 8 * time.Second}
	cfg := DefaultResidencyConfig()
	for _, policy := range ResidencyPolicies()[1:] {
		t.Run(policy, func(t *testing.T) {
			// b's load waits, evicting nothing, until a finishes at 60: 40 s idle, then 60–68.
			r := runCache(tr, cfg, sizes, loads, 10<<30, policy, 60)
			want := StallSources{OwnLoadS: 10 + 8, IdleS: 40}
			if r.Stall != want || r.WaitS != 58 || r.Loads != 2 || r.Unserved != 0 {
				t.Errorf("stall %+v, wait %g, loads %d, unserved %d; want %+v, 58, 2, 0", r.Stall, r.WaitS, r.Loads, r.Unserved, want)
			}
			// Requests that take no time: b evicts a at once and loads 20–28.
			c := cfg
			c.IgnoreExecTime = true
			if r := runCache(tr, c, sizes, loads, 10<<30, policy, 60); r.WaitS != 18 {
				t.Errorf("IgnoreExecTime: wait %g; want 18", r.WaitS)
			}
		})
	}
	t.Run("inferscale", func(t *testing.T) {
		// b is held at its arrival (the wake, just after 20) and refused at every tick while a
		// executes (20, 25, …, 55); the tick just after 60 unloads a, b loads after the 250 ms
		// pause, 60.25–68.25: 40.25 s idle and 8 s own load; a's own load is 10 s.
		r, err := runPlan(tr, cfg, sizes, loads, 10<<30, 60)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.WaitS-58.25) > 1e-6 || math.Abs(r.Stall.IdleS-40.25) > 1e-6 || math.Abs(r.Stall.OwnLoadS-18) > 1e-6 ||
			r.Loads != 2 || r.Unserved != 0 || r.Refusals != (RefusalCounts{NoRoom: 8}) {
			t.Errorf("wait %g, stall %+v, loads %d, unserved %d, refusals %+v; want 58.25 (idle 40.25, own 18), 2, 0, 8 no room",
				r.WaitS, r.Stall, r.Loads, r.Unserved, r.Refusals)
		}
	})
}

// TestHeldSinceCapsAtHoldTimeout: the controller sees a request held at most the front's hold
// timeout, so the replay's WaitingSince and load-wait samples are capped the same way.
func TestHeldSinceCapsAtHoldTimeout(t *testing.T) {
	m := resModel{pending: []float64{10, 20}}
	for _, tt := range []struct{ t, want float64 }{{50, 10}, {70, 10}, {100, 40}, {1000, 940}} {
		if got := m.heldSince(tt.t, 60); got != tt.want {
			t.Errorf("heldSince(%g, 60) with pending from 10 s = %g; want %g", tt.t, got, tt.want)
		}
	}
}

// TestResidencyRefusesTooManyModels: a trace past MaxResidencyModels is
// refused before the pool comparison runs, naming the model count and the
// range (10,000 models did not finish in minutes: a plan step ranks every
// model waiting, about once per load); --residency=false replays the pool.
func TestResidencyRefusesTooManyModels(t *testing.T) {
	var b strings.Builder
	b.WriteString("timestamp,model\n")
	for i := range MaxResidencyModels + 1 {
		fmt.Fprintf(&b, "%d,m%d\n", i, i)
	}
	dir := t.TempDir()
	cfg := DefaultRunConfig()
	cfg.TracePath = writeFile(t, dir, "many.csv", []byte(b.String()))
	cfg.OutDir = filepath.Join(dir, "out")
	cfg.Policies, cfg.NoOptimum, cfg.Hindsight = []string{FamilyStatic}, true, false
	cfg.Stdout, cfg.Stderr = io.Discard, io.Discard
	err := Run(cfg)
	want := "many.csv: residency replay: trace too large: 4051 models; want 2 to 4050 (MaxResidencyModels, three times the Azure Functions sample's 1,350); pass --residency=false to compare the pools only, or --model to keep fewer models"
	if !errors.Is(err, ErrTooLarge) || err.Error() != want {
		t.Fatalf("Run = %v, want %q", err, want)
	}
	if _, err := os.Stat(cfg.OutDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--out exists after the refusal (stat: %v)", err)
	}
	cfg.Residency = false
	if err := Run(cfg); err != nil {
		t.Errorf("Run with residency off = %v, want nil", err)
	}
}
