package tritontest_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestValidateBounds: memoryBytes is at most 1 PiB (plan.MaxMemoryBytes) and the startup
// models' sum is not wrapped: two startup models of 2^62 bytes summed to -2^63, fit a 1-byte
// device and exported nv_gpu_memory_used_bytes -9.2e18.
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
			name: "at the bounds",
			give: tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1 << 50,
				Models:        []tritontest.Model{{Name: "a", MemoryBytes: 1 << 50}},
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
