//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the certificate material of the loopback cluster, written as PEM
// files under dir. Names follow kubeadm's layout where one exists.
type pki struct {
	dir string

	caCert, caKey          string // cluster CA: signs serving and client certs
	apiserverCert, apiKey  string // kube-apiserver serving cert
	adminCert, adminKey    string // client cert, O=system:masters
	frontCA                string // front-proxy (request-header) CA
	frontCert, frontKey    string // front-proxy client cert the aggregator presents
	saKey, saPub           string // service-account signing key pair
	kedaDir                string // ca.crt, tls.crt, tls.key for the KEDA operator and adapter
	caPEM                  []byte
	ca                     *x509.Certificate
	caSigner               *ecdsa.PrivateKey
	frontCACert            *x509.Certificate
	frontCASigner          *ecdsa.PrivateKey
	adminCertPEM, adminPEM []byte
}

// newPKI writes every certificate and key the cluster needs into dir.
func newPKI(dir string) (*pki, error) {
	p := &pki{dir: dir, kedaDir: filepath.Join(dir, "keda")}
	if err := os.MkdirAll(p.kedaDir, 0o700); err != nil {
		return nil, err
	}
	var err error
	p.ca, p.caSigner, err = selfSignedCA("inferscale-e2e-ca")
	if err != nil {
		return nil, err
	}
	p.frontCACert, p.frontCASigner, err = selfSignedCA("inferscale-e2e-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	p.caPEM = pemCert(p.ca.Raw)
	p.caCert, p.caKey = p.path("ca.crt"), p.path("ca.key")
	if err := writePair(p.caCert, p.caKey, p.ca.Raw, p.caSigner); err != nil {
		return nil, err
	}
	p.frontCA = p.path("front-proxy-ca.crt")
	if err := os.WriteFile(p.frontCA, pemCert(p.frontCACert.Raw), 0o600); err != nil {
		return nil, err
	}

	serving := x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}
	p.apiserverCert, p.apiKey = p.path("apiserver.crt"), p.path("apiserver.key")
	if _, _, err := p.issue(&serving, p.ca, p.caSigner, p.apiserverCert, p.apiKey); err != nil {
		return nil, err
	}

	admin := x509.Certificate{
		Subject:     pkix.Name{CommonName: "e2e-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p.adminCert, p.adminKey = p.path("admin.crt"), p.path("admin.key")
	if p.adminCertPEM, p.adminPEM, err = p.issue(&admin, p.ca, p.caSigner, p.adminCert, p.adminKey); err != nil {
		return nil, err
	}

	front := x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p.frontCert, p.frontKey = p.path("front-proxy-client.crt"), p.path("front-proxy-client.key")
	if _, _, err := p.issue(&front, p.frontCACert, p.frontCASigner, p.frontCert, p.frontKey); err != nil {
		return nil, err
	}

	// The service-account token signer; kube-apiserver accepts RSA or ECDSA.
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p.saKey, p.saPub = p.path("sa.key"), p.path("sa.pub")
	der, err := x509.MarshalPKCS8PrivateKey(sa)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, err
	}

	// KEDA: the operator's gRPC metrics service and the adapter's aggregated
	// API both serve it, and the adapter presents it as its client cert to
	// the operator (mutual TLS), so it carries both usages. The aggregator
	// verifies <service>.<namespace>.svc; the adapter dials 127.0.0.1.
	keda := x509.Certificate{
		Subject:     pkix.Name{CommonName: "keda"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames: []string{"localhost", kedaAPIServiceName + "." + kedaNamespace + ".svc",
			"keda-operator." + kedaNamespace + ".svc", "keda-operator." + kedaNamespace + ".svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if _, _, err := p.issue(&keda, p.ca, p.caSigner, filepath.Join(p.kedaDir, "tls.crt"), filepath.Join(p.kedaDir, "tls.key")); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(p.kedaDir, "ca.crt"), p.caPEM, 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

var serial = big.NewInt(1)

func nextSerial() *big.Int {
	serial = new(big.Int).Add(serial, big.NewInt(1))
	return serial
}

func selfSignedCA(cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// issue signs tmpl with the CA and writes the cert and a fresh key; it
// returns both as PEM.
func (p *pki) issue(tmpl *x509.Certificate, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = nextSerial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemCert(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(certPath, pemCert(der), 0o600); err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}
