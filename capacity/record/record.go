// Package record is the admission record: what cmd/capacity measured about one model on one
// GPU profile, as a YAML file other tools read (the residency catalog, the ledger). Its
// top-level keys are fixed: model, digest, profile, runtime, loadShape, latencySeconds
// (p50, p95, p99), successRate, sloThroughputRPS, memory (steadyBytes, peakBytes,
// swapPeakBytes), loadTimeSeconds, verdict (allowed, headroomBytes, limits) and curve.
// Durations are seconds and memory is bytes, as plain numbers. docs/capacity.md explains every
// field.
//
// The package imports only the YAML decoder, so that both the capacity tool and the
// residency sidecar can read records without importing each other.
package record

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/strictyaml"
)

// ErrRecord is wrapped by every error Read and Validate return.
var ErrRecord = errors.New("invalid admission record")

// Record is one admission record. Field tags: json for reading (strictyaml), yaml for writing
// in this order.
type Record struct {
	// Model is the model's name in the serving repository.
	Model string `json:"model" yaml:"model"`
	// Digest identifies the immutable model artifact (algorithm:hex); "" when not given
	// (--digest), which the verdict's limits then say.
	Digest string `json:"digest" yaml:"digest"`
	// Profile is the MIG profile or whole-GPU name measured on (1g.10gb, h100-80gb).
	Profile string `json:"profile" yaml:"profile"`
	// Runtime is what the model ran on, as far as it could be read.
	Runtime Runtime `json:"runtime" yaml:"runtime"`
	// LoadShape is the load offered and the SLO it was judged by.
	LoadShape LoadShape `json:"loadShape" yaml:"loadShape"`
	// LatencySeconds are the latency quantiles at μ (the highest passing level).
	LatencySeconds Latency `json:"latencySeconds" yaml:"latencySeconds"`
	// SuccessRate is successes ÷ completed requests at μ, 0..1.
	SuccessRate float64 `json:"successRate" yaml:"successRate"`
	// SLOThroughputRPS is μ, req/s: the rate served (successes per second) at the highest
	// offered rate that passed, capped at that offered rate, so never above what one replica
	// completed there (capacity.MuFromLevel).
	SLOThroughputRPS float64 `json:"sloThroughputRPS" yaml:"sloThroughputRPS"`
	// Memory is the model's device memory, bytes.
	Memory Memory `json:"memory" yaml:"memory"`
	// LoadTimeSeconds is how long Triton's load call took.
	LoadTimeSeconds float64 `json:"loadTimeSeconds" yaml:"loadTimeSeconds"`
	// Verdict says whether the model may run on the profile.
	Verdict Verdict `json:"verdict" yaml:"verdict"`
	// Curve is every level measured, by offered rate.
	Curve []Point `json:"curve" yaml:"curve"`
}

// Runtime is the serving stack measured; "" where it could not be read.
type Runtime struct {
	// Target is the endpoint measured (host:port or URL); Protocol "triton-grpc" or "openai".
	Target   string `json:"target" yaml:"target"`
	Protocol string `json:"protocol" yaml:"protocol"`
	// GPUProduct is NVML's device name ("NVIDIA H100 80GB HBM3 MIG 1g.10gb"); MIGProfile the
	// profile NVML reports for it (or the --mig-profile given).
	GPUProduct string `json:"gpuProduct" yaml:"gpuProduct"`
	MIGProfile string `json:"migProfile" yaml:"migProfile"`
	// DriverVersion and CUDAVersion as NVML reports them; ServerVersion of the inference
	// server (not readable through the protocol subset inferscale speaks: "").
	DriverVersion string `json:"driverVersion" yaml:"driverVersion"`
	CUDAVersion   string `json:"cudaVersion" yaml:"cudaVersion"`
	ServerVersion string `json:"serverVersion" yaml:"serverVersion"`
	// MemorySource says where the memory figures come from: "nvml", "triton-metrics"
	// (nv_gpu_memory_used_bytes), "triton-statistics" (memory_usage) or "none".
	MemorySource string `json:"memorySource" yaml:"memorySource"`
	// MeasuredAt is when the measurement started (RFC 3339, UTC).
	MeasuredAt string `json:"measuredAt" yaml:"measuredAt"`
}

