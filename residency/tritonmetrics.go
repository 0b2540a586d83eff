package residency

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/residency/plan"
)

// Triton's metric names the controller and the drain read (Triton's docs/user_guide/metrics.md).
const (
	metricPending = "nv_inference_pending_request_count"
	metricSuccess = "nv_inference_request_success"
	metricFailure = "nv_inference_request_failure"
	// metricGPUUsed is Triton's per-GPU used-memory gauge (label gpu_uuid).
	metricGPUUsed = "nv_gpu_memory_used_bytes"
)

// MaxMetricsBytes bounds the body of one read of Triton's metrics endpoint (16 MiB); a longer
// body is refused with ErrMetricsTooLarge, read no further. Triton exports per loaded model
// version about 17 series of its request families (success, failure by 4 reasons, inference
// and execution counts, the pending gauge, 5 cumulative durations, cache and load-time
// counters: ~2 KiB at ~110 bytes a line), ~7.5 KiB with every optional summary and histogram
// (metrics.md); 16 MiB holds about 8,000 model versions, or 2,000 with every optional family,
// against the hundreds a pod serves.
const MaxMetricsBytes = 16 << 20

// maxMetricsLineBytes bounds one line of a family the sidecar reads (Triton's are under 1 KiB).
const maxMetricsLineBytes = 64 << 10

// MaxPendingRequests bounds one nv_inference_pending_request_count series (10^9 requests,
// orders of magnitude past any queue Triton holds); a value past it, negative or not finite is
// not a queue length and makes the queue unknown.
const MaxPendingRequests = 1_000_000_000

// maxCounterValue bounds a request counter read from the metrics (2^53: past it a float64
// no longer holds every integer, so the value cannot be a count Triton kept).
const maxCounterValue = 1 << 53

// ErrMetricsTooLarge is wrapped when Triton's metrics body exceeds MaxMetricsBytes.
var ErrMetricsTooLarge = errors.New("metrics body too large")

// scrapeMetrics reads the families named by names from a Prometheus endpoint, at most
// MaxMetricsBytes of it. Text (Triton's format, and the fallback for an unknown content type) is
// filtered line by line before it is parsed, so the other families cost nothing but the read;
// protobuf and OpenMetrics bodies are decoded a family at a time and the others dropped.
func scrapeMetrics(ctx context.Context, client *http.Client, url string, names ...string) ([]*dto.MetricFamily, error) {
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
	body := &boundedReader{r: resp.Body, max: MaxMetricsBytes}
	format := expfmt.ResponseFormat(resp.Header)
	var out []*dto.MetricFamily
	switch format.FormatType() {
	case expfmt.TypeProtoDelim, expfmt.TypeOpenMetrics:
		dec := expfmt.NewDecoder(body, format)
		for {
			var f dto.MetricFamily
			if err := dec.Decode(&f); err != nil {
				if body.over() {
					return nil, tooLarge(url)
				}
				if errors.Is(err, io.EOF) {
					return out, nil
				}
				return nil, fmt.Errorf("triton metrics %s: %w", url, err)
			}
			if slices.Contains(names, f.GetName()) {
				out = append(out, &f)
			}
		}
	}
	text, err := filterText(body, names)
	if body.over() {
		return nil, tooLarge(url)
	}
	if err != nil {
		return nil, fmt.Errorf("triton metrics %s: %w", url, err)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("triton metrics %s: %w", url, err)
	}
	for _, n := range names { // a stable order
		if f, ok := fams[n]; ok {
			out = append(out, f)
		}
	}
	return out, nil
}

func tooLarge(url string) error {
	return fmt.Errorf("triton metrics %s: %w: over %d bytes (residency.MaxMetricsBytes); read no further", url, ErrMetricsTooLarge, MaxMetricsBytes)
}

// boundedReader reads at most max bytes of r and fails with ErrMetricsTooLarge on the byte after.
type boundedReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n > b.max {
		return 0, ErrMetricsTooLarge
	}
	if rest := b.max + 1 - b.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	k, err := b.r.Read(p)
	b.n += int64(k)
	if b.n > b.max {
		return 0, ErrMetricsTooLarge
	}
	return k, err
}

func (b *boundedReader) over() bool { return b.n > b.max }

