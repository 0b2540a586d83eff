package residency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
)

// ErrDrainTimeout is returned by Drain when Triton still had work at the deadline.
var ErrDrainTimeout = errors.New("drain deadline passed with work left")

// Work is one reading of Triton's outstanding and finished work.
type Work struct {
	// Pending is the sum of nv_inference_pending_request_count (requests queued, read by
	// pendingRequests: each series a count in [0, MaxPendingRequests], the sum saturating); -1
	// when it is not known: Triton's metrics endpoint is not configured or not readable (logged
	// as "unknown"), or a series is not a queue length (Invalid says which).
	Pending int64
	// Finished is a fingerprint of the finished-request counters: nv_inference_request_success
	// + failure from the metrics endpoint plus success + fail counts from statistics, the sum
	// saturating. Two equal readings one poll apart mean no request finished in between.
	Finished uint64
	// Invalid, when not empty, says why the metrics read cannot be trusted: a pending series
	// that is not a queue length (NaN, ±Inf, negative, past MaxPendingRequests, counter-typed)
	// or a request counter that is not a count. The drain never ends on such a reading: a
	// queue it cannot read is not an empty one.
	Invalid string
}

// Drainer takes the pod out of service without dropping a request: not-ready at once, wait for
// endpoint removal to propagate, wait until nothing is queued or executing in Triton (or the
// deadline), then report drained. One drain runs per process; every caller of Drain waits for
// it.
//
// Triton shows queued requests (nv_inference_pending_request_count) but not executing ones, so
// the drain counts them: when q requests are queued, q + 1 more must finish (one executes ahead
// of them), and the drain waits until the finished-request counters have reached that and stay
// quiet across two reads, and until the sidecar's inference front holds and forwards nothing
// (Deps.FrontActive): a request it holds for a model whose load is under way reaches Triton
// only once the load is done. A request executing alone leaves no trace in either, so the drain
// then confirms by unloading every loaded model: Triton completes an unload only after the
// model's in-flight requests finish, and the drain ends when the index shows no model READY,
// LOADING or UNLOADING. A reading whose queue or counters are not counts (Work.Invalid) never
// ends the drain. With Triton unreachable for unreachableReads reads in a row, nothing can
// be in flight there: the drain ends at once (skipping the propagation delay when that is so
// from the start) and says so.
type Drainer struct {
	cfg        Config
	ctl        *Controller
	tr         Triton
	httpClient *http.Client
	clock      triton.Clock
	log        *slog.Logger
	m          *Metrics

	once sync.Once
	done chan struct{}
	err  error
	// invalid is set while the drain's readings are invalid (Work.Invalid), so that it warns
	// once per episode; run's goroutine only.
	invalid bool
}

// unreachableReads is how many reads in a row, DrainPollInterval apart, must find Triton
// unreachable before the drain concludes that nothing can be in flight there.
const unreachableReads = 3

// NewDrainer returns a drainer for ctl's Triton. httpClient reads cfg.TritonMetricsURL (nil:
// a client with a 5s timeout).
func NewDrainer(cfg Config, ctl *Controller, httpClient *http.Client) *Drainer {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 5 * time.Second}
	}
	return &Drainer{cfg: cfg, ctl: ctl, tr: ctl.deps.Triton, httpClient: httpClient, clock: ctl.deps.Clock,
		log: ctl.deps.Log, m: ctl.m, done: make(chan struct{})}
}

// Done is closed when the drain has finished.
func (d *Drainer) Done() <-chan struct{} { return d.done }

