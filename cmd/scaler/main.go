// Command scaler is inferscale's KEDA external scaler: a gRPC server KEDA
// calls for every ScaledObject trigger of type external or external-push.
//
//	scaler --listen=:9090 --prometheus-address=http://prometheus:9090 --metrics-listen=:8080 --refresh-interval=5s
//
// See docs/scaler.md for the metadata keys and example ScaledObjects.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/envflag"
	"github.com/inferscale/inferscale/internal/healthprobe"
	"github.com/inferscale/inferscale/internal/version"
	"github.com/inferscale/inferscale/scaler"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "scaler:", err)
		os.Exit(exitCode(err))
	}
}

// errUsage is wrapped by run's error for flags that do not parse: exit 2, as package flag's
// ExitOnError.
var errUsage = errors.New("usage")

// exitCode is run's exit status: 2 for flags that do not parse, for arguments that are not
// flags and for a health probe that cannot run as configured (healthprobe.ExitUsage), 1 for a
// probe that found the server not serving and for every other error.
func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return healthprobe.ExitUsage
	}
	return healthprobe.ExitCode(err)
}

// flags binds every Config field to a flag, defaults from scaler.DefaultConfig.
func flags(fs *flag.FlagSet, c *scaler.Config) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "gRPC address KEDA calls (host:port)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "HTTP address of /metrics and /healthz")
	fs.StringVar(&c.PrometheusAddress, "prometheus-address", c.PrometheusAddress, "default Prometheus base URL for ScaledObjects without prometheusAddress; not given: $"+envflag.PrometheusAddress+" (a Secret's value keeps a password out of the arguments); the flag wins, even empty")
	fs.DurationVar(&c.RefreshInterval, "refresh-interval", c.RefreshInterval, "how often queries are evaluated and decisions refreshed [100ms, 10m]")
	fs.DurationVar(&c.QueryTimeout, "query-timeout", c.QueryTimeout, "timeout of one Prometheus query [100ms, 5m]")
	fs.IntVar(&c.QueryConcurrency, "query-concurrency", c.QueryConcurrency, "Prometheus queries in flight at once to each Prometheus address (every address has its own slots, so a slow one delays only its own queries) [1, 256]")
	fs.Int64Var(&c.QueryMaxResponseBytes, "query-max-response-bytes", c.QueryMaxResponseBytes, "bytes of Prometheus answers held at once, one alone and all in flight together [65536, 1073741824]")
	fs.DurationVar(&c.ForgetAfter, "forget-after", c.ForgetAfter, "drop a ScaledObject trigger KEDA has not called about for this long")
	fs.StringVar(&c.NamespaceLabel, "namespace-label", c.NamespaceLabel, "series label carrying the Kubernetes namespace (query confinement)")
	fs.StringVar(&c.PodLabel, "pod-label", c.PodLabel, "series label carrying the pod name")
	fs.StringVar(&c.WatchNamespace, "watch-namespace", c.WatchNamespace, "serve and watch (ScaledObjects, Deployments, StatefulSets) only this namespace; empty: all namespaces")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig path, a regular file of at most 1 MiB; empty: in-cluster config in a pod, no Kubernetes access otherwise")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "serve gRPC over TLS with this certificate (PEM)")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "private key of --tls-cert-file (PEM)")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", c.TLSClientCAFile, "require client certificates signed by this CA (mTLS)")
	fs.DurationVar(&c.GracefulStopTimeout, "graceful-stop-timeout", c.GracefulStopTimeout, "wait this long for in-flight RPCs on SIGTERM [0s, 5m]")
	fs.BoolVar(&c.ObjectMetrics, "object-metrics", c.ObjectMetrics, "export per-ScaledObject decision series on /metrics (up to 20 per ScaledObject)")
	fs.IntVar(&c.ObjectMetricsMaxTriggers, "object-metrics-max-triggers", c.ObjectMetricsMaxTriggers, "export per-ScaledObject series only while at most this many triggers are registered (a scrape holds every series in memory); 0: no bound")
	fs.IntVar(&c.MaxTriggers, "max-triggers", c.MaxTriggers, "ScaledObject triggers registered at once [1, 1000000]; a new one past it is answered ResourceExhausted until unused ones are forgotten (--forget-after)")
	fs.StringVar(&c.OpenCostAddress, "opencost-address", c.OpenCostAddress, "OpenCost base URL (API port 9003); prices triggers without gpuHourPrice from OpenCost's allocation API (gpuHourPrice wins, never both); not given: $"+envflag.OpenCostAddress+"; empty: off")
	fs.DurationVar(&c.OpenCostWindow, "opencost-window", c.OpenCostWindow, "window OpenCost's replica-hour price is read over, whole minutes [10m, 168h]")
	fs.DurationVar(&c.OpenCostRefresh, "opencost-refresh", c.OpenCostRefresh, "how often each namespace's OpenCost prices are read [1m, 1h]; a price 3 refresh intervals old is dropped at the next refresh")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "json or text")
}

// fromEnv fills --prometheus-address and --opencost-address, where the command line did not
// give them, from $INFERSCALE_PROMETHEUS_ADDRESS and $INFERSCALE_OPENCOST_ADDRESS
// (envflag.Address; call after fs.Parse). Either address may carry a password, and the
// arguments are readable by anyone who reads the pod spec: the chart passes them from a Secret
// in the environment instead.
func fromEnv(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) error {
	return errors.Join(
		envflag.Address(fs, "prometheus-address", envflag.PrometheusAddress, lookupEnv),
		envflag.Address(fs, "opencost-address", envflag.OpenCostAddress, lookupEnv))
}

func run(args []string) error {
	cfg := scaler.DefaultConfig()
	fs := flag.NewFlagSet("scaler", flag.ContinueOnError)
	flags(fs, &cfg)
	showVersion := version.Flag(fs)
	var probe healthprobe.Config
	healthprobe.Flags(fs, &probe)
	if err := decimalflag.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h, --help: fs printed the usage; exit 0
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *showVersion {
		fmt.Println(version.String("scaler"))
		return nil
	}
	if probe.Address != "" { // helm test: the scaler's image probes the scaler's Service
		status, err := healthprobe.Check(context.Background(), probe)
		fmt.Println(status)
		return err
	}
	if fs.NArg() > 0 {
		// A usage error, exit 2 like a flag that does not parse. The usual cause is a boolean
		// flag given its value apart (--object-metrics false), which also stops the parse there.
		return fmt.Errorf("%w: unexpected arguments %q: scaler takes only flags, and the flags after %q were not read (a boolean flag takes its value as --object-metrics=false)",
			errUsage, fs.Args(), fs.Arg(0))
	}
	envErr := fromEnv(fs, os.LookupEnv) // before Validate, which reads what it set
	if err := errors.Join(envErr, cfg.Validate()); err != nil {
		return fmt.Errorf("invalid flags:\n%w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return scaler.Run(ctx, cfg)
}
