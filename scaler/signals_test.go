package scaler

import (
	"runtime"
	"testing"
	"time"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/scaler/decision"
)

// TestPollerSignalsShareHandles: equal requests get one handle, different ones their own, and
// a handle nobody references leaves the table once collected.
func TestPollerSignalsShareHandles(t *testing.T) {
	p, err := prom.NewPoller(prom.PollerConfig{
		DefaultAddress: "http://prometheus:9090", RefreshInterval: 5 * time.Second, QueryTimeout: 10 * time.Second,
		Concurrency: 1, ForgetAfter: 10 * time.Minute, NamespaceLabel: "namespace", PodLabel: "pod",
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := PollerSignals(p).(*pollerSignals)
	req := func(ns, model string) prom.Request {
		return prom.Request{Namespace: ns, Kind: prom.KindQueue, Engine: decision.EngineTriton, Model: model}
	}
	a1, err := ps.Subscribe(req("a", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := ps.Subscribe(req("a", "m1"))
	b, _ := ps.Subscribe(req("b", "m1"))
	c, _ := ps.Subscribe(req("a", "m2"))
	if a1 != a2 {
		t.Error("equal requests got different handles")
	}
	if a1 == b || a1 == c || b == c {
		t.Error("different requests share a handle")
	}
	if got := ps.len(); got != 3 {
		t.Errorf("table holds %d handles, want 3", got)
	}
	if got := a1.Result().Err; got != nil {
		t.Errorf("Result before the first refresh: err %v, want none (not yet evaluated)", got)
	}
	// a1, a2 and c are dead from here. Cleanups run on their own goroutine after a collection; no clock is involved.
	for i := 0; i < 1000 && ps.len() > 1; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if got := ps.len(); got != 1 {
		t.Errorf("after collection the table holds %d handles, want 1 (b's)", got)
	}
	runtime.KeepAlive(b)
}
