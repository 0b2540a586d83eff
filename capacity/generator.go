package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferscale/inferscale/internal/errtext"
)

// ErrInvalidConfig is wrapped by every Validate violation.
var ErrInvalidConfig = errors.New("capacity: invalid config")

// SLO is the service level a rate must meet.
type SLO struct {
	// Latency is the limit on the Quantile of request latency (from scheduled send to
	// complete response). Range: (0, MaxRequestTimeout], and at most
	// MeasureConfig.RequestTimeout.
	Latency time.Duration
	// Quantile of latency held to Latency, e.g. 0.99. Range: (0, 1).
	Quantile float64
	// MaxErrorRate is the ceiling on failed requests ÷ requests. Range: [0, 1).
	MaxErrorRate float64
}

// MaxWindow and MaxWindowRequests bound a window: up to MaxWindows of them make a level,
// so --window=100000h measured one level for 114 years. An hour is 720 times
// perf_analyzer's 5 s default; 100,000 arrivals are 2,000 times its 50 and resolve a p99 from
// 1,000 requests above it, while a window's latencies stay under 1 MB.
const (
	MaxWindow         = time.Hour
	MaxWindowRequests = 100_000
)

// MeasureConfig is how one rate level is measured.
type MeasureConfig struct {
	// Window is the shortest measurement window (perf_analyzer's --measurement-interval,
	// default 5 s there). Range: (0, MaxWindow].
	Window time.Duration
	// MinWindowRequests stretches the window at low rates to hold at least this many expected
	// arrivals (window = max(Window, MinWindowRequests ÷ rate)); 50 is perf_analyzer's
	// --measurement-request-count default. Range: [1, MaxWindowRequests].
	MinWindowRequests int
	// MaxWindows ends an unstable level (perf_analyzer's --max-trials, default 10). The first
	// window is warm-up and never counts. Range: >= StableWindows + 1.
	MaxWindows int
	// Stability is the relative spread (max ÷ min − 1) allowed between the last StableWindows
	// windows' throughput and latency quantile (perf_analyzer's --stability-percentage, 10 %).
	// Range: (0, 1].
	Stability float64
	// MaxInFlight bounds the generator's own concurrency; an arrival finding it reached is not
	// sent and the level is client-bound. Range: >= 1.
	MaxInFlight int
	// MaxLag is how late a send may start after its scheduled time; a level where more than 1 %
	// of sends start later is client-bound. 0 means a tenth of SLO.Latency: a lag within that
	// cannot move a level across the latency limit (latency is counted from the schedule
	// anyway). Range: >= 0.
	MaxLag time.Duration
	// RequestTimeout bounds each request (a timed-out request is an error,
	// "DeadlineExceeded"), and the drain of in-flight requests after a level. Range:
	// [SLO.Latency, MaxRequestTimeout]: a shorter timeout would end, as errors, requests
	// that meet the SLO (latency is counted from the scheduled send, the timeout from the
	// actual one, so a request within SLO.Latency is always within the timeout).
	RequestTimeout time.Duration
	// SLO is what a level must meet to pass.
	SLO SLO
}

func (c MeasureConfig) maxLag() time.Duration {
	if c.MaxLag > 0 {
		return c.MaxLag
	}
	return c.SLO.Latency / 10
}

// MaxRequestTimeout bounds RequestTimeout, and so SLO.Latency (which RequestTimeout must
// reach): a server that accepts requests and never answers holds each of them, and the drain
// after each level, this long at most. An hour is 3,600 times the default SLO latency; a
// request that slow has missed any SLO worth measuring.
const MaxRequestTimeout = time.Hour

// StableWindows is how many consecutive windows must agree (perf_analyzer: "the recent 3
// measurements").
const StableWindows = 3

// clientBoundLagFraction is the share of late sends that makes a level client-bound.
const clientBoundLagFraction = 0.01

