package plan

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/inferscale/inferscale/internal/errtext"
)

// ErrCatalog is wrapped by every error ParseCatalog, LoadCatalog and Catalog.Validate return.
var ErrCatalog = errors.New("invalid catalog")

// Tier is a model's residency class.
type Tier string

// Tiers, from most to least protected.
const (
	// TierP0 models are pinned: always loaded, never evicted; the pod is not ready until every
	// P0 model is READY.
	TierP0 Tier = "P0"
	// TierP1 models are kept while in demand and unloaded after the idle timeout.
	TierP1 Tier = "P1"
	// TierP2 models are loaded on demand and evicted before any P1 model.
	TierP2 Tier = "P2"
)

// rank orders tiers for loading (lower first) and eviction (higher first).
func (t Tier) rank() int {
	switch t {
	case TierP0:
		return 0
	case TierP1:
		return 1
	default:
		return 2
	}
}

// Catalog bounds and limits, used by Validate.
const (
	// MaxModels is the largest catalog accepted.
	MaxModels = 10000
	// MaxMemoryBytes bounds every byte count in the catalog (1 PiB): larger is a typo.
	MaxMemoryBytes int64 = 1 << 50
	// MaxLoadTime bounds a model's typical load time.
	MaxLoadTime = time.Hour
	// MaxIdleTimeout bounds the idle timeout.
	MaxIdleTimeout = 7 * 24 * time.Hour
	// MaxMinResidency bounds the minimum residency.
	MaxMinResidency = 24 * time.Hour
	// maxNameLen is Triton's practical limit: a model name is a directory name.
	maxNameLen = 255
)

// maxEcho bounds, in bytes, a value a catalog error repeats (a 1 MB model name made a 3 MB
// error, which the sidecar logs and writes into its CatalogRejected event); maxListed bounds
// the model names one error lists.
const (
	maxEcho   = 64
	maxListed = 20
)

// quote is v quoted, cut to maxEcho bytes with its length said (errtext.Quote).
func quote(v string) string { return errtext.Quote(v, maxEcho) }

