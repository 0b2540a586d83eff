package tritontest_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/tritontest"
)

// huge is the largest whole number of hours a time.Duration holds: two of them summed wrap
// negative.
const huge = 2562047 * time.Hour

// TestValidateBounds: memoryBytes is at most 1 PiB (plan.MaxMemoryBytes) and the startup
// models' sum is not wrapped: two startup models of 2^62 bytes summed to -2^63, fit a 1-byte
// device and exported nv_gpu_memory_used_bytes -9.2e18. serviceTime and extraServiceTime are at
// most MaxServiceTime (1h, the cap of a random draw): both at 2562047h summed negative and the
// requests were answered at once. loadTime is at most MaxLoadTime (1h) and concurrency at most
// MaxConcurrency (65,536): 100000h and 99999999999 were accepted.
func TestValidateBounds(t *testing.T) {
	many := make([]tritontest.Model, 8192) // 8192 × 2^50 = 2^63: past int64
	for i := range many {
		many[i] = tritontest.Model{Name: fmt.Sprint("m", i), MemoryBytes: 1 << 50}
	}
	tests := []struct {
		name string
		give tritontest.Config
		want []string
	}{
		{
			name: "memoryBytes past 1 PiB",
			give: tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1,
				Models: []tritontest.Model{{Name: "a", MemoryBytes: 1 << 62}, {Name: "b", MemoryBytes: 1 << 62}}, StartupModels: []string{"a", "b"}},
			want: []string{
				"models[0].memoryBytes is 4611686018427387904, want >= 0 and <= 1125899906842624 (1 PiB)",
				"models[1].memoryBytes is 4611686018427387904, want >= 0 and <= 1125899906842624 (1 PiB)",
			},
		},
		{
			name: "startup sum over the device",
			give: tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1,
				Models: []tritontest.Model{{Name: "a", MemoryBytes: 1 << 50}, {Name: "b", MemoryBytes: 1 << 50}}, StartupModels: []string{"a", "b"}},
			want: []string{"startup models need 2251799813685248 bytes, more than deviceMemoryBytes 1"},
		},
		{
			name: "startup sum past int64",
			give: tritontest.Config{ModelControlMode: tritontest.ModeNone, DeviceMemoryBytes: math.MaxInt64, Models: many},
			want: []string{"startup models need more than 9223372036854775807 bytes (int64), more than deviceMemoryBytes 9223372036854775807"},
		},
		{
			name: "service times past an hour",
			give: tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1,
				Models: []tritontest.Model{
					{Name: "a", ServiceTime: huge, Fault: tritontest.Fault{ExtraServiceTime: huge}},
					{Name: "b", ServiceTime: time.Hour + 1, Fault: tritontest.Fault{ExtraServiceTime: -1}},
				}},
			want: []string{
				"models[0].serviceTime is 2562047h0m0s, want >= 0 and <= 1h0m0s",
				"models[0].fault.extraServiceTime is 2562047h0m0s, want >= 0 and <= 1h0m0s",
				"models[1].serviceTime is 1h0m0.000000001s, want >= 0 and <= 1h0m0s",
				"models[1].fault.extraServiceTime is -1ns, want >= 0 and <= 1h0m0s",
			},
		},
		// Accepted before while serviceTime was capped: a load of 100,000 h (11 years) and
		// 99,999,999,999 requests executing at once.
		{
			name: "load time and concurrency past their bounds",
			give: tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1,
				Models: []tritontest.Model{
					{Name: "a", LoadTime: 100000 * time.Hour, Concurrency: 99999999999},
					{Name: "b", LoadTime: time.Hour + 1, Concurrency: 1<<16 + 1},
					{Name: "c", LoadTime: -1, Concurrency: -1},
				}},
			want: []string{
				"models[0].loadTime is 100000h0m0s, want >= 0 and <= 1h0m0s",
				"models[0].concurrency is 99999999999, want 0..65536 (0 means 1)",
				"models[1].loadTime is 1h0m0.000000001s, want >= 0 and <= 1h0m0s",
				"models[1].concurrency is 65537, want 0..65536 (0 means 1)",
				"models[2].loadTime is -1ns, want >= 0 and <= 1h0m0s",
				"models[2].concurrency is -1, want 0..65536 (0 means 1)",
			},
		},
		{
			name: "at the bounds",
			give: tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1 << 50,
				Models: []tritontest.Model{{Name: "a", MemoryBytes: 1 << 50, ServiceTime: time.Hour, LoadTime: time.Hour, Concurrency: 1 << 16,
					Fault: tritontest.Fault{ExtraServiceTime: time.Hour}}},
				StartupModels: []string{"a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tritontest.ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want ErrInvalidConfig", err)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.want) {
				t.Errorf("Validate() gives %d violations, want %d:\n%v", n, len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestSetFaultBoundsExtraServiceTime: a fault set at run time is held to the same range.
func TestSetFaultBoundsExtraServiceTime(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "a", MemoryBytes: gib, ServiceTime: time.Hour}}, "a"))
	err := f.srv.SetFault("a", tritontest.Fault{ExtraServiceTime: huge})
	if !errors.Is(err, tritontest.ErrInvalidConfig) || !strings.Contains(err.Error(), "fault.extraServiceTime is 2562047h0m0s, want >= 0 and <= 1h0m0s") {
		t.Errorf("SetFault(extraServiceTime 2562047h) = %v, want ErrInvalidConfig naming the field and range", err)
	}
}

// TestLongestServiceTime: a request of the longest service time with the longest extra takes
// both, two hours, and not a nanosecond less.
func TestLongestServiceTime(t *testing.T) {
	f := start(t, explicit([]tritontest.Model{{Name: "a", MemoryBytes: gib, ServiceTime: time.Hour,
		Fault: tritontest.Fault{ExtraServiceTime: time.Hour}}}, "a"))
	done := f.inferAsync("a")
	if err := f.clock.BlockUntil(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2*time.Hour - 1)
	select {
	case err := <-done:
		t.Fatalf("answered (%v) before 2h", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.clock.Advance(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, f.srv.MetricsURL())["nv_inference_compute_infer_duration_us{model=a,version=1}"]; got != 7.2e9 {
		t.Errorf("compute time %v µs, want 7.2e9 (2h)", got)
	}
}
