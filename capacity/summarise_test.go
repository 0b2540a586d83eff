package capacity

import (
	"strings"
	"testing"
	"time"
)

// TestQuantileNearestRank: the smallest value with at least q of the values at or below it.
// Of 1..10: q 0.5 → rank ⌈5⌉ = 5; 0.9 → ⌈9⌉ = 9; 0.91 → ⌈9.1⌉ = 10; 0 → the first; 1 → the last.
func TestQuantileNearestRank(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0.5: 5, 0.9: 9, 0.91: 10, 0: 1, 1: 10, 0.05: 1, 0.11: 2} {
		if got := Quantile(sorted, q); got != want {
			t.Errorf("Quantile(1..10, %v) = %v, want %v", q, got, want)
		}
	}
	if got := Quantile(nil, 0.99); got != 0 {
		t.Errorf("Quantile(none) = %v, want 0", got)
	}
}

// counted builds a level of a warm-up window and three counted ones, each with n successes of
// 0.1 s over 1 s, misses of them over the SLO latency, sent arrivals and errs failed requests
// (completed = n + errs).
func counted(n, misses, sent, errs [3]int) Level {
	l := Level{Windows: []Window{{Sent: 1000, Completed: 1, MeanLatency: 9}}} // warm-up: never counted
	for i := range 3 {
		w := Window{Sent: sent[i], Completed: n[i] + errs[i], Errors: errs[i], SLOMisses: misses[i], MeanLatency: 0.1, seconds: 1}
		for range n[i] {
			w.latencies = append(w.latencies, 0.1)
		}
		l.Windows = append(l.Windows, w)
	}
	return l
}

// TestSummariseVerdictsAtTheirEdges: a level's verdicts over its last three windows, with an
// SLO quantile of 0.75, an error ceiling of 0.25 and a stability of 0.25, all exact in binary,
// so each ratio can sit exactly on its limit. Met at the limit, missed one request past it.
func TestSummariseVerdictsAtTheirEdges(t *testing.T) {
	cfg := DefaultMeasureConfig()
	cfg.SLO.Quantile, cfg.SLO.MaxErrorRate, cfg.Stability = 0.75, 0.25, 0.25
	g := &Generator{cfg: cfg}
	for _, tt := range []struct {
		name                    string
		level                   Level
		meets, keepsUp          bool
		throughput, successRate float64
	}{
		// 120 successes in 3 s: 40 req/s, all served.
		{"clean", counted([3]int{40, 40, 40}, [3]int{}, [3]int{40, 40, 40}, [3]int{}), true, true, 40, 1},
		// 30 of 120 over the latency limit: exactly 1 − 0.75 of them.
		{"misses at the quantile", counted([3]int{40, 40, 40}, [3]int{10, 10, 10}, [3]int{40, 40, 40}, [3]int{}), true, true, 40, 1},
		{"one miss past it", counted([3]int{40, 40, 40}, [3]int{10, 10, 11}, [3]int{40, 40, 40}, [3]int{}), false, true, 40, 1},
		// 30 errors of 120 completed: exactly the 0.25 ceiling; success rate 90/120.
		{"errors at the ceiling", counted([3]int{30, 30, 30}, [3]int{}, [3]int{40, 40, 40}, [3]int{10, 10, 10}), true, true, 30, 0.75},
		{"one error past it", counted([3]int{30, 30, 29}, [3]int{}, [3]int{40, 40, 40}, [3]int{10, 10, 11}), false, true, 89.0 / 3, 89.0 / 120},
		// 90 completed of 120 sent: exactly (1 − 0.25) of the arrivals.
		{"keeps up at the edge", counted([3]int{30, 30, 30}, [3]int{}, [3]int{40, 40, 40}, [3]int{}), true, true, 30, 1},
		{"one completion short", counted([3]int{30, 30, 29}, [3]int{}, [3]int{40, 40, 40}, [3]int{}), true, false, 89.0 / 3, 1},
	} {
		l := tt.level
		g.summarise(&l)
		if l.MeetsSLO != tt.meets || l.KeepsUp != tt.keepsUp || l.ThroughputRPS != tt.throughput || l.SuccessRate != tt.successRate {
			t.Errorf("%s: meets %v, keeps up %v, %v req/s, success %v; want %v, %v, %v, %v", tt.name,
				l.MeetsSLO, l.KeepsUp, l.ThroughputRPS, l.SuccessRate, tt.meets, tt.keepsUp, tt.throughput, tt.successRate)
		}
	}
}

