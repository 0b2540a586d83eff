package prom

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

const vectorHead = `{"status":"success","data":{"resultType":"vector","result":[`

// vectorOfSize returns a valid Prometheus vector answer of exactly size bytes (padded with
// trailing spaces) and its number of series, each of value 1.
func vectorOfSize(t *testing.T, size int) (string, int) {
	t.Helper()
	const series, tail = `{"metric":{"model":"m"},"value":[1767225600,"1"]}`, `]}}`
	var b strings.Builder
	b.WriteString(vectorHead)
	n := 0
	for b.Len()+1+len(series)+len(tail) <= size {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(series)
		n++
	}
	b.WriteString(tail)
	b.WriteString(strings.Repeat(" ", size-b.Len()))
	if b.Len() != size {
		t.Fatalf("built %d bytes, want %d", b.Len(), size)
	}
	return b.String(), n
}

// limitPoller returns a poller on addr with a 64 KiB response limit and a custom-query key.
func limitPoller(t *testing.T, addr string, timeout time.Duration) (*Poller, Key) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DefaultAddress = addr
	cfg.MaxResponseBytes = 64 << 10
	cfg.QueryTimeout = timeout
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
}

// TestResponseLimit: an endless answer fails its key with the limit and the address, and
// does not quote the body; an answer of exactly the limit parses, one byte more does not.
func TestResponseLimit(t *testing.T) {
	const limit = 64 << 10
	atLimit, n := vectorOfSize(t, limit)
	over, _ := vectorOfSize(t, limit+1)
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		wantValue float64
		wantErr   bool
	}{
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(vectorHead))
			for r.Context().Err() == nil {
				if _, err := w.Write([]byte(`{"metric":{},"value":[1,"1"]},`)); err != nil {
					return
				}
			}
		}, 0, true},
		{"one byte over", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(over)) }, 0, true},
		{"exactly the limit", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(atLimit)) }, float64(n), false},
		{"error page over the limit", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(strings.Repeat("<html>", limit)))
		}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			p, k := limitPoller(t, srv.URL, 30*time.Second)
			p.Refresh(context.Background())
			got := p.Result(k)
			if tt.wantErr != (got.Err != nil) || got.Value != tt.wantValue {
				t.Fatalf("Result = %+v, want Value %v, error %v", got, tt.wantValue, tt.wantErr)
			}
			if !tt.wantErr {
				return
			}
			msg := got.Err.Error()
			if !errors.Is(got.Err, ErrResponseTooLarge) || !strings.Contains(msg, "65536-byte limit") || !strings.Contains(msg, srv.URL) {
				t.Errorf("Err = %v, want ErrResponseTooLarge naming the 65536-byte limit and %s", got.Err, srv.URL)
			}
			if strings.Contains(msg, `"metric"`) || strings.Contains(msg, "<html>") || len(msg) > 1024 {
				t.Errorf("Err quotes the body (%d bytes): %.200s", len(msg), msg)
			}
			if held := p.budget.held.Load() + p.tenantBudget.held.Load(); held != 0 {
				t.Errorf("budget holds %d bytes after the evaluation, want 0", held)
			}
		})
	}
	if testing.Short() {
		return
	}
	// The endless answer over a larger limit: memory stays near the limit (asserted through
	// the error alone; the heap figure is logged).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(vectorHead))
		chunk := []byte(strings.Repeat(`{"metric":{},"value":[1,"1"]},`, 1000))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
	p.Refresh(context.Background())
	if got := p.Result(k); !errors.Is(got.Err, ErrResponseTooLarge) || !strings.Contains(got.Err.Error(), strconv.Itoa(DefaultMaxResponseBytes)) {
		t.Fatalf("endless answer at the default limit: Result = %+v, want ErrResponseTooLarge naming %d", got, DefaultMaxResponseBytes)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("endless answer cut at %d bytes; process heap system memory %.1f MiB", DefaultMaxResponseBytes, float64(ms.HeapSys)/(1<<20))
}

