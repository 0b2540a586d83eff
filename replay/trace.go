package replay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Format names a trace file format.
type Format string

// The trace formats Open understands.
const (
	FormatAzureLLM       Format = "azure-llm"
	FormatGeneric        Format = "generic"
	FormatGenTD26        Format = "gentd26"
	FormatAzureFunctions Format = "azure-functions"
	FormatServeGen       Format = "servegen"
	// FormatDLRMInstances is Alibaba's cluster-trace-gpu-v2025 instance
	// lifecycle trace. It has no requests; see ReadInstances.
	FormatDLRMInstances Format = "dlrm-instances"
)

// Formats lists every accepted --format value.
func Formats() []Format {
	return []Format{FormatAzureLLM, FormatGeneric, FormatGenTD26, FormatAzureFunctions, FormatServeGen, FormatDLRMInstances}
}

// Unknown marks a token count or execution time the trace does not carry;
// the service-time model then uses its defaults.
const Unknown = -1

// Request is one request of a trace.
type Request struct {
	// At is the arrival time since the trace's first request.
	At time.Duration
	// Model indexes the source's Models(); 0 for single-model traces.
	Model int32
	// InputTokens and OutputTokens are prompt and output lengths in tokens,
	// or Unknown.
	InputTokens, OutputTokens int32
	// ExecSeconds is the trace's own execution time in seconds, or Unknown.
	ExecSeconds float32
}

// Source streams the requests of a trace in arrival order. Next returns
// io.EOF after the last request; any other error is a *ParseError or wraps
// an I/O error.
type Source interface {
	Next() (Request, error)
	// Models names the models requests refer to; index = Request.Model. It
	// may grow while the source is read.
	Models() []string
}

// ErrBadValue is wrapped by a ParseError whose field could not be parsed or
// is out of range.
var ErrBadValue = errors.New("bad value")

// ErrBadHeader is returned when a CSV header lacks a required column.
var ErrBadHeader = errors.New("bad header")

// ErrUnsorted is wrapped by a ParseError whose timestamp goes backwards.
var ErrUnsorted = errors.New("timestamp before the previous row's")

// ErrTooLarge is wrapped by errors for a trace past MaxTraceSpan or
// MaxRequests.
var ErrTooLarge = errors.New("trace too large")

// MaxTraceSpan bounds the time from a trace's first arrival to its last.
// The simulators step once per simulated second and keep per-second
// arrays, so CPU and memory grow with the span, not with the file: two rows
// a century apart would allocate tens of GB. 92 days (one quarter) is three
// times the longest trace replay reads (Alibaba DLRM 2025, 31 days; GenTD26
// spans 23) and costs about 8 M simulated seconds (64 MB per per-second
// array).
const MaxTraceSpan = 92 * 24 * time.Hour

// MaxRequests bounds the requests one per-request trace may hold (each is
// kept in memory with its workload, about 40 B). A CSV row is one request,
// but an azure-functions cell or a servegen window expands to many: one
// 56-byte matrix with a count of 2^31 asked for 51 GB. 50 M is 2.5 times
// BinnedThreshold, above which ServeGen traces are replayed binned.
const MaxRequests = 50_000_000

