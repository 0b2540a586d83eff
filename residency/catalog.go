package residency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/strictyaml"
)

// catalogFile is the YAML schema. Durations are Go duration strings ("10m"); byte counts are
// integers or Kubernetes quantities ("9Gi", "512Mi").
type catalogFile struct {
	ReserveBytes *byteCount       `json:"reserveBytes,omitempty"`
	IdleTimeout  *metav1.Duration `json:"idleTimeout,omitempty"`
	MinResidency *metav1.Duration `json:"minResidency,omitempty"`
	Models       []modelFile      `json:"models"`
}

type modelFile struct {
	Name              string               `json:"name"`
	Digest            string               `json:"digest"`
	Tier              string               `json:"tier"`
	PeakMemoryBytes   map[string]byteCount `json:"peakMemoryBytes"`
	SwapOverheadBytes *byteCount           `json:"swapOverheadBytes,omitempty"`
	LoadTime          *metav1.Duration     `json:"loadTime,omitempty"`
	// Record is the model's admission record (cmd/capacity), relative to the catalog file.
	Record string `json:"record,omitempty"`
}

// byteCount is a byte count as the catalog writes it: a resource.Quantity that keeps its text,
// so that an error names the value as written (10E, not the 0 a wrapped int64 would show).
type byteCount struct {
	resource.Quantity
	text string
}

// Bounds on a byte count's text, checked before resource.ParseQuantity, whose work grows with
// the exponent (1e-999999999, twelve bytes, ran for minutes at 1.8 GB and stalled the catalog
// watch): no byte count in [0, plan.MaxMemoryBytes] needs more text, and with at most
// maxByteCountText characters of mantissa an exponent past ±maxByteCountExponent lands outside
// that range for any mantissa but 0.
const (
	maxByteCountText     = 64
	maxByteCountExponent = 100
)

// byteCountExponent is a quantity with a decimal exponent (1e9, 5E-3); the other suffixes
// (Ki, M, E, …) have fixed, small scales.
var byteCountExponent = regexp.MustCompile(`^[+-]?[0-9.]+[eE]([+-]?[0-9]+)$`)

func (b *byteCount) UnmarshalJSON(data []byte) error {
	text := strings.TrimSpace(strings.Trim(string(data), `"`))
	bad := len(text) > maxByteCountText
	if m := byteCountExponent.FindStringSubmatch(text); m != nil && !bad {
		e, err := strconv.Atoi(m[1])
		bad = err != nil || e < -maxByteCountExponent || e > maxByteCountExponent
	}
	if bad {
		return fmt.Errorf("%s: want a byte count of at most %d written in at most %d characters, an exponent within ±%d (an integer, or a quantity such as 9Gi or 512Mi)",
			errtext.Quote(text, 64), plan.MaxMemoryBytes, maxByteCountText, maxByteCountExponent)
	}
	if err := b.Quantity.UnmarshalJSON(data); err != nil {
		return err
	}
	b.text = strings.TrimSpace(strings.Trim(string(data), `"`))
	return nil
}

// written is the count as written (a null: its value).
func (b *byteCount) written() string {
	if b.text == "" || b.text == "null" {
		return b.Quantity.String()
	}
	return b.text
}

// MaxCatalogErrors bounds the violations one catalog error lists; it ends with how many more
// there were.
const MaxCatalogErrors = 100

// catalogError is errs wrapped in plan.ErrCatalog, at most MaxCatalogErrors of them listed
// (a joined error counts as each of the errors it joins).
func catalogError(errs ...error) error {
	var all []error
	for _, err := range errs {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			all = append(all, j.Unwrap()...)
		} else {
			all = append(all, err)
		}
	}
	if n := len(all) - MaxCatalogErrors; n > 0 {
		all = append(all[:MaxCatalogErrors:MaxCatalogErrors], fmt.Errorf("… and %d more errors (at most %d are listed)", n, MaxCatalogErrors))
	}
	return fmt.Errorf("%w: %w", plan.ErrCatalog, errors.Join(all...))
}

// MaxCatalogBytes bounds the catalog file: 16 MiB, sixteen times a ConfigMap's limit (1 MiB)
// and room for plan.MaxModels entries of 1.6 KB each.
const MaxCatalogBytes = 16 << 20

// readCatalogFile reads the catalog file, at most MaxCatalogBytes (a longer file, or a device
// such as /dev/zero, is an error wrapping boundedfile.ErrTooLarge, read no further).
func readCatalogFile(path string) ([]byte, error) { return boundedfile.Read(path, MaxCatalogBytes) }

