package replay

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Policy families Compare knows, in report order.
const (
	FamilyInferscale  = "inferscale"
	FamilyHPAGPU      = "hpa-gpu"
	FamilyKEDAQueue   = "keda-queue"
	FamilyKnative     = "knative"
	FamilyStatic      = "static"
	FamilyClairvoyant = "clairvoyant"
)

// Families lists every policy family.
func Families() []string {
	return []string{FamilyInferscale, FamilyHPAGPU, FamilyKEDAQueue, FamilyKnative, FamilyStatic, FamilyClairvoyant}
}

// Sweep grids: each baseline is reported at its cheapest setting that meets
// the SLO, so that none is a straw man.
var (
	HPAGPUTargets    = []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	KEDAQueueTargets = []float64{1, 2, 4, 8, 16, 32, 64}
	KnativeTargets   = []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}
	// KnativeScaleDownDelays are the scale-down-delay settings swept with
	// KnativeTargets and min-scale 0 and 1: Knative's default (0) and 5 min.
	KnativeScaleDownDelays = []time.Duration{0, 5 * time.Minute}
	// ClairvoyantHeadroom multiplies the oracle's fluid need.
	ClairvoyantHeadroom = []float64{1, 1.1, 1.25, 1.5, 2}
	// InferscaleTargetUtilizations (ρ) × InferscaleActivityTargets is the
	// grid of the "inferscale (tuned)" row; every other field keeps its
	// default. The defaults row (ρ 0.8, activityTarget 0.7) is run and
	// reported as it is, untuned.
	InferscaleTargetUtilizations = []float64{0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}
	InferscaleActivityTargets    = []float64{0.5, 0.7, 0.9}
)

// InferscaleTuned names the row of inferscale at its cheapest setting on
// the InferscaleTargetUtilizations × InferscaleActivityTargets grid that
// meets the SLO (part of FamilyInferscale).
const InferscaleTuned = "inferscale (tuned)"

// Mode selects the simulator.
type Mode string

// Simulator modes.
const (
	ModeRequest Mode = "request"
	ModeBinned  Mode = "binned"
)

// Workloads is one trace prepared for Compare: Requests for per-request
// mode, Bins for binned mode (exactly one is set).
type Workloads struct {
	Name     string
	Requests *Workload
	Bins     *Binned
}

// Comparison is the outcome of Compare.
type Comparison struct {
	Trace string
	Mode  Mode
	Pool  PoolConfig
	// Requests and DurationS describe the trace.
	Requests  float64
	DurationS float64
	// MuRPS is the probed replicaThroughput given to inferscale.
	MuRPS float64
	// LowerBoundGPUHours is Σ service time ÷ slots: no policy can use fewer.
	LowerBoundGPUHours float64
	// Best holds one result per family: inferscale at its defaults as run,
	// then inferscale (tuned) and each swept baseline at its cheapest
	// setting that meets the SLO (or, when none does, its highest
	// attainment).
	Best []Result
	// All holds every run, sweeps included.
	All []Result
	// Note is printed after the table header (e.g. rows the reader skipped).
	Note string
}

// ErrEmptyTrace is returned for a trace without requests.
var ErrEmptyTrace = errors.New("trace has no requests")