// TestSlowAnswerBoundedByQueryTimeout: a server that trickles bytes forever is cut off by
// QueryTimeout, not by the size limit.
func TestSlowAnswerBoundedByQueryTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(vectorHead))
		w.(http.Flusher).Flush()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	}))
	defer srv.Close()
	p, k := limitPoller(t, srv.URL, 200*time.Millisecond)
	p.Refresh(context.Background())
	got := p.Result(k)
	if !errors.Is(got.Err, context.DeadlineExceeded) || errors.Is(got.Err, ErrResponseTooLarge) {
		t.Errorf("Result = %+v, want context.DeadlineExceeded (QueryTimeout)", got)
	}
	if held := p.budget.held.Load(); held != 0 {
		t.Errorf("budget holds %d bytes after the evaluation, want 0", held)
	}
}

// TestBudgetSharedByEvaluations: the limit bounds the answers in flight together, and a
// released evaluation gives its bytes back.
func TestBudgetSharedByEvaluations(t *testing.T) {
	b := &respBudget{max: 100}
	a := &charge{b: b, address: "http://a:9090"}
	c := &charge{b: b, address: "http://c:9090"}
	if err := a.add(60); err != nil {
		t.Fatal(err)
	}
	err := c.add(50)
	if !errors.Is(err, ErrResponseTooLarge) || !strings.Contains(err.Error(), "in flight together are over the 100-byte limit") || !strings.Contains(err.Error(), "http://c:9090") {
		t.Errorf("second evaluation's add(50) = %v, want the shared limit naming http://c:9090", err)
	}
	if got := b.held.Load(); got != 60 {
		t.Errorf("held = %d after the refused add, want 60", got)
	}
	a.release()
	if err := c.add(50); err != nil {
		t.Errorf("add(50) after the first released: %v", err)
	}
	if err := c.add(51); !errors.Is(err, ErrResponseTooLarge) || !strings.Contains(err.Error(), "the answer from http://c:9090 is over the 100-byte limit") {
		t.Errorf("add(51) past 100 on one evaluation = %v, want its own limit", err)
	}
	c.release()
	if err := c.add(1); err == nil || errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("add after release = %v, want a read-after-end error", err)
	}
	if got := b.held.Load(); got != 0 {
		t.Errorf("held = %d after both released, want 0", got)
	}
}

// TestTenantAddressesHaveTheirOwnBudget: answers from addresses ScaledObjects name
// themselves are charged to a budget of their own, so a hostile server holding all of it
// cannot fail a query to the scaler's own Prometheus.
func TestTenantAddressesHaveTheirOwnBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DefaultAddress = "http://prometheus.monitoring:9090"
	cfg.MaxResponseBytes = 64 << 10
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tenant := p.budgetFor("http://tenant.example:9090")
	if tenant != p.budgetFor("http://other.example:9090") || tenant == p.budgetFor(cfg.DefaultAddress) {
		t.Fatal("want one budget for the default address and one shared by every other address")
	}
	hostile := &charge{b: tenant, address: "http://tenant.example:9090"}
	if err := hostile.add(64 << 10); err != nil {
		t.Fatal(err)
	}
	own := &charge{b: p.budgetFor(cfg.DefaultAddress), address: cfg.DefaultAddress}
	if err := own.add(60 << 10); err != nil {
		t.Errorf("the default address's answer with the tenant budget full: %v, want it read", err)
	}
	other := &charge{b: tenant, address: "http://other.example:9090"}
	if err := other.add(1); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("another tenant address with the tenant budget full: %v, want ErrResponseTooLarge", err)
	}
	hostile.release()
	own.release()
}

