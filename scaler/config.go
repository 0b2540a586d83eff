package scaler

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/inferscale/inferscale/prom"
)

// Config configures the scaler process (cmd/scaler's flags; the Helm chart's
// scaler values). DefaultConfig holds the defaults the chart is tested against.
type Config struct {
	// Listen is the gRPC address KEDA calls (host:port). Default ":9090".
	Listen string
	// MetricsListen is the HTTP address of /metrics and /healthz. Default ":8080".
	MetricsListen string
	// PrometheusAddress is the default Prometheus base URL for ScaledObjects
	// that set no prometheusAddress. Default "" (every ScaledObject must set one).
	PrometheusAddress string
	// RefreshInterval: every distinct query is evaluated, and every trigger
	// re-decided, once per interval. Default 5s, range [100ms, 10m].
	RefreshInterval time.Duration
	// QueryTimeout bounds one Prometheus query. Default 10s, range [100ms, 5m].
	QueryTimeout time.Duration
	// QueryConcurrency is how many queries run at once to each Prometheus address (every
	// address has its own slots, so a slow one delays only its own queries). Default 8, range
	// [1, 256].
	QueryConcurrency int
	// QueryMaxResponseBytes bounds the Prometheus answers held at once, in bytes
	// (prom.PollerConfig.MaxResponseBytes: one answer, and all in flight
	// together); a query past it fails instead of growing the process. Default
	// 16 MiB (prom.DefaultMaxResponseBytes: 10,000 preset ScaledObjects'
	// bundles are ≈ 9 MB), range [64 KiB, 1 GiB]; raise it with --max-triggers
	// and the memory limit.
	QueryMaxResponseBytes int64
	// ForgetAfter drops a ScaledObject trigger (and its queries) that KEDA
	// has not called about for this long. Default 10m, ≥ RefreshInterval.
	ForgetAfter time.Duration
	// NamespaceLabel is the series label carrying the Kubernetes namespace;
	// every query is confined by it. Default "namespace".
	NamespaceLabel string
	// PodLabel is the series label carrying the pod name. Default "pod".
	PodLabel string
	// WatchNamespace confines the scaler to one Kubernetes namespace: the
	// informers list and watch ScaledObjects, Deployments and StatefulSets
	// only there (so a namespaced Role suffices), and an RPC for a
	// ScaledObject in any other namespace is answered InvalidArgument
	// naming both namespaces (with or without Kubernetes access), rather
	// than served from metadata bounds for an object the scaler cannot see.
	// Default "" (all namespaces, a ClusterRole); otherwise a DNS-1123
	// label (the Helm chart sets the release namespace).
	WatchNamespace string
	// Kubeconfig is a kubeconfig path; empty means in-cluster config when
	// running in a pod, and no Kubernetes access otherwise (bounds from
	// metadata, ready replicas from readyQuery). It must be a regular file of
	// at most 1 MiB (kubeconfigfile.MaxBytes), and so must each certificate,
	// key and token file its current context names; they are read, bounded,
	// when the scaler starts. $KUBECONFIG and ~/.kube/config are not read.
	Kubeconfig string
	// TLSCertFile and TLSKeyFile serve gRPC over TLS (both or neither). KEDA
	// verifies the certificate with its `caCert` auth parameter.
	TLSCertFile, TLSKeyFile string
	// TLSClientCAFile, with TLS, requires client certificates signed by this
	// CA (mTLS; KEDA's `tlsClientCert`/`tlsClientKey`).
	TLSClientCAFile string
	// GracefulStopTimeout bounds the wait for in-flight RPCs on shutdown.
	// Default 10s, range [0s, 5m].
	GracefulStopTimeout time.Duration
	// ObjectMetrics exports per-ScaledObject decision series on /metrics
	// (up to 20 series per trigger, built at scrape time). Default true.
	ObjectMetrics bool
	// ObjectMetricsMaxTriggers bounds ObjectMetrics: while more triggers
	// than this are registered, a scrape carries only the aggregate series
	// (inferscale_scaler_triggers{,_active,_degraded,_no_data} and
	// inferscale_scaler_object_metrics 0). A scrape holds every series in
	// memory at once, ≈ 0.6–0.9 KiB each: 10,000 triggers (≈ 200,000
	// series) measured 190 MiB RSS after one scrape. Default 1000
	// (≈ 20,000 series, ≈ 15 MiB transient), range [0, 1000000]; 0: no bound.
	ObjectMetricsMaxTriggers int
	// MaxTriggers bounds the triggers (ScaledObject, metadata) registered
	// at once; a new one past it is answered ResourceExhausted naming
	// --max-triggers, until unused triggers are forgotten (ForgetAfter).
	// Each costs memory and queries per refresh, and any gRPC caller can
	// invent them: 20,000 custom triggers of three distinct queries each
	// measured 597 MiB RSS and 60,000 queries per refresh, far past the
	// chart's 128Mi limit. Default 10,000, the count the scaler's memory is
	// measured and sized for (docs/scaler.md, "Memory"), range
	// [1, 1000000].
	MaxTriggers int
	// OpenCostAddress is OpenCost's base URL (its API port, 9003: e.g.
	// http://opencost.opencost.svc:9003), validated as PrometheusAddress is; with it, a
	// trigger without gpuHourPrice whose scale target is known (cluster mode: an apps/v1
	// Deployment or StatefulSet) is priced by OpenCost's Allocation API
	// (scaler/opencost; https://opencost.io/docs/integrations/api). gpuHourPrice always
	// wins: the two are never both used nor summed. Default "" (off).
	OpenCostAddress string
	// OpenCostWindow is the window the price is read over (OpenCost's window parameter): Σ
	// totalCost ÷ (Σ minutes ÷ 60) over the target's pods in the last OpenCostWindow. Default
	// 1h, range [10m, 168h] (7 days), whole minutes.
	OpenCostWindow time.Duration
	// OpenCostRefresh is how often each namespace's prices are read (one query per namespace
	// per refresh); a namespace's prices with no good answer for 3 refreshes are dropped.
	// Default 10m, range [1m, 1h].
	OpenCostRefresh time.Duration
	// LogLevel is debug, info, warn or error. Default "info".
	LogLevel string
	// LogFormat is json or text. Default "json".
	LogFormat string
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Listen:                   ":9090",
		MetricsListen:            ":8080",
		RefreshInterval:          5 * time.Second,
		QueryTimeout:             10 * time.Second,
		QueryConcurrency:         8,
		QueryMaxResponseBytes:    prom.DefaultMaxResponseBytes,
		ForgetAfter:              10 * time.Minute,
		NamespaceLabel:           "namespace",
		PodLabel:                 "pod",
		GracefulStopTimeout:      10 * time.Second,
		ObjectMetrics:            true,
		ObjectMetricsMaxTriggers: 1000,
		MaxTriggers:              10000,
		OpenCostWindow:           time.Hour,
		OpenCostRefresh:          10 * time.Minute,
		LogLevel:                 "info",
		LogFormat:                "json",
	}
}

