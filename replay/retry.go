package replay

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/inferscale/inferscale/scaler/decision"
)

// This file replays a pool whose clients retry: every unique request of a
// workload is sent by a client that abandons an attempt after a timeout and
// sends it again, through several layers that each retry (a gateway, an SDK,
// a service), or under a shared retry budget. An abandoned attempt is not
// cancelled: it keeps its place in the queue and its slot until it finishes,
// as an engine that does not learn that its caller left does the work
// anyway. So under-provisioning turns into retries, the retries into queued
// work and GPU-hours, and a scaler that reads the inflated rate and queue
// buys replicas for copies of requests whose callers already gave up.

// RetryClient is how the clients of the pool retry.
type RetryClient struct {
	// Timeout is how long a client waits for one attempt before it abandons
	// it and retries. Default 15 s: Envoy's default route timeout.
	Timeout time.Duration
	// Layers and Attempts describe layered retries: each of Layers layers
	// makes up to Attempts attempts of the call below it, so one request is
	// sent up to Attempts^Layers times, one attempt after another (the
	// layers' timeouts taken equal). Default 3 layers × 3 attempts, 27 sends
	// at most: a gateway, an SDK and a service each retrying three times.
	Layers, Attempts int
	// Backoff is the wait before the n-th retry: Backoff·2ⁿ⁻¹, at most ten
	// times Backoff. Default 25 ms, Envoy's base retry interval (its maximum
	// is ten times the base).
	Backoff time.Duration
	// BudgetPercent, when > 0, is a retry budget shared by every client:
	// a retry is sent only while the retries outstanding are fewer than
	// max(BudgetMinRetries, BudgetPercent/100 × all attempts outstanding);
	// otherwise the request fails. Envoy's retry budget defaults: 20 % and 3.
	BudgetPercent    float64
	BudgetMinRetries int
	// CancelQueued drops an abandoned attempt that has not started service
	// (an engine that notices the closed connection while the request still
	// waits, as vLLM's OpenAI server does); a started one keeps its slot
	// until it finishes either way. Default false: the engine serves it.
	CancelQueued bool
	// Deadline is how long after a request's first send its answer is still
	// worth something: an answer later than that is not a verified result.
	// Default 45 s: the innermost layer's three attempts of 15 s.
	Deadline time.Duration
}

// DefaultRetryClient returns the documented defaults: 15 s timeout, 3 layers
// × 3 attempts, 25 ms backoff, no shared budget, 45 s deadline.
func DefaultRetryClient() RetryClient {
	return RetryClient{Timeout: 15 * time.Second, Layers: 3, Attempts: 3, Backoff: 25 * time.Millisecond,
		BudgetMinRetries: 3, Deadline: 45 * time.Second}
}

// WithBudget returns c with Envoy's default retry budget (20 %, at least 3
// retries outstanding).
func (c RetryClient) WithBudget() RetryClient {
	c.BudgetPercent, c.BudgetMinRetries = 20, 3
	return c
}

// Validate reports every field out of range.
func (c RetryClient) Validate() error {
	var errs []error
	if c.Timeout <= 0 || c.Timeout > time.Hour {
		errs = append(errs, fmt.Errorf("retry timeout %v: want (0s, 1h]", c.Timeout))
	}
	if c.Layers < 1 || c.Layers > 5 {
		errs = append(errs, fmt.Errorf("retry layers %d: want 1..5", c.Layers))
	}
	if c.Attempts < 1 || c.Attempts > 10 {
		errs = append(errs, fmt.Errorf("retry attempts %d: want 1..10", c.Attempts))
	}
	if c.Backoff < 0 || c.Backoff > time.Minute {
		errs = append(errs, fmt.Errorf("retry backoff %v: want [0s, 1m]", c.Backoff))
	}
	if !(c.BudgetPercent >= 0 && c.BudgetPercent <= 100) {
		errs = append(errs, fmt.Errorf("retry budget %g%%: want [0, 100] (0: no budget)", c.BudgetPercent))
	}
	if c.BudgetMinRetries < 0 || c.BudgetMinRetries > 1_000_000 {
		errs = append(errs, fmt.Errorf("retry budget minimum %d: want 0..1000000", c.BudgetMinRetries))
	}
	if c.Deadline <= 0 || c.Deadline > 24*time.Hour {
		errs = append(errs, fmt.Errorf("retry deadline %v: want (0s, 24h]", c.Deadline))
	}
	return errors.Join(errs...)
}

