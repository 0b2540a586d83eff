package capacity_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferscale/inferscale/capacity"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// silentListener accepts connections and never writes to them (a hung server); its address
// is returned, and everything is closed when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// hungOpenAI lists model m at /v1/models and holds every completion until the client gives
// up; with headers it first sends 200 and its headers, then stalls the stream.
func hungOpenAI(t *testing.T, headers bool) string {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			_, _ = w.Write([]byte(`{"data":[{"id":"m"}]}`))
			return
		}
		if headers {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first: Close waits for the handlers
	return srv.URL
}

// hungTriton is the fake Triton serving model m, whose every ModelInfer executes for an hour.
func hungTriton(t *testing.T) string {
	t.Helper()
	srv := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		Models: []tritontest.Model{{Name: "m", ServiceTime: time.Hour, Concurrency: 1}}, StartupModels: []string{"m"}})
	return srv.GRPCAddr()
}

// TestHungServerEndsTheRun: a target that accepts and never answers, at the first contact or
// at every request of the probe or the load, ends the run with an error naming the request
// that timed out and the flag that bounds it. A request held past --request-timeout used to
// read as a wrong --model ("11 × DeadlineExceeded … check --model"), a stream stalled after
// its headers as "transport", and a load that timed out throughout as a model that met no
// SLO; GET /v1/models did not say which timeout ran out.
// closedPort returns host:port of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestHungServerEndsTheRun(t *testing.T) {
	const requestTimeout = 100 * time.Millisecond
	tests := []struct {
		name     string
		protocol string
		target   func(t *testing.T) string
		start    bool // --start-rate given: no probe, the load itself times out
		wantIs   error
		want     string // part of the error; TARGET stands for the target
	}{
		{"openai: no answer to the first contact", capacity.ProtocolOpenAI,
			func(t *testing.T) string { return "http://" + silentListener(t) }, false, capacity.ErrUnreachable,
			"target unreachable: --target TARGET: GET /v1/models did not answer within --connect-timeout 300ms"},
		{"triton-grpc: no answer to the first contact", capacity.ProtocolTriton,
			silentListener, false, capacity.ErrUnreachable,
			"target unreachable: --target TARGET: Triton's ServerLive did not answer within --connect-timeout 300ms: "},
		// Refused in milliseconds, this was said as "did not answer true within 300ms".
		{"triton-grpc: connection refused", capacity.ProtocolTriton,
			closedPort, false, capacity.ErrUnreachable,
			"target unreachable: --target TARGET: connection refused (nothing listens there; want Triton's gRPC endpoint, port 8001 by default): "},
		{"openai: completions never answered", capacity.ProtocolOpenAI,
			func(t *testing.T) string { return hungOpenAI(t, false) }, false, capacity.ErrUnreachable,
			"target unreachable: probe: 11 of 11 requests timed out: POST /v1/completions did not answer within --request-timeout 100ms"},
		{"openai: stream stalls after its headers", capacity.ProtocolOpenAI,
			func(t *testing.T) string { return hungOpenAI(t, true) }, false, capacity.ErrUnreachable,
			"target unreachable: probe: 11 of 11 requests timed out: POST /v1/completions did not answer within --request-timeout 100ms"},
		{"triton-grpc: ModelInfer never answered", capacity.ProtocolTriton,
			hungTriton, false, capacity.ErrUnreachable,
			"target unreachable: probe: 11 of 11 requests timed out: ModelInfer did not answer within --request-timeout 100ms"},
		{"openai: the load times out, --start-rate given", capacity.ProtocolOpenAI,
			func(t *testing.T) string { return hungOpenAI(t, false) }, true, capacity.ErrRefused,
			" requests timed out: POST /v1/completions did not answer within --request-timeout 100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := tt.target(t)
			cfg := capacity.DefaultConfig()
			cfg.Protocol, cfg.Target, cfg.Model, cfg.Profile = tt.protocol, target, "m", "1g.10gb"
			cfg.NVML, cfg.SkipMemory, cfg.OutDir = "off", true, t.TempDir()
			cfg.ConnectTimeout, cfg.Measure.RequestTimeout = 300*time.Millisecond, requestTimeout
			// The SLO latency may not exceed the timeout; the lag bound stays the default's
			// 100 ms (a tenth of 1 s), so a busy machine does not make the level client-bound.
			cfg.Measure.SLO.Latency, cfg.Measure.MaxLag = requestTimeout, 100*time.Millisecond
			if tt.start { // one level of four 100 ms windows
				cfg.Search.StartRPS, cfg.Search.MinRPS, cfg.Search.MaxRPS = 20, 20, 20
				cfg.Measure.Window, cfg.Measure.MinWindowRequests, cfg.Measure.MaxWindows = 100*time.Millisecond, 1, 4
			}
			var log bytes.Buffer
			out, err := capacity.Run(context.Background(), cfg, &log)
			want := strings.ReplaceAll(tt.want, "TARGET", target)
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Run = %v; want %v", err, tt.wantIs)
			}
			if got := err.Error(); !strings.Contains(got, want) {
				t.Errorf("Run = %s\nwant %s", got, want)
			}
			if !tt.start {
				return
			}
			if n := len(out.Record.Curve); n != 1 || len(out.Record.Curve[0].ErrorsByCode) != 1 || out.Record.Curve[0].ErrorsByCode["DeadlineExceeded"] == 0 {
				t.Errorf("curve %+v; want one level whose errors all timed out", out.Record.Curve)
			}
			if !strings.Contains(log.String(), "passed false (4 windows), errors: ") || !strings.Contains(log.String(), " × DeadlineExceeded\n") {
				t.Errorf("progress %q does not count the timed-out requests", log.String())
			}
		})
	}
}