// Validate returns every violation, each naming the field, its cmd/scaler
// flag and the accepted range, e.g. "RefreshInterval (--refresh-interval) 0s:
// must be in [100ms, 10m]".
func (c Config) Validate() error {
	var errs []error
	addr := func(field, v string) {
		if _, _, err := net.SplitHostPort(v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: must be host:port (e.g. \":9090\"): %v", field, v, err))
		}
	}
	addr("Listen (--listen)", c.Listen)
	addr("MetricsListen (--metrics-listen)", c.MetricsListen)
	if c.PrometheusAddress != "" {
		if err := prom.CheckAddress(c.PrometheusAddress); err != nil {
			errs = append(errs, fmt.Errorf("PrometheusAddress (--prometheus-address) %w; want empty or %s", err, prom.AddressRule))
		}
	}
	if c.RefreshInterval < 100*time.Millisecond || c.RefreshInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("RefreshInterval (--refresh-interval) %v: must be in [100ms, 10m]", c.RefreshInterval))
	}
	if c.QueryTimeout < 100*time.Millisecond || c.QueryTimeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("QueryTimeout (--query-timeout) %v: must be in [100ms, 5m]", c.QueryTimeout))
	}
	if c.QueryConcurrency < 1 || c.QueryConcurrency > 256 {
		errs = append(errs, fmt.Errorf("QueryConcurrency (--query-concurrency) %d: must be in [1, 256]", c.QueryConcurrency))
	}
	if c.QueryMaxResponseBytes < 64<<10 || c.QueryMaxResponseBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("QueryMaxResponseBytes (--query-max-response-bytes) %d: must be in [65536, 1073741824] (64 KiB, 1 GiB)", c.QueryMaxResponseBytes))
	}
	if c.ForgetAfter < c.RefreshInterval {
		errs = append(errs, fmt.Errorf("ForgetAfter (--forget-after) %v: must be ≥ RefreshInterval (--refresh-interval, %v)", c.ForgetAfter, c.RefreshInterval))
	}
	for _, l := range []struct{ field, v string }{{"NamespaceLabel (--namespace-label)", c.NamespaceLabel}, {"PodLabel (--pod-label)", c.PodLabel}} {
		if !prom.ValidLabelName(l.v) {
			errs = append(errs, fmt.Errorf("%s %q: must be %s", l.field, l.v, prom.LabelNameRule))
		}
	}
	if c.WatchNamespace != "" {
		if msgs := validation.IsDNS1123Label(c.WatchNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("WatchNamespace (--watch-namespace) %q: must be empty (all namespaces) or a namespace name (DNS-1123 label: %s)", c.WatchNamespace, strings.Join(msgs, "; ")))
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, fmt.Errorf("TLSCertFile (--tls-cert-file) and TLSKeyFile (--tls-key-file): must be set together (got cert %q, key %q)", c.TLSCertFile, c.TLSKeyFile))
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		errs = append(errs, errors.New("TLSClientCAFile (--tls-client-ca-file): requires TLSCertFile and TLSKeyFile (mTLS is TLS with client certificates)"))
	}
	if c.GracefulStopTimeout < 0 || c.GracefulStopTimeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("GracefulStopTimeout (--graceful-stop-timeout) %v: must be in [0s, 5m]", c.GracefulStopTimeout))
	}
	if c.ObjectMetricsMaxTriggers < 0 || c.ObjectMetricsMaxTriggers > 1000000 {
		errs = append(errs, fmt.Errorf("ObjectMetricsMaxTriggers (--object-metrics-max-triggers) %d: must be in [0, 1000000] (0: no bound)", c.ObjectMetricsMaxTriggers))
	}
	if c.MaxTriggers < 1 || c.MaxTriggers > 1000000 {
		errs = append(errs, fmt.Errorf("MaxTriggers (--max-triggers) %d: must be in [1, 1000000]", c.MaxTriggers))
	}
	if c.OpenCostAddress != "" {
		if err := prom.CheckAddress(c.OpenCostAddress); err != nil {
			errs = append(errs, fmt.Errorf("OpenCostAddress (--opencost-address) %w; want empty (off) or %s", err, prom.AddressRule))
		}
	}
	if c.OpenCostWindow < 10*time.Minute || c.OpenCostWindow > 7*24*time.Hour || c.OpenCostWindow%time.Minute != 0 {
		errs = append(errs, fmt.Errorf("OpenCostWindow (--opencost-window) %v: must be whole minutes in [10m, 168h] (7 days)", c.OpenCostWindow))
	}
	if c.OpenCostRefresh < time.Minute || c.OpenCostRefresh > time.Hour {
		errs = append(errs, fmt.Errorf("OpenCostRefresh (--opencost-refresh) %v: must be in [1m, 1h]", c.OpenCostRefresh))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("LogFormat (--log-format) %q: must be json or text", c.LogFormat))
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("LogLevel (--log-level) %q: must be one of debug, info, warn, error", s)
}
