package replay

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// retryRows indexes a RetryComparison's rows by clients ("none",
// "layered", "budget") and policy family ("inferscale-cap" for the capped
// row).
func retryRows(t *testing.T, rs []RetryResult) map[string]map[string]RetryResult {
	t.Helper()
	out := map[string]map[string]RetryResult{}
	for _, r := range rs {
		c := "layered"
		switch {
		case strings.HasPrefix(r.Clients, "1 layers × 1 attempts"):
			c = "none"
		case strings.Contains(r.Clients, "retry budget"):
			c = "budget"
		}
		p := r.Policy
		if strings.Contains(r.Setting, "uniqueRateQuery") {
			p += "-cap"
		}
		if out[c] == nil {
			out[c] = map[string]RetryResult{}
		}
		if _, dup := out[c][p]; dup {
			t.Fatalf("two rows for %s / %s", c, p)
		}
		out[c][p] = r
	}
	return out
}

func logRetryTable(t *testing.T, rs []RetryResult) {
	t.Helper()
	var tab bytes.Buffer
	if err := WriteRetryTable(&tab, rs); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", tab.String())
}

// TestRetryScenario replays the default burst (4 unique req/s, ×5 for
// 3 minutes from minute 10) with clients that do not retry, with 3 × 3
// layered retries and with a shared 20 % retry budget, under inferscale
// without and with the retry cap (uniqueRateQuery, retryBudget 1.2) and
// under hpa-gpu, keda-queue, knative and static at their published
// settings (replay/settings.yaml).
func TestRetryScenario(t *testing.T) {
	w, err := DefaultBurstScenario().Workload()
	if err != nil {
		t.Fatal(err)
	}
	set, err := DefaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := RetryComparison(DefaultPoolConfig(), w, DefaultRetryClient(), set.Published)
	if err != nil {
		t.Fatal(err)
	}
	logRetryTable(t, rs)
	if len(rs) != 17 {
		t.Fatalf("%d rows, want 17 (5 families without retries; 6 policies × layered and budget)", len(rs))
	}
	m := retryRows(t, rs)
	for p, r := range m["none"] {
		if r.Amplification != 1 || r.Sends != r.Unique || len(r.StormMinutes) != 0 {
			t.Errorf("no retries, %s: amplification %v (%d sends of %d), storm minutes %v; want 1, none", p, r.Amplification, r.Sends, r.Unique, r.StormMinutes)
		}
	}
	lay, unc, capd := m["layered"], m["layered"][FamilyInferscale], m["layered"][FamilyInferscale+"-cap"]
	if capd.Setting == unc.Setting || !strings.Contains(capd.Setting, "retryBudget 1.2") {
		t.Errorf("capped row setting %q, want the retryBudget named", capd.Setting)
	}

	// (a) The published baselines lag: under layered retries each shows a
	// run amplification above 1.5, the alert level. Knative's storm is at
	// the burst itself (minutes 10–11); hpa-gpu's starts at t = 0 (one
	// replica for 8 Erlangs) and lasts until minute 8; keda-queue's comes
	// back after each scale-down (minutes 7–9, 15–16, 22–23). inferscale,
	// capped or not, storms only in the first minutes (0–3) and catches the
	// burst: no storm minute from 10 on.
	for _, f := range []string{FamilyHPAGPU, FamilyKEDAQueue, FamilyKnative} {
		if r := lay[f]; r.Amplification <= StormAmplification {
			t.Errorf("layered, %s: amplification %.2f, want > 1.5 (a policy that lags)", f, r.Amplification)
		}
	}
	if !slices.Contains(lay[FamilyKnative].StormMinutes, 10) {
		t.Errorf("layered, knative: storm minutes %v, want minute 10 (the burst's first)", lay[FamilyKnative].StormMinutes)
	}
	for _, r := range []RetryResult{unc, capd} {
		if len(r.StormMinutes) == 0 || r.StormMinutes[len(r.StormMinutes)-1] >= 10 {
			t.Errorf("layered, %s: storm minutes %v, want some, all before the burst (minute 10)", r.Setting, r.StormMinutes)
		}
	}

	// (b) inferscale with the cap against the lagging baselines: against
	// hpa-gpu (4.33, 57.5 GPU-h, 79.9 %) and keda-queue (1.76, 66.3 GPU-h,
	// 86.5 %) amplification is lower (1.62), GPU-hours lower (13.2) and
	// unique attainment not lower (92.5 %). Against knative (1.51, 35.9
	// GPU-h, 90.2 %) GPU-hours are lower and attainment higher, but
	// amplification is NOT lower: knative's panic mode orders replicas by
	// the hundred (948 at the peak), which keeps its amplification down
	// at 2.7 times inferscale's GPU-hours.
	for _, f := range []string{FamilyHPAGPU, FamilyKEDAQueue} {
		b := lay[f]
		if capd.Amplification >= b.Amplification || capd.GPUHours >= b.GPUHours || capd.Verified < b.Verified {
			t.Errorf("layered, capped inferscale vs %s: amplification %.2f vs %.2f, %.2f vs %.2f GPU-h, %d vs %d verified; want lower, lower, not lower",
				f, capd.Amplification, b.Amplification, capd.GPUHours, b.GPUHours, capd.Verified, b.Verified)
		}
	}
	if kn := lay[FamilyKnative]; !(capd.Amplification > kn.Amplification && capd.GPUHours < kn.GPUHours && capd.Verified > kn.Verified) {
		t.Errorf("layered, capped inferscale vs knative: amplification %.2f vs %.2f, %.2f vs %.2f GPU-h, %d vs %d verified; want higher, lower, higher (as measured)",
			capd.Amplification, kn.Amplification, capd.GPUHours, kn.GPUHours, capd.Verified, kn.Verified)
	}

	// (c) The cap against inferscale without it. The cap scales the arrival
	// rate and its forecast λ_H to unique × 1.2; queue and running count as
	// measured. In a storm the pool's own lag causes, that rate term is what
	// orders replicas ahead of the backlog, so capping it slows the first
	// scale-up (one replica at t = 0): the storm lasts longer and the cap
	// COSTS — 12.13 against 11.42 GPU-hours, 92.29 % against 93.75 % of
	// unique requests answered in time, amplification 1.64 against 1.48
	// (seed 1, at 221e582).
	// What it buys is a pool that does not size on retries it did not cause
	// (TestRetryRejections), not a cheaper answer to its own lag.
	if !(capd.GPUHours > unc.GPUHours && capd.Verified < unc.Verified && capd.Amplification > unc.Amplification) {
		t.Errorf("layered, capped vs uncapped inferscale: %.2f vs %.2f GPU-h, %d vs %d verified, amplification %.2f vs %.2f; want the cap to cost (as measured)",
			capd.GPUHours, unc.GPUHours, capd.Verified, unc.Verified, capd.Amplification, unc.Amplification)
	}
	if unc.GPUHours <= m["none"][FamilyInferscale].GPUHours {
		t.Errorf("layered retries: %.2f GPU-hours, want more than without retries (%.2f)", unc.GPUHours, m["none"][FamilyInferscale].GPUHours)
	}

	// A shared retry budget keeps every policy's amplification below 1.2.
	// Its one-minute peak (1.26) passes retryBudget 1.2 at the burst, but
	// the capped rate term does not decide the count there: capped =
	// uncapped (8.78 GPU-hours, 74.48 %, at 221e582).
	for p, r := range m["budget"] {
		if r.Amplification >= 1.2 {
			t.Errorf("retry budget, %s: amplification %.2f, want < 1.2", p, r.Amplification)
		}
	}
	bu, bc := m["budget"][FamilyInferscale], m["budget"][FamilyInferscale+"-cap"]
	if math.Abs(bc.GPUHours-bu.GPUHours) > 0.01 || bc.Verified != bu.Verified {
		t.Errorf("retry budget + cap: %.2f GPU-hours, %d verified; want the uncapped %.2f and %d", bc.GPUHours, bc.Verified, bu.GPUHours, bu.Verified)
	}
	for _, r := range rs {
		if !(r.CostPer1kVerified > 0) || r.Verified > r.Unique || r.WastedGPUHours > r.GPUHours || r.Rejected != 0 {
			t.Errorf("%s / %s: cost per 1k verified %v, verified %d of %d, wasted %.2f of %.2f GPU-hours, %d rejected",
				r.Clients, r.Setting, r.CostPer1kVerified, r.Verified, r.Unique, r.WastedGPUHours, r.GPUHours, r.Rejected)
		}
	}
}

