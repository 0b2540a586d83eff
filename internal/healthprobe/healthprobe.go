// Package healthprobe asks a gRPC server's health service (grpc.health.v1.Health/Check)
// whether it is SERVING, as grpc-health-probe does. The scaler's image runs it as
// `scaler --health-probe=host:port` for `helm test`, so the chart needs no other image.
//
// Exit codes (ExitCode): 0 SERVING; 1 the probe ran and the server is not serving — any other
// status, unreachable, or the RPC failed; 2 usage — the probe's flags are invalid or its TLS
// files unreadable, so no probe was made (ErrUsage; 2 as package flag's ExitOnError exits for
// bad flags). A probe that exits 2 is misconfigured, not a sign of the server's health.
// grpc-health-probe splits 1 further (2 connection, 3 RPC, 4 unhealthy, with 1 for usage);
// here the two outcomes a test or an operator acts on differently are kept apart.
package healthprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/inferscale/inferscale/internal/boundedfile"
)

// ErrNotServing is wrapped when the server answers with any status but SERVING.
var ErrNotServing = errors.New("not serving")

// ErrUsage is wrapped by Check's error when the probe cannot be made as configured: Validate's
// violations, or a TLS file that cannot be read or holds no certificate.
var ErrUsage = errors.New("invalid health probe flags")

// The exit codes of a probe run; see the package doc.
const (
	ExitServing    = 0
	ExitNotServing = 1
	ExitUsage      = 2
)

// ExitCode is the process exit code for Check's error: ExitServing for nil, ExitUsage for an
// error wrapping ErrUsage, ExitNotServing for any other (not SERVING, unreachable, RPC failed).
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitServing
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitNotServing
}

// Config is one probe.
type Config struct {
	// Address is the server's host:port; empty means no probe.
	Address string
	// Service is the health service name to check; "" is the server as a whole.
	Service string
	// Timeout bounds the dial and the Check RPC together, in (0, 5m].
	Timeout time.Duration
	// CAFile turns TLS on and verifies the server against this PEM bundle.
	CAFile string
	// CertFile and KeyFile are the client certificate for mTLS (both or neither; need CAFile).
	CertFile, KeyFile string
	// ServerName overrides the name the server's certificate must carry (default: Address's host).
	ServerName string
}

// Flags binds c to --health-probe* flags on fs.
func Flags(fs *flag.FlagSet, c *Config) {
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	fs.StringVar(&c.Address, "health-probe", c.Address, "probe the gRPC health service at host:port, print its status and exit: 0 SERVING, 1 not serving or unreachable, 2 invalid probe flags; for helm test")
	fs.DurationVar(&c.Timeout, "health-probe-timeout", c.Timeout, "deadline of the health probe, (0, 5m]")
	fs.StringVar(&c.CAFile, "health-probe-ca-file", c.CAFile, "health probe over TLS, verifying the server against this CA (PEM)")
	fs.StringVar(&c.CertFile, "health-probe-cert-file", c.CertFile, "health probe client certificate (PEM, mTLS)")
	fs.StringVar(&c.KeyFile, "health-probe-key-file", c.KeyFile, "private key of --health-probe-cert-file (PEM)")
	fs.StringVar(&c.ServerName, "health-probe-server-name", c.ServerName, "name the server's certificate must carry (default: the host of --health-probe)")
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.Address == "" {
		errs = append(errs, errors.New("--health-probe: want host:port"))
	} else if host, port, err := net.SplitHostPort(c.Address); err != nil || host == "" || !validPort(port) {
		errs = append(errs, fmt.Errorf("--health-probe %q: want host:port with a port in [1, 65535]", c.Address))
	}
	if c.Timeout <= 0 || c.Timeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("--health-probe-timeout %v: want (0, 5m]", c.Timeout))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("--health-probe-cert-file and --health-probe-key-file: set both or neither"))
	}
	if c.CertFile != "" && c.CAFile == "" {
		errs = append(errs, errors.New("--health-probe-cert-file needs --health-probe-ca-file (mTLS is TLS)"))
	}
	return errors.Join(errs...)
}

// validPort reports whether p is a decimal TCP port in [1, 65535].
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

func (c Config) creds() (credentials.TransportCredentials, error) {
	if c.CAFile == "" {
		return insecure.NewCredentials(), nil
	}
	pem, err := boundedfile.ReadPEM("--health-probe-ca-file", c.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--health-probe-ca-file %s: no PEM certificate", c.CAFile)
	}
	tc := &tls.Config{RootCAs: pool, ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.CertFile != "" {
		certPEM, err := boundedfile.ReadPEM("--health-probe-cert-file", c.CertFile)
		if err != nil {
			return nil, err
		}
		keyPEM, err := boundedfile.ReadPEM("--health-probe-key-file", c.KeyFile)
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--health-probe-cert-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(tc), nil
}

// Check asks the health service at c.Address and returns its status. The error wraps ErrUsage
// when the probe cannot be made as configured (nothing is dialled), ErrNotServing when the
// answer is not SERVING, and names the address otherwise.
func Check(ctx context.Context, c Config) (healthpb.HealthCheckResponse_ServingStatus, error) {
	if err := c.Validate(); err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	creds, err := c.creds()
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	conn, err := grpc.NewClient(c.Address, grpc.WithTransportCredentials(creds))
	if err != nil { // the address passed Validate: a target gRPC cannot resolve, no usage error
		return healthpb.HealthCheckResponse_UNKNOWN, fmt.Errorf("health probe %s: %w", c.Address, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: c.Service}, grpc.WaitForReady(true))
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN, fmt.Errorf("health probe %s: %w", c.Address, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return s, fmt.Errorf("health probe %s: %w: %s", c.Address, ErrNotServing, s)
	}
	return healthpb.HealthCheckResponse_SERVING, nil
}
