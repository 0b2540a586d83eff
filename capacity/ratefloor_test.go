package capacity

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRateFloorValidation: --start-rate, --min-rate and --max-rate below RateFloor of
// --min-window-requests are refused, each naming its flag and the accepted range. 1e-300
// spun the send loop for ever, 1e-9 wrapped the window negative (the record said 1 s), and
// 1e-3 ran 14 h windows: each was accepted as > 0.
func TestRateFloorValidation(t *testing.T) {
	if got, want := RateFloor(50), 50/3600.0; got != want {
		t.Errorf("RateFloor(50) = %v, want %v", got, want)
	}
	if RateFloor(1) != MinRate || RateFloor(0) != MinRate {
		t.Errorf("RateFloor(1) = %v, RateFloor(0) = %v, want MinRate %v", RateFloor(1), RateFloor(0), MinRate)
	}
	tests := []struct {
		name              string
		start, min, max   float64
		minWindowRequests int
		want              []string // substrings, each in the error
		notWant           []string
	}{
		{name: "1e-300 everywhere", start: 1e-300, min: 1e-300, max: 1e-300, minWindowRequests: 50, want: []string{
			"startRPS (--start-rate) is 1e-300, want [0.01389, 1e+06]",
			"maxRPS (--max-rate) is 1e-300, want [0.01389, 1e+06]",
			"minRPS (--min-rate) is 1e-300, want [0.01389, 1e+06]",
			"--min-window-requests 50 ÷ 1h0m0s",
		}},
		// The default --min-rate 0.1 is not blamed for a bad start.
		{name: "start 1e-9", start: 1e-9, min: 0.1, max: 1e5, minWindowRequests: 50,
			want: []string{"startRPS (--start-rate) is 1e-09, want [0.01389, 1e+06]"}, notWant: []string{"--min-rate", "--max-rate"}},
		{name: "start 1e-3, days", start: 1e-3, min: 1e-3, max: 1e5, minWindowRequests: 50,
			want: []string{"startRPS (--start-rate) is 0.001, want [0.01389, 1e+06]", "minRPS (--min-rate) is 0.001, want [0.01389, maxRPS 100000]"}},
		{name: "min 1e-7", start: 10, min: 1e-7, max: 1e5, minWindowRequests: 50,
			want: []string{"minRPS (--min-rate) is 1e-07, want [0.01389, startRPS 10]"}, notWant: []string{"--start-rate", "--max-rate"}},
		{name: "probed, max and min 1e-9", start: 0, min: 1e-9, max: 1e-9, minWindowRequests: 50,
			want: []string{"maxRPS (--max-rate) is 1e-09, want [0.01389, 1e+06]", "minRPS (--min-rate) is 1e-09, want [0.01389, 1e+06]"}, notWant: []string{"--start-rate"}},
		// A bad --max-rate is not held against the default --min-rate.
		{name: "probed, max 1e-9", start: 0, min: 0.1, max: 1e-9, minWindowRequests: 50,
			want: []string{"maxRPS (--max-rate) is 1e-09, want [0.01389, 1e+06]"}, notWant: []string{"--min-rate", "--start-rate"}},
		// The floor follows --min-window-requests: 1000 arrivals an hour is 0.2778 req/s.
		{name: "more requests a window", start: 10, min: 0.1, max: 1e5, minWindowRequests: 1000,
			want: []string{"minRPS (--min-rate) is 0.1, want [0.2778, startRPS 10]", "--min-window-requests 1000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Target, cfg.Model, cfg.Profile, cfg.NVML = "localhost:8001", "m", "1g.10gb", "off"
			cfg.Measure.MinWindowRequests = tt.minWindowRequests
			cfg.Search.StartRPS, cfg.Search.MinRPS, cfg.Search.MaxRPS = tt.start, tt.min, tt.max
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v is not ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q blames %s, not given", err, w)
				}
			}
		})
	}
	// SearchConfig.Validate alone holds the rates to MinRate, one arrival an hour.
	err := SearchConfig{StartRPS: 1e-9, StepFactor: 2, Precision: 0.05, MaxRPS: 10, MinRPS: 1e-9}.Validate()
	for _, w := range []string{"startRPS (--start-rate) is 1e-09, want [0.0002778, 1e+06]", "minRPS (--min-rate) is 1e-09, want [0.0002778, maxRPS 10] (one arrival ÷ 1h0m0s"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("SearchConfig.Validate: %v does not say %q", err, w)
		}
	}
	// At the floor itself every rate is accepted, and its window is at most MaxWindow.
	cfg := DefaultConfig()
	cfg.Target, cfg.Model, cfg.Profile, cfg.NVML = "localhost:8001", "m", "1g.10gb", "off"
	for _, n := range []int{1, 7, 50, 333, MaxWindowRequests} {
		f := RateFloor(n)
		cfg.Measure.MinWindowRequests = n
		cfg.Search.StartRPS, cfg.Search.MinRPS, cfg.Search.MaxRPS = f, f, f
		if err := cfg.Validate(); err != nil {
			t.Errorf("min window requests %d, rates at the floor %v: %v", n, f, err)
		}
		if w := cfg.Measure.WindowFor(f); w > MaxWindow || w <= 0 {
			t.Errorf("min window requests %d: WindowFor(floor %v) = %v, want (0, %v]", n, f, w, MaxWindow)
		}
	}
}

