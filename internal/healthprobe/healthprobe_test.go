package healthprobe

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serve starts a real gRPC server with the standard health service on a free loopback port.
func serve(t *testing.T, status healthpb.HealthCheckResponse_ServingStatus) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	h := health.NewServer()
	h.SetServingStatus("", status)
	healthpb.RegisterHealthServer(s, h)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		status  healthpb.HealthCheckResponse_ServingStatus
		want    healthpb.HealthCheckResponse_ServingStatus
		wantErr error
	}{
		{name: "serving", status: healthpb.HealthCheckResponse_SERVING, want: healthpb.HealthCheckResponse_SERVING},
		{name: "not serving (no fresh data)", status: healthpb.HealthCheckResponse_NOT_SERVING, want: healthpb.HealthCheckResponse_NOT_SERVING, wantErr: ErrNotServing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Check(context.Background(), Config{Address: serve(t, tt.status), Timeout: 10 * time.Second})
			if got != tt.want || !errors.Is(err, tt.wantErr) {
				t.Errorf("Check = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCheckNothingListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Check(context.Background(), Config{Address: addr, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), addr) || errors.Is(err, ErrNotServing) {
		t.Errorf("Check of a closed port = %v; want a dial/deadline error naming %s", err, addr)
	}
}

func TestValidate(t *testing.T) {
	err := Config{Timeout: time.Hour, CertFile: "c.pem"}.Validate()
	for _, want := range []string{"--health-probe:", "--health-probe-timeout", "--health-probe-key-file", "--health-probe-ca-file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to name %s", err, want)
		}
	}
}

// An address that is not host:port (a URL, a port out of range) is refused at
// once by Validate, not after the whole timeout as a dial error.
func TestValidateAddress(t *testing.T) {
	for _, addr := range []string{"http://127.0.0.1:1/", "127.0.0.1:99999", "127.0.0.1", "127.0.0.1:0", "scaler:http", ":"} {
		err := Config{Address: addr, Timeout: time.Second}.Validate()
		if err == nil || !strings.Contains(err.Error(), "--health-probe "+strconvQuote(addr)) {
			t.Errorf("Validate(%q) = %v; want an error naming --health-probe and the address", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:9090", "scaler.ns.svc:9090", "[::1]:9090", "localhost:65535"} {
		if err := (Config{Address: addr, Timeout: time.Second}).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v; want nil", addr, err)
		}
	}
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// TestExitCode: a probe that ran and found the server not serving (or not there) exits 1; one
// that could not run as configured exits 2, without dialling; SERVING exits 0.
func TestExitCode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		give Config
		want int
	}{
		{"serving", Config{Address: serve(t, healthpb.HealthCheckResponse_SERVING), Timeout: 10 * time.Second}, 0},
		{"not serving", Config{Address: serve(t, healthpb.HealthCheckResponse_NOT_SERVING), Timeout: 10 * time.Second}, 1},
		{"nothing listening", Config{Address: closed, Timeout: 300 * time.Millisecond}, 1},
		{"address not host:port", Config{Address: "http://127.0.0.1:1/", Timeout: time.Second}, 2},
		{"timeout out of range", Config{Address: closed, Timeout: time.Hour}, 2},
		{"CA file missing", Config{Address: closed, Timeout: time.Second, CAFile: filepath.Join(dir, "none.crt")}, 2},
		{"CA file without a certificate", Config{Address: closed, Timeout: time.Second, CAFile: notPEM}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check(context.Background(), tt.give)
			if got := ExitCode(err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", err, got, tt.want)
			}
		})
	}
}
