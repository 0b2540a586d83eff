package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency"
)

func TestParseFlagsDefaults(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ml")
	t.Setenv("POD_NAME", "triton-0")
	c, level, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := residency.DefaultConfig()
	want.Namespace, want.PodName = "ml", "triton-0"
	if c != want || level != "info" {
		t.Errorf("defaults: %+v, %q; want %+v", c, level, want)
	}
}

func TestParseFlags(t *testing.T) {
	c, _, err := parseFlags([]string{"--triton-address=triton:8001", "--catalog=c.yaml", "--budget-bytes=10307921510",
		"--mig-profile=1g.10gb", "--prometheus-address=http://prom:9090", "--namespace=ml", "--listen=:9000",
		"--drain-timeout=2m", "--max-concurrent-loads=2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.TritonAddress != "triton:8001" || c.BudgetBytes != 10307921510 || c.MIGProfile != "1g.10gb" ||
		c.DrainTimeout != 2*time.Minute || c.MaxConcurrentLoads != 2 || c.ListenAddress != ":9000" {
		t.Errorf("parsed %+v", c)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	_, _, err := parseFlags([]string{"--max-concurrent-loads=0", "--drain-timeout=0s"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "MaxConcurrentLoads (--max-concurrent-loads): 0 out of range [1, 16]") ||
		!strings.Contains(err.Error(), "DrainTimeout (--drain-timeout): 0s out of range") {
		t.Errorf("err = %v", err)
	}
	if _, _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Error("positional argument accepted")
	}
	// Go's flag package read a leading zero as octal: 010000000000 was a 1 GiB budget.
	for _, arg := range []string{"--budget-bytes=010000000000", "--reserve-bytes=0x100", "--max-concurrent-loads=0_2"} {
		name := strings.TrimPrefix(strings.SplitN(arg, "=", 2)[0], "--")
		if _, _, err := parseFlags([]string{arg}, io.Discard); err == nil || !strings.Contains(err.Error(), "for flag -"+name+": want a whole number in plain decimal") {
			t.Errorf("%s: err = %v; want a refusal naming -%s", arg, err, name)
		}
	}
}

// TestHelp: -h and --help print the usage and succeed (main exits 0).
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var out strings.Builder
		if err := run([]string{arg}, &out); err != nil {
			t.Errorf("run(%s) = %v, want nil", arg, err)
		}
		if !strings.Contains(out.String(), "-triton-metrics-url") || !strings.Contains(out.String(), "-mig-profile") {
			t.Errorf("run(%s) printed %q, want the usage", arg, out.String())
		}
	}
}

// TestParseFlagsRedactsPrometheusAddress: a refused --prometheus-address is printed without
// its password or query values (Config.Validate shows it through prom.RedactAddress); the
// error still wraps residency.ErrConfig. Before, the address was printed whole.
func TestParseFlagsRedactsPrometheusAddress(t *testing.T) {
	const secret, token = "s3cretPassw0rd", "t0kenValue"
	_, _, err := parseFlags([]string{"--prometheus-address=http://reader:" + secret + "@169.254.169.254/?token=" + token,
		"--namespace=ml", "--catalog=c.yaml"}, io.Discard)
	if err == nil {
		t.Fatal("parseFlags accepted a link-local --prometheus-address")
	}
	const want = `invalid residency config: PrometheusAddress (--prometheus-address) "http://reader:xxxxx@169.254.169.254/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want empty or an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`
	if err.Error() != want {
		t.Errorf("err = %v,\nwant %s", err, want)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), token) {
		t.Errorf("err shows the secrets: %v", err)
	}
	if !errors.Is(err, residency.ErrConfig) {
		t.Errorf("err %v does not wrap residency.ErrConfig", err)
	}
	// Without credentials the error is Config.Validate's own.
	_, _, err = parseFlags([]string{"--prometheus-address=http://169.254.169.254/", "--namespace=ml", "--catalog=c.yaml"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `PrometheusAddress (--prometheus-address) "http://169.254.169.254/": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want empty or an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`) {
		t.Errorf("err = %v", err)
	}
}