// Compare runs the chosen policy families on the workload.
// progress, when set, is called after each simulation run.
func Compare(cfg PoolConfig, wl Workloads, families []string, progress func(done, total int)) (*Comparison, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, f := range families {
		if !slices.Contains(Families(), f) {
			return nil, fmt.Errorf("policy %q: want one of %s", f, strings.Join(Families(), ","))
		}
	}
	c := &Comparison{Trace: wl.Name, Pool: cfg}
	var (
		run   func(Controller, runOptions) Result
		work  []float64
		mix   []float64
		dur   float64
		total float64
	)
	switch {
	case wl.Requests != nil:
		w := wl.Requests
		if len(w.ArrivalS) == 0 {
			return nil, ErrEmptyTrace
		}
		c.Mode, c.Requests, dur, total = ModeRequest, float64(len(w.ArrivalS)), w.DurationS(), w.TotalWorkS()
		run = func(ctl Controller, o runOptions) Result { return simulateRequests(cfg, w, ctl, o) }
		work = workPerSecond(w)
		mix = w.ServiceS
	case wl.Bins != nil:
		b := wl.Bins
		if b.TotalRequests() == 0 {
			return nil, ErrEmptyTrace
		}
		c.Mode, c.Requests, dur, total = ModeBinned, b.TotalRequests(), float64(len(b.Arrivals)), b.TotalWorkS()
		run = func(ctl Controller, o runOptions) Result { return simulateBinned(cfg, b, ctl, o) }
		work = b.WorkS
		mix = binnedMix(b, 20000, cfg.Seed)
	default:
		return nil, ErrEmptyTrace
	}
	need := needPerSecond(work, cfg.Slots, cfg.SLO, 1)
	c.DurationS = dur
	c.LowerBoundGPUHours = total / float64(cfg.Slots) / 3600 * float64(cfg.GPUsPerReplica)
	lead := cfg.ColdStart
	if len(cfg.ColdStartSamples) > 0 {
		lead = quantileDur(cfg.ColdStartSamples, 0.9)
	}
	leadS := int(math.Ceil(lead.Seconds()))
	initial := 0
	// Every run starts warm, with the replicas the first five minutes (or
	// the first cold start, if longer) need, so that no policy pays for the
	// simulation starting from nothing.
	for t := 0; t <= max(leadS, 300) && t < len(need); t++ {
		initial = max(initial, need[t])
	}
	initial = max(initial, 1)
	opt := defaultRunOptions(dur, initial)

	peak := slices.Max(need)
	steps := 0
	for _, f := range families {
		switch f {
		case FamilyInferscale:
			steps += 1 + len(InferscaleTargetUtilizations)*len(InferscaleActivityTargets)
		case FamilyClairvoyant:
			steps += len(ClairvoyantHeadroom)
		case FamilyHPAGPU:
			steps += len(HPAGPUTargets)
		case FamilyKEDAQueue:
			steps += 4 * len(KEDAQueueTargets)
		case FamilyKnative:
			steps += 2 * len(KnativeScaleDownDelays) * len(KnativeTargets)
		case FamilyStatic:
			steps += bits(peak*2 + 1)
		}
	}
	done := 0
	exec := func(p Policy) Result {
		r := run(p.New(), opt)
		r.Policy, r.Setting = p.Name, p.Setting
		c.All = append(c.All, r)
		done++
		if progress != nil {
			progress(done, steps)
		}
		return r
	}
	sweep := func(ps []Policy) Result {
		var best Result
		found := false
		for _, p := range ps {
			r := exec(p)
			switch {
			case !found && r.MeetsSLO:
				best, found = r, true
			case found && r.MeetsSLO && r.ReplicaSeconds < best.ReplicaSeconds:
				best = r
			case !found && (best.Policy == "" || r.Attainment() > best.Attainment()):
				best = r
			}
		}
		return best
	}
	for _, f := range families {
		switch f {
		case FamilyInferscale:
			c.MuRPS = ProbeThroughput(cfg, mix)
			c.Best = append(c.Best, exec(InferscalePolicy(c.MuRPS, cfg, ChartHPABehavior())))
			var ps []Policy
			for _, rho := range InferscaleTargetUtilizations {
				for _, a := range InferscaleActivityTargets {
					ps = append(ps, InferscaleTunedPolicy(c.MuRPS, rho, a, cfg, ChartHPABehavior()))
				}
			}
			c.Best = append(c.Best, sweep(ps))
		case FamilyHPAGPU:
			var ps []Policy
			for _, v := range HPAGPUTargets {
				ps = append(ps, HPAGPUPolicy(v, cfg))
			}
			c.Best = append(c.Best, sweep(ps))
		case FamilyKEDAQueue:
			var ps []Policy
			for _, inFlight := range []bool{false, true} {
				for _, m := range []int{0, 1} {
					for _, v := range KEDAQueueTargets {
						ps = append(ps, KEDAQueuePolicy(v, m, inFlight, cfg))
					}
				}
			}
			c.Best = append(c.Best, sweep(ps))
		case FamilyKnative:
			var ps []Policy
			for _, d := range KnativeScaleDownDelays {
				for _, m := range []int{0, 1} {
					for _, v := range KnativeTargets {
						ps = append(ps, KnativePolicy(v, m, d, cfg))
					}
				}
			}
			c.Best = append(c.Best, sweep(ps))
		case FamilyStatic:
			// The smallest fixed count meeting the SLO, by bisection
			// (attainment grows with the count).
			lo, hi := 1, max(1, min(cfg.MaxReplicas, peak*2))
			var best Result
			bestN := -1
			for lo <= hi {
				mid := (lo + hi) / 2
				o := opt
				o.initial = mid
				p := StaticPolicy(mid)
				r := run(p.New(), o)
				r.Policy, r.Setting = p.Name, p.Setting
				c.All = append(c.All, r)
				done++
				if progress != nil {
					progress(done, steps)
				}
				if r.MeetsSLO {
					best, bestN, hi = r, mid, mid-1
				} else {
					lo = mid + 1
					if bestN < 0 && (best.Policy == "" || r.Attainment() > best.Attainment()) {
						best = r
					}
				}
			}
			c.Best = append(c.Best, best)
		case FamilyClairvoyant:
			var ps []Policy
			for _, h := range ClairvoyantHeadroom {
				ps = append(ps, ClairvoyantPolicy(needPerSecond(work, cfg.Slots, cfg.SLO, h), lead, h))
			}
			c.Best = append(c.Best, sweep(ps))
		}
	}
	if progress != nil {
		progress(steps, steps)
	}
	return c, nil
}

