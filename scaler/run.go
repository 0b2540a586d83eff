package scaler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/opencost"
)

// NewLogger returns the structured logger cfg asks for, writing to w.
func NewLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	lvl, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationString}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// durationString writes time.Duration attributes as Duration.String ("5s",
// "1m30s") rather than slog's JSON default of integer nanoseconds.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// MaxRequestBytes bounds one gRPC request the scaler reads (grpc.MaxRecvMsgSize): a
// ScaledObjectRef carries at most MaxMetadataBytes of metadata (checkRef refuses more, naming
// the limit), a name of 253 bytes, a namespace of 63 and a metric name of 56, and 96 KiB more
// is far more than the entries' framing takes. gRPC's default, 4 MiB, let one call of tiny
// metadata entries decode into a map of 400,000 entries (17 MiB of heap) before checkRef
// refused it, for every call in flight at once. A larger request is refused by gRPC before
// it is read (ResourceExhausted, "received message larger than max").
const MaxRequestBytes = MaxMetadataBytes + 96<<10

// stopHandlersWait bounds the wait for RPC handlers after a forced stop.
const stopHandlersWait = time.Second

// Run serves the scaler until ctx is done, then stops gracefully (in-flight
// RPCs get GracefulStopTimeout) and returns nil; it returns an error when cfg
// is invalid or a listener or dependency cannot start. Logs go to stderr.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	log, err := NewLogger(cfg, os.Stderr)
	if err != nil {
		return err
	}
	grpcLis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	httpLis, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("listen %s: %w", cfg.MetricsListen, err)
	}
	return serve(ctx, cfg, log, grpcLis, httpLis, nil)
}

