package healthprobe

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"github.com/inferscale/inferscale/internal/boundedfile"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTLSFilesBounded: each TLS file is read at most boundedfile.MaxPEMBytes (1 MiB); a larger one, or
// one that never ends (/dev/zero ran the probe out of memory), is a usage error (exit 2)
// naming the flag, the file and the bound, and nothing is dialled.
func TestTLSFilesBounded(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, selfSigned(t), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, boundedfile.MaxPEMBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(dir, "exact.pem") // at the bound: read, then refused as no PEM
	if err := os.WriteFile(exact, make([]byte, boundedfile.MaxPEMBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	const addr = "127.0.0.1:1"
	tests := []struct {
		name string
		give Config
		want string
	}{
		{"CA /dev/zero", Config{CAFile: "/dev/zero"},
			`invalid health probe flags: --health-probe-ca-file "/dev/zero": larger than 1048576 bytes (1 MiB); want a PEM file`},
		{"CA over the bound", Config{CAFile: big},
			`invalid health probe flags: --health-probe-ca-file "` + big + `": larger than 1048576 bytes (1 MiB); want a PEM file`},
		{"CA at the bound", Config{CAFile: exact},
			`invalid health probe flags: --health-probe-ca-file ` + exact + `: no PEM certificate`},
		{"cert /dev/zero", Config{CAFile: ca, CertFile: "/dev/zero", KeyFile: big},
			`invalid health probe flags: --health-probe-cert-file "/dev/zero": larger than 1048576 bytes (1 MiB); want a PEM file`},
		{"key /dev/zero", Config{CAFile: ca, CertFile: ca, KeyFile: "/dev/zero"},
			`invalid health probe flags: --health-probe-key-file "/dev/zero": larger than 1048576 bytes (1 MiB); want a PEM file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.give
			c.Address, c.Timeout = addr, time.Second
			_, err := Check(context.Background(), c)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Check = %v\nwant %s", err, tt.want)
			}
			if got := ExitCode(err); got != ExitUsage {
				t.Errorf("ExitCode = %d, want %d", got, ExitUsage)
			}
		})
	}
}

// selfSigned is a PEM CA certificate made for the test.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
