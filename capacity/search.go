package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// ErrClientBound is returned by Search when a level was client-bound before any level passed:
// the generator could not offer the rate, so no capacity is claimed.
var ErrClientBound = errors.New("client-bound: the load generator could not offer the rate")

// ErrRejected is returned by Search when every request completed in a window of a level
// failed with a code that says the request itself is refused (Level.Rejected, RejectedCode):
// the same request fails at every rate, so the search stops there.
var ErrRejected = errors.New("every request rejected")

// errStop ends a search early without an error (a client-bound level after a passing one).
var errStop = errors.New("stop")

// SearchConfig is how Search walks the rates.
type SearchConfig struct {
	// StartRPS is the first rate tried. Range: [MinRate, MaxRate] (Config.Validate:
	// [RateFloor(MinWindowRequests), MaxRate]).
	StartRPS float64
	// StepFactor multiplies the rate while levels pass. Range: [MinStepFactor, 100].
	StepFactor float64
	// Precision ends the bisection once (fail − pass) ÷ pass ≤ Precision. Range:
	// [MinPrecision, 1).
	Precision float64
	// MaxRPS caps the step-up; reaching it ends the search with μ from the highest passing
	// rate (a limit the record notes). Range: [StartRPS, MaxRate]; [MinRate, MaxRate] when
	// StartRPS is probed.
	MaxRPS float64
	// MinRPS ends a step-down (from a failing StartRPS) with μ = 0. Range: [MinRate,
	// StartRPS] (Config.Validate: from RateFloor(MinWindowRequests)); [MinRate, MaxRPS] when
	// StartRPS is probed.
	MinRPS float64
}

// DefaultSearchConfig starts at 10 req/s, doubles, bisects to 5 %, and stays within
// [0.1, 100 000] req/s.
func DefaultSearchConfig() SearchConfig {
	return SearchConfig{StartRPS: 10, StepFactor: 2, Precision: 0.05, MaxRPS: 100000, MinRPS: 0.1}
}

// MaxRate bounds MaxRPS (and so StartRPS): the generator walks every scheduled arrival, sent
// or dropped at its in-flight cap, so --start-rate=1e9 spent minutes on a level it could never
// offer (one loopback core sends about 10^5 requests a second; 10^6 leaves ten times that).
const MaxRate = 1e6

// RateFloor is the lowest rate a level is measured at when each window must hold
// minWindowRequests arrivals (--min-window-requests): minWindowRequests ÷ MaxWindow, 50 ÷ 1 h
// ≈ 0.01389 req/s at the default. Config.Validate holds --start-rate, --min-rate and
// --max-rate to it, and Generator.Measure refuses a rate below it.
//
// Derivation: a window lasts WindowFor(rate) = max(Window, minWindowRequests ÷ rate). Window
// is at most MaxWindow (1 h) by its own range, and minWindowRequests ÷ rate ≤ MaxWindow
// exactly when rate ≥ minWindowRequests ÷ MaxWindow. At or above the floor every window is so
// at most MaxWindow, the bound --window has, and a level, at most MaxWindows (≤ 1000) windows
// and then a drain of at most RequestTimeout (≤ 1 h), at most MaxWindows + 1 hours, as the
// ranges of --window, --max-windows and --request-timeout say. Below it the window grows as
// 1 ÷ rate: 50 ÷ 1e-3 req/s was a 14 h window and 140 h a level at the default 10 windows,
// 50 ÷ 1e-9 a window of 1,585 years, which wrapped time.Duration to a negative length (the
// record said 1 s), and a 1e-300 req/s gap wrapped too, spinning the send loop for ever.
// A lower rate needs a lower --min-window-requests (1 allows one arrival an hour, MinRate).
func RateFloor(minWindowRequests int) float64 {
	return float64(max(minWindowRequests, 1)) / MaxWindow.Seconds()
}

// MinRate is RateFloor(1), one arrival an hour: the floor SearchConfig.Validate holds
// StartRPS, MinRPS and MaxRPS to on its own, not knowing MinWindowRequests (Config.Validate,
// which does, holds them to RateFloor of it).
const MinRate = float64(time.Second) / float64(MaxWindow)

