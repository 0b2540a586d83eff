package tritontest

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
)

// ErrInvalidConfig is wrapped by every Config.Validate violation.
var ErrInvalidConfig = errors.New("tritontest: invalid config")

// Mode is Triton's --model-control-mode.
type Mode string

const (
	// ModeExplicit: models load and unload only through the repository API
	// (and the startup list); the mode the residency controller needs.
	ModeExplicit Mode = "explicit"
	// ModeNone is Triton's default: every repository model loads at start
	// and repository load/unload calls fail with Unavailable.
	ModeNone Mode = "none"
)

// Fault is misbehaviour injected into one model. The zero Fault is a
// well-behaved model.
type Fault struct {
	// FailLoad, when not empty, makes loads fail after the model's LoadTime
	// with this text as the error (e.g. "Internal: CUDA error: an illegal
	// memory access"); the model ends UNAVAILABLE with the reason kept.
	FailLoad string
	// FailLoadCount limits FailLoad to the next n loads; 0 means every load.
	FailLoadCount int
	// HangLoad keeps loads LOADING, holding their memory, until the fault is
	// cleared with SetFault (the load then takes its LoadTime) or the server
	// restarts or closes.
	HangLoad bool
	// UnloadLeakBytes stay allocated on the device after each unload, until
	// Restart. Range: 0..MemoryBytes.
	UnloadLeakBytes int64
	// ExtraServiceTime is added to every request's compute time (slow
	// responses). Range: 0..MaxServiceTime.
	ExtraServiceTime time.Duration
}

// Model is one model of the fake's repository.
type Model struct {
	// Name as clients address it. Required, unique.
	Name string
	// Version reported once loaded; "" means "1".
	Version string
	// MemoryBytes of GPU memory the model holds from the start of its load
	// until its unload completes. Range: 0..MaxMemoryBytes.
	MemoryBytes int64
	// LoadTime a load takes. Range: 0..MaxLoadTime (1h).
	LoadTime time.Duration
	// ServiceTime is the mean time one request executes for. Range:
	// 0..MaxServiceTime.
	ServiceTime time.Duration
	// ServiceDistribution is the distribution each request's execution time is drawn from,
	// with mean ServiceTime; "" means deterministic. See Distribution.
	ServiceDistribution Distribution
	// ServiceCV is the coefficient of variation (standard deviation ÷ mean) of a lognormal
	// service time. Range: (0, 10] for lognormal; 0 otherwise (deterministic has CV 0,
	// exponential CV 1).
	ServiceCV float64
	// Concurrency is how many requests execute at once (Triton's instance
	// count); more wait in the model's queue. Range: 0..MaxConcurrency
	// (65,536), 0 means 1.
	Concurrency int
	// MaxBatchSize is the model configuration's max_batch_size: 0, the model does not batch
	// and each request is one inference; above 0, a request's batch size is the first
	// dimension of its first input (a request without inputs counts 1), and, as Triton
	// counts, the model's inference_count and nv_inference_count grow by the batch size while
	// its success count, execution_count and nv_inference_request_success grow by one. A
	// batch size outside [1, MaxBatchSize] fails INVALID_ARGUMENT with Triton's text. Range:
	// >= 0.
	MaxBatchSize int
	// Fault injected into this model from the start.
	Fault Fault
}

func (m Model) version() string {
	if m.Version == "" {
		return "1"
	}
	return m.Version
}

func (m Model) concurrency() int {
	return max(1, m.Concurrency)
}

// batchSize is the inferences req carries (Model.MaxBatchSize), or Triton's INVALID_ARGUMENT
// for a batch size the model does not take.
func (m Model) batchSize(req *inference.ModelInferRequest) (uint64, error) {
	if m.MaxBatchSize == 0 || len(req.GetInputs()) == 0 {
		return 1, nil
	}
	shape := req.GetInputs()[0].GetShape()
	if len(shape) == 0 || shape[0] < 1 || shape[0] > int64(m.MaxBatchSize) {
		return 0, status.Errorf(codes.InvalidArgument, "inference request batch-size must be <= %d for '%s'", m.MaxBatchSize, m.Name)
	}
	return uint64(shape[0]), nil
}

// Distribution is the shape of a model's service-time distribution. Draws come from a
// per-model generator seeded by Config.Seed and the model's position in Config.Models, so a
// run's sequence of service times is the same every time (requests draw in the order they
// start executing).
type Distribution string

