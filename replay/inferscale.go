package replay

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inferscale/inferscale/scaler/decision"
)

// This file is the one place that drives inferscale's decision code from the
// simulated pool: it builds decision.Policy and decision.Observation from
// Signals and calls decision.Recommend.

// t0 anchors simulated time for the scaler, whose API takes wall-clock times.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// inferscaleCtl drives decision.Recommend (the live scaler's pure decision)
// through KEDA and the HPA exactly as the chart's ScaledObject (metricType
// AverageValue, target 1, pollingInterval 15 s, cooldownPeriod 300 s)
// would: KEDA polls IsActive every 15 s and scales 0 ↔ 1 with a 300 s
// cooldown; the HPA syncs every 15 s, sets ceil(metric/1) replicas with
// the chart's tolerance 0 and behaviour (ChartHPABehavior).
//
// The decision sees the simulated engine as the scaler sees a real one:
//   - queue, rate (1 min), running and activity as the simulator reports
//     them (the presets' gauges and rate()),
//   - S, the mean service time, as the presets compute it from the
//     engine's counters, which count a request when it completes: the last
//     minute's mean weighed against the last ten minutes' by the minute's
//     completions (Signals.ServiceTime, prom.ServiceTimePriorCompletions).
//     With nothing completed in ten minutes the ratio is 0/0, NaN in
//     Prometheus, an invalid sample here, and the last good S holds;
//   - I, the dispersion, as the preset's subqueries compute it: the
//     one-minute rate sampled once a minute, the last eleven samples,
//     30 × the median of the ten squared successive differences ÷
//     (0.4549 × the mean of the last ten rates) (missing with fewer than
//     two samples or a zero mean);
//   - H, the cold start, as scaler/kube measures it from pods (creation to
//     Ready): the pool's cold start, or the 0.9 quantile of its cold-start
//     samples;
//   - k = the pool's slots. No replicaThroughput: no μ probe.
type inferscaleCtl struct {
	p    decision.Policy
	st   decision.State
	last decision.Recommendation
	hpa  hpa
	keda keda

	coldStart time.Duration
	minute    []float64 // Rate1m once a minute, the last DispersionSamples

	// withUnique: the policy has a uniqueRateQuery, and unique is its last
	// reading (retryCappedCtl sets both).
	withUnique bool
	unique     float64
}

// DispersionSamples is how many one-minute rate samples the dispersion
// reads: the ten of the preset's [10m:1m] subqueries (prom.DispersionSpan)
// and the one a window before the first, which its offset 1m reads.
const DispersionSamples = 11

// dispersionMedianChi2 is the median of χ²₁, prom.DispersionMedianChi2.
const dispersionMedianChi2 = 0.4549

// InferscalePolicy returns the scaler's DefaultPolicy (T = 2 s, q = 0.99,
// the decision's windows and guards) with k = the pool's slots, every
// signal the presets read, the pool's bounds, and targetUtilization rho as
// its optional cap (rho ≥ 1 or ≤ 0: no cap, the default). mu is not used:
// the decision measures the service time, it is given no throughput.
func InferscalePolicy(mu, rho float64, cfg PoolConfig) Policy {
	_ = mu
	p := decision.DefaultPolicy()
	if rho > 0 && rho < 1 {
		p.TargetUtilization = rho
	}
	p.ReplicaConcurrency = int32(max(1, cfg.Slots))
	p.QueueQuery, p.RateQuery, p.ActivityQuery = "replay_queue", "replay_rate", "replay_activity"
	p.RunningQuery, p.ServiceTimeQuery, p.DispersionQuery = "replay_running", "replay_service_time", "replay_dispersion"
	p.MinReplicas, p.MaxReplicas = int32(cfg.MinReplicas), int32(cfg.MaxReplicas)
	setting := "defaults (T 2s, q 0.99, no cap)"
	if p.TargetUtilization > 0 {
		setting = fmt.Sprintf("targetUtilization cap %g", p.TargetUtilization)
	}
	h := measuredColdStart(cfg)
	return Policy{Name: FamilyInferscale, Setting: setting, New: func() Controller {
		return &inferscaleCtl{p: p, hpa: hpa{b: ChartHPABehavior(), max: cfg.MaxReplicas},
			keda: keda{polling: 15 * time.Second, cooldown: 300 * time.Second}, coldStart: h}
	}}
}

