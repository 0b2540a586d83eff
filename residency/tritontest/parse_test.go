package tritontest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/tritontest"
)

func TestParseConfig(t *testing.T) {
	got, err := tritontest.ParseConfig([]byte(`
deviceMemoryBytes: 1000
gpuUUID: MIG-x
models:
  - name: a
    memoryBytes: 400
    loadTime: 1.5s
    serviceTime: 20ms
    concurrency: 2
    fault: {extraServiceTime: 1m, failLoad: boom, failLoadCount: 1}
  - name: b
    serviceTime: 100ms
    serviceDistribution: lognormal
    serviceCV: 0.5
startupModels: [a]
seed: 42
`))
	if err != nil {
		t.Fatal(err)
	}
	want := tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1000, GPUUUID: "MIG-x",
		Models: []tritontest.Model{{Name: "a", MemoryBytes: 400, LoadTime: 1500 * time.Millisecond, ServiceTime: 20 * time.Millisecond,
			Concurrency: 2, Fault: tritontest.Fault{ExtraServiceTime: time.Minute, FailLoad: "boom", FailLoadCount: 1}},
			{Name: "b", ServiceTime: 100 * time.Millisecond, ServiceDistribution: tritontest.Lognormal, ServiceCV: 0.5}},
		StartupModels: []string{"a"}, Seed: 42}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, give, want string
		invalid          bool // wraps ErrInvalidConfig (decoded, then failed Validate)
	}{
		{name: "duration as a number is not nanoseconds", give: "deviceMemoryBytes: 1\nmodels: [{name: a, loadTime: 5}]\n",
			want: "models[0].loadTime"},
		{name: "bad duration", give: "deviceMemoryBytes: 1\nmodels:\n- name: a\n  loadTime: banana\n",
			want: `models[0].loadTime: time: invalid duration "banana" (line 4)`},
		{name: "unknown field", give: "deviceMemoryBytez: 1\n", want: "deviceMemoryBytez: unknown field (line 1)"},
		{name: "range", give: "deviceMemoryBytes: 0\n", want: "deviceMemoryBytes is 0, want > 0", invalid: true},
		{name: "unknown distribution", give: "deviceMemoryBytes: 1\nmodels: [{name: a, serviceDistribution: gamma}]\n",
			want: `models[0].serviceDistribution is "gamma", want "deterministic", "exponential" or "lognormal"`, invalid: true},
		{name: "lognormal without cv", give: "deviceMemoryBytes: 1\nmodels: [{name: a, serviceDistribution: lognormal}]\n",
			want: "models[0].serviceCV is 0, want (0, 10] for a lognormal service time", invalid: true},
		{name: "cv without lognormal", give: "deviceMemoryBytes: 1\nmodels: [{name: a, serviceCV: 0.5}]\n",
			want: `models[0].serviceCV is 0.5, want 0 unless serviceDistribution is "lognormal"`, invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tritontest.ParseConfig([]byte(tt.give))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if got := errors.Is(err, tritontest.ErrInvalidConfig); got != tt.invalid {
				t.Errorf("errors.Is(err, ErrInvalidConfig) = %v, want %v", got, tt.invalid)
			}
		})
	}
}

// TestParseConfigNamesAsWritten: a model named on, y or no keeps its name (YAML 1.1 booleans
// are strings in YAML 1.2; the old sigs.k8s.io/yaml decoding made each of them "true" or
// "false"), in models and in startupModels alike.
func TestParseConfigNamesAsWritten(t *testing.T) {
	got, err := tritontest.ParseConfig([]byte("deviceMemoryBytes: 1000\nmodels: [{name: on, version: 1.10}, {name: y}, {name: no}]\nstartupModels: [on, no]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range got.Models {
		names = append(names, m.Name)
	}
	if diff := cmp.Diff([]string{"on", "y", "no"}, names); diff != "" {
		t.Errorf("model names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"on", "no"}, got.StartupModels); diff != "" {
		t.Errorf("startupModels (-want +got):\n%s", diff)
	}
	if got.Models[0].Version != "1.10" {
		t.Errorf("version = %q, want 1.10 as written", got.Models[0].Version)
	}
}