// TestDurationsSaturate: WindowFor and interArrival never return a negative or wrapped
// duration, however slow the rate. time.Duration(float64) past int64 wrapped to negative on
// amd64: the window of 50 requests at 1e-9 req/s (5e10 s) read as negative, so the record
// said a 1 s window, and a gap at 1e-300 req/s read as negative, so the send loop never
// advanced.
func TestDurationsSaturate(t *testing.T) {
	mc := DefaultMeasureConfig()
	// 5e-324 is the smallest float64 above 0; 1e-9 and 1e-20 give windows past int64 ns.
	for _, rate := range []float64{5e-324, 1e-300, 1e-20, 1e-9, 5.42101086242752217e-9} {
		if w := mc.WindowFor(rate); w != time.Duration(math.MaxInt64) {
			t.Errorf("WindowFor(%v) = %v, want the largest Duration (saturated)", rate, w)
		}
	}
	prev := time.Duration(math.MaxInt64)
	for _, rate := range []float64{1e-8, MinRate, 1e-3, RateFloor(50), 1, 1e3, MaxRate, math.MaxFloat64} {
		w := mc.WindowFor(rate)
		if w < mc.Window || w > prev {
			t.Errorf("WindowFor(%v) = %v, want in [Window %v, %v] (not below the last, slower rate's)", rate, w, mc.Window, prev)
		}
		prev = w
	}
	if w, want := mc.WindowFor(1e-3), 50000*time.Second; w != want {
		t.Errorf("WindowFor(1e-3) = %v, want %v", w, want)
	}

	g := &Generator{cfg: mc, rng: rand.New(rand.NewPCG(1, 2))}
	for _, rate := range []float64{5e-324, 1e-300, 1e-20} {
		for range 1000 {
			if d := g.interArrival(rate); d < 0 || d > 0 && d != time.Duration(math.MaxInt64) {
				t.Fatalf("interArrival(%v) = %v, want the largest Duration (saturated) or 0", rate, d)
			}
		}
	}
	for _, rate := range []float64{MinRate, 1, MaxRate} {
		for range 1000 {
			if d := g.interArrival(rate); d < 0 {
				t.Fatalf("interArrival(%v) = %v, negative", rate, d)
			}
		}
	}
	// A trace's shape: a gap of 0 stays 0, a long one saturates.
	g.gaps, g.pos = []float64{0, 2, 1e300}, 0
	for _, want := range []time.Duration{0, time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)} {
		if d := g.interArrival(1e-300); d != want {
			t.Errorf("trace gap at 1e-300 req/s: interArrival = %v, want %v", d, want)
		}
	}
	g.pos = 0
	for _, want := range []time.Duration{0, 2 * time.Second, time.Duration(math.MaxInt64)} {
		if d := g.interArrival(1); d != want {
			t.Errorf("trace gap at 1 req/s: interArrival = %v, want %v", d, want)
		}
	}
}

