// Command replay runs inferscale's scaler and residency decisions offline
// over a request trace and compares them with the usual alternatives.
//
// With no flags it replays the embedded Azure LLM 2023 code trace (Patel et
// al., Splitwise, ISCA 2024, CC BY 4.0) with the documented defaults, prints
// the comparison table and writes table.md, timeseries.csv, report.html and
// summary.json into ./out. See docs/replay.md.
//
// "replay tune" sweeps each policy family's one setting over the shared
// traces (--traces, default ../shared/traces) and writes the tuned set into
// the settings file (--write, default replay/settings.yaml); the flags that
// name one trace, its outputs or what is compared (--trace, --out, --model,
// --policies, …) are refused there.
//
// "replay retry" replays a synthetic burst with clients that retry (layered
// retries, a shared retry budget) under inferscale without and with the
// retry cap; see docs/replay.md, "Clients that retry".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/version"
	"github.com/inferscale/inferscale/replay"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// checkModels refuses a --model list with an empty name: splitList drops
// empty names, so --model="," (or --model="") kept no model and replayed
// every model as one pool without a word.
func checkModels(s string) error {
	for _, v := range strings.Split(s, ",") {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("model %q (--model): an empty model name; want comma-separated model names, or no --model to replay every model as one pool", s)
		}
	}
	return nil
}

func run(args []string) error { return runIO(args, os.Stderr) }

