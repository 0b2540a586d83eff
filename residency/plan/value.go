package plan

import (
	"math"
	"time"
)

// DefaultHalfLife is the half-life of the decayed demand estimate (DecayedRate): a request that
// arrived this long ago weighs half as much as one arriving now. Ten minutes is the keep-alive
// horizon that serverless platforms use for idle instances and that Shahrad et al. ("Serverless
// in the Wild", USENIX ATC 2020, §4) found to cover most inter-arrival gaps of the Azure Functions
// population; a model unused for several half-lives is worth little, one used within one
// half-life keeps most of its weight. It is a property of the demand, not of the trace replayed,
// and is not tuned to one.
const DefaultHalfLife = 10 * time.Minute

// AntiThrashFactor k sets each model's minimum residency to k × its load time (MinResidency):
// a model that took L to load is never evicted before it has been resident k·L. With k = 1 the
// slot spends at most half its time loading — the break-even rule of rent-or-buy (ski rental:
// keep what you paid for until the rent equals the price), whose deterministic strategy is
// 2-competitive (Karlin, Manasse, Rudolph and Sleator, "Competitive snoopy caching",
// Algorithmica 3, 1988). It bounds the loads of one slot to 3600 s ÷ (2·L) per hour whatever the
// demand does.
const AntiThrashFactor = 1

// DecayedRate is a model's expected request rate as a decayed count of its arrivals — LRFU's
// combined recency and frequency (Lee et al., "LRFU: a spectrum of policies that subsumes the
// least recently used and least frequently used policies", IEEE Trans. Computers 50(12), 2001)
// with weighing function F(x) = 2^(−x/H) for a request x seconds old and half-life H:
//
//	CRF(t) = Σ_i 2^(−(t − t_i)/H),   rate(t) = CRF(t) · ln 2 / H  (req/s)
//
// A steady rate r gives CRF → r·H/ln 2, so Rate returns r; after the arrivals stop it halves
// every H. The zero value has seen no request. It is a value: Add returns the updated estimate.
// Work in flight is not an arrival: the planner weighs it separately (ModelStatus.InFlight,
// Decide).
type DecayedRate struct {
	// CRF is the decayed count as of At.
	CRF float64
	// At is when CRF was last brought up to date (zero: never).
	At time.Time
}

// Add returns d with n requests arriving at at (n ≤ 0 only brings the decay up to date). An at
// before d.At counts the requests at d.At (a clock that stepped back ages nothing).
func (d DecayedRate) Add(n float64, at time.Time, halfLife time.Duration) DecayedRate {
	d.CRF = d.decayed(at, halfLife)
	if at.After(d.At) || d.At.IsZero() {
		d.At = at
	}
	if n > 0 && !math.IsInf(n, 0) {
		d.CRF += n
	}
	return d
}

func (d DecayedRate) decayed(now time.Time, halfLife time.Duration) float64 {
	if d.At.IsZero() || !now.After(d.At) || halfLife <= 0 {
		return d.CRF
	}
	return d.CRF * math.Exp2(-now.Sub(d.At).Seconds()/halfLife.Seconds())
}

// Rate is the expected request rate at now in req/s: CRF decayed to now × ln 2 / halfLife.
func (d DecayedRate) Rate(now time.Time, halfLife time.Duration) float64 {
	if halfLife <= 0 {
		return 0
	}
	return d.decayed(now, halfLife) * math.Ln2 / halfLife.Seconds()
}

// DecayedMean is a mean that weighs each sample by its recency, 2^(−x/H) for a sample x seconds
// old with half-life H, as DecayedRate weighs arrivals:
//
//	mean(t) = Σ_i 2^(−(t − t_i)/H)·v_i ÷ Σ_i 2^(−(t − t_i)/H)
//
// Both sums decay by the same factor, so the mean changes only when a sample arrives. The zero
// value has no sample (Mean 0). It is a value: Add returns the updated mean.
type DecayedMean struct {
	// Sum and Weight are the decayed sums of the samples and of their weights as of At.
	Sum, Weight float64
	// At is when the last sample arrived (zero: never).
	At time.Time
}

// Add returns d with the sample v taken at at. NaN, negative samples and samples above
// MaxDecayedSample are ignored (so the mean stays a non-negative time a time.Duration holds);
// an at before d.At counts the sample at d.At.
func (d DecayedMean) Add(v float64, at time.Time, halfLife time.Duration) DecayedMean {
	if !(v >= 0 && v <= MaxDecayedSample) {
		return d
	}
	if !d.At.IsZero() && at.After(d.At) && halfLife > 0 {
		f := math.Exp2(-at.Sub(d.At).Seconds() / halfLife.Seconds())
		d.Sum, d.Weight = d.Sum*f, d.Weight*f
	}
	if at.After(d.At) || d.At.IsZero() {
		d.At = at
	}
	d.Sum += v
	d.Weight++
	return d
}

// MaxDecayedSample bounds a DecayedMean's samples: 10⁹ (about 31.7 years in seconds), far
// above any wait and far below what a time.Duration holds (292 years).
const MaxDecayedSample = 1e9

// Mean is the decayed mean of the samples (0 with none). Without new samples it stays where it
// is: the half-life weighs samples against each other, it does not age the mean itself.
func (d DecayedMean) Mean() float64 {
	if d.Weight <= 0 {
		return 0
	}
	return d.Sum / d.Weight
}

// MinResidency is the time a model must stay loaded before it may be evicted: the larger of the
// catalog's minResidency (an operator's floor; 0 by default) and AntiThrashFactor × its load
// time. A busy model (queued or executing requests) is protected beyond it.
func MinResidency(cat Catalog, m Model) time.Duration {
	return max(cat.MinResidency, AntiThrashFactor*m.LoadTime)
}

// IdleTimeout is how long a P1/P2 model must go unused before a plan with Budget.FreeIdle
// unloads it though no other model needs the memory: the larger of the catalog's idleTimeout
// and AntiThrashFactor × its load time (an idle unload followed by a reload must not cost more
// load time than the idleness it freed). Without FreeIdle idle models are never unloaded for
// idleness: they go when a model of higher value needs their memory.
func IdleTimeout(cat Catalog, m Model) time.Duration {
	return max(cat.IdleTimeout, AntiThrashFactor*m.LoadTime)
}