// TestMeasureRefusesRateBelowFloor: Measure, on its own, refuses a rate below
// RateFloor(MinWindowRequests) at once, naming the floor, instead of measuring windows past
// MaxWindow (or, at 1e-300, spinning for ever).
func TestMeasureRefusesRateBelowFloor(t *testing.T) {
	g := &Generator{cfg: DefaultMeasureConfig(), clock: RealClock{}, rng: rand.New(rand.NewPCG(1, 2)), inFlight: map[uint64]time.Time{}}
	for _, rate := range []float64{1e-300, 1e-9, 1e-3, 0.0138} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := g.Measure(ctx, rate)
		cancel()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "want >= 0.01389") {
			t.Errorf("Measure(%v) = %v, want ErrInvalidConfig naming the floor 0.01389", rate, err)
		}
	}
}

// TestRateErrorsGiveTheRange: a rate out of range is refused with the range it must be in,
// floor and ceiling: "startRPS (--start-rate) is +Inf, want > 0" named a bound +Inf meets, and
// a start past MaxRate was blamed on the default --max-rate with an empty range ("want
// [startRPS 2e+06, 1e+06]"). SearchConfig.Validate alone has no probed start, so 0 is out of
// range there, and its floor is MinRate.
func TestRateErrorsGiveTheRange(t *testing.T) {
	tests := []struct {
		name            string
		start, min, max float64
		want            string // the whole error
	}{
		{"start +Inf", math.Inf(1), 0.1, 1e5, "capacity: invalid config: startRPS (--start-rate) is +Inf, want [0.0002778, 1e+06]"},
		{"start NaN", math.NaN(), 0.1, 1e5, "capacity: invalid config: startRPS (--start-rate) is NaN, want [0.0002778, 1e+06]"},
		{"start 0", 0, 0.1, 1e5, "capacity: invalid config: startRPS (--start-rate) is 0, want [0.0002778, 1e+06]"},
		{"start past MaxRate", 2e6, 0.1, 1e5, "capacity: invalid config: startRPS (--start-rate) is 2e+06, want [0.0002778, 1e+06]"},
		{"start and max +Inf", math.Inf(1), 0.1, math.Inf(1), "capacity: invalid config: startRPS (--start-rate) is +Inf, want [0.0002778, 1e+06]\n" +
			"capacity: invalid config: maxRPS (--max-rate) is +Inf, want [0.0002778, 1e+06]"},
		{"min +Inf", 10, math.Inf(1), 1e5, "capacity: invalid config: minRPS (--min-rate) is +Inf, want [0.0002778, startRPS 10]"},
		{"min -1", 10, -1, 1e5, "capacity: invalid config: minRPS (--min-rate) is -1, want [0.0002778, startRPS 10]"},
		{"max below start", 10, 0.1, 5, "capacity: invalid config: maxRPS (--max-rate) is 5, want [startRPS 10, 1e+06]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := SearchConfig{StartRPS: tt.start, StepFactor: 2, Precision: 0.05, MaxRPS: tt.max, MinRPS: tt.min}.Validate()
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate = %v\nwant %s (ErrInvalidConfig)", err, tt.want)
			}
		})
	}
}

// TestFloorTextAccepted: the lower bound a rate error prints is a rate the check accepts, and
// the least such in four significant digits (3 ÷ 1 h = 0.000833…: "%.4g" printed 0.0008333,
// which is refused).
func TestFloorTextAccepted(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 11, 50, 99, 1000, 12345} {
		text := floorText(n)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || rateBelowFloor(v, n) {
			t.Errorf("--min-window-requests %d: floor printed %s, refused by the check", n, text)
		}
		if lower, _ := strconv.ParseFloat(strconv.FormatFloat(v-math.Pow(10, math.Floor(math.Log10(v))-3), 'g', 4, 64), 64); !rateBelowFloor(lower, n) {
			t.Errorf("--min-window-requests %d: floor printed %s, but %v one digit below is accepted too", n, text, lower)
		}
	}
	if got := floorText(3); got != "0.0008334" {
		t.Errorf("floorText(3) = %s, want 0.0008334", got)
	}
}
