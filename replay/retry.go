package replay

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/inferscale/inferscale/scaler/decision"
)

// This file replays a pool whose clients retry: every unique request of a
// workload is sent by a client that abandons an attempt after a timeout and
// sends it again, through several layers that each retry (a gateway, an SDK,
// a service), or under a shared retry budget. By default an abandoned attempt
// is not cancelled: it keeps its place in the queue and its slot until it
// finishes, as an engine that does not learn that its caller left does the
// work anyway. So under-provisioning turns into retries, the retries into
// queued work and GPU-hours, and a scaler that reads the inflated rate and
// queue buys replicas for copies of requests whose callers already gave up.
// Two other engines are options: RetryClient.CancelQueued drops an abandoned
// attempt that is still queued, and RetryClient.AbortAbandoned also aborts
// one that is running, freeing its slot at the timeout.

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
	// waits); a started one keeps its slot until it finishes. Default false:
	// the engine serves it.
	CancelQueued bool
	// AbortAbandoned aborts an abandoned attempt whether it waits or runs: a
	// running one frees its slot at the timeout, as vLLM does for a request
	// whose client disconnected (AsyncLLM.generate aborts it in the engine,
	// waiting or running). It implies CancelQueued. Default false.
	AbortAbandoned bool
	// Deadline is how long after a request's first send its answer is still
	// worth something: an answer later than that is not a verified result.
	// Default 45 s: the innermost layer's three attempts of 15 s.
	Deadline time.Duration
	// RejectShare is the share of attempts the engine rejects at once, at no
	// GPU cost and whatever the load: retries the pool's own lag does not
	// cause. Triton answers such an attempt UNAVAILABLE ("Exceeds maximum
	// queue size" from a model instance whose max_queue_size is full while
	// others idle, or an instance that is restarting); Envoy's grpc retry_on
	// "unavailable" and the SDKs retry it after the back-off, and it counts
	// in the engine's request rate (nv_inference_request_failure, which the
	// Triton preset's rateQuery adds to nv_inference_request_success). Each
	// attempt is rejected with this probability, independently, drawn from
	// the request and the attempt's number so every policy sees the same
	// rejections; one request then takes 1 ÷ (1 − RejectShare) sends on
	// average. Default 0: Triton's default max_queue_size 0 (no limit)
	// rejects nothing.
	RejectShare float64
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
	if !(c.RejectShare >= 0 && c.RejectShare <= 0.95) {
		errs = append(errs, fmt.Errorf("retry reject share %g: want [0, 0.95]", c.RejectShare))
	}
	return errors.Join(errs...)
}

// ErrRetryEvents is wrapped by the error of a retry replay that processed
// more request events than retryEventBound: a simulator bug, never a
// property of the input.
var ErrRetryEvents = errors.New("retry replay: event bound passed")

// retryEventBound bounds the request events one retry replay processes:
// each of the unique requests arrives once, and each of its at most
// cl.maxSends() sends makes at most three events (the retry's send after
// its back-off, the attempt's timeout, its end of service). Ticks and
// replica starts are bounded by the replay's length instead.
func retryEventBound(unique int, cl RetryClient) int {
	return unique * (1 + 3*cl.maxSends())
}

// maxSends is Attempts^Layers, the sends one request may take.
func (c RetryClient) maxSends() int {
	n := 1
	for range c.Layers {
		n *= c.Attempts
	}
	return n
}

// rejects reports whether the engine rejects the n-th send (1-based) of
// request r: a splitmix64 hash of (r, n) below RejectShare × 2⁶⁴.
func (c RetryClient) rejects(r int32, n int) bool {
	if c.RejectShare <= 0 {
		return false
	}
	z := uint64(uint32(r))<<32 | uint64(uint32(n))
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11)/(1<<53) < c.RejectShare
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
	// Rejected counts the sends the engine rejected at once
	// (RetryClient.RejectShare).
	Rejected int
	// StormMinutes are the minutes (0 = the first) whose one-minute
	// amplification exceeded StormAmplification: where the pool lagged its
	// demand (or, with rejections, where the engine turned attempts away).
	StormMinutes []int
	// Events counts the request events processed (arrivals, retries' sends,
	// timeouts, ends of service), at most retryEventBound.
	Events int
}