// serve runs everything on the given listeners (closed on return). signals,
// when non-nil, replaces the Prometheus poller (tests).
func serve(ctx context.Context, cfg Config, log *slog.Logger, grpcLis, httpLis net.Listener, signals Signals) (err error) {
	defer grpcLis.Close()
	defer httpLis.Close()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	g, gctx := errgroup.WithContext(ctx)
	if signals == nil {
		poller, err := prom.NewPoller(prom.PollerConfig{
			DefaultAddress:   cfg.PrometheusAddress,
			RefreshInterval:  cfg.RefreshInterval,
			QueryTimeout:     cfg.QueryTimeout,
			Concurrency:      cfg.QueryConcurrency,
			ForgetAfter:      cfg.ForgetAfter,
			NamespaceLabel:   cfg.NamespaceLabel,
			PodLabel:         cfg.PodLabel,
			MaxResponseBytes: cfg.QueryMaxResponseBytes,
		}, reg, log.With("component", "poller"))
		if err != nil {
			return err
		}
		g.Go(func() error { return poller.Run(gctx) })
		signals = PollerSignals(poller)
	}

	targets, err := startTargets(gctx, g, cfg, log.With("component", "kube"))
	if err != nil {
		return err
	}

	hs := health.NewServer()
	srv, err := NewServer(ServerConfig{
		Defaults:            Defaults{PrometheusAddress: cfg.PrometheusAddress},
		RefreshInterval:     cfg.RefreshInterval,
		ForgetAfter:         cfg.ForgetAfter,
		WatchNamespace:      cfg.WatchNamespace,
		FirstEvaluationWait: DefaultFirstEvaluationWait,
		MaxTriggers:         cfg.MaxTriggers,
	}, signals, targets, log.With("component", "server"), hs)
	if err != nil {
		return err
	}
	if cfg.OpenCostAddress != "" {
		oc, err := opencost.New(opencost.Config{Address: cfg.OpenCostAddress})
		if err != nil {
			return err
		}
		srv.prices = newOpenCostPrices(oc, cfg.OpenCostWindow, cfg.OpenCostRefresh, log.With("component", "opencost"))
		reg.MustRegister(srv.prices.failures, srv.prices.refused)
		g.Go(func() error { return srv.prices.Run(gctx) })
		if targets == nil {
			log.Warn("--opencost-address is set but the scaler has no Kubernetes access: no trigger's scale target is known, so none is priced by OpenCost (gpuHourPrice still applies)",
				"opencostAddress", oc.Address())
		}
	}
	dc := newDecisionCollector(srv)
	dc.perObject, dc.maxTriggers = cfg.ObjectMetrics, cfg.ObjectMetricsMaxTriggers
	reg.MustRegister(dc, newCostCollector(dc))
	rm, err := newRPCMetrics(reg)
	if err != nil {
		return err
	}

	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(rm.unary), grpc.ChainStreamInterceptor(rm.stream),
		grpc.MaxRecvMsgSize(MaxRequestBytes)}
	if cfg.TLSCertFile != "" {
		creds, err := serverTLS(cfg)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterExternalScalerServer(gs, srv)
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	hsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: metricsWriteTimeout,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}

	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error {
		if err := gs.Serve(grpcLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := hsrv.Serve(httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics http: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		start := time.Now()
		log.Info("shutting down: draining in-flight RPCs", "gracefulStopTimeout", cfg.GracefulStopTimeout)
		hs.Shutdown()
		srv.Stop()
		done := make(chan struct{})
		go func() { gs.GracefulStop(); close(done) }()
		t := time.NewTimer(cfg.GracefulStopTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			log.Warn("graceful stop timed out; closing connections", "timeout", cfg.GracefulStopTimeout)
			// Stop cancels every RPC's context, and every handler returns once
			// its context ends (ensure's registration wait included), so
			// GracefulStop returns right after; the bound below only keeps a
			// handler that does not from holding the process.
			gs.Stop()
			select {
			case <-done:
			case <-time.After(stopHandlersWait):
				log.Warn("RPC handlers still running after stop; not waiting for them", "waited", stopHandlersWait)
			}
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := hsrv.Shutdown(sctx)
		attrs := []any{"took", time.Since(start).Round(time.Millisecond)}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		log.Info("stopped", attrs...)
		return err
	})
	log.Info("scaler serving", "grpc", grpcLis.Addr().String(), "metrics", httpLis.Addr().String(),
		"prometheusAddress", prom.RedactAddress(cfg.PrometheusAddress), "refreshInterval", cfg.RefreshInterval,
		"tls", cfg.TLSCertFile != "", "mtls", cfg.TLSClientCAFile != "", "kubernetes", targets != nil,
		"opencostAddress", prom.RedactAddress(cfg.OpenCostAddress))
	return g.Wait()
}

// MaxMetricsScrapes bounds the /metrics scrapes served at once; one more is answered 503
// (promhttp's MaxRequestsInFlight) at once. Each scrape gathers every series in memory before
// encoding it (≈ 15 MiB at the default --object-metrics-max-triggers, ≈ 180 MiB with no bound
// at 10,000 triggers), so concurrent scrapes, from any client that reaches the port, added up
// without limit. Two Prometheus replicas and a person with curl fit in 4.
const MaxMetricsScrapes = 4

// metricsWriteTimeout bounds one /metrics or /healthz response (http.Server.WriteTimeout), so
// a client that stops reading cannot hold a scrape's place and its gathered series.
const metricsWriteTimeout = time.Minute

// metricsHandler serves reg on /metrics with at most MaxMetricsScrapes scrapes at once.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, MaxRequestsInFlight: MaxMetricsScrapes})
}

// serverTLS loads the server certificate and, for mTLS, the client CA.
func serverTLS(cfg Config) (credentials.TransportCredentials, error) {
	certPEM, err := boundedfile.ReadPEM("TLSCertFile (--tls-cert-file)", cfg.TLSCertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := boundedfile.ReadPEM("TLSKeyFile (--tls-key-file)", cfg.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLSCertFile/TLSKeyFile: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCAFile != "" {
		pemBytes, err := boundedfile.ReadPEM("TLSClientCAFile (--tls-client-ca-file)", cfg.TLSClientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("TLSClientCAFile %q: no PEM certificate found", cfg.TLSClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(tc), nil
}
