package residency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/strictyaml"
)

// catalogFile is the YAML schema. Durations are Go duration strings ("10m"); byte counts are
// integers or Kubernetes quantities ("9Gi", "512Mi").
type catalogFile struct {
	ReserveBytes *resource.Quantity `json:"reserveBytes,omitempty"`
	IdleTimeout  *metav1.Duration   `json:"idleTimeout,omitempty"`
	MinResidency *metav1.Duration   `json:"minResidency,omitempty"`
	Models       []modelFile        `json:"models"`
}

type modelFile struct {
	Name              string                       `json:"name"`
	Digest            string                       `json:"digest"`
	Tier              string                       `json:"tier"`
	PeakMemoryBytes   map[string]resource.Quantity `json:"peakMemoryBytes"`
	SwapOverheadBytes *resource.Quantity           `json:"swapOverheadBytes,omitempty"`
	LoadTime          *metav1.Duration             `json:"loadTime,omitempty"`
	// Record is the model's admission record (cmd/capacity), relative to the catalog file.
	Record string `json:"record,omitempty"`
}

// LoadCatalog reads and validates the catalog YAML at path. See ParseCatalog.
func LoadCatalog(path string) (plan.Catalog, error) {
	c, _, err := ReadCatalog(path)
	return c, err
}

// ReadCatalog is LoadCatalog that also returns the bytes it parsed, the baseline to hand to
// WatchCatalog so that a change made after this read is not mistaken for the loaded catalog.
func ReadCatalog(path string) (plan.Catalog, []byte, error) {
	data, err := os.ReadFile(path)
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
// (models[3].tier) and the accepted range; the error wraps ErrCatalog. A model's record (its
// admission record) is read with readRecord, at most one given (ReadCatalog passes one that
// resolves paths against the catalog's directory); its peak, swap overhead and load time beat
// hand-typed ones, and a differing hand-typed value is an error naming both (plan.Model.Admit).
func ParseCatalog(data []byte, readRecord ...plan.AdmissionReader) (plan.Catalog, error) {
	var f catalogFile
	if err := strictyaml.Unmarshal(data, &f); err != nil {
		return plan.Catalog{}, fmt.Errorf("%w: %w", plan.ErrCatalog, err)
	}
	var errs []error
	// bytesOf converts a quantity to bytes; a fraction is reported here and replaced by def so
	// that validate does not report the same field twice.
	bytesOf := func(field string, q *resource.Quantity, def int64) int64 {
		if q == nil {
			return def
		}
		v := q.Value()
		if v >= -plan.MaxMemoryBytes && v <= plan.MaxMemoryBytes && q.MilliValue() != v*1000 {
			errs = append(errs, fmt.Errorf("%s: %q is not a whole number of bytes in [0, %d]", field, q.String(), plan.MaxMemoryBytes))
			return def
		}
		return v
	}
	durOf := func(d *metav1.Duration, def time.Duration) time.Duration {
		if d == nil {
			return def
		}
		return d.Duration
	}
	c := plan.Catalog{
		ReserveBytes: bytesOf("reserveBytes", f.ReserveBytes, 0),
		IdleTimeout:  durOf(f.IdleTimeout, plan.DefaultIdleTimeout),
		MinResidency: durOf(f.MinResidency, plan.DefaultMinResidency),
		Models:       make([]plan.Model, 0, len(f.Models)),
	}
	for i, mf := range f.Models {
		m := plan.Model{
			Name:              mf.Name,
			Digest:            mf.Digest,
			Tier:              plan.Tier(mf.Tier),
			SwapOverheadBytes: bytesOf(fmt.Sprintf("models[%d].swapOverheadBytes", i), mf.SwapOverheadBytes, 0),
			LoadTime:          durOf(mf.LoadTime, plan.DefaultLoadTime),
			PeakMemoryBytes:   make(map[string]int64, len(mf.PeakMemoryBytes)),
		}
		for _, p := range slices.Sorted(maps.Keys(mf.PeakMemoryBytes)) {
			q := mf.PeakMemoryBytes[p]
			m.PeakMemoryBytes[p] = bytesOf(fmt.Sprintf("models[%d].peakMemoryBytes[%q]", i, p), &q, 1)
		}
		if mf.Record != "" {
			if len(readRecord) == 0 {
				errs = append(errs, fmt.Errorf("models[%d].record: %q needs the catalog file's directory to resolve; read the catalog with ReadCatalog", i, mf.Record))
			} else if a, err := readRecord[0](mf.Record); err != nil {
				errs = append(errs, fmt.Errorf("models[%d].record: %w", i, err))
			} else {
				_, typedPeak := mf.PeakMemoryBytes[a.Profile]
				typed := plan.Typed{Peak: typedPeak, SwapOverhead: mf.SwapOverheadBytes != nil, LoadTime: mf.LoadTime != nil}
				if m, err = m.Admit(fmt.Sprintf("models[%d]", i), typed, a); err != nil {
					errs = append(errs, err)
				}
			}
		}
		c.Models = append(c.Models, m)
	}
	if err := c.Violations(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return plan.Catalog{}, fmt.Errorf("%w: %w", plan.ErrCatalog, errors.Join(errs...))
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
		data, err := os.ReadFile(path)
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
