package main

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/ledger/peak"
)

// fakePrometheus answers every instant query with body(w).
func fakePrometheus(t *testing.T, body func(w http.ResponseWriter)) Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body(w)
	}))
	t.Cleanup(srv.Close)
	return Config{PrometheusAddress: srv.URL, PeakWindow: time.Minute, PeakStep: time.Second, Timeout: 20 * time.Second}
}

const chatQuery = `max_over_time((rps{namespace="ml"})[1m:1s])`

// TestReadPeaksResponseBounded: an answer of 1 GiB is cut off at peak.MaxResponseBytes, an
// error in the ScaledObject's note naming its query and the limit; the client read it whole.
func TestReadPeaksResponseBounded(t *testing.T) {
	chunk := []byte(`{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(`{"metric":{"a":"b"},"value":[1,"1"]},`, 1<<15))
	c := fakePrometheus(t, func(w http.ResponseWriter) {
		for sent := 0; sent < 1<<30; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client stopped reading
			}
		}
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	services := []ledger.Service{{Name: "chat", Tier: ledger.P1, PeakRPS: 24}}
	notes, err := readPeaks(c, services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}})
	runtime.ReadMemStats(&after)
	if err != nil || len(notes) != 1 {
		t.Fatalf("readPeaks = %+v, %v; want one note", notes, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
		t.Errorf("allocated %d MiB reading the answer, want under 256 MiB (the limit is 16 MiB)", got>>20)
	}
	n := notes[0]
	if n.Source != "ml/chat" || !strings.HasPrefix(n.Err, "query "+chatQuery+": ") ||
		!strings.Contains(n.Err, "prometheus response too large: the answer is over the 16777216-byte limit on a Prometheus response (peak.MaxResponseBytes)") ||
		len(n.Err) > 1024 || services[0].PeakRPS != 24 {
		t.Errorf("note %+v, peakRPS %v; want the query and the 16777216-byte limit, and the spec's 24", n, services[0].PeakRPS)
	}
	t.Logf("%s; allocated %d MiB", n.Err, (after.TotalAlloc-before.TotalAlloc)>>20)

	// An error answer's message is the server's, any size: it is cut.
	c = fakePrometheus(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"` + strings.Repeat("x", 100000) + `"}`))
	})
	notes, err = readPeaks(c, services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}})
	if err != nil || len(notes) != 1 || !strings.HasPrefix(notes[0].Err, "query "+chatQuery+": bad_data: xxx") ||
		!strings.HasSuffix(notes[0].Err, "x… (100000 bytes)") || len(notes[0].Err) > 1024 {
		t.Errorf("error answer: note %.300v…, %v; want the message cut to 512 bytes", notes, err)
	}
}
