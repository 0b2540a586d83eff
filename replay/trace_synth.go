package replay

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// FunctionsMatrix is the Azure Functions 2019 per-minute invocation matrix
// (vHive In-Vitro sample; Shahrad et al., ATC '20; CC BY 4.0): one row per
// function, Counts[f][m] invocations in minute m.
type FunctionsMatrix struct {
	Names  []string
	Counts [][]int32
}

// ReadFunctionsMatrix reads a matrix with the columns HashFunction, then any
// number of identifier columns, then minute_1 ... minute_N in order. Counts
// are non-negative integers. A function name that repeats gets "#<line>"
// appended so that every row stays a separate series.
func ReadFunctionsMatrix(r io.Reader) (*FunctionsMatrix, error) {
	t, err := newTable(r, "HashFunction", "minute_1")
	if err != nil {
		return nil, err
	}
	first := t.col["minute_1"]
	if maxMin := int(MaxTraceSpan / time.Minute); len(t.header)-first > maxMin {
		return nil, fmt.Errorf("%w: %w: %d minute columns; want at most %d (MaxTraceSpan, 92 days)", ErrBadHeader, ErrTooLarge, len(t.header)-first, maxMin)
	}
	for i := first; i < len(t.header); i++ {
		if want := "minute_" + strconv.Itoa(i-first+1); t.header[i] != want {
			return nil, fmt.Errorf("%w: column %d is %q, want %q", ErrBadHeader, i+1, t.header[i], want)
		}
	}
	fm := &FunctionsMatrix{}
	seen := map[string]bool{}
	var total int64 // invocations so far; each becomes one request
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		name := t.str("HashFunction")
		if name == "" {
			return nil, t.fail("HashFunction", name, "want a function id")
		}
		if seen[name] {
			name += "#" + strconv.Itoa(t.line)
		}
		seen[name] = true
		row := make([]int32, len(t.header)-first)
		for i := range row {
			v, err := t.intCol(t.header[first+i], false)
			if err != nil {
				return nil, err
			}
			if total += int64(v); total > MaxRequests {
				return nil, t.fail(t.header[first+i], t.str(t.header[first+i]), "%w: the matrix's invocations pass %d; want at most MaxRequests (%d) in all", ErrTooLarge, MaxRequests, MaxRequests)
			}
			row[i] = v
		}
		fm.Names = append(fm.Names, name)
		fm.Counts = append(fm.Counts, row)
	}
	return fm, nil
}

// Requests streams the matrix as requests: each function is one model, and
// the invocations of a minute are placed uniformly at random within it
// (PCG seeded with seed), so a run is reproducible.
func (fm *FunctionsMatrix) Requests(seed uint64) Source {
	return &functionsSource{fm: fm, rng: rand.New(rand.NewPCG(seed, 0x46756e6373))}
}

type functionsSource struct {
	fm     *FunctionsMatrix
	rng    *rand.Rand
	minute int
	buf    []Request
	pos    int
}

func (s *functionsSource) Models() []string { return s.fm.Names }

func (s *functionsSource) Next() (Request, error) {
	for s.pos >= len(s.buf) {
		if len(s.fm.Counts) == 0 || s.minute >= len(s.fm.Counts[0]) {
			return Request{}, io.EOF
		}
		s.buf, s.pos = s.buf[:0], 0
		base := time.Duration(s.minute) * time.Minute
		for f, row := range s.fm.Counts {
			for range row[s.minute] {
				at := base + time.Duration(s.rng.Int64N(int64(time.Minute)))
				s.buf = append(s.buf, Request{At: at, Model: int32(f), InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown})
			}
		}
		slices.SortStableFunc(s.buf, func(a, b Request) int { return cmp.Compare(a.At, b.At) })
		s.minute++
	}
	r := s.buf[s.pos]
	s.pos++
	return r, nil
}

// Window is one ServeGen per-client rate window (Xiang et al., ServeGen,
// arXiv:2505.09999; Apache-2.0).
type Window struct {
	Model  int32
	Client int32
	// StartS and LenS are the window's start and length, seconds.
	StartS, LenS float64
	// RateRPS is the client's mean request rate in the window, req/s.
	RateRPS float64
	// IATCV is the coefficient of variation of inter-arrival times.
	IATCV float64
	// Weibull selects Weibull(shape P1, scale P2); otherwise Gamma(shape P1,
	// scale P2), scipy conventions.
	Weibull bool
	P1, P2  float64
	// InputTokens and OutputTokens are the 6-hour block's means, or Unknown.
	InputTokens, OutputTokens float64
}

