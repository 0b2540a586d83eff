package replay

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// TuneTrace is one trace of the shared set tune sweeps, with the pool
// options its documented run uses (docs/replay.md).
type TuneTrace struct {
	Name string
	// Path is relative to the traces root; Model filters a multi-model
	// file; Slots (when > 0) and ColdStartFile override the pool.
	Path, Model, ColdStartFile string
	Slots                      int
}

// SharedTraces is the shared set in ../shared/traces that tune sweeps:
// every trace with requests.
func SharedTraces() []TuneTrace {
	return []TuneTrace{
		{Name: "azure-llm-code", Path: "azure-llm-2023/AzureLLMInferenceTrace_code.csv"},
		{Name: "azure-llm-conv", Path: "azure-llm-2023/AzureLLMInferenceTrace_conv.csv"},
		{Name: "servegen-m-large", Path: "servegen-bailian-clients", Model: "m-large"},
		{Name: "servegen-m-small", Path: "servegen-bailian-clients", Model: "m-small"},
		{Name: "servegen-mm-image", Path: "servegen-bailian-clients", Model: "mm-image"},
		{Name: "gentd26", Path: "alibaba-gentd26-diffusion-multimodel", Slots: 1, ColdStartFile: "alibaba-gentd26-diffusion-multimodel/basemodel_update_latency_anon.csv"},
		{Name: "azure-functions", Path: "azure-functions-2019-invitro-sample"},
	}
}

// TuneResult is one family's choice.
type TuneResult struct {
	Family string
	Value  float64
	// Met is the number of traces on which Value meets the SLO, of Traces.
	Met, Traces int
	// GeoMean is the geometric mean over the traces of GPU-hours ÷ the
	// optimum (÷ the bound where no optimum meeting the SLO was found).
	GeoMean float64
	// MeanAttainment is the mean over the traces of the share of requests
	// within the SLO, in [0, 1]: the tie-break among values meeting the SLO
	// on equally many traces, fewer than all.
	MeanAttainment float64
}

// Tune sweeps each family's grid over the traces under root with base's
// pool and picks, per family, the value that meets the SLO on every trace
// at the lowest geometric mean of GPU-hours ÷ optimum; when no value meets
// it everywhere, the one meeting it on the most traces, then among those
// the one with the highest mean attainment over the traces (the closest to
// meeting it, as a hindsight row is where none meets it), then the
// cheapest. Cheapest-first among values that all miss had picked
// keda-queue's 50 waiting requests per replica, 9.89 % on the conversation
// trace: there the cheaper value served fewer requests in time.
// log receives one line per trace. The published set is returned as it
// was; the tuned set is replaced.
func Tune(root string, base RunConfig, log io.Writer) (Settings, []TuneResult, error) {
	settings := base.Settings
	if settings.Published == nil {
		s, err := DefaultSettings()
		if err != nil {
			return Settings{}, nil, err
		}
		settings = s
	}
	traces := SharedTraces()
	// ratio[family][value index][trace]
	ratio := map[string][][]float64{}
	meets := map[string][][]bool{}
	attain := map[string][][]float64{}
	for _, fs := range FamilySpecs() {
		ratio[fs.Family] = make([][]float64, len(fs.Grid))
		meets[fs.Family] = make([][]bool, len(fs.Grid))
		attain[fs.Family] = make([][]float64, len(fs.Grid))
	}
	for _, tt := range traces {
		start := time.Now()
		cfg := base
		cfg.TracePath = filepath.Join(root, tt.Path)
		if tt.Model != "" {
			cfg.Models = []string{tt.Model}
		}
		if tt.Slots > 0 {
			cfg.Pool.Slots = tt.Slots
		}
		if tt.ColdStartFile != "" {
			cfg.ColdStartFile = filepath.Join(root, tt.ColdStartFile)
		}
		cfg.Stderr = io.Discard
		pr, err := Prepare(cfg)
		if err != nil {
			return Settings{}, nil, fmt.Errorf("tune %s: %w", tt.Name, err)
		}
		c, err := Compare(pr.Pool, pr.Workloads, CompareOptions{Settings: settings, Hindsight: true})
		if err != nil {
			return Settings{}, nil, fmt.Errorf("tune %s: %w", tt.Name, err)
		}
		den, what := c.optimumGPUHours(), "optimum"
		if math.IsNaN(den) {
			den, what = c.BoundGPUHours(), "bound (no optimum meeting the SLO)"
		}
		for _, fs := range FamilySpecs() {
			for i, v := range fs.Grid {
				for _, r := range c.All {
					if r.Policy == fs.Family && r.SettingSet == SetHindsight && r.Value == v {
						ratio[fs.Family][i] = append(ratio[fs.Family][i], r.GPUHours(pr.Pool.GPUsPerReplica)/den)
						meets[fs.Family][i] = append(meets[fs.Family][i], r.MeetsSLO)
						attain[fs.Family][i] = append(attain[fs.Family][i], r.Attainment())
					}
				}
			}
		}
		fmt.Fprintf(log, "tune: %s: %d runs, optimum %.3g GPU-h, bound %.3g GPU-h, ratios ÷ %s, %.1fs\n",
			tt.Name, len(c.All)+c.OptimumRuns, c.optimumGPUHours(), c.BoundGPUHours(), what, time.Since(start).Seconds())
	}
	var out []TuneResult
	names := make([]string, len(traces))
	for i, tt := range traces {
		names[i] = tt.Name
	}
	settings.Tuned = map[string]SettingEntry{}
	for _, fs := range FamilySpecs() {
		best := pickTuned(fs.Family, fs.Grid, len(traces), meets[fs.Family], ratio[fs.Family], attain[fs.Family])
		out = append(out, best)
		src := fmt.Sprintf("go run ./cmd/replay tune over %s: grid %v; meets the SLO on %d/%d traces; geometric mean %.3g × optimum",
			strings.Join(names, ", "), fs.Grid, best.Met, best.Traces, best.GeoMean)
		if best.Met < best.Traces {
			src += fmt.Sprintf("; no grid value meets the SLO on every trace, so this is the value meeting it on the most, "+
				"then the highest mean attainment (%.2f %%), then the cheapest", 100*best.MeanAttainment)
		}
		settings.Tuned[fs.Family] = SettingEntry{Value: best.Value, Source: src}
	}
	return settings, out, nil
}