// TestAPIErrorIsBounded: a failing answer's body is not kept in the error, and a huge
// Prometheus error message is cut.
func TestAPIErrorIsBounded(t *testing.T) {
	huge := strings.Repeat("x", 20000)
	tests := []struct {
		name     string
		status   int
		body     string
		wantMsg  string
		wantType v1.ErrorType
	}{
		{"HTML error page", http.StatusBadGateway, "<html>" + huge + "</html>", "server error: 502", v1.ErrServer},
		{"Prometheus error", http.StatusBadRequest, `{"status":"error","errorType":"bad_data","error":"` + huge + `"}`, strings.Repeat("x", maxErrorMessageBytes) + "… (20000 bytes)", "bad_data"},
		// The type is the server's too: a 1 MiB one was kept whole.
		{"huge error type", http.StatusBadRequest, `{"status":"error","errorType":"` + huge + `","error":"x"}`, "x", v1.ErrorType(strings.Repeat("x", maxErrorTypeBytes) + "… (20000 bytes)")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			p, k := limitPoller(t, srv.URL, 30*time.Second)
			p.Refresh(context.Background())
			got := p.Result(k)
			var apiErr *v1.Error
			if !errors.As(got.Err, &apiErr) {
				t.Fatalf("Err = %v, want a *v1.Error", got.Err)
			}
			if apiErr.Type != tt.wantType {
				t.Errorf("Type %.80q (%d bytes), want %.80q", apiErr.Type, len(apiErr.Type), tt.wantType)
			}
			if apiErr.Detail != "" || apiErr.Msg != tt.wantMsg {
				t.Errorf("Detail %d bytes, Msg %.80q (%d bytes); want no Detail and Msg %.80q (%d bytes)", len(apiErr.Detail), apiErr.Msg, len(apiErr.Msg), tt.wantMsg, len(tt.wantMsg))
			}
		})
	}
}

// BenchmarkResponseDecode measures what client_golang's decoding of an instant-vector answer
// holds, per byte of body: the basis of DefaultMaxResponseBytes. Bundle-like series (three
// labels, ≈ 130 B) and minimal series ({"metric":{}}, ≈ 30 B, a hostile server's cheapest).
func BenchmarkResponseDecode(b *testing.B) {
	const size = 8 << 20
	for _, tt := range []struct{ name, series string }{
		{"bundle", `{"metric":{"inferscale_signal":"activity","model":"model-%05d","namespace":"team-%04d"},"value":[1767225600.123,"0.123456789"]}`},
		{"minimal", `{"metric":{},"value":[1,"1"]}`},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var sb strings.Builder
			sb.WriteString(vectorHead)
			for i := 0; sb.Len() < size; i++ {
				if i > 0 {
					sb.WriteByte(',')
				}
				if strings.Contains(tt.series, "%") {
					fmt.Fprintf(&sb, tt.series, i, i%1000)
				} else {
					sb.WriteString(tt.series)
				}
			}
			sb.WriteString(`]}}`)
			body := sb.String()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }))
			defer srv.Close()
			cfg := DefaultConfig()
			cfg.DefaultAddress = srv.URL
			p, err := NewPoller(cfg, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			k, err := p.Subscribe(Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
			if err != nil {
				b.Fatal(err)
			}
			client := p.subs[k].q.ep.client
			var retained float64
			for b.Loop() {
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				v, _, _, err := client.Query(context.Background(), "x", time.Now())
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				retained = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(len(body))
				runtime.KeepAlive(v)
			}
			b.ReportMetric(retained, "retained-B/body-B")
		})
	}
}

// TestMaxResponseBytesRange: 0 is the default; values outside [64 KiB, 1 GiB] are refused
// naming the field.
func TestMaxResponseBytesRange(t *testing.T) {
	tests := []struct {
		give    int64
		wantErr bool
	}{{0, false}, {64 << 10, false}, {1 << 30, false}, {64<<10 - 1, true}, {1<<30 + 1, true}, {-1, true}}
	for _, tt := range tests {
		cfg := DefaultConfig()
		cfg.MaxResponseBytes = tt.give
		err := cfg.Validate()
		if tt.wantErr != (err != nil) || (err != nil && !strings.Contains(err.Error(), "MaxResponseBytes")) {
			t.Errorf("Validate with MaxResponseBytes %d = %v, want error %v naming MaxResponseBytes", tt.give, err, tt.wantErr)
		}
	}
}
