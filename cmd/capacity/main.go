// Command capacity measures a model's SLO capacity, memory and load time on one GPU profile
// and writes its admission record (package capacity; docs/capacity.md):
//
//	go run ./cmd/capacity --target=localhost:8001 --model=classifier-v5 \
//	  --mig-profile=1g.10gb --slo-latency=500ms --out=records/
//
// writes records/classifier-v5.1g.10gb.yaml and prints the ScaledObject metadata
// (replicaConcurrency, replicaThroughput) for the chart's values (not for a refused record:
// a line says why instead). It exits 1 when the verdict
// is refused (the record is written and says why), when the generator was client-bound, or on
// any error; 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/inferscale/inferscale/capacity"
	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// protocolOf names the protocol each protocol-specific flag is for.
var protocolOf = map[string]string{
	"input": capacity.ProtocolTriton, "input-data": capacity.ProtocolTriton, "metrics-url": capacity.ProtocolTriton,
	"prompt-tokens": capacity.ProtocolOpenAI, "max-tokens": capacity.ProtocolOpenAI, "ignore-eos": capacity.ProtocolOpenAI,
}

// parseFlags returns the Config the flags describe (validated by capacity.Config.Validate in
// Run) and the request flags.
func parseFlags(args []string, stderr io.Writer) (capacity.Config, error) {
	cfg := capacity.DefaultConfig()
	fs := flag.NewFlagSet("capacity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var inputs stringList
	var inputData string
	fs.StringVar(&cfg.Protocol, "protocol", cfg.Protocol, "triton-grpc (Triton's gRPC ModelInfer) or openai (/v1/completions, streaming)")
	fs.StringVar(&cfg.Target, "target", "", "triton-grpc: host:port of Triton's gRPC endpoint; openai: base URL (http://host:8000) (required)")
	fs.StringVar(&cfg.Model, "model", "", "model name on the server (required)")
	fs.StringVar(&cfg.Digest, "digest", "", "immutable digest of the model artifact (algorithm:hex), recorded as given")
	fs.StringVar(&cfg.Profile, "mig-profile", "", "MIG profile or whole-GPU name measured on, e.g. 1g.10gb (required)")
	fs.Int64Var(&cfg.BudgetBytes, "budget-bytes", 0, "usable memory of the profile; 0: NVML's reading, else the profile table")
	fs.Int64Var(&cfg.ReserveBytes, "reserve-bytes", cfg.ReserveBytes, "bytes kept back from the budget (CUDA context, allocator slack)")
	fs.StringVar(&cfg.MetricsURL, "metrics-url", "", "Triton's metrics endpoint; default http://<target host>:8002/metrics")
	fs.StringVar(&cfg.NVML, "nvml", cfg.NVML, "auto, on or off: read device memory through NVML (NVIDIA_VISIBLE_DEVICES names the device)")
	fs.BoolVar(&cfg.SkipMemory, "skip-memory", false, "do not load, reload or unload the model (no load time, swap peak); else each load is bounded by 10m0s and each unload's wait by 5m0s (fixed)")
	fs.DurationVar(&cfg.Measure.SLO.Latency, "slo-latency", cfg.Measure.SLO.Latency, "latency limit at --slo-quantile (scheduled send to complete response), (0, 1h] and at most --request-timeout")
	fs.Float64Var(&cfg.Measure.SLO.Quantile, "slo-quantile", cfg.Measure.SLO.Quantile, "latency quantile held to --slo-latency, (0, 1)")
	fs.Float64Var(&cfg.Measure.SLO.MaxErrorRate, "max-error-rate", cfg.Measure.SLO.MaxErrorRate, "ceiling on failed ÷ completed requests, [0, 1)")
	fs.DurationVar(&cfg.Measure.Window, "window", cfg.Measure.Window, "shortest measurement window")
	fs.IntVar(&cfg.Measure.MinWindowRequests, "min-window-requests", cfg.Measure.MinWindowRequests, "stretch windows to hold at least this many arrivals")
	fs.IntVar(&cfg.Measure.MaxWindows, "max-windows", cfg.Measure.MaxWindows, "windows after which an unstable level ends (the first is warm-up), 4..1000")
	fs.Float64Var(&cfg.Measure.Stability, "stability", cfg.Measure.Stability, "allowed spread of the last 3 windows (perf_analyzer's rule), (0, 1]")
	fs.IntVar(&cfg.Measure.MaxInFlight, "max-in-flight", cfg.Measure.MaxInFlight, "the generator's own concurrency bound (reaching it: client-bound)")
	fs.DurationVar(&cfg.Measure.MaxLag, "max-lag", cfg.Measure.MaxLag, "sends later than this after their schedule (over 1 %): client-bound; 0: a tenth of --slo-latency")
	fs.DurationVar(&cfg.Measure.RequestTimeout, "request-timeout", cfg.Measure.RequestTimeout, "per-request timeout [--slo-latency, 1h]; a request past it counts as an error, not as late")
	fs.Float64Var(&cfg.Search.StartRPS, "start-rate", 0, "first rate (req/s); 0: half of one execution slot's rate, probed")
	fs.Float64Var(&cfg.Search.StepFactor, "step-factor", cfg.Search.StepFactor, "rate multiplier of the step-up, [1.01, 100]")
	fs.Float64Var(&cfg.Search.Precision, "precision", cfg.Search.Precision, "bisection ends when (fail − pass) ÷ pass ≤ this")
	fs.Float64Var(&cfg.Search.MaxRPS, "max-rate", cfg.Search.MaxRPS, "highest rate tried (req/s)")
	fs.Float64Var(&cfg.Search.MinRPS, "min-rate", cfg.Search.MinRPS, "lowest rate tried when stepping down (req/s)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the Poisson arrival schedule")
	fs.StringVar(&cfg.Trace, "trace", "", "a request trace (formats of cmd/replay) whose inter-arrival shape replaces Poisson arrivals, scaled to each rate")
	fs.Var(&inputs, "input", "triton-grpc input tensor NAME:DATATYPE:DIM,DIM (zero-filled, at most 64 MiB; all inputs of a request together at most 64 MiB of tensors + 1 MiB); repeat per input")
	fs.StringVar(&inputData, "input-data", "", "triton-grpc: a ModelInferRequest in protobuf JSON to send")
	fs.IntVar(&cfg.OpenAI.PromptTokens, "prompt-tokens", cfg.OpenAI.PromptTokens, "openai: prompt length in tokens")
	fs.IntVar(&cfg.OpenAI.MaxTokens, "max-tokens", cfg.OpenAI.MaxTokens, "openai: max_tokens")
	fs.BoolVar(&cfg.OpenAI.IgnoreEOS, "ignore-eos", false, "openai: send vLLM's ignore_eos so every response has --max-tokens tokens")
	fs.StringVar(&cfg.OutDir, "out", cfg.OutDir, "folder the record <model>.<profile>.yaml is written to")
	fs.DurationVar(&cfg.ConnectTimeout, "connect-timeout", cfg.ConnectTimeout, "how long the target has to answer first, and the dial and TLS handshake bound (0, 5m]")
	showVersion := version.Flag(fs)
	if err := decimalflag.Parse(fs, args); err != nil {
		return cfg, err
	}
	if *showVersion {
		return cfg, errShowVersion
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// A flag of the other protocol did nothing: refuse it.
	var wrong []string
	fs.Visit(func(f *flag.Flag) {
		if protocolOf[f.Name] != "" && protocolOf[f.Name] != cfg.Protocol {
			wrong = append(wrong, "--"+f.Name)
		}
	})
	if len(wrong) > 0 && (cfg.Protocol == capacity.ProtocolTriton || cfg.Protocol == capacity.ProtocolOpenAI) {
		return cfg, fmt.Errorf("%s: not used with --protocol=%s", strings.Join(wrong, ", "), cfg.Protocol)
	}
	if cfg.Protocol == capacity.ProtocolTriton && cfg.Model != "" {
		req, err := capacity.InferRequest(cfg.Model, inputData, inputs)
		if err != nil {
			return cfg, err
		}
		cfg.Request = req
	}
	return cfg, cfg.Validate()
}

// errShowVersion is parseFlags's answer to --version: print the version, measure nothing.
var errShowVersion = errors.New("--version")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errShowVersion) {
		fmt.Fprintln(stdout, version.String("capacity"))
		return 0
	}
	if err != nil {
		if !errors.Is(err, capacity.ErrInvalidConfig) { // those already start "capacity: invalid config"
			fmt.Fprint(stderr, "capacity: ")
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	out, err := capacity.Run(ctx, cfg, stderr)
	if out.Path != "" {
		fmt.Fprintf(stdout, "wrote %s: μ %.4g req/s at p%g ≤ %v%s, peak %d bytes, swap peak %d bytes, load %.3gs, allowed %v\n",
			out.Path, out.Record.SLOThroughputRPS, 100*cfg.Measure.SLO.Quantile, cfg.Measure.SLO.Latency, out.MuNote(),
			out.Record.Memory.PeakBytes, out.Record.Memory.SwapPeakBytes, out.Record.LoadTimeSeconds, out.Record.Verdict.Allowed)
		if note := out.LowerBoundNote(); note != "" {
			fmt.Fprintln(stdout, note)
		}
		if out.Record.Verdict.Allowed {
			fmt.Fprint(stdout, capacity.ScaledObjectMetadata(out.Record))
		} else {
			// A refused record's μ (0 when no rate met the SLO) is no throughput to scale on.
			fmt.Fprintf(stdout, "no ScaledObject trigger metadata: the record refuses %s on %s (verdict.allowed false; its verdict.limits say why)\n", out.Record.Model, out.Record.Profile)
		}
	}
	if errors.Is(err, capacity.ErrInvalidConfig) {
		// Bad input found by Run (an unreadable --trace, an unwritable --out, a profile
		// NVML cannot size): the same as a bad flag, and nothing was measured.
		fmt.Fprintln(stderr, err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "capacity:", err)
		return 1
	}
	return 0
}