// pickTuned is Tune's choice for one family: meets[i][t], ratio[i][t] and
// attain[i][t] are grid value i's outcome on trace t (the SLO met, GPU-hours
// ÷ optimum, the share of requests within the SLO). The value meeting the
// SLO on the most of the traces wins; among those, where that is every
// trace, the lowest geometric mean of the ratios, else the highest mean
// attainment, then the lowest geometric mean; the first in grid order on a
// full tie.
func pickTuned(family string, grid []float64, traces int, meets [][]bool, ratio, attain [][]float64) TuneResult {
	best := TuneResult{Family: family, Met: -1, Traces: traces}
	for i, v := range grid {
		met := 0
		for _, m := range meets[i] {
			if m {
				met++
			}
		}
		var ls float64
		for _, r := range ratio[i] {
			ls += math.Log(r)
		}
		g := math.Exp(ls / float64(len(ratio[i])))
		var sum float64
		for _, a := range attain[i] {
			sum += a
		}
		mean := sum / float64(len(attain[i]))
		better := met > best.Met
		if met == best.Met {
			switch {
			case met < traces && mean != best.MeanAttainment:
				better = mean > best.MeanAttainment
			default:
				better = g < best.GeoMean
			}
		}
		if better {
			best = TuneResult{Family: family, Value: v, Met: met, Traces: traces, GeoMean: g, MeanAttainment: mean}
		}
	}
	return best
}

// settingsHeader is the comment block MarshalSettings writes first.
const settingsHeader = `# One setting per policy family, used unchanged on every trace.
#
# published: each system's documented default, or the value its own
#   documentation's example uses where it has none; source cites it.
# tuned: each family's one setting that meets the SLO on every shared trace
#   (../shared/traces) at the lowest geometric mean of GPU-hours ÷ optimum,
#   written by ` + "`go run ./cmd/replay tune`" + `; source says how it was chosen.
#
# What the value means per family (replay/settings.go, FamilySpecs):
#   inferscale  targetUtilization ρ of decision.Policy, an optional cap (1: none, the default; everything else at its default)
#   hpa-gpu     HPA target average GPU engine activity (0..1)
#   keda-queue  KEDA Prometheus scaler threshold on vllm:num_requests_waiting per replica
#   knative     KPA target utilisation of containerConcurrency (= slots)
#   static      headroom × the trace's observed peak demand (replicas)
`

// MarshalSettings writes a settings file ParseSettings reads back.
func MarshalSettings(s Settings) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(settingsHeader)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