// TestSummariseLateCountsTheLastWindowOnly: requests still outstanding past the latency limit
// count as misses, from the last window only (the earlier ones' late requests have completed by
// then and are counted there). 120 successes, 20 misses, 10 late at the end: 30 of 130 ≤ 32.5.
// Eleven more late in the last window (41 of 141 > 35.25) fail it; a hundred in a middle
// window do not count.
func TestSummariseLateCountsTheLastWindowOnly(t *testing.T) {
	cfg := DefaultMeasureConfig()
	cfg.SLO.Quantile, cfg.Stability = 0.75, 0.25
	g := &Generator{cfg: cfg}
	for _, tt := range []struct {
		name      string
		late      [3]int
		wantMeets bool
	}{
		{"10 late at the end", [3]int{0, 0, 10}, true},
		{"21 late at the end", [3]int{0, 0, 21}, false},
		{"100 late mid-level", [3]int{0, 100, 10}, true},
	} {
		l := counted([3]int{40, 40, 40}, [3]int{10, 10, 0}, [3]int{40, 40, 40}, [3]int{})
		for i, n := range tt.late {
			l.Windows[1+i].Late = n
		}
		g.summarise(&l)
		if l.MeetsSLO != tt.wantMeets {
			t.Errorf("%s: meets %v, want %v", tt.name, l.MeetsSLO, tt.wantMeets)
		}
	}
}

// TestSummariseGrowing: the last three windows' mean latency rising window after window, by
// more than Stability (0.25) in all, is a growing backlog. Needs a warm-up window before them.
func TestSummariseGrowing(t *testing.T) {
	cfg := DefaultMeasureConfig()
	cfg.Stability = 0.25
	g := &Generator{cfg: cfg}
	for _, tt := range []struct {
		name    string
		means   []float64 // every window's mean latency, the warm-up first
		growing bool
	}{
		{"rising past 1.25×", []float64{5, 1, 1.1, 1.26}, true},
		{"rising to exactly 1.25×", []float64{5, 1, 1.1, 1.25}, false},
		{"flat then up", []float64{5, 1, 1, 1.5}, false},
		{"up then flat", []float64{5, 1, 1.5, 1.5}, false},
		{"falling", []float64{5, 1.5, 1.2, 1}, false},
		{"no warm-up before the three", []float64{1, 1.1, 1.5}, false},
	} {
		var l Level
		for _, m := range tt.means {
			l.Windows = append(l.Windows, Window{Sent: 10, Completed: 10, MeanLatency: m, latencies: []float64{m}, seconds: 1})
		}
		g.summarise(&l)
		if l.Growing != tt.growing {
			t.Errorf("%s: growing %v, want %v", tt.name, l.Growing, tt.growing)
		}
	}
}