// maxSends is Attempts^Layers, the sends one request may take.
func (c RetryClient) maxSends() int {
	n := 1
	for range c.Layers {
		n *= c.Attempts
	}
	return n
}

func (c RetryClient) backoff(retry int) float64 {
	b := c.Backoff.Seconds()
	return math.Min(10*b, b*math.Pow(2, float64(retry-1)))
}

// RetryResult is one policy's replay with retrying clients.
type RetryResult struct {
	Policy, Setting, Clients string
	// Unique is the number of unique requests; Sends every attempt sent.
	Unique, Sends int
	// Amplification is Sends ÷ Unique over the run; PeakAmplification the
	// highest one-minute ratio of sends to unique arrivals (minutes with at
	// least 10 unique arrivals), what the scaler's metric shows at its worst.
	Amplification, PeakAmplification float64
	// GPUHours is billed replica-hours × GPUs per replica over the run
	// (until the last arrival plus RetryTail); Cost at the pool's price.
	GPUHours, Cost float64
	// WastedGPUHours is the service of abandoned attempts: GPU time spent
	// on answers nobody waited for.
	WastedGPUHours float64
	// Verified is the number of unique requests answered within the
	// client's Deadline; VerifiedPercent that ÷ Unique.
	Verified        int
	VerifiedPercent float64
	// CostPer1kVerified is Cost ÷ Verified × 1,000 (+Inf with none).
	CostPer1kVerified float64
	// Failed counts unique requests that were never answered in time and
	// ran out of sends (or of budget).
	Failed int
	// PeakReplicas is the most replicas billed at once.
	PeakReplicas int
}

// RetryTail is how long after the last arrival a retry replay goes on
// billing: long enough for the scaler's 5-minute down-window and bounded
// steps to bring the pool back.
const RetryTail = 30 * time.Minute

// uniqueObserver is implemented by controllers that read the unique rate
// (uniqueRateQuery): the simulator tells them the unique arrivals per
// second over the last minute before each Desired.
type uniqueObserver interface{ observeUnique(rate1m float64) }

// retryCappedCtl is inferscale's decision with a uniqueRateQuery: the same
// signals as inferscaleCtl plus the unique rate, so retries beyond
// retryBudget of the unique demand do not buy replicas.
type retryCappedCtl struct{ inferscaleCtl }

func (c *retryCappedCtl) observeUnique(r float64) { c.unique = r }

// RetryCappedPolicy is InferscalePolicy (no utilisation cap) with a unique
// rate and the given retryBudget (the decision's default 1.2 when ≤ 0).
func RetryCappedPolicy(budget float64, cfg PoolConfig) Policy {
	base := InferscalePolicy(0, 0, cfg)
	return Policy{Name: FamilyInferscale, Setting: fmt.Sprintf("uniqueRateQuery, retryBudget %g", budgetOr(budget)), New: func() Controller {
		ic := base.New().(*inferscaleCtl)
		ic.p.UniqueRateQuery = "replay_unique_rate"
		ic.p.RetryBudget = budgetOr(budget)
		ic.withUnique = true
		return &retryCappedCtl{inferscaleCtl: *ic}
	}}
}

func budgetOr(b float64) float64 {
	if b > 0 {
		return b
	}
	return decision.DefaultPolicy().RetryBudget
}

// Retry simulation events.
const (
	evArrive  uint8 = iota // a unique request's first send (a = request)
	evSend                 // a retry is sent (a = request)
	evTimeout              // an attempt's timeout (a = attempt)
	evDone                 // an attempt finishes service (a = attempt, b = replica)
	evReady                // a replica becomes ready (a = replica)
	evTick                 // the controller decides
)

