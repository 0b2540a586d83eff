//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// suite is the state TestMain sets up for every scenario.
var suite struct {
	root    string // repository root
	cluster *cluster
	bins    binaries
	tmp     string // scratch directory for the whole run
	logDir  string
	missing map[string]error // inferscale commands that did not build
}

var keepLogs = flag.Bool("e2e.keep", false, "keep the scratch directory (logs, data) even when every test passes")

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	var err error
	suite.root, err = filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.tmp, err = os.MkdirTemp("", "inferscale-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.logDir = filepath.Join(suite.tmp, "logs")
	if err := os.MkdirAll(suite.logDir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if code != 0 || *keepLogs {
			fmt.Fprintf(os.Stderr, "e2e: logs and data kept in %s\n", suite.tmp)
			return
		}
		os.RemoveAll(suite.tmp)
	}()

	if err := prepareBinaries(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	start := time.Now()
	suite.cluster, err = startCluster(ctx, filepath.Join(suite.tmp, "cluster"), suite.logDir, suite.bins)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		if suite.cluster != nil {
			suite.cluster.dumpLogs(60)
		}
		return 1
	}
	logf("cluster up in %v (logs in %s)", time.Since(start).Round(time.Millisecond), suite.logDir)
	// A failing pool test prints the component logs itself (newPoolEnv).
	defer suite.cluster.stop()
	return m.Run()
}

// prepareBinaries builds (or finds cached) control-plane binaries with
// e2e/tools/build.sh and builds inferscale's own commands from this tree.
func prepareBinaries() error {
	start := time.Now()
	// INFERSCALE_E2E_BIN_DIR points at prebuilt binaries (same names as
	// build.sh writes) and skips the build.
	dir := os.Getenv("INFERSCALE_E2E_BIN_DIR")
	if dir == "" {
		cmd := exec.Command(filepath.Join(suite.root, "e2e", "tools", "build.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("e2e/tools/build.sh: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir = lines[len(lines)-1]
	}
	logf("control-plane binaries ready in %v: %s", time.Since(start).Round(time.Millisecond), dir)
	b := &suite.bins
	b.etcd = filepath.Join(dir, "etcd")
	b.apiserver = filepath.Join(dir, "kube-apiserver")
	b.controllerManager = filepath.Join(dir, "kube-controller-manager")
	b.scheduler = filepath.Join(dir, "kube-scheduler")
	b.kedaOperator = filepath.Join(dir, "keda-operator")
	b.kedaAdapter = filepath.Join(dir, "keda-adapter")
	var err error
	if b.prometheus, err = exec.LookPath("prometheus"); err != nil {
		return fmt.Errorf("prometheus (Debian package `prometheus`): %w", err)
	}

	// inferscale's commands, built from this working tree.
	binDir := filepath.Join(suite.tmp, "bin")
	suite.missing = map[string]error{}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"scaler", &b.scaler}, {"tritonfake", &b.tritonfake}, {"residency", &b.residency}} {
		start := time.Now()
		out := filepath.Join(binDir, c.name)
		build := exec.Command("go", "build", "-o", out, "./cmd/"+c.name)
		build.Dir = suite.root
		if msg, err := build.CombinedOutput(); err != nil {
			suite.missing[c.name] = fmt.Errorf("go build ./cmd/%s: %w\n%s", c.name, err, msg)
			logf("cannot build cmd/%s: %v", c.name, err)
			continue
		}
		*c.dst = out
		logf("built cmd/%s in %v", c.name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// requireCommands fails the test when one of inferscale's commands did not build.
func requireCommands(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := suite.missing[n]; err != nil {
			t.Fatalf("cmd/%s is needed: %v", n, err)
		}
	}
}
