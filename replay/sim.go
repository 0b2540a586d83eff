package replay

import (
	"math"
	"time"
)

// Replica states.
const (
	stStarting uint8 = iota
	stReady
	stDraining
	stGone
)

type replica struct {
	state uint8
	gen   uint32
	busy  int32
}

// event is a slot completion (rep ≥ 0) or a replica becoming ready
// (rep < 0, id = ^rep).
type event struct {
	t   float64
	rep int32
	gen uint32
	// svc is a completion's service seconds (0 for a replica's start):
	// counted in the service-time signal when the request completes.
	svc float64
}

// eventHeap is a binary min-heap on t; typed to keep the hot loop free of
// interface boxing and allocation.
type eventHeap []event

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].t <= a[i].t {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *eventHeap) pop() event {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && a[r].t < a[l].t {
			m = r
		}
		if a[i].t <= a[m].t {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

type slotRef struct {
	rep int32
	gen uint32
}

// sim is the per-request pool simulator's state.
type sim struct {
	cfg         PoolConfig
	w           *Workload
	cold        *coldStarter
	reps        []replica
	free        []int32 // ids of gone replicas for reuse
	slots       []slotRef
	freeN       int // free slots on ready replicas
	ev          eventHeap
	queue       []int32 // ring buffer of request indices
	qHead, qLen int

	now                          float64
	busy, ready, live, spec      int // busy slots, ready replicas, billed replicas, spec replicas
	busyAcc, slotAcc, replicaAcc float64
	svcAcc, servedN              float64 // service seconds and count of requests completed
	queueAcc                     float64
	arrived                      int

	hist       waitHist
	met        float64
	coldStarts int
	bins       attainBins
	// stepWait and stepMiss are the current sample step's longest wait
	// and misses.
	stepWait, stepMiss float64
	// byBusy and victims are scaleTo's scratch: ready replicas by busy slots, and the victims.
	byBusy  [][]int32
	victims []int32
}

func (s *sim) advance(t float64) {
	dt := t - s.now
	if dt > 0 {
		s.busyAcc += dt * float64(s.busy)
		s.slotAcc += dt * float64(s.ready*s.cfg.Slots)
		s.replicaAcc += dt * float64(s.live)
		s.queueAcc += dt * float64(s.qLen+s.busy)
		s.now = t
	}
}

func (s *sim) start(i int32, r int32) {
	a := s.w.ArrivalS[i]
	wait := s.now - a
	s.hist.add(wait, 1)
	s.stepWait = max(s.stepWait, wait)
	if wait <= s.cfg.SLO.Seconds() {
		s.met++
		s.bins.met(a, 1)
	} else {
		s.stepMiss++
	}
	s.reps[r].busy++
	s.busy++
	s.ev.push(event{t: s.now + s.w.ServiceS[i], rep: r, gen: s.reps[r].gen, svc: s.w.ServiceS[i]})
}

func (s *sim) enqueue(i int32) {
	if s.qLen == len(s.queue) {
		nq := make([]int32, max(16, 2*len(s.queue)))
		for k := range s.qLen {
			nq[k] = s.queue[(s.qHead+k)%len(s.queue)]
		}
		s.queue, s.qHead = nq, 0
	}
	s.queue[(s.qHead+s.qLen)%len(s.queue)] = i
	s.qLen++
}

func (s *sim) dequeue() int32 {
	i := s.queue[s.qHead]
	s.qHead++
	if s.qHead == len(s.queue) {
		s.qHead = 0
	}
	s.qLen--
	return i
}

// popSlot returns a ready replica with a free slot; freeN must be > 0.
func (s *sim) popSlot() int32 {
	for {
		n := len(s.slots) - 1
		ref := s.slots[n]
		s.slots = s.slots[:n]
		if rp := &s.reps[ref.rep]; rp.gen == ref.gen && rp.state == stReady {
			s.freeN--
			return ref.rep
		}
	}
}

func (s *sim) pushSlot(r int32) {
	s.slots = append(s.slots, slotRef{rep: r, gen: s.reps[r].gen})
	s.freeN++
	if len(s.slots) > 4*(s.freeN+64) {
		s.compactSlots()
	}
}

func (s *sim) compactSlots() {
	s.slots = s.slots[:0]
	for id := range s.reps {
		rp := &s.reps[id]
		if rp.state != stReady {
			continue
		}
		for range s.cfg.Slots - int(rp.busy) {
			s.slots = append(s.slots, slotRef{rep: int32(id), gen: rp.gen})
		}
	}
}

// fill gives replica r's free slots to queued requests, then offers the rest.
func (s *sim) fill(r int32, freeSlots int) {
	for ; freeSlots > 0; freeSlots-- {
		if s.qLen > 0 {
			s.start(s.dequeue(), r)
		} else {
			s.pushSlot(r)
		}
	}
}

func (s *sim) newReplica() int32 {
	var id int32
	if n := len(s.free); n > 0 {
		id = s.free[n-1]
		s.free = s.free[:n-1]
		s.reps[id].gen++
	} else {
		id = int32(len(s.reps))
		s.reps = append(s.reps, replica{})
	}
	rp := &s.reps[id]
	rp.state, rp.busy = stStarting, 0
	s.live++
	s.spec++
	return id
}

func (s *sim) gone(id int32) {
	s.reps[id].state = stGone
	s.live--
	s.free = append(s.free, id)
}

// scaleTo applies a spec replica count: new replicas start cold; removals
// cancel starting replicas first (Kubernetes deletes unready pods first),
// then drain the least busy ready ones (they take no new work and are
// removed once idle).
func (s *sim) scaleTo(d int) {
	d = max(s.cfg.MinReplicas, min(s.cfg.MaxReplicas, d))
	for s.spec < d {
		id := s.newReplica()
		s.coldStarts++
		s.ev.push(event{t: s.now + s.cold.draw(), rep: ^id, gen: s.reps[id].gen})
	}
	if s.spec <= d {
		return
	}
	// The victims in order, from one pass over the replicas: starting ones, highest id first,
	// then ready ones by busy slots, fewest first, highest id first among equals (busy is in
	// [0, Slots], so a bucket per count orders them). One scan per removed replica made a
	// scale-down from 100,000 replicas take minutes.
	// The buckets are kept across calls (scaleTo runs at every decision that scales down).
	if len(s.byBusy) != s.cfg.Slots+1 {
		s.byBusy = make([][]int32, s.cfg.Slots+1)
	}
	byBusy := s.byBusy
	for b := range byBusy {
		byBusy[b] = byBusy[b][:0]
	}
	starting := s.victims[:0]
	for id := len(s.reps) - 1; id >= 0; id-- {
		switch rp := &s.reps[id]; rp.state {
		case stStarting:
			starting = append(starting, int32(id))
		case stReady:
			b := min(max(int(rp.busy), 0), s.cfg.Slots)
			byBusy[b] = append(byBusy[b], int32(id))
		}
	}
	victims := starting
	for _, ids := range byBusy {
		if len(victims) >= s.spec-d {
			break
		}
		victims = append(victims, ids...)
	}
	s.victims = victims
	for _, victim := range victims {
		if s.spec <= d {
			break
		}
		rp := &s.reps[victim]
		s.spec--
		if rp.state == stStarting {
			s.gone(victim)
			continue
		}
		s.ready--
		s.freeN -= s.cfg.Slots - int(rp.busy)
		if rp.busy == 0 {
			s.gone(victim)
		} else {
			rp.state = stDraining
		}
	}
}

// addReady makes n replicas ready at once (the warm start of a run).
func (s *sim) addReady(n int) {
	for range n {
		id := s.newReplica()
		s.reps[id].state = stReady
		s.ready++
		s.fill(id, s.cfg.Slots)
	}
}

// finishInService ends a run at the overrun cap (runOptions.maxOverrunS)
// with the work in service billed until it finishes: the controller is no
// longer consulted, starting replicas are cancelled and idle ones removed
// (as at a run's normal end, when nothing idle is billed), and each busy
// replica drains, billed until its last request completes. Nothing new
// starts, so requests still queued stay unserved. Event by event, so a
// request of 2^31 tokens at one token an hour (7.7e12 s) costs no more
// steps than a short one. (Before, the run stopped at the cap and billed
// none of the work in service past it: 6.84 GPU-hours against a bound of
// 42.00 with a 7-day request.)
func (s *sim) finishInService() {
	for id := range s.reps {
		switch rp := &s.reps[id]; rp.state {
		case stStarting:
			s.spec--
			s.gone(int32(id))
		case stReady:
			s.spec--
			s.ready--
			s.freeN -= s.cfg.Slots - int(rp.busy)
			if rp.busy == 0 {
				s.gone(int32(id))
			} else {
				rp.state = stDraining
			}
		}
	}
	for len(s.ev) > 0 {
		e := s.ev.pop()
		if e.rep < 0 {
			continue // a cancelled replica's start
		}
		rp := &s.reps[e.rep]
		if rp.gen != e.gen || rp.state != stDraining {
			continue
		}
		s.advance(e.t)
		rp.busy--
		s.busy--
		s.svcAcc += e.svc
		s.servedN++
		if rp.busy == 0 {
			s.gone(e.rep)
		}
	}
}

// runOptions are per-run knobs shared by both simulators.
type runOptions struct {
	// initial is the number of ready replicas at t = 0 (PoolConfig.InitialReplicas).
	initial int
	// windowS, when > 0, also counts arrivals and SLO misses per window of
	// this many seconds (Result.windowArrivals, windowMet), for the
	// optimum's search.
	windowS float64
	// sampleStepS is the series step, seconds (≥ 1).
	sampleStepS int
	// maxOverrunS bounds, in seconds, how long after the last arrival the
	// controller keeps deciding. Past it the run finishes the work in
	// service without further decisions (finishInService in per-request
	// mode, the backlog on the ready pool in binned mode); requests that
	// cannot be served then are counted in Result.Unserved.
	maxOverrunS float64
	noSeries    bool
}

// defaultMaxOverrunS is every Compare run's runOptions.maxOverrunS,
// seconds: 6 h after the last arrival.
const defaultMaxOverrunS = 6 * 3600

func defaultRunOptions(durationS float64, initial int) runOptions {
	step := max(60, int(math.Ceil(durationS/1500/60))*60)
	return runOptions{initial: initial, sampleStepS: step, maxOverrunS: defaultMaxOverrunS}
}

// simulateRequests replays w on the pool under ctl, event by event.
func simulateRequests(cfg PoolConfig, w *Workload, ctl Controller, opt runOptions) Result {
	s := &sim{cfg: cfg, w: w, cold: newColdStarter(cfg)}
	s.queue = make([]int32, max(16, len(w.ArrivalS)/8))
	s.ev = make(eventHeap, 0, 1024)
	s.bins = newAttainBins(w.DurationS(), opt.windowS)
	s.addReady(max(opt.initial, cfg.MinReplicas))
	interval := max(1, int(ctl.Interval()/time.Second))
	var h history
	var res Result
	n := len(w.ArrivalS)
	end := w.DurationS()
	nextTick := 0.0
	var sampleArr int
	var sampleBusy, sampleSlots float64
	i := 0
	for {
		ta := math.Inf(1)
		if i < n {
			ta = w.ArrivalS[i]
		}
		te := math.Inf(1)
		if len(s.ev) > 0 {
			te = s.ev[0].t
		}
		switch {
		case te <= nextTick && te <= ta:
			e := s.ev.pop()
			s.advance(e.t)
			if e.rep < 0 {
				id := ^e.rep
				rp := &s.reps[id]
				if rp.gen != e.gen || rp.state != stStarting {
					continue
				}
				rp.state = stReady
				s.ready++
				s.fill(id, cfg.Slots)
				continue
			}
			rp := &s.reps[e.rep]
			rp.busy--
			s.busy--
			// Counted at completion, as Triton's duration counters and vLLM's
			// latency histograms record a request when it ends.
			s.svcAcc += e.svc
			s.servedN++
			switch {
			case rp.state == stReady && s.qLen > 0:
				s.start(s.dequeue(), e.rep)
			case rp.state == stReady:
				s.pushSlot(e.rep)
			case rp.busy == 0:
				s.gone(e.rep)
			}
		case nextTick <= ta:
			s.advance(nextTick)
			sec := int(nextTick)
			h.push(float64(s.arrived), s.busyAcc, s.slotAcc, s.queueAcc, s.svcAcc, s.servedN)
			if sec%interval == 0 && sec > 0 {
				sig := Signals{Now: time.Duration(sec) * time.Second, Queue: float64(s.qLen), Running: float64(s.busy), Ready: s.ready, Current: s.spec, Slots: cfg.Slots}
				h.signals(&sig)
				if d := ctl.Desired(sig); max(cfg.MinReplicas, min(cfg.MaxReplicas, d)) != s.spec {
					res.ScaleEvents++
					s.scaleTo(d)
				}
			}
			if !opt.noSeries && sec%opt.sampleStepS == 0 && sec > 0 {
				st := float64(opt.sampleStepS)
				bf := 0.0
				if d := s.slotAcc - sampleSlots; d > 0 {
					bf = (s.busyAcc - sampleBusy) / d
				}
				res.Series = append(res.Series, Sample{TimeS: nextTick, Arrivals: float64(s.arrived-sampleArr) / st, Queue: float64(s.qLen), Ready: s.ready, Replicas: s.spec, Live: s.live, BusyFrac: bf, MaxWait: s.stepWait, Misses: s.stepMiss})
				sampleArr, sampleBusy, sampleSlots = s.arrived, s.busyAcc, s.slotAcc
				s.stepWait, s.stepMiss = 0, 0
			}
			nextTick++
			// Past the last arrival, run until nothing waits and nothing is in service: a
			// request still running at the end is billed until it finishes (the run stopped
			// with requests in service, so a 1-hour request at the trace's end cost nothing).
			if i >= n && s.qLen == 0 && s.busy == 0 && nextTick > end {
				goto done
			}
			if nextTick > end+opt.maxOverrunS {
				// The overrun cap: the work in service is finished and billed
				// (finishInService); what still waits is never served.
				s.finishInService()
				goto done
			}
		default:
			s.advance(ta)
			s.arrived++
			s.bins.arrive(ta, 1)
			if s.freeN > 0 {
				s.start(int32(i), s.popSlot())
			} else {
				s.enqueue(int32(i))
			}
			i++
		}
	}
done:
	// Requests never started count as missing the SLO at the longest wait,
	// and are reported (Result.Unserved): their work is not billed.
	res.Unserved = float64(s.qLen)
	for s.qLen > 0 {
		s.dequeue()
		s.hist.add(math.Inf(1), 1)
	}
	res.Requests = float64(n)
	res.SLOMet = s.met
	res.ReplicaSeconds = s.replicaAcc
	res.ColdStarts = s.coldStarts
	res.DurationS = s.now
	res.WaitP50, res.WaitP95, res.WaitP99 = s.hist.quantile(0.5), s.hist.quantile(0.95), s.hist.quantile(0.99)
	res.MeetsSLO = res.Attainment() >= cfg.SLOTarget && res.Unserved == 0
	s.bins.fill(&res)
	return res
}

// attainBins counts arrivals and requests meeting the SLO by arrival hour
// (for Result.WorstHourAttainment) and, optionally, by window.
type attainBins struct {
	hourN, hourMet []float64
	winS           float64
	winN, winMet   []float64
}

func newAttainBins(durationS, windowS float64) attainBins {
	h := int(durationS/3600) + 1
	b := attainBins{hourN: make([]float64, h), hourMet: make([]float64, h), winS: windowS}
	if windowS > 0 {
		n := int(durationS/windowS) + 1
		b.winN, b.winMet = make([]float64, n), make([]float64, n)
	}
	return b
}

func (b *attainBins) arrive(at, n float64) {
	b.hourN[min(len(b.hourN)-1, int(at/3600))] += n
	if b.winS > 0 {
		b.winN[min(len(b.winN)-1, int(at/b.winS))] += n
	}
}

func (b *attainBins) met(at, n float64) {
	b.hourMet[min(len(b.hourMet)-1, int(at/3600))] += n
	if b.winS > 0 {
		b.winMet[min(len(b.winMet)-1, int(at/b.winS))] += n
	}
}

// unmet takes back n requests judged met from the latest bins, hour and
// window, latest first (a binned backlog never served: binned.go).
func (b *attainBins) unmet(n float64) {
	take := func(met []float64) {
		r := n
		for i := len(met) - 1; i >= 0 && r > 0; i-- {
			d := math.Min(met[i], r)
			met[i] -= d
			r -= d
		}
	}
	take(b.hourMet)
	take(b.winMet)
}

// fill sets the worst hour: the lowest attainment among the trace's hours
// with arrivals (a last partial hour counts as an hour).
func (b *attainBins) fill(r *Result) {
	r.WorstHourAttainment, r.WorstHour = 1, 0
	for h, n := range b.hourN {
		if n > 0 {
			if a := b.hourMet[h] / n; a < r.WorstHourAttainment {
				r.WorstHourAttainment, r.WorstHour = a, h
			}
		}
	}
	r.windowArrivals, r.windowMet = b.winN, b.winMet
}
