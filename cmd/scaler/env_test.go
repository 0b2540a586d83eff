package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/internal/envflag"
	"github.com/inferscale/inferscale/scaler"
)

// TestFromEnv: the addresses the command line does not give come from their variables; a flag
// given wins, and a refused value is an error naming the variable, its password redacted.
func TestFromEnv(t *testing.T) {
	type addrs struct{ Prometheus, OpenCost string }
	const (
		promEnv = "https://reader:s3cretPassw0rd@prom.monitoring.svc:9090"
		costEnv = "http://opencost.opencost.svc:9003"
	)
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    addrs
		wantErr string
	}{
		{name: "neither", want: addrs{}},
		{name: "env used",
			env:  map[string]string{envflag.PrometheusAddress: promEnv, envflag.OpenCostAddress: costEnv},
			want: addrs{promEnv, costEnv}},
		{name: "flags win",
			args: []string{"--prometheus-address=http://flag:9090", "--opencost-address="},
			env:  map[string]string{envflag.PrometheusAddress: promEnv, envflag.OpenCostAddress: costEnv},
			want: addrs{"http://flag:9090", ""}},
		{name: "refused values name their variables, redacted",
			env: map[string]string{envflag.PrometheusAddress: "http://reader:s3cretPassw0rd@169.254.169.254:9090/?token=t0kenValue",
				envflag.OpenCostAddress: "opencost:9003"},
			want: addrs{},
			wantErr: `$INFERSCALE_PROMETHEUS_ADDRESS (read as --prometheus-address is not given) "http://reader:xxxxx@169.254.169.254:9090/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address` + "\n" +
				`$INFERSCALE_OPENCOST_ADDRESS (read as --opencost-address is not given) "opencost:9003": must be an http:// or https:// URL with a host; want an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := scaler.DefaultConfig()
			fs := flag.NewFlagSet("scaler", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			flags(fs, &cfg)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := fromEnv(fs, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, addrs{cfg.PrometheusAddress, cfg.OpenCostAddress}); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunRedactsEnvAddress: run reports a refused $INFERSCALE_PROMETHEUS_ADDRESS with the
// flags Validate refuses, by the variable's name and without its password or token.
func TestRunRedactsEnvAddress(t *testing.T) {
	t.Setenv(envflag.PrometheusAddress, "http://reader:s3cretPassw0rd@169.254.169.254:9090/?token=t0kenValue")
	err := run([]string{"--refresh-interval=0s"})
	if err == nil {
		t.Fatal("run accepted a link-local $INFERSCALE_PROMETHEUS_ADDRESS")
	}
	for _, want := range []string{
		`$INFERSCALE_PROMETHEUS_ADDRESS (read as --prometheus-address is not given) "http://reader:xxxxx@169.254.169.254:9090/?token=xxxxx"`,
		"RefreshInterval (--refresh-interval)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("run = %v, want it to contain %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("run = %v: shows the secret", err)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit %d, want 1 (invalid flags)", exitCode(err))
	}
}
