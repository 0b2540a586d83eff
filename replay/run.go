package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schollz/progressbar/v3"
)

// RunConfig is everything cmd/replay passes in.
type RunConfig struct {
	// TracePath is a trace file or folder; empty replays the embedded Azure
	// LLM code trace.
	TracePath string
	// Format is the trace format; empty detects it from the header.
	Format Format
	// Mode is "auto", "request" or "binned". auto picks binned for ServeGen
	// traces above BinnedThreshold expected requests, request otherwise.
	Mode string
	// Models keeps only these models (all when empty).
	Models []string
	// Policies are the families to compare.
	Policies []string
	// Pool is the simulated pool and SLO.
	Pool PoolConfig
	// ColdStartFile, when set, is a GenTD26 load-latency CSV whose values
	// replace Pool.ColdStart as an empirical distribution.
	ColdStartFile string
	// RateScale multiplies ServeGen rates.
	RateScale float64
	// OutDir receives table.md, timeseries.csv, report.html and
	// summary.json.
	OutDir string
	// Progress shows a progress bar on Stderr.
	Progress bool
	// Residency replays model residency on multi-model traces.
	Residency bool
	// ResidencyBudgetModels sizes the residency memory budget as this many
	// median-sized models; 0 is AutoBudgetModels.
	ResidencyBudgetModels float64
	// Settings are the published and tuned settings (DefaultSettings when
	// zero).
	Settings Settings
	// Hindsight adds the per-trace best setting of each family as a
	// labelled reference row.
	Hindsight bool
	// NoOptimum skips the offline optimum search.
	NoOptimum bool
	// Stdout receives the tables; Stderr the progress bar and file names.
	Stdout, Stderr io.Writer
}

// BinnedThreshold is the expected request count above which auto mode
// replays a ServeGen trace in binned mode.
const BinnedThreshold = 20_000_000

// DefaultRunConfig returns the defaults cmd/replay documents.
func DefaultRunConfig() RunConfig {
	return RunConfig{Mode: "auto", Policies: Families(), Pool: DefaultPoolConfig(), RateScale: 1, OutDir: "out", Residency: true, ResidencyBudgetModels: 0, Hindsight: true, Stdout: os.Stdout, Stderr: os.Stderr}
}

// Validate reports every field out of range.
func (c RunConfig) Validate() error {
	var errs []error
	if err := c.Pool.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Contains([]string{"auto", string(ModeRequest), string(ModeBinned)}, c.Mode) {
		errs = append(errs, fmt.Errorf("mode %q: want auto, request or binned", c.Mode))
	}
	if c.Format != "" && !slices.Contains(Formats(), c.Format) {
		errs = append(errs, fmt.Errorf("format %q: want one of %v (or empty to detect)", c.Format, Formats()))
	}
	if len(c.Policies) == 0 {
		errs = append(errs, fmt.Errorf("policies: want at least one of %s", strings.Join(Families(), ",")))
	}
	for _, p := range c.Policies {
		if !slices.Contains(Families(), p) {
			errs = append(errs, fmt.Errorf("policy %q: want one of %s", p, strings.Join(Families(), ",")))
		}
	}
	if !(c.RateScale > 0 && c.RateScale <= 1e6) {
		errs = append(errs, fmt.Errorf("rate scale %g: want (0, 1e6]", c.RateScale))
	}
	if !(c.ResidencyBudgetModels == 0 || c.ResidencyBudgetModels >= 1 && c.ResidencyBudgetModels <= 1e4) {
		errs = append(errs, fmt.Errorf("residency budget %g models: want 0 (auto) or [1, 10000]", c.ResidencyBudgetModels))
	}
	// Settings that would do nothing (they were accepted without a word).
	if c.ResidencyBudgetModels != 0 && !c.Residency {
		errs = append(errs, fmt.Errorf("residency budget %g models (--residency-budget-models): the residency replay is off (--residency=false); drop one", c.ResidencyBudgetModels))
	}
	if c.TracePath == "" && c.Format != "" && c.Format != FormatAzureLLM {
		errs = append(errs, fmt.Errorf("format %q (--format): the embedded trace is %s; a format applies to a trace file (--trace)", c.Format, FormatAzureLLM))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("out: want a directory"))
	}
	return errors.Join(errs...)
}

// Prepared is a trace loaded and turned into what Compare replays.
type Prepared struct {
	Name string
	Pool PoolConfig
	// Workloads is set for request traces; Instances for the DLRM
	// instance trace (nothing to replay).
	Workloads Workloads
	Instances *Instances
	// Trace is the request trace (nil in binned ServeGen mode), for the
	// residency replay.
	Trace *Trace
}

