package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/front"
)

func TestParseFrontFlags(t *testing.T) {
	c, _, err := parseFlags([]string{"--triton-address=127.0.0.1:8101", "--inference-listen=:8001", "--hold-timeout=2m",
		"--hold-max-requests=50", "--hold-max-bytes=67108864", "--hold-max-total-bytes=134217728", "--max-request-bytes=8388608",
		"--retry-pushback=250ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.InferenceListen != ":8001" {
		t.Errorf("InferenceListen = %q, want :8001", c.InferenceListen)
	}
	want := front.Config{Upstream: "127.0.0.1:8101", HoldTimeout: 2 * time.Minute, MaxHeldRequests: 50, MaxHeldBytes: 64 << 20,
		MaxTotalHeldBytes: 128 << 20, MaxRequestBytes: 8 << 20,
		RetryPushback: 250 * time.Millisecond, RecheckInterval: front.DefaultConfig().RecheckInterval}
	if diff := cmp.Diff(want, c.FrontConfig()); diff != "" {
		t.Errorf("front config (-want +got):\n%s", diff)
	}
}

func TestParseFrontFlagsErrors(t *testing.T) {
	_, _, err := parseFlags([]string{"--inference-listen=:8001", "--hold-timeout=0s", "--hold-max-requests=0",
		"--hold-max-total-bytes=4194303", "--max-request-bytes=2147483648"}, io.Discard)
	for _, want := range []string{"HoldTimeout (--hold-timeout): 0s out of range [1s, 30m0s]", "MaxHeldRequests (--hold-max-requests): 0 out of range [1, 100000]",
		"MaxTotalHeldBytes (--hold-max-total-bytes): 4194303 out of range [4194304, 68719476736]",
		"MaxRequestBytes (--max-request-bytes): 2147483648 out of range [4194304, 2147483647]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want containing %q", err, want)
		}
	}
	// Without a front its bounds are not checked.
	if _, _, err := parseFlags([]string{"--hold-timeout=0s"}, io.Discard); err != nil {
		t.Errorf("no front: %v", err)
	}
	if _, _, err := parseFlags([]string{"--inference-http-listen=:8000"}, io.Discard); err == nil || !strings.Contains(err.Error(), "needs --inference-listen") {
		t.Errorf("HTTP front without the gRPC front: %v", err)
	}
	if _, _, err := parseFlags([]string{"--inference-listen=nonsense"}, io.Discard); err == nil || !strings.Contains(err.Error(), `InferenceListen (--inference-listen): "nonsense"`) {
		t.Errorf("bad listen: %v", err)
	}
}
