package scaler

import (
	"context"
	"strings"
	"testing"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
)

// testPassword and testToken are the secrets the credential tests put in an address.
const (
	testPassword = "s3cretPassw0rd"
	testToken    = "t0kenValue"
)

// TestConfigRedactsPrometheusAddress: a refused --prometheus-address is named without its
// password or query values (before, the startup error printed the address whole).
func TestConfigRedactsPrometheusAddress(t *testing.T) {
	c := DefaultConfig()
	c.PrometheusAddress = "http://reader:" + testPassword + "@169.254.169.254/?token=" + testToken
	err := c.Validate()
	const want = `PrometheusAddress (--prometheus-address) "http://reader:xxxxx@169.254.169.254/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused; want empty or an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address`
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v,\nwant %s", err, want)
	}
}

// TestMetadataRedactsPrometheusAddress: a refused prometheusAddress is answered
// InvalidArgument naming the address redacted: the message reaches KEDA's status and the
// ScaledObject's events.
func TestMetadataRedactsPrometheusAddress(t *testing.T) {
	meta := map[string]string{"engine": "vllm", "model": "m",
		KeyPrometheusAddress: "https://reader:" + testPassword + "@100.100.100.200:9090/?access_token=" + testToken}
	_, err := ParseMetadata(meta, testDefaults)
	const want = `invalid scaler metadata: prometheusAddress must be an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address, got "https://reader:xxxxx@100.100.100.200:9090/?access_token=xxxxx": 100.100.100.200 is a cloud instance metadata address: refused`
	if err == nil || err.Error() != want {
		t.Errorf("ParseMetadata = %v,\nwant %s", err, want)
	}

	h := newHarness(t, nil)
	ref := &pb.ScaledObjectRef{Namespace: "team-a", Name: "pool", ScalerMetadata: meta}
	_, err = h.client.GetMetricSpec(context.Background(), ref)
	wantRPC := "rpc error: code = InvalidArgument desc = ScaledObject team-a/pool: " + want
	if err == nil || err.Error() != wantRPC {
		t.Errorf("GetMetricSpec = %v,\nwant %s", err, wantRPC)
	}
}

// TestStartupLogRedactsPrometheusAddress: the "scaler serving" line names the default
// address redacted; the poller still gets it whole (the request uses the credentials).
func TestStartupLogRedactsPrometheusAddress(t *testing.T) {
	gl, hl, cfg := serveConfig(t)
	cfg.PrometheusAddress = "http://reader:" + testPassword + "@127.0.0.1:1/?token=" + testToken
	var buf syncBuffer
	log, err := NewLogger(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := serve(ctx, cfg, log, gl, hl, nil); err != nil {
		t.Fatalf("serve: %v", err)
	}
	out := buf.String()
	if want := `"prometheusAddress":"http://reader:xxxxx@127.0.0.1:1/?token=xxxxx"`; !strings.Contains(out, `"msg":"scaler serving"`) || !strings.Contains(out, want) {
		t.Errorf("logs lack %s in the startup line:\n%s", want, out)
	}
	for _, s := range []string{testPassword, testToken} {
		if strings.Contains(out, s) {
			t.Errorf("logs show the secret %q:\n%s", s, out)
		}
	}
}