const (
	// Deterministic: every request executes for exactly ServiceTime (an M/D/c queue under
	// Poisson arrivals).
	Deterministic Distribution = "deterministic"
	// Exponential: execution times are exponential with mean ServiceTime (CV 1; M/M/c).
	Exponential Distribution = "exponential"
	// Lognormal: execution times are lognormal with mean ServiceTime and coefficient of
	// variation ServiceCV: σ² = ln(1 + CV²), m = ln(ServiceTime) − σ²/2, time = exp(m + σ·Z)
	// with Z standard normal (so E[time] = ServiceTime and sd/mean = CV).
	Lognormal Distribution = "lognormal"
)

// MaxServiceTime bounds Model.ServiceTime, Fault.ExtraServiceTime and every service-time
// draw: the fake models services, not stuck ones (HangLoad is that), and a request's time,
// ServiceTime + ExtraServiceTime, stays far from time.Duration's range (about 292 years),
// past which a sum wrapped negative and answered at once.
const MaxServiceTime = time.Hour

// MaxLoadTime bounds Model.LoadTime: 1 h, the residency catalog's own bound on a model's load
// time (plan.MaxLoadTime), so every load the controller can plan for can be faked, as
// MaxServiceTime bounds a request. A load that never ends is Fault.HangLoad, not a long
// LoadTime (100000h was accepted and held the model LOADING for eleven years).
const MaxLoadTime = plan.MaxLoadTime

// MaxConcurrency bounds Model.Concurrency, the requests one model executes at once (Triton's
// instance count): 65,536 (1<<16). Triton runs one execution per model instance, and a GPU
// holds a handful of instances of one model; 65,536 is far past any instance count and past
// the requests a test or a capacity run keeps in flight (capacity's --max-in-flight defaults
// to 4,096), so a larger value only behaves as no queue at all, which 65,536 already does:
// such a value (99999999999 was accepted) is a typo, not a model.
const MaxConcurrency = 1 << 16

// MaxMemoryBytes bounds Model.MemoryBytes: 1 PiB, plan.MaxMemoryBytes, the residency
// controller's bound on every byte count (a sum of such models past int64 is refused, not
// wrapped).
const MaxMemoryBytes = plan.MaxMemoryBytes

// MaxServiceCV bounds Model.ServiceCV: beyond 10 the lognormal's mean is dominated by draws so
// rare that a test never sees them.
const MaxServiceCV = 10

// Config describes the fake server: its mode, its device and its repository. ParseConfig
// reads one from YAML.
type Config struct {
	// ModelControlMode is explicit or none (Triton's default).
	ModelControlMode Mode
	// DeviceMemoryBytes is the GPU's capacity; a load that does not fit
	// fails out of memory. Range: > 0.
	DeviceMemoryBytes int64
	// DeviceID is the GPU id in memory_usage. Range: >= 0.
	DeviceID int64
	// GPUUUID labels the nv_gpu_memory_* metrics; "" means a fixed fake UUID.
	GPUUUID string
	// Models is the repository.
	Models []Model
	// StartupModels load, instantly, when the server starts and restarts
	// (Triton's --load-model). In ModeNone every model does. Each must be
	// in Models, and together they must fit the device.
	StartupModels []string
	// Seed seeds the service-time draws of every model (see Distribution); any value.
	Seed uint64
	// Clock drives load, service and queue time; nil means real time.
	Clock triton.Clock
}

// DefaultConfig is an explicit-mode server with a 10 GiB device and an
// empty repository.
func DefaultConfig() Config {
	return Config{ModelControlMode: ModeExplicit, DeviceMemoryBytes: 10 << 30}
}

