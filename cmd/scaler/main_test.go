package main

import (
	"flag"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/scaler"
)

func TestFlagsFillConfig(t *testing.T) {
	cfg := scaler.DefaultConfig()
	fs := flag.NewFlagSet("scaler", flag.ContinueOnError)
	flags(fs, &cfg)
	if err := fs.Parse([]string{"--listen=:9191", "--prometheus-address=http://127.0.0.1:9091", "--metrics-listen=:8181", "--refresh-interval=2s", "--tls-cert-file=/c", "--tls-key-file=/k", "--object-metrics-max-triggers=50", "--watch-namespace=team-a",
		"--opencost-address=http://opencost.opencost.svc:9003", "--opencost-window=24h", "--opencost-refresh=5m"}); err != nil {
		t.Fatal(err)
	}
	want := scaler.DefaultConfig()
	want.Listen, want.PrometheusAddress, want.MetricsListen, want.RefreshInterval = ":9191", "http://127.0.0.1:9091", ":8181", 2*time.Second
	want.TLSCertFile, want.TLSKeyFile = "/c", "/k"
	want.ObjectMetricsMaxTriggers = 50
	want.WatchNamespace = "team-a"
	want.OpenCostAddress, want.OpenCostWindow, want.OpenCostRefresh = "http://opencost.opencost.svc:9003", 24*time.Hour, 5*time.Minute
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

// TestValidationNamesRealFlags checks that every flag a Config.Validate
// error names, "Field (--flag)", is one cmd/scaler defines.
func TestValidationNamesRealFlags(t *testing.T) {
	c := scaler.DefaultConfig()
	c.Listen, c.MetricsListen, c.PrometheusAddress = "x", "y", "prometheus:9090"
	c.RefreshInterval, c.QueryTimeout, c.QueryConcurrency, c.ForgetAfter = 0, 0, 0, -1
	c.NamespaceLabel, c.PodLabel, c.WatchNamespace = "a-b", "c-d", "Team_A"
	c.TLSCertFile, c.TLSClientCAFile = "/c", "/ca"
	c.GracefulStopTimeout, c.ObjectMetricsMaxTriggers, c.LogLevel, c.LogFormat = -1, -1, "loud", "xml"
	c.OpenCostAddress, c.OpenCostWindow, c.OpenCostRefresh = "opencost:9003", 0, 0
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate() = nil")
	}
	fs := flag.NewFlagSet("scaler", flag.ContinueOnError)
	cfg := scaler.DefaultConfig()
	flags(fs, &cfg)
	named := regexp.MustCompile(`\(--([a-z-]+)[,)]`).FindAllStringSubmatch(err.Error(), -1)
	lines := strings.Split(err.Error(), "\n")
	if len(named) < len(lines) {
		t.Errorf("%d flags named in %d violations, want one at least per violation:\n%v", len(named), len(lines), err)
	}
	for _, m := range named {
		if fs.Lookup(m[1]) == nil {
			t.Errorf("validation names --%s, which cmd/scaler does not define", m[1])
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	err := run([]string{"--refresh-interval=0s", "--log-format=xml", "--watch-namespace=team/a"})
	if err == nil || !strings.Contains(err.Error(), "RefreshInterval (--refresh-interval) 0s: must be in [100ms, 10m]") || !strings.Contains(err.Error(), `LogFormat (--log-format) "xml"`) ||
		!strings.Contains(err.Error(), `WatchNamespace (--watch-namespace) "team/a"`) {
		t.Fatalf("run = %v, want all three violations named", err)
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		if err := run([]string{arg}); err != nil {
			t.Errorf("run(%q) = %v, want nil (usage printed, exit 0)", arg, err)
		}
	}
}

// TestRunRefusesReservedLabels: --namespace-label=__name__ and a reserved --pod-label are
// refused at startup like any invalid flag value ("invalid flags:", one line per flag naming
// it and the accepted form, exit 1), before anything listens. Before, both were accepted.
func TestRunRefusesReservedLabels(t *testing.T) {
	const rule = `must be a label name matching [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus's internal labels, such as __name__)`
	// --listen names a port in use, so that a run accepting the labels fails at once instead
	// of serving.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run([]string{"--namespace-label=__name__", "--pod-label=__meta_kubernetes_pod_name", "--listen=" + ln.Addr().String(), "--metrics-listen=127.0.0.1:0"})
	want := "invalid flags:\n" + `NamespaceLabel (--namespace-label) "__name__": ` + rule + "\n" + `PodLabel (--pod-label) "__meta_kubernetes_pod_name": ` + rule
	if err == nil || err.Error() != want || exitCode(err) != 1 {
		t.Errorf("run = %v (exit %d),\nwant exit 1 and %s", err, exitCode(err), want)
	}
}

// TestRunRedactsPrometheusAddress: a refused --prometheus-address is printed without its
// password or query values.
func TestRunRedactsPrometheusAddress(t *testing.T) {
	err := run([]string{"--prometheus-address=http://reader:s3cretPassw0rd@169.254.169.254:9090/?token=t0kenValue"})
	const want = "invalid flags:\n" + `PrometheusAddress (--prometheus-address) "http://reader:xxxxx@169.254.169.254:9090/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want empty or an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`
	if err == nil || err.Error() != want {
		t.Errorf("run = %v,\nwant %s", err, want)
	}
}