// runIO is run with the usage (--help, a bad flag) written to stderr.
func runIO(args []string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "retry" {
		return runRetry(args[1:], os.Stdout, stderr)
	}
	tune := len(args) > 0 && args[0] == "tune"
	if tune {
		args = args[1:]
	}
	cfg := replay.DefaultRunConfig()
	def := cfg.Pool
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	trace := fs.String("trace", "", "trace file or folder (default: the embedded Azure LLM code trace)")
	format := fs.String("format", "", "trace format: "+fmt.Sprint(replay.Formats())+" (default: detect from the header)")
	mode := fs.String("mode", cfg.Mode, "simulator: auto, request or binned")
	models := fs.String("model", "", "comma-separated models to keep (default: all, as one pool)")
	policies := fs.String("policies", strings.Join(cfg.Policies, ","), "comma-separated policy families")
	slo := fs.Duration("slo", def.SLO, "queue-wait SLO")
	sloTarget := fs.Float64("slo-target", def.SLOTarget, "fraction of requests that must meet the SLO, (0,1]")
	price := fs.Float64("price", def.PricePerGPUHour, "dollars per GPU-hour")
	slots := fs.Int("slots", def.Slots, "concurrent requests per replica")
	gpus := fs.Int("gpus-per-replica", def.GPUsPerReplica, "GPUs per replica")
	maxRep := fs.Int("max-replicas", def.MaxReplicas, "upper bound on replicas")
	minRep := fs.Int("min-replicas", def.MinReplicas, "lower bound on replicas")
	cold := fs.String("cold-start", def.ColdStart.String(), "replica cold start: a duration, or a GenTD26 load-latency CSV (basemodel_update_latency_anon.csv) to draw from")
	prefill := fs.Float64("prefill-tps", 1/def.Service.PerInputTokenS, "prefill tokens per second per slot (service-time model)")
	decode := fs.Float64("decode-tps", 1/def.Service.PerOutputTokenS, "output tokens per second per slot (service-time model)")
	base := fs.Duration("base-service", time.Duration(def.Service.BaseS*1e9), "fixed per-request service overhead")
	tokenModel := fs.Bool("ignore-exec-time", false, "ignore the trace's execution times: the pool uses the token model, and the residency replay's requests take no time once their model is loaded")
	probe := fs.Int("probe-replicas", def.ProbeReplicas, "pool size the capacity probe measures μ on (1 = one replica)")
	seed := fs.Uint64("seed", def.Seed, "seed for synthesized arrivals, cold starts and model sizes")
	rateScale := fs.Float64("rate-scale", cfg.RateScale, "multiply ServeGen rates (binned mode)")
	out := fs.String("out", cfg.OutDir, "output folder for table.md, timeseries.csv, report.html, summary.json")
	progress := fs.Bool("progress", true, "progress bar on stderr")
	residencyOn := fs.Bool("residency", cfg.Residency, "replay model residency on multi-model traces")
	budgetModels := fs.Float64("residency-budget-models", cfg.ResidencyBudgetModels, "residency memory budget in median-sized models (0: half the mean 10-minute working set, at least 4)")
	initial := fs.Int("initial-replicas", def.InitialReplicas, "ready replicas at t = 0, the same for every policy, the bound and the optimum")
	settingsFile := fs.String("settings", "", "settings file with the published and tuned sets (default: the embedded replay/settings.yaml)")
	hindsight := fs.Bool("hindsight", cfg.Hindsight, "add each family's per-trace best setting as a labelled reference row")
	optimum := fs.Bool("optimum", true, "search the offline optimum (the bound is always computed)")
	traces := fs.String("traces", "../shared/traces", "tune: folder holding the shared traces")
	write := fs.String("write", "replay/settings.yaml", "tune: settings file to write")
	showVersion := version.Flag(fs)
	fs.SetOutput(stderr)
	if tune {
		fs.Init("replay tune", flag.ContinueOnError)
		fs.Usage = func() { printUsage(fs, tuneUsage, func(name string) bool { return !tuneIgnores[name] }) }
	} else {
		fs.Usage = func() { printUsage(fs, mainUsage, func(name string) bool { return !tuneOnly[name] }) }
	}
	if err := decimalflag.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h, --help: fs printed the usage; exit 0
		}
		return err
	}
	if *showVersion {
		fmt.Println(version.String("replay"))
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !tune && (set["traces"] || set["write"]) { // they did nothing
		return errors.New("--traces and --write apply to replay tune only (go run ./cmd/replay tune --traces=… --write=…)")
	}
	if tune {
		var ignored []string
		fs.Visit(func(f *flag.Flag) {
			if tuneIgnores[f.Name] {
				ignored = append(ignored, "--"+f.Name)
			}
		})
		if len(ignored) > 0 { // they did nothing, or applied one trace's choice to all seven
			return fmt.Errorf("%s: not used by replay tune, which replays every policy family on each shared trace under --traces (with its documented model, slots and cold start) and writes only --write; drop them", strings.Join(ignored, ", "))
		}
	}
	readsPool := false // a flag set that a DLRM instance trace would not read
	for name := range set {
		readsPool = readsPool || !instanceFlags[name]
	}
	if !tune && readsPool {
		f, err := traceFormat(*trace, *format)
		if err != nil {
			return err
		}
		if set["rate-scale"] && f != replay.FormatServeGen {
			return fmt.Errorf("rate-scale: applies to servegen traces (binned mode) only; this trace is %s", f)
		}
		if f == replay.FormatDLRMInstances && *trace != "" { // with no trace, Prepare refuses the format
			var unread []string
			fs.Visit(func(fl *flag.Flag) {
				if !instanceFlags[fl.Name] && fl.Name != "model" { // Prepare refuses --model, naming the services
					unread = append(unread, "--"+fl.Name)
				}
			})
			if len(unread) > 0 { // they did nothing
				return fmt.Errorf("%s: not used on a %s trace, which has no requests and is reported whole as its recorded replica trajectories (docs/replay.md, \"Alibaba DLRM 2025 instances\"); it reads only --trace, --format and --out", strings.Join(unread, ", "), replay.FormatDLRMInstances)
			}
		}
	}
	cfg.TracePath, cfg.Format, cfg.Mode = *trace, replay.Format(*format), *mode
	if set["model"] {
		if err := checkModels(*models); err != nil {
			return err
		}
	}
	cfg.Models, cfg.Policies = splitList(*models), splitList(*policies)
	for i, p := range cfg.Policies {
		if slices.Contains(cfg.Policies[:i], p) { // each row was printed twice
			return fmt.Errorf("policies: %q is listed twice; list each family once", p)
		}
	}
	cfg.Pool.SLO, cfg.Pool.SLOTarget, cfg.Pool.PricePerGPUHour = *slo, *sloTarget, *price
	cfg.Pool.Slots, cfg.Pool.GPUsPerReplica, cfg.Pool.MaxReplicas, cfg.Pool.MinReplicas = *slots, *gpus, *maxRep, *minRep
	if d, err := time.ParseDuration(*cold); err == nil {
		cfg.Pool.ColdStart = d
	} else if _, statErr := os.Stat(*cold); statErr == nil {
		cfg.ColdStartFile = *cold
	} else {
		return fmt.Errorf("cold-start %q: want a duration (60s) or an existing GenTD26 load-latency CSV", *cold)
	}
	if err := validateServiceFlags(*prefill, *decode, *base); err != nil {
		return err
	}
	cfg.Pool.Service.PerInputTokenS, cfg.Pool.Service.PerOutputTokenS, cfg.Pool.Service.BaseS = 1 / *prefill, 1 / *decode, base.Seconds()
	cfg.Pool.Service.IgnoreExecTime = *tokenModel
	cfg.Pool.ProbeReplicas = *probe
	cfg.Pool.Seed, cfg.RateScale, cfg.OutDir = *seed, *rateScale, *out
	cfg.Progress, cfg.Residency, cfg.ResidencyBudgetModels = *progress, *residencyOn, *budgetModels
	cfg.Pool.InitialReplicas, cfg.Hindsight, cfg.NoOptimum = *initial, *hindsight, !*optimum
	if *settingsFile != "" {
		data, err := readSettings(*settingsFile)
		if err != nil {
			return err
		}
		if cfg.Settings, err = replay.ParseSettings(data); err != nil {
			return fmt.Errorf("%s: %w", *settingsFile, err)
		}
	}
	if tune {
		return runTune(cfg, *traces, *write)
	}
	if err := checkOut("out", cfg.OutDir); err != nil {
		return err
	}
	return replay.Run(cfg)
}