// filterText returns the lines of the text exposition format in r that belong to the families
// names: their HELP and TYPE comments and their samples (with a summary's or histogram's
// _sum, _count and _bucket suffixes). Other lines, however long, are skipped as they are read;
// a kept line longer than maxMetricsLineBytes is an error naming its family.
func filterText(r io.Reader, names []string) ([]byte, error) {
	br := bufio.NewReaderSize(r, 4096)
	var out bytes.Buffer
	for line := 1; ; line++ {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return out.Bytes(), nil
			}
			return nil, err
		}
		family, keep := lineFamily(chunk, names)
		start := out.Len()
		if keep {
			out.Write(chunk)
		}
		for errors.Is(err, bufio.ErrBufferFull) {
			chunk, err = br.ReadSlice('\n')
			if keep {
				if out.Len()-start+len(chunk) > maxMetricsLineBytes {
					return nil, fmt.Errorf("line %d of family %s is longer than %d bytes", line, family, maxMetricsLineBytes)
				}
				out.Write(chunk)
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if keep && (len(chunk) == 0 || chunk[len(chunk)-1] != '\n') {
			out.WriteByte('\n')
		}
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
	}
}

// lineFamily returns the family of names a text-format line belongs to, if any: a HELP or
// TYPE comment naming it, or one of its samples. It allocates nothing, as most lines of a
// large exposition are skipped.
func lineFamily(line []byte, names []string) (string, bool) {
	s := bytes.TrimLeft(line, " \t")
	suffixes := true
	if len(s) > 0 && s[0] == '#' {
		kw, rest := token(bytes.TrimLeft(s[1:], " \t"))
		if string(kw) != "HELP" && string(kw) != "TYPE" {
			return "", false
		}
		s, suffixes = bytes.TrimLeft(rest, " \t"), false
	}
	name, _ := token(s)
	for _, n := range names {
		if len(name) < len(n) || string(name[:len(n)]) != n {
			continue
		}
		if rest := name[len(n):]; len(rest) == 0 || suffixes && (string(rest) == "_sum" || string(rest) == "_count" || string(rest) == "_bucket") {
			return n, true
		}
	}
	return "", false
}

// token splits s at its first blank, tab, line end or '{'.
func token(s []byte) (tok, rest []byte) {
	end := bytes.IndexAny(s, "{ \t\r\n")
	if end < 0 {
		return s, nil
	}
	return s[:end], s[end:]
}

// sampleValue is the value of one series of family f, which must be of type want or untyped
// (a family whose # TYPE line is missing): Triton declares its gauges and counters, but a
// reading without the declaration still carries the value.
func sampleValue(f *dto.MetricFamily, m *dto.Metric, want dto.MetricType) (float64, error) {
	switch t := f.GetType(); {
	case t == dto.MetricType_UNTYPED && m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), nil
	case t != want && t != dto.MetricType_UNTYPED:
		return 0, fmt.Errorf("type %s; Triton exports it as a %s", strings.ToLower(t.String()), strings.ToLower(want.String()))
	case want == dto.MetricType_GAUGE && m.GetGauge() != nil:
		return m.GetGauge().GetValue(), nil
	case want == dto.MetricType_COUNTER && m.GetCounter() != nil:
		return m.GetCounter().GetValue(), nil
	}
	return 0, errors.New("series without a value")
}

// countOf converts a series value to a count in [0, hi], rounding a fraction up; NaN, ±Inf, a
// negative value or one past hi is an error naming the value.
func countOf(v, hi float64) (int64, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > hi {
		return 0, fmt.Errorf("value %v; want a count in [0, %.0f]", v, hi)
	}
	return int64(math.Ceil(v)), nil
}

// seriesName is a series for messages: family{label="value",…}.
func seriesName(f *dto.MetricFamily, m *dto.Metric) string {
	var b strings.Builder
	b.WriteString(f.GetName())
	b.WriteByte('{')
	for i, l := range m.GetLabel() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.GetName(), l.GetValue())
		if b.Len() > 256 {
			b.WriteString("…")
			break
		}
	}
	b.WriteByte('}')
	return b.String()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// pendingReading is one reading of Triton's queue lengths (pendingRequests).
