package tritontest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferscale/inferscale/residency/strictyaml"
)

// fileFault is Fault as written in YAML, durations as "1.5s".
type fileFault struct {
	FailLoad         string          `json:"failLoad,omitempty"`
	FailLoadCount    int             `json:"failLoadCount,omitempty"`
	HangLoad         bool            `json:"hangLoad,omitempty"`
	UnloadLeakBytes  int64           `json:"unloadLeakBytes,omitempty"`
	ExtraServiceTime metav1.Duration `json:"extraServiceTime,omitempty"`
}

// fileModel is Model as written in YAML.
type fileModel struct {
	Name        string          `json:"name"`
	Version     string          `json:"version,omitempty"`
	MemoryBytes int64           `json:"memoryBytes"`
	LoadTime    metav1.Duration `json:"loadTime,omitempty"`
	ServiceTime metav1.Duration `json:"serviceTime,omitempty"`
	// ServiceDistribution and ServiceCV: see Model.
	ServiceDistribution Distribution `json:"serviceDistribution,omitempty"`
	ServiceCV           float64      `json:"serviceCV,omitempty"`
	Concurrency         int          `json:"concurrency,omitempty"`
	MaxBatchSize        int          `json:"maxBatchSize,omitempty"`
	Fault               fileFault    `json:"fault,omitempty"`
}

// fileConfig is Config as written in YAML (cmd/tritonfake's --config file).
type fileConfig struct {
	ModelControlMode  Mode        `json:"modelControlMode"`
	DeviceMemoryBytes int64       `json:"deviceMemoryBytes"`
	DeviceID          int64       `json:"deviceID,omitempty"`
	GPUUUID           string      `json:"gpuUUID,omitempty"`
	Models            []fileModel `json:"models"`
	StartupModels     []string    `json:"startupModels,omitempty"`
	Seed              uint64      `json:"seed,omitempty"`
}

// ParseConfig decodes a YAML Config — field names as in cmd/tritonfake/example.yaml
// (modelControlMode, deviceMemoryBytes, models[].loadTime, …), durations as strings ("1.5s"),
// modelControlMode explicit when left out — and validates it. Unknown and duplicate fields are
// errors; every violation names its field (and, for one that does not decode, its line:
// `models[2].loadTime: time: invalid duration "banana" (line 12)`).
func ParseConfig(data []byte) (Config, error) {
	var fc fileConfig
	if err := strictyaml.Unmarshal(data, &fc); err != nil {
		return Config{}, err
	}
	cfg := Config{
		ModelControlMode:  fc.ModelControlMode,
		DeviceMemoryBytes: fc.DeviceMemoryBytes,
		DeviceID:          fc.DeviceID,
		GPUUUID:           fc.GPUUUID,
		StartupModels:     fc.StartupModels,
		Seed:              fc.Seed,
	}
	if cfg.ModelControlMode == "" {
		cfg.ModelControlMode = ModeExplicit
	}
	for _, m := range fc.Models {
		cfg.Models = append(cfg.Models, Model{
			Name: m.Name, Version: m.Version, MemoryBytes: m.MemoryBytes,
			LoadTime: m.LoadTime.Duration, ServiceTime: m.ServiceTime.Duration, Concurrency: m.Concurrency, MaxBatchSize: m.MaxBatchSize,
			ServiceDistribution: m.ServiceDistribution, ServiceCV: m.ServiceCV,
			Fault: Fault{
				FailLoad: m.Fault.FailLoad, FailLoadCount: m.Fault.FailLoadCount, HangLoad: m.Fault.HangLoad,
				UnloadLeakBytes: m.Fault.UnloadLeakBytes, ExtraServiceTime: m.Fault.ExtraServiceTime.Duration,
			},
		})
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