// Validate returns every violation, each naming the field and its range.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.ModelControlMode != ModeExplicit && c.ModelControlMode != ModeNone {
		bad("modelControlMode is %q, want %q or %q", c.ModelControlMode, ModeExplicit, ModeNone)
	}
	if c.DeviceMemoryBytes <= 0 {
		bad("deviceMemoryBytes is %d, want > 0", c.DeviceMemoryBytes)
	}
	if c.DeviceID < 0 {
		bad("deviceID is %d, want >= 0", c.DeviceID)
	}
	seen := map[string]bool{}
	for i, m := range c.Models {
		field := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			bad("%s.name is empty, want a model name", field)
		} else if seen[m.Name] {
			bad("%s.name %q is repeated, want unique names", field, m.Name)
		}
		seen[m.Name] = true
		if m.MemoryBytes < 0 || m.MemoryBytes > MaxMemoryBytes {
			bad("%s.memoryBytes is %d, want >= 0 and <= %d (1 PiB)", field, m.MemoryBytes, MaxMemoryBytes)
		}
		if m.LoadTime < 0 || m.LoadTime > MaxLoadTime {
			bad("%s.loadTime is %v, want >= 0 and <= %v", field, m.LoadTime, MaxLoadTime)
		}
		if m.ServiceTime < 0 || m.ServiceTime > MaxServiceTime {
			bad("%s.serviceTime is %v, want >= 0 and <= %v", field, m.ServiceTime, MaxServiceTime)
		}
		switch m.ServiceDistribution {
		case "", Deterministic, Exponential:
			if m.ServiceCV != 0 {
				bad("%s.serviceCV is %v, want 0 unless serviceDistribution is %q", field, m.ServiceCV, Lognormal)
			}
		case Lognormal:
			if !(m.ServiceCV > 0 && m.ServiceCV <= MaxServiceCV) {
				bad("%s.serviceCV is %v, want (0, %d] for a lognormal service time", field, m.ServiceCV, MaxServiceCV)
			}
		default:
			bad("%s.serviceDistribution is %q, want %q, %q or %q", field, m.ServiceDistribution, Deterministic, Exponential, Lognormal)
		}
		if m.MaxBatchSize < 0 {
			bad("%s.maxBatchSize is %d, want >= 0 (0: the model does not batch)", field, m.MaxBatchSize)
		}
		if m.Concurrency < 0 || m.Concurrency > MaxConcurrency {
			bad("%s.concurrency is %d, want 0..%d (0 means 1)", field, m.Concurrency, MaxConcurrency)
		}
		if err := m.Fault.validate(m.MemoryBytes); err != nil {
			bad("%s.fault.%v", field, err)
		}
	}
	for i, name := range c.StartupModels {
		if !seen[name] {
			bad("startupModels[%d] is %q, want a name listed in models", i, name)
		}
	}
	// The sum of the startup models in range (the others are refused above); past int64 it
	// is not wrapped (two of 2^62 bytes had summed to -2^63 and fit a 1-byte device).
	var startup int64
	overflow := false
	for _, m := range c.startupModels() {
		if m.MemoryBytes < 0 || m.MemoryBytes > MaxMemoryBytes {
			continue
		}
		if m.MemoryBytes > math.MaxInt64-startup {
			overflow = true
			break
		}
		startup += m.MemoryBytes
	}
	switch {
	case c.DeviceMemoryBytes <= 0:
	case overflow:
		bad("startup models need more than %d bytes (int64), more than deviceMemoryBytes %d", int64(math.MaxInt64), c.DeviceMemoryBytes)
	case startup > c.DeviceMemoryBytes:
		bad("startup models need %d bytes, more than deviceMemoryBytes %d", startup, c.DeviceMemoryBytes)
	}
	return errors.Join(errs...)
}

func (f Fault) validate(memoryBytes int64) error {
	switch {
	case f.FailLoadCount < 0:
		return fmt.Errorf("failLoadCount is %d, want >= 0", f.FailLoadCount)
	case f.UnloadLeakBytes < 0 || f.UnloadLeakBytes > max(memoryBytes, 0):
		return fmt.Errorf("unloadLeakBytes is %d, want 0..%d (memoryBytes)", f.UnloadLeakBytes, memoryBytes)
	case f.ExtraServiceTime < 0 || f.ExtraServiceTime > MaxServiceTime:
		return fmt.Errorf("extraServiceTime is %v, want >= 0 and <= %v", f.ExtraServiceTime, MaxServiceTime)
	}
	return nil
}

// startupModels returns the models loaded at start, in repository order.
func (c Config) startupModels() []Model {
	want := map[string]bool{}
	for _, n := range c.StartupModels {
		want[n] = true
	}
	var out []Model
	for _, m := range c.Models {
		if c.ModelControlMode == ModeNone || want[m.Name] {
			out = append(out, m)
		}
	}
	return out
}
