package scaler

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

type pki struct {
	caPEM []byte
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca: ca, caKey: key}
}

// issue returns a PEM certificate and key for a server (127.0.0.1) or a client.
func (p *pki) issue(t *testing.T, serial int64, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "keda"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestMutualTLS: with --tls-cert-file, --tls-key-file and
// --tls-client-ca-file the scaler answers a client set up as KEDA is with
// caCert, tlsClientCert and tlsClientKey, and refuses one without a client
// certificate.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	srvCert, srvKey := p.issue(t, 2, true)
	cliCert, cliKey := p.issue(t, 3, false)
	cfg := integrationConfig("http://127.0.0.1:1") // no Prometheus needed: GetMetricSpec never reads data
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile = write("tls.crt", srvCert), write("tls.key", srvKey), write("ca.crt", p.caPEM)
	run := startScaler(t, cfg)

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.caPEM)
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	call := func(tc *tls.Config) error {
		conn, err := grpc.NewClient(run.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = pb.NewExternalScalerClient(conn).GetMetricSpec(ctx, ref("team-a", "pool", queueMeta()))
		return err
	}
	if err := call(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("with client certificate: %v", err)
	}
	if err := call(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("without client certificate: call succeeded, want a handshake failure")
	}
}

// TestServerTLSFilesBounded: each TLS file is read at most 1 MiB (--tls-cert-file=/dev/zero
// was read until the process ran out of memory); a good pair still loads.
func TestServerTLSFilesBounded(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	crt, key := p.issue(t, 2, true)
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := Config{TLSCertFile: write("tls.crt", crt), TLSKeyFile: write("tls.key", key), TLSClientCAFile: write("ca.crt", p.caPEM)}
	if _, err := serverTLS(good); err != nil {
		t.Fatalf("serverTLS(good files) = %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"cert /dev/zero", func(c *Config) { c.TLSCertFile = "/dev/zero" }, `TLSCertFile (--tls-cert-file) "/dev/zero": larger than 1048576 bytes (1 MiB); want a PEM file`},
		{"key /dev/zero", func(c *Config) { c.TLSKeyFile = "/dev/zero" }, `TLSKeyFile (--tls-key-file) "/dev/zero": larger than 1048576 bytes`},
		{"client CA /dev/zero", func(c *Config) { c.TLSClientCAFile = "/dev/zero" }, `TLSClientCAFile (--tls-client-ca-file) "/dev/zero": larger than 1048576 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			if _, err := serverTLS(c); err == nil || err.Error() != tt.want && !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("serverTLS = %v, want %q", err, tt.want)
			}
		})
	}
}
