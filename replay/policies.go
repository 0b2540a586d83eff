package replay

import (
	"fmt"
	"math"
	"time"

	"github.com/inferscale/inferscale/scaler/decision"
)

// Policy names a controller family and one setting of it. New builds a
// fresh controller for one run.
type Policy struct {
	Name    string
	Setting string
	New     func() Controller
}

// t0 anchors simulated time for the scaler, whose API takes wall-clock times.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// inferscaleCtl drives scaler.Recommend (the live scaler's pure decision)
// through KEDA and the HPA exactly as the chart's ScaledObject (metricType
// AverageValue, target 1, pollingInterval 15 s, cooldownPeriod 300 s)
// would: KEDA polls IsActive every 15 s and scales 0 ↔ 1 with a 300 s
// cooldown; the HPA syncs every 15 s, sets ceil(metric/1) replicas, skips
// changes within its 10 % tolerance, and applies the chart's behaviour
// (ChartHPABehavior).
type inferscaleCtl struct {
	p     decision.Policy
	st    decision.State
	last  decision.Recommendation
	hpa   hpa
	keda  keda
	slots int
}

// InferscalePolicy returns the scaler's DefaultPolicy with replicaThroughput
// μ (req/s per replica), the pool's bounds, and queue, rate and activity
// signals configured; hb is the HPA behaviour of the generated HPA.
func InferscalePolicy(mu float64, cfg PoolConfig, hb HPABehavior) Policy {
	return inferscalePolicy(replayPolicy(mu, cfg), FamilyInferscale, fmt.Sprintf("defaults, μ=%.3g/s", mu), cfg, hb)
}

// InferscaleTunedPolicy is InferscalePolicy with targetUtilization ρ and
// activityTarget set to rho and activityTarget (both in (0, 1]); every
// other field keeps its default. Compare sweeps it over
// InferscaleTargetUtilizations × InferscaleActivityTargets, as it sweeps
// the baselines, for the "inferscale (tuned)" row.
func InferscaleTunedPolicy(mu, rho, activityTarget float64, cfg PoolConfig, hb HPABehavior) Policy {
	p := replayPolicy(mu, cfg)
	p.TargetUtilization, p.ActivityTarget = rho, activityTarget
	return inferscalePolicy(p, InferscaleTuned, fmt.Sprintf("ρ=%g, activityTarget=%g, μ=%.3g/s", rho, activityTarget, mu), cfg, hb)
}

// replayPolicy is DefaultPolicy with μ, the pool's bounds and the replay's
// queue, rate and activity signals.
func replayPolicy(mu float64, cfg PoolConfig) decision.Policy {
	p := decision.DefaultPolicy()
	p.ReplicaThroughput = mu
	p.QueueQuery, p.RateQuery, p.ActivityQuery = "replay_queue", "replay_rate", "replay_activity"
	p.MinReplicas, p.MaxReplicas = int32(cfg.MinReplicas), int32(cfg.MaxReplicas)
	return p
}

func inferscalePolicy(p decision.Policy, name, setting string, cfg PoolConfig, hb HPABehavior) Policy {
	return Policy{Name: name, Setting: setting, New: func() Controller {
		return &inferscaleCtl{p: p, hpa: hpa{b: hb, max: cfg.MaxReplicas}, keda: keda{polling: 15 * time.Second, cooldown: 300 * time.Second}, slots: cfg.Slots}
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
		return c.hpa.step(s.Now, s.Current, c.hpa.ratioDesired(s.Current, float64(n)/float64(s.Current), n))
	})
}

// hpaGPUCtl is an HPA on GPU utilisation (DCGM engine activity through
// prometheus-adapter as a Pods metric): desired = ceil(Σ activity over
// ready pods / target); pods still starting report nothing and count as 0
// on scale-up, as the HPA treats missing pods. minReplicas 1; sync 15 s.
type hpaGPUCtl struct {
	target float64
	hpa    hpa
}

// HPAGPUPolicy returns an HPA on GPU utilisation with the given target.
func HPAGPUPolicy(target float64, cfg PoolConfig) Policy {
	return Policy{Name: "hpa-gpu", Setting: fmt.Sprintf("target %.0f%%", target*100), New: func() Controller {
		return &hpaGPUCtl{target: target, hpa: hpa{b: DefaultHPABehavior(), max: cfg.MaxReplicas}}
	}}
}