type rEvent struct {
	t    float64
	kind uint8
	a, b int32
	seq  uint64
}

type rHeap []rEvent

func (h rHeap) Len() int { return len(h) }
func (h rHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h rHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *rHeap) Push(x any)   { *h = append(*h, x.(rEvent)) }
func (h *rHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type rAttempt struct {
	req                  int32
	sent                 float64
	abandoned, done, svc bool
}

type rRequest struct {
	sends    int
	current  int32 // the attempt the client waits for; -1 none
	answered bool
	failed   bool
}

type rReplica struct {
	state uint8 // stStarting, stReady, stDraining, stGone
	busy  int
}

type retrySim struct {
	cfg    PoolConfig
	cl     RetryClient
	w      *Workload
	cold   *coldStarter
	ev     rHeap
	seq    uint64
	now    float64
	att    []rAttempt
	reqs   []rRequest
	reps   []rReplica
	queue  []int32
	qHead  int
	busy   int
	billed int

	outstanding, retriesOut int // attempts clients wait for; of them retries

	billAcc, wasteS, busyAcc, slotAcc float64
	lastBusyAcc, lastSlotAcc          float64

	sentSec, uniqSec, startSec []float64 // per second
	svcSec                     []float64 // service seconds started per second
	res                        RetryResult
}

func (s *retrySim) push(t float64, kind uint8, a, b int32) {
	s.seq++
	heap.Push(&s.ev, rEvent{t: t, kind: kind, a: a, b: b, seq: s.seq})
}

func (s *retrySim) advance(t float64) {
	if dt := t - s.now; dt > 0 {
		s.billAcc += dt * float64(s.billed)
		s.busyAcc += dt * float64(s.busy)
		s.slotAcc += dt * float64(s.readyN()*s.cfg.Slots)
		s.now = t
	}
}

func (s *retrySim) readyN() int {
	n := 0
	for _, r := range s.reps {
		if r.state == stReady {
			n++
		}
	}
	return n
}

func (s *retrySim) sec(arr *[]float64, v float64) {
	i := int(s.now)
	for len(*arr) <= i {
		*arr = append(*arr, 0)
	}
	(*arr)[i] += v
}

// send sends one attempt of request r.
func (s *retrySim) send(r int32) {
	id := int32(len(s.att))
	s.att = append(s.att, rAttempt{req: r, sent: s.now})
	rq := &s.reqs[r]
	rq.sends++
	rq.current = id
	s.outstanding++
	if rq.sends > 1 {
		s.retriesOut++
	}
	s.res.Sends++
	s.sec(&s.sentSec, 1)
	s.queue = append(s.queue, id)
	s.push(s.now+s.cl.Timeout.Seconds(), evTimeout, id, 0)
	s.dispatch()
}

// release ends the client's wait on attempt a.
func (s *retrySim) release(a int32) {
	s.outstanding--
	if s.reqs[s.att[a].req].sends > 1 {
		s.retriesOut--
	}
	s.reqs[s.att[a].req].current = -1
}

func (s *retrySim) dispatch() {
	for s.qHead < len(s.queue) {
		ri := -1
		for i := range s.reps {
			if s.reps[i].state == stReady && s.reps[i].busy < s.cfg.Slots {
				ri = i
				break
			}
		}
		if ri < 0 {
			break
		}
		a := s.queue[s.qHead]
		s.qHead++
		if s.att[a].abandoned && s.cl.CancelQueued {
			continue
		}
		s.reps[ri].busy++
		s.busy++
		svc := s.w.ServiceS[s.att[a].req]
		s.att[a].svc = true
		s.sec(&s.startSec, 1)
		s.sec(&s.svcSec, svc)
		s.push(s.now+svc, evDone, a, int32(ri))
	}
	if s.qHead > 4096 && s.qHead*2 > len(s.queue) {
		s.queue = append(s.queue[:0], s.queue[s.qHead:]...)
		s.qHead = 0
	}
}

func (s *retrySim) scale(desired int) {
	current := 0
	for _, r := range s.reps {
		if r.state == stStarting || r.state == stReady {
			current++
		}
	}
	desired = max(s.cfg.MinReplicas, min(s.cfg.MaxReplicas, desired))
	for ; current < desired; current++ {
		id := int32(len(s.reps))
		for i, r := range s.reps {
			if r.state == stGone {
				id = int32(i)
				break
			}
		}
		if int(id) == len(s.reps) {
			s.reps = append(s.reps, rReplica{})
		}
		s.reps[id] = rReplica{state: stStarting}
		s.billed++
		s.push(s.now+s.cold.draw(), evReady, id, 0)
	}
	// Starting replicas go first, then the least busy ready ones drain.
	for i := len(s.reps) - 1; i >= 0 && current > desired; i-- {
		if s.reps[i].state == stStarting {
			s.reps[i].state = stGone
			s.billed--
			current--
		}
	}
	for current > desired {
		best := -1
		for i, r := range s.reps {
			if r.state == stReady && (best < 0 || r.busy < s.reps[best].busy) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		s.reps[best].state = stDraining
		if s.reps[best].busy == 0 {
			s.reps[best].state = stGone
			s.billed--
		}
		current--
	}
}

func window(arr []float64, now float64, span int) float64 {
	end := int(now) // seconds [end-span, end)
	v := 0.0
	for i := max(0, end-span); i < end && i < len(arr); i++ {
		v += arr[i]
	}
	return v
}

func (s *retrySim) signals(interval float64) Signals {
	span := min(60, int(s.now))
	perS := func(arr []float64) float64 {
		if span == 0 {
			return 0
		}
		return window(arr, s.now, span) / float64(span)
	}
	sig := Signals{Now: time.Duration(math.Round(s.now)) * time.Second, Queue: float64(len(s.queue) - s.qHead),
		Running: float64(s.busy), Rate1m: perS(s.sentSec), Ready: s.readyN(), Slots: s.cfg.Slots}
	for _, r := range s.reps {
		if r.state == stStarting || r.state == stReady {
			sig.Current++
		}
	}
	if n := window(s.startSec, s.now, span); n > 0 {
		sig.ServiceTime1m = window(s.svcSec, s.now, span) / n
	}
	if ds := s.slotAcc - s.lastSlotAcc; ds > 0 {
		sig.Activity = (s.busyAcc - s.lastBusyAcc) / ds
	}
	s.lastBusyAcc, s.lastSlotAcc = s.busyAcc, s.slotAcc
	sig.Concurrency6s, sig.Concurrency60s = sig.Queue+sig.Running, sig.Queue+sig.Running
	_ = interval
	return sig
}

// ReplayRetries replays w (its requests are the unique requests) on the
// pool cfg with clients cl and the policy pol's controller, until the last
// arrival plus RetryTail.
func ReplayRetries(cfg PoolConfig, w *Workload, cl RetryClient, pol Policy) (RetryResult, error) {
	if err := errors.Join(cfg.Validate(), cl.Validate()); err != nil {
		return RetryResult{}, err
	}
	if len(w.ArrivalS) == 0 {
		return RetryResult{}, errors.New("retry replay: the workload has no requests")
	}
	s := &retrySim{cfg: cfg, cl: cl, w: w, cold: newColdStarter(cfg), reqs: make([]rRequest, len(w.ArrivalS))}
	s.res = RetryResult{Policy: pol.Name, Setting: pol.Setting, Unique: len(w.ArrivalS), Clients: cl.String()}
	for range cfg.InitialReplicas {
		s.reps = append(s.reps, rReplica{state: stReady})
		s.billed++
	}
	ctl := pol.New()
	iv := ctl.Interval().Seconds()
	end := w.DurationS() + RetryTail.Seconds()
	for i, t := range w.ArrivalS {
		s.push(t, evArrive, int32(i), 0)
	}
	s.push(iv, evTick, 0, 0)
	maxSends := cl.maxSends()
	for s.ev.Len() > 0 {
		e := heap.Pop(&s.ev).(rEvent)
		if e.t > end {
			break
		}
		s.advance(e.t)
		switch e.kind {
		case evArrive:
			s.reqs[e.a].current = -1
			s.sec(&s.uniqSec, 1)
			s.send(e.a)
		case evSend:
			s.send(e.a)
		case evTimeout:
			at := &s.att[e.a]
			rq := &s.reqs[at.req]
			if at.done || at.abandoned {
				continue
			}
			at.abandoned = true
			s.release(e.a)
			allowed := rq.sends < maxSends
			if allowed && cl.BudgetPercent > 0 {
				allowed = float64(s.retriesOut) < math.Max(float64(cl.BudgetMinRetries), cl.BudgetPercent/100*float64(s.outstanding))
			}
			if allowed {
				s.push(s.now+cl.backoff(rq.sends), evSend, at.req, 0)
				s.outstanding++ // the client is waiting (backing off); counted as outstanding for the budget
				s.retriesOut++
				s.reqs[at.req].current = -2
			} else {
				rq.failed = true
			}
		case evDone:
			at := &s.att[e.a]
			at.done = true
			rp := &s.reps[e.b]
			rp.busy--
			s.busy--
			if rp.state == stDraining && rp.busy == 0 {
				rp.state = stGone
				s.billed--
			}
			if at.abandoned {
				s.wasteS += s.w.ServiceS[at.req]
			} else {
				rq := &s.reqs[at.req]
				s.release(e.a)
				rq.answered = true
				if s.now-s.w.ArrivalS[at.req] <= cl.Deadline.Seconds() {
					s.res.Verified++
				}
			}
			s.dispatch()
		case evReady:
			if s.reps[e.a].state == stStarting {
				s.reps[e.a].state = stReady
				s.dispatch()
			}
		case evTick:
			sig := s.signals(iv)
			if u, ok := ctl.(uniqueObserver); ok {
				span := min(60, int(s.now))
				if span > 0 {
					u.observeUnique(window(s.uniqSec, s.now, span) / float64(span))
				}
			}
			s.scale(ctl.Desired(sig))
			s.res.PeakReplicas = max(s.res.PeakReplicas, s.billed)
			s.push(s.now+iv, evTick, 0, 0)
		}
		if e.kind == evSend {
			// A retry's backoff ended: send() counted it again.
			s.outstanding--
			s.retriesOut--
		}
	}
	s.advance(end)
	r := &s.res
	for _, rq := range s.reqs {
		if rq.failed && !rq.answered {
			r.Failed++
		}
	}
	r.Amplification = float64(r.Sends) / float64(r.Unique)
	for m := 0; m*60 < len(s.uniqSec); m++ {
		u := window(s.uniqSec, float64(m*60+60), 60)
		if u >= 10 {
			r.PeakAmplification = math.Max(r.PeakAmplification, window(s.sentSec, float64(m*60+60), 60)/u)
		}
	}
	gpus := float64(max(1, cfg.GPUsPerReplica))
	r.GPUHours = s.billAcc / 3600 * gpus
	r.WastedGPUHours = s.wasteS / float64(cfg.Slots) / 3600 * gpus
	r.Cost = r.GPUHours * cfg.PricePerGPUHour
	r.VerifiedPercent = 100 * float64(r.Verified) / float64(r.Unique)
	r.CostPer1kVerified = math.Inf(1)
	if r.Verified > 0 {
		r.CostPer1kVerified = r.Cost / float64(r.Verified) * 1000
	}
	return *r, nil
}

// String describes the clients for a table.
func (c RetryClient) String() string {
	s := fmt.Sprintf("%d layers × %d attempts, timeout %v", c.Layers, c.Attempts, c.Timeout)
	if c.BudgetPercent > 0 {
		s += fmt.Sprintf(", retry budget %g%% (min %d)", c.BudgetPercent, c.BudgetMinRetries)
	}
	return s
}

// BurstScenario is the retry scenario's synthetic trace: Poisson arrivals
// at Base requests per second, Factor times that during [Start, Start +
// Length), then Base again until Duration; every request takes Service
// seconds on one slot (exponential with that mean). A burst shorter than
// the pool's cold start is one no reactive policy can meet: the point is
// what happens while the pool catches up.
type BurstScenario struct {
	Base, Factor            float64
	Start, Length, Duration time.Duration
	Service                 time.Duration
	Seed                    uint64
}

// DefaultBurstScenario: 4 req/s of 2 s requests (8 busy slots, two 4-slot
// replicas), a 5× burst for 3 minutes after 10 minutes, 25 minutes in all.
func DefaultBurstScenario() BurstScenario {
	return BurstScenario{Base: 4, Factor: 5, Start: 10 * time.Minute, Length: 3 * time.Minute,
		Duration: 25 * time.Minute, Service: 2 * time.Second, Seed: 1}
}

// Workload draws the scenario's requests.
func (b BurstScenario) Workload() (*Workload, error) {
	if !(b.Base > 0 && b.Base <= 1e4) || !(b.Factor >= 1 && b.Factor <= 100) || b.Start < 0 || b.Length < 0 ||
		b.Duration <= 0 || b.Duration > 24*time.Hour || b.Start+b.Length > b.Duration || b.Service <= 0 {
		return nil, fmt.Errorf("burst scenario %+v: want base in (0, 1e4], factor in [1, 100], 0 ≤ start, start + length ≤ duration ≤ 24h, service > 0", b)
	}
	rng := rand.New(rand.NewPCG(b.Seed, 0x52657472))
	w := &Workload{Name: fmt.Sprintf("synthetic burst: %g req/s, ×%g for %v at %v", b.Base, b.Factor, b.Length, b.Start)}
	t, end := 0.0, b.Duration.Seconds()
	for {
		rate := b.Base
		if t >= b.Start.Seconds() && t < (b.Start+b.Length).Seconds() {
			rate *= b.Factor
		}
		t += rng.ExpFloat64() / rate
		if t >= end {
			break
		}
		w.ArrivalS = append(w.ArrivalS, t)
		w.ServiceS = append(w.ServiceS, rng.ExpFloat64()*b.Service.Seconds())
	}
	return w, nil
}

// RetryComparison replays the scenario's workload with clients that do not
// retry (the reference), with layered retries, and with layered retries
// under a shared retry budget, each under inferscale without and with the
// retry cap (uniqueRateQuery, retryBudget 1.2).
func RetryComparison(cfg PoolConfig, w *Workload, cl RetryClient) ([]RetryResult, error) {
	none := cl
	none.Layers, none.Attempts = 1, 1
	var out []RetryResult
	for _, c := range []RetryClient{none, cl, cl.WithBudget()} {
		pols := []Policy{InferscalePolicy(0, 0, cfg), RetryCappedPolicy(0, cfg)}
		if c.maxSends() == 1 {
			pols = pols[:1] // without retries the cap never binds
		}
		for _, p := range pols {
			r, err := ReplayRetries(cfg, w, c, p)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// WriteRetryTable writes results as a Markdown table.
func WriteRetryTable(w io.Writer, rs []RetryResult) error {
	if _, err := fmt.Fprintln(w, "| clients | policy | amplification (run / peak 1 min) | GPU-hours | of which abandoned work | unique answered within deadline | cost per 1,000 verified | peak replicas |\n|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %s: %s | %.2f / %.2f | %.2f | %.2f | %.2f %% | $%.3f | %d |\n", r.Clients, r.Policy, r.Setting,
			r.Amplification, r.PeakAmplification, r.GPUHours, r.WastedGPUHours, r.VerifiedPercent, r.CostPer1kVerified, r.PeakReplicas); err != nil {
			return err
		}
	}
	return nil
}
