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

// knativeCtl is Knative Serving's KPA: the decider of
// knative/serving pkg/autoscaler/scaling/autoscaler.go (autoscaler.Scale)
// followed by the KPA scaler's scale-to-zero handling
// (pkg/reconciler/autoscaling/kpa/scaler.go), with the defaults of
// config-autoscaler except the swept target, min-scale and
// scale-down-delay. Every 2 s (tick-interval):
//
//	readyPodsCount = max(1, ready)          (pods still starting do not count)
//	maxScaleUp     = ⌈1000 × readyPodsCount⌉ (max-scale-up-rate 1000)
//	maxScaleDown   = ⌊readyPodsCount / 2⌋    (max-scale-down-rate 2)
//	dspc = ⌈stable/target⌉, dppc = ⌈panic/target⌉, each clamped to
//	        [maxScaleDown, maxScaleUp]
//	panic starts, or is extended, while dppc/readyPodsCount ≥ 2
//	        (panic-threshold 200 %) and ends once it is not and the last
//	        time it was is more than one stable window (60 s) ago;
//	in panic desired = maxPanicPods = the largest max(dspc, dppc) since
//	        panic began (maxPanicPods starts at 0 and is reset to 0 on exit)
//	with scale-down-delay D > 0, desired = the largest desired of the last D
//	        (autoscaler.go's delayWindow, a max over a time window)
//
// stable and panic are the pool's concurrency (requests waiting or in
// service, as queue-proxies and the activator report them) averaged over
// 60 s and 6 s (stable-window, panic-window-percentage 10 %). Desired 0 is
// applied only after 30 s (scale-to-zero-grace-period) with none in
// either window; min-scale bounds it from below. A lower desired count is
// applied at once (the Deployment deletes pods still starting first), so a
// replica cancelled while starting and asked for again starts cold again:
// that is Knative's behaviour with scale-down-delay 0, the default, and why
// the sweep also runs scale-down-delay 5 min (the knob Knative documents
// for slow-starting revisions, the counterpart of the HPA's 300 s
// scale-down stabilisation).
//
// One deviation, for the simulation only: the run starts mid-stream with a
// warm pool but no request in flight, so the first minute's windows read
// the pool filling up rather than the trace's steady level; the decider
// does not scale down until one stable window (60 s) has passed, as a
// revision with a full window of history would not.
type knativeCtl struct {
	target    float64
	minScale  int
	delay     time.Duration
	panicTime time.Duration
	inPanic   bool
	maxPanic  int
	idleSince time.Duration
	idle      bool
	max       int
	window    []knDesired // desired counts of the last delay, max first
}

type knDesired struct {
	at time.Duration
	n  int
}

// Knative's defaults (config-autoscaler) that the replay holds fixed.
const (
	knativeStableWindow   = 60 * time.Second
	knativeTick           = 2 * time.Second
	knativeGrace          = 30 * time.Second
	knativePanicThreshold = 2.0
	knativeMaxScaleUp     = 1000.0
	knativeMaxScaleDown   = 2.0
)

// KnativePolicy returns Knative's KPA at target utilisation util of the
// replica's slots (target = util × slots concurrent requests per pod),
// with min-scale minScale (0 or more) and scale-down-delay delay (0
// disables it).
func KnativePolicy(util float64, minScale int, delay time.Duration, cfg PoolConfig) Policy {
	return Policy{Name: "knative", Setting: fmt.Sprintf("target %.0f%% of %d slots, min %d, delay %v", util*100, cfg.Slots, minScale, delay), New: func() Controller {
		return &knativeCtl{target: util * float64(cfg.Slots), minScale: minScale, delay: delay, max: cfg.MaxReplicas}
	}}
}

func (c *knativeCtl) Interval() time.Duration { return knativeTick }

func (c *knativeCtl) Desired(s Signals) int {
	ready := float64(max(1, s.Ready))
	maxUp := math.Ceil(knativeMaxScaleUp * ready)
	maxDown := 0.0
	if s.Current > 0 { // Reachable: a revision scaled to zero is not.
		maxDown = math.Floor(ready / knativeMaxScaleDown)
	}
	dspc := math.Ceil(s.Concurrency60s/c.target - 1e-9)
	dppc := math.Ceil(s.Concurrency6s/c.target - 1e-9)
	stable := int(math.Min(math.Max(dspc, maxDown), maxUp))
	panicN := int(math.Min(math.Max(dppc, maxDown), maxUp))
	over := dppc/ready >= knativePanicThreshold
	switch {
	case over:
		c.inPanic, c.panicTime = true, s.Now
	case c.inPanic && s.Now > c.panicTime+knativeStableWindow:
		c.inPanic, c.maxPanic = false, 0
	}
	d := stable
	if c.inPanic {
		c.maxPanic = max(c.maxPanic, stable, panicN)
		d = c.maxPanic
	}
	if c.delay > 0 {
		for len(c.window) > 0 && c.window[len(c.window)-1].n <= d {
			c.window = c.window[:len(c.window)-1]
		}
		c.window = append(c.window, knDesired{at: s.Now, n: d})
		for c.window[0].at <= s.Now-c.delay {
			c.window = c.window[1:]
		}
		d = c.window[0].n
	}
	if s.Now < knativeStableWindow {
		d = max(d, s.Current)
	}
	// Scale to zero only after the grace period with no traffic.
	if d == 0 {
		if !c.idle {
			c.idle, c.idleSince = true, s.Now
		}
		if s.Now-c.idleSince < knativeGrace {
			d = min(s.Current, 1)
		}
	} else {
		c.idle = false
	}
	return min(max(d, c.minScale), c.max)
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
