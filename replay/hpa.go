package replay

import (
	"math"
	"time"
)

// HPABehavior is the subset of autoscaling/v2 HorizontalPodAutoscaler
// behaviour replay models. Defaults follow the Kubernetes documentation
// ("Default Behavior", HPA walkthrough): scale up by max(4 pods, 100 %) per
// 15 s with no stabilization window; scale down by up to 100 % per 15 s
// after a 300 s stabilization window; tolerance 10 %.
type HPABehavior struct {
	// Tolerance: no change while |usageRatio − 1| ≤ Tolerance.
	Tolerance float64
	// UpPods and UpPercent are the scale-up policies over UpPeriod; the
	// larger limit wins (selectPolicy Max).
	UpPods    int
	UpPercent float64
	UpPeriod  time.Duration
	// UpWindow and DownWindow are the stabilization windows.
	UpWindow, DownWindow time.Duration
	// DownPercent over DownPeriod bounds a scale down.
	DownPercent float64
	DownPeriod  time.Duration
	// MinReplicas is the HPA's lower bound (≥ 1: an HPA never scales to 0;
	// KEDA does that).
	MinReplicas int
}

// DefaultHPABehavior returns Kubernetes' defaults.
func DefaultHPABehavior() HPABehavior {
	return HPABehavior{
		Tolerance: 0.1, UpPods: 4, UpPercent: 100, UpPeriod: 15 * time.Second,
		DownWindow: 300 * time.Second, DownPercent: 100, DownPeriod: 15 * time.Second, MinReplicas: 1,
	}
}

// ChartHPABehavior is the behaviour inferscale's Helm chart writes into the
// ScaledObject (advanced.horizontalPodAutoscalerConfig, see
// deploy/testdata/golden): scale up by max(1000 %, 100 pods) per 15 s and
// down by up to 100 % per 15 s, both without stabilization window — the
// scaler's own windows shape the answer — and tolerance 0
// (behavior.scaleUp/scaleDown.tolerance, Kubernetes ≥ 1.33), as the chart
// sets it: the scaler's answer is applied as it is.
func ChartHPABehavior() HPABehavior {
	b := DefaultHPABehavior()
	b.UpPods, b.UpPercent = 100, 1000
	b.DownWindow = 0
	b.Tolerance = 0
	return b
}

type recPoint struct {
	at   time.Duration
	rec  int
	seed bool // counts for the down window only
}

type changePoint struct {
	at    time.Duration
	delta int
}

// hpa applies the HPA controller's replica arithmetic to a metric-derived
// proposal (pkg/controller/podautoscaler/horizontal.go,
// stabilizeRecommendationWithBehaviors and convertDesiredReplicasWithBehaviorRate
// in Kubernetes 1.3x).
type hpa struct {
	b       HPABehavior
	max     int
	recs    []recPoint
	changes []changePoint
	seeded  bool
}

// ratioDesired is the HPA's tolerance rule: with usage ratio u, keep current
// when |u−1| ≤ tolerance, else propose proposal.
func (h *hpa) ratioDesired(current int, usage float64, proposal int) int {
	if current > 0 && math.Abs(usage-1) <= h.b.Tolerance {
		return current
	}
	return proposal
}

// step stabilizes and rate-limits a proposal and returns the new count.
func (h *hpa) step(now time.Duration, current, proposal int) int {
	proposal = max(h.b.MinReplicas, min(h.max, proposal))
	if !h.seeded {
		// The run starts mid-stream: a long-running HPA has recommended
		// about the current count for its whole window.
		h.seeded = true
		h.recs = append(h.recs, recPoint{now, current, true})
	}
	h.recs = append(h.recs, recPoint{now, proposal, false})
	keep := max(h.b.UpWindow, h.b.DownWindow)
	k := 0
	for _, r := range h.recs {
		if now-r.at <= keep {
			h.recs[k] = r
			k++
		}
	}
	h.recs = h.recs[:k]
	upRec, downRec := proposal, proposal
	for _, r := range h.recs {
		if now-r.at <= h.b.UpWindow && !r.seed {
			upRec = min(upRec, r.rec)
		}
		if now-r.at <= h.b.DownWindow {
			downRec = max(downRec, r.rec)
		}
	}
	d := current
	if d < upRec {
		d = upRec
	}
	if d > downRec {
		d = downRec
	}
	// Rate limits relative to the replica count at the start of each period.
	keepC := max(h.b.UpPeriod, h.b.DownPeriod)
	k = 0
	for _, c := range h.changes {
		if now-c.at < keepC {
			h.changes[k] = c
			k++
		}
	}
	h.changes = h.changes[:k]
	if d > current {
		added := 0
		for _, c := range h.changes {
			if c.delta > 0 && now-c.at < h.b.UpPeriod {
				added += c.delta
			}
		}
		start := current - added
		limit := max(start+h.b.UpPods, int(math.Ceil(float64(start)*(1+h.b.UpPercent/100))))
		d = min(d, limit)
	} else if d < current {
		removed := 0
		for _, c := range h.changes {
			if c.delta < 0 && now-c.at < h.b.DownPeriod {
				removed -= c.delta
			}
		}
		start := current + removed
		limit := int(math.Ceil(float64(start) * (1 - h.b.DownPercent/100)))
		d = max(d, limit)
	}
	d = max(h.b.MinReplicas, min(h.max, d))
	if d != current {
		h.changes = append(h.changes, changePoint{now, d - current})
	}
	return d
}

// keda is KEDA's 0 ↔ 1 layer over an HPA: every PollingInterval it asks
// the scaler whether the target is active; an inactive target whose last
// activity is CooldownPeriod old goes to minReplicaCount (0); an active
// target at 0 goes to 1. Between 1 and N the HPA decides (KEDA
// scale_handler / scaleexecutor, v2.21).
type keda struct {
	polling, cooldown time.Duration
	lastActive        time.Duration
	everActive        bool
	active            bool
}

// step combines the activation answer with the HPA's count. hpaStep is
// called only when the target is above zero.
func (k *keda) step(now time.Duration, current int, active func() bool, hpaStep func() int) int {
	if now%k.polling == 0 {
		k.active = active()
		if k.active {
			k.lastActive, k.everActive = now, true
		}
	}
	switch {
	case current == 0 && k.active:
		return 1
	case current == 0:
		return 0
	case !k.active && (!k.everActive || now-k.lastActive >= k.cooldown) && now >= k.cooldown:
		return 0
	}
	return hpaStep()
}