// LoadCatalog reads and validates the catalog YAML at path. See ParseCatalog.
func LoadCatalog(path string) (plan.Catalog, error) {
	c, _, err := ReadCatalog(path)
	return c, err
}

// ReadCatalog is LoadCatalog that also returns the bytes it parsed, the baseline to hand to
// WatchCatalog so that a change made after this read is not mistaken for the loaded catalog.
func ReadCatalog(path string) (plan.Catalog, []byte, error) {
	data, err := readCatalogFile(path)
	if err != nil {
		return plan.Catalog{}, nil, fmt.Errorf("%w: read %s: %w", plan.ErrCatalog, path, err)
	}
	c, err := ParseCatalog(data, record.Reader(filepath.Dir(path)))
	if err != nil {
		return plan.Catalog{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, data, nil
}

// ParseCatalog decodes catalog YAML strictly (unknown and duplicate fields are errors, named by
// their YAML path and line, e.g. "models[0].peakMemoryBytez: unknown field (line 7)"), fills
// defaults (idleTimeout 10m, minResidency 2m, loadTime 10s, reserve and swap overhead 0) and
// validates the result. Every violation is reported, each naming its field path
// (models[3].tier) and the accepted range, the first MaxCatalogErrors of them and then how
// many more; the error wraps ErrCatalog. More than plan.MaxModels models is refused before
// anything else is checked or read. A model's record (its admission record) is read with
// readRecord, at most one given (ReadCatalog passes one that resolves paths against the
// catalog's directory), once per distinct path (relative ones cleaned) however many models name it;
// its peak, swap overhead and load time beat hand-typed ones, and a differing hand-typed value
// is an error naming both (plan.Model.Admit).
func ParseCatalog(data []byte, readRecord ...plan.AdmissionReader) (plan.Catalog, error) {
	var f catalogFile
	// A null is refused: idleTimeout: null took the 10m default without a word, and
	// peakMemoryBytes {1g.10gb: null} read as a 0 nobody wrote.
	if err := strictyaml.UnmarshalWith(data, &f, strictyaml.Options{RefuseNull: true}); err != nil {
		return plan.Catalog{}, catalogError(err)
	}
	// Refused before any record is read: each model may name one (Violations says the same).
	if len(f.Models) > plan.MaxModels {
		return plan.Catalog{}, catalogError(fmt.Errorf("models: %d models; want at most %d", len(f.Models), plan.MaxModels))
	}
	var errs []error
	maxBytes := resource.NewQuantity(plan.MaxMemoryBytes, resource.BinarySI)
	// bytesOf converts a quantity to bytes in [lo, plan.MaxMemoryBytes]; a value outside (compared
	// as a quantity: q.Value() wraps past int64, 2^64+1 reading as 1) or a fraction is reported
	// here, as written, and replaced by def so that Violations does not report the field again;
	// ok is false then.
	bytesOf := func(field string, q *byteCount, lo, def int64) (v int64, ok bool) {
		if q == nil {
			return def, true
		}
		if q.Cmp(*resource.NewQuantity(lo, resource.BinarySI)) < 0 || q.Cmp(*maxBytes) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s out of range [%d, %d]", field, errtext.Cut(q.written(), 64), lo, plan.MaxMemoryBytes))
			return def, false
		}
		if v = q.Value(); q.MilliValue() != v*1000 { // in range: neither overflows
			errs = append(errs, fmt.Errorf("%s: %s is not a whole number of bytes in [%d, %d]", field, errtext.Quote(q.written(), 64), lo, plan.MaxMemoryBytes))
			return def, false
		}
		return v, true
	}
	durOf := func(d *metav1.Duration, def time.Duration) time.Duration {
		if d == nil {
			return def
		}
		return d.Duration
	}
	reserve, _ := bytesOf("reserveBytes", f.ReserveBytes, 0, 0)
	c := plan.Catalog{
		ReserveBytes: reserve,
		IdleTimeout:  durOf(f.IdleTimeout, plan.DefaultIdleTimeout),
		MinResidency: durOf(f.MinResidency, plan.DefaultMinResidency),
		Models:       make([]plan.Model, 0, len(f.Models)),
	}
	// records holds each record read, by cleaned path: one read however many models name it.
	type recordRead struct {
		a   plan.Admission
		err error
	}
	records := map[string]recordRead{}
	for i, mf := range f.Models {
		swap, swapOK := bytesOf(fmt.Sprintf("models[%d].swapOverheadBytes", i), mf.SwapOverheadBytes, 0, 0)
		m := plan.Model{
			Name:              mf.Name,
			Digest:            mf.Digest,
			Tier:              plan.Tier(mf.Tier),
			SwapOverheadBytes: swap,
			LoadTime:          durOf(mf.LoadTime, plan.DefaultLoadTime),
			PeakMemoryBytes:   make(map[string]int64, len(mf.PeakMemoryBytes)),
		}
		badPeak := map[string]bool{} // typed peaks already reported: not compared with the record
		for _, p := range slices.Sorted(maps.Keys(mf.PeakMemoryBytes)) {
			q := mf.PeakMemoryBytes[p]
			var ok bool
			if m.PeakMemoryBytes[p], ok = bytesOf(fmt.Sprintf("models[%d].peakMemoryBytes[%q]", i, p), &q, 1, 1); !ok {
				badPeak[p] = true
			}
		}
		if mf.Record != "" {
			// The key is what the reader opens: an absolute path as written (through a
			// symlink, a/../r.yaml need not be r.yaml), a relative one cleaned, as the
			// reader's filepath.Join cleans it.
			key := mf.Record
			if !filepath.IsAbs(key) {
				key = filepath.Clean(key)
			}
			r, done := records[key]
			if !done && len(readRecord) > 0 {
				r.a, r.err = readRecord[0](mf.Record)
				records[key] = r
			}
			if len(readRecord) == 0 {
				errs = append(errs, fmt.Errorf("models[%d].record: %q needs the catalog file's directory to resolve; read the catalog with ReadCatalog", i, mf.Record))
			} else if a, err := r.a, r.err; err != nil {
				errs = append(errs, fmt.Errorf("models[%d].record: %w", i, err))
			} else {
				a.Record = mf.Record // as this entry wrote it, for its errors
				_, typedPeak := mf.PeakMemoryBytes[a.Profile]
				typed := plan.Typed{Peak: typedPeak && !badPeak[a.Profile], SwapOverhead: mf.SwapOverheadBytes != nil && swapOK, LoadTime: mf.LoadTime != nil}
				admitted, err := m.Admit(fmt.Sprintf("models[%d]", i), typed, a)
				if err != nil {
					errs = append(errs, err)
					// The record was read and holds the peak for its profile: the model does
					// not also lack one (Violations would add "peakMemoryBytes: empty" to the
					// conflict it was refused for).
					if _, ok := m.PeakMemoryBytes[a.Profile]; !ok && a.PeakBytes > 0 {
						m.PeakMemoryBytes[a.Profile] = a.PeakBytes
					}
				} else {
					m = admitted
				}
			}
		}
		c.Models = append(c.Models, m)
	}
	if err := c.Violations(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return plan.Catalog{}, catalogError(errs...)
	}
	slices.SortFunc(c.Models, func(a, b plan.Model) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// WatchCatalog re-reads the catalog file at path every LoopInterval and hands a changed, valid
// catalog to SetCatalog, so a ConfigMap update (kubelet swaps the mounted file) takes effect
// without a restart. loaded is the content the controller's current catalog was parsed from
// (ReadCatalog's bytes): a file differing from it, even on the first read, is applied, so an
// update between the initial load and the watch's start is not lost. An invalid catalog is
// reported (log and a Warning event, once per content) and the current one kept. It returns
// nil when ctx is done.
func (c *Controller) WatchCatalog(ctx context.Context, path string, loaded []byte) error {
	last := loaded
	var rejected []byte
	var unreadableSince time.Time // start of the current run of unreadable reads (zero: readable)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.deps.Clock.After(c.cfg.LoopInterval):
		}
		data, err := readCatalogFile(path)
		if err != nil {
			if unreadableSince.IsZero() { // once per episode: a missing ConfigMap is not news every loop
				unreadableSince = c.deps.Clock.Now()
				c.deps.Log.Warn("catalog not readable; keeping the current one until it is", "path", path, "err", err)
			}
			continue
		}
		if !unreadableSince.IsZero() {
			c.deps.Log.Info("catalog readable again", "path", path, "unreadable_for", c.deps.Clock.Now().Sub(unreadableSince))
			unreadableSince = time.Time{}
		}
		if bytes.Equal(data, last) || bytes.Equal(data, rejected) {
			continue
		}
		cat, err := ParseCatalog(data, record.Reader(filepath.Dir(path)))
		if err == nil {
			err = c.SetCatalog(cat)
		}
		if err != nil {
			rejected = data
			c.deps.Log.Warn("catalog update rejected; keeping the current one", "path", path, "err", err)
			c.event(true, "CatalogRejected", fmt.Sprintf("%s: %v", path, err))
			continue
		}
		last, rejected = data, nil
	}
}