func bits(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

func quantileDur(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// binnedMix draws n service times from a binned workload, each second's
// mean service time weighted by its arrivals.
func binnedMix(b *Binned, n int, seed uint64) []float64 {
	cum := make([]float64, len(b.Arrivals))
	var s float64
	for i, a := range b.Arrivals {
		s += a
		cum[i] = s
	}
	rng := rand.New(rand.NewPCG(seed, 0x4d6978))
	out := make([]float64, n)
	for i := range out {
		k, _ := slices.BinarySearch(cum, rng.Float64()*s)
		k = min(k, len(cum)-1)
		for b.Arrivals[k] == 0 {
			k++
		}
		out[i] = b.WorkS[k] / b.Arrivals[k]
	}
	return out
}

// ProbeThroughput measures μ, the request rate one replica sustains while
// meeting the queue-wait SLO for the SLOTarget share of requests: Poisson
// arrivals with service times resampled from mix (the trace's own request
// mix) are offered to a fixed pool of cfg.ProbeReplicas replicas (1 by
// default: one replica, as the scaler's replicaThroughput is defined), the
// rate is found by bisection between 0 and the pool's raw capacity
// replicas·slots ÷ mean service, and the highest rate that holds the SLO,
// divided by the replicas, is returned. The same random draws are rescaled
// at every rate (common random numbers), so attainment falls monotonically
// with the rate. Deterministic for cfg.Seed.
func ProbeThroughput(cfg PoolConfig, mix []float64) float64 {
	const n = 20000
	k := max(1, cfg.ProbeReplicas)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x50726f6265))
	gaps := make([]float64, n)
	svc := make([]float64, n)
	var mean float64
	for _, v := range mix {
		mean += v
	}
	mean /= float64(len(mix))
	for i := range n {
		gaps[i] = rng.ExpFloat64()
		svc[i] = mix[rng.IntN(len(mix))]
	}
	pool := cfg
	pool.MinReplicas, pool.MaxReplicas = k, k
	w := &Workload{ArrivalS: make([]float64, n), ServiceS: svc}
	holds := func(rate float64) bool {
		t := 0.0
		for i, g := range gaps {
			t += g / rate
			w.ArrivalS[i] = t
		}
		r := simulateRequests(pool, w, &staticCtl{n: k}, runOptions{initial: k, sampleStepS: 60, maxOverrunS: 3600, noSeries: true})
		return r.Attainment() >= cfg.SLOTarget
	}
	lo, hi := 0.0, float64(k*cfg.Slots)/mean
	for range 30 {
		mid := (lo + hi) / 2
		if holds(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo / float64(k)
}
