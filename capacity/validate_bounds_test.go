package capacity_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/capacity"
	"github.com/inferscale/inferscale/residency/plan"
)

// TestMeasureConfigBounds: each field of MeasureConfig at the edges of its documented range.
// The edge itself is accepted and one step past it is refused with an error naming the field
// and its flag; every other field stays at its default. (Mutation testing showed that no test
// held a bound at its edge: `c.Window > MaxWindow` → `>=` lived, and so did each of the others.)
func TestMeasureConfigBounds(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*capacity.MeasureConfig)
		// want is the field's name and flag in the error; "" means accepted.
		want string
	}{
		{"window at MaxWindow (1h)", func(c *capacity.MeasureConfig) { c.Window = capacity.MaxWindow }, ""},
		{"window past MaxWindow", func(c *capacity.MeasureConfig) { c.Window = capacity.MaxWindow + time.Nanosecond }, "window (--window)"},
		{"window 1ns", func(c *capacity.MeasureConfig) { c.Window = time.Nanosecond }, ""},
		{"window 0", func(c *capacity.MeasureConfig) { c.Window = 0 }, "window (--window)"},
		{"minWindowRequests 1", func(c *capacity.MeasureConfig) { c.MinWindowRequests = 1 }, ""},
		{"minWindowRequests 0", func(c *capacity.MeasureConfig) { c.MinWindowRequests = 0 }, "minWindowRequests (--min-window-requests)"},
		{"minWindowRequests at MaxWindowRequests", func(c *capacity.MeasureConfig) { c.MinWindowRequests = capacity.MaxWindowRequests }, ""},
		{"minWindowRequests past MaxWindowRequests", func(c *capacity.MeasureConfig) { c.MinWindowRequests = capacity.MaxWindowRequests + 1 }, "minWindowRequests (--min-window-requests)"},
		// One warm-up window, then StableWindows (3) to agree: 4 is the least.
		{"maxWindows 4", func(c *capacity.MeasureConfig) { c.MaxWindows = 4 }, ""},
		{"maxWindows 3", func(c *capacity.MeasureConfig) { c.MaxWindows = 3 }, "maxWindows (--max-windows)"},
		{"maxWindows 1000", func(c *capacity.MeasureConfig) { c.MaxWindows = 1000 }, ""},
		{"maxWindows 1001", func(c *capacity.MeasureConfig) { c.MaxWindows = 1001 }, "maxWindows (--max-windows)"},
		{"stability 1", func(c *capacity.MeasureConfig) { c.Stability = 1 }, ""},
		{"stability just above 1", func(c *capacity.MeasureConfig) { c.Stability = 1.0000001 }, "stability (--stability)"},
		{"stability 0", func(c *capacity.MeasureConfig) { c.Stability = 0 }, "stability (--stability)"},
		{"maxInFlight 1", func(c *capacity.MeasureConfig) { c.MaxInFlight = 1 }, ""},
		{"maxInFlight 0", func(c *capacity.MeasureConfig) { c.MaxInFlight = 0 }, "maxInFlight (--max-in-flight)"},
		{"maxInFlight 2^20", func(c *capacity.MeasureConfig) { c.MaxInFlight = 1 << 20 }, ""},
		{"maxInFlight 2^20+1", func(c *capacity.MeasureConfig) { c.MaxInFlight = 1<<20 + 1 }, "maxInFlight (--max-in-flight)"},
		{"maxLag 0 (a tenth of the SLO latency)", func(c *capacity.MeasureConfig) { c.MaxLag = 0 }, ""},
		{"maxLag -1ns", func(c *capacity.MeasureConfig) { c.MaxLag = -time.Nanosecond }, "maxLag (--max-lag)"},
		{"requestTimeout at MaxRequestTimeout", func(c *capacity.MeasureConfig) { c.RequestTimeout = capacity.MaxRequestTimeout }, ""},
		{"requestTimeout past MaxRequestTimeout", func(c *capacity.MeasureConfig) { c.RequestTimeout = capacity.MaxRequestTimeout + time.Nanosecond }, "requestTimeout (--request-timeout)"},
		{"requestTimeout equal to the SLO latency", func(c *capacity.MeasureConfig) { c.RequestTimeout = c.SLO.Latency }, ""},
		{"requestTimeout 1ns under the SLO latency", func(c *capacity.MeasureConfig) { c.RequestTimeout = c.SLO.Latency - time.Nanosecond }, "requestTimeout (--request-timeout)"},
		{"slo latency at MaxRequestTimeout, timeout too", func(c *capacity.MeasureConfig) {
			c.SLO.Latency, c.RequestTimeout = capacity.MaxRequestTimeout, capacity.MaxRequestTimeout
		}, ""},
		{"slo latency past MaxRequestTimeout", func(c *capacity.MeasureConfig) { c.SLO.Latency = capacity.MaxRequestTimeout + time.Nanosecond }, "slo.latency (--slo-latency)"},
		{"slo latency 0", func(c *capacity.MeasureConfig) { c.SLO.Latency = 0 }, "slo.latency (--slo-latency)"},
		{"slo quantile 0", func(c *capacity.MeasureConfig) { c.SLO.Quantile = 0 }, "slo.quantile (--slo-quantile)"},
		{"slo quantile 1", func(c *capacity.MeasureConfig) { c.SLO.Quantile = 1 }, "slo.quantile (--slo-quantile)"},
		{"slo quantile 0.9999", func(c *capacity.MeasureConfig) { c.SLO.Quantile = 0.9999 }, ""},
		{"maxErrorRate 0", func(c *capacity.MeasureConfig) { c.SLO.MaxErrorRate = 0 }, ""},
		{"maxErrorRate 1", func(c *capacity.MeasureConfig) { c.SLO.MaxErrorRate = 1 }, "slo.maxErrorRate (--max-error-rate)"},
		{"maxErrorRate -0.01", func(c *capacity.MeasureConfig) { c.SLO.MaxErrorRate = -0.01 }, "slo.maxErrorRate (--max-error-rate)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := capacity.DefaultMeasureConfig()
			tt.set(&c)
			checkOneViolation(t, c.Validate(), tt.want)
		})
	}
}

