package replay

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// ServiceModel turns a request into the seconds one slot of a replica is
// busy with it: BaseS + PerInputTokenS·input + PerOutputTokenS·output, or
// the trace's own execution time when it has one.
//
// The default coefficients are assumptions, not measurements: 5,000 prompt
// tokens/s of prefill per slot (0.2 ms/token), 40 output tokens/s per
// stream (25 ms between tokens, a common decode SLO for a 7-13B model on
// one H100-class GPU at moderate batch), 20 ms fixed overhead. The Azure
// traces carry token counts but no service times, so any coefficients are a
// choice; pass measured ones with --prefill-tps/--decode-tps.
type ServiceModel struct {
	// BaseS is the fixed per-request overhead, seconds.
	BaseS float64
	// PerInputTokenS is seconds per prompt token (prefill).
	PerInputTokenS float64
	// PerOutputTokenS is seconds per generated token (decode).
	PerOutputTokenS float64
	// DefaultInputTokens and DefaultOutputTokens stand in for Unknown counts.
	DefaultInputTokens, DefaultOutputTokens int32
	// IgnoreExecTime uses the token model even when the trace has its own
	// execution times, and (copied into ResidencyConfig.IgnoreExecTime) makes
	// the residency replay's requests take no time once their model is READY.
	IgnoreExecTime bool
}

// DefaultServiceModel returns the documented assumptions above; unknown
// token counts default to 1,000 in and 100 out.
func DefaultServiceModel() ServiceModel {
	return ServiceModel{BaseS: 0.02, PerInputTokenS: 1.0 / 5000, PerOutputTokenS: 1.0 / 40, DefaultInputTokens: 1000, DefaultOutputTokens: 100}
}

