package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// DefaultBinary is where Debian's prometheus package installs the server.
const DefaultBinary = "/usr/bin/prometheus"

// RequireEnv, when set to 1, turns a missing Prometheus binary into a test failure.
const RequireEnv = "INFERSCALE_REQUIRE_PROMETHEUS"

// ScrapeInterval is the scrape interval (and evaluation interval) of every test server.
const ScrapeInterval = time.Second

// Server is a running Prometheus.
type Server struct {
	url     string
	sdFile  string
	cmd     *exec.Cmd
	done    chan struct{}
	logs    *syncBuffer
	client  v1.API
	tr      *http.Transport
	mu      sync.Mutex
	stopped bool
}

// Binary returns the Prometheus binary tests use, or "" when none is installed.
func Binary() string {
	if b := os.Getenv("PROMETHEUS_BIN"); b != "" {
		return b
	}
	if _, err := os.Stat(DefaultBinary); err == nil {
		return DefaultBinary
	}
	if b, err := exec.LookPath("prometheus"); err == nil {
		return b
	}
	return ""
}

// Start runs Prometheus on a free 127.0.0.1 port scraping targets (host:port, /metrics)
// every second, waits until it is ready, and stops it in t.Cleanup. It skips the test when
// no binary is installed, unless INFERSCALE_REQUIRE_PROMETHEUS=1.
func Start(t testing.TB, targets ...string) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		msg := "promtest: no prometheus binary (install Debian's prometheus package, or set PROMETHEUS_BIN)"
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(msg + "; " + RequireEnv + "=1 requires it")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	sd := filepath.Join(dir, "targets.json")
	if err := writeTargets(sd, targets); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: promtest
    honor_labels: true
    scrape_interval: %[1]s
    scrape_timeout: %[1]s
    file_sd_configs:
      - files: [%[2]q]
        refresh_interval: 1s
`, ScrapeInterval, sd)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port can be taken between our probe and Prometheus's bind; retry a few times.
	var lastErr error
	for range 3 {
		s, err := start(bin, dir, cfgFile, sd)
		if err == nil {
			t.Cleanup(func() { s.Kill() })
			return s
		}
		lastErr = err
	}
	t.Fatalf("promtest: start prometheus: %v", lastErr)
	return nil
}

func start(bin, dir, cfgFile, sd string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin,
		"--config.file="+cfgFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data-"+addr[len("127.0.0.1:"):]),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	tr := &http.Transport{}
	s := &Server{url: "http://" + addr, sdFile: sd, cmd: cmd, done: make(chan struct{}), logs: logs, tr: tr}
	go func() { _ = cmd.Wait(); close(s.done) }()
	c, err := api.NewClient(api.Config{Address: s.url, RoundTripper: tr})
	if err != nil {
		s.Kill()
		return nil, err
	}
	s.client = v1.NewAPI(c)
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Kill()
		return nil, fmt.Errorf("%w; prometheus output:\n%s", err, logs.String())
	}
	return s, nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Transport: s.tr, Timeout: time.Second}
	for {
		resp, err := hc.Get(s.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return errors.New("prometheus exited before it was ready")
		case <-deadline:
			return fmt.Errorf("prometheus not ready after %v", timeout)
		case <-tick.C:
		}
	}
}

// URL returns the server's base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// API returns a client_golang API client for the server.
func (s *Server) API() v1.API { return s.client }

// Logs returns what Prometheus has printed so far.
func (s *Server) Logs() string { return s.logs.String() }

// SetTargets replaces the scraped targets (host:port). Prometheus picks the file up within
// about a second.
func (s *Server) SetTargets(t testing.TB, targets ...string) {
	t.Helper()
	if err := writeTargets(s.sdFile, targets); err != nil {
		t.Fatal(err)
	}
}

// Kill stops Prometheus at once (SIGKILL) and waits for it to exit. Safe to call twice.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	_ = s.cmd.Process.Kill()
	<-s.done
	s.tr.CloseIdleConnections()
}

// Query evaluates q now and returns the result as a vector (a scalar becomes one sample).
func (s *Server) Query(ctx context.Context, q string) (model.Vector, error) {
	v, _, _, err := s.client.Query(ctx, q, time.Now())
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case model.Vector:
		return v, nil
	case *model.Scalar:
		return model.Vector{{Value: v.Value, Timestamp: v.Timestamp}}, nil
	}
	return nil, fmt.Errorf("query %q returned a %s", q, v.Type())
}

// WaitFor evaluates q every 100 ms until pred accepts the result, and fails the test after
// timeout with the last result or error.
func (s *Server) WaitFor(t testing.TB, q string, pred func(model.Vector) bool, timeout time.Duration) model.Vector {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var (
		last    model.Vector
		lastErr error
	)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		last, lastErr = s.Query(ctx, q)
		cancel()
		if lastErr == nil && pred(last) {
			return last
		}
		select {
		case <-deadline:
			t.Fatalf("promtest: %q did not satisfy the predicate within %v; last result %v, error %v", q, timeout, last, lastErr)
			return nil
		case <-tick.C:
		}
	}
}

// HasValue accepts a vector of exactly one sample equal to want.
func HasValue(want float64) func(model.Vector) bool {
	return func(v model.Vector) bool { return len(v) == 1 && float64(v[0].Value) == want }
}

// IsEmpty accepts an empty vector.
func IsEmpty(v model.Vector) bool { return len(v) == 0 }

// writeTargets writes a file_sd JSON file atomically (rename), so Prometheus never reads a
// half-written file.
func writeTargets(path string, targets []string) error {
	groups := []map[string]any{}
	if len(targets) > 0 {
		groups = append(groups, map[string]any{"targets": targets})
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