type pendingReading struct {
	// perModel is each model's queued requests, its series (one per version) summed and the
	// sum saturated at MaxPendingRequests; a series without a model label counts under "".
	perModel map[string]int64
	// total is the sum over every valid series, saturated at math.MaxInt64.
	total int64
	// bad names each model with a series that is not a queue length, with why (the first
	// such series); its queue is unknown.
	bad map[string]string
}

// pendingRequests reads nv_inference_pending_request_count from fams, the one reader of
// Triton's queue lengths (the controller's busy check and the drain). A series is read as a
// gauge or untyped; its value must be a count in [0, MaxPendingRequests] (a fraction rounds up).
// Any other series — NaN, ±Inf, negative, too large, counter-typed — is not a queue length:
// its model goes in bad, never read as 0.
func pendingRequests(fams []*dto.MetricFamily) pendingReading {
	r := pendingReading{perModel: map[string]int64{}, bad: map[string]string{}}
	for _, f := range fams {
		if f.GetName() != metricPending {
			continue
		}
		for _, m := range f.GetMetric() {
			name := label(m, "model")
			v, err := sampleValue(f, m, dto.MetricType_GAUGE)
			var n int64
			if err == nil {
				n, err = countOf(v, MaxPendingRequests)
			}
			if err != nil {
				if _, seen := r.bad[name]; !seen {
					r.bad[name] = seriesName(f, m) + ": " + err.Error()
				}
				continue
			}
			r.perModel[name] = min(r.perModel[name]+n, MaxPendingRequests)
			r.total = addSat(r.total, n)
		}
	}
	return r
}

// why is the reading's invalid series for messages: at most three, then how many more.
func (r pendingReading) why() string {
	names := make([]string, 0, len(r.bad))
	for n := range r.bad {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts []string
	for i, n := range names {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more models", len(names)-3))
			break
		}
		parts = append(parts, r.bad[n])
	}
	return strings.Join(parts, "; ")
}

// finishedRequests sums Triton's nv_inference_request_success and _failure counters in fams
// (counter or untyped, each series a count in [0, 2^53]), saturating at math.MaxUint64; a
// series that is not such a count is an error naming it.
func finishedRequests(fams []*dto.MetricFamily) (uint64, error) {
	var sum uint64
	for _, f := range fams {
		if f.GetName() != metricSuccess && f.GetName() != metricFailure {
			continue
		}
		for _, m := range f.GetMetric() {
			v, err := sampleValue(f, m, dto.MetricType_COUNTER)
			var n int64
			if err == nil {
				n, err = countOf(v, maxCounterValue)
			}
			if err != nil {
				return 0, fmt.Errorf("%s: %w", seriesName(f, m), err)
			}
			sum = addSatU(sum, uint64(n))
		}
	}
	return sum, nil
}

// gpuUsedBytes reads nv_gpu_memory_used_bytes from fams: the device's memory in use, -1 when
// Triton does not export the family. Each series (gauge or untyped) must be a byte count in
// [0, plan.MaxMemoryBytes]; another value is an error naming the series and the value. Series
// that repeat one gpu_uuid (a duplicated exposition) count once, at their largest; distinct
// GPUs are summed, and a sum past plan.MaxMemoryBytes is an error too.
func gpuUsedBytes(fams []*dto.MetricFamily) (int64, error) {
	for _, f := range fams {
		if f.GetName() != metricGPUUsed {
			continue
		}
		per := map[string]int64{}
		for _, m := range f.GetMetric() {
			v, err := sampleValue(f, m, dto.MetricType_GAUGE)
			var n int64
			if err == nil {
				n, err = countOf(v, float64(plan.MaxMemoryBytes))
			}
			if err != nil {
				return 0, fmt.Errorf("triton metrics: %s: %w (device memory in bytes)", seriesName(f, m), err)
			}
			uuid := label(m, "gpu_uuid")
			per[uuid] = max(per[uuid], n)
		}
		var sum int64
		for _, n := range per {
			sum = addSat(sum, n)
		}
		if sum > plan.MaxMemoryBytes {
			return 0, fmt.Errorf("triton metrics: %s sums to %d bytes over %d GPUs; want at most %d", metricGPUUsed, sum, len(per), int64(plan.MaxMemoryBytes))
		}
		return sum, nil
	}
	return -1, nil
}

// addSat is a + b for a, b ≥ 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// addSatU is a + b saturating at math.MaxUint64.
func addSatU(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
