package promtest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// SlowProxy is a reverse proxy in front of a Prometheus that holds every instant query
// (/api/v1/query) for a configurable delay before forwarding it, to test callers against a
// slow Prometheus. Other paths pass straight through. A request whose client gives up during
// the delay is dropped.
type SlowProxy struct {
	srv   *httptest.Server
	delay atomic.Int64 // nanoseconds
	held  atomic.Int64
}

// NewSlowProxy starts a proxy to target (a base URL such as Server.URL()) that delays each
// instant query by delay, and closes it in t.Cleanup.
func NewSlowProxy(t testing.TB, target string, delay time.Duration) *SlowProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("promtest: proxy target %q: %v", target, err)
	}
	p := &SlowProxy{}
	p.delay.Store(int64(delay))
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/query" {
			// Consume the (POST) body first: only then does net/http watch the connection
			// and cancel r.Context() when the client gives up during the delay.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if d := time.Duration(p.delay.Load()); d > 0 {
				p.held.Add(1)
				timer := time.NewTimer(d)
				select {
				case <-timer.C:
				case <-r.Context().Done():
					timer.Stop()
					p.held.Add(-1)
					return
				}
				p.held.Add(-1)
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.Close()
		rp.Transport.(*http.Transport).CloseIdleConnections()
	})
	return p
}

// URL returns the proxy's base URL; use it as the Prometheus address.
func (p *SlowProxy) URL() string { return p.srv.URL }

// SetDelay changes the delay of later queries.
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Held returns how many queries are being delayed right now.
func (p *SlowProxy) Held() int { return int(p.held.Load()) }

// Close stops the proxy; later queries through it fail with connection refused. Safe to call
// twice.
func (p *SlowProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}