// rateBelowFloor reports whether a window at rate, stretched to hold minWindowRequests
// arrivals, would be longer than MaxWindow: rate < RateFloor(minWindowRequests), computed as
// WindowFor computes the window so that a rate at the floor never gives a window past
// MaxWindow by rounding. A NaN is not below (it is refused as not > 0).
func rateBelowFloor(rate float64, minWindowRequests int) bool {
	return float64(max(minWindowRequests, 1))/rate*float64(time.Second) > float64(MaxWindow)
}

// floorText is RateFloor(minWindowRequests) in four significant digits, rounded up so that the
// rate it prints is accepted ("%.4g" printed 0.0008333 for 3 ÷ 1 h, a rate the check refuses).
func floorText(minWindowRequests int) string {
	floor := RateFloor(minWindowRequests)
	text := strconv.FormatFloat(floor, 'g', 4, 64)
	for v, _ := strconv.ParseFloat(text, 64); rateBelowFloor(v, minWindowRequests); v, _ = strconv.ParseFloat(text, 64) {
		scale := math.Pow(10, math.Floor(math.Log10(v))-3) // one unit in the fourth digit
		text = strconv.FormatFloat(v+scale, 'g', 4, 64)
	}
	return text
}

// MinPrecision is the finest Precision accepted: 0.1 %, already finer than a level's own
// noise (a window of 50 Poisson arrivals varies by 14 %). 1e-300 never ended: bisection
// reaches adjacent floats, where (fail − pass) ÷ pass stays near 1e-16, one measured level
// after another.
const MinPrecision = 1e-3

// Validate returns every violation, each naming the field (and its flag) and range.
// Rates are held to [MinRate, MaxRate] (RateFloor(1)); Config.Validate holds them to
// [RateFloor(MinWindowRequests), MaxRate] and lets StartRPS be 0, to be probed.
func (c SearchConfig) Validate() error { return c.validate(false, 1) }