// ParseError is a problem at one line and column of a trace file.
type ParseError struct {
	// Line is 1-based and counts the header.
	Line int
	// Column is the column's header name; empty when the row itself is bad.
	Column string
	// Value is the offending text.
	Value string
	Err   error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d", e.Line)
	if e.Column != "" {
		fmt.Fprintf(&b, ", column %s", e.Column)
	}
	if e.Value != "" {
		// At most the first 80 bytes: one field of a hostile file may be
		// as long as the file.
		fmt.Fprintf(&b, ", value %s", quoteHead(e.Value))
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// table reads a CSV with a header row and looks columns up by name.
type table struct {
	r      *csv.Reader
	header []string
	col    map[string]int
	rec    []string
	line   int
}

// MaxLineBytes bounds one line of a CSV trace: encoding/csv holds a whole line in memory,
// so a file without newlines (2 GB of NULs) was read into one 2 GB line. The widest line a
// format needs is an azure-functions row over MaxTraceSpan: 132,480 minute counts of up to
// ten digits and a comma, 1.5 MB.
const MaxLineBytes = 4 << 20

// ErrLineTooLong is returned for a line past MaxLineBytes.
var ErrLineTooLong = fmt.Errorf("line longer than %d bytes (MaxLineBytes, 4 MiB)", MaxLineBytes)

// lineLimiter passes r through, failing with ErrLineTooLong once a line (bytes since the last
// '\n') passes max.
type lineLimiter struct {
	r       io.Reader
	max, n  int
	line    int // 1-based line being read
	tripped bool
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	if l.tripped {
		return 0, &ParseError{Line: l.line, Err: fmt.Errorf("%w: %w", ErrBadValue, ErrLineTooLong)}
	}
	n, err := l.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			l.n = 0
			l.line++
			continue
		}
		if l.n++; l.n > l.max {
			l.tripped = true
			return i, nil // the next Read reports it
		}
	}
	return n, err
}

// newTable reads the header and checks that every required column is there.
func newTable(r io.Reader, required ...string) (*table, error) {
	limited := &lineLimiter{r: r, max: MaxLineBytes, line: 1}
	cr := csv.NewReader(limited)
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	h, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: empty file, want columns %s", ErrBadHeader, strings.Join(required, ","))
	}
	if err != nil {
		return nil, csvErr(err)
	}
	t := &table{r: cr, header: append([]string(nil), h...), col: map[string]int{}}
	if len(t.header) > 0 {
		t.header[0] = strings.TrimPrefix(t.header[0], "\ufeff")
	}
	for i, name := range t.header {
		name = strings.TrimSpace(name)
		if j, dup := t.col[name]; dup && name != "" {
			return nil, fmt.Errorf("%w: column %s appears twice (columns %d and %d); want each column once", ErrBadHeader, quoteHead(name), j+1, i+1)
		}
		t.col[name] = i
	}
	var missing []string
	for _, c := range required {
		if _, ok := t.col[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing column %s (header is %s)", ErrBadHeader, strings.Join(missing, ","), quoteHead(strings.Join(t.header, ",")))
	}
	cr.FieldsPerRecord = len(t.header)
	return t, nil
}

func csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{Line: pe.Line, Err: fmt.Errorf("%w: %v", ErrBadValue, pe.Err)}
	}
	return err
}

// next reads one row; io.EOF at the end.
func (t *table) next() error {
	rec, err := t.r.Read()
	if err != nil {
		return csvErr(err)
	}
	t.rec = rec
	t.line, _ = t.r.FieldPos(0)
	return nil
}

func (t *table) has(name string) bool { _, ok := t.col[name]; return ok }

func (t *table) str(name string) string {
	i, ok := t.col[name]
	if !ok {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

func (t *table) fail(name, value string, format string, args ...any) error {
	return &ParseError{Line: t.line, Column: name, Value: value, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadValue}, args...)...)}
}

// intCol parses a non-negative integer column; empty gives Unknown when
// optional is set.
func (t *table) intCol(name string, optional bool) (int32, error) {
	s := t.str(name)
	if s == "" && (optional || !t.has(name)) {
		return Unknown, nil
	}
	if !plainDecimal(s) {
		return 0, t.fail(name, s, "want an integer in [0, %d] written in plain decimal (e.g. 40 or 4e3)", math.MaxInt32)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		return 0, t.fail(name, s, "want an integer in [0, %d]", math.MaxInt32)
	}
	return int32(f), nil
}

