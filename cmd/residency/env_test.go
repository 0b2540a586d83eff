package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/internal/envflag"
)

// TestPrometheusAddressFromEnv: without --prometheus-address the address comes from
// $INFERSCALE_PROMETHEUS_ADDRESS (the chart's prometheus.addressSecret); the flag wins.
func TestPrometheusAddressFromEnv(t *testing.T) {
	const fromEnv = "https://reader:s3cretPassw0rd@prom.monitoring.svc:9090"
	tests := []struct {
		name    string
		args    []string
		env     string
		want    string
		wantErr string
	}{
		{name: "env used", env: fromEnv, want: fromEnv},
		{name: "flag wins", args: []string{"--prometheus-address=http://flag:9090"}, env: fromEnv, want: "http://flag:9090"},
		{name: "an empty flag wins: no demand", args: []string{"--prometheus-address="}, env: fromEnv, want: ""},
		{name: "neither", want: ""},
		{name: "set but empty", env: "", wantErr: "$INFERSCALE_PROMETHEUS_ADDRESS (read as --prometheus-address is not given) is set but empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envflag.PrometheusAddress, tt.env)
			if tt.name == "neither" {
				_ = os.Unsetenv(envflag.PrometheusAddress) // t.Setenv restores it
			}
			c, _, err := parseFlags(append([]string{"--namespace=ml", "--catalog=c.yaml"}, tt.args...), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.PrometheusAddress); diff != "" {
				t.Errorf("PrometheusAddress (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrometheusAddressFromEnvRefused: a refused $INFERSCALE_PROMETHEUS_ADDRESS is an error
// naming the variable, without its password or token, besides Config.Validate's own errors.
func TestPrometheusAddressFromEnvRefused(t *testing.T) {
	const secret, token = "s3cretPassw0rd", "t0kenValue"
	t.Setenv(envflag.PrometheusAddress, "http://reader:"+secret+"@169.254.169.254/?token="+token)
	_, _, err := parseFlags([]string{"--namespace=ml", "--catalog=c.yaml", "--loop-interval=0s"}, io.Discard)
	if err == nil {
		t.Fatal("parseFlags accepted a link-local $INFERSCALE_PROMETHEUS_ADDRESS")
	}
	const want = `$INFERSCALE_PROMETHEUS_ADDRESS (read as --prometheus-address is not given) "http://reader:xxxxx@169.254.169.254/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address` + "\n" +
		"invalid residency config: LoopInterval (--loop-interval): 0s out of range [100ms, 10m0s]"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), token) {
		t.Errorf("err shows the secrets: %v", err)
	}
}