// checkOneViolation: want "" is no error; otherwise err wraps ErrInvalidConfig and is one
// violation (one line) naming want, the field and its flag.
func checkOneViolation(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("Validate() = %v, want nil", err)
		}
		return
	}
	if err == nil || !errors.Is(err, capacity.ErrInvalidConfig) {
		t.Fatalf("Validate() = %v, want an ErrInvalidConfig naming %s", err, want)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 1 || !strings.Contains(lines[0], want+" ") {
		t.Errorf("Validate() = %q, want one violation naming %s", err, want)
	}
}

// TestConfigBounds: Config.Validate's own ranges at their edges, as TestMeasureConfigBounds
// does for the measurement's: the edge accepted, one step past refused naming the flag.
func TestConfigBounds(t *testing.T) {
	valid := func() capacity.Config {
		c := capacity.DefaultConfig()
		c.Target, c.Model, c.Profile = "localhost:8001", "m", "1g.10gb"
		return c
	}
	openAI := func(c *capacity.Config) {
		c.Protocol, c.Target = capacity.ProtocolOpenAI, "http://localhost:8000"
	}
	for _, tt := range []struct {
		name string
		set  func(*capacity.Config)
		want string // the flag named in the one error; "" means accepted
	}{
		{"budget 0 (NVML or the profile table)", func(c *capacity.Config) { c.BudgetBytes = 0 }, ""},
		{"budget -1", func(c *capacity.Config) { c.BudgetBytes = -1 }, "--budget-bytes"},
		{"budget at the bound", func(c *capacity.Config) { c.BudgetBytes = plan.MaxMemoryBytes }, ""},
		{"budget past the bound", func(c *capacity.Config) { c.BudgetBytes = plan.MaxMemoryBytes + 1 }, "--budget-bytes"},
		{"reserve 0", func(c *capacity.Config) { c.ReserveBytes = 0 }, ""},
		{"reserve -1", func(c *capacity.Config) { c.ReserveBytes = -1 }, "--reserve-bytes"},
		{"reserve at the bound", func(c *capacity.Config) { c.ReserveBytes = plan.MaxMemoryBytes }, ""},
		{"reserve past the bound", func(c *capacity.Config) { c.ReserveBytes = plan.MaxMemoryBytes + 1 }, "--reserve-bytes"},
		{"connect timeout at the bound (5m)", func(c *capacity.Config) { c.ConnectTimeout = capacity.MaxConnectTimeout }, ""},
		{"connect timeout past the bound", func(c *capacity.Config) { c.ConnectTimeout = capacity.MaxConnectTimeout + time.Nanosecond }, "--connect-timeout"},
		{"connect timeout 0", func(c *capacity.Config) { c.ConnectTimeout = 0 }, "--connect-timeout"},
		{"prompt tokens 1", func(c *capacity.Config) { openAI(c); c.OpenAI.PromptTokens = 1 }, ""},
		{"prompt tokens 0", func(c *capacity.Config) { openAI(c); c.OpenAI.PromptTokens = 0 }, "--prompt-tokens"},
		{"prompt tokens at the bound", func(c *capacity.Config) { openAI(c); c.OpenAI.PromptTokens = capacity.MaxOpenAITokens }, ""},
		{"prompt tokens past the bound", func(c *capacity.Config) { openAI(c); c.OpenAI.PromptTokens = capacity.MaxOpenAITokens + 1 }, "--prompt-tokens"},
		{"max tokens 1", func(c *capacity.Config) { openAI(c); c.OpenAI.MaxTokens = 1 }, ""},
		{"max tokens 0", func(c *capacity.Config) { openAI(c); c.OpenAI.MaxTokens = 0 }, "--max-tokens"},
		{"max tokens at the bound", func(c *capacity.Config) { openAI(c); c.OpenAI.MaxTokens = capacity.MaxOpenAITokens }, ""},
		{"max tokens past the bound", func(c *capacity.Config) { openAI(c); c.OpenAI.MaxTokens = capacity.MaxOpenAITokens + 1 }, "--max-tokens"},
		{"openai target without a host", func(c *capacity.Config) { openAI(c); c.Target = "http://" }, "--target"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.set(&c)
			checkOneViolation(t, c.Validate(), tt.want)
		})
	}
}