// floatCol parses a finite float within [lo, hi]; empty gives Unknown when
// optional is set.
func (t *table) floatCol(name string, optional bool, lo, hi float64) (float64, error) {
	s := t.str(name)
	if s == "" && optional {
		return Unknown, nil
	}
	if !plainDecimal(s) {
		return 0, t.fail(name, s, "want a number in [%g, %g] written in plain decimal or exponent notation (e.g. 2.5 or 1e3)", lo, hi)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < lo || f > hi {
		return 0, t.fail(name, s, "want a number in [%g, %g]", lo, hi)
	}
	return f, nil
}

// plainDecimal reports whether s is a number in plain decimal or exponent notation: an
// optional sign, digits with an optional fraction (a digit on at least one side of the
// point), and an optional exponent (e or E, an optional sign, digits). strconv.ParseFloat
// also reads Go literal forms no trace writes, each without an error: 0x1p4 as 16, 1_0 as
// 10, Inf, infinity and NaN; a column read through it carried a number nobody wrote.
func plainDecimal(s string) bool {
	i, digits := 0, 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		}
		if i == exp {
			return false
		}
	}
	return i == len(s)
}

// Timestamp layouts accepted by parseTimestamp, in the order tried. Times
// without a zone are read as UTC; only differences matter to replay.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

// minUnixNano and maxUnixNano are the instants UnixNano can represent.
var minUnixNano, maxUnixNano = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// MaxTimestampSeconds bounds a timestamp written as a number of seconds: int64 nanoseconds
// hold ±9.22e9 s (the years 1677 to 2262, the dates the other layouts accept), and a bound
// at that edge let 9223372036.854776 through, whose nanoseconds round to 2^63 and wrapped to
// MinInt64. 9.2e9 s (Unix time in 2261) leaves room for the rounding.
const MaxTimestampSeconds = 9.2e9

// errNotTimestamp is parseTimestamp's error for text in none of its layouts; the reader
// words the layouts its format uses.
var errNotTimestamp = errors.New("not a timestamp")

// parseTimestamp accepts RFC 3339 (with or without fraction),
// "YYYY-MM-DD HH:MM:SS[.fraction]" (up to 9 fractional digits, UTC), or a
// plain decimal number of seconds within ±MaxTimestampSeconds (a Unix time or
// an offset from any origin). Text in none of these layouts is
// errNotTimestamp; a number or date outside the range is an error saying the
// range.
func parseTimestamp(s string) (time.Duration, error) {
	if plainDecimal(s) {
		// ParseFloat fails here only past float64 (1e400): out of range too.
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(math.Abs(f) <= MaxTimestampSeconds) {
			return 0, fmt.Errorf("want seconds in [%g, %g] (int64 nanoseconds hold ±9.22e9 s, the years 1677 to 2262)", -MaxTimestampSeconds, MaxTimestampSeconds)
		}
		return time.Duration(math.Round(f * 1e9)), nil
	}
	for _, l := range timeLayouts {
		if tt, err := time.Parse(l, s); err == nil {
			// UnixNano is undefined outside 1678–2262 (int64 nanoseconds);
			// such dates are refused, not wrapped into another instant.
			if tt.Before(minUnixNano) || tt.After(maxUnixNano) {
				return 0, errors.New("want a time from 1677-09-21 to 2262-04-11 (what int64 nanoseconds hold)")
			}
			return time.Duration(tt.UnixNano()), nil
		}
	}
	return 0, errNotTimestamp
}

// timestamp reads column name with parseTimestamp; want words the layouts the
// format accepts, for text in none of them.
func (t *table) timestamp(name, want string) (string, time.Duration, error) {
	s := t.str(name)
	d, err := parseTimestamp(s)
	if err == errNotTimestamp {
		return s, 0, t.fail(name, s, "%s", want)
	}
	if err != nil {
		return s, 0, t.fail(name, s, "%v", err)
	}
	return s, d, nil
}

// clock turns absolute timestamps into offsets from the first one and
// rejects rows that go backwards.
type clock struct {
	started bool
	origin  time.Duration
	last    time.Duration
}

