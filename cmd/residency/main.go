// Command residency is the inferscale residency controller: a sidecar beside Triton Inference
// Server (--model-control-mode=explicit) that keeps the right models loaded within the memory
// budget of the pod's GPU slice and drains the pod on SIGTERM or POST /drain.
// See docs/residency.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/envflag"
	"github.com/inferscale/inferscale/internal/version"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/sidecar"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "residency:", err)
		os.Exit(1)
	}
}

// parseFlags fills a Config from args; defaults are DefaultConfig's.
func parseFlags(args []string, errOut io.Writer) (residency.Config, string, error) {
	c := residency.DefaultConfig()
	c.Namespace = os.Getenv("POD_NAMESPACE")
	c.PodName = os.Getenv("POD_NAME")
	fs := flag.NewFlagSet("residency", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.TritonAddress, "triton-address", c.TritonAddress, "Triton gRPC endpoint, host:port")
	fs.StringVar(&c.TritonMetricsURL, "triton-metrics-url", c.TritonMetricsURL, "Triton Prometheus endpoint (queue lengths every loop; read at most 16 MiB): without NVML its nv_gpu_memory_used_bytes is the device-memory check; while draining, the queue length. Empty or unreachable: planning on the catalog's accounting and draining on statistics (a WARN every 5m and inferscale_residency_device_memory_read_errors_total count the unreachable reads)")
	fs.StringVar(&c.CatalogPath, "catalog", c.CatalogPath, "model catalog YAML (docs/residency.md)")
	fs.Int64Var(&c.BudgetBytes, "budget-bytes", c.BudgetBytes, "usable GPU bytes; 0: from NVML, else from --mig-profile's table entry")
	fs.StringVar(&c.MIGProfile, "mig-profile", c.MIGProfile, "pod's MIG profile (e.g. 1g.10gb) or whole-GPU name (h100-80gb): selects catalog peaks; sets the budget without NVML; must be in the profile table or named by a catalog model")
	fs.Int64Var(&c.ReserveBytes, "reserve-bytes", c.ReserveBytes, "bytes kept back; the larger of this and the catalog's reserveBytes is used (-1: catalog only)")
	fs.StringVar(&c.NVML, "nvml", c.NVML, "budget through NVML: auto, on or off")
	fs.StringVar(&c.PrometheusAddress, "prometheus-address", c.PrometheusAddress, "Prometheus base URL for demand of models not loaded here (empty: none); not given: $"+envflag.PrometheusAddress+" (a Secret's value keeps a password out of the arguments); the flag wins, even empty")
	fs.StringVar(&c.DemandQuery, "demand-query", c.DemandQuery, "PromQL template with $model for that demand (empty: Triton preset rate)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "pod namespace (default $POD_NAMESPACE)")
	fs.StringVar(&c.PodName, "pod-name", c.PodName, "pod name for Kubernetes events (default $POD_NAME)")
	fs.StringVar(&c.ListenAddress, "listen", c.ListenAddress, "address of /readyz, /healthz, /metrics and POST /drain")
	fs.DurationVar(&c.LoopInterval, "loop-interval", c.LoopInterval, "observe-plan-act period")
	fs.BoolVar(&c.FreeIdle, "free-idle", c.FreeIdle, "unload idle P1/P2 models after their idle timeout even when no other model needs the memory")
	fs.IntVar(&c.MaxConcurrentLoads, "max-concurrent-loads", c.MaxConcurrentLoads, "loads in flight at once")
	fs.DurationVar(&c.FailureBackoff, "failure-backoff", c.FailureBackoff, "wait after a failed load, doubling per failure")
	fs.DurationVar(&c.FailureBackoffMax, "failure-backoff-max", c.FailureBackoffMax, "cap of the failed-load backoff")
	fs.IntVar(&c.QuarantineAfter, "quarantine-after", c.QuarantineAfter, "consecutive failed loads that quarantine a model")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "drain deadline after the propagation delay")
	fs.DurationVar(&c.PropagationDelay, "propagation-delay", c.PropagationDelay, "wait after turning not-ready, for endpoint removal to propagate")
	fs.DurationVar(&c.DrainPollInterval, "drain-poll-interval", c.DrainPollInterval, "period of drain's reads of Triton's queue and counters")
	fs.StringVar(&c.InferenceListen, "inference-listen", c.InferenceListen, "address of the inference front (Triton's gRPC inference service, held through model loads); empty: no front")
	fs.StringVar(&c.InferenceHTTPListen, "inference-http-listen", c.InferenceHTTPListen, "address of the inference front for KServe v2 HTTP/REST (needs --inference-listen); empty: none")
	fs.StringVar(&c.TritonHTTPURL, "triton-http-url", c.TritonHTTPURL, "Triton's HTTP endpoint, the upstream of --inference-http-listen (needs it and --inference-listen when given)")
	fs.DurationVar(&c.HoldTimeout, "hold-timeout", c.HoldTimeout, "longest hold of a request for a model that is not READY (the client's deadline may end it sooner); needs --inference-listen")
	fs.IntVar(&c.HoldMaxRequests, "hold-max-requests", c.HoldMaxRequests, "requests held per model; more fail UNAVAILABLE at once; needs --inference-listen")
	fs.Int64Var(&c.HoldMaxBytes, "hold-max-bytes", c.HoldMaxBytes, "request bytes held per model; more fail UNAVAILABLE at once; needs --inference-listen")
	fs.Int64Var(&c.HoldMaxTotalBytes, "hold-max-total-bytes", c.HoldMaxTotalBytes, "request bytes held for all models together; more fail RESOURCE_EXHAUSTED (HTTP 429) at once; needs --inference-listen")
	fs.Int64Var(&c.MaxRequestBytes, "max-request-bytes", c.MaxRequestBytes, "largest request message (gRPC) or body (HTTP) the front takes; larger fail RESOURCE_EXHAUSTED (HTTP 413) unread (default: Triton's --http-max-input-size default); needs --inference-listen")
	fs.Int64Var(&c.RetainMaxTotalBytes, "retain-max-total-bytes", c.RetainMaxTotalBytes, "bytes of forwarded gRPC requests kept, for all models together, to hold one again if Triton answers NOT_FOUND for a model unloaded meanwhile; a request past it is not kept, and such a NOT_FOUND is answered UNAVAILABLE with the pushback; 0 keeps none; needs --inference-listen")
	fs.DurationVar(&c.RetryPushback, "retry-pushback", c.RetryPushback, "grpc-retry-pushback-ms sent with the front's own UNAVAILABLE answers; needs --inference-listen")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	showVersion := version.Flag(fs)
	if err := decimalflag.Parse(fs, args); err != nil {
		return c, "", err
	}
	if *showVersion {
		return c, "", version.ErrRequested
	}
	if fs.NArg() > 0 {
		return c, "", fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	unused := frontFlagsUnused(fs, c)
	envErr := envflag.Address(fs, "prometheus-address", envflag.PrometheusAddress, os.LookupEnv)
	return c, *logLevel, errors.Join(unused, envErr, c.Validate())
}

// frontFlags are the inference front's flags: without --inference-listen there is no front
// and they do nothing.
var frontFlags = []string{"hold-timeout", "hold-max-requests", "hold-max-bytes", "hold-max-total-bytes",
	"max-request-bytes", "retain-max-total-bytes", "retry-pushback", "triton-http-url"}

// frontFlagsUnused returns a usage error for each front flag the command line gave (fs.Visit,
// so a default never counts) without --inference-listen, where it would be silently ignored;
// --triton-http-url needs --inference-http-listen as well. --inference-http-listen itself is
// Config.Validate's to refuse.
func frontFlagsUnused(fs *flag.FlagSet, c residency.Config) error {
	var errs []error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case c.InferenceListen == "" && slices.Contains(frontFlags, f.Name):
			errs = append(errs, fmt.Errorf("--%s: needs --inference-listen (without it there is no inference front, and the flag would do nothing)", f.Name))
		case f.Name == "triton-http-url" && c.InferenceHTTPListen == "":
			errs = append(errs, errors.New("--triton-http-url: needs --inference-http-listen (it is the upstream of the HTTP front, and would do nothing)"))
		}
	})
	return errors.Join(errs...)
}

// run returns nil after -h/--help: the flag package has printed the usage to errOut.
func run(args []string, errOut io.Writer) error {
	cfg, level, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if errors.Is(err, version.ErrRequested) {
		fmt.Println(version.String("residency"))
		return nil
	}
	if err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	log := residency.NewLogger(os.Stderr, lv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return sidecar.Run(ctx, cfg, log)
}
