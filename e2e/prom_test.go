//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// promServer is the Debian Prometheus the scaler reads. Unlike
// internal/promtest it outlives one test, gives every target its own
// labels (namespace, pod: what the presets group by) and restarts on the
// same address, so the scaler's prometheusAddress stays valid across a
// stop/start.
type promServer struct {
	bin, logDir, dir string
	port             int
	cfgFile, sdFile  string

	mu      sync.Mutex
	p       *proc
	targets map[string]map[string]string // address -> labels
}

func newPromServer(bin, logDir, dir string) (*promServer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &promServer{bin: bin, logDir: logDir, dir: dir, port: freePort(), targets: map[string]map[string]string{},
		cfgFile: filepath.Join(dir, "prometheus.yml"), sdFile: filepath.Join(dir, "targets.json")}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pool
    scrape_interval: 1s
    scrape_timeout: 1s
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, s.sdFile)
	if err := os.WriteFile(s.cfgFile, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if err := s.writeTargets(); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the base URL the scaler is given.
func (s *promServer) URL() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// start runs Prometheus (again) on its fixed port and waits for /-/ready.
func (s *promServer) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := startProc(s.logDir, "prometheus", s.bin, []string{
		"--config.file=" + s.cfgFile,
		"--storage.tsdb.path=" + filepath.Join(s.dir, "data"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(s.port),
		"--log.level=warn",
	}, nil)
	if err != nil {
		return err
	}
	s.p = p
	return waitFor(ctx, "prometheus", p, time.Minute, 200*time.Millisecond, httpOK(plainClient, s.URL()+"/-/ready"))
}

// stop ends Prometheus (SIGTERM; it flushes its head block).
func (s *promServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p.stop(15 * time.Second)
}

// setTarget adds or replaces a scraped target; nil labels removes it.
func (s *promServer) setTarget(addr string, labels map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if labels == nil {
		delete(s.targets, addr)
	} else {
		s.targets[addr] = labels
	}
	return s.writeTargets()
}

// writeTargets rewrites the file_sd file atomically, one group per target.
func (s *promServer) writeTargets() error {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	groups := []group{}
	addrs := make([]string, 0, len(s.targets))
	for a := range s.targets {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		groups = append(groups, group{Targets: []string{a}, Labels: s.targets[a]})
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	tmp := s.sdFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.sdFile)
}

// query evaluates an instant query now and returns the vector.
func (s *promServer) query(ctx context.Context, q string) (model.Vector, error) {
	c, err := api.NewClient(api.Config{Address: s.URL()})
	if err != nil {
		return nil, err
	}
	v, _, _, err := v1.NewAPI(c).Query(ctx, q, time.Now())
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %q returned %s, want a vector", q, v.Type())
	}
	return vec, nil
}