// tuneOnly are the flags only "replay tune" reads; the replay refuses them.
var tuneOnly = map[string]bool{"traces": true, "write": true}

// tuneIgnores are the replay's flags "replay tune" does not read (it picks
// the traces, models and outputs itself, runs every family with hindsight
// and the optimum, and replays no residency); tune refuses them.
var tuneIgnores = map[string]bool{
	"trace": true, "format": true, "model": true, "out": true, "policies": true,
	"hindsight": true, "optimum": true, "residency": true, "residency-budget-models": true,
	"progress": true, // tune logs a line per trace; it draws no bar
}

const mainUsage = `Usage:
  replay [flags]         replay a trace (default: the embedded Azure LLM 2023 code trace) through a
                         simulated GPU pool under inferscale and the usual autoscalers; writes
                         table.md, timeseries.csv, report.html and summary.json into --out
  replay tune [flags]    sweep each policy family's one setting over the shared traces (--traces)
                         and write the tuned set (--write); "replay tune --help" for its flags
  replay retry [flags]   a synthetic burst with retrying clients, without and with the retry cap;
                         "replay retry --help" for its flags

See docs/replay.md.

Flags of replay:
`

const tuneUsage = `Usage:
  replay tune [flags]    sweep each policy family's one setting over the seven shared request traces
                         under --traces (each with its documented model, slots and cold start), pick
                         per family the value meeting the SLO on the most traces at the lowest
                         geometric mean of GPU-hours ÷ optimum, and write both setting sets to
                         --write (docs/replay.md, "go run ./cmd/replay tune")

Flags of replay tune (the pool flags apply to every trace, except where a trace's documented run sets
its own: GenTD26 runs with --slots=1 and its measured load times as cold starts):
`