// ServeGen is a whole ServeGen window file.
type ServeGen struct {
	Models  []string
	Windows []Window
	// LenS is the common window length, seconds.
	LenS float64
}

// The smallest non-zero values ReadServeGen accepts for a window's rate,
// inter-arrival CV and Weibull shape. Below them the distributions' derived
// parameters leave float64 range: binned mode's count Gamma has shape
// mean²/variance and rate mean/variance, which at rate_rps 1e-300 underflowed
// to 0 (a panic in the sampler) and at iat_cv 1e-160 overflowed to +Inf (NaN
// counts); the Weibull scale 1/(rate_rps·Γ(1+1/shape)) became 0 for shapes
// below about 0.006 (every request at the window start).
const (
	// ServeGenMinRateRPS: a window at 1e-9 req/s expects under 0.01 request
	// in all of MaxTraceSpan (7.9e6 s), so a smaller rate is indistinguishable
	// from an idle window, which is written 0.
	ServeGenMinRateRPS = 1e-9
	// ServeGenMinIATCV is the inter-arrival CV of a Gamma renewal of shape
	// 1e6 (CV = 1/√shape), the largest dist_p1 accepted; evenly spaced
	// arrivals are written 0. With rate_rps in [ServeGenMinRateRPS, 1e7] and
	// iat_cv in [1e-3, 1e4], one client's window at rate scale 1 has a count
	// Gamma of shape rate/cv² in [1e-17, 1e13] and rate 1/cv² in [1e-8, 1e6].
	ServeGenMinIATCV = 1e-3
	// ServeGenMinWeibullShape: a Weibull of shape 0.1 has an inter-arrival CV
	// of 430, within the 1e3 of a Gamma at the smallest dist_p1 (1e-6), and
	// Γ(1+1/shape) = 10! keeps its scale a normal float64 for every rate_rps.
	// Γ(1+1/shape) overflows near 0.006 (+Inf at 0.00586), and well before
	// that a finite window is one burst: at 0.01 (CV 3e29) every window ran
	// to MaxRequests whatever its rate.
	ServeGenMinWeibullShape = 0.1
)

