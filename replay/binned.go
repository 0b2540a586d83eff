package replay

import (
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// Binned is a workload as per-second totals, for traces too large to replay
// request by request.
type Binned struct {
	Name string
	// Arrivals[t] is the number of requests arriving in second t.
	Arrivals []float64
	// WorkS[t] is their total service time, slot-seconds.
	WorkS []float64
}

// TotalWorkS is Σ WorkS.
func (b *Binned) TotalWorkS() float64 {
	var s float64
	for _, v := range b.WorkS {
		s += v
	}
	return s
}

// TotalRequests is Σ Arrivals.
func (b *Binned) TotalRequests() float64 {
	var s float64
	for _, v := range b.Arrivals {
		s += v
	}
	return s
}

// BinWorkload sums a per-request workload into one-second bins.
func BinWorkload(w *Workload) *Binned {
	n := int(math.Floor(w.DurationS())) + 1
	b := &Binned{Name: w.Name, Arrivals: make([]float64, n), WorkS: make([]float64, n)}
	for i, t := range w.ArrivalS {
		k := int(t)
		b.Arrivals[k]++
		b.WorkS[k] += w.ServiceS[i]
	}
	return b
}

// Binned samples per-second arrival counts from the windows. For every
// model and window, the clients' counts in one second add up to a count
// with mean Σ rate and variance Σ rate·cv² (a renewal process with rate r
// and inter-arrival CV c has count variance ≈ r·c²·t over a span t; Cox,
// Renewal Theory, 1962, §9.2); each second's count is drawn from a Gamma
// with that mean and variance (PCG seeded with seed). Work per second is
// count × the rate-weighted mean service time of the window's clients under
// m. rateScale multiplies every rate (ServeGen's absolute scale is a release
// artefact; its own generator rescales). A window whose Gamma parameters
// leave float64 range (a mean near 1e-300 after rateScale) gets the mean
// count every second instead of a panic or NaN.
func (sg *ServeGen) Binned(m ServiceModel, seed uint64, rateScale float64) *Binned {
	lenS := int(sg.LenS)
	var endS float64
	for _, w := range sg.Windows {
		endS = math.Max(endS, w.StartS+w.LenS)
	}
	nWin := int(endS) / lenS
	mean := make([]float64, nWin)
	vari := make([]float64, nWin)
	work := make([]float64, nWin)
	for _, w := range sg.Windows {
		k := int(w.StartS) / lenS
		r := w.RateRPS * rateScale
		mean[k] += r
		vari[k] += r * w.IATCV * w.IATCV
		work[k] += r * m.tokens(w.InputTokens, w.OutputTokens)
	}
	b := &Binned{Arrivals: make([]float64, nWin*lenS), WorkS: make([]float64, nWin*lenS)}
	src := rand.NewPCG(seed, 0x42696e6e)
	for k := range nWin {
		if mean[k] <= 0 {
			continue
		}
		svc := work[k] / mean[k]
		g := distuv.Gamma{Alpha: mean[k] * mean[k] / vari[k], Beta: mean[k] / vari[k], Src: src}
		// The reader's ranges keep both parameters finite and positive at rate
		// scale 1, but a rate scale in (0, 1e6] still reaches the edges: at a
		// mean of 1e-300 mean² underflowed to 0 and Gamma.Rand panicked
		// ("gamma: alpha <= 0"), and a denormal variance (iat_cv 1e-160 before
		// the reader refused it) made both +Inf and every count NaN. When
		// either is not a positive, finite, normal float64 the count is the
		// deterministic mean: the Gamma's own limit as the variance vanishes
		// against the mean, and otherwise a mean too small (≤ 1e-154 req/s)
		// for a draw to differ from it.
		gammaOK := normalFloat(g.Alpha) && normalFloat(g.Beta)
		for s := k * lenS; s < (k+1)*lenS; s++ {
			c := mean[k]
			if vari[k] > 0 && gammaOK {
				c = math.Round(g.Rand())
			}
			b.Arrivals[s] = c
			b.WorkS[s] = c * svc
		}
	}
	return b
}

// normalFloat reports whether v is a positive, finite, normal float64 (not
// 0, denormal, +Inf or NaN).
func normalFloat(v float64) bool { return v >= 0x1p-1022 && v <= math.MaxFloat64 }

type pending struct {
	at float64
	n  int
}

// simulateBinned replays b on the pool under ctl in one-second steps, as a
// fluid FIFO queue: every second the ready slots serve up to one
// slot-second each of backlogged work, and what they cannot serve is
// carried to the next second. A second's arrivals wait for the work ahead
// of them (the carried backlog plus half the second's own work, less half a
// second of service) divided by the ready slots. A ready replica removed
// while the pool is busy drains: it takes no new work and stays billed for
// the mean service time of the work in the pool (the in-flight requests'
// remaining service, taken as one mean service time), then goes. Queueing
// inside a second at sub-saturation load (an M/G/c effect) is not
// modelled, so the mode is optimistic at high utilisation; the per-request
// mode has no such approximation.
func simulateBinned(cfg PoolConfig, b *Binned, ctl Controller, opt runOptions) Result {
	cold := newColdStarter(cfg)
	interval := max(1, int(ctl.Interval()/time.Second))
	slo := cfg.SLO.Seconds()
	var (
		res                  Result
		hist                 waitHist
		h                    history
		starting, draining   []pending
		ready, spec          = max(opt.initial, cfg.MinReplicas), max(opt.initial, cfg.MinReplicas)
		meanSvc              float64
		backlog, backlogN    float64
		arrived, busyAcc     float64
		servedN              float64 // requests served: slot-seconds ÷ their mean service
		slotAcc, poolAcc     float64
		sampleArr, sampleBsy float64
		sampleSlt            float64
		met, total           float64
		stepWait, stepMiss   float64
	)
	n := len(b.Arrivals)
	bins := newAttainBins(float64(n), opt.windowS)
	for sec := 0; ; sec++ {
		t := float64(sec)
		// Replicas that finish their cold start by t.
		k := 0
		for _, p := range starting {
			if p.at <= t {
				ready += p.n
			} else {
				starting[k] = p
				k++
			}
		}
		starting = starting[:k]
		a, w := 0.0, 0.0
		if sec < n {
			a, w = b.Arrivals[sec], b.WorkS[sec]
		}
		capS := float64(ready * cfg.Slots)
		if a > 0 {
			var wait float64
			if capS > 0 {
				wait = math.Max(0, backlog+w/2-capS/2) / capS
			} else {
				wait = math.Inf(1)
				if len(starting) > 0 {
					first := starting[0]
					for _, p := range starting {
						if p.at < first.at {
							first = p
						}
					}
					wait = first.at - t + (backlog+w/2)/float64(first.n*cfg.Slots)
				}
			}
			hist.add(wait, a)
			bins.arrive(t, a)
			stepWait = math.Max(stepWait, wait)
			if wait <= slo {
				met += a
				bins.met(t, a)
			} else {
				stepMiss += a
			}
			total += a
		}
		served := math.Min(backlog+w, capS)
		if backlogN+a > 0 {
			meanSvc = (backlog + w) / (backlogN + a)
		}
		if served > 0 && meanSvc > 0 {
			servedN += served / meanSvc
		}
		backlog += w - served
		if backlogN+a > 0 {
			backlogN = backlog / meanSvc
		} else {
			backlogN = 0
		}
		if backlog < 1e-9 {
			backlog, backlogN = 0, 0
		}
		arrived += a
		busyAcc += served
		slotAcc += capS
		// Requests in the pool: waiting, plus in service (busy slots on
		// average over the second = slot-seconds served).
		poolAcc += backlogN + served
		// Draining replicas still billed now.
		k = 0
		for _, p := range draining {
			if p.at > t {
				draining[k] = p
				k++
			}
		}
		draining = draining[:k]
		live := ready
		for _, p := range starting {
			live += p.n
		}
		for _, p := range draining {
			live += p.n
		}
		res.ReplicaSeconds += float64(live)
		h.push(arrived, busyAcc, slotAcc, poolAcc, busyAcc, servedN)
		if sec%interval == 0 && sec > 0 {
			sig := Signals{Now: time.Duration(sec) * time.Second, Queue: backlogN, Running: served, Ready: ready, Current: spec, Slots: cfg.Slots}
			h.signals(&sig)
			d := max(cfg.MinReplicas, min(cfg.MaxReplicas, ctl.Desired(sig)))
			if d != spec {
				res.ScaleEvents++
			}
			for ; spec < d; spec++ {
				res.ColdStarts++
				at := t + cold.draw()
				if len(starting) > 0 && starting[len(starting)-1].at == at {
					starting[len(starting)-1].n++
				} else {
					starting = append(starting, pending{at: at, n: 1})
				}
			}
			for spec > d {
				spec--
				if m := len(starting); m > 0 {
					if starting[m-1].n--; starting[m-1].n == 0 {
						starting = starting[:m-1]
					}
				} else {
					ready--
					if served > 0 && meanSvc > 0 {
						at := t + 1 + meanSvc
						if m := len(draining); m > 0 && draining[m-1].at == at {
							draining[m-1].n++
						} else {
							draining = append(draining, pending{at: at, n: 1})
						}
					}
				}
			}
		}
		if !opt.noSeries && sec%opt.sampleStepS == 0 && sec > 0 {
			st := float64(opt.sampleStepS)
			bf := 0.0
			if d := slotAcc - sampleSlt; d > 0 {
				bf = (busyAcc - sampleBsy) / d
			}
			res.Series = append(res.Series, Sample{TimeS: t, Arrivals: (arrived - sampleArr) / st, Queue: backlogN, Ready: ready, Replicas: spec, Live: live, BusyFrac: bf, MaxWait: stepWait, Misses: stepMiss})
			sampleArr, sampleBsy, sampleSlt = arrived, busyAcc, slotAcc
			stepWait, stepMiss = 0, 0
		}
		if sec >= n-1 && backlog == 0 && len(draining) == 0 {
			res.DurationS = t + 1
			break
		}
		if t > float64(n)+opt.maxOverrunS {
			extra, endS, unserved := finishBinned(t+1, ready, cfg.Slots, backlog, backlogN, draining)
			res.ReplicaSeconds += extra
			res.DurationS, res.Unserved = endS, unserved
			break
		}
	}
	if res.Unserved > 0 {
		// The fluid model judged each arrival when it came, on the capacity then; requests
		// of a backlog never served did not meet the SLO whatever that judgement was. The
		// backlog is the latest arrivals (first in, first out), so their judgements are taken
		// back from the latest bins.
		u := math.Min(res.Unserved, met)
		met -= u
		bins.unmet(u)
	}
	res.Requests = total
	res.SLOMet = met
	res.WaitP50, res.WaitP95, res.WaitP99 = hist.quantile(0.5), hist.quantile(0.95), hist.quantile(0.99)
	res.MeetsSLO = res.Attainment() >= cfg.SLOTarget && res.Unserved == 0
	bins.fill(&res)
	return res
}

// finishBinned ends a binned run at the overrun cap (runOptions.maxOverrunS),
// at time now, seconds, without further decisions: starting replicas are
// cancelled, the ready replicas serve the backlog (backlog slot-seconds,
// backlogN requests) at their capacity ready·slots, billed backlog ÷
// (ready·slots) seconds each (backlog ÷ slots replica-seconds in all, the
// fluid model's own drain), and draining replicas are billed until they go.
// With no ready replica the backlog is never served: its requests are
// returned as unserved and their work is not billed. It returns the
// replica-seconds to add, the run's end, seconds, and the unserved
// requests. The fluid model fixed each arrival's wait when it arrived, on
// the assumption that the backlog drains at the ready capacity; this bills
// that drain. (Before, the run stopped at the cap and billed none of the
// backlog.)
func finishBinned(now float64, ready, slots int, backlog, backlogN float64, draining []pending) (replicaS, endS, unserved float64) {
	endS = now
	if backlog > 0 {
		if ready > 0 {
			dt := backlog / float64(ready*slots)
			replicaS += float64(ready) * dt
			endS = now + dt
		} else {
			unserved = backlogN
		}
	}
	for _, p := range draining {
		if p.at > now {
			replicaS += float64(p.n) * (p.at - now)
			endS = math.Max(endS, p.at)
		}
	}
	return replicaS, endS, unserved
}