// Drain starts the drain if it has not started and waits until it ends or ctx is done. It
// returns nil when Triton drained (or is unreachable, so nothing runs there), ErrDrainTimeout
// past the deadline, or ctx's error (the drain itself goes on).
func (d *Drainer) Drain(ctx context.Context) error {
	d.once.Do(func() { go d.run() })
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Drainer) run() {
	defer close(d.done)
	start := d.clock.Now()
	d.ctl.StartDrain()
	d.log.Info("drain: not ready", "step", "not-ready", "took", time.Duration(0))
	// The background context bounds each read by the client's deadlines; the drain as a whole
	// is bounded by DrainTimeout.
	ctx := context.Background()

	// Only reachability matters before the propagation delay; the counts are read after it.
	_, err := d.Read(ctx)
	for n := 1; errors.Is(err, triton.ErrUnavailable); n++ {
		if n == unreachableReads {
			d.unreachable(start, n, err)
			return
		}
		<-d.clock.After(d.cfg.DrainPollInterval)
		_, err = d.Read(ctx)
	}

	<-d.clock.After(d.cfg.PropagationDelay)
	d.log.Info("drain: propagation delay over", "step", "propagation", "took", d.clock.Now().Sub(start))

	waitStart := d.clock.Now()
	// The deadline is checked after each poll rather than raced against it, so that the drain
	// waits on one timer at a time (which keeps fake-clock tests deterministic).
	deadline := waitStart.Add(d.cfg.DrainTimeout)
	prev, prevErr := d.Read(ctx)
	owed := owedAfter(prev)
	reads, unreachable := 1, 0
	confirming := false
	for {
		<-d.clock.After(d.cfg.DrainPollInterval)
		if !d.clock.Now().Before(deadline) {
			d.err = fmt.Errorf("%w: after %s, last reading %v", ErrDrainTimeout, d.cfg.DrainTimeout, prev)
			d.log.Warn("drain: deadline", "step", "wait-idle", "took", d.clock.Now().Sub(waitStart), "reads", reads, "last", prev,
				"finished_owed", owed, "front_active", d.frontActive(), "err", d.err)
			d.finish(start)
			return
		}
		if confirming {
			loaded, err := d.loaded(ctx)
			switch {
			case errors.Is(err, triton.ErrUnavailable):
				if unreachable++; unreachable == unreachableReads {
					d.unreachable(start, unreachable, err)
					return
				}
			case err != nil:
				d.log.Warn("drain: read Triton's index", "err", err)
			case len(loaded) == 0 && d.frontActive() == 0:
				d.log.Info("drain: Triton idle", "step", "wait-idle", "took", d.clock.Now().Sub(waitStart), "reads", reads,
					"confirmed_by", "every model unloaded after its in-flight requests")
				d.finish(start)
				return
			default:
				unreachable = 0
			}
			continue
		}
		cur, err := d.Read(ctx)
		reads++
		switch {
		case errors.Is(err, triton.ErrUnavailable):
			if unreachable++; unreachable == unreachableReads {
				d.unreachable(start, unreachable, err)
				return
			}
		case err != nil:
			d.log.Warn("drain: read Triton", "err", err)
		default:
			unreachable = 0
		}
		owed = max(owed, owedAfter(cur))
		d.invalidEpisode(cur, err)
		if err == nil && prevErr == nil && cur.Invalid == "" && cur.Pending <= 0 && cur == prev && cur.Finished >= owed && d.frontActive() == 0 {
			d.log.Info("drain: queues empty and counters quiet; confirming by unloading", "step", "wait-idle",
				"took", d.clock.Now().Sub(waitStart), "reads", reads,
				slog.Attr{Key: "pending", Value: cur.pendingValue()}, "finished", cur.Finished)
			confirming = d.unloadAll(ctx)
			if !confirming {
				d.finish(start)
				return
			}
		}
		prev, prevErr = cur, err
	}
}

// frontActive is the requests the inference front holds or forwards (Deps.FrontActive; 0
// without a front).
func (d *Drainer) frontActive() int {
	if d.ctl.deps.FrontActive == nil {
		return 0
	}
	return d.ctl.deps.FrontActive()
}

// owedAfter is the finished count at which the requests a reading shows queued, and the one
// executing ahead of them, will all have finished (0 when nothing is queued or it is unknown).
func owedAfter(w Work) uint64 {
	if w.Pending <= 0 {
		return 0
	}
	return addSatU(w.Finished, uint64(w.Pending)+1) // Pending ≤ math.MaxInt64
}

// unloadAll unloads every model Triton holds, so that the index shows when their in-flight
// requests are over. It reports false when Triton cannot confirm that way (its index is
// unreadable or it refuses repository control, as without --model-control-mode=explicit): the
// drain then ends on the counters alone.
func (d *Drainer) unloadAll(ctx context.Context) bool {
	held, err := d.loaded(ctx)
	if err != nil {
		d.log.Warn("drain: cannot confirm by unloading; drained by the counters alone", "err", err)
		return false
	}
	for _, name := range held {
		if err := d.tr.Unload(ctx, name, triton.UnloadOptions{}); err != nil {
			d.log.Warn("drain: cannot confirm by unloading; drained by the counters alone", "model", name, "err", err)
			return false
		}
	}
	return true
}

