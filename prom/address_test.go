package prom

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestValidateAddress: in-cluster addresses (hostnames, loopback, private ranges) pass; the
// cloud metadata endpoints, link-local and unspecified addresses, and numeric spellings
// inet_aton would read as IPv4, are refused naming prometheusAddress and why.
func TestValidateAddress(t *testing.T) {
	tests := []struct {
		give    string
		wantErr string // "" when accepted
	}{
		{"http://prometheus.monitoring.svc:9090", ""},
		{"https://thanos.example:10902/prefix", ""},
		{"http://127.0.0.1:9090", ""},
		{"http://[::1]:9090", ""},
		{"http://10.96.0.12:9090", ""},
		{"http://172.16.5.4:9090", ""},
		{"http://192.168.1.2", ""},
		{"http://[fd12:3456::1]:9090", ""},      // a ULA like a cluster's IPv6 pods
		{"http://metadata.google.internal", ""}, // a hostname: not resolved here (the dialer refuses it)
		{"http://169.254.169.254.nip.io", ""},   // likewise
		{"http://100.64.0.1:9090", ""},          // CGNAT, not a metadata address
		{"prometheus:9090", "must be an http:// or https:// URL with a host"},
		{"http://:9090", "must be an http:// or https:// URL with a host"},
		{"ftp://prometheus:9090", "must be an http:// or https:// URL with a host"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"},
		{"http://169.254.0.1:9090", "169.254.0.1 is a link-local address"},
		{"http://[fe80::1]:9090", "fe80::1 is a link-local address"},
		{"http://[fe80::1%25eth0]:9090", "fe80::1%eth0 is a link-local address"},
		{"http://[ff02::1]:9090", "ff02::1 is a link-local address"},
		{"http://224.0.0.1:9090", "224.0.0.1 is a link-local address"},
		{"http://[::ffff:169.254.169.254]", "::ffff:169.254.169.254 is a link-local address"},
		{"http://[fd00:ec2::254]", "fd00:ec2::254 is a cloud instance metadata address"},
		{"http://100.100.100.200", "100.100.100.200 is a cloud instance metadata address"},
		{"http://0.0.0.0:9090", "0.0.0.0 is the unspecified address"},
		{"http://[::]:9090", ":: is the unspecified address"},
		{"http://2852039166", `host "2852039166" is a numeric address not in dotted-decimal form`},
		{"http://0251.0376.0251.0376", `host "0251.0376.0251.0376" is a numeric address`},
		{"http://0xa9.0xfe.0xa9.0xfe", `host "0xa9.0xfe.0xa9.0xfe" is a numeric address`},
		{"http://169.254.43518", `host "169.254.43518" is a numeric address`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			err := validateAddress(tt.give)
			if tt.wantErr == "" {
				if err != nil || CheckAddress(tt.give) != nil {
					t.Fatalf("validateAddress(%q) = %v, want accepted", tt.give, err)
				}
				return
			}
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "prometheusAddress") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("validateAddress(%q) = %v, want ErrBadRequest naming prometheusAddress and %q", tt.give, err, tt.wantErr)
			}
			if err := CheckAddress(tt.give); err == nil || errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CheckAddress(%q) = %v, want %q without ErrBadRequest", tt.give, err, tt.wantErr)
			}
		})
	}
}

// TestValidateAddressCutsLongInput: the user's address is quoted cut in the error.
func TestValidateAddressCutsLongInput(t *testing.T) {
	addr := "prometheus:" + strings.Repeat("9", 100000)
	err := validateAddress(addr)
	if err == nil || len(err.Error()) > 512 || !strings.Contains(err.Error(), "(100011 bytes)") {
		t.Errorf("validateAddress(100 kB address) = %d-byte error %.300q, want under 512 bytes naming the length", len(err.Error()), err)
	}
}

// TestRefuseDial: the dialer refuses metadata, link-local and unspecified addresses after
// resolution, and lets others through.
func TestRefuseDial(t *testing.T) {
	tests := []struct {
		give    string
		wantErr string
	}{
		{"169.254.169.254:80", "refusing to connect to 169.254.169.254:80: a link-local address"},
		{"[fe80::1]:9090", "refusing to connect to [fe80::1]:9090: a link-local address"},
		{"[fd00:ec2::254]:80", "a cloud instance metadata address"},
		{"0.0.0.0:9090", "the unspecified address"},
		{"127.0.0.1:9090", ""},
		{"10.0.0.1:9090", ""},
		{"[::1]:9090", ""},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			err := refuseDial("tcp", tt.give, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refuseDial(%q) = %v, want nil", tt.give, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("refuseDial(%q) = %v, want %q", tt.give, err, tt.wantErr)
			}
		})
	}
}

// TestSubscribeRefusesMetadataAddress: a ScaledObject naming the metadata endpoint is
// refused at subscription (gRPC InvalidArgument in the scaler), before any connection.
func TestSubscribeRefusesMetadataAddress(t *testing.T) {
	p := newTestPoller(t, "http://prometheus:9090")
	_, err := p.Subscribe(Request{Address: "http://169.254.169.254/computeMetadata/v1/", Namespace: "a", Kind: KindQueue, Engine: EngineTriton, Model: "m"})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `prometheusAddress "http://169.254.169.254/computeMetadata/v1/": 169.254.169.254 is a link-local address`) {
		t.Errorf("Subscribe = %v, want ErrBadRequest naming prometheusAddress and link-local", err)
	}
	if n := p.Subscriptions(); n != 0 {
		t.Errorf("Subscriptions = %d, want 0", n)
	}
}

// TestRedirectToMetadataIsRefused: an allowed Prometheus that redirects to the metadata
// endpoint does not get the scaler there: the dialer refuses the address before connecting.
func TestRedirectToMetadataIsRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
	}))
	defer srv.Close()
	p := newTestPoller(t, srv.URL)
	k := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
	p.Refresh(context.Background())
	got := p.Result(k)
	if got.Err == nil || !strings.Contains(got.Err.Error(), "refusing to connect to 169.254.169.254:80: a link-local address") {
		t.Errorf("Result = %+v, want the dialer's refusal of 169.254.169.254:80", got)
	}
}
