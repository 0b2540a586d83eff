package residency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/inferscale/inferscale/residency/triton"
)

// ErrDrainTimeout is returned by Drain when Triton still had work at the deadline.
var ErrDrainTimeout = errors.New("drain deadline passed with work left")

// Triton's metric names the drain reads (Triton's metrics documentation).
const (
	metricPending = "nv_inference_pending_request_count"
	metricSuccess = "nv_inference_request_success"
	metricFailure = "nv_inference_request_failure"
)

// Work is one reading of Triton's outstanding and finished work.
type Work struct {
	// Pending is the sum of nv_inference_pending_request_count (requests queued); -1 (unknown,
	// logged as "unknown") when Triton's metrics endpoint is not configured or not readable.
	Pending int64
	// Finished is a fingerprint of the finished-request counters: nv_inference_request_success
	// + failure from the metrics endpoint plus success + fail counts from statistics. Two equal
	// readings one poll apart mean no request finished in between.
	Finished uint64
}

// Drainer takes the pod out of service without dropping a request: not-ready at once, wait for
// endpoint removal to propagate, wait until Triton has no queued work and its counters are
// quiet across two reads (or the deadline), then report drained. One drain runs per process;
// every caller of Drain waits for it.
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
}

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
// returns nil when Triton drained, ErrDrainTimeout past the deadline, or ctx's error (the
// drain itself goes on).
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

	<-d.clock.After(d.cfg.PropagationDelay)
	d.log.Info("drain: propagation delay over", "step", "propagation", "took", d.clock.Now().Sub(start))

	waitStart := d.clock.Now()
	// The deadline is checked after each poll rather than raced against it, so that the drain
	// waits on one timer at a time (which keeps fake-clock tests deterministic).
	deadline := waitStart.Add(d.cfg.DrainTimeout)
	// The background context bounds each read by the client's deadlines; the drain as a whole
	// is bounded by DrainTimeout.
	ctx := context.Background()
	prev, prevErr := d.Read(ctx)
	reads := 1
	for {
		<-d.clock.After(d.cfg.DrainPollInterval)
		if !d.clock.Now().Before(deadline) {
			d.err = fmt.Errorf("%w: after %s, last reading %v", ErrDrainTimeout, d.cfg.DrainTimeout, prev)
			d.log.Warn("drain: deadline", "step", "wait-idle", "took", d.clock.Now().Sub(waitStart), "reads", reads, "last", prev, "err", d.err)
			d.finish(start)
			return
		}
		cur, err := d.Read(ctx)
		reads++
		if err != nil {
			// Triton gone counts as drained only if it never answers: keep trying to the deadline.
			d.log.Warn("drain: read Triton", "err", err)
		}
		if err == nil && prevErr == nil && cur.Pending <= 0 && cur == prev {
			d.log.Info("drain: Triton idle", "step", "wait-idle", "took", d.clock.Now().Sub(waitStart), "reads", reads,
				slog.Attr{Key: "pending", Value: pendingValue(cur.Pending)}, "finished", cur.Finished)
			d.finish(start)
			return
		}
		prev, prevErr = cur, err
	}
}

func (d *Drainer) finish(start time.Time) {
	took := d.clock.Now().Sub(start)
	d.m.DrainSeconds.Set(took.Seconds())
	d.log.Info("drain: done", "step", "done", "took", took, "err", d.err)
}

// Read reads Triton's pending requests and finished-request counters once. An unreadable
// metrics endpoint leaves Pending unknown (-1) and Finished from statistics alone; only
// unreadable statistics are an error.
func (d *Drainer) Read(ctx context.Context) (Work, error) {
	w := Work{Pending: -1}
	stats, err := d.tr.Statistics(ctx, "")
	if err != nil {
		return w, fmt.Errorf("statistics: %w", err)
	}
	for _, s := range stats {
		w.Finished += s.Success.Count + s.Fail.Count
	}
	if d.cfg.TritonMetricsURL == "" {
		return w, nil
	}
	fams, err := scrapeMetrics(ctx, d.httpClient, d.cfg.TritonMetricsURL)
	if err != nil {
		// As without the URL: statistics alone, queue length unknown.
		d.log.Warn("drain: Triton metrics unreadable; statistics only", "err", err)
		return w, nil
	}
	w.Pending = 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case metricPending:
				w.Pending += int64(m.GetGauge().GetValue())
			case metricSuccess, metricFailure:
				w.Finished += uint64(m.GetCounter().GetValue())
			}
		}
	}
	return w, nil
}

// scrapeMetrics reads a Prometheus text (or protobuf) endpoint with client_golang's decoder.
func scrapeMetrics(ctx context.Context, client *http.Client, url string) ([]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("triton metrics: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("triton metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("triton metrics %s: HTTP %d", url, resp.StatusCode)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var out []*dto.MetricFamily
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("triton metrics %s: %w", url, err)
		}
		out = append(out, &f)
	}
}

// metricGPUUsed is Triton's per-GPU used-memory gauge.
const metricGPUUsed = "nv_gpu_memory_used_bytes"

// TritonMemoryProbe returns a Deps.DeviceUsedBytes that reads Triton's own
// nv_gpu_memory_used_bytes (summed over the GPUs it reports) from metricsURL: the device check
// when the sidecar has no NVML. It returns -1 (unknown, no check) when Triton does not export
// the metric; client nil means a 5s-timeout client.
func TritonMemoryProbe(metricsURL string, client *http.Client) func() (int64, error) {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return func() (int64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fams, err := scrapeMetrics(ctx, client, metricsURL)
		if err != nil {
			return 0, err
		}
		for _, f := range fams {
			if f.GetName() != metricGPUUsed {
				continue
			}
			var used float64
			for _, m := range f.GetMetric() {
				used += m.GetGauge().GetValue()
			}
			return int64(used), nil
		}
		return -1, nil
	}
}