// LoadShape is the offered load and the SLO.
type LoadShape struct {
	// Arrivals is "poisson" (open loop).
	Arrivals string `json:"arrivals" yaml:"arrivals"`
	// Request describes one request ("triton-grpc ModelInfer m, 1 input tensor(s)").
	Request string `json:"request" yaml:"request"`
	// SLOLatencySeconds at quantile SLOQuantile, and the error-rate ceiling MaxErrorRate.
	SLOLatencySeconds float64 `json:"sloLatencySeconds" yaml:"sloLatencySeconds"`
	SLOQuantile       float64 `json:"sloQuantile" yaml:"sloQuantile"`
	MaxErrorRate      float64 `json:"maxErrorRate" yaml:"maxErrorRate"`
	// WindowSeconds (shortest window), MaxWindows and Stability of the measurement; Seed of
	// the arrival schedule.
	WindowSeconds float64 `json:"windowSeconds" yaml:"windowSeconds"`
	MaxWindows    int     `json:"maxWindows" yaml:"maxWindows"`
	Stability     float64 `json:"stability" yaml:"stability"`
	Seed          uint64  `json:"seed" yaml:"seed"`
	// ReplicaConcurrency is k, requests one replica serves at once, estimated as saturation
	// throughput × ServiceTimeSeconds (Little's law), rounded; ServiceTimeSeconds is the median
	// latency at the lowest level measured (queueing there is negligible).
	ReplicaConcurrency int     `json:"replicaConcurrency" yaml:"replicaConcurrency"`
	ServiceTimeSeconds float64 `json:"serviceTimeSeconds" yaml:"serviceTimeSeconds"`
}

// Latency quantiles, seconds.
type Latency struct {
	P50 float64 `json:"p50" yaml:"p50"`
	P95 float64 `json:"p95" yaml:"p95"`
	P99 float64 `json:"p99" yaml:"p99"`
}

// Memory figures, bytes above the device's use before the model was loaded.
type Memory struct {
	// SteadyBytes: after the load, idle. PeakBytes: the most seen during the load search.
	// SwapPeakBytes: the most seen while a reload held the old and the new copy.
	SteadyBytes   int64 `json:"steadyBytes" yaml:"steadyBytes"`
	PeakBytes     int64 `json:"peakBytes" yaml:"peakBytes"`
	SwapPeakBytes int64 `json:"swapPeakBytes" yaml:"swapPeakBytes"`
	// ReturnedAfterUnload: the device's use came back to its level before the load.
	ReturnedAfterUnload bool `json:"returnedAfterUnload" yaml:"returnedAfterUnload"`
}

// Verdict is whether the model is admitted to the profile.
type Verdict struct {
	// Allowed: μ > 0 and peak + reserve and swap peak + reserve fit the budget.
	Allowed bool `json:"allowed" yaml:"allowed"`
	// HeadroomBytes = BudgetBytes − ReserveBytes − max(PeakBytes, SwapPeakBytes); negative
	// when it does not fit.
	HeadroomBytes int64 `json:"headroomBytes" yaml:"headroomBytes"`
	// BudgetBytes of the profile (NVML, --budget-bytes or the profile table) and the reserve.
	BudgetBytes  int64 `json:"budgetBytes" yaml:"budgetBytes"`
	ReserveBytes int64 `json:"reserveBytes" yaml:"reserveBytes"`
	// Limits are the known limits of the figures and the reasons for a refusal.
	Limits []string `json:"limits" yaml:"limits"`
}

// Point is one measured level of the curve.
type Point struct {
	OfferedRPS    float64 `json:"offeredRPS" yaml:"offeredRPS"`
	ThroughputRPS float64 `json:"throughputRPS" yaml:"throughputRPS"`
	P50           float64 `json:"p50" yaml:"p50"`
	P95           float64 `json:"p95" yaml:"p95"`
	P99           float64 `json:"p99" yaml:"p99"`
	// TTFTP50 and TTFTP99: time to first token, streamed LLM responses only.
	TTFTP50     float64 `json:"ttftP50,omitempty" yaml:"ttftP50,omitempty"`
	TTFTP99     float64 `json:"ttftP99,omitempty" yaml:"ttftP99,omitempty"`
	SuccessRate float64 `json:"successRate" yaml:"successRate"`
	Stable      bool    `json:"stable" yaml:"stable"`
	Passed      bool    `json:"passed" yaml:"passed"`
	Windows     int     `json:"windows" yaml:"windows"`
	// ErrorsByCode counts failed requests by code.
	ErrorsByCode map[string]int `json:"errorsByCode,omitempty" yaml:"errorsByCode,omitempty"`
}

