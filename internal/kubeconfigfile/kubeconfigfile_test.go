package kubeconfigfile

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestReadFile (Check's table, which stat'ed the path, now the read's): a device, a directory
// or a file over 1 MiB is refused naming the flag and the path; a regular file within the
// bound is read whole; a missing path is the open's error (Check had left it to clientcmd).
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	atBound := filepath.Join(dir, "at-bound.yaml")
	if err := os.WriteFile(atBound, bytes.Repeat([]byte("#"), MaxBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none.yaml")
	tests := []struct {
		name, path, want string
		size             int
	}{
		{name: "device", path: "/dev/zero", want: `--kubeconfig "/dev/zero": not a regular file (Dc---------); want a kubeconfig file`},
		{name: "directory", path: dir, want: `--kubeconfig "` + dir + `": not a regular file (d---------); want a kubeconfig file`},
		{name: "over 1 MiB", path: big, want: `--kubeconfig "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a kubeconfig file`},
		{name: "at 1 MiB", path: atBound, size: MaxBytes},
		{name: "missing", path: missing, want: `--kubeconfig "` + missing + `": open ` + missing + `: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := ReadFile("--kubeconfig", tt.path)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want || len(data) != tt.size {
				t.Errorf("ReadFile(%q) = %d bytes, %q\nwant %d bytes, %q", tt.path, len(data), got, tt.size, tt.want)
			}
		})
	}
	if _, err := ReadFile("--kubeconfig", missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want fs.ErrNotExist wrapped (LoadFiles skips it)", err)
	}
}

// writeFile writes data to dir/name, making its directory.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// selfSigned is a small real certificate and its key, PEM: the CA bundle and the client pair
// of the tests (client-go parses both when it builds the transport).
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubeconfigfile test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// kubeconfigYAML is a kubeconfig with one cluster, user and context, its file fields as given
// ("" leaves a field out).
func kubeconfigYAML(ca, cert, key, tokenFile string) []byte {
	var cl, us strings.Builder
	cl.WriteString("    server: https://127.0.0.1:6443\n")
	if ca != "" {
		cl.WriteString("    certificate-authority: " + ca + "\n")
	}
	if cert != "" {
		us.WriteString("    client-certificate: " + cert + "\n")
	}
	if key != "" {
		us.WriteString("    client-key: " + key + "\n")
	}
	if tokenFile != "" {
		us.WriteString("    tokenFile: " + tokenFile + "\n")
	}
	if us.Len() == 0 {
		us.WriteString("    username: u\n")
	}
	return []byte("apiVersion: v1\nkind: Config\ncurrent-context: c\n" +
		"clusters:\n- name: k\n  cluster:\n" + cl.String() +
		"users:\n- name: u\n  user:\n" + us.String() +
		"contexts:\n- name: c\n  context: {cluster: k, user: u}\n")
}

// TestLoadFileRelativePaths: relative certificate-authority, client-certificate, client-key
// and tokenFile paths resolve against the kubeconfig's directory (as clientcmd.LoadFromFile
// and ResolveLocalPaths do; the test runs elsewhere), the three PEM files are read into the
// config as data with their paths cleared (client-go has no file left to open), the token is
// read in with its path kept for client-go's rotation, and the transport client-go builds from
// it parses them.
func TestLoadFileRelativePaths(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	writeFile(t, dir, "ca.pem", certPEM)
	writeFile(t, dir, "pki/client.pem", certPEM)
	writeFile(t, dir, "pki/client-key.pem", keyPEM)
	writeFile(t, dir, "token", []byte("s3cret"))
	kc := writeFile(t, dir, "conf/../kubeconfig", kubeconfigYAML("ca.pem", "pki/client.pem", "pki/client-key.pem", "./token"))

	cfg, err := LoadFile("--kubeconfig", kc)
	if err != nil {
		t.Fatal(err)
	}
	wantCluster := &clientcmdapi.Cluster{LocationOfOrigin: kc, Server: "https://127.0.0.1:6443", CertificateAuthorityData: certPEM}
	if diff := cmp.Diff(wantCluster, cfg.Clusters["k"], cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("cluster (-want +got):\n%s", diff)
	}
	wantUser := &clientcmdapi.AuthInfo{LocationOfOrigin: kc, ClientCertificateData: certPEM, ClientKeyData: keyPEM,
		Token: "s3cret", TokenFile: filepath.Join(dir, "token")}
	if diff := cmp.Diff(wantUser, cfg.AuthInfos["u"], cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("user (-want +got):\n%s", diff)
	}

	rc, err := RESTConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:6443" || !bytes.Equal(rc.CAData, certPEM) || rc.CAFile != "" ||
		!bytes.Equal(rc.CertData, certPEM) || rc.CertFile != "" || !bytes.Equal(rc.KeyData, keyPEM) || rc.KeyFile != "" ||
		rc.BearerToken != "s3cret" || rc.BearerTokenFile != filepath.Join(dir, "token") {
		t.Errorf("rest.Config: host %q, CA %d bytes file %q, cert %d bytes file %q, key %d bytes file %q, token %q file %q",
			rc.Host, len(rc.CAData), rc.CAFile, len(rc.CertData), rc.CertFile, len(rc.KeyData), rc.KeyFile, rc.BearerToken, rc.BearerTokenFile)
	}
	if _, err := rest.HTTPClientFor(rc); err != nil {
		t.Errorf("client-go's transport from the loaded config: %v", err)
	}
}

// TestLoadFileEmbeddedData: a kubeconfig with its certificates embedded, as the e2e harness
// writes it (clientcmd.WriteToFile: certificate-authority-data, client-certificate-data,
// client-key-data), loads to the same data.
func TestLoadFileEmbeddedData(t *testing.T) {
	certPEM, keyPEM := selfSigned(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: certPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin"}
	cfg.CurrentContext = "e2e"
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadFile("Kubeconfig (--kubeconfig)", kc)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := RESTConfig(loaded)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.0.1:6443" || !bytes.Equal(rc.CAData, certPEM) || !bytes.Equal(rc.CertData, certPEM) || !bytes.Equal(rc.KeyData, keyPEM) {
		t.Errorf("rest.Config: host %q, CA %d bytes, cert %d bytes, key %d bytes", rc.Host, len(rc.CAData), len(rc.CertData), len(rc.KeyData))
	}
	if _, err := rest.HTTPClientFor(rc); err != nil {
		t.Errorf("client-go's transport from the loaded config: %v", err)
	}
}

// TestLoadFileReferencedFiles: the files the current context names are read through the bound
// and must be regular files: a certificate-authority of /dev/zero passed clientcmd and then
// ran kubernetes.NewForConfig out of memory. Each refusal names the flag, the kubeconfig, the
// entry, the field and the file.
func TestLoadFileReferencedFiles(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	ca := writeFile(t, dir, "ca.pem", certPEM)
	cert := writeFile(t, dir, "client.pem", certPEM)
	key := writeFile(t, dir, "client-key.pem", keyPEM)
	token := writeFile(t, dir, "token", []byte("t"))
	big := writeFile(t, dir, "big.pem", make([]byte, MaxBytes+1))
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name string
		yaml []byte
		want string // after `--kubeconfig "<kc>": `
	}{
		{"certificate-authority past 1 MiB", kubeconfigYAML(big, "", "", ""),
			`cluster "k": certificate-authority "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a PEM file`},
		{"certificate-authority a directory", kubeconfigYAML(sub, "", "", ""),
			`cluster "k": certificate-authority "` + sub + `": not a regular file (d---------); want a PEM file`},
		{"certificate-authority a device", kubeconfigYAML("/dev/zero", "", "", ""),
			`cluster "k": certificate-authority "/dev/zero": not a regular file (Dc---------); want a PEM file`},
		{"certificate-authority missing", kubeconfigYAML(missing, "", "", ""),
			`cluster "k": certificate-authority "` + missing + `": open ` + missing + `: no such file or directory`},
		{"client-certificate a device", kubeconfigYAML(ca, "/dev/zero", key, ""),
			`user "u": client-certificate "/dev/zero": not a regular file (Dc---------); want a PEM file`},
		{"client-key past 1 MiB", kubeconfigYAML(ca, cert, big, ""),
			`user "u": client-key "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a PEM file`},
		{"tokenFile a device", kubeconfigYAML(ca, "", "", "/dev/zero"),
			`user "u": tokenFile "/dev/zero": not a regular file (Dc---------); want a token file`},
		{"tokenFile past 1 MiB", kubeconfigYAML(ca, "", "", big),
			`user "u": tokenFile "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a token file`},
		{"certificate-authority both as a file and as data",
			bytes.Replace(kubeconfigYAML(ca, "", "", token), []byte("    server:"), []byte("    certificate-authority-data: Zm9v\n    server:"), 1),
			`cluster "k": certificate-authority-data and certificate-authority "` + ca + `" are both given; want one`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := writeFile(t, dir, "kubeconfig-"+string(rune('a'+i)), tt.yaml)
			_, err := LoadFile("--kubeconfig", kc)
			want := `--kubeconfig "` + kc + `": ` + tt.want
			if err == nil || err.Error() != want {
				t.Errorf("LoadFile: %v\nwant %s", err, want)
			}
		})
	}

	// Only the current context's files are read, as client-go reads only those: another
	// context's broken certificate-authority is no error.
	other := append(kubeconfigYAML(ca, cert, key, token),
		[]byte("- name: other\n  context: {cluster: broken, user: u}\n")...)
	other = bytes.Replace(other, []byte("users:"), []byte("- name: broken\n  cluster:\n    server: https://x\n    certificate-authority: /dev/zero\nusers:"), 1)
	cfg, err := LoadFile("--kubeconfig", writeFile(t, dir, "kubeconfig-other", other))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Clusters["broken"].CertificateAuthority; got != "/dev/zero" {
		t.Errorf("the other context's certificate-authority = %q, want it untouched", got)
	}
}

// TestLoadFilesAsClientcmd: LoadFiles merges $KUBECONFIG's files as clientcmd's loading rules
// do (the first file to set an entry or the current context wins; relative paths resolve
// against each entry's own file; missing files and empty paths are skipped), compared with
// clientcmd's own Load over the same files, without its migration.
func TestLoadFilesAsClientcmd(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a/config", []byte(`apiVersion: v1
kind: Config
clusters:
- name: shared
  cluster: {server: "https://a", certificate-authority: ca.pem}
- name: only-a
  cluster: {server: "https://only-a", insecure-skip-tls-verify: true}
users:
- name: shared
  user: {client-certificate: c.pem, client-key: k.pem}
contexts:
- name: shared
  context: {cluster: shared, user: shared, namespace: from-a}
`))
	b := writeFile(t, dir, "b/config", []byte(`apiVersion: v1
kind: Config
current-context: shared
preferences: {colors: true}
clusters:
- name: shared
  cluster: {server: "https://b"}
- name: only-b
  cluster: {server: "https://only-b", certificate-authority: ../b-ca.pem}
users:
- name: only-b
  user: {tokenFile: token}
contexts:
- name: shared
  context: {cluster: only-b, user: only-b}
- name: only-b
  context: {cluster: only-b, user: only-b}
`))
	c := writeFile(t, dir, "c/config", []byte("current-context: only-b\n"))
	paths := []string{a, filepath.Join(dir, "missing"), "", b, c}

	got, err := loadFiles("kubeconfig ($KUBECONFIG or ~/.kube/config)", paths)
	if err != nil {
		t.Fatal(err)
	}
	want, err := (&clientcmd.ClientConfigLoadingRules{Precedence: paths}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("LoadFiles vs clientcmd's Load (-clientcmd +ours):\n%s", diff)
	}
	// What the comparison holds, spelled out: a's entries and b's current context win.
	if got.CurrentContext != "shared" || got.Clusters["shared"].Server != "https://a" ||
		got.Clusters["shared"].CertificateAuthority != filepath.Join(dir, "a", "ca.pem") ||
		got.Clusters["only-b"].CertificateAuthority != filepath.Join(dir, "b-ca.pem") || !got.Preferences.Colors {
		t.Errorf("merged: current %q, shared %+v, only-b %+v", got.CurrentContext, got.Clusters["shared"], got.Clusters["only-b"])
	}

	// No file at all: an empty config, which client-go calls no configuration (outside a pod).
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	none, err := LoadFiles("kubeconfig ($KUBECONFIG or ~/.kube/config)", []string{filepath.Join(dir, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RESTConfig(none); !clientcmd.IsEmptyConfig(err) {
		t.Errorf("RESTConfig(no file) = %v, want clientcmd's empty-config error", err)
	}
}