// rejectScenario is the scenario of retries the pool's lag does not cause:
// a steady 4 unique req/s (no burst) on a pool that starts with the 3
// replicas 8 Erlangs need (ρ = 0.67), the engine rejecting half the
// attempts at once.
func rejectScenario(t *testing.T) (PoolConfig, *Workload, RetryClient) {
	t.Helper()
	sc := DefaultBurstScenario()
	sc.Factor = 1
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultPoolConfig()
	cfg.InitialReplicas = 3
	cl := DefaultRetryClient()
	cl.RejectShare = 0.5
	return cfg, w, cl
}

// TestRetryRejections: the scenario the cap is for. Half the attempts are
// rejected at once at no GPU cost and retried, so the engine's request rate
// reads twice the unique rate while the work is unchanged. Without the cap
// inferscale's rate term buys replicas for the rejected copies; with it the
// rate counts at most unique × 1.2, and the pool is cheaper at the same
// unique attainment. The cap does not buy everything back: the dispersion
// read from the send rate (a request's sends come in clumps) is not capped,
// and the capped pool still costs more than the same clients without
// rejections.
func TestRetryRejections(t *testing.T) {
	cfg, w, cl := rejectScenario(t)
	set, err := DefaultSettings()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := RetryComparison(cfg, w, cl, set.Published)
	if err != nil {
		t.Fatal(err)
	}
	logRetryTable(t, rs)
	m := retryRows(t, rs)
	for p, r := range m["none"] {
		// Without retries a rejected request is lost: about half answered.
		if share := float64(r.Rejected) / float64(r.Unique); r.Sends != r.Unique || math.Abs(share-0.5) > 0.03 || r.VerifiedPercent > 52 {
			t.Errorf("no retries, %s: %d sends of %d, %.3f rejected, %.2f %% verified; want no retry, about half rejected and lost", p, r.Sends, r.Unique, share, r.VerifiedPercent)
		}
	}
	unc, capd := m["layered"][FamilyInferscale], m["layered"][FamilyInferscale+"-cap"]
	// 1 ÷ (1 − 0.5) = 2 sends per request from the rejections alone.
	if unc.Amplification < 1.9 || unc.Amplification > 2.2 {
		t.Errorf("layered, uncapped: amplification %.2f, want about 2 (1 ÷ (1 − 0.5))", unc.Amplification)
	}
	if !(capd.GPUHours < unc.GPUHours-1 && capd.Verified >= unc.Verified) {
		t.Errorf("layered, capped vs uncapped: %.2f vs %.2f GPU-h, %d vs %d verified; want over 1 GPU-hour saved at no lower attainment",
			capd.GPUHours, unc.GPUHours, capd.Verified, unc.Verified)
	}
	bu, bc := m["budget"][FamilyInferscale], m["budget"][FamilyInferscale+"-cap"]
	if !(bc.GPUHours < bu.GPUHours && bc.Verified >= bu.Verified) {
		t.Errorf("budget, capped vs uncapped: %.2f vs %.2f GPU-h, %d vs %d verified; want fewer GPU-hours at no lower attainment",
			bc.GPUHours, bu.GPUHours, bc.Verified, bu.Verified)
	}
	clean := cl
	clean.RejectShare = 0
	ref, err := ReplayRetries(cfg, w, clean, InferscalePolicy(0, 0, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if capd.GPUHours <= ref.GPUHours {
		t.Errorf("capped with rejections %.2f GPU-h, without rejections %.2f: want the cap not to buy everything back (as measured)", capd.GPUHours, ref.GPUHours)
	}
}

// oneSlotNoRetries is the hand-checked timelines' pool and clients: one slot per replica, clients
// that do not retry, the default 15 s timeout.
func oneSlotNoRetries() (PoolConfig, RetryClient) {
	cfg := DefaultPoolConfig()
	cfg.Slots = 1
	cl := DefaultRetryClient()
	cl.Layers, cl.Attempts = 1, 1
	return cfg, cl
}

// TestRetryAbortAbandoned: an engine that aborts abandoned attempts frees
// their slots at the timeout. One replica with one slot, clients that do
// not retry, timeout 15 s: A (0 s, 20 s of service, longer than the
// timeout) and B (6 s, 2 s). Served to the end, A holds the slot until 20,
// B starts then and ends at 22, past its timeout at 21: nothing verified,
// 22 s of abandoned work. Dropped only while queued, the same (B started).
// Aborted, A frees the slot at 15, B runs 15–17: B verified, 15 s wasted.
func TestRetryAbortAbandoned(t *testing.T) {
	cfg, cl := oneSlotNoRetries()
	w := &Workload{Name: "abort", ArrivalS: []float64{0, 6}, ServiceS: []float64{20, 2}}
	for _, tt := range []struct {
		name          string
		cancel, abort bool
		verified      int
		wastedS       float64
	}{
		{"served to the end", false, false, 0, 22},
		{"queued attempts dropped", true, false, 0, 22},
		{"aborted", false, true, 1, 15},
	} {
		c := cl
		c.CancelQueued, c.AbortAbandoned = tt.cancel, tt.abort
		r, err := ReplayRetries(cfg, w, c, StaticPolicy(1))
		if err != nil {
			t.Fatal(err)
		}
		if r.Verified != tt.verified || math.Abs(r.WastedGPUHours*3600-tt.wastedS) > 1e-6 {
			t.Errorf("%s: %d verified, %.3f s of abandoned work; want %d and %g s", tt.name, r.Verified, r.WastedGPUHours*3600, tt.verified, tt.wastedS)
		}
	}
}

// TestRetryAttemptSize: every send of a replay stays in retrySim.att until it ends, up to
// MaxRequests (50 M) of them, so each byte of rAttempt is up to 50 MB of heap. From e81062a until
// this test it was 24 bytes (an abort's replica and start time, now in retrySim.inService), and
// `replay retry --base-rate=200 --duration=17m --burst-start=5m` peaked at 1.09 GB RSS against
// 421 MB at 8 bytes.
func TestRetryAttemptSize(t *testing.T) {
	if got := unsafe.Sizeof(rAttempt{}); got != 8 {
		t.Errorf("rAttempt is %d bytes, want 8 (int32 request + three bools, padded)", got)
	}
}

// scaleAt holds two replicas, then one from 25 s.
type scaleAt struct{}

func (scaleAt) Interval() time.Duration { return time.Second }
func (scaleAt) Desired(s Signals) int {
	if s.Now >= 25*time.Second {
		return 1
	}
	return 2
}

// TestRetryAbortFreesItsOwnSlot: an aborted attempt frees the slot of the replica that served
// it, and its abandoned work runs from its own start. Two replicas of one slot, clients that do
// not retry, timeout 15 s: A (0 s) and B (5 s), 100 s of service each, start at once on the two
// replicas and are aborted at 15 s and 20 s: 15 s of abandoned work each (30 s; counted from
// t = 0 for B it would be 35 s). At 25 s the policy asks for one replica: both are idle, the
// first drains and goes at once, so the run bills 2 × 25 s + 1 × (5 s + RetryTail − 25 s).
// Freeing the wrong replica's slot would leave one replica's count at −1 and the other's at 1:
// the drained one would never be idle and bill to the end.
func TestRetryAbortFreesItsOwnSlot(t *testing.T) {
	cfg, cl := oneSlotNoRetries()
	cfg.InitialReplicas = 2
	cl.AbortAbandoned = true
	w := &Workload{Name: "abort-two", ArrivalS: []float64{0, 5}, ServiceS: []float64{100, 100}}
	r, err := ReplayRetries(cfg, w, cl, Policy{Name: "scale-at-25s", New: func() Controller { return scaleAt{} }})
	if err != nil {
		t.Fatal(err)
	}
	wantWasteS := 30.0
	wantBilledS := 2*25 + (5 + RetryTail.Seconds() - 25)
	if got := r.WastedGPUHours * 3600; math.Abs(got-wantWasteS) > 1e-6 {
		t.Errorf("%.3f s of abandoned work, want %g s", got, wantWasteS)
	}
	if got := r.GPUHours * 3600; math.Abs(got-wantBilledS) > 1e-6 {
		t.Errorf("%.3f billed replica-seconds, want %g", got, wantBilledS)
	}
	if r.Verified != 0 {
		t.Errorf("%d verified, want 0 (both aborted)", r.Verified)
	}
}

// queueProbe holds one replica and records the queue each decision sees.
type queueProbe struct{ seen map[int]float64 }

func (q *queueProbe) Interval() time.Duration { return time.Second }
func (q *queueProbe) Desired(s Signals) int {
	q.seen[int(s.Now/time.Second)] = s.Queue
	return 1
}

// TestRetryDroppedAttemptsLeaveTheQueue: an engine that drops abandoned queued attempts no longer
// counts them as waiting. One slot; A (0 s) takes 20 s; B (1 s) waits behind it and is abandoned
// at 16 s. Served to the end, B still waits at 17 s; dropped, the queue reads 0 from 16 s on.
func TestRetryDroppedAttemptsLeaveTheQueue(t *testing.T) {
	cfg, cl := oneSlotNoRetries()
	w := &Workload{Name: "drop", ArrivalS: []float64{0, 1}, ServiceS: []float64{20, 2}}
	for _, tt := range []struct {
		name       string
		cancel     bool
		at10, at17 float64
	}{
		{"served to the end", false, 1, 1},
		{"dropped", true, 1, 0},
	} {
		c := cl
		c.CancelQueued = tt.cancel
		probe := &queueProbe{seen: map[int]float64{}}
		if _, err := ReplayRetries(cfg, w, c, Policy{Name: "probe", New: func() Controller { return probe }}); err != nil {
			t.Fatal(err)
		}
		if probe.seen[10] != tt.at10 || probe.seen[17] != tt.at17 {
			t.Errorf("%s: queue %v at 10 s and %v at 17 s; want %v and %v", tt.name, probe.seen[10], probe.seen[17], tt.at10, tt.at17)
		}
	}
}

// TestRetryClientSends checks the layered-retry arithmetic, the backoff and
// the rejection draw.
func TestRetryClientSends(t *testing.T) {
	c := DefaultRetryClient()
	if got := c.maxSends(); got != 27 {
		t.Errorf("3 layers × 3 attempts: %d sends, want 27", got)
	}
	for retry, want := range map[int]float64{1: 0.025, 2: 0.05, 4: 0.2, 5: 0.25, 9: 0.25} {
		if got := c.backoff(retry); got < want-1e-12 || got > want+1e-12 {
			t.Errorf("backoff(%d) = %v s, want %v s", retry, got, want)
		}
	}
	for _, p := range []float64{0, 0.1, 0.5, 0.9} {
		c.RejectShare = p
		n := 0
		for r := range int32(20000) {
			for a := 1; a <= 5; a++ {
				if c.rejects(r, a) {
					n++
				}
			}
		}
		if got := float64(n) / 100000; math.Abs(got-p) > 0.005 {
			t.Errorf("reject share %g: %.4f of 100000 sends rejected", p, got)
		}
		// Each send is drawn independently: a request's consecutive sends are both rejected
		// at the product of the shares.
		// So is the same send of neighbouring requests, and send n+1 of one request against
		// send n of the next (a draw of r+n alone would make those two always agree).
		both, across, diagonal := 0, 0, 0
		for r := range int32(20000) {
			for a := 1; a <= 4; a++ {
				if c.rejects(r, a) && c.rejects(r, a+1) {
					both++
				}
				if c.rejects(r, a) && c.rejects(r+1, a) {
					across++
				}
				if c.rejects(r, a+1) && c.rejects(r+1, a) {
					diagonal++
				}
			}
		}
		for what, n := range map[string]int{"consecutive sends": both, "neighbouring requests": across, "send n+1 and the next request's send n": diagonal} {
			if got := float64(n) / 80000; math.Abs(got-p*p) > 0.005 {
				t.Errorf("reject share %g: %.4f of pairs (%s) both rejected, want %.4f", p, got, what, p*p)
			}
		}
	}
	// One uniform draw per (request, send) against the share: a send rejected at 0.1 is
	// rejected at every larger share, so every policy and every share sees the same sends.
	lo, hi := c, c
	lo.RejectShare, hi.RejectShare = 0.1, 0.5
	for r := range int32(2000) {
		for a := 1; a <= 5; a++ {
			if lo.rejects(r, a) && !hi.rejects(r, a) {
				t.Fatalf("request %d send %d: rejected at share 0.1 but not at 0.5", r, a)
			}
		}
	}
}

func TestMinuteRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{{nil, "0"}, {[]int{4}, "1 (4)"}, {[]int{0, 1, 2, 10, 11}, "5 (0–2, 10–11)"}, {[]int{2, 6, 9, 13, 14, 15}, "6 (2, 6, 9, 13–15)"}} {
		if got := minuteRanges(tc.in); got != tc.want {
			t.Errorf("minuteRanges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRetryClientValidate(t *testing.T) {
	bad := DefaultRetryClient()
	bad.Timeout, bad.Layers, bad.Attempts, bad.BudgetPercent, bad.Deadline, bad.RejectShare = 0, 6, 0, 101, -time.Second, 0.96
	err := bad.Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, s := range []string{"retry timeout 0s: want (0s, 1h]", "retry layers 6: want 1..5", "retry attempts 0: want 1..10", "retry budget 101%", "retry deadline -1s", "retry reject share 0.96: want [0, 0.95]"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	bad = DefaultRetryClient()
	bad.RejectShare = math.NaN()
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "retry reject share NaN") {
		t.Errorf("reject share NaN: error %v", err)
	}
	if err := DefaultRetryClient().Validate(); err != nil {
		t.Error(err)
	}
	w, _ := DefaultBurstScenario().Workload()
	set, _ := DefaultSettings()
	delete(set.Published, FamilyKnative)
	if _, err := RetryComparison(DefaultPoolConfig(), w, DefaultRetryClient(), set.Published); err == nil || !strings.Contains(err.Error(), "no knative") {
		t.Errorf("settings without knative: error %v", err)
	}
}

// TestBurstScenarioValidate: each bad field is its own error with its
// range (the error printed the whole struct), and the expected request
// count is at most MaxRequests (base 10,000 × factor 100 for a day grew past
// 10 GB; 1,000 h requests never ended).
func TestBurstScenarioValidate(t *testing.T) {
	with := func(f func(*BurstScenario)) BurstScenario {
		b := DefaultBurstScenario()
		f(&b)
		return b
	}
	tests := []struct {
		name     string
		give     BurstScenario
		want     string
		tooLarge bool
	}{
		{"service 1000 h", with(func(b *BurstScenario) { b.Service = 1000 * time.Hour }),
			"burst scenario service 1000h0m0s: want a mean service time in (0s, 1h0m0s]", false},
		{"service 0", with(func(b *BurstScenario) { b.Service = 0 }),
			"burst scenario service 0s: want a mean service time in (0s, 1h0m0s]", false},
		{"a day of 10,000 × 100 req/s", with(func(b *BurstScenario) { b.Base, b.Factor, b.Duration = 1e4, 100, 24*time.Hour }),
			"trace too large: burst scenario expects 1.042e+09 requests (base × (duration − length) + base × factor × length); want at most MaxRequests (50000000)", true},
		{"one request past the cap", with(func(b *BurstScenario) {
			b.Base, b.Factor, b.Start, b.Length, b.Duration = 1e4, 1, 0, 0, 5000*time.Second+100*time.Microsecond
		}),
			"trace too large: burst scenario expects 5e+07 requests (base × (duration − length) + base × factor × length); want at most MaxRequests (50000000)", true},
		{"every field bad", BurstScenario{Base: math.NaN(), Factor: 0.5, Start: -time.Second, Length: -time.Second, Duration: 0, Service: -time.Second},
			"burst scenario base rate NaN req/s: want (0, 10000]\nburst scenario factor 0.5: want [1, 100]\nburst scenario duration 0s: want (0s, 24h]\n" +
				"burst scenario start -1s: want ≥ 0s\nburst scenario length -1s: want ≥ 0s\nburst scenario service -1s: want a mean service time in (0s, 1h0m0s]", false},
		{"start past the duration", with(func(b *BurstScenario) { b.Start = 30 * time.Minute }),
			"burst scenario start 30m0s: want [0s, duration (25m0s)]", false},
		{"burst past the duration", with(func(b *BurstScenario) { b.Length = 16 * time.Minute }),
			"burst scenario length 16m0s: want [0s, duration − start (15m0s)]", false},
		{"base past 10,000", with(func(b *BurstScenario) { b.Base = 10001 }),
			"burst scenario base rate 10001 req/s: want (0, 10000]", false},
		{"a day past 24 h", with(func(b *BurstScenario) { b.Duration = 25 * time.Hour }),
			"burst scenario duration 25h0m0s: want (0s, 24h]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.give.Workload()
			if err == nil || err.Error() != tt.want || errors.Is(err, ErrTooLarge) != tt.tooLarge {
				t.Errorf("Workload() = %v (ErrTooLarge: %v), want %q (ErrTooLarge: %v)", err, errors.Is(err, ErrTooLarge), tt.want, tt.tooLarge)
			}
		})
	}
	// At the cap exactly: 10,000 req/s for 5,000 s is 5e7 expected requests.
	atCap := BurstScenario{Base: 1e4, Factor: 1, Duration: 5000 * time.Second, Service: time.Hour}
	if err := atCap.Validate(); err != nil || atCap.ExpectedRequests() != MaxRequests {
		t.Errorf("at the cap: %v, %g expected requests; want no error, %d", err, atCap.ExpectedRequests(), MaxRequests)
	}
	// The default: 4 × (1,500 − 180) + 4 × 5 × 180 = 8,880 expected (8,975 drawn).
	if got := DefaultBurstScenario().ExpectedRequests(); got != 8880 {
		t.Errorf("default scenario: %g expected requests, want 8880", got)
	}
}

// TestValidateRetriesSendBound: a scenario whose replays may send more than MaxRequests attempts
// (expected unique requests × Attempts^Layers) is refused before any request is drawn, naming
// the flags and the figure: at the defaults --base-rate=10000 ran 2 min 25 s to 5.6 GB and
// --base-rate=1000 1 min 37 s to 5.4 GB of attempts before the in-run guard refused them (a new
// user's trial, /usr/bin/time). The largest base rate the
// defaults allow is 834 req/s (834 × 2,220 × 27 = 49,989,960 sends); 835 is refused.
func TestValidateRetriesSendBound(t *testing.T) {
	with := func(base float64, f func(*RetryClient)) (BurstScenario, RetryClient) {
		b, cl := DefaultBurstScenario(), DefaultRetryClient()
		b.Base = base
		if f != nil {
			f(&cl)
		}
		return b, cl
	}
	tests := []struct {
		name     string
		base     float64
		client   func(*RetryClient)
		want     string
		tooLarge bool
	}{
		{"base 10,000", 1e4, nil, "trace too large: --base-rate 10000 × (--duration 25m0s − --burst-length 3m0s) + --base-rate × --burst-factor 5 × --burst-length expects 2.22e+07 unique requests, " +
			"each sent up to 27 times (--attempts 3 ^ --layers 3): up to 5.994e+08 sends in one replay; want at most MaxRequests (50000000) " +
			"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)", true},
		{"base 1,000", 1000, nil, "trace too large: --base-rate 1000 × (--duration 25m0s − --burst-length 3m0s) + --base-rate × --burst-factor 5 × --burst-length expects 2.22e+06 unique requests, " +
			"each sent up to 27 times (--attempts 3 ^ --layers 3): up to 5.994e+07 sends in one replay; want at most MaxRequests (50000000) " +
			"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)", true},
		{"base 835, one past the largest", 835, nil, "trace too large: --base-rate 835 × (--duration 25m0s − --burst-length 3m0s) + --base-rate × --burst-factor 5 × --burst-length expects 1.854e+06 unique requests, " +
			"each sent up to 27 times (--attempts 3 ^ --layers 3): up to 5.005e+07 sends in one replay; want at most MaxRequests (50000000) " +
			"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)", true},
		{"base 834, the largest", 834, nil, "", false},
		// A shared budget sends no more than Attempts^Layers: the same bound.
		{"base 835 with a budget", 835, func(c *RetryClient) { *c = c.WithBudget() }, "trace too large: --base-rate 835 × (--duration 25m0s − --burst-length 3m0s) + --base-rate × --burst-factor 5 × --burst-length expects 1.854e+06 unique requests, " +
			"each sent up to 27 times (--attempts 3 ^ --layers 3): up to 5.005e+07 sends in one replay; want at most MaxRequests (50000000) " +
			"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)", true},
		{"base 1,000 without retries", 1000, func(c *RetryClient) { c.Layers, c.Attempts = 1, 1 }, "", false},
		{"base 10,000 with 2 × 2", 1e4, func(c *RetryClient) { c.Layers, c.Attempts = 2, 2 }, "trace too large: --base-rate 10000 × (--duration 25m0s − --burst-length 3m0s) + --base-rate × --burst-factor 5 × --burst-length expects 2.22e+07 unique requests, " +
			"each sent up to 4 times (--attempts 2 ^ --layers 2): up to 8.88e+07 sends in one replay; want at most MaxRequests (50000000) " +
			"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)", true},
		// A bad field is reported alone: the bound needs a valid scenario and client.
		{"bad layers", 1000, func(c *RetryClient) { c.Layers = 9 }, "retry layers 9: want 1..5", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, cl := with(tt.base, tt.client)
			err := b.ValidateRetries(cl)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want || errors.Is(err, ErrTooLarge) != tt.tooLarge {
				t.Errorf("ValidateRetries = %q (ErrTooLarge: %v)\nwant %q (ErrTooLarge: %v)", got, errors.Is(err, ErrTooLarge), tt.want, tt.tooLarge)
			}
		})
	}
	// docs/replay.md's large example, base 200 req/s for 17 minutes: 348,000 expected unique
	// requests × 27 = 9.396 M sends, accepted.
	b := DefaultBurstScenario()
	b.Base, b.Duration = 200, 17*time.Minute
	if err := b.ValidateRetries(DefaultRetryClient()); err != nil || b.ExpectedRequests() != 348000 {
		t.Errorf("base 200 for 17 minutes: %v, %g expected; want no error, 348000", err, b.ExpectedRequests())
	}
}

// TestRetryEventBound: a replay stops with ErrRetryEvents past its bound
// on request events, and the default scenario's replays stay within
// retryEventBound (unique × (1 + 3 × 27) under 3 × 3 layered retries).
func TestRetryEventBound(t *testing.T) {
	w, err := DefaultBurstScenario().Workload()
	if err != nil {
		t.Fatal(err)
	}
	cl := DefaultRetryClient()
	if got := retryEventBound(len(w.ArrivalS), cl); got != 8975*82 {
		t.Errorf("bound %d, want 8975 × 82 = %d", got, 8975*82)
	}
	cfg, pol := DefaultPoolConfig(), InferscalePolicy(0, 0, DefaultPoolConfig())
	_, err = replayRetries(cfg, w, cl, pol, retryLimits{events: 100, sends: MaxRequests})
	if want := "retry replay: event bound passed: 101 request events processed, past the bound 100 (unique × (1 + 3 × sends per request))"; err == nil || err.Error() != want || !errors.Is(err, ErrRetryEvents) {
		t.Errorf("bound 100: error %v, want %q", err, want)
	}
	// Past the sends bound (MaxRequests in ReplayRetries): the 1,001st send.
	_, err = replayRetries(cfg, w, cl, pol, retryLimits{events: retryEventBound(len(w.ArrivalS), cl), sends: 1000})
	if want := "trace too large: retry replay: inferscale under 3 layers × 3 attempts, timeout 15s would send more than 1000 attempts (MaxRequests) by 1m27s; want fewer unique requests or fewer sends per request"; err == nil || err.Error() != want || !errors.Is(err, ErrTooLarge) {
		t.Errorf("sends bound 1000: error %v, want %q", err, want)
	}
	r, err := ReplayRetries(cfg, w, cl, pol)
	if err != nil {
		t.Fatal(err)
	}
	// Every unique request arrives once; every send but the first of each
	// follows a back-off; the rest are timeouts and ends of service.
	if r.Events < r.Unique+(r.Sends-r.Unique) || r.Events > retryEventBound(r.Unique, cl) {
		t.Errorf("%d events for %d unique requests and %d sends; want in [unique + retries, %d]", r.Events, r.Unique, r.Sends, retryEventBound(r.Unique, cl))
	}
}

// TestRetryTableCostWithoutVerified: a cost per 1,000 verified results when
// none was verified printed "$+Inf".
func TestRetryTableCostWithoutVerified(t *testing.T) {
	var b strings.Builder
	if err := WriteRetryTable(&b, []RetryResult{{Clients: "c", Policy: "p", Setting: "s", CostPer1kVerified: math.Inf(1)}, {Clients: "c", Policy: "p", Setting: "s", CostPer1kVerified: 1.5}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 0.00 % | ∞ | 0 |", "| 0.00 % | $1.500 | 0 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "Inf") {
		t.Errorf("table prints Inf:\n%s", b.String())
	}
}