// TestTimeoutRanges: --request-timeout and --connect-timeout are bounded (they were > 0 only:
// a hung server could hold each request, or the first contact, for as long as given), and
// --request-timeout may not be below --slo-latency (it was accepted: a request that met the
// SLO latency timed out first and counted as an error, so the level's verdict was the
// timeout's, not the SLO's).
func TestTimeoutRanges(t *testing.T) {
	tests := []struct {
		name string
		give func(*capacity.Config)
		want string // "": valid
	}{
		{"request timeout at its bound", func(c *capacity.Config) { c.Measure.RequestTimeout = time.Hour }, ""},
		{"request timeout past its bound", func(c *capacity.Config) { c.Measure.RequestTimeout = time.Hour + time.Second },
			"capacity: invalid config: requestTimeout (--request-timeout) is 1h0m1s, want (0, 1h0m0s]"},
		{"request timeout 0", func(c *capacity.Config) { c.Measure.RequestTimeout = 0 },
			"capacity: invalid config: requestTimeout (--request-timeout) is 0s, want (0, 1h0m0s]"},
		{"defaults: 30s timeout, 1s SLO latency", func(c *capacity.Config) {}, ""},
		{"request timeout equal to the SLO latency", func(c *capacity.Config) {
			c.Measure.RequestTimeout, c.Measure.SLO.Latency = 500*time.Millisecond, 500*time.Millisecond
		}, ""},
		{"request timeout below the SLO latency", func(c *capacity.Config) {
			c.Measure.RequestTimeout, c.Measure.SLO.Latency = 200*time.Millisecond, 500*time.Millisecond
		}, "capacity: invalid config: requestTimeout (--request-timeout) is 200ms, want >= slo.latency (--slo-latency) 500ms: a request that would meet the SLO would time out first and count as an error"},
		// No timeout in range could reach it: the latency's own range says so, once.
		{"SLO latency past the timeout's bound", func(c *capacity.Config) { c.Measure.SLO.Latency = 2 * time.Hour },
			"capacity: invalid config: slo.latency (--slo-latency) is 2h0m0s, want (0, 1h0m0s] (--request-timeout must reach it and is at most 1h0m0s)"},
		// Each out of its range: each said once, and not compared.
		{"request timeout and SLO latency both out of range", func(c *capacity.Config) {
			c.Measure.RequestTimeout, c.Measure.SLO.Latency = 0, -time.Second
		}, "capacity: invalid config: requestTimeout (--request-timeout) is 0s, want (0, 1h0m0s]\n" +
			"capacity: invalid config: slo.latency (--slo-latency) is -1s, want (0, 1h0m0s] (--request-timeout must reach it and is at most 1h0m0s)"},
		{"connect timeout at its bound", func(c *capacity.Config) { c.ConnectTimeout = 5 * time.Minute }, ""},
		{"connect timeout past its bound", func(c *capacity.Config) { c.ConnectTimeout = 5*time.Minute + time.Second },
			"capacity: invalid config: --connect-timeout 5m1s: want (0, 5m0s]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := capacity.DefaultConfig()
			cfg.Target, cfg.Model, cfg.Profile = "localhost:8001", "m", "1g.10gb"
			tt.give(&cfg)
			got := ""
			if err := cfg.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate = %q\nwant %q", got, tt.want)
			}
		})
	}
}