// Prepare loads cfg's trace (or the embedded demo trace) and applies the
// pool's cold-start file, model filter, mode and service model.
func Prepare(cfg RunConfig) (*Prepared, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pool := cfg.Pool
	if cfg.ColdStartFile != "" {
		f, err := os.Open(cfg.ColdStartFile)
		if err != nil {
			return nil, err
		}
		pool.ColdStartSamples, err = ReadLoadTimes(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("cold-start file %s: %w", cfg.ColdStartFile, err)
		}
	}
	var l *Loaded
	if cfg.TracePath == "" {
		tr, err := DemoTrace()
		if err != nil {
			return nil, err
		}
		l = &Loaded{Format: FormatAzureLLM, Name: tr.Name, Trace: tr}
	} else {
		p, err := ResolvePath(cfg.TracePath)
		if err != nil {
			return nil, err
		}
		if p != cfg.TracePath && cfg.Stderr != nil {
			fmt.Fprintf(cfg.Stderr, "trace: %s (the one trace in %s)\n", p, cfg.TracePath)
		}
		if l, err = Load(p, cfg.Format, pool.Seed); err != nil {
			return nil, err
		}
	}
	pr := &Prepared{Name: l.Name, Pool: pool, Instances: l.Instances}
	if l.Instances != nil {
		if len(cfg.Models) > 0 {
			return nil, fmt.Errorf("model %s (--model): %s is a %s trace, with services (app_name) and no request models; it is reported whole", strings.Join(cfg.Models, ","), l.Name, FormatDLRMInstances)
		}
		return pr, nil
	}
	wl := Workloads{Name: l.Name}
	switch {
	case l.ServeGen != nil:
		sg, err := l.ServeGen.FilterModels(cfg.Models)
		if err != nil {
			return nil, err
		}
		mode := ModeRequest
		if cfg.Mode == string(ModeBinned) || cfg.Mode == "auto" && sg.ExpectedRequests()*cfg.RateScale > BinnedThreshold {
			mode = ModeBinned
		}
		if mode == ModeBinned {
			wl.Bins = sg.Binned(pool.Service, pool.Seed, cfg.RateScale)
		} else {
			if cfg.RateScale != 1 {
				return nil, fmt.Errorf("rate scale %g: only binned mode rescales ServeGen rates; pass --mode=binned", cfg.RateScale)
			}
			tr, err := ReadAll(l.Name, FormatServeGen, sg.Requests(pool.Seed))
			if err != nil {
				return nil, err
			}
			wl.Requests = NewWorkload(tr, pool.Service)
			pr.Trace = tr
		}
	default:
		tr, err := l.Trace.FilterModels(cfg.Models)
		if err != nil {
			return nil, err
		}
		pr.Trace = tr
		w := NewWorkload(tr, pool.Service)
		if cfg.Mode == string(ModeBinned) {
			wl.Bins = BinWorkload(w)
		} else {
			wl.Requests = w
		}
	}
	pr.Workloads = wl
	return pr, nil
}