// validate is Validate; probeAllowed says a StartRPS of 0 is to be probed (Config.Validate):
// MinRPS and MaxRPS are then checked against each other, not against a start rate the user
// never gave. Rates are held to [RateFloor(minWindowRequests), MaxRate]; each error gives
// that range with its numbers (e.g. "startRPS (--start-rate) is +Inf, want [0.01389, 1e+06]"),
// not a bound such as "> 0" that the value may meet.
func (c SearchConfig) validate(probeAllowed bool, minWindowRequests int) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	// rateRange is the accepted range of a rate whose upper bound is upper.
	rateRange := func(upper string) string { return "[" + floorText(minWindowRequests) + ", " + upper + "]" }
	maxRate := fmt.Sprintf("%g", MaxRate)
	// low says a rate that is otherwise in range is below the floor, with the range and why.
	low := func(name, flag string, v float64, upper string) bool {
		if !rateBelowFloor(v, minWindowRequests) {
			return false
		}
		why := fmt.Sprintf("one arrival ÷ %v: a slower rate stretches a window past %v to hold one arrival", MaxWindow, MaxWindow)
		if n := max(minWindowRequests, 1); n > 1 {
			why = fmt.Sprintf("--min-window-requests %d ÷ %v: a slower rate stretches a window past %v to hold %d arrivals; a lower --min-window-requests allows slower rates", n, MaxWindow, MaxWindow, n)
		}
		bad("%s (%s) is %v, want %s (%s)", name, flag, v, rateRange(upper), why)
		return true
	}
	probed := probeAllowed && c.StartRPS == 0
	if !probed && !(c.StartRPS > 0 && c.StartRPS <= MaxRate) { // NaN, ±Inf, ≤ 0, past MaxRate
		probe := ""
		if probeAllowed {
			probe = ", or 0 to probe it"
		}
		bad("startRPS (--start-rate) is %v, want %s%s", c.StartRPS, rateRange(maxRate), probe)
		// MinRPS and MaxRPS are then checked against each other: "--min-rate 0.1, want
		// (0, startRPS NaN]" blamed flags nobody gave, and a start past MaxRate was blamed on
		// the default --max-rate ("want [startRPS 2e+06, 1e+06]", an empty range).
		probed = true
	} else if !probed && low("startRPS", "--start-rate", c.StartRPS, maxRate) {
		probed = true // the same: --min-rate 0.1 is not to blame for a start of 1e-9
	}
	// At least MinStepFactor: a factor of 1 + 1e-16 left lo × factor == lo and stepped for ever,
	// and 1.0001 took 180,000 levels from the rate floor to MaxRPS; at 1.01 it is at most
	// ln(10⁶ ÷ 0.0139) ÷ ln 1.01 ≈ 1,820 levels each way.
	if !(c.StepFactor >= MinStepFactor) || !finite(c.StepFactor) || c.StepFactor > 100 {
		bad("stepFactor (--step-factor) is %v, want [%v, 100]", c.StepFactor, MinStepFactor)
	}
	if !(c.Precision >= MinPrecision && c.Precision < 1) {
		bad("precision (--precision) is %v, want [%g, 1)", c.Precision, MinPrecision)
	}
	switch {
	case probed:
		maxOK := c.MaxRPS > 0 && c.MaxRPS <= MaxRate
		if !maxOK {
			bad("maxRPS (--max-rate) is %v, want %s", c.MaxRPS, rateRange(maxRate))
		} else {
			maxOK = !low("maxRPS", "--max-rate", c.MaxRPS, maxRate)
		}
		// A bad --max-rate is not held against --min-rate (the default 0.1 was blamed for
		// exceeding a --max-rate of 1e-9): --min-rate is then checked against MaxRate.
		upper, upperName := c.MaxRPS, fmt.Sprintf("maxRPS %v", c.MaxRPS)
		if !maxOK {
			upper, upperName = MaxRate, maxRate
		}
		if !(c.MinRPS > 0 && c.MinRPS <= upper) {
			bad("minRPS (--min-rate) is %v, want %s", c.MinRPS, rateRange(upperName))
		} else {
			low("minRPS", "--min-rate", c.MinRPS, upperName)
		}
	default:
		// StartRPS is in [floor, MaxRate] here.
		if !(c.MaxRPS >= c.StartRPS && c.MaxRPS <= MaxRate) {
			bad("maxRPS (--max-rate) is %v, want [startRPS %v, %g]", c.MaxRPS, c.StartRPS, MaxRate)
		}
		if !(c.MinRPS > 0 && c.MinRPS <= c.StartRPS) {
			bad("minRPS (--min-rate) is %v, want %s", c.MinRPS, rateRange(fmt.Sprintf("startRPS %v", c.StartRPS)))
		} else {
			low("minRPS", "--min-rate", c.MinRPS, fmt.Sprintf("startRPS %v", c.StartRPS))
		}
	}
	return errors.Join(errs...)
}

// Result is the outcome of a search.
type Result struct {
	// MuRPS is μ, req/s at the SLO: the served rate of the highest passing level, capped at
	// its offered rate — min(Best.OfferedRPS, Best.ThroughputRPS), MuFromLevel — so never
	// above what one replica completed there; 0 when none passed.
	MuRPS float64
	// Best is the highest passing level, the one that set MuRPS (zero when none passed).
	Best Level
	// Curve holds every level measured, sorted by offered rate.
	Curve []Level
	// Limits are notes on how far the result can be trusted ("the step-up reached --max-rate").
	Limits []string
	// ClientBound is the level that ended the search client-bound after an earlier one had
	// passed (nil when none did): MuRPS is then a lower bound.
	ClientBound *Level
}

