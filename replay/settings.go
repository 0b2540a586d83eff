package replay

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Setting-set names (summary.json "settingSet").
const (
	SetPublished = "published"
	SetTuned     = "tuned"
	SetHindsight = "hindsight"
	SetBound     = "bound"
	SetOptimum   = "optimum"
)

// settingsYAML is replay/settings.yaml: the published and tuned settings.
//
//go:embed settings.yaml
var settingsYAML []byte

// SettingEntry is one family's setting in one set.
type SettingEntry struct {
	Value  float64 `yaml:"value"`
	Source string  `yaml:"source"`
}

// Settings holds the two named setting sets, family → entry.
type Settings struct {
	Published map[string]SettingEntry `yaml:"published"`
	Tuned     map[string]SettingEntry `yaml:"tuned"`
}

// Set returns the named set (SetPublished or SetTuned).
func (s Settings) Set(name string) map[string]SettingEntry {
	if name == SetTuned {
		return s.Tuned
	}
	return s.Published
}

// DefaultSettings parses the embedded replay/settings.yaml.
func DefaultSettings() (Settings, error) { return ParseSettings(settingsYAML) }

// ParseSettings reads a settings file: both sets, every family of
// FamilySpecs, each value inside the family's accepted range.
func ParseSettings(data []byte) (Settings, error) {
	if err := checkSettingsDocument(data); err != nil {
		return Settings{}, err
	}
	var s Settings
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return Settings{}, fmt.Errorf("settings: %w", err)
	}
	var errs []error
	for _, set := range []struct {
		name string
		m    map[string]SettingEntry
	}{{SetPublished, s.Published}, {SetTuned, s.Tuned}} {
		for f := range set.m {
			if _, ok := familySpec(f); !ok {
				errs = append(errs, fmt.Errorf("settings %s.%s: unknown family; want one of %s", set.name, f, strings.Join(Families(), ",")))
			}
		}
		for _, fs := range FamilySpecs() {
			e, ok := set.m[fs.Family]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("settings %s.%s: missing", set.name, fs.Family))
			case math.IsNaN(e.Value) || e.Value < fs.Min || e.Value > fs.Max:
				errs = append(errs, fmt.Errorf("settings %s.%s.value = %g: want %s in [%g, %g]", set.name, fs.Family, e.Value, fs.Knob, fs.Min, fs.Max))
			}
		}
	}
	return s, errors.Join(errs...)
}

// checkSettingsDocument refuses what the decoder would read without a word:
// an empty file (it said "settings: EOF"), a second YAML document (it was
// ignored) and a null value (value: null read as 0), each naming the line
// and, for a null, the key.
func checkSettingsDocument(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		return errors.New("settings: the file is empty; want the published and tuned sets, as in replay/settings.yaml")
	case err != nil:
		return fmt.Errorf("settings: %w", err)
	}
	if len(root.Content) == 0 || isEmptyNode(root.Content[0]) {
		return errors.New("settings: the file has no settings; want the published and tuned sets, as in replay/settings.yaml")
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return fmt.Errorf("settings: %w", err)
	case len(next.Content) > 0 && !isEmptyNode(next.Content[0]):
		return fmt.Errorf("settings: a second YAML document at line %d; the file must hold exactly one", next.Content[0].Line)
	}
	var errs []error
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
					errs = append(errs, fmt.Errorf("settings %s: null (line %d); give a value", p, v.Line))
					continue
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, v := range n.Content {
				walk(v, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(root.Content[0], "")
	return errors.Join(errs...)
}

// isEmptyNode reports whether n is an empty document's content (a null with
// no text).
func isEmptyNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == ""
}

// PolicyEnv is what a family needs from the trace and the pool to build its
// controller: the pool, inferscale's probed μ, and the trace's observed
// peak demand for static provisioning.
type PolicyEnv struct {
	Pool PoolConfig
	// MuRPS is the probed replicaThroughput (ProbeThroughput).
	MuRPS float64
	// PeakReplicas is the largest one-minute mean demand of the trace,
	// replicas: max over minutes of work arriving ÷ (60 s × slots).
	PeakReplicas float64
}

// FamilySpec is one policy family's single, scale-free setting.
type FamilySpec struct {
	Family string
	// Knob says what the value is.
	Knob string
	// Min and Max bound accepted values; Grid is what tune and the
	// hindsight rows sweep.
	Min, Max float64
	Grid     []float64
	// Policy builds the family's controller at value v.
	Policy func(v float64, e PolicyEnv) Policy
}

// FamilySpecs lists every family, in report order. Everything but the one
// value is fixed at the system's documented default (see settings.yaml).
func FamilySpecs() []FamilySpec {
	return []FamilySpec{
		{Family: FamilyInferscale, Knob: "targetUtilization ρ", Min: 0.05, Max: 1,
			Grid:   []float64{0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0},
			Policy: func(v float64, e PolicyEnv) Policy { return InferscalePolicy(e.MuRPS, v, e.Pool) }},
		{Family: FamilyHPAGPU, Knob: "target GPU utilisation", Min: 0.05, Max: 1,
			Grid:   []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9},
			Policy: func(v float64, e PolicyEnv) Policy { return HPAGPUPolicy(v, e.Pool) }},
		{Family: FamilyKEDAQueue, Knob: "threshold, waiting requests per replica", Min: 0.01, Max: 1e6,
			Grid:   []float64{0.5, 1, 2, 5, 10, 20, 50},
			Policy: func(v float64, e PolicyEnv) Policy { return KEDAQueuePolicy(v, 1, false, e.Pool) }},
		{Family: FamilyKnative, Knob: "target utilisation of containerConcurrency", Min: 0.05, Max: 1,
			Grid:   []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0},
			Policy: func(v float64, e PolicyEnv) Policy { return KnativePolicy(v, 0, 0, e.Pool) }},
		{Family: FamilyStatic, Knob: "headroom × observed peak", Min: 0.1, Max: 100,
			Grid: []float64{1, 1.25, 1.5, 2, 2.5, 3, 4},
			Policy: func(v float64, e PolicyEnv) Policy {
				n := max(1, int(math.Ceil(v*e.PeakReplicas-1e-9)))
				// The pool holds what its bounds allow (the simulators clamp every
				// count to them); the label says so rather than a count never run.
				held := max(e.Pool.MinReplicas, min(e.Pool.MaxReplicas, n))
				p := StaticPolicy(held)
				p.Setting = fmt.Sprintf("×%g peak (%.3g) = %d replicas", v, e.PeakReplicas, n)
				switch {
				case held < n:
					p.Setting = fmt.Sprintf("×%g peak (%.3g) = %d, held at max replicas %d", v, e.PeakReplicas, n, held)
				case held > n:
					p.Setting = fmt.Sprintf("×%g peak (%.3g) = %d, held at min replicas %d", v, e.PeakReplicas, n, held)
				}
				return p
			}},
	}
}

func familySpec(f string) (FamilySpec, bool) {
	i := slices.IndexFunc(FamilySpecs(), func(s FamilySpec) bool { return s.Family == f })
	if i < 0 {
		return FamilySpec{}, false
	}
	return FamilySpecs()[i], true
}

// peakReplicas is the largest one-minute mean demand of per-second work,
// replicas.
func peakReplicas(workS []float64, slots int) float64 {
	var best float64
	for m := 0; m*60 < len(workS); m++ {
		var w float64
		for _, v := range workS[m*60 : min(len(workS), (m+1)*60)] {
			w += v
		}
		best = math.Max(best, w/60/float64(slots))
	}
	return best
}