// measuredColdStart is H as scaler/kube would measure it on the simulated
// pool: its fixed cold start, or the 0.9 quantile (nearest rank) of its
// cold-start samples.
func measuredColdStart(cfg PoolConfig) time.Duration {
	if len(cfg.ColdStartSamples) == 0 {
		return cfg.ColdStart
	}
	s := slices.Clone(cfg.ColdStartSamples)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(0.9*float64(len(s))))-1)]
}

func (c *inferscaleCtl) Interval() time.Duration { return 15 * time.Second }

func (c *inferscaleCtl) Desired(s Signals) int {
	now := t0.Add(s.Now)
	smp := func(v float64) decision.Sample { return decision.Sample{Value: v, EvaluatedAt: now} }
	missing := decision.Sample{Empty: true, EvaluatedAt: now}

	if s.Now%time.Minute == 0 {
		c.minute = append(c.minute, s.Rate1m)
		if len(c.minute) > DispersionSamples {
			c.minute = c.minute[1:]
		}
	}

	var obs decision.Observation
	obs.Samples[decision.SignalQueue] = smp(s.Queue)
	obs.Samples[decision.SignalRate] = smp(s.Rate1m)
	if c.withUnique {
		obs.Samples[decision.SignalUniqueRate] = smp(c.unique)
	}
	obs.Samples[decision.SignalActivity] = smp(s.Activity)
	obs.Samples[decision.SignalRunning] = smp(s.Running)
	obs.Samples[decision.SignalServiceTime] = missing
	if s.ServiceTime > 0 {
		obs.Samples[decision.SignalServiceTime] = smp(s.ServiceTime)
	}
	obs.Samples[decision.SignalDispersion] = missing
	if d, ok := dispersion(c.minute); ok {
		obs.Samples[decision.SignalDispersion] = smp(d)
	}
	obs.ColdStart, obs.ColdStartKnown = c.coldStart, c.coldStart > 0
	obs.ReadyReplicas, obs.ReadyKnown = int32(s.Ready), true
	obs.CurrentReplicas, obs.CurrentKnown = int32(s.Current), true
	obs.MinReplicas, obs.MaxReplicas, obs.BoundsKnown = c.p.MinReplicas, c.p.MaxReplicas, true
	c.last, c.st = decision.Recommend(c.p, obs, c.st, now)
	return c.keda.step(s.Now, s.Current, func() bool { return c.last.Active }, func() int {
		n := int(c.last.Replicas)
		return c.hpa.step(s.Now, s.Current, c.hpa.ratioDesired(s.Current, float64(n)/float64(max(1, s.Current)), n))
	})
}

// dispersion is the preset's index of dispersion of one-minute counts from
// the last DispersionSamples one-minute rates, oldest first:
//
//	I = 30 · median((r_{i+1} − r_i)²) ÷ (0.4549 · mean(r))
//
// over every successive difference and the last DispersionSamples−1 rates
// (the preset's [10m:1m] subqueries and offset 1m; prom.DispersionWindow's
// doc gives the derivation). The median of an even count interpolates the
// middle two, as quantile_over_time(0.5) does. ok is false with fewer than
// two samples or a zero mean (PromQL's 0/0).
func dispersion(rates []float64) (float64, bool) {
	if len(rates) < 2 {
		return 0, false
	}
	last := rates[max(0, len(rates)-(DispersionSamples-1)):]
	var mean float64
	for _, r := range last {
		mean += r
	}
	mean /= float64(len(last))
	if !(mean > 0) {
		return 0, false
	}
	sq := make([]float64, len(rates)-1)
	for i := range sq {
		d := rates[i+1] - rates[i]
		sq[i] = d * d
	}
	slices.Sort(sq)
	return 30 * median(sq) / (dispersionMedianChi2 * mean), true
}

// median is PromQL's quantile(0.5) of sorted, non-empty values: rank
// 0.5·(n−1), interpolating linearly between the two nearest.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