func (c *hpaGPUCtl) Interval() time.Duration { return 15 * time.Second }

func (c *hpaGPUCtl) Desired(s Signals) int {
	cur := max(s.Current, 1)
	total := s.Activity * float64(s.Ready)
	usage := total / (c.target * float64(cur))
	prop := int(math.Ceil(total/c.target - 1e-9))
	return c.hpa.step(s.Now, s.Current, c.hpa.ratioDesired(cur, usage, prop))
}

// kedaQueueCtl is KEDA's Prometheus scaler on queue depth with metricType
// AverageValue: the HPA sets ceil(metric / threshold) replicas (tolerance,
// default behaviour), where the metric is the queue (requests waiting) or,
// with inFlight, waiting + running (vLLM's num_requests_waiting +
// num_requests_running, the usual fix for a queue that reads 0 whenever the
// pool keeps up); activation when the metric > 0 (activationThreshold 0);
// polling 30 s; cooldown 300 s; minReplicaCount 0 or 1.
type kedaQueueCtl struct {
	threshold float64
	minRC     int
	inFlight  bool
	hpa       hpa
	keda      keda
}

// KEDAQueuePolicy returns KEDA's Prometheus scaler on queue depth (or
// waiting + running with inFlight) with the given per-replica threshold.
func KEDAQueuePolicy(threshold float64, minReplicaCount int, inFlight bool, cfg PoolConfig) Policy {
	metric := "queue"
	if inFlight {
		metric = "waiting+running"
	}
	return Policy{Name: "keda-queue", Setting: fmt.Sprintf("%s ≥ %g/replica, min %d", metric, threshold, minReplicaCount), New: func() Controller {
		return &kedaQueueCtl{threshold: threshold, minRC: minReplicaCount, inFlight: inFlight, hpa: hpa{b: DefaultHPABehavior(), max: cfg.MaxReplicas}, keda: keda{polling: 30 * time.Second, cooldown: 300 * time.Second}}
	}}
}

func (c *kedaQueueCtl) Interval() time.Duration { return 15 * time.Second }

func (c *kedaQueueCtl) Desired(s Signals) int {
	m := s.Queue
	if c.inFlight {
		m += s.Running
	}
	step := func() int {
		prop := int(math.Ceil(m/c.threshold - 1e-9))
		return c.hpa.step(s.Now, s.Current, c.hpa.ratioDesired(s.Current, m/(c.threshold*float64(max(1, s.Current))), prop))
	}
	if c.minRC > 0 {
		return step()
	}
	return c.keda.step(s.Now, s.Current, func() bool { return m > 0 }, step)
}

// knativeCtl is Knative Serving's KPA decider (pkg/autoscaler/scaling,
// autoscaler.go): target concurrency per pod = utilisation × slots; stable
// window 60 s, panic window 6 s (10 %), panic threshold 200 %; in panic the
// count never falls; scale-down at most ÷2 per decision
// (max-scale-down-rate 2), scale-up at most ×1000; decisions every 2 s;
// scale to zero after the stable window plus a 30 s grace with no traffic.
// The activator buffers requests at zero, so demand is seen at zero too.
type knativeCtl struct {
	target     float64
	panicUntil time.Duration
	inPanic    bool
	maxPanic   int
	idleSince  time.Duration
	idle       bool
	max        int
}

// KnativePolicy returns Knative's KPA at the given target utilisation of
// the replica's slots.
func KnativePolicy(util float64, cfg PoolConfig) Policy {
	return Policy{Name: "knative", Setting: fmt.Sprintf("target %.0f%% of %d slots", util*100, cfg.Slots), New: func() Controller {
		return &knativeCtl{target: util * float64(cfg.Slots), max: cfg.MaxReplicas}
	}}
}

func (c *knativeCtl) Interval() time.Duration { return 2 * time.Second }