// Run loads the trace, runs the comparison (and the residency replay on
// multi-model traces), prints the tables and writes table.md,
// timeseries.csv, report.html and summary.json into OutDir.
func Run(cfg RunConfig) error {
	pr, err := Prepare(cfg)
	if err != nil {
		return err
	}
	if cfg.ResidencyBudgetModels != 0 && (pr.Trace == nil || len(pr.Trace.Models) < 2) {
		what := "1 model"
		switch {
		case pr.Instances != nil:
			what = "no request models (" + string(FormatDLRMInstances) + ")"
		case pr.Trace == nil:
			what = "no per-request trace in binned mode"
		}
		return fmt.Errorf("residency budget %g models (--residency-budget-models): the residency replay runs on multi-model traces only, and %s has %s", cfg.ResidencyBudgetModels, pr.Name, what)
	}
	// Before the pool comparison, which may take minutes: a residency replay refused after it
	// wasted them.
	if cfg.Residency && pr.Trace != nil && len(pr.Trace.Models) > 1 {
		if err := checkResidencyModels(len(pr.Trace.Models)); err != nil {
			return fmt.Errorf("%s: %w; pass --residency=false to compare the pools only, or --model to keep fewer models", pr.Name, err)
		}
	}
	var table bytes.Buffer
	var sections []Section
	if pr.Instances != nil {
		if err := pr.Instances.WriteTable(&table, 15); err != nil {
			return err
		}
		sections = append(sections, tableSection("Recorded replica trajectories: "+pr.Name, table.String()))
		return finish(cfg, table.Bytes(), nil, nil, sections, pr.Name)
	}
	wl, pool, resTrace := pr.Workloads, pr.Pool, pr.Trace
	var progress func(int, int)
	// A bar only for long runs: per-request traces above 200,000 requests
	// or binned mode.
	if cfg.Progress && (wl.Bins != nil || len(wl.Requests.ArrivalS) > 200_000) {
		var bar *progressbar.ProgressBar
		progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(cfg.Stderr), progressbar.OptionSetDescription("replay runs"),
					progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
			}
			_ = bar.Set(done)
			if done == total {
				_ = bar.Finish()
			}
		}
	}
	c, err := Compare(pool, wl, CompareOptions{Families: cfg.Policies, Settings: cfg.Settings, Hindsight: cfg.Hindsight, NoOptimum: cfg.NoOptimum, Progress: progress})
	if errors.Is(err, ErrEmptyTrace) {
		return fmt.Errorf("trace %s: %w", pr.Name, err)
	}
	if err != nil {
		return err
	}
	if resTrace != nil && resTrace.Skipped > 0 {
		c.Note = fmt.Sprintf("%d %s left out.", resTrace.Skipped, resTrace.SkipReason)
	}
	if err := c.WriteTable(&table); err != nil {
		return err
	}
	sec, err := c.Section()
	if err != nil {
		return err
	}
	sections = append(sections, sec)
	var csvBuf bytes.Buffer
	if err := c.WriteCSV(&csvBuf); err != nil {
		return err
	}
	var rr *ResidencyComparison
	if cfg.Residency && resTrace != nil && len(resTrace.Models) > 1 {
		rc := DefaultResidencyConfig()
		rc.Seed = pool.Seed
		rc.BudgetModels = cfg.ResidencyBudgetModels
		rc.IgnoreExecTime = pool.Service.IgnoreExecTime
		if len(pool.ColdStartSamples) > 0 {
			rc.LoadTimeSamples = pool.ColdStartSamples
		}
		rr, err = CompareResidency(resTrace, rc)
		if err != nil {
			return err
		}
		table.WriteString("\n")
		if err := rr.WriteTable(&table); err != nil {
			return err
		}
		rs, err := rr.Section()
		if err != nil {
			return err
		}
		sections = append(sections, rs)
	}
	sum := c.Summary()
	sum.Residency = ResidencySummary(rr)
	return finish(cfg, table.Bytes(), csvBuf.Bytes(), &sum, sections, pr.Name)
}

// Output files Run writes into OutDir.
const (
	outTable      = "table.md"
	outTimeseries = "timeseries.csv"
	outReport     = "report.html"
	outSummary    = "summary.json"
)

// finish prints the table and writes the outputs; OutDir is created only
// here, once the trace has been read and replayed. A run without a time
// series or a summary (the DLRM instance trace) removes those files left in
// OutDir by an earlier run, so that they cannot be read as this trace's,
// and names on Stderr only the files it wrote.
func finish(cfg RunConfig, table, csvData []byte, sum *Summary, sections []Section, name string) error {
	if _, err := cfg.Stdout.Write(table); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	var wrote, removed []string
	write := func(file string, data []byte) error {
		p := filepath.Join(cfg.OutDir, file)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		wrote = append(wrote, p)
		return nil
	}
	stale := func(file string) error {
		p := filepath.Join(cfg.OutDir, file)
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = append(removed, p)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("remove %s left by an earlier run: %w", p, err)
		}
		return nil
	}
	if err := write(outTable, table); err != nil {
		return err
	}
	if csvData != nil {
		if err := write(outTimeseries, csvData); err != nil {
			return err
		}
	} else if err := stale(outTimeseries); err != nil {
		return err
	}
	var html bytes.Buffer
	footer := "Generated by inferscale replay (go run ./cmd/replay). Azure LLM inference trace 2023: Patel et al., Splitwise, ISCA 2024, CC BY 4.0. Azure Functions 2019: Shahrad et al., ATC '20, CC BY 4.0. ServeGen: Xiang et al., arXiv:2505.09999, Apache-2.0. Alibaba GenTD26 and DLRM traces: research use only."
	if err := WriteHTML(&html, name, footer, sections); err != nil {
		return err
	}
	if err := write(outReport, html.Bytes()); err != nil {
		return err
	}
	if sum != nil {
		data, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return err
		}
		if err := write(outSummary, append(data, '\n')); err != nil {
			return err
		}
	} else if err := stale(outSummary); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Stderr, "wrote %s\n", joinAnd(wrote))
	if len(removed) > 0 {
		fmt.Fprintf(cfg.Stderr, "removed %s, left by an earlier run (this trace has no time series or summary)\n", joinAnd(removed))
	}
	return nil
}

// joinAnd joins items as "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