// StormAmplification is the one-minute amplification above which a minute
// counts as a retry storm: the alert level the source names (1.5),
// the same level the scaler logs a sustained amplification above.
const StormAmplification = 1.5

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

// rHeap is a binary min-heap of events on (t, seq), typed: container/heap
// boxed every event in an interface, one allocation per push and per pop
// (a third of the replay's CPU at 350,000 requests). (t, seq) is a total
// order, so the events come out in the same order either way.
type rHeap []rEvent

func (e rEvent) before(o rEvent) bool {
	if e.t != o.t {
		return e.t < o.t
	}
	return e.seq < o.seq
}

func (h *rHeap) push(e rEvent) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].before(a[p]) {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *rHeap) pop() rEvent {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		m, l := i, 2*i+1
		if l < n && a[l].before(a[m]) {
			m = l
		}
		if r := l + 1; r < n && a[r].before(a[m]) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// rAttempt is one send; it stays in retrySim.att until the replay ends, so it
// is kept to 8 bytes (up to MaxRequests of them). What only an abort needs is
// in retrySim.inService.
type rAttempt struct {
	req                  int32
	abandoned, done, svc bool
}

// rService is where and since when an attempt is being served: the replica
// whose slot an abort frees, and the service it got.
type rService struct {
	rep   int32
	start float64
}

type rRequest struct {
	sends    int32
	current  int32 // the attempt the client waits for; -1 none
	answered bool
	failed   bool
}

type rReplica struct {
	state uint8 // stStarting, stReady, stDraining, stGone
	// open: the replica's index is in retrySim.open.
	open bool
	busy int
}

// openHeap is a min-heap of replica indices that may have a free slot on a
// ready replica (checked when read): dispatch takes the lowest such index,
// as a scan from replica 0 would, in O(log replicas) instead of
// O(replicas) per attempt (1,000 h requests drove the pool to 10,000
// replicas, and every attempt scanned them all).
type openHeap []int32

func (h openHeap) Len() int           { return len(h) }
func (h openHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h openHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *openHeap) Push(x any)        { *h = append(*h, x.(int32)) }
func (h *openHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// poolSnap is the pool's concurrency integral at one decision time.
type poolSnap struct{ t, acc float64 }

type retrySim struct {
	cfg  PoolConfig
	cl   RetryClient
	w    *Workload
	cold *coldStarter
	ev   rHeap
	// timeouts are the pending evTimeout events, oldest first from tHead;
	// next is the next arrival of w.
	timeouts    []rEvent
	tHead, next int
	seq         uint64
	now         float64
	att         []rAttempt
	// inService holds the attempts in service, by attempt, when
	// AbortAbandoned is set (nil otherwise): at most the pool's slots.
	inService map[int32]rService
	reqs      []rRequest
	reps      []rReplica
	open      openHeap
	ready     int // replicas in stReady
	queue     []int32
	qHead     int
	busy      int
	billed    int

	outstanding, retriesOut int // attempts clients wait for; of them retries
	lim                     retryLimits

	billAcc, wasteS, busyAcc, slotAcc float64
	lastBusyAcc, lastSlotAcc          float64
	poolAcc                           float64 // ∫ (waiting + in service) dt
	// dead counts the queued attempts abandoned on an engine that drops them
	// (CancelQueued, AbortAbandoned): still in the queue slice until
	// dispatch skips them, but no longer waiting in the engine.
	dead      int
	poolSnaps []poolSnap // poolAcc at each decision, oldest first

	sentSec, uniqSec, endSec []float64 // per second
	svcSec                   []float64 // service seconds of attempts ended per second
	res                      RetryResult
}

func (s *retrySim) push(t float64, kind uint8, a, b int32) {
	s.seq++
	e := rEvent{t: t, kind: kind, a: a, b: b, seq: s.seq}
	if kind == evTimeout {
		// Every timeout is now + Timeout, pushed as now grows: they come
		// due in the order they were pushed, and a FIFO keeps them out of
		// the heap (one per attempt, most of it).
		s.timeouts = append(s.timeouts, e)
		return
	}
	s.ev.push(e)
}

// nextEvent takes the earliest pending event by (t, seq), false when none:
// the next arrival of w (arrivals go first at equal times, as if they held
// the lowest sequence numbers), the oldest timeout or the heap's top.
func (s *retrySim) nextEvent() (rEvent, bool) {
	var e rEvent
	ok := len(s.ev) > 0
	if ok {
		e = s.ev[0]
	}
	fromFIFO := false
	if s.tHead < len(s.timeouts) && (!ok || s.timeouts[s.tHead].before(e)) {
		e, ok, fromFIFO = s.timeouts[s.tHead], true, true
	}
	if s.next < len(s.w.ArrivalS) && (!ok || s.w.ArrivalS[s.next] <= e.t) {
		s.next++
		return rEvent{t: s.w.ArrivalS[s.next-1], kind: evArrive, a: int32(s.next - 1)}, true
	}
	switch {
	case !ok:
	case fromFIFO:
		s.tHead++
		if s.tHead > 4096 && s.tHead*2 > len(s.timeouts) {
			s.timeouts = append(s.timeouts[:0], s.timeouts[s.tHead:]...)
			s.tHead = 0
		}
	default:
		s.ev.pop()
	}
	return e, ok
}

func (s *retrySim) advance(t float64) {
	if dt := t - s.now; dt > 0 {
		s.billAcc += dt * float64(s.billed)
		s.busyAcc += dt * float64(s.busy)
		s.slotAcc += dt * float64(s.ready*s.cfg.Slots)
		s.poolAcc += dt * float64(s.waiting()+s.busy)
		s.now = t
	}
}

// offer puts replica i in the open heap when it is ready with a free slot.
func (s *retrySim) offer(i int32) {
	if r := &s.reps[i]; !r.open && r.state == stReady && r.busy < s.cfg.Slots {
		r.open = true
		heap.Push(&s.open, i)
	}
}

// openReplica is the lowest-index ready replica with a free slot, -1 when
// none; it drops from the heap the indices that no longer qualify.
func (s *retrySim) openReplica() int {
	for len(s.open) > 0 {
		i := s.open[0]
		if r := &s.reps[i]; r.state == stReady && r.busy < s.cfg.Slots {
			return int(i)
		}
		s.reps[i].open = false
		heap.Pop(&s.open)
	}
	return -1
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
	s.att = append(s.att, rAttempt{req: r})
	rq := &s.reqs[r]
	rq.sends++
	rq.current = id
	s.outstanding++
	if rq.sends > 1 {
		s.retriesOut++
	}
	s.res.Sends++
	s.sec(&s.sentSec, 1)
	if s.cl.rejects(r, int(rq.sends)) {
		// Rejected at once: no queue place, no slot, no timeout to wait.
		s.res.Rejected++
		s.att[id].done = true
		s.release(id)
		s.retryOrFail(r)
		return
	}
	s.queue = append(s.queue, id)
	s.push(s.now+s.cl.Timeout.Seconds(), evTimeout, id, 0)
	s.dispatch()
}

// retryOrFail sends request r again after the back-off when it has sends
// left (and, under a retry budget, the budget allows a retry now);
// otherwise the request fails.
func (s *retrySim) retryOrFail(r int32) {
	rq := &s.reqs[r]
	allowed := int(rq.sends) < s.cl.maxSends()
	if allowed && s.cl.BudgetPercent > 0 {
		allowed = float64(s.retriesOut) < math.Max(float64(s.cl.BudgetMinRetries), s.cl.BudgetPercent/100*float64(s.outstanding))
	}
	if !allowed {
		rq.failed = true
		return
	}
	s.push(s.now+s.cl.backoff(int(rq.sends)), evSend, r, 0)
	s.outstanding++ // the client is waiting (backing off); counted as outstanding for the budget
	s.retriesOut++
	rq.current = -2
}

// drops reports whether the engine drops an abandoned attempt still queued.
func (s *retrySim) drops() bool { return s.cl.CancelQueued || s.cl.AbortAbandoned }

// waiting is the number of attempts waiting in the engine's queue: those
// queued less the abandoned ones an engine that drops them no longer holds.
func (s *retrySim) waiting() int { return len(s.queue) - s.qHead - s.dead }

// endService frees the slot of replica i that an attempt held: a draining
// replica with nothing left in service goes.
func (s *retrySim) endService(i int32) {
	rp := &s.reps[i]
	rp.busy--
	s.busy--
	if rp.state == stDraining && rp.busy == 0 {
		rp.state = stGone
		s.billed--
	}
	s.offer(i)
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
		ri := s.openReplica()
		if ri < 0 {
			break
		}
		a := s.queue[s.qHead]
		s.qHead++
		if s.att[a].abandoned && s.drops() {
			s.dead--
			continue
		}
		s.reps[ri].busy++
		s.busy++
		svc := s.w.ServiceS[s.att[a].req]
		s.att[a].svc = true
		if s.inService != nil {
			s.inService[a] = rService{rep: int32(ri), start: s.now}
		}
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
		// A reused index may still be in the open heap: keep its flag.
		s.reps[id] = rReplica{state: stStarting, open: s.reps[id].open}
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
		s.ready--
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
	sig := Signals{Now: time.Duration(math.Round(s.now)) * time.Second, Queue: float64(s.waiting()),
		Running: float64(s.busy), Rate1m: perS(s.sentSec), Ready: s.ready, Slots: s.cfg.Slots}
	for _, r := range s.reps {
		if r.state == stStarting || r.state == stReady {
			sig.Current++
		}
	}
	if span > 0 {
		long := min(600, int(s.now))
		sig.ServiceTime = serviceTime(window(s.svcSec, s.now, span), window(s.endSec, s.now, span), window(s.svcSec, s.now, long), window(s.endSec, s.now, long))
	}
	if ds := s.slotAcc - s.lastSlotAcc; ds > 0 {
		sig.Activity = (s.busyAcc - s.lastBusyAcc) / ds
	}
	s.lastBusyAcc, s.lastSlotAcc = s.busyAcc, s.slotAcc
	s.poolSnaps = append(s.poolSnaps, poolSnap{t: s.now, acc: s.poolAcc})
	sig.Concurrency6s, sig.Concurrency60s = s.meanPool(6), s.meanPool(60)
	if len(s.poolSnaps) > 2 && s.poolSnaps[1].t <= s.now-60-interval {
		s.poolSnaps = s.poolSnaps[1:]
	}
	return sig
}

// meanPool is the mean number of requests in the pool (waiting or in
// service) over the last span seconds, from the latest decision at least
// span ago (t = 0 when none is): the windows Knative averages over.
func (s *retrySim) meanPool(span float64) float64 {
	from := s.poolSnaps[0]
	for _, p := range s.poolSnaps {
		if p.t > s.now-span {
			break
		}
		from = p
	}
	if d := s.now - from.t; d > 0 {
		return (s.poolAcc - from.acc) / d
	}
	return float64(s.waiting() + s.busy)
}

// ReplayRetries replays w (its requests are the unique requests) on the
// pool cfg with clients cl and the policy pol's controller, until the last
// arrival plus RetryTail.
func ReplayRetries(cfg PoolConfig, w *Workload, cl RetryClient, pol Policy) (RetryResult, error) {
	return replayRetries(cfg, w, cl, pol, retryLimits{events: retryEventBound(len(w.ArrivalS), cl), sends: MaxRequests})
}

// retryLimits bound one retry replay: request events (ErrRetryEvents past
// them) and sends (ErrTooLarge past them).
type retryLimits struct{ events, sends int }

// replayRetries is ReplayRetries under the limits lim.
func replayRetries(cfg PoolConfig, w *Workload, cl RetryClient, pol Policy, lim retryLimits) (RetryResult, error) {
	if err := errors.Join(cfg.Validate(), cl.Validate()); err != nil {
		return RetryResult{}, err
	}
	if len(w.ArrivalS) == 0 {
		return RetryResult{}, errors.New("retry replay: the workload has no requests")
	}
	s := &retrySim{cfg: cfg, cl: cl, w: w, cold: newColdStarter(cfg), reqs: make([]rRequest, len(w.ArrivalS))}
	s.res = RetryResult{Policy: pol.Name, Setting: pol.Setting, Unique: len(w.ArrivalS), Clients: cl.String()}
	for i := range cfg.InitialReplicas {
		s.reps = append(s.reps, rReplica{state: stReady})
		s.billed++
		s.ready++
		s.offer(int32(i))
	}
	ctl := pol.New()
	iv := ctl.Interval().Seconds()
	end := w.DurationS() + RetryTail.Seconds()
	s.lim = lim
	if cl.AbortAbandoned {
		s.inService = make(map[int32]rService)
	}
	s.push(iv, evTick, 0, 0)
	s.poolSnaps = append(s.poolSnaps, poolSnap{})
	// Arrivals are read from w in order rather than queued up front (one
	// heap entry per request).
	for {
		e, ok := s.nextEvent()
		if !ok || e.t > end {
			break
		}
		if e.kind != evTick && e.kind != evReady {
			if s.res.Events++; s.res.Events > s.lim.events {
				return RetryResult{}, fmt.Errorf("%w: %d request events processed, past the bound %d (unique × (1 + 3 × sends per request))", ErrRetryEvents, s.res.Events, s.lim.events)
			}
		}
		if (e.kind == evArrive || e.kind == evSend) && s.res.Sends >= s.lim.sends {
			// Each send holds its attempt (and a queue place) until the
			// replay ends: bound the memory, not only the unique requests.
			return RetryResult{}, fmt.Errorf("%w: retry replay: %s under %s would send more than %d attempts (MaxRequests) by %v; want fewer unique requests or fewer sends per request",
				ErrTooLarge, pol.Name, cl, s.lim.sends, time.Duration(e.t*float64(time.Second)).Round(time.Second))
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
			if at.done || at.abandoned {
				continue
			}
			at.abandoned = true
			s.release(e.a)
			switch {
			case !at.svc && s.drops():
				s.dead++ // dropped from the engine's queue now; dispatch skips it
			case at.svc && s.cl.AbortAbandoned:
				// Aborted in service: the slot is free now and its evDone is void.
				// The service-time signal keeps the attempt with the service it got,
				// as an engine that records an aborted request's latency among its
				// finished ones (vLLM's finished_reason "abort") reports it: an
				// assumption — an engine that leaves aborted requests out reads the
				// shorter, completed ones only, and lower still.
				at.done = true
				sv := s.inService[e.a]
				delete(s.inService, e.a)
				s.wasteS += s.now - sv.start
				s.sec(&s.endSec, 1)
				s.sec(&s.svcSec, s.now-sv.start)
				s.endService(sv.rep)
				s.dispatch()
			}
			s.retryOrFail(at.req)
		case evDone:
			at := &s.att[e.a]
			if at.done { // aborted at its timeout (AbortAbandoned)
				continue
			}
			at.done = true
			delete(s.inService, e.a)
			s.endService(e.b)
			// Counted at completion, as Triton's duration counters and vLLM's
			// latency histograms record a request when it ends.
			s.sec(&s.endSec, 1)
			s.sec(&s.svcSec, s.w.ServiceS[at.req])
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
				s.ready++
				s.offer(e.a)
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
			a := window(s.sentSec, float64(m*60+60), 60) / u
			r.PeakAmplification = math.Max(r.PeakAmplification, a)
			if a > StormAmplification {
				r.StormMinutes = append(r.StormMinutes, m)
			}
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
	if c.RejectShare > 0 {
		s += fmt.Sprintf("; engine rejects %g %% of attempts", 100*c.RejectShare)
	}
	switch {
	case c.AbortAbandoned:
		s += "; engine aborts abandoned attempts"
	case c.CancelQueued:
		s += "; engine drops abandoned queued attempts"
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

// MaxBurstService bounds BurstScenario.Service, the mean service time. An
// hour is the range replay's --base-service accepts, and 240 times the
// default Timeout (15 s): well past the point where every attempt is
// abandoned before it ends, so longer means show nothing new.
const MaxBurstService = time.Hour

// DefaultBurstScenario: 4 req/s of 2 s requests (8 busy slots, two 4-slot
// replicas), a 5× burst for 3 minutes after 10 minutes, 25 minutes in all.
func DefaultBurstScenario() BurstScenario {
	return BurstScenario{Base: 4, Factor: 5, Start: 10 * time.Minute, Length: 3 * time.Minute,
		Duration: 25 * time.Minute, Service: 2 * time.Second, Seed: 1}
}

// ExpectedRequests is the scenario's expected request count, Base ×
// (Duration − Length) + Base × Factor × Length.
func (b BurstScenario) ExpectedRequests() float64 {
	return b.Base*(b.Duration-b.Length).Seconds() + b.Base*b.Factor*b.Length.Seconds()
}

// Validate reports every field out of range, each with its range, and an
// expected request count (ExpectedRequests) past MaxRequests, the
// per-request trace cap: the replay holds every request and its attempts in
// memory (base 10,000 req/s × factor 100 for a day asked for 1.04e9
// requests and grew past 10 GB).
func (b BurstScenario) Validate() error {
	var errs []error
	if !(b.Base > 0 && b.Base <= 1e4) {
		errs = append(errs, fmt.Errorf("burst scenario base rate %g req/s: want (0, 10000]", b.Base))
	}
	if !(b.Factor >= 1 && b.Factor <= 100) {
		errs = append(errs, fmt.Errorf("burst scenario factor %g: want [1, 100]", b.Factor))
	}
	if b.Duration <= 0 || b.Duration > 24*time.Hour {
		errs = append(errs, fmt.Errorf("burst scenario duration %v: want (0s, 24h]", b.Duration))
	}
	// Start and length are judged against the duration only when it is in
	// range (a bad one is its own error).
	startWant, lengthWant := "≥ 0s", "≥ 0s"
	startOK, lengthOK := b.Start >= 0, b.Length >= 0
	if b.Duration > 0 && b.Duration <= 24*time.Hour {
		startWant = fmt.Sprintf("[0s, duration (%v)]", b.Duration)
		startOK = startOK && b.Start <= b.Duration
		if startOK {
			lengthWant = fmt.Sprintf("[0s, duration − start (%v)]", b.Duration-b.Start)
			lengthOK = lengthOK && b.Length <= b.Duration-b.Start
		}
	}
	if !startOK {
		errs = append(errs, fmt.Errorf("burst scenario start %v: want %s", b.Start, startWant))
	}
	if !lengthOK {
		errs = append(errs, fmt.Errorf("burst scenario length %v: want %s", b.Length, lengthWant))
	}
	if b.Service <= 0 || b.Service > MaxBurstService {
		errs = append(errs, fmt.Errorf("burst scenario service %v: want a mean service time in (0s, %v]", b.Service, MaxBurstService))
	}
	if len(errs) == 0 {
		if n := b.ExpectedRequests(); n > MaxRequests {
			errs = append(errs, fmt.Errorf("%w: burst scenario expects %.4g requests (base × (duration − length) + base × factor × length); want at most MaxRequests (%d)", ErrTooLarge, n, MaxRequests))
		}
	}
	return errors.Join(errs...)
}

// ValidateRetries reports every violation of b (Validate) and of cl (RetryClient.Validate),
// all together, and, when both are valid, a scenario whose replays may send more than
// MaxRequests attempts: b.ExpectedRequests() unique requests × Attempts^Layers sends each, the
// most one request can take under cl (a shared retry budget only refuses retries, and
// rejections count among the sends), so one replay holds up to that many attempts in memory.
// That error wraps ErrTooLarge and names the flags of "replay retry" (--base-rate,
// --burst-factor, --duration, --burst-length, --layers, --attempts) with the figures. At the
// defaults (25 minutes, a 5× burst for 3 minutes, 3 × 3 retries: 2,220 expected requests per
// req/s, 27 sends each) --base-rate is accepted up to 834 req/s (49,989,960 sends); before the
// bound, --base-rate=1000 ran 1 min 37 s to 5.4 GB of attempts before the in-run guard
// (ReplayRetries, at MaxRequests sends) refused it. The guard stays: the drawn count is Poisson
// around the expected one.
func (b BurstScenario) ValidateRetries(cl RetryClient) error {
	if err := errors.Join(b.Validate(), cl.Validate()); err != nil {
		return err
	}
	unique, per := b.ExpectedRequests(), cl.maxSends()
	if sends := unique * float64(per); sends > MaxRequests {
		return fmt.Errorf("%w: --base-rate %g × (--duration %v − --burst-length %v) + --base-rate × --burst-factor %g × --burst-length expects %.4g unique requests, "+
			"each sent up to %d times (--attempts %d ^ --layers %d): up to %.4g sends in one replay; want at most MaxRequests (%d) "+
			"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)",
			ErrTooLarge, b.Base, b.Duration, b.Length, b.Factor, unique, per, cl.Attempts, cl.Layers, sends, MaxRequests)
	}
	return nil
}

// Workload validates the scenario and draws its requests.
func (b BurstScenario) Workload() (*Workload, error) {
	if err := b.Validate(); err != nil {
		return nil, err
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

// RetryComparison replays the workload with clients that do not retry (the
// reference), with cl's layered retries, and with layered retries under a
// shared retry budget (cl.WithBudget), each under inferscale without and
// with the retry cap (uniqueRateQuery, retryBudget 1.2) and under every
// other family of FamilySpecs at its value in set (the published settings
// of replay/settings.yaml, DefaultSettings().Published, for the report).
// Static provisioning is sized on the workload's observed peak one-minute
// demand, as in the main comparison. Rows are grouped by clients, in that
// order; the cap row follows inferscale's and is left out without retries
// (the cap never binds there).
func RetryComparison(cfg PoolConfig, w *Workload, cl RetryClient, set map[string]SettingEntry) ([]RetryResult, error) {
	if len(w.ArrivalS) == 0 {
		return nil, errors.New("retry comparison: the workload has no requests")
	}
	env := PolicyEnv{Pool: cfg, PeakReplicas: peakReplicas(workPerSecond(w), cfg.Slots)}
	var pols []Policy
	for _, fs := range FamilySpecs() {
		e, ok := set[fs.Family]
		if !ok {
			return nil, fmt.Errorf("retry comparison: the setting set has no %s", fs.Family)
		}
		pols = append(pols, fs.Policy(e.Value, env))
		if fs.Family == FamilyInferscale {
			pols = append(pols, RetryCappedPolicy(0, cfg))
		}
	}
	none := cl
	none.Layers, none.Attempts = 1, 1
	var out []RetryResult
	for _, c := range []RetryClient{none, cl, cl.WithBudget()} {
		for _, p := range pols {
			if c.maxSends() == 1 && p.Setting == RetryCappedPolicy(0, cfg).Setting {
				continue
			}
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
	if _, err := fmt.Fprintln(w, "| clients | policy | amplification (run / peak 1 min) | minutes with amplification > 1.5 | GPU-hours | of which abandoned work | unique answered within deadline | cost per 1,000 verified | peak replicas |\n|---|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %s: %s | %.2f / %.2f | %s | %.2f | %.2f | %.2f %% | %s | %d |\n", r.Clients, r.Policy, r.Setting,
			r.Amplification, r.PeakAmplification, minuteRanges(r.StormMinutes), r.GPUHours, r.WastedGPUHours, r.VerifiedPercent, dollars(r.CostPer1kVerified), r.PeakReplicas); err != nil {
			return err
		}
	}
	return nil
}

// dollars writes a cost as $0.123; a cost per result when no result was
// verified (a cost ÷ 0) is ∞, and one with no cost either (0 ÷ 0) is –
// ("$+Inf" and "$NaN" before).
func dollars(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "∞"
	case math.IsNaN(v):
		return "–"
	}
	return fmt.Sprintf("$%.3f", v)
}

// minuteRanges writes sorted minutes as their count and runs, "0" when
// none: [0 1 2 10 11] → "5 (0–2, 10–11)".
func minuteRanges(ms []int) string {
	if len(ms) == 0 {
		return "0"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d (", len(ms))
	for i := 0; i < len(ms); {
		j := i
		for j+1 < len(ms) && ms[j+1] == ms[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if j > i {
			fmt.Fprintf(&b, "%d–%d", ms[i], ms[j])
		} else {
			fmt.Fprintf(&b, "%d", ms[i])
		}
		i = j + 1
	}
	b.WriteString(")")
	return b.String()
}