func (c *clock) offset(t *table, name, value string, abs time.Duration) (time.Duration, error) {
	if !c.started {
		c.started, c.origin, c.last = true, abs, abs
	}
	if abs < c.last {
		return 0, &ParseError{Line: t.line, Column: name, Value: value, Err: ErrUnsorted}
	}
	// abs ≥ origin, so a negative difference is an int64 overflow: a span
	// far past MaxTraceSpan.
	if d := abs - c.origin; d < 0 || d > MaxTraceSpan {
		return 0, &ParseError{Line: t.line, Column: name, Value: value, Err: fmt.Errorf("%w: %s after the first row's timestamp; want a trace span of at most %s (MaxTraceSpan, 92 days)", ErrTooLarge, spanText(d), MaxTraceSpan)}
	}
	c.last = abs
	return abs - c.origin, nil
}

// spanText prints a span for an error; an overflowed one (negative) is
// "more than 292 years".
func spanText(d time.Duration) string {
	if d < 0 {
		return "more than 292 years"
	}
	return strconv.FormatFloat(d.Hours()/24, 'f', 1, 64) + " days"
}

// Trace is a whole request trace in memory.
type Trace struct {
	Name     string
	Format   Format
	Models   []string
	Requests []Request
	// Skipped counts rows the reader left out, for SkipReason.
	Skipped    int
	SkipReason string
}

// skipper is implemented by sources that leave some rows out on purpose.
type skipper interface{ Skipped() (int, string) }

// ReadAll drains src into a Trace.
func ReadAll(name string, format Format, src Source) (*Trace, error) {
	tr := &Trace{Name: name, Format: format}
	for {
		r, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(tr.Requests) == MaxRequests {
			return nil, fmt.Errorf("read %s: %w: more than %d requests; want at most MaxRequests (%d) per-request, or a servegen trace in binned mode", name, ErrTooLarge, MaxRequests, MaxRequests)
		}
		tr.Requests = append(tr.Requests, r)
	}
	tr.Models = append([]string(nil), src.Models()...)
	if sk, ok := src.(skipper); ok {
		tr.Skipped, tr.SkipReason = sk.Skipped()
	}
	if len(tr.Models) == 0 {
		tr.Models = []string{"default"}
	}
	return tr, nil
}

// Duration is the time from the first to the last arrival.
func (tr *Trace) Duration() time.Duration {
	if len(tr.Requests) == 0 {
		return 0
	}
	return tr.Requests[len(tr.Requests)-1].At
}

// FilterModels keeps only requests of the named models (all when names is
// empty) and renumbers them. It returns an error naming an unknown model.
func (tr *Trace) FilterModels(names []string) (*Trace, error) {
	if len(names) == 0 {
		return tr, nil
	}
	idx := map[string]int32{}
	for i, m := range tr.Models {
		idx[m] = int32(i)
	}
	keep := map[int32]int32{}
	out := &Trace{Name: tr.Name, Format: tr.Format, Skipped: tr.Skipped, SkipReason: tr.SkipReason}
	for _, n := range names {
		if slices.Contains(out.Models, n) {
			// Kept twice it became a second, empty model (residency counted 2 models for a,a).
			return nil, fmt.Errorf("model %q is listed twice; list each model once", n)
		}
		i, ok := idx[n]
		if !ok {
			return nil, fmt.Errorf("model %q is not in the trace (it has %d models, e.g. %s)", n, len(tr.Models), strings.Join(tr.Models[:min(5, len(tr.Models))], ", "))
		}
		keep[i] = int32(len(out.Models))
		out.Models = append(out.Models, n)
	}
	var origin time.Duration = -1
	for _, r := range tr.Requests {
		j, ok := keep[r.Model]
		if !ok {
			continue
		}
		if origin < 0 {
			origin = r.At
		}
		r.Model = j
		r.At -= origin
		out.Requests = append(out.Requests, r)
	}
	return out, nil
}