func (c *knativeCtl) Desired(s Signals) int {
	ready := max(1, s.Ready)
	dspc := int(math.Ceil(s.Concurrency60s/c.target - 1e-9))
	dppc := int(math.Ceil(s.Concurrency6s/c.target - 1e-9))
	maxUp := int(math.Ceil(1000 * float64(ready)))
	maxDown := int(math.Floor(float64(ready) / 2))
	if s.Current == 0 {
		maxDown = 0
	}
	dspc = max(maxDown, min(maxUp, dspc))
	dppc = max(maxDown, min(maxUp, dppc))
	over := float64(dppc)/float64(ready) >= 2.0
	switch {
	case over:
		if !c.inPanic {
			c.maxPanic = s.Current
		}
		c.inPanic, c.panicUntil = true, s.Now+60*time.Second
	case c.inPanic && s.Now >= c.panicUntil:
		c.inPanic = false
	}
	d := dspc
	if c.inPanic {
		c.maxPanic = max(c.maxPanic, dppc)
		d = c.maxPanic
	}
	// Scale to zero: only after a stable window of no traffic plus grace.
	if s.Concurrency60s == 0 && s.Concurrency6s == 0 {
		if !c.idle {
			c.idle, c.idleSince = true, s.Now
		}
		if s.Now-c.idleSince < 30*time.Second {
			d = max(d, min(s.Current, 1))
		}
	} else {
		c.idle = false
		d = max(d, 1)
	}
	return min(d, c.max)
}

// staticCtl holds a fixed count.
type staticCtl struct{ n int }

// StaticPolicy provisions n replicas for the whole trace.
func StaticPolicy(n int) Policy {
	return Policy{Name: "static", Setting: fmt.Sprintf("%d replicas", n), New: func() Controller { return &staticCtl{n: n} }}
}

func (c *staticCtl) Interval() time.Duration { return time.Hour }
func (c *staticCtl) Desired(Signals) int     { return c.n }

// clairvoyantCtl knows every future arrival: need[t] is the replicas
// needed from second t on (needPerSecond); at t it holds
// max(need[t .. t+lead]) so that each replica is started exactly one cold
// start before it is needed, and is released as soon as no need within one
// cold start remains.
type clairvoyantCtl struct {
	need []int
	lead int
}

// ClairvoyantPolicy builds the oracle from per-second needs; lead is the
// cold start it plans for.
func ClairvoyantPolicy(need []int, lead time.Duration, headroom float64) Policy {
	l := int(math.Ceil(lead.Seconds()))
	// Sliding maximum of need over [t, t+l], computed once.
	ahead := make([]int, len(need))
	var dq []int
	for t := len(need) - 1; t >= 0; t-- {
		for len(dq) > 0 && need[dq[len(dq)-1]] <= need[t] {
			dq = dq[:len(dq)-1]
		}
		dq = append(dq, t)
		for dq[0] > t+l {
			dq = dq[1:]
		}
		ahead[t] = need[dq[0]]
	}
	return Policy{Name: "clairvoyant", Setting: fmt.Sprintf("lead %v, headroom ×%g", lead, headroom), New: func() Controller { return &clairvoyantCtl{need: ahead, lead: l} }}
}

func (c *clairvoyantCtl) Interval() time.Duration { return time.Second }

func (c *clairvoyantCtl) Desired(s Signals) int {
	t := int(s.Now / time.Second)
	if t >= len(c.need) {
		// Past the last arrival: keep what is there until the pool is
		// empty, then release everything.
		if s.Queue > 0 || s.Concurrency6s > 0 {
			return max(1, s.Current)
		}
		return 0
	}
	return c.need[t]
}

// needPerSecond returns, for each second t, the replicas a fluid FIFO pool
// needs from t on so that no request waits longer than the SLO: with W(t,τ)
// the work arriving in [t, t+τ), the backlog after τ seconds is W − c·τ
// and must stay ≤ c·SLO, so c ≥ max over τ of W(t,τ)/(τ+SLO) slots
// (τ = 1..horizon s); times headroom; in replicas, rounded up. A request
// cannot be split across slots, so a run with headroom 1 can still miss the
// SLO; Compare sweeps the headroom.
func needPerSecond(workS []float64, slots int, slo time.Duration, headroom float64) []int {
	const horizon = 120
	sloS := slo.Seconds()
	need := make([]int, len(workS))
	for t := range workS {
		var w, best float64
		for tau := 1; tau <= horizon && t+tau-1 < len(workS); tau++ {
			w += workS[t+tau-1]
			best = math.Max(best, w/(float64(tau)+sloS))
		}
		need[t] = int(math.Ceil(best*headroom/float64(slots) - 1e-9))
	}
	return need
}

// workPerSecond sums service time by arrival second.
func workPerSecond(w *Workload) []float64 {
	out := make([]float64, int(w.DurationS())+1)
	for i, a := range w.ArrivalS {
		out[int(a)] += w.ServiceS[i]
	}
	return out
}