// TestWindowMeetsSLOAtItsEdges: one window judged alone, quantile 0.75 and error ceiling 0.25.
func TestWindowMeetsSLOAtItsEdges(t *testing.T) {
	cfg := DefaultMeasureConfig()
	cfg.SLO.Quantile, cfg.SLO.MaxErrorRate = 0.75, 0.25
	g := &Generator{cfg: cfg}
	w := func(n, misses, late, errs int) Window {
		return Window{Completed: n + errs, Errors: errs, SLOMisses: misses, Late: late, latencies: make([]float64, n)}
	}
	for _, tt := range []struct {
		name string
		w    Window
		want bool
	}{
		{"25 of 100 missed", w(100, 25, 0, 0), true},
		{"26 of 100 missed", w(100, 26, 0, 0), false},
		{"20 missed, 5 late of 105", w(100, 20, 5, 0), true},  // 25 ≤ 26.25
		{"20 missed, 7 late of 107", w(100, 20, 7, 0), false}, // 27 > 26.75
		{"25 errors of 100", w(75, 0, 0, 25), true},
		{"26 errors of 100", w(74, 0, 0, 26), false},
		{"nothing at all", w(0, 0, 0, 0), false},
		{"only errors", w(0, 0, 0, 1), false},
	} {
		if got := g.windowMeetsSLO(tt.w); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStableAtItsEdge: perf_analyzer's rule, max ÷ min within 1 + Stability (0.25), for the
// served fraction (completions ÷ arrivals) and the mean latency alike; a window that completed
// nothing is no evidence.
func TestStableAtItsEdge(t *testing.T) {
	cfg := DefaultMeasureConfig()
	cfg.Stability = 0.25
	g := &Generator{cfg: cfg}
	w := func(sent, completed int, mean float64) Window {
		return Window{Sent: sent, Completed: completed, MeanLatency: mean}
	}
	for _, tt := range []struct {
		name string
		ws   []Window
		want bool
	}{
		{"served 0.8 to 1.0: exactly 1.25×", []Window{w(100, 80, 1), w(100, 100, 1), w(100, 90, 1)}, true},
		{"served 0.79 to 1.0", []Window{w(100, 79, 1), w(100, 100, 1), w(100, 90, 1)}, false},
		{"latency 0.8 s to 1 s: exactly 1.25×", []Window{w(100, 100, 0.8), w(100, 100, 1), w(100, 100, 0.9)}, true},
		{"latency 0.78 s to 1 s", []Window{w(100, 100, 0.78), w(100, 100, 1), w(100, 100, 0.9)}, false},
		{"a window that completed nothing", []Window{w(100, 0, 0), w(100, 100, 1), w(100, 100, 1)}, false},
		{"a window with no arrivals", []Window{w(0, 0, 0), w(100, 100, 1), w(100, 100, 1)}, false},
	} {
		if got := g.stable(tt.ws); got != tt.want {
			t.Errorf("%s: stable %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSummariseClientBound: arrivals the in-flight cap dropped fail the level when the cap is at
// least what the rate needs at the SLO latency (Little's law: 100 req/s × 2 s = 200 in flight),
// and make it client-bound below that; sends started late make it client-bound past 1 % of all
// sends (10 of 1,000 is not past it, 11 is).
func TestSummariseClientBound(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		maxInFlight, dropped, lagged int
		meets, keepsUp, clientBound  bool
		reasonPrefix                 string
	}{
		{"dropped at a cap of 200", 200, 1, 0, false, false, false, ""},
		{"dropped at a cap of 199", 199, 1, 0, true, true, true, "1 of 1000 arrivals not sent: the generator's in-flight cap (199) was reached, below the 200 in flight"},
		{"10 of 1,000 sends late", 4096, 0, 10, true, true, false, ""},
		{"11 of 1,000 sends late", 4096, 0, 11, true, true, true, "11 of 1000 sends started more than 200ms late"},
	} {
		cfg := DefaultMeasureConfig()
		cfg.SLO.Latency, cfg.MaxInFlight = 2*time.Second, tt.maxInFlight
		g := &Generator{cfg: cfg}
		l := counted([3]int{250, 250, 250}, [3]int{}, [3]int{250, 250, 250}, [3]int{})
		l.OfferedRPS = 100
		l.Windows[0].Sent = 250
		l.Windows[2].Dropped, l.Windows[2].LaggedSends = tt.dropped, tt.lagged
		g.summarise(&l)
		if l.MeetsSLO != tt.meets || l.KeepsUp != tt.keepsUp || l.ClientBound != tt.clientBound || !strings.HasPrefix(l.ClientBoundReason, tt.reasonPrefix) ||
			(tt.reasonPrefix == "") != (l.ClientBoundReason == "") {
			t.Errorf("%s: meets %v, keeps up %v, client-bound %v %q; want %v, %v, %v %q…", tt.name, l.MeetsSLO, l.KeepsUp, l.ClientBound,
				l.ClientBoundReason, tt.meets, tt.keepsUp, tt.clientBound, tt.reasonPrefix)
		}
	}
}