// FileName is the record's file name, <model>.<profile>.yaml, one path element: every
// byte of model outside [A-Za-z0-9._-] becomes '_'. vLLM's served model names have a slash
// (meta-llama/Llama-3.1-8B-Instruct), so the record went to a subfolder that did not exist
// and the write failed after the whole measurement, and a name with ../ wrote outside
// --out. (profile is a validated profile name.)
func FileName(model, profile string) string {
	b := []byte(model)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b) + "." + profile + ".yaml"
}

// Marshal writes r as YAML, keys in the order of the type.
func Marshal(r Record) ([]byte, error) { return yamlv3.Marshal(r) }

// Parse decodes a record strictly (unknown fields are errors; keys are matched exactly, case
// included, so SLOTHROUGHPUTRPS is an unknown field, not sloThroughputRPS) and validates it.
func Parse(data []byte) (Record, error) {
	var r Record
	if err := plainNumbers(data); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if err := strictyaml.UnmarshalWith(data, &r, strictyaml.Options{ExactKeys: true}); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, bounded(err))
	}
	missing := requiredKeys(data)
	if err := r.Validate(); err != nil || missing != nil {
		if missing != nil {
			err = errors.Join(fmt.Errorf("%w: %w", ErrRecord, missing), err)
		}
		return Record{}, err
	}
	return r, nil
}

// RequiredKeys are the keys every record must have because an absent one would read as a
// figure nobody wrote: without verdict.allowed a record read as refused (and the ledger blamed
// the verdict), without sloThroughputRPS as μ = 0. cmd/capacity writes them all. (An absent
// memory.peakBytes reads as no peak for the profile, which the catalog refuses by name, and an
// absent loadTimeSeconds as 0 s, which it refuses as out of range.)
var RequiredKeys = []string{"model", "profile", "sloThroughputRPS", "verdict.allowed"}

// requiredKeys reports every RequiredKeys path missing from the record's YAML. The keys are
// read as the strict decoder read them: exactly, and with merge keys (<<) applied and aliases
// followed (within strictyaml.MaxNodes), so `<<: {sloThroughputRPS: 400}` gives the key.
func requiredKeys(data []byte) error {
	var doc map[string]any
	if err := strictyaml.UnmarshalWith(data, &doc, strictyaml.Options{ExactKeys: true}); err != nil {
		return nil // the strict decoder has reported it
	}
	var errs []error
	for _, path := range RequiredKeys {
		var v any = doc
		for _, k := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			v = m[k] // nil when v is not a mapping or lacks k
		}
		if v == nil { // null decodes as absent: 0 or false
			errs = append(errs, fmt.Errorf("%s: missing (cmd/capacity writes it; absent, it would read as 0 or false)", path))
		}
	}
	return errors.Join(errs...)
}

