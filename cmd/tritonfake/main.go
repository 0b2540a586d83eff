// Command tritonfake runs the fake Triton Inference Server of package
// residency/tritontest as a process: Triton's gRPC protocol subset on
// --grpc-listen and Triton's Prometheus metrics on --metrics-listen, with a
// model repository and a device described by a YAML file (see example.yaml).
// It lets the e2e suite, the demo and users without a GPU run inferscale's
// residency controller against something that behaves like Triton.
//
// On SIGTERM or SIGINT it stops taking requests and waits up to
// --exit-timeout for in-flight requests, as Triton's --exit-timeout-secs.
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
	"syscall"
	"time"

	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/version"
	"github.com/inferscale/inferscale/residency/tritontest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tritonfake:", err)
		os.Exit(1)
	}
}

// maxConfigBytes bounds the --config file (1 MiB; example.yaml is about 2 KiB):
// --config=/dev/zero was read until the process held 24 GB.
const maxConfigBytes = 1 << 20

// loadConfig reads and validates the YAML file at path (tritontest.ParseConfig); the error
// names the file, the field and, for a field that does not decode, its line.
func loadConfig(path string) (tritontest.Config, error) {
	data, err := boundedfile.Read(path, maxConfigBytes)
	if err != nil {
		return tritontest.Config{}, fmt.Errorf("read --config: %w", err)
	}
	cfg, err := tritontest.ParseConfig(data)
	if err != nil {
		return tritontest.Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// options are the command's flags.
type options struct {
	grpcListen, metricsListen, config string
	exitTimeout                       time.Duration
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("tritonfake", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.grpcListen, "grpc-listen", ":8001", "address of Triton's gRPC endpoint")
	fs.StringVar(&o.metricsListen, "metrics-listen", ":8002", "address of the Prometheus /metrics endpoint")
	fs.StringVar(&o.config, "config", "", "YAML file describing the device and the model repository (required; see cmd/tritonfake/example.yaml)")
	fs.DurationVar(&o.exitTimeout, "exit-timeout", 30*time.Second, "how long to wait for in-flight requests after SIGTERM (Triton's --exit-timeout-secs); >= 0")
	showVersion := version.Flag(fs)
	if err := decimalflag.Parse(fs, args); err != nil {
		return o, err
	}
	if *showVersion {
		return o, version.ErrRequested
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if o.config == "" {
		errs = append(errs, errors.New("--config is required: a YAML file, see cmd/tritonfake/example.yaml"))
	}
	if o.grpcListen == "" {
		errs = append(errs, errors.New("--grpc-listen is empty, want host:port"))
	}
	if o.metricsListen == "" {
		errs = append(errs, errors.New("--metrics-listen is empty, want host:port"))
	}
	if o.exitTimeout < 0 {
		errs = append(errs, fmt.Errorf("--exit-timeout is %v, want >= 0", o.exitTimeout))
	}
	return o, errors.Join(errs...)
}

// run serves until ctx ends, then shuts down gracefully. started, when not
// nil, is called with the gRPC address and metrics URL once serving. After
// -h/--help it returns nil: the usage has been printed to stderr.
func run(ctx context.Context, args []string, stderr io.Writer, started func(grpcAddr, metricsURL string)) error {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if errors.Is(err, version.ErrRequested) {
		fmt.Println(version.String("tritonfake"))
		return nil
	}
	if err != nil {
		return err
	}
	cfg, err := loadConfig(o.config)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	srv, err := tritontest.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Listen(o.grpcListen, o.metricsListen); err != nil {
		return err
	}
	log.Info("serving fake Triton", "grpc", srv.GRPCAddr(), "metrics", srv.MetricsURL(),
		"mode", cfg.ModelControlMode, "deviceMemoryBytes", cfg.DeviceMemoryBytes, "models", len(cfg.Models))
	if started != nil {
		started(srv.GRPCAddr(), srv.MetricsURL())
	}
	<-ctx.Done()
	log.Info("stopping: no new requests, waiting for in-flight ones", "exitTimeout", o.exitTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.exitTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Triton exits after --exit-timeout-secs with requests still in
		// flight; so does the fake, and says so.
		log.Warn("exit timeout reached with requests in flight", "err", err)
	}
	return nil
}