// printUsage writes head and then the flags of fs that keep accepts, with
// their defaults, to fs's output.
func printUsage(fs *flag.FlagSet, head string, keep func(name string) bool) {
	w := fs.Output()
	fmt.Fprint(w, head)
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if keep(f.Name) {
			shown.Var(f.Value, f.Name, f.Usage)
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	shown.PrintDefaults()
}

// checkOut refuses a folder (flag's: --out, or --write's folder) the run could not write,
// before it runs (found out afterwards, a long run was wasted), without creating anything:
// dir must be a writable folder, or not exist below one.
func checkOut(flag, dir string) error {
	p := filepath.Clean(dir)
	for {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("%s %q: %s is not a folder", flag, dir, p)
		case err == nil:
			if err := syscall.Access(p, 2 /* W_OK */); err != nil {
				return fmt.Errorf("%s %q: folder %s is not writable: %w", flag, dir, p, err)
			}
			return nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("%s %q: %w", flag, dir, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return fmt.Errorf("%s %q: no existing folder above it", flag, dir)
		}
		p = parent
	}
}

// instanceFlags are the flags the replay reads on a DLRM instance trace, which it reports
// whole (no requests, so no pool, policies, SLO or residency); it refuses the others there.
var instanceFlags = map[string]bool{"trace": true, "format": true, "out": true}

// traceFormat is the format of the trace the replay will read: --format, else the embedded
// trace's, else the one detected from the first line of trace (a file, or the one trace in a
// folder), so that flags a format does not read (--rate-scale outside ServeGen, the pool's on
// a DLRM instance trace) are refused before a run that ignored them.
func traceFormat(trace, format string) (replay.Format, error) {
	if f := replay.Format(format); f != "" {
		return f, nil
	}
	if trace == "" {
		return replay.FormatAzureLLM, nil // the embedded trace
	}
	p, err := replay.ResolvePath(trace)
	if err != nil {
		return "", err
	}
	fh, err := os.Open(p)
	if err != nil {
		return "", err
	}
	head := make([]byte, 64<<10)
	n, err := io.ReadFull(fh, head)
	fh.Close()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	if n == 0 {
		return "", fmt.Errorf("%s: %w", p, replay.ErrEmptyFile) // as replay.Load says it
	}
	first, _, _ := strings.Cut(string(head[:n]), "\n")
	f, err := replay.DetectFormat(first)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return f, nil
}

// maxSettingsBytes bounds --settings: the embedded replay/settings.yaml is 4 KiB, and
// --settings=/dev/zero was read without end (out of memory).
const maxSettingsBytes = 1 << 20

// readSettings reads the settings file at path, at most maxSettingsBytes.
func readSettings(path string) ([]byte, error) {
	data, err := boundedfile.Read(path, maxSettingsBytes)
	switch {
	case errors.Is(err, boundedfile.ErrTooLarge):
		return nil, fmt.Errorf("settings %s: larger than %d bytes (1 MiB); the embedded replay/settings.yaml is about 4 KiB", path, maxSettingsBytes)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("settings %s: %w", path, err)
	}
	return data, nil
}

// validateServiceFlags checks the service-time flags by their own names
// (replay.ServiceModel.Validate speaks of its fields: at most 3600 s per
// token and 1 h of base overhead). +Inf tokens/s passed "> 0" and became
// 0 s per token.
func validateServiceFlags(prefill, decode float64, base time.Duration) error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"prefill-tps", prefill}, {"decode-tps", decode}} {
		if !(f.v >= 1.0/3600) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("%s %s: want a finite rate of at least 1/3600 tokens per second per slot (one token an hour)", f.name, strconv.FormatFloat(f.v, 'g', -1, 64)))
		}
	}
	if base < 0 || base > time.Hour {
		errs = append(errs, fmt.Errorf("base-service %s: want 0..1h", base))
	}
	return errors.Join(errs...)
}

// runTune sweeps the shared traces and writes the settings file.
func runTune(cfg replay.RunConfig, traces, write string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Found out after the sweep before: 18 minutes on this machine.
	if st, err := os.Stat(write); err == nil && st.IsDir() {
		return fmt.Errorf("write %q: is a folder; want the settings file to write", write)
	}
	if err := checkOut("write", filepath.Dir(write)); err != nil {
		return err
	}
	s, res, err := replay.Tune(traces, cfg, os.Stderr)
	if err != nil {
		return err
	}
	for _, r := range res {
		fmt.Printf("%-11s %-6g meets the SLO on %d/%d traces, geometric mean %.3g × optimum\n", r.Family, r.Value, r.Met, r.Traces, r.GeoMean)
	}
	data, err := replay.MarshalSettings(s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(write, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", write)
	return nil
}
