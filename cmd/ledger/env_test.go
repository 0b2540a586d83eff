package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/internal/envflag"
)

// TestPrometheusAddressFromEnv: with --live and no --prometheus-address the address comes from
// $INFERSCALE_PROMETHEUS_ADDRESS (the chart's prometheus.addressSecret); the flag wins, and
// without --live the variable is not read (no "needs --live" for a variable left in a shell).
func TestPrometheusAddressFromEnv(t *testing.T) {
	const fromEnv = "https://reader:s3cretPassw0rd@prom.monitoring.svc:9090"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "live: env used", args: []string{"--live"}, want: fromEnv},
		{name: "live: flag wins", args: []string{"--live", "--prometheus-address=http://flag:9090"}, want: "http://flag:9090"},
		{name: "live: an empty flag wins, no peaks", args: []string{"--live", "--prometheus-address="}, want: ""},
		{name: "offline: not read", args: []string{"--spec=x"}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envflag.PrometheusAddress, fromEnv)
			c, _, err := parseFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.PrometheusAddress); diff != "" {
				t.Errorf("PrometheusAddress (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrometheusAddressRedacted: a refused address, from the variable or the flag, is bad input
// (exit 2) printed without its password or token; the variable's error names the variable.
func TestPrometheusAddressRedacted(t *testing.T) {
	const bad = "http://reader:s3cretPassw0rd@169.254.169.254:9090/?token=t0kenValue"
	tests := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{name: "env", args: []string{"--live"}, env: bad,
			want: `ledger: $INFERSCALE_PROMETHEUS_ADDRESS (read as --prometheus-address is not given) "http://reader:xxxxx@169.254.169.254:9090/?token=xxxxx": want an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`},
		{name: "flag", args: []string{"--live", "--prometheus-address=http://reader:s3cretPassw0rd@prom:9090/x#frag"},
			want: `ledger: --prometheus-address "http://reader:xxxxx@prom:9090/x#xxxxx": want an http:// or https:// URL`},
		{name: "pushgateway", args: []string{"--spec=x", "--pushgateway=http://pusher:s3cretPassw0rd@gw:9091/#t0ken"},
			want: `ledger: --pushgateway "http://pusher:xxxxx@gw:9091/#xxxxx": want an http:// or https:// URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envflag.PrometheusAddress, tt.env)
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			got := strings.TrimSpace(errb.String())
			if code != exitBad || !strings.HasPrefix(got, tt.want) {
				t.Errorf("exit %d, stderr %q\nwant %d, prefix %q", code, got, exitBad, tt.want)
			}
			if strings.Contains(got, "s3cret") || strings.Contains(got, "t0ken") {
				t.Errorf("stderr %q shows the secret", got)
			}
		})
	}
}