var (
	// Triton model names are repository directory names.
	modelNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	// Profile keys: MIG profiles (1g.10gb, 1g.10gb+me, 1c.3g.40gb) or whole-GPU names from the
	// profile table (h100-80gb); lower case, no spaces.
	profileRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.+-]{0,62}$`)
)

// ValidProfile reports whether name is a well-formed profile name (a MIG profile such as
// 1g.10gb, 1g.10gb+me or 1c.3g.40gb, or a whole-GPU name such as h100-80gb): lower case
// letters, digits, '.', '+' and '-', at most 63 bytes.
func ValidProfile(name string) bool { return profileRE.MatchString(name) }

// Model is one catalog entry: everything the planner knows about a model before it is loaded.
type Model struct {
	// Name is the model's name in Triton's repository.
	Name string
	// Digest identifies the immutable model artifact (algorithm:hex, e.g. sha256:…).
	Digest string
	// Tier is P0, P1 or P2.
	Tier Tier
	// PeakMemoryBytes is the admitted peak GPU memory per MIG profile (profile name -> bytes),
	// from the model's admission record. A model without an entry for the pod's profile is
	// never loaded in that pod.
	PeakMemoryBytes map[string]int64
	// SwapOverheadBytes is the extra memory held while the model is reloaded (Triton keeps the
	// old copy serving while the new one loads).
	SwapOverheadBytes int64
	// LoadTime is the model's typical load time; it enters the model's value (see Value).
	LoadTime time.Duration
}

// Peak returns the model's admitted peak bytes for profile and whether it has one.
func (m Model) Peak(profile string) (int64, bool) {
	b, ok := m.PeakMemoryBytes[profile]
	return b, ok
}

// Catalog is the validated model catalog of one pod. Models are sorted by name.
type Catalog struct {
	// ReserveBytes is kept back from the budget (CUDA context, allocator slack).
	ReserveBytes int64
	// IdleTimeout: a P1/P2 model unused this long is unloaded.
	IdleTimeout time.Duration
	// MinResidency: a model loaded less than this long ago is never evicted.
	MinResidency time.Duration
	// Models, sorted by Name, names unique.
	Models []Model
}

// Model returns the catalog entry named name.
func (c Catalog) Model(name string) (Model, bool) {
	i, ok := slices.BinarySearchFunc(c.Models, name, func(m Model, n string) int { return strings.Compare(m.Name, n) })
	if !ok {
		return Model{}, false
	}
	return c.Models[i], true
}

// Unplaceable returns, sorted, the names of models that have no peak memory entry for profile:
// they are never loaded in a pod of that profile.
func (c Catalog) Unplaceable(profile string) []string {
	var out []string
	for _, m := range c.Models {
		if _, ok := m.PeakMemoryBytes[profile]; !ok {
			out = append(out, m.Name)
		}
	}
	return out
}

// Profiles returns, sorted and without repeats, the profiles named in the models'
// peakMemoryBytes.
func (c Catalog) Profiles() []string {
	var out []string
	for _, m := range c.Models {
		for p := range m.PeakMemoryBytes {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Defaults applied when a catalog file leaves a field out (residency.ParseCatalog).
const (
	DefaultIdleTimeout  = 10 * time.Minute
	DefaultMinResidency = 0 // the floor; each model is protected AntiThrashFactor × its load time (MinResidency)
	DefaultLoadTime     = 10 * time.Second
)

// Validate checks every field and returns every violation (errors.Join), each naming its field
// path and accepted range, wrapped in ErrCatalog; nil when the catalog is valid.
func (c Catalog) Validate() error {
	if err := c.Violations(); err != nil {
		return fmt.Errorf("%w: %w", ErrCatalog, err)
	}
	return nil
}

// Violations is Validate without the ErrCatalog wrapping: every violation joined, or nil. It is
// for callers that report violations of their own alongside (residency.ParseCatalog).
func (c Catalog) Violations() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.ReserveBytes < 0 || c.ReserveBytes > MaxMemoryBytes {
		add("reserveBytes: %d out of range [0, %d]", c.ReserveBytes, MaxMemoryBytes)
	}
	if c.IdleTimeout < time.Second || c.IdleTimeout > MaxIdleTimeout {
		add("idleTimeout: %s out of range [1s, %s]", c.IdleTimeout, MaxIdleTimeout)
	}
	if c.MinResidency < 0 || c.MinResidency > MaxMinResidency {
		add("minResidency: %s out of range [0s, %s]", c.MinResidency, MaxMinResidency)
	}
	if len(c.Models) == 0 {
		add("models: empty; want 1 to %d models", MaxModels)
	}
	if len(c.Models) > MaxModels {
		add("models: %d models; want at most %d", len(c.Models), MaxModels)
	}
	seen := make(map[string]int, len(c.Models))
	for i, m := range c.Models {
		p := fmt.Sprintf("models[%d]", i)
		switch {
		case m.Name == "":
			add("%s.name: empty; want a Triton model name ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most %d bytes)", p, maxNameLen)
		case len(m.Name) > maxNameLen || !modelNameRE.MatchString(m.Name):
			add("%s.name: %s is not a Triton model name ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most %d bytes)", p, quote(m.Name), maxNameLen)
		}
		if j, dup := seen[m.Name]; dup && m.Name != "" {
			add("%s.name: %s duplicates models[%d].name; names must be unique", p, quote(m.Name), j)
		} else {
			seen[m.Name] = i
		}
		if m.Digest == "" {
			add("%s.digest: empty; want algorithm:hex, e.g. sha256:<64 hex digits>", p)
		} else if err := digest.Digest(m.Digest).Validate(); err != nil {
			add("%s.digest: %s: %v; want algorithm:hex, e.g. sha256:<64 hex digits>", p, quote(m.Digest), err)
		}
		switch m.Tier {
		case TierP0, TierP1, TierP2:
		default:
			add("%s.tier: %s; want one of P0, P1, P2", p, quote(string(m.Tier)))
		}
		if len(m.PeakMemoryBytes) == 0 {
			add("%s.peakMemoryBytes: empty; want at least one MIG profile -> bytes entry", p)
		}
		for _, prof := range sortedKeys(m.PeakMemoryBytes) {
			b := m.PeakMemoryBytes[prof]
			if !profileRE.MatchString(prof) {
				add("%s.peakMemoryBytes: profile %s is not a profile name (lower case, e.g. 1g.10gb or h100-80gb)", p, quote(prof))
			}
			if b < 1 || b > MaxMemoryBytes {
				add("%s.peakMemoryBytes[%s]: %d out of range [1, %d]", p, quote(prof), b, MaxMemoryBytes)
			}
		}
		if m.SwapOverheadBytes < 0 || m.SwapOverheadBytes > MaxMemoryBytes {
			add("%s.swapOverheadBytes: %d out of range [0, %d]", p, m.SwapOverheadBytes, MaxMemoryBytes)
		}
		if m.LoadTime <= 0 || m.LoadTime > MaxLoadTime {
			add("%s.loadTime: %s out of range (0s, %s]", p, m.LoadTime, MaxLoadTime)
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ErrNeverFits is wrapped by CheckPinned's error: a P0 model that can never be loaded within
// the budget, so the pod would never turn ready.
var ErrNeverFits = errors.New("pinned model can never fit the budget")

// Unfit is a catalog model that can never be loaded in a pod with a given budget.
type Unfit struct {
	// Name and Tier of the model.
	Name string
	Tier Tier
	// PeakBytes is the model's admitted peak for the budget's profile; 0 when it has none.
	PeakBytes int64
	// Reason says why, e.g. "no peak for profile 1g.10gb" or
	// "peak 20.00GiB + reserve 256.0MiB = 20.25GiB exceeds the budget 9.62GiB of profile 1g.10gb".
	Reason string
}

// Unfit returns, sorted by name, the models that can never be loaded under b: those without a
// peak for b.Profile, and those whose peak plus the reserve (ReserveBytes: the larger of the
// catalog's and the budget's) exceeds b.TotalBytes, since a load is admitted only while
// reserve + every accounted model ≤ TotalBytes.
func (c Catalog) Unfit(b Budget) []Unfit {
	reserve := ReserveBytes(c, b)
	var out []Unfit
	for _, m := range c.Models {
		peak, ok := m.Peak(b.Profile)
		switch {
		case !ok:
			out = append(out, Unfit{Name: m.Name, Tier: m.Tier, Reason: "no peak for profile " + b.Profile})
		case peak > b.TotalBytes-reserve:
			out = append(out, Unfit{Name: m.Name, Tier: m.Tier, PeakBytes: peak, Reason: fmt.Sprintf(
				"peak %s + reserve %s = %s exceeds the budget %s of profile %s",
				FormatBytes(peak), FormatBytes(reserve), FormatBytes(peak+reserve), FormatBytes(b.TotalBytes), b.Profile)})
		}
	}
	return out
}

// CheckPinned returns an error wrapping ErrNeverFits when the P0 models with a peak for
// b.Profile can never all be loaded under b: one whose peak + reserve exceeds b.TotalBytes
// (each is named, with its peak and the budget), or all of them together. nil otherwise. P0
// models without a peak for the profile are not an error here: they are reported by Unfit
// (a catalog may serve pods of several profiles).
func (c Catalog) CheckPinned(b Budget) error {
	var errs []error
	reserve := ReserveBytes(c, b)
	var sum int64
	var names []string
	for _, u := range c.Unfit(b) {
		if u.Tier == TierP0 && u.PeakBytes > 0 {
			errs = append(errs, fmt.Errorf("model %q (P0): %s; it can never be loaded and the pod would never be ready", u.Name, u.Reason))
		}
	}
	for _, m := range c.Models {
		if peak, ok := m.Peak(b.Profile); ok && m.Tier == TierP0 {
			sum = min(sum+peak, 1<<62) // peaks are ≤ 2^50: no overflow
			names = append(names, m.Name)
		}
	}
	if len(errs) == 0 && len(names) > 1 && sum > b.TotalBytes-reserve {
		list := strings.Join(names[:min(len(names), maxListed)], ", ")
		if len(names) > maxListed {
			list += fmt.Sprintf(" and %d more", len(names)-maxListed)
		}
		errs = append(errs, fmt.Errorf("P0 models %s together: peaks %s + reserve %s = %s exceed the budget %s of profile %s; they can never all be loaded and the pod would never be ready",
			list, FormatBytes(sum), FormatBytes(reserve), FormatBytes(sum+reserve), FormatBytes(b.TotalBytes), b.Profile))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrNeverFits, errors.Join(errs...))
	}
	return nil
}

// Admission is what a model's admission record (written by cmd/capacity, read by
// capacity/record) says about the model on one profile: the measured figures the catalog
// takes instead of hand-typed ones.
type Admission struct {
	// Record is the record's reference as the catalog wrote it (records/m.1g.10gb.yaml).
	Record string
	// Model and Digest the record was measured for; Digest "" when the record has none.
	Model, Digest string
	// Profile the record was measured on.
	Profile string
	// Allowed is the record's verdict.
	Allowed bool
	// PeakBytes is the measured peak on Profile; SwapOverheadBytes the extra held while a
	// reload keeps two copies (swap peak − peak, ≥ 0); LoadTime the measured load time.
	PeakBytes, SwapOverheadBytes int64
	LoadTime                     time.Duration
	// MemoryUnmeasured: the record measured no memory (its runtime.memorySource is "none":
	// cmd/capacity --skip-memory, an OpenAI-compatible server, or no reading at all), so its
	// PeakBytes and SwapOverheadBytes of 0 stand for unknown, not for a model that takes no
	// memory. Admit then takes the peak and the swap overhead from the catalog entry.
	MemoryUnmeasured bool
}

// AdmissionReader reads the admission record a catalog entry references.
type AdmissionReader func(ref string) (Admission, error)

// Typed says which of a catalog entry's figures were typed by hand (rather than defaulted):
// Peak for the admission's profile, SwapOverhead, LoadTime.
type Typed struct{ Peak, SwapOverhead, LoadTime bool }

// Admit returns m with a's figures: the peak for a.Profile, the swap overhead and the load
// time. A record beats a hand-typed value, but a hand-typed value that differs is an error
// naming both (field is m's path in the catalog, e.g. models[2]); so is a record for another
// model, another digest, or with verdict refused. A record that measured no memory
// (a.MemoryUnmeasured) gives no peak or swap overhead: the entry's typed peak for a.Profile is
// kept (an error when there is none), and a record's load time of 0 is none measured.
func (m Model) Admit(field string, typed Typed, a Admission) (Model, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if a.Model != m.Name {
		bad("%s.record: %s is the record of model %q, not %q", field, a.Record, a.Model, m.Name)
	}
	if a.Digest != "" && m.Digest != "" && a.Digest != m.Digest {
		bad("%s.digest: %s differs from record %s's digest %s", field, m.Digest, a.Record, a.Digest)
	}
	if !a.Allowed {
		bad("%s.record: %s refuses the model on profile %s (verdict allowed: false)", field, a.Record, a.Profile)
	}
	peak := m.PeakMemoryBytes[a.Profile]
	switch {
	case a.MemoryUnmeasured && !typed.Peak:
		bad("%s.record: %s measured no memory (memorySource none: cmd/capacity --skip-memory or an OpenAI-compatible server), so it gives no peak for profile %s; measure it again without --skip-memory, or type peakMemoryBytes[%q]", field, a.Record, a.Profile, a.Profile)
	case !a.MemoryUnmeasured && typed.Peak && peak != a.PeakBytes:
		bad("%s.peakMemoryBytes[%q]: %d typed, record %s measured %d; remove one", field, a.Profile, peak, a.Record, a.PeakBytes)
	}
	if !a.MemoryUnmeasured && typed.SwapOverhead && m.SwapOverheadBytes != a.SwapOverheadBytes {
		bad("%s.swapOverheadBytes: %d typed, record %s measured %d (swap peak − peak); remove one", field, m.SwapOverheadBytes, a.Record, a.SwapOverheadBytes)
	}
	// A load time of 0 is none measured (the record's loadTimeSeconds with --skip-memory).
	if typed.LoadTime && a.LoadTime > 0 && m.LoadTime != a.LoadTime {
		bad("%s.loadTime: %s typed, record %s measured %s; remove one", field, m.LoadTime, a.Record, a.LoadTime)
	}
	if len(errs) > 0 {
		return m, errors.Join(errs...)
	}
	out := m
	out.PeakMemoryBytes = maps.Clone(m.PeakMemoryBytes) // the result shares no map with m
	if !a.MemoryUnmeasured {
		if out.PeakMemoryBytes == nil {
			out.PeakMemoryBytes = map[string]int64{}
		}
		out.PeakMemoryBytes[a.Profile] = a.PeakBytes
		out.SwapOverheadBytes = a.SwapOverheadBytes
	}
	if a.LoadTime > 0 {
		out.LoadTime = a.LoadTime
	}
	return out, nil
}
