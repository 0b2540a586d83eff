// Command replay runs inferscale's scaler and residency decisions offline
// over a request trace and compares them with the usual alternatives.
//
// With no flags it replays the embedded Azure LLM 2023 code trace (Patel et
// al., Splitwise, ISCA 2024, CC BY 4.0) with the documented defaults, prints
// the comparison table and writes table.md, timeseries.csv and report.html
// into ./out. See docs/replay.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

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

func run(args []string) error {
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
	tokenModel := fs.Bool("ignore-exec-time", false, "use the token model even when the trace has execution times")
	probe := fs.Int("probe-replicas", def.ProbeReplicas, "pool size the capacity probe measures μ on (1 = one replica)")
	seed := fs.Uint64("seed", def.Seed, "seed for synthesized arrivals, cold starts and model sizes")
	rateScale := fs.Float64("rate-scale", cfg.RateScale, "multiply ServeGen rates (binned mode)")
	out := fs.String("out", cfg.OutDir, "output folder for table.md, timeseries.csv, report.html")
	progress := fs.Bool("progress", true, "progress bar on stderr")
	residencyOn := fs.Bool("residency", cfg.Residency, "replay model residency on multi-model traces")
	budgetModels := fs.Float64("residency-budget-models", cfg.ResidencyBudgetModels, "residency memory budget in median-sized models (0: half the mean 10-minute working set, at least 4)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h, --help: fs printed the usage; exit 0
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.TracePath, cfg.Format, cfg.Mode = *trace, replay.Format(*format), *mode
	cfg.Models, cfg.Policies = splitList(*models), splitList(*policies)
	cfg.Pool.SLO, cfg.Pool.SLOTarget, cfg.Pool.PricePerGPUHour = *slo, *sloTarget, *price
	cfg.Pool.Slots, cfg.Pool.GPUsPerReplica, cfg.Pool.MaxReplicas, cfg.Pool.MinReplicas = *slots, *gpus, *maxRep, *minRep
	if d, err := time.ParseDuration(*cold); err == nil {
		cfg.Pool.ColdStart = d
	} else if _, statErr := os.Stat(*cold); statErr == nil {
		cfg.ColdStartFile = *cold
	} else {
		return fmt.Errorf("cold-start %q: want a duration (60s) or an existing GenTD26 load-latency CSV", *cold)
	}
	if !(*prefill > 0) || !(*decode > 0) {
		return fmt.Errorf("prefill-tps %s, decode-tps %s: want > 0", strconv.FormatFloat(*prefill, 'g', -1, 64), strconv.FormatFloat(*decode, 'g', -1, 64))
	}
	cfg.Pool.Service.PerInputTokenS, cfg.Pool.Service.PerOutputTokenS, cfg.Pool.Service.BaseS = 1 / *prefill, 1 / *decode, base.Seconds()
	cfg.Pool.Service.IgnoreExecTime = *tokenModel
	cfg.Pool.ProbeReplicas = *probe
	cfg.Pool.Seed, cfg.RateScale, cfg.OutDir = *seed, *rateScale, *out
	cfg.Progress, cfg.Residency, cfg.ResidencyBudgetModels = *progress, *residencyOn, *budgetModels
	return replay.Run(cfg)
}
