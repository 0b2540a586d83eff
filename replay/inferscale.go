package replay

import (
	"fmt"
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
type inferscaleCtl struct {
	p    decision.Policy
	st   decision.State
	last decision.Recommendation
	hpa  hpa
	keda keda
}

// InferscalePolicy returns the scaler's DefaultPolicy with
// replicaThroughput mu (req/s per replica), targetUtilization rho (0 keeps
// the default, decision.DefaultPolicy().TargetUtilization), the pool's
// bounds, and the replay's queue, rate and activity signals.
func InferscalePolicy(mu, rho float64, cfg PoolConfig) Policy {
	p := decision.DefaultPolicy()
	if rho > 0 {
		p.TargetUtilization = rho
	}
	p.ReplicaThroughput = mu
	p.QueueQuery, p.RateQuery, p.ActivityQuery = "replay_queue", "replay_rate", "replay_activity"
	p.MinReplicas, p.MaxReplicas = int32(cfg.MinReplicas), int32(cfg.MaxReplicas)
	setting := fmt.Sprintf("targetUtilization %g, μ=%.3g/s", p.TargetUtilization, mu)
	return Policy{Name: FamilyInferscale, Setting: setting, New: func() Controller {
		return &inferscaleCtl{p: p, hpa: hpa{b: ChartHPABehavior(), max: cfg.MaxReplicas}, keda: keda{polling: 15 * time.Second, cooldown: 300 * time.Second}}
	}}
}

func (c *inferscaleCtl) Interval() time.Duration { return 15 * time.Second }

func (c *inferscaleCtl) Desired(s Signals) int {
	now := t0.Add(s.Now)
	smp := func(v float64) decision.Sample { return decision.Sample{Value: v, EvaluatedAt: now} }
	var obs decision.Observation
	obs.Samples[decision.SignalQueue] = smp(s.Queue)
	obs.Samples[decision.SignalRate] = smp(s.Rate1m)
	obs.Samples[decision.SignalActivity] = smp(s.Activity)
	obs.ReadyReplicas, obs.ReadyKnown = int32(s.Ready), true
	obs.CurrentReplicas, obs.CurrentKnown = int32(s.Current), true
	obs.MinReplicas, obs.MaxReplicas, obs.BoundsKnown = c.p.MinReplicas, c.p.MaxReplicas, true
	c.last, c.st = decision.Recommend(c.p, obs, c.st, now)
	return c.keda.step(s.Now, s.Current, func() bool { return c.last.Active }, func() int {
		n := int(c.last.Replicas)
		return c.hpa.step(s.Now, s.Current, c.hpa.ratioDesired(s.Current, float64(n)/float64(max(1, s.Current)), n))
	})
}
