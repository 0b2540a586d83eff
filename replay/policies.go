package replay

import (
	"fmt"
	"math"
	"time"
)

// Policy names a controller family and one setting of it. New builds a
// fresh controller for one run.
type Policy struct {
	Name    string
	Setting string
	New     func() Controller
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

// StaticPolicy provisions n replicas: from the common initial pool it asks
// for n at the first second and holds them.
func StaticPolicy(n int) Policy {
	return Policy{Name: "static", Setting: fmt.Sprintf("%d replicas", n), New: func() Controller { return &staticCtl{n: n} }}
}

func (c *staticCtl) Interval() time.Duration { return time.Second }
func (c *staticCtl) Desired(Signals) int     { return c.n }