// MuFromLevel is the μ a passing level supports: min(offered, served), served being its
// successes per second over the counted windows (Level.ThroughputRPS). That is
// perf_analyzer's throughput ("the total number of requests completed during a measurement,
// divided by the duration of the measurement", Perf Analyzer docs, measurements_metrics.md,
// "How Throughput is Calculated"), counting successes only. The offered rate alone is no
// capacity: a level passes while its completions are within the keep-up tolerance of its
// arrivals, so a level above what the replica completes (754 req/s offered, 730 served) could
// pass and claim 754 — 3 % more than it served, sizing every pool too small. The cap at
// offered keeps Poisson noise (a window with more arrivals than the rate) from raising μ.
func MuFromLevel(l Level) float64 { return min(l.OfferedRPS, l.ThroughputRPS) }

// MinStepFactor is the least StepFactor: it bounds the levels of a step-up or step-down.
const MinStepFactor = 1.01

// Search finds μ with measure: it steps the rate up by StepFactor from StartRPS while levels
// pass (Level.Passes), then bisects between the highest passing and the lowest failing rate
// until they are within Precision; a failing StartRPS steps down instead. μ is MuFromLevel of
// the highest passing level (its served rate, at most its offered rate). A client-bound level
// ends the search: with ErrClientBound (and the curve so far) when no level has passed yet,
// else with μ from the highest passing level so far and a limit saying it is a lower bound. A
// measure error ends it with that error.
func Search(ctx context.Context, cfg SearchConfig, measure func(ctx context.Context, rateRPS float64) (Level, error)) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	var res Result
	best := 0.0 // the highest passing rate offered: the bisection's bound, not μ
	try := func(rate float64) (bool, error) {
		l, err := measure(ctx, rate)
		if err != nil {
			return false, err
		}
		res.Curve = append(res.Curve, l)
		// Before client-bound: a level ended at its first window of NotFound may also have
		// lagged, and the error then blamed the generator instead of the model.
		if l.Rejected {
			return false, fmt.Errorf("%w at %.4g req/s: %s", ErrRejected, rate, l.RejectedReason)
		}
		if l.ClientBound {
			if best > 0 {
				res.ClientBound = &l
				res.Limits = append(res.Limits, fmt.Sprintf("client-bound at %.4g req/s (%s): μ is from the highest rate measured before, a lower bound", rate, l.ClientBoundReason))
				return false, errStop
			}
			return false, fmt.Errorf("%w at %.4g req/s: %s", ErrClientBound, rate, l.ClientBoundReason)
		}
		if l.Passes() && rate > best {
			best, res.Best, res.MuRPS = rate, l, MuFromLevel(l)
		}
		return l.Passes(), nil
	}
	finish := func(err error) (Result, error) {
		if errors.Is(err, errStop) {
			err = nil
		}
		slices.SortStableFunc(res.Curve, func(a, b Level) int {
			switch {
			case a.OfferedRPS < b.OfferedRPS:
				return -1
			case a.OfferedRPS > b.OfferedRPS:
				return 1
			}
			return 0
		})
		return res, err
	}
	lo, hi := 0.0, 0.0
	ok, err := try(cfg.StartRPS)
	if err != nil {
		return finish(err)
	}
	if ok {
		lo = cfg.StartRPS
		for {
			r := lo * cfg.StepFactor
			if r > cfg.MaxRPS {
				res.Limits = append(res.Limits, fmt.Sprintf("every rate up to --max-rate %.4g req/s passed: μ may be higher", cfg.MaxRPS))
				return finish(nil)
			}
			if ok, err = try(r); err != nil {
				return finish(err)
			}
			if !ok {
				hi = r
				break
			}
			lo = r
		}
	} else {
		hi = cfg.StartRPS
		for {
			r := hi / cfg.StepFactor
			if r < cfg.MinRPS {
				res.Limits = append(res.Limits, fmt.Sprintf("no rate down to --min-rate %.4g req/s met the SLO", cfg.MinRPS))
				return finish(nil)
			}
			if ok, err = try(r); err != nil {
				return finish(err)
			}
			if ok {
				lo = r
				break
			}
			hi = r
		}
	}
	for (hi-lo)/lo > cfg.Precision {
		mid := (lo + hi) / 2
		if mid <= lo || mid >= hi { // adjacent floats: nothing left between them
			break
		}
		ok, err := try(mid)
		if err != nil {
			return finish(err)
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return finish(nil)
}
