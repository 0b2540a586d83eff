package scaler

import (
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give func(*Config)
		want []string
	}{
		{"listen", func(c *Config) { c.Listen = "9090" }, []string{`Listen (--listen) "9090": must be host:port`}},
		{"refresh", func(c *Config) { c.RefreshInterval = 0 }, []string{"RefreshInterval (--refresh-interval) 0s: must be in [100ms, 10m]"}},
		{"prometheus", func(c *Config) { c.PrometheusAddress = "prometheus:9090" }, []string{"PrometheusAddress"}},
		{"tls pair", func(c *Config) { c.TLSCertFile = "/tls/tls.crt" }, []string{"TLSCertFile (--tls-cert-file) and TLSKeyFile (--tls-key-file): must be set together"}},
		{"mtls without tls", func(c *Config) { c.TLSClientCAFile = "/tls/ca.crt" }, []string{"TLSClientCAFile (--tls-client-ca-file): requires TLSCertFile"}},
		{"object metrics bound", func(c *Config) { c.ObjectMetricsMaxTriggers = -1 }, []string{"ObjectMetricsMaxTriggers (--object-metrics-max-triggers) -1: must be in [0, 1000000] (0: no bound)"}},
		{"watch namespace", func(c *Config) { c.WatchNamespace = "Team_A" }, []string{`WatchNamespace (--watch-namespace) "Team_A": must be empty (all namespaces) or a namespace name (DNS-1123 label`}},
		{"labels", func(c *Config) { c.NamespaceLabel = "kubernetes-namespace" }, []string{`NamespaceLabel (--namespace-label) "kubernetes-namespace": must be a label name`}},
		{"opencost address", func(c *Config) { c.OpenCostAddress = "http://u:pw@169.254.169.254:9003" }, []string{`OpenCostAddress (--opencost-address) "http://u:xxxxx@169.254.169.254:9003": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want empty (off) or an http:// or https:// URL`}},
		{"opencost window", func(c *Config) { c.OpenCostWindow = 9 * time.Minute }, []string{"OpenCostWindow (--opencost-window) 9m0s: must be whole minutes in [10m, 168h] (7 days)"}},
		{"opencost window max", func(c *Config) { c.OpenCostWindow = 169 * time.Hour }, []string{"OpenCostWindow (--opencost-window) 169h0m0s: must be whole minutes in [10m, 168h]"}},
		{"opencost window minutes", func(c *Config) { c.OpenCostWindow = time.Hour + time.Second }, []string{"OpenCostWindow (--opencost-window) 1h0m1s: must be whole minutes"}},
		{"opencost refresh", func(c *Config) { c.OpenCostRefresh = 59 * time.Second }, []string{"OpenCostRefresh (--opencost-refresh) 59s: must be in [1m, 1h]"}},
		{"opencost refresh max", func(c *Config) { c.OpenCostRefresh = 61 * time.Minute }, []string{"OpenCostRefresh (--opencost-refresh) 1h1m0s: must be in [1m, 1h]"}},
		{
			"every violation",
			func(c *Config) {
				c.QueryConcurrency, c.ForgetAfter, c.LogLevel, c.LogFormat, c.GracefulStopTimeout = 0, time.Second, "loud", "xml", -time.Second
			},
			[]string{"QueryConcurrency (--query-concurrency) 0: must be in [1, 256]", "ForgetAfter (--forget-after) 1s: must be ≥ RefreshInterval", `LogLevel (--log-level) "loud"`, `LogFormat (--log-format) "xml"`, "GracefulStopTimeout (--graceful-stop-timeout) -1s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.give(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			if got := len(strings.Split(err.Error(), "\n")); got != len(tt.want) {
				t.Errorf("%d violations, want %d: %v", got, len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not contain %q", err, w)
				}
			}
		})
	}
}

// TestConfigRefusesReservedLabels: --namespace-label and --pod-label must be label names
// Prometheus stores on a series: reserved "__" names (__name__ would confine every query to
// the metric named after the namespace) are refused like invalid ones, naming the flag and
// the accepted form. Before, __name__ and __meta_* passed.
func TestConfigRefusesReservedLabels(t *testing.T) {
	const rule = `must be a label name matching [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus's internal labels, such as __name__)`
	tests := []struct {
		ns, pod string
		want    string // "" when valid
	}{
		{"__name__", "pod", `NamespaceLabel (--namespace-label) "__name__": ` + rule},
		{"namespace", "__meta_kubernetes_pod_name", `PodLabel (--pod-label) "__meta_kubernetes_pod_name": ` + rule},
		{"__", "__", `NamespaceLabel (--namespace-label) "__": ` + rule + "\n" + `PodLabel (--pod-label) "__": ` + rule},
		{"kubernetes-namespace", "pod", `NamespaceLabel (--namespace-label) "kubernetes-namespace": ` + rule},
		{"namespace", "", `PodLabel (--pod-label) "": ` + rule},
		{"_namespace", "exported_pod", ""},
		{"k8s_namespace_name", "k8s_pod_name", ""},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.NamespaceLabel, c.PodLabel = tt.ns, tt.pod
		err := c.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("labels %q, %q: Validate() = %v, want nil", tt.ns, tt.pod, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("labels %q, %q: Validate() = %v,\nwant %s", tt.ns, tt.pod, err, tt.want)
		}
	}
}