// DefaultMeasureConfig: 1 s windows of at least 50 requests, at most 10 windows, 10 %
// stability, 4096 requests in flight, a lag of a tenth of the SLO latency, 30 s request
// timeout; the SLO is 1 s at the 0.99 quantile with a 0.1 % error ceiling.
func DefaultMeasureConfig() MeasureConfig {
	return MeasureConfig{
		Window: time.Second, MinWindowRequests: 50, MaxWindows: 10, Stability: 0.10,
		MaxInFlight: 4096, RequestTimeout: 30 * time.Second,
		SLO: SLO{Latency: time.Second, Quantile: 0.99, MaxErrorRate: 0.001},
	}
}

// Validate returns every violation, each naming the field (and its flag) and range.
func (c MeasureConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Window <= 0 || c.Window > MaxWindow {
		bad("window (--window) is %v, want (0, %v]", c.Window, MaxWindow)
	}
	if c.MinWindowRequests < 1 || c.MinWindowRequests > MaxWindowRequests {
		bad("minWindowRequests (--min-window-requests) is %d, want 1..%d", c.MinWindowRequests, MaxWindowRequests)
	}
	if c.MaxWindows < StableWindows+1 || c.MaxWindows > 1000 {
		bad("maxWindows (--max-windows) is %d, want %d..1000 (one warm-up window, then %d to agree)", c.MaxWindows, StableWindows+1, StableWindows)
	}
	if !(c.Stability > 0 && c.Stability <= 1) {
		bad("stability (--stability) is %v, want (0, 1]", c.Stability)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<20 {
		bad("maxInFlight (--max-in-flight) is %d, want 1..%d", c.MaxInFlight, 1<<20)
	}
	if c.MaxLag < 0 {
		bad("maxLag (--max-lag) is %v, want >= 0 (0: a tenth of --slo-latency)", c.MaxLag)
	}
	timeoutOK := c.RequestTimeout > 0 && c.RequestTimeout <= MaxRequestTimeout
	if !timeoutOK {
		bad("requestTimeout (--request-timeout) is %v, want (0, %v]", c.RequestTimeout, MaxRequestTimeout)
	}
	latencyOK := c.SLO.Latency > 0 && c.SLO.Latency <= MaxRequestTimeout
	if !latencyOK {
		bad("slo.latency (--slo-latency) is %v, want (0, %v] (--request-timeout must reach it and is at most %v)", c.SLO.Latency, MaxRequestTimeout, MaxRequestTimeout)
	}
	// Said only when both are in range, so that one bad flag is not reported twice. A
	// timeout below the SLO latency ends, as errors, requests that would have met the SLO:
	// the level then passes or fails on the timeout and the error ceiling, not the latency.
	if timeoutOK && latencyOK && c.RequestTimeout < c.SLO.Latency {
		bad("requestTimeout (--request-timeout) is %v, want >= slo.latency (--slo-latency) %v: a request that would meet the SLO would time out first and count as an error", c.RequestTimeout, c.SLO.Latency)
	}
	if !(c.SLO.Quantile > 0 && c.SLO.Quantile < 1) {
		bad("slo.quantile (--slo-quantile) is %v, want (0, 1), e.g. 0.99", c.SLO.Quantile)
	}
	if !(c.SLO.MaxErrorRate >= 0 && c.SLO.MaxErrorRate < 1) {
		bad("slo.maxErrorRate (--max-error-rate) is %v, want [0, 1)", c.SLO.MaxErrorRate)
	}
	return errors.Join(errs...)
}

// Window is one measurement window of a level. Latencies are seconds.
type Window struct {
	// Sent arrivals scheduled in the window (sent or dropped at the in-flight cap).
	Sent int
	// Completed responses (successes and errors) that ended in the window; Errors of them failed.
	Completed, Errors int
	// Late requests outstanding at the window's end, scheduled longer ago than the SLO latency:
	// they miss the SLO whatever they come to.
	Late int
	// SLOMisses: successes in the window slower than the SLO latency.
	SLOMisses int
	// Dropped arrivals not sent (in-flight cap); LaggedSends started later than MaxLag.
	Dropped, LaggedSends int
	// ThroughputRPS is successes ÷ window length.
	ThroughputRPS float64
	// MeanLatency, P50, P95, P99 and PSLO (the SLO quantile) of successful requests' latency;
	// 0 when none.
	MeanLatency, P50, P95, P99, PSLO float64
	// TTFTP50 and TTFTP99 of the time to first token (streamed responses only); 0 when none.
	TTFTP50, TTFTP99 float64
	// Rejected of the Errors had a code RejectedCode reports true for.
	Rejected int
	// codes counts the window's errors by code; messages holds the first message of each.
	codes     map[string]int
	messages  map[string]string
	latencies []float64
	ttft      []float64
	seconds   float64
}

// Level is one offered rate and what it came to. Figures (throughput, quantiles, success
// rate) are over the last StableWindows windows.
type Level struct {
	// OfferedRPS is the rate asked for; WindowSeconds the window length used at it.
	OfferedRPS    float64
	WindowSeconds float64
	// Windows in order; the first is warm-up.
	Windows []Window
	// Stable: the last StableWindows windows agree within Stability (perf_analyzer's rule).
	Stable bool
	// Exhausted: MaxWindows passed without the level turning stable; it still counts, judged
	// on its last windows (the "or after a maximum duration"), unless Growing.
	Exhausted bool
	// Failed: the last StableWindows windows each missed the SLO, which ends the level early
	// (it counts, and fails).
	Failed bool
	// Growing: the last StableWindows windows' mean latency rose window after window, by more
	// than Stability in all: a backlog building up, which no longer run would have absorbed.
	Growing bool
	// KeepsUp: completions are within Stability of arrivals over the counted windows (a
	// backlog that grows is not a rate the model holds).
	KeepsUp bool
	// MeetsSLO: at most 1 − Quantile of requests (late ones included) missed the latency limit,
	// and the error rate is within the ceiling.
	MeetsSLO bool
	// ClientBound: the generator could not offer the rate; ClientBoundReason says why.
	ClientBound       bool
	ClientBoundReason string
	// Rejected: every request completed in a window failed with a code that says the
	// request itself is refused (RejectedCode: NotFound, InvalidArgument, http 404, …), which
	// ends the level at that window: no rate, lower or higher, would pass. RejectedReason
	// says which window, the codes by count and a sample message.
	Rejected       bool
	RejectedReason string
	// ThroughputRPS is successes per second; P50…P99 and PSLO (the SLO quantile) latency
	// quantiles and TTFTP50/TTFTP99 time-to-first-token quantiles, seconds; SuccessRate
	// successes ÷ completed: all over the last StableWindows windows.
	ThroughputRPS    float64
	P50, P95, P99    float64
	PSLO             float64
	TTFTP50, TTFTP99 float64
	SuccessRate      float64
	// ErrorsByCode counts failed requests of the whole level by Outcome.Code.
	ErrorsByCode map[string]int
}

// Passes reports whether the level counts toward μ: measured to the end (stable, or MaxWindows
// exhausted), keeping up, within the SLO and not client-bound.
func (l Level) Passes() bool {
	return !l.Failed && (l.Stable || (l.Exhausted && !l.Growing)) && l.KeepsUp && l.MeetsSLO && !l.ClientBound
}

// Generator offers open-loop load to a Target.
type Generator struct {
	target Target
	clock  Clock
	cfg    MeasureConfig
	rng    *rand.Rand

	// gaps, when set, are inter-arrival times of mean 1 (a trace's shape) used in turn, from a
	// seeded offset, instead of exponential draws; pos is the next one.
	gaps []float64
	pos  int

	mu       sync.Mutex
	inFlight map[uint64]time.Time // scheduled send time of each request not yet recorded
	nextID   uint64
	done     []sent
}

type sent struct {
	scheduled time.Time
	out       Outcome
}

// NewGenerator returns a generator for target on clock (nil means RealClock) whose Poisson
// arrivals are drawn from seed (the same seed offers the same schedule).
func NewGenerator(target Target, clock Clock, cfg MeasureConfig, seed uint64) (*Generator, error) {
	if target == nil {
		return nil, fmt.Errorf("%w: no target", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clock == nil {
		clock = RealClock{}
	}
	return &Generator{target: target, clock: clock, cfg: cfg, rng: rand.New(rand.NewPCG(seed, 0x6361706163697479)), inFlight: map[uint64]time.Time{}}, nil
}

// InFlight returns how many requests are sent and not yet recorded.
func (g *Generator) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.inFlight)
}

// WindowFor is the window length used at rate: max(Window, MinWindowRequests ÷ rate). A
// stretched window longer than a time.Duration holds (about 292 years, a rate below 2e-9
// req/s at 50 requests) saturates at the largest Duration instead of wrapping negative;
// rates below RateFloor(MinWindowRequests) are refused before a level is measured.
func (c MeasureConfig) WindowFor(rateRPS float64) time.Duration {
	w := c.Window
	if rateRPS > 0 {
		w = max(w, secondsDuration(float64(c.MinWindowRequests)/rateRPS))
	}
	return w
}

// secondsDuration converts s seconds to a Duration, saturating instead of wrapping:
// time.Duration(x) of a float64 past the int64 range (or of +Inf or NaN) is undefined in Go
// and gave a negative duration on amd64 (a 1e-300 req/s gap made the send loop spin for
// ever). s ≥ 2^63 ns, +Inf and NaN give the largest Duration; s ≤ 0 gives 0.
func secondsDuration(s float64) time.Duration {
	ns := s * float64(time.Second)
	switch {
	case !(ns < 0x1p63): // +Inf, NaN, or past math.MaxInt64 (whose float64 is 2^63)
		return time.Duration(math.MaxInt64)
	case ns <= 0:
		return 0
	}
	return time.Duration(ns)
}

// Measure offers rateRPS (Poisson arrivals) in windows until the last StableWindows windows
// agree or MaxWindows have passed, then cancels the requests still in flight (counted as late
// where they already are) and waits up to RequestTimeout for them to return, so that the next
// level starts on an idle server. It fails
// only when ctx ends or rateRPS is not a finite number at or above
// RateFloor(MinWindowRequests).
func (g *Generator) Measure(ctx context.Context, rateRPS float64) (Level, error) {
	if !(rateRPS > 0) || math.IsInf(rateRPS, 0) {
		return Level{}, fmt.Errorf("%w: rate %v req/s, want > 0", ErrInvalidConfig, rateRPS)
	}
	if rateBelowFloor(rateRPS, g.cfg.MinWindowRequests) {
		return Level{}, fmt.Errorf("%w: rate %v req/s, want >= %.4g (RateFloor: minWindowRequests %d ÷ %v, the longest window)",
			ErrInvalidConfig, rateRPS, RateFloor(g.cfg.MinWindowRequests), g.cfg.MinWindowRequests, MaxWindow)
	}
	win := g.cfg.WindowFor(rateRPS)
	lvl := Level{OfferedRPS: rateRPS, WindowSeconds: win.Seconds(), ErrorsByCode: map[string]int{}}
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()

	start := g.clock.Now()
	g.mu.Lock()
	g.done = g.done[:0]
	g.mu.Unlock()
	next := start.Add(g.interArrival(rateRPS))
	winStart, winEnd := start, start.Add(win)
	cur := Window{}
	for {
		if next.Before(winEnd) {
			if err := g.clock.SleepUntil(ctx, next); err != nil {
				return lvl, err
			}
			cur.Sent++
			g.send(reqCtx, &wg, next, &cur)
			next = next.Add(g.interArrival(rateRPS))
			continue
		}
		if err := g.clock.SleepUntil(ctx, winEnd); err != nil {
			return lvl, err
		}
		g.closeWindow(&cur, winStart, winEnd, lvl.ErrorsByCode)
		lvl.Windows = append(lvl.Windows, cur)
		if cur.Completed > 0 && cur.Rejected == cur.Completed {
			// A model that is not loaded, a request it refuses: halving the rate down to
			// --min-rate took 40 minutes to say nothing more.
			lvl.Rejected = true
			lvl.RejectedReason = rejectedReason(cur, len(lvl.Windows))
			break
		}
		cur = Window{}
		winStart, winEnd = winEnd, winEnd.Add(win)
		if len(lvl.Windows) > StableWindows && g.stable(lvl.Windows[len(lvl.Windows)-StableWindows:]) {
			lvl.Stable = true
			break
		}
		if len(lvl.Windows) > StableWindows && !slices.ContainsFunc(lvl.Windows[len(lvl.Windows)-StableWindows:], g.windowMeetsSLO) {
			lvl.Failed = true // three windows in a row over the limit: more would not pass it
			break
		}
		if len(lvl.Windows) >= g.cfg.MaxWindows {
			lvl.Exhausted = true
			break
		}
	}
	g.summarise(&lvl)
	cancel()
	return lvl, g.drain(ctx)
}

// drain waits, polling the clock every 10 ms of its time, until the requests cancelled at the
// level's end have returned (queued ones leave the queue at once; executing ones finish their
// service) or RequestTimeout has passed, so that the next level starts on an idle server.
func (g *Generator) drain(ctx context.Context) error {
	deadline := g.clock.Now().Add(g.cfg.RequestTimeout)
	for g.InFlight() > 0 && g.clock.Now().Before(deadline) {
		if err := g.clock.SleepUntil(ctx, g.clock.Now().Add(10*time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}

func (g *Generator) interArrival(rateRPS float64) time.Duration {
	if len(g.gaps) > 0 {
		gap := g.gaps[g.pos%len(g.gaps)]
		g.pos++
		return secondsDuration(gap / rateRPS)
	}
	return secondsDuration(g.rng.ExpFloat64() / rateRPS)
}

// UseTraceShape makes the generator replay the inter-arrival shape of a trace instead of
// Poisson: arrivals are a trace's request times (non-decreasing), its gaps scaled so that
// their mean is 1 ÷ the offered rate, taken in order from a seeded starting point and
// wrapping around (burstiness kept, rate set by the search). It needs at least two distinct
// times.
func (g *Generator) UseTraceShape(arrivals []time.Duration) error {
	if len(arrivals) < 2 {
		return fmt.Errorf("%w: trace shape needs at least 2 arrivals, got %d", ErrInvalidConfig, len(arrivals))
	}
	gaps := make([]float64, 0, len(arrivals)-1)
	var sum float64
	for i := 1; i < len(arrivals); i++ {
		d := (arrivals[i] - arrivals[i-1]).Seconds()
		if d < 0 {
			return fmt.Errorf("%w: trace arrival %d (%v) is before arrival %d (%v)", ErrInvalidConfig, i, arrivals[i], i-1, arrivals[i-1])
		}
		gaps = append(gaps, d)
		sum += d
	}
	if sum <= 0 {
		return fmt.Errorf("%w: every trace arrival is at the same time", ErrInvalidConfig)
	}
	mean := sum / float64(len(gaps))
	for i := range gaps {
		gaps[i] /= mean
	}
	g.gaps, g.pos = gaps, int(g.rng.Uint64N(uint64(len(gaps))))
	return nil
}

// send starts the request scheduled at t, unless the in-flight cap is reached.
func (g *Generator) send(ctx context.Context, wg *sync.WaitGroup, t time.Time, w *Window) {
	if g.clock.Now().Sub(t) > g.cfg.maxLag() {
		w.LaggedSends++
	}
	g.mu.Lock()
	if len(g.inFlight) >= g.cfg.MaxInFlight {
		g.mu.Unlock()
		w.Dropped++
		return
	}
	id := g.nextID
	g.nextID++
	g.inFlight[id] = t
	g.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		rctx, cancel := context.WithTimeout(ctx, g.cfg.RequestTimeout)
		out := g.target.Send(rctx, g.clock.Now)
		cancel()
		g.mu.Lock()
		delete(g.inFlight, id)
		g.done = append(g.done, sent{scheduled: t, out: out})
		g.mu.Unlock()
	}()
}

// closeWindow fills w from the requests completed in [from, to) and those still in flight at
// to, and forgets the completed ones.
func (g *Generator) closeWindow(w *Window, from, to time.Time, byCode map[string]int) {
	g.mu.Lock()
	done := g.done
	g.done = nil
	limit := g.cfg.SLO.Latency
	for _, t := range g.inFlight {
		if to.Sub(t) > limit {
			w.Late++
		}
	}
	g.mu.Unlock()
	w.seconds = to.Sub(from).Seconds()
	for _, r := range done {
		w.Completed++
		if c := r.out.Code; c != "" {
			w.Errors++
			byCode[c]++
			if w.codes == nil {
				w.codes, w.messages = map[string]int{}, map[string]string{}
			}
			if w.codes[c]++; w.codes[c] == 1 {
				w.messages[c] = r.out.Message
			}
			if RejectedCode(c) {
				w.Rejected++
			}
			continue
		}
		lat := r.out.Done.Sub(r.scheduled)
		if lat > limit {
			w.SLOMisses++
		}
		w.latencies = append(w.latencies, lat.Seconds())
		if !r.out.FirstToken.IsZero() {
			w.ttft = append(w.ttft, r.out.FirstToken.Sub(r.scheduled).Seconds())
		}
	}
	var sum float64
	for _, l := range w.latencies {
		sum += l
	}
	if len(w.latencies) > 0 {
		w.MeanLatency = sum / float64(len(w.latencies))
	}
	sort.Float64s(w.latencies)
	sort.Float64s(w.ttft)
	w.ThroughputRPS = float64(len(w.latencies)) / w.seconds
	w.P50, w.P95, w.P99 = Quantile(w.latencies, 0.50), Quantile(w.latencies, 0.95), Quantile(w.latencies, 0.99)
	w.PSLO = Quantile(w.latencies, g.cfg.SLO.Quantile)
	w.TTFTP50, w.TTFTP99 = Quantile(w.ttft, 0.50), Quantile(w.ttft, 0.99)
}

// windowMeetsSLO reports whether w alone meets the SLO (latency quantile, late requests
// included, and error rate).
func (g *Generator) windowMeetsSLO(w Window) bool {
	total := len(w.latencies) + w.Late
	return total > 0 && float64(w.SLOMisses+w.Late) <= (1-g.cfg.SLO.Quantile)*float64(total) &&
		(w.Completed == 0 || float64(w.Errors)/float64(w.Completed) <= g.cfg.SLO.MaxErrorRate)
}

// stable is perf_analyzer's rule over ws: max ÷ min of throughput and of the mean latency
// (perf_analyzer's default when --percentile is not given; a tail quantile from a few hundred
// requests moves by more than 10 % from window to window by itself) each within
// 1 + Stability — with throughput taken relative to the window's own
// arrivals (completions ÷ arrivals). Under open-loop Poisson arrivals the raw count in a window
// varies by 1/√n by itself (14 % at 50 requests), which would leave every level of a few
// hundred requests unstable; dividing by the arrivals removes that noise and keeps what the
// rule is for: a backlog that grows or drains shows as a served fraction that moves.
func (g *Generator) stable(ws []Window) bool {
	within := func(f func(Window) float64) bool {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, w := range ws {
			lo, hi = min(lo, f(w)), max(hi, f(w))
		}
		// A window without completions (no arrivals in a lull of a trace's shape, or a
		// stalled server) measures nothing, and three of them are no evidence of stability.
		return lo > 0 && hi/lo <= 1+g.cfg.Stability
	}
	served := func(w Window) float64 {
		if w.Sent == 0 {
			return 0
		}
		return float64(w.Completed) / float64(w.Sent)
	}
	return within(served) && within(func(w Window) float64 { return w.MeanLatency })
}

// summarise sets the level's figures and verdicts from its last StableWindows windows (the
// first window, warm-up, never counts).
func (g *Generator) summarise(l *Level) {
	ws := l.Windows
	if len(ws) > StableWindows {
		ws = ws[len(ws)-StableWindows:]
	} else if len(ws) > 1 {
		ws = ws[1:]
	}
	var lat, ttft []float64
	var seconds float64
	var sent, completed, errs, misses, dropped, lagged int
	for _, w := range ws {
		lat = append(lat, w.latencies...)
		ttft = append(ttft, w.ttft...)
		seconds += w.seconds
		sent += w.Sent
		completed += w.Completed
		errs += w.Errors
		misses += w.SLOMisses
	}
	for _, w := range l.Windows {
		dropped += w.Dropped
		lagged += w.LaggedSends
	}
	late := 0
	if len(ws) > 0 {
		late = ws[len(ws)-1].Late
	}
	slices.Sort(lat)
	slices.Sort(ttft)
	if seconds > 0 {
		l.ThroughputRPS = float64(len(lat)) / seconds
	}
	l.P50, l.P95, l.P99 = Quantile(lat, 0.50), Quantile(lat, 0.95), Quantile(lat, 0.99)
	l.PSLO = Quantile(lat, g.cfg.SLO.Quantile)
	l.TTFTP50, l.TTFTP99 = Quantile(ttft, 0.50), Quantile(ttft, 0.99)
	if completed > 0 {
		l.SuccessRate = float64(completed-errs) / float64(completed)
	}
	l.KeepsUp = sent > 0 && float64(completed) >= (1-g.cfg.Stability)*float64(sent)
	total := len(lat) + late
	l.MeetsSLO = total > 0 && float64(misses+late) <= (1-g.cfg.SLO.Quantile)*float64(total) &&
		completed > 0 && float64(errs)/float64(completed) <= g.cfg.SLO.MaxErrorRate
	var allSent int
	for _, w := range l.Windows {
		allSent += w.Sent
	}
	if n := len(l.Windows); n > StableWindows {
		a, b, c := l.Windows[n-3].MeanLatency, l.Windows[n-2].MeanLatency, l.Windows[n-1].MeanLatency
		l.Growing = a < b && b < c && c > (1+g.cfg.Stability)*a
	}
	// Little's law: a level meeting the SLO holds about rate × latency limit requests in
	// flight; a cap at least that large is reached only because the server holds requests
	// longer than the limit, which fails the level rather than the client.
	sloInFlight := l.OfferedRPS * g.cfg.SLO.Latency.Seconds()
	switch {
	case dropped > 0 && float64(g.cfg.MaxInFlight) >= sloInFlight:
		l.MeetsSLO, l.KeepsUp = false, false
	case dropped > 0:
		l.ClientBound = true
		l.ClientBoundReason = fmt.Sprintf("%d of %d arrivals not sent: the generator's in-flight cap (%d) was reached, below the %.0f in flight the rate needs at the SLO latency",
			dropped, allSent, g.cfg.MaxInFlight, sloInFlight)
	case allSent > 0 && float64(lagged) > clientBoundLagFraction*float64(allSent):
		l.ClientBound = true
		l.ClientBoundReason = fmt.Sprintf("%d of %d sends started more than %v late: the client cannot keep the schedule", lagged, allSent, g.cfg.maxLag())
	}
}

// Quantile returns the q-quantile of sorted (nearest rank: the smallest value with at least
// q of the values at or below it); 0 for none.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// RejectedCode reports whether an Outcome.Code says the request itself is refused, so that
// the same request fails at any rate: a gRPC NotFound (the model is not loaded),
// InvalidArgument, Unimplemented, PermissionDenied, Unauthenticated, FailedPrecondition or
// OutOfRange, or an HTTP 4xx other than 408 (a timeout) and 429 (overload). Timeouts,
// overload (Unavailable, ResourceExhausted, http 429, 503) and transport errors are not: a
// lower rate may pass.
func RejectedCode(code string) bool {
	switch code {
	case "NotFound", "InvalidArgument", "Unimplemented", "PermissionDenied", "Unauthenticated", "FailedPrecondition", "OutOfRange":
		return true
	}
	if s, ok := strings.CutPrefix(code, "http "); ok {
		n, err := strconv.Atoi(s)
		return err == nil && n >= 400 && n < 500 && n != 408 && n != 429
	}
	return false
}

// rejectedReason words a window whose every completed request was rejected: its number, the
// codes by count and the most frequent code's first message.
func rejectedReason(w Window, n int) string {
	top := ""
	for c, k := range w.codes {
		if top == "" || k > w.codes[top] || k == w.codes[top] && c < top {
			top = c
		}
	}
	sample := ""
	if m := w.messages[top]; m != "" {
		sample = fmt.Sprintf(" (%s: %s)", top, errtext.Quote(m, 200))
	}
	return fmt.Sprintf("all %d requests completed in window %d failed: %s%s", w.Completed, n, countByCode(w.codes), sample)
}
