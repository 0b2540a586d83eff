package main

import (
	"flag"
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
	if err := fs.Parse([]string{"--listen=:9191", "--prometheus-address=http://127.0.0.1:9091", "--metrics-listen=:8181", "--refresh-interval=2s", "--tls-cert-file=/c", "--tls-key-file=/k", "--object-metrics-max-triggers=50", "--watch-namespace=team-a"}); err != nil {
		t.Fatal(err)
	}
	want := scaler.DefaultConfig()
	want.Listen, want.PrometheusAddress, want.MetricsListen, want.RefreshInterval = ":9191", "http://127.0.0.1:9091", ":8181", 2*time.Second
	want.TLSCertFile, want.TLSKeyFile = "/c", "/k"
	want.ObjectMetricsMaxTriggers = 50
	want.WatchNamespace = "team-a"
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	err := run([]string{"--refresh-interval=0s", "--log-format=xml", "--watch-namespace=team/a"})
	if err == nil || !strings.Contains(err.Error(), "RefreshInterval 0s: must be in [100ms, 10m]") || !strings.Contains(err.Error(), `LogFormat "xml"`) ||
		!strings.Contains(err.Error(), `WatchNamespace "team/a"`) {
		t.Fatalf("run = %v, want all three violations named", err)
	}
}