// Validate reports every field out of range.
func (m ServiceModel) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"BaseS", m.BaseS}, {"PerInputTokenS", m.PerInputTokenS}, {"PerOutputTokenS", m.PerOutputTokenS}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 3600 {
			errs = append(errs, fmt.Errorf("service model %s = %g: want a number of seconds in [0, 3600]", f.name, f.v))
		}
	}
	// All exactly 0, not a sum ≤ 0: a negative one is its own error above.
	if m.BaseS == 0 && m.PerInputTokenS == 0 && m.PerOutputTokenS == 0 {
		errs = append(errs, errors.New("service model: BaseS, PerInputTokenS and PerOutputTokenS are all 0; want at least one > 0 (a positive service time)"))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{{"DefaultInputTokens", m.DefaultInputTokens}, {"DefaultOutputTokens", m.DefaultOutputTokens}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("service model %s = %d: want a token count ≥ 0", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// Seconds is the service time of r.
func (m ServiceModel) Seconds(r Request) float64 {
	if r.ExecSeconds >= 0 && !m.IgnoreExecTime {
		return float64(r.ExecSeconds)
	}
	return m.tokens(float64(r.InputTokens), float64(r.OutputTokens))
}

func (m ServiceModel) tokens(in, out float64) float64 {
	if in < 0 {
		in = float64(m.DefaultInputTokens)
	}
	if out < 0 {
		out = float64(m.DefaultOutputTokens)
	}
	return m.BaseS + m.PerInputTokenS*in + m.PerOutputTokenS*out
}

// PoolConfig describes the simulated pool and the SLO it is judged by.
type PoolConfig struct {
	// Slots is the number of requests one replica serves concurrently.
	Slots int
	// MinReplicas and MaxReplicas bound every policy.
	MinReplicas, MaxReplicas int
	// ColdStart is the time from creating a replica to its being ready.
	// Default 60 s: an assumption (pod scheduling and container start with a
	// cached image, ~23 s median weight load as GenTD26 measured, engine
	// warm-up).
	ColdStart time.Duration
	// ColdStartSamples, when set, replaces ColdStart by draws from an
	// empirical distribution (ReadLoadTimes on GenTD26's
	// basemodel_update_latency_anon.csv).
	ColdStartSamples []time.Duration
	// SLO is the queue-wait objective: a request meets it when it starts
	// service within SLO of its arrival.
	SLO time.Duration
	// SLOTarget is the fraction of requests that must meet SLO, (0, 1].
	SLOTarget float64
	// PricePerGPUHour is the cost of one GPU-hour, dollars.
	PricePerGPUHour float64
	// GPUsPerReplica multiplies replica-hours into GPU-hours.
	GPUsPerReplica int
	// Service is the service-time model.
	Service ServiceModel
	// Seed seeds cold-start draws and synthesized traces.
	Seed uint64
	// ProbeReplicas is the pool size the capacity probe measures μ on
	// (ProbeThroughput); 1 measures one replica.
	ProbeReplicas int
	// InitialReplicas is the pool every policy, the bound and the optimum
	// start from: that many ready replicas at t = 0, sized from nothing the
	// trace holds. Default 1: the smallest pool an HPA keeps (minReplicas
	// ≥ 1) and what KEDA activates a scaled-to-zero target to.
	InitialReplicas int
}

// DefaultPoolConfig returns the documented defaults: 4 slots, 0..10000
// replicas, one ready replica at t = 0, 60 s cold start, 2 s queue-wait SLO for 99 % of requests, $2.50
// per GPU-hour (an assumption close to on-demand H100 list prices in 2025),
// one GPU per replica.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{
		Slots: 4, MinReplicas: 0, MaxReplicas: 10000,
		ColdStart: 60 * time.Second, SLO: 2 * time.Second, SLOTarget: 0.99,
		PricePerGPUHour: 2.5, GPUsPerReplica: 1, Service: DefaultServiceModel(), Seed: 1, ProbeReplicas: 1,
		InitialReplicas: 1,
	}
}

// Validate reports every field out of range.
func (c PoolConfig) Validate() error {
	var errs []error
	if c.Slots < 1 || c.Slots > 1024 {
		errs = append(errs, fmt.Errorf("slots = %d: want 1..1024", c.Slots))
	}
	if c.MinReplicas < 0 || c.MaxReplicas < 1 || c.MaxReplicas > 100000 || c.MinReplicas > c.MaxReplicas {
		errs = append(errs, fmt.Errorf("min/max replicas = %d/%d: want 0 ≤ min ≤ max, 1 ≤ max ≤ 100000", c.MinReplicas, c.MaxReplicas))
	}
	if c.ColdStart < 0 || c.ColdStart > 24*time.Hour {
		errs = append(errs, fmt.Errorf("cold start = %v: want 0..24h", c.ColdStart))
	}
	if c.SLO <= 0 || c.SLO > 24*time.Hour {
		errs = append(errs, fmt.Errorf("slo = %v: want (0, 24h]", c.SLO))
	}
	if !(c.SLOTarget > 0 && c.SLOTarget <= 1) {
		errs = append(errs, fmt.Errorf("slo target = %g: want (0, 1]", c.SLOTarget))
	}
	if math.IsNaN(c.PricePerGPUHour) || c.PricePerGPUHour < 0 || c.PricePerGPUHour > 1e4 {
		errs = append(errs, fmt.Errorf("price = %g: want dollars per GPU-hour in [0, 10000]", c.PricePerGPUHour))
	}
	if c.GPUsPerReplica < 1 || c.GPUsPerReplica > 64 {
		errs = append(errs, fmt.Errorf("gpus per replica = %d: want 1..64", c.GPUsPerReplica))
	}
	if c.ProbeReplicas < 1 || c.ProbeReplicas > 10000 {
		errs = append(errs, fmt.Errorf("probe replicas = %d: want 1..10000", c.ProbeReplicas))
	}
	if c.InitialReplicas < 0 || c.InitialReplicas > c.MaxReplicas {
		errs = append(errs, fmt.Errorf("initial replicas = %d: want 0..max replicas (%d)", c.InitialReplicas, c.MaxReplicas))
	}
	if err := c.Service.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// coldStarter draws cold-start durations, deterministically.
type coldStarter struct {
	fixed   float64
	samples []time.Duration
	rng     *rand.Rand
}

func newColdStarter(c PoolConfig) *coldStarter {
	return &coldStarter{fixed: c.ColdStart.Seconds(), samples: c.ColdStartSamples, rng: rand.New(rand.NewPCG(c.Seed, 0x436f6c64))}
}

func (cs *coldStarter) draw() float64 {
	if len(cs.samples) == 0 {
		return cs.fixed
	}
	return cs.samples[cs.rng.IntN(len(cs.samples))].Seconds()
}

// Workload is a request trace reduced to what the pool simulator needs:
// arrival and service seconds, in arrival order.
type Workload struct {
	Name     string
	ArrivalS []float64
	ServiceS []float64
	// Grid reports coarse timestamps NewWorkload spread (SpreadCoarse).
	Grid Grid
}

// NewWorkload applies the service model to a trace and spreads coarse
// timestamps (SpreadCoarse).
func NewWorkload(tr *Trace, m ServiceModel) *Workload {
	w := &Workload{Name: tr.Name, ArrivalS: make([]float64, len(tr.Requests)), ServiceS: make([]float64, len(tr.Requests))}
	for i, r := range tr.Requests {
		w.ArrivalS[i] = r.At.Seconds()
		w.ServiceS[i] = m.Seconds(r)
	}
	w.Grid = SpreadCoarse(w)
	return w
}

// TotalWorkS is Σ service seconds.
func (w *Workload) TotalWorkS() float64 {
	var s float64
	for _, v := range w.ServiceS {
		s += v
	}
	return s
}

// DurationS is the last arrival, seconds.
func (w *Workload) DurationS() float64 {
	if len(w.ArrivalS) == 0 {
		return 0
	}
	return w.ArrivalS[len(w.ArrivalS)-1]
}
