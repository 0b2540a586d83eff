package replay

import (
	"math"
	"time"
)

// Signals is what a policy sees at a decision, as Prometheus and the
// Kubernetes API would show it.
type Signals struct {
	// Now is the simulated time since the trace start.
	Now time.Duration
	// Queue is the number of requests waiting now (not in service).
	Queue float64
	// Running is the number of requests in service now (busy slots), like
	// vllm:num_requests_running.
	Running float64
	// Rate1m is arrivals per second over the last minute, like
	// rate(requests_total[1m]) (over the elapsed time in the first minute).
	Rate1m float64
	// Activity is the busy fraction of ready slots over the last 15 s scrape
	// interval, 0..1: the stand-in for DCGM_FI_PROF_GR_ENGINE_ACTIVE.
	Activity float64
	// Concurrency6s and Concurrency60s are the mean number of requests in the
	// pool (waiting + in service) over the last 6 s and 60 s, the windows
	// Knative's autoscaler averages.
	Concurrency6s, Concurrency60s float64
	// Ready is the number of ready replicas that take work.
	Ready int
	// Current is the replica count the scale target's spec holds now
	// (starting + ready, not draining).
	Current int
	// Slots is the concurrency of one replica.
	Slots int
	// ServiceTime is S as the service-time preset reads it from an engine's
	// counters, which count a request when it completes (Triton's duration
	// counters, vLLM's latency histograms): the last minute's mean service
	// seconds of the requests completed, weighed against the last ten
	// minutes' by the minute's completions (serviceTime; seconds); 0 when
	// nothing completed in ten minutes (the preset's NaN).
	ServiceTime float64
}

// serviceTimePriorCompletions is n₀ of the service-time preset,
// prom.ServiceTimePriorCompletions, whose doc gives the estimator and its
// source (TestServiceTimeMatchesPreset holds the two equal; the replay does
// not import the scaler's Prometheus client).
const serviceTimePriorCompletions = 4

// serviceTime is the service-time preset's S (prom.ServiceTimePriorCompletions):
// from svc1, n1, the service seconds and completions of the last minute, and
// svc10, n10, those of the last ten minutes,
//
//	S = (svc1 + n₀·svc10/n10) ÷ (n1 + n₀), n₀ = serviceTimePriorCompletions,
//
// the minute's mean weighed by its completions against the ten minutes'. It
// returns 0 (missing) when n10 is 0 or any input is not a count, as the
// preset's 0/0 is NaN.
func serviceTime(svc1, n1, svc10, n10 float64) float64 {
	if !(n10 > 0) || !(n1 >= 0) || !(svc1 >= 0) || !(svc10 >= 0) {
		return 0
	}
	const n0 = float64(serviceTimePriorCompletions)
	return (svc1 + n0*svc10/n10) / (n1 + n0)
}

// Controller decides the replica count of the pool. Implementations keep
// their own state and are used for one run.
type Controller interface {
	// Interval is the decision period; Desired is called at every multiple of
	// it after t = 0 (the run starts from PoolConfig.InitialReplicas ready
	// replicas; signals need a scrape interval of history).
	Interval() time.Duration
	// Desired returns the replica count to set now.
	Desired(s Signals) int
}

// Sample is one point of a run's time series.
type Sample struct {
	TimeS    float64
	Arrivals float64 // requests per second over the sample step
	Queue    float64
	Ready    int
	Replicas int // spec count (starting + ready)
	Live     int // billed replicas (starting + ready + draining)
	BusyFrac float64
	// MaxWait is the longest queue wait of the requests that started
	// service in the step, seconds; Misses counts the step's requests
	// that waited longer than the SLO.
	MaxWait float64
	Misses  float64
}

// Result is one policy run.
type Result struct {
	Policy  string
	Setting string
	// SettingSet is SetPublished, SetTuned, SetHindsight or SetOptimum;
	// Value the family's setting value.
	SettingSet string
	Value      float64
	// Requests is the number of requests that arrived, served or not
	// (Unserved; fractional in binned mode).
	Requests float64
	// SLOMet is how many started service within the SLO.
	SLOMet float64
	// ReplicaSeconds is billed replica time (cold starts and draining
	// included).
	ReplicaSeconds float64
	// WaitP50, WaitP95, WaitP99 are queue-wait percentiles, seconds.
	WaitP50, WaitP95, WaitP99 float64
	// ScaleEvents counts changes of the replica count; ColdStarts counts
	// replicas created.
	ScaleEvents, ColdStarts int
	// DurationS is the simulated span, seconds.
	DurationS float64
	// Series samples the run for the CSV and the charts.
	Series []Sample
	// MeetsSLO is SLOMet/Requests ≥ the pool's SLOTarget with every
	// request served (Unserved = 0): a run cut short is never the cheapest
	// meeting the SLO (hindsight, optimum, headline), since the work it left
	// is not billed.
	MeetsSLO bool
	// WorstHourAttainment is the lowest SLO attainment of any hour of the
	// trace with arrivals (hours counted from the first arrival, requests
	// by arrival time); WorstHour is its index.
	WorstHourAttainment float64
	WorstHour           int
	// Unserved counts the requests the run stopped without serving
	// (fractional in binned mode): still queued when it stopped, 6 h after
	// the last arrival (runOptions.maxOverrunS), in per-request mode, or
	// the binned backlog left with no ready replica to serve it. They
	// count as missing the SLO (in binned mode, which judges a request when
	// it arrives, taken back from the latest arrivals judged met) and their
	// work is not billed, so a run with Unserved > 0 can cost less than the
	// bound (which bounds schedules serving every request); the table and
	// summary.json mark it (CutShort), and it does not meet the SLO.
	Unserved float64
	// windowArrivals and windowMet count by runOptions.windowS window.
	windowArrivals, windowMet []float64
}

