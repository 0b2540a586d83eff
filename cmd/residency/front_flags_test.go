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
		"--retain-max-total-bytes=1048576", "--retry-pushback=250ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.InferenceListen != ":8001" {
		t.Errorf("InferenceListen = %q, want :8001", c.InferenceListen)
	}
	want := front.Config{Upstream: "127.0.0.1:8101", HoldTimeout: 2 * time.Minute, MaxHeldRequests: 50, MaxHeldBytes: 64 << 20,
		MaxTotalHeldBytes: 128 << 20, MaxRequestBytes: 8 << 20, MaxRetainedBytes: 1 << 20,
		RetryPushback: 250 * time.Millisecond, RecheckInterval: front.DefaultConfig().RecheckInterval}
	if diff := cmp.Diff(want, c.FrontConfig()); diff != "" {
		t.Errorf("front config (-want +got):\n%s", diff)
	}
}

func TestParseFrontFlagsErrors(t *testing.T) {
	_, _, err := parseFlags([]string{"--inference-listen=:8001", "--hold-timeout=0s", "--hold-max-requests=0",
		"--hold-max-total-bytes=4194303", "--max-request-bytes=2147483648", "--retain-max-total-bytes=-1"}, io.Discard)
	for _, want := range []string{"HoldTimeout (--hold-timeout): 0s out of range [1s, 30m0s]", "MaxHeldRequests (--hold-max-requests): 0 out of range [1, 100000]",
		"MaxTotalHeldBytes (--hold-max-total-bytes): 4194303 out of range [4194304, 68719476736]",
		"MaxRequestBytes (--max-request-bytes): 2147483648 out of range [4194304, 2147483647]",
		"MaxRetainedBytes (--retain-max-total-bytes): -1 out of range [0, 68719476736]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want containing %q", err, want)
		}
	}
	if _, _, err := parseFlags([]string{"--inference-http-listen=:8000"}, io.Discard); err == nil || !strings.Contains(err.Error(), "needs --inference-listen") {
		t.Errorf("HTTP front without the gRPC front: %v", err)
	}
	if _, _, err := parseFlags([]string{"--inference-listen=nonsense"}, io.Discard); err == nil || !strings.Contains(err.Error(), `InferenceListen (--inference-listen): "nonsense"`) {
		t.Errorf("bad listen: %v", err)
	}
}

// TestFrontFlagsNeedFront: a front flag given without --inference-listen would do nothing, so
// it is a usage error naming the flag; its default, and the flag given with a front, are not.
func TestFrontFlagsNeedFront(t *testing.T) {
	const needs = ": needs --inference-listen (without it there is no inference front, and the flag would do nothing)"
	tests := []struct {
		name string
		give []string
		want string // the whole error; "" for none
	}{
		{name: "no front flag", give: []string{"--loop-interval=1s"}},
		{name: "hold-timeout", give: []string{"--hold-timeout=2m"}, want: "--hold-timeout" + needs},
		{name: "hold-max-requests", give: []string{"--hold-max-requests=50"}, want: "--hold-max-requests" + needs},
		{name: "hold-max-bytes", give: []string{"--hold-max-bytes=67108864"}, want: "--hold-max-bytes" + needs},
		{name: "hold-max-total-bytes", give: []string{"--hold-max-total-bytes=134217728"}, want: "--hold-max-total-bytes" + needs},
		{name: "max-request-bytes", give: []string{"--max-request-bytes=8388608"}, want: "--max-request-bytes" + needs},
		{name: "retry-pushback", give: []string{"--retry-pushback=250ms"}, want: "--retry-pushback" + needs},
		{name: "triton-http-url", give: []string{"--triton-http-url=http://127.0.0.1:8100"}, want: "--triton-http-url" + needs},
		{name: "given at its default value still counts", give: []string{"--hold-timeout=" + front.DefaultConfig().HoldTimeout.String()}, want: "--hold-timeout" + needs},
		{name: "an empty --inference-listen is no front", give: []string{"--inference-listen=", "--retry-pushback=1s"}, want: "--retry-pushback" + needs},
		{name: "every one is named, in flag order", give: []string{"--retry-pushback=1s", "--hold-timeout=1m"},
			want: "--hold-timeout" + needs + "\n--retry-pushback" + needs},
		{name: "with the front", give: []string{"--inference-listen=:8001", "--triton-address=127.0.0.1:8101", "--hold-timeout=2m", "--retry-pushback=1s"}},
		{name: "triton-http-url needs the HTTP front too", give: []string{"--inference-listen=:8001", "--triton-address=127.0.0.1:8101", "--triton-http-url=http://127.0.0.1:8100"},
			want: "--triton-http-url: needs --inference-http-listen (it is the upstream of the HTTP front, and would do nothing)"},
		{name: "with both fronts", give: []string{"--inference-listen=:8001", "--triton-address=127.0.0.1:8101", "--inference-http-listen=:8000", "--triton-http-url=http://127.0.0.1:8100"}},
		// A front whose upstream is its own listener proxies each request to itself, without
		// end (the HTTP front recursed 3,003 times in 0.7 s on one GET).
		{name: "the gRPC front on the default --triton-address", give: []string{"--inference-listen=:8001"},
			want: `invalid residency config: TritonAddress (--triton-address): "localhost:8001" is the front's own --inference-listen ":8001": the front would proxy to itself; want Triton's gRPC port (the chart moves it to the front's port + 100, --grpc-port=8101)`},
		{name: "the HTTP front on the default --triton-http-url", give: []string{"--inference-listen=:8001", "--triton-address=127.0.0.1:8101", "--inference-http-listen=127.0.0.1:8000"},
			want: `invalid residency config: TritonHTTPURL (--triton-http-url): "http://localhost:8000" is the front's own --inference-http-listen "127.0.0.1:8000": the front would proxy to itself; want Triton's HTTP port (the chart moves it to the front's port + 100, --http-port=8100)`},
		{name: "an http URL without a port is port 80", give: []string{"--inference-listen=:8001", "--triton-address=127.0.0.1:8101", "--inference-http-listen=[::]:80", "--triton-http-url=http://[::1]"},
			want: `invalid residency config: TritonHTTPURL (--triton-http-url): "http://[::1]" is the front's own --inference-http-listen "[::]:80": the front would proxy to itself; want Triton's HTTP port (the chart moves it to the front's port + 100, --http-port=8100)`},
		{name: "the same port on another host is not a loop", give: []string{"--inference-listen=:8001", "--triton-address=triton.ml.svc:8001"}},
		{name: "a listener on one address, Triton on another loopback port", give: []string{"--inference-listen=10.0.0.5:8001", "--triton-address=localhost:8001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseFlags(append([]string{"--namespace=ml", "--catalog=c.yaml"}, tt.give...), io.Discard)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseFlags(%q) error (-want +got):\n%s", tt.give, diff)
			}
		})
	}
}
