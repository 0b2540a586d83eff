package decision

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// RatePoint is one fresh sample of the rate signal kept for the forecast.
type RatePoint struct {
	AtUnixNano int64   // the sample's evaluation time, Unix nanoseconds
	Rate       float64 // λ, requests per second
}

// maxRatePoints bounds the rate history (a 1 s poll over a 2 min window).
const maxRatePoints = 128

// forecastWindow is how much rate history the forecast fits: two horizons,
// at least two minutes (eight samples of a 15 s poll), so that the trend
// is fitted over more time than it is extrapolated.
func forecastWindow(h time.Duration) time.Duration { return max(2*h, 2*time.Minute) }

// forecastRate is λ_H, the arrival rate the pool must meet when a replica
// started now becomes ready, H = horizon ahead:
//
//	λ_H = λ_now + H · max(0, b) + t_{q, m−2} · s · √(1 + 1/m + (x_H − x̄)²/Sxx)
//
// b is the least-squares slope of the rate over the window's samples, the
// current one included; s, x̄ and Sxx are the residual standard deviation,
// mean time and time spread of the least-squares fit over the m earlier
// samples (m ≥ 3), x_H = now + H, and t_{q, m−2} is the q-quantile of
// Student's t with m − 2 degrees of freedom (q = sloQuantile; s has m − 2).
// The last term is the textbook upper prediction bound of a new observation
// from a straight-line fit (Montgomery, Peck and Vining, Introduction to
// Linear Regression Analysis, §2.5, whose interval takes t_{α/2, n−2}: with
// few samples the spread is itself uncertain, and the normal quantile
// Φ⁻¹(q) would under-cover — at q = 0.99 and m = 7, 2.33 against 3.36),
// applied to the persistence forecast λ_now plus the rising part of the
// trend: a falling trend never lowers λ_H
// below λ_now, because scaling down needs no look-ahead. The spread comes
// from the earlier samples only, so that λ_H never falls as λ_now rises.
// Every term saturates at +Inf; λ_H is never NaN.
func forecastRate(hist []RatePoint, now time.Time, lambda float64, horizon time.Duration, q float64) float64 {
	h := horizon.Seconds()
	n := len(hist)
	if n < 2 {
		return lambda
	}
	x := func(i int) float64 { return float64(hist[i].AtUnixNano-now.UnixNano()) / 1e9 }
	slope := func(m int) (b, xm, ym, sxx float64) {
		for i := range m {
			xm += x(i)
			ym += hist[i].Rate
		}
		xm, ym = xm/float64(m), ym/float64(m)
		var sxy float64
		for i := range m {
			dx := x(i) - xm
			sxx += dx * dx
			sxy += dx * (hist[i].Rate - ym)
		}
		if sxx == 0 {
			return 0, xm, ym, 0
		}
		return sxy / sxx, xm, ym, sxx
	}
	out := lambda
	if b, _, _, _ := slope(n); b > 0 && !math.IsNaN(b) {
		out += h * b
	}
	if m := n - 1; m >= 3 && q > 0.5 && q < 1 {
		b, xm, ym, sxx := slope(m)
		if sxx > 0 && !math.IsNaN(b) && !math.IsInf(b, 0) {
			var sse float64
			for i := range m {
				r := hist[i].Rate - (ym + b*(x(i)-xm))
				sse += r * r
			}
			s := math.Sqrt(sse / float64(m-2))
			if s > 0 && !math.IsNaN(s) {
				dx := h - xm
				out += tQuantile(q, m-2) * s * math.Sqrt(1+1/float64(m)+dx*dx/sxx)
			}
		}
	}
	if math.IsNaN(out) {
		return math.Inf(1) // an overflowing history (Inf − Inf); never below λ_now
	}
	return out
}

// tKey is one (q, degrees of freedom) pair of tQuantile's cache.
type tKey struct {
	q  float64
	df int
}

var (
	tCache  sync.Map // tKey → float64
	tCached atomic.Int32
)

// tCacheMax bounds tQuantile's cache: degrees of freedom are below
// maxRatePoints, so it holds every one for 32 distinct sloQuantile values;
// past it a quantile is computed each time (about 16 µs), never stored.
const tCacheMax = 32 * maxRatePoints

// tQuantile is t_{q, df}, the q-quantile of Student's t with df degrees of
// freedom (gonum's distuv.StudentsT), memoized: computing it costs about as
// much as the rest of a decision.
func tQuantile(q float64, df int) float64 {
	k := tKey{q, df}
	if v, ok := tCache.Load(k); ok {
		return v.(float64)
	}
	v := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(q)
	if tCached.Load() < tCacheMax {
		if _, loaded := tCache.LoadOrStore(k, v); !loaded {
			tCached.Add(1)
		}
	}
	return v
}