// Attainment is the fraction of requests that met the SLO.
func (r Result) Attainment() float64 {
	if r.Requests == 0 {
		return 1
	}
	return r.SLOMet / r.Requests
}

// CutShort reports whether the run stopped with requests unserved.
func (r Result) CutShort() bool { return r.Unserved > 0 }

// GPUHours converts billed replica time.
func (r Result) GPUHours(gpusPerReplica int) float64 {
	return r.ReplicaSeconds * float64(gpusPerReplica) / 3600
}

// waitHist is a log-linear histogram of waits: bucket 0 holds zero waits,
// then 32 buckets per doubling from 1 ms to histTopS; relative error ≤
// 2.2 %. Waits at or past histTopS, and requests never served (+Inf), are
// counted in over.
type waitHist struct {
	b     [1 + 32*26]float64
	over  float64
	total float64
}

// histMinS is the first bucket's lower edge and histTopS the last one's
// upper edge, 2^26 ms (67,108.9 s, 18.6 h): a quantile past it is reported
// as +Inf, shown as ">67108.9s" (fwait) and in summary.json as histTopS
// with waitP99Overflow set.
const (
	histMinS = 1e-3
	histTopS = histMinS * (1 << 26)
)

func (h *waitHist) add(w, n float64) {
	h.total += n
	switch {
	case w < histMinS:
		h.b[0] += n
	case w >= histTopS: // and +Inf: never served
		h.over += n
	default:
		h.b[min(len(h.b)-1, 1+int(math.Log2(w/histMinS)*32))] += n
	}
}

// quantile returns the upper edge of the bucket holding quantile q, or
// +Inf when q lands past histTopS (requests never served, or waiting
// longer): the histogram does not know how long those waited, and its top
// edge (67,108.9 s) was reported as though they had waited exactly that.
func (h *waitHist) quantile(q float64) float64 {
	if h.total == 0 {
		return 0
	}
	target := q * h.total
	var c float64
	for i, v := range h.b {
		c += v
		if c >= target && v > 0 {
			if i == 0 {
				return 0
			}
			return histMinS * math.Exp2(float64(i)/32)
		}
	}
	if h.over > 0 {
		return math.Inf(1)
	}
	return histTopS
}

// historyLen is how many per-second entries history keeps: ten minutes and
// the entry before them, for the service-time preset's long window.
const historyLen = 601

// history keeps per-second cumulative counters for the last 601 seconds.
type history struct {
	arr, busy, slots, inPool [historyLen]float64
	svc, served              [historyLen]float64 // cumulative service seconds and requests, counted at completion
	n                        int
}

func (h *history) push(arr, busy, slots, inPool, svc, served float64) {
	i := h.n % historyLen
	h.arr[i], h.busy[i], h.slots[i], h.inPool[i] = arr, busy, slots, inPool
	h.svc[i], h.served[i] = svc, served
	h.n++
}

// back returns the index k seconds before the newest entry (clamped to the
// oldest kept).
func (h *history) back(k int) (int, int) {
	k = min(k, h.n-1, historyLen-1)
	return (h.n - 1 - k) % historyLen, k
}

func (h *history) signals(s *Signals) {
	if h.n < 2 {
		return
	}
	last := (h.n - 1) % historyLen
	if i, k := h.back(60); k > 0 {
		// Over the span kept (60 s once a minute has passed): the run
		// starts mid-stream, not from an idle pool.
		s.Rate1m = (h.arr[last] - h.arr[i]) / float64(k)
		s.Concurrency60s = (h.inPool[last] - h.inPool[i]) / float64(k)
		j, _ := h.back(600)
		s.ServiceTime = serviceTime(h.svc[last]-h.svc[i], h.served[last]-h.served[i], h.svc[last]-h.svc[j], h.served[last]-h.served[j])
	}
	if i, k := h.back(15); k > 0 {
		if d := h.slots[last] - h.slots[i]; d > 0 {
			s.Activity = math.Min(1, (h.busy[last]-h.busy[i])/d)
		}
	}
	if i, k := h.back(6); k > 0 {
		s.Concurrency6s = (h.inPool[last] - h.inPool[i]) / float64(k)
	}
}