// ReadServeGen reads the long ServeGen CSV (category, model, client_id,
// window_start_s, window_len_s, rate_rps, iat_cv, arrival_dist, dist_p1,
// dist_p2, mean_input_tokens, mean_output_tokens). Every window must have
// the same length and start on a multiple of it; rate_rps is 0 or in
// [ServeGenMinRateRPS, 1e7]; iat_cv is 0 or in [ServeGenMinIATCV, 1e4];
// shape and scale > 0, a Weibull shape ≥ ServeGenMinWeibullShape;
// arrival_dist is Gamma or Weibull.
func ReadServeGen(r io.Reader) (*ServeGen, error) {
	t, err := newTable(r, "model", "client_id", "window_start_s", "window_len_s", "rate_rps", "iat_cv", "arrival_dist", "dist_p1", "dist_p2")
	if err != nil {
		return nil, err
	}
	sg := &ServeGen{}
	var m models
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		var w Window
		name := t.str("model")
		if name == "" {
			return nil, t.fail("model", name, "want a model name")
		}
		w.Model = m.id(name)
		c, err := t.intCol("client_id", false)
		if err != nil {
			return nil, err
		}
		w.Client = c
		if w.StartS, err = t.floatCol("window_start_s", false, 0, 1e9); err != nil {
			return nil, err
		}
		if w.LenS, err = t.floatCol("window_len_s", false, 1, 1e6); err != nil {
			return nil, err
		}
		// Binned mode bins whole seconds: a fractional length would
		// put windows in the wrong bins.
		if w.LenS != math.Trunc(w.LenS) {
			return nil, t.fail("window_len_s", t.str("window_len_s"), "want a whole number of seconds in [1, 1e6]")
		}
		if end := w.StartS + w.LenS; end > MaxTraceSpan.Seconds() {
			return nil, t.fail("window_start_s", t.str("window_start_s"), "%w: the window ends at %g s; want window_start_s + window_len_s ≤ %g s (MaxTraceSpan, 92 days)", ErrTooLarge, end, MaxTraceSpan.Seconds())
		}
		if sg.LenS == 0 {
			sg.LenS = w.LenS
		}
		if w.LenS != sg.LenS {
			return nil, t.fail("window_len_s", t.str("window_len_s"), "want %g like the first row", sg.LenS)
		}
		if math.Mod(w.StartS, w.LenS) != 0 {
			return nil, t.fail("window_start_s", t.str("window_start_s"), "want a multiple of window_len_s %g", w.LenS)
		}
		if w.RateRPS, err = t.floatCol("rate_rps", false, 0, 1e7); err != nil {
			return nil, err
		}
		if w.RateRPS > 0 && w.RateRPS < ServeGenMinRateRPS {
			return nil, t.fail("rate_rps", t.str("rate_rps"), "want 0 or a rate in [%g, %g] req/s (ServeGenMinRateRPS: below it a window expects under 0.01 request in all of MaxTraceSpan; write 0 for an idle window)", ServeGenMinRateRPS, 1e7)
		}
		if w.IATCV, err = t.floatCol("iat_cv", false, 0, 1e4); err != nil {
			return nil, err
		}
		if w.IATCV > 0 && w.IATCV < ServeGenMinIATCV {
			return nil, t.fail("iat_cv", t.str("iat_cv"), "want 0 or a CV in [%g, %g] (ServeGenMinIATCV: the CV of a Gamma of shape 1e6, the largest dist_p1; write 0 for evenly spaced arrivals)", ServeGenMinIATCV, 1e4)
		}
		switch d := t.str("arrival_dist"); strings.ToLower(d) {
		case "gamma":
		case "weibull":
			w.Weibull = true
		default:
			return nil, t.fail("arrival_dist", d, "want Gamma or Weibull")
		}
		if w.P1, err = t.floatCol("dist_p1", false, 1e-6, 1e6); err != nil {
			return nil, err
		}
		if w.Weibull {
			// The scale is checked as well as the shape, so that a change to
			// either range cannot bring back a zero or infinite scale unnoticed.
			l := weibullScale(w.P1, max(w.RateRPS, ServeGenMinRateRPS))
			if w.P1 < ServeGenMinWeibullShape || !(l > 0 && l <= math.MaxFloat64) {
				return nil, t.fail("dist_p1", t.str("dist_p1"), "want a Weibull shape in [%g, %g] (ServeGenMinWeibullShape: inter-arrival CV 430 at 0.1, within a Gamma's 1e3 at dist_p1 1e-6; Γ(1+1/shape) overflows float64 near 0.006)", ServeGenMinWeibullShape, 1e6)
			}
		}
		if w.P2, err = t.floatCol("dist_p2", false, 1e-12, 1e12); err != nil {
			return nil, err
		}
		if w.InputTokens, err = t.floatCol("mean_input_tokens", true, 0, 1e7); err != nil {
			return nil, err
		}
		if w.OutputTokens, err = t.floatCol("mean_output_tokens", true, 0, 1e7); err != nil {
			return nil, err
		}
		sg.Windows = append(sg.Windows, w)
	}
	sg.Models = m.names
	slices.SortStableFunc(sg.Windows, func(a, b Window) int { return cmp.Compare(a.StartS, b.StartS) })
	return sg, nil
}

// ExpectedRequests is Σ rate × length over all windows.
func (sg *ServeGen) ExpectedRequests() float64 {
	var n float64
	for _, w := range sg.Windows {
		n += w.RateRPS * w.LenS
	}
	return n
}

// FilterModels keeps the named models' windows (all when names is empty).
func (sg *ServeGen) FilterModels(names []string) (*ServeGen, error) {
	if len(names) == 0 {
		return sg, nil
	}
	out := &ServeGen{LenS: sg.LenS}
	re := map[int32]int32{}
	for _, n := range names {
		if slices.Contains(out.Models, n) {
			return nil, fmt.Errorf("model %q is listed twice; list each model once", n)
		}
		i := slices.Index(sg.Models, n)
		if i < 0 {
			return nil, fmt.Errorf("model %q is not in the trace (models: %s)", n, strings.Join(sg.Models, ", "))
		}
		re[int32(i)] = int32(len(out.Models))
		out.Models = append(out.Models, n)
	}
	for _, w := range sg.Windows {
		if j, ok := re[w.Model]; ok {
			w.Model = j
			out.Windows = append(out.Windows, w)
		}
	}
	return out, nil
}

