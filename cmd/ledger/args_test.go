package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/internal/kubeconfigfile/streamtest"

	"github.com/inferscale/inferscale/internal/kubeconfigfile"
)

// TestStrayArgument: flag stops at the first non-flag, so `ledger extra --spec=x` said
// "--spec: required"; it now names the stray argument, exit 2.
func TestStrayArgument(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"extra", "--spec=" + testdata + "source-case.yaml"}, &out, &errb)
	const want = "ledger: unexpected argument \"extra\": ledger takes only flags (e.g. --spec=FILE); flags after it were not read\n"
	if code != exitBad || errb.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, errb.String(), exitBad, want)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}

// TestKubeconfigBounded: clientcmd reads a kubeconfig whole, and --kubeconfig=/dev/zero ran
// the process out of memory. A kubeconfig that is not a regular file, or is over 1 MiB, is
// bad input (exit 2) naming the flag and the file, before anything reads it. A file whose
// size says 0 but that streams (/proc/self/pagemap) passed the stat and ran out of memory; it
// is read through the bound now. So is a certificate-authority the kubeconfig names, which
// client-go read whole (in kubernetes.NewForConfig), $KUBECONFIG's as well as --kubeconfig's.
func TestKubeconfigBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, kubeconfigfile.MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	caDir := t.TempDir()
	caKubeconfig := filepath.Join(caDir, "kubeconfig")
	if err := os.WriteFile(caKubeconfig, []byte(testKubeconfig(caDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, kubeconfig, env, want string
	}{
		{"device", "/dev/zero", "", `ledger: --kubeconfig "/dev/zero": not a regular file (Dc---------); want a kubeconfig file`},
		{"directory", "/", "", `ledger: --kubeconfig "/": not a regular file (d---------); want a kubeconfig file`},
		{"over 1 MiB", big, "", `ledger: --kubeconfig "` + big + `": 1048577 bytes, larger than 1048576 (1 MiB); want a kubeconfig file`},
		{"$KUBECONFIG device", "", "/dev/zero", `ledger: kubeconfig ($KUBECONFIG or ~/.kube/config) "/dev/zero": not a regular file (Dc---------); want a kubeconfig file`},
		{"zero size, streams", "/proc/self/pagemap", "", `ledger: --kubeconfig "/proc/self/pagemap": more than 1048576 bytes (1 MiB) read, though its size is 0; want a kubeconfig file`},
		{"certificate-authority a directory", caKubeconfig, "", `ledger: --kubeconfig "` + caKubeconfig + `": cluster "k": certificate-authority "` + caDir + `": not a regular file (d---------); want a PEM file`},
		{"$KUBECONFIG's certificate-authority a directory", "", caKubeconfig, `ledger: kubeconfig ($KUBECONFIG or ~/.kube/config) "` + caKubeconfig + `": cluster "k": certificate-authority "` + caDir + `": not a regular file (d---------); want a PEM file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.kubeconfig == streamtest.Pagemap {
				streamtest.SkipUnlessPagemap(t)
			}
			t.Setenv("KUBECONFIG", tt.env)
			args := []string{"--spec=" + testdata + "source-case.yaml", "--live", "--timeout=2s"}
			if tt.kubeconfig != "" {
				args = append(args, "--kubeconfig="+tt.kubeconfig)
			}
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			if got := strings.TrimSpace(errb.String()); code != exitBad || got != tt.want {
				t.Errorf("exit %d, stderr %q\nwant %d, %q", code, got, exitBad, tt.want)
			}
		})
	}
}

// TestHelpExitsZero: --help prints the usage and is not bad input (the other commands exit 0).
func TestHelpExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "-spec string") {
		t.Errorf("--help: exit %d, stderr %q; want 0 and the usage", code, errb.String())
	}
}

// TestMigConfigOutUnwritable: a --mig-config-out that cannot be written is bad input naming
// the flag (it said only "ledger: write /dev/full: …").
func TestMigConfigOutUnwritable(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--spec=" + testdata + "eight-whole.yaml", "--mig-config-out=/dev/full", "--audit=heuristic"}, &out, &errb)
	const want = "ledger: --mig-config-out: write /dev/full: no space left on device\n"
	if code != exitBad || errb.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, errb.String(), exitBad, want)
	}
}

// TestLiveMissingPeakWithoutPrometheus: with --live but no --prometheus-address nothing can
// fill a P0/P1 service's missing peakRPS, so it is bad input before the cluster is read (it was
// let through, the cluster read, and the same error reported after).
func TestLiveMissingPeakWithoutPrometheus(t *testing.T) {
	data, err := os.ReadFile(testdata + "eight-whole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte(strings.Replace(string(data), "peakRPS: 18, ", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("INFERSCALE_PROMETHEUS_ADDRESS", "") // restored after the test
	os.Unsetenv("INFERSCALE_PROMETHEUS_ADDRESS")
	var out, errb bytes.Buffer
	code := run([]string{"--spec=" + spec, "--live", "--kubeconfig=/nonexistent/kubeconfig", "--timeout=2s"}, &out, &errb)
	if want := "peakRPS: required for P1 service"; code != exitBad || !strings.Contains(errb.String(), want) || strings.Contains(errb.String(), "kubeconfig") {
		t.Errorf("exit %d, stderr %q; want %d naming %q before any kubeconfig is read", code, errb.String(), exitBad, want)
	}
}

// TestIntegerFlagsDecimal: --max-retries=010 was read as octal 8 (0x10 as 16, 1_0 as 10);
// integer flags take plain decimal only (internal/decimalflag), exit 2 naming the flag.
func TestIntegerFlagsDecimal(t *testing.T) {
	for _, give := range []string{"010", "0x10", "1_0"} {
		var errb bytes.Buffer
		c, _, err := parseFlags([]string{"--spec=x", "--max-retries=" + give}, &errb)
		if want := `invalid value "` + give + `" for flag -max-retries: want a whole number in plain decimal`; err == nil || !strings.Contains(errb.String(), want) {
			t.Errorf("--max-retries=%s: MaxRetries %d, err %v, stderr %q; want %q", give, c.MaxRetries, err, errb.String(), want)
		}
	}
	if c, _, err := parseFlags([]string{"--spec=x", "--max-retries=10"}, &bytes.Buffer{}); err != nil || c.MaxRetries != 10 {
		t.Errorf("--max-retries=10: %d, %v", c.MaxRetries, err)
	}
}