// loaded returns, sorted, the models Triton's index shows READY, LOADING or UNLOADING.
func (d *Drainer) loaded(ctx context.Context) ([]string, error) {
	idx, err := d.tr.Index(ctx, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range idx {
		if plan.State(e.State).HoldsMemory() {
			out = append(out, e.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// unreachable ends the drain: Triton did not answer n reads in a row, so nothing can be in
// flight there.
func (d *Drainer) unreachable(start time.Time, n int, err error) {
	d.log.Warn("drain: Triton unreachable; nothing can be in flight there, so the drain ends now",
		"step", "unreachable", "reads", n, "took", d.clock.Now().Sub(start), "err", err)
	d.finish(start)
}

func (d *Drainer) finish(start time.Time) {
	took := d.clock.Now().Sub(start)
	d.m.DrainSeconds.Set(took.Seconds())
	d.log.Info("drain: done", "step", "done", "took", took, "err", d.err)
}

// Read reads Triton's pending requests and finished-request counters once. An unreadable
// metrics endpoint leaves Pending unknown (-1) and Finished from statistics alone; a metrics
// series that is not a count leaves Pending unknown and sets Invalid. Only unreadable
// statistics are an error.
func (d *Drainer) Read(ctx context.Context) (Work, error) {
	w := Work{Pending: -1}
	stats, err := d.tr.Statistics(ctx, "")
	if err != nil {
		return w, fmt.Errorf("statistics: %w", err)
	}
	for _, s := range stats {
		w.Finished = addSatU(w.Finished, addSatU(s.Success.Count, s.Fail.Count))
	}
	if d.cfg.TritonMetricsURL == "" {
		return w, nil
	}
	fams, err := scrapeMetrics(ctx, d.httpClient, d.cfg.TritonMetricsURL, metricPending, metricSuccess, metricFailure)
	if err != nil {
		// As without the URL: statistics alone, queue length unknown.
		d.log.Warn("drain: Triton metrics unreadable; statistics only", "err", err)
		return w, nil
	}
	q := pendingRequests(fams)
	if len(q.bad) > 0 {
		w.Invalid = "queue length unknown: " + q.why()
	} else {
		w.Pending = q.total
	}
	finished, err := finishedRequests(fams)
	if err != nil {
		w.Invalid = strings.TrimPrefix(w.Invalid+"; ", "; ") + "finished requests unknown: " + err.Error()
	}
	w.Finished = addSatU(w.Finished, finished)
	return w, nil
}

// invalidEpisode warns once when the drain's readings turn invalid (Work.Invalid) and says
// once when they are valid again; a poll that could not read Triton changes nothing.
func (d *Drainer) invalidEpisode(w Work, err error) {
	switch {
	case err != nil:
	case w.Invalid != "" && !d.invalid:
		d.invalid = true
		d.log.Warn("drain: Triton's metrics are not counts; not drained while they are", "invalid", w.Invalid)
	case w.Invalid == "" && d.invalid:
		d.invalid = false
		d.log.Info("drain: Triton's metrics are counts again")
	}
}

// TritonMemoryProbe returns a Deps.DeviceUsedBytes that reads Triton's own
// nv_gpu_memory_used_bytes from metricsURL (gpuUsedBytes: each GPU's largest series, summed
// over GPUs): the device check when the sidecar has no NVML. It returns -1 (unknown, no check)
// when Triton does not export the metric, and an error naming the series when a value is not a
// byte count in [0, plan.MaxMemoryBytes] (NaN, ±Inf, negative, 1e19) or the body is not
// readable (or past MaxMetricsBytes); client nil means a 5s-timeout client.
func TritonMemoryProbe(metricsURL string, client *http.Client) func() (int64, error) {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fams, err := scrapeMetrics(ctx, client, metricsURL, metricGPUUsed)
		if err != nil {
			return 0, err
		}
		return gpuUsedBytes(fams)
	}
}