// Requests synthesizes arrivals: inside each window, a renewal process
// whose inter-arrival times follow the window's fitted distribution with
// its shape kept and its scale rescaled so that the mean is exactly
// 1/rate_rps (the rate is authoritative; ServeGen's own generator also
// rescales to the requested load). The first arrival is placed a uniform
// fraction of one inter-arrival time after the window start.
//
// Token counts vary per request around the window's means, with the
// shapes ServeGen reports for language models (Xiang et al.,
// arXiv:2505.09999, §3: output lengths exponential; input lengths a
// Pareto/log-normal mixture whose parameters the window file does not
// carry): output tokens ~ Exponential(mean = mean_output_tokens); input
// tokens ~ LogNormal(σ = ServeGenInputSigma) with mean mean_input_tokens;
// both rounded to whole tokens. Deterministic for a seed.
func (sg *ServeGen) Requests(seed uint64) Source {
	pcg := rand.NewPCG(seed, 0x5365727665)
	return &servegenSource{sg: sg, src: pcg, rng: rand.New(pcg)}
}

type servegenSource struct {
	sg  *ServeGen
	src rand.Source
	rng *rand.Rand
	i   int // next window
	buf []Request
	pos int
	n   int // requests synthesized so far
}

func (s *servegenSource) Models() []string { return s.sg.Models }

func (s *servegenSource) Next() (Request, error) {
	if s.i == 0 && s.pos == 0 && len(s.buf) == 0 {
		if e := s.sg.ExpectedRequests(); e > MaxRequests {
			return Request{}, fmt.Errorf("%w: Σ rate_rps × window_len_s is %.4g requests; want at most MaxRequests (%d) per request, or binned mode (--mode=binned)", ErrTooLarge, e, MaxRequests)
		}
	}
	for s.pos >= len(s.buf) {
		if s.i >= len(s.sg.Windows) {
			return Request{}, io.EOF
		}
		s.buf, s.pos = s.buf[:0], 0
		start := s.sg.Windows[s.i].StartS
		for ; s.i < len(s.sg.Windows) && s.sg.Windows[s.i].StartS == start; s.i++ {
			s.buf = s.window(s.sg.Windows[s.i], s.buf)
		}
		slices.SortStableFunc(s.buf, func(a, b Request) int { return cmp.Compare(a.At, b.At) })
	}
	r := s.buf[s.pos]
	s.pos++
	return r, nil
}

// tokens rounds a drawn token count; a draw past MaxInt32 (a log-normal
// tail at a mean near the 1e7 cap) saturates instead of wrapping negative.
func tokens(f float64) int32 {
	if f < 0 {
		return Unknown
	}
	return int32(math.Min(math.Round(f), math.MaxInt32))
}

func (s *servegenSource) window(w Window, buf []Request) []Request {
	if w.RateRPS <= 0 {
		return buf
	}
	var draw func() float64
	if w.Weibull {
		d := distuv.Weibull{K: w.P1, Lambda: weibullScale(w.P1, w.RateRPS), Src: s.src}
		draw = d.Rand
	} else {
		d := distuv.Gamma{Alpha: w.P1, Beta: w.P1 * w.RateRPS, Src: s.src}
		draw = d.Rand
	}
	mu := math.Log(w.InputTokens) - ServeGenInputSigma*ServeGenInputSigma/2
	end := w.StartS + w.LenS
	t := w.StartS + s.rng.Float64()*draw()
	// Past MaxRequests in all (a burstier draw than the expected count
	// checked in Next), stop: ReadAll refuses the trace at MaxRequests.
	for ; t < end && s.n <= MaxRequests; s.n++ {
		in, out := int32(Unknown), int32(Unknown)
		if w.InputTokens > 0 {
			in = tokens(math.Exp(mu + ServeGenInputSigma*s.rng.NormFloat64()))
		} else if w.InputTokens == 0 {
			in = 0
		}
		if w.OutputTokens >= 0 {
			out = tokens(w.OutputTokens * s.rng.ExpFloat64())
		}
		buf = append(buf, Request{At: time.Duration(t * 1e9), Model: w.Model, InputTokens: in, OutputTokens: out, ExecSeconds: Unknown})
		t += draw()
	}
	return buf
}

// weibullScale is the scale λ of a Weibull of shape k whose mean λ·Γ(1+1/k)
// is 1/rate.
func weibullScale(k, rate float64) float64 {
	return 1 / (rate * math.Gamma(1+1/k))
}

// ServeGenInputSigma is the log-space standard deviation of synthesized
// input lengths (coefficient of variation √(e^{σ²}−1) ≈ 1.31 at σ = 1): an
// assumption standing in for ServeGen's Pareto/log-normal mixture, whose
// heavy tail it approximates.
const ServeGenInputSigma = 1.0