// plainNumberRE is a number as cmd/capacity writes one: JSON's number syntax, plain decimal
// or exponent notation.
var plainNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// plainNumbers refuses a number in any other notation, because the decoder does not read
// them as written: sloThroughputRPS: 0x10 came out as 16, 1_000 as 1000, .5 as 0 and -.inf
// as -9.223372036854776e+18, each without an error, so the record carried a figure nobody
// wrote. Quoted strings are left to the strict decoder.
func plainNumbers(data []byte) error {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err != nil {
		return nil // the strict decoder reports it
	}
	var walk func(n *yamlv3.Node) error
	walk = func(n *yamlv3.Node) error {
		if n.Kind == yamlv3.ScalarNode && n.Style == 0 && (n.Tag == "!!int" || n.Tag == "!!float") && !plainNumberRE.MatchString(n.Value) {
			return fmt.Errorf("%s (line %d): write numbers in plain decimal or exponent notation, as cmd/capacity writes them (e.g. 40, 0.5, 1e+06)", echo(n.Value), n.Line)
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(&root)
}

// echo quotes v for an error, at most 64 bytes of it.
func echo(v string) string { return errtext.Quote(v, 64) }

// A decode error is cut to maxErrLines lines of at most maxErrLineBytes each: the strict
// decoder reports every unknown key and quotes what it could not decode, so a `record:`
// pointing at another file (/etc/passwd, up to MaxBytes of it) repeated that file in the
// error, one line per line.
const (
	maxErrLines     = 5
	maxErrLineBytes = 160
)

// boundedError is an error's message cut by bounded; Unwrap keeps the original.
type boundedError struct {
	msg string
	err error
}

func (e *boundedError) Error() string { return e.msg }
func (e *boundedError) Unwrap() error { return e.err }

// bounded returns err with its message cut to maxErrLines lines of maxErrLineBytes (at a
// rune boundary), saying how much was left out; a short message is returned as it is.
func bounded(err error) error {
	lines := strings.Split(err.Error(), "\n")
	cut := false
	if len(lines) > maxErrLines {
		lines, cut = append(lines[:maxErrLines:maxErrLines], fmt.Sprintf("… and %d more lines", len(lines)-maxErrLines)), true
	}
	for i, l := range lines {
		if len(l) > maxErrLineBytes {
			lines[i], cut = errtext.Cut(l, maxErrLineBytes), true
		}
	}
	if !cut {
		return err
	}
	return &boundedError{msg: strings.Join(lines, "\n"), err: err}
}

// MaxBytes bounds one record file. A record with a curve of a few hundred levels is tens of
// KiB; the bound keeps a catalog's or a ledger spec's `record:` pointing at a huge or endless
// file (/dev/zero) from being read without end.
const MaxBytes = 1 << 20

// Read reads and parses the record at path, at most MaxBytes; errors name the path.
func Read(path string) (Record, error) {
	data, err := boundedfile.Read(path, MaxBytes)
	switch {
	case errors.Is(err, boundedfile.ErrTooLarge):
		return Record{}, fmt.Errorf("%w: %s: larger than %d bytes", ErrRecord, path, MaxBytes)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return Record{}, fmt.Errorf("%w: %w", ErrRecord, err)
	case err != nil:
		return Record{}, fmt.Errorf("%w: %s: %w", ErrRecord, path, err)
	}
	r, err := Parse(data)
	if err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Validate checks the fields a reader relies on, each violation naming its key.
func (r Record) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.Model == "" {
		bad("model: empty, want the model's name")
	}
	if !plan.ValidProfile(r.Profile) {
		bad("profile: %q is not a profile name (lower case, e.g. 1g.10gb or h100-80gb)", r.Profile)
	}
	for _, f := range []struct {
		key string
		v   int64
	}{{"memory.steadyBytes", r.Memory.SteadyBytes}, {"memory.peakBytes", r.Memory.PeakBytes}, {"memory.swapPeakBytes", r.Memory.SwapPeakBytes}} {
		if f.v < 0 || f.v > plan.MaxMemoryBytes {
			bad("%s: %d out of range [0, %d]", f.key, f.v, plan.MaxMemoryBytes)
		}
	}
	if !(r.LoadTimeSeconds >= 0 && r.LoadTimeSeconds <= plan.MaxLoadTime.Seconds()) {
		bad("loadTimeSeconds: %v out of range [0, %v]", r.LoadTimeSeconds, plan.MaxLoadTime.Seconds())
	}
	if !(r.SLOThroughputRPS >= 0) {
		bad("sloThroughputRPS: %v, want >= 0", r.SLOThroughputRPS)
	}
	if !(r.SuccessRate >= 0 && r.SuccessRate <= 1) {
		bad("successRate: %v out of range [0, 1]", r.SuccessRate)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrRecord, errors.Join(errs...))
	}
	return nil
}

// Admission is what the residency catalog takes from the record.
func (r Record) Admission(ref string) plan.Admission {
	return plan.Admission{
		Record: ref, Model: r.Model, Digest: r.Digest, Profile: r.Profile, Allowed: r.Verdict.Allowed,
		PeakBytes: r.Memory.PeakBytes, SwapOverheadBytes: max(0, r.Memory.SwapPeakBytes-r.Memory.PeakBytes),
		LoadTime:         time.Duration(r.LoadTimeSeconds * float64(time.Second)),
		MemoryUnmeasured: r.Runtime.MemorySource == "none",
	}
}

// Reader returns a plan.AdmissionReader that reads records by paths relative to dir (the
// catalog file's directory); an absolute path is used as it is.
func Reader(dir string) plan.AdmissionReader {
	return func(ref string) (plan.Admission, error) {
		p := ref
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		r, err := Read(p)
		if err != nil {
			return plan.Admission{}, err
		}
		return r.Admission(ref), nil
	}
}
