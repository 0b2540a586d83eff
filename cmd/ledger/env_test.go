package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/internal/envflag"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/ledger/peak"
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
			want: `ledger: $INFERSCALE_PROMETHEUS_ADDRESS (read as --prometheus-address is not given) "http://reader:xxxxx@169.254.169.254:9090/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`},
		{name: "flag", args: []string{"--live", "--prometheus-address=http://reader:s3cretPassw0rd@prom:9090/x#frag"},
			want: `ledger: --prometheus-address "http://reader:xxxxx@prom:9090/x#xxxxx": has a fragment (#…), which HTTP never sends; percent-encode a # in the user or password as %23; want an http:// or https:// URL`},
		{name: "pushgateway", args: []string{"--spec=x", "--pushgateway=http://pusher:s3cretPassw0rd@gw:9091/#t0ken"},
			want: `ledger: --pushgateway "http://pusher:xxxxx@gw:9091/#xxxxx": has a fragment (#…), which HTTP never sends; percent-encode a # in the user or password as %23; want an http:// or https:// URL`},
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

// TestReadPeaksRedactsAddress: a peak read that fails against an address with a password and
// a token (from $INFERSCALE_PROMETHEUS_ADDRESS, say) notes the failure, which the report
// prints to stdout and the ConfigMap, without either: net/http's error quoted the token.
func TestReadPeaksRedactsAddress(t *testing.T) {
	const secret, token = "s3cretPassw0rd", "t0kenValue"
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	c := Config{PrometheusAddress: strings.Replace(down.URL, "http://", "http://reader:"+secret+"@", 1) + "/?token=" + token,
		PeakWindow: time.Minute, PeakStep: time.Second, Timeout: 5 * time.Second}
	notes, err := readPeaks(c, []ledger.Service{{Name: "chat", PeakRPS: 24}}, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}})
	if err != nil || len(notes) != 1 {
		t.Fatalf("readPeaks = %+v, %v; want one note", notes, err)
	}
	want := `query max_over_time(((sum((rps{namespace="ml"})) unless on () ((rps{namespace="ml"}) < 0)) < +Inf)[1m:1s]): Post "` +
		strings.Replace(down.URL, "http://", "http://reader:xxxxx@", 1) + `/api/v1/query?token=xxxxx": dial tcp `
	if got := notes[0].Err; !strings.HasPrefix(got, want) || strings.Contains(got, secret) || strings.Contains(got, token) {
		t.Errorf("note %q\nwant prefix %q, and no secret", got, want)
	}
}
