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

const chatQuery = `max_over_time(((sum((rps{namespace="ml"})) unless on () ((rps{namespace="ml"}) < 0)) < +Inf)[1m:1s])`

// TestReadPeaksOutOfRange: a peak past ledger.MaxRPS read from Prometheus is refused where
// NaN and negative peaks are, in the ScaledObject's note with its query, and the service keeps
// its spec peak; it was used, and Validate reported `services[0].peakRPS: 5e+09 is outside
// [0, 1e+09]` as if the spec said it.
func TestReadPeaksOutOfRange(t *testing.T) {
	c := fakePrometheus(t, func(w http.ResponseWriter) {
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"5e9"]}]}}`))
	})
	services := []ledger.Service{{Name: "chat", Tier: ledger.P1, PeakRPS: 24}}
	notes, err := readPeaks(c, services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}})
	if err != nil || len(notes) != 1 {
		t.Fatalf("readPeaks = %+v, %v; want one note", notes, err)
	}
	want := ledger.PeakNote{Service: "chat", Source: "ml/chat", Query: chatQuery,
		Err: "query " + chatQuery + ": value 5e+09 is outside [0, 1e+09] req/s, the range of a peakRPS"}
	if notes[0] != want {
		t.Errorf("note\n%+v\nwant\n%+v", notes[0], want)
	}
	if services[0].PeakRPS != 24 {
		t.Errorf("peakRPS %v, want the spec's 24", services[0].PeakRPS)
	}
	// At the bound it is used.
	c = fakePrometheus(t, func(w http.ResponseWriter) {
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"1e9"]}]}}`))
	})
	if notes, err = readPeaks(c, services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}}); err != nil || notes[0].Err != "" || services[0].PeakRPS != 1e9 {
		t.Errorf("peak 1e9: %+v, %v, peakRPS %v", notes, err, services[0].PeakRPS)
	}
}

// TestReadPeaksResponseBounded: an answer of 1 GiB is cut off at prom.DefaultMaxResponseBytes, an
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
		!strings.Contains(n.Err, "prometheus response too large: the answer from http://127.0.0.1:") ||
		!strings.Contains(n.Err, " is over the 16777216-byte limit on Prometheus responses") ||
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

	// So is its errorType: a 4 MiB one was kept whole in the note, the report and the ConfigMap.
	c = fakePrometheus(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"status":"error","errorType":"` + strings.Repeat("T", 4<<20) + `","error":"bad"}`))
	})
	notes, err = readPeaks(c, services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}})
	if wantErr := "query " + chatQuery + ": " + strings.Repeat("T", 64) + "… (4194304 bytes): bad"; err != nil || len(notes) != 1 || notes[0].Err != wantErr {
		t.Errorf("error type: note %.300v…, %v; want %q", notes, err, wantErr)
	}
}

// TestPeakRequiredSaysWhy: a P1 service with no spec peak whose Prometheus peak was refused
// (past 1e9 here) is bad input saying so, with the ScaledObject and the query, not only
// "not in the spec nor read from Prometheus".
func TestPeakRequiredSaysWhy(t *testing.T) {
	c := fakePrometheus(t, func(w http.ResponseWriter) {
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"5e9"]}]}}`))
	})
	spec := ledger.Spec{
		Nodes:    []ledger.Node{{Name: "gpu-a", GPUs: []ledger.GPU{{Product: "H100-80GB-HBM3"}}}},
		Services: []ledger.Service{{Name: "chat", Tier: ledger.P1, Profile: "H100-80GB-HBM3", PeakRPS: ledger.PeakUnset, SafeRPSPerReplica: 10}},
	}
	notes, err := readPeaks(c, spec.Services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "rps"}})
	if err != nil {
		t.Fatal(err)
	}
	errs := withPeakReasons(spec.Validate(), spec.Services, notes)
	want := `services[0].peakRPS: required for P1 service "chat": the demand to meet, req/s in [0, 1e+09], is not in the spec nor read from Prometheus ` +
		`(ledger --live --prometheus-address reads it from the ScaledObject named "chat" when that has data); ` +
		`Prometheus (ScaledObject ml/chat): query ` + chatQuery + `: value 5e+09 is outside [0, 1e+09] req/s, the range of a peakRPS`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors %v\nwant %s", errs, want)
	}
}
