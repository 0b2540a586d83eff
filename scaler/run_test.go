package scaler

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogDurationsAreStrings: JSON logs carry durations as Duration.String,
// not integer nanoseconds.
func TestLogDurationsAreStrings(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(DefaultConfig(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("x", "refreshInterval", 5*time.Second, "forgetAfter", 90*time.Second)
	for _, want := range []string{`"refreshInterval":"5s"`, `"forgetAfter":"1m30s"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %s lacks %s", buf.String(), want)
		}
	}
}

// TestShutdownIsLogged: ending serve's context (SIGTERM) logs the start of
// the shutdown and, once stopped, how long the graceful stop took.
func TestShutdownIsLogged(t *testing.T) {
	gl, hl, cfg := serveConfig(t)
	var buf syncBuffer
	log, err := NewLogger(cfg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, log, gl, hl, newFakeSignals()) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	out := buf.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`"msg":"shutting down: draining in-flight RPCs","gracefulStopTimeout":"10s"`),
		regexp.MustCompile(`"msg":"stopped","took":"[0-9.]+(ms|s|µs|ns)?"`),
	} {
		if !want.MatchString(out) {
			t.Errorf("logs lack %s:\n%s", want, out)
		}
	}
}

// serveConfig returns listeners on free loopback ports for serve's gRPC and HTTP sides and the
// default Config naming them.
func serveConfig(t *testing.T) (grpcLis, httpLis net.Listener, cfg Config) {
	t.Helper()
	gl, hl := serveListeners(t)
	cfg = DefaultConfig()
	cfg.Listen, cfg.MetricsListen = gl.Addr().String(), hl.Addr().String()
	return gl, hl, cfg
}

// serveListeners returns listeners on free loopback ports for serve's gRPC and HTTP sides.
func serveListeners(t *testing.T) (grpcLis, httpLis net.Listener) {
	t.Helper()
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		t.Fatal(err)
	}
	return gl, hl
}
