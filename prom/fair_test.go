package prom

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferscale/inferscale/internal/promtest"
)

// hangServer is a Prometheus address that accepts queries and never answers them (until the
// test ends or the request is cancelled). held counts the requests it holds now, total those
// it has received.
type hangServer struct {
	*httptest.Server
	held, total atomic.Int64
}

func newHangServer(t *testing.T) *hangServer {
	t.Helper()
	release := make(chan struct{})
	h := &hangServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm() // the whole body read: the server then notices a cancelled request
		h.total.Add(1)
		h.held.Add(1)
		defer h.held.Add(-1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		h.Close()
	})
	return h
}

// TestSlowAddressDoesNotStarveOthers: one address whose server never answers holds every
// query it is sent, yet a healthy address's queries are evaluated in the very round they are
// due: concurrency slots are per address, so the hung address's queries wait only for its own.
// (Before, all addresses shared Concurrency slots: a ScaledObject naming a hung server made
// every other ScaledObject's signals go stale, a cross-tenant denial of service.)
func TestSlowAddressDoesNotStarveOthers(t *testing.T) {
	srv := promtest.Start(t) // the healthy default address; vector(i) needs no scrape
	hang := newHangServer(t)
	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL()
	cfg.Concurrency = 2
	cfg.QueryTimeout = 5 * time.Minute // longer than the test: a held slot is never freed by it
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var hung sync.WaitGroup
	defer func() {
		cancel() // ends the held evaluations and the waiting ones
		hung.Wait()
	}()

	const nHung, nHealthy = 6, 3
	var hungKeys []Key
	for i := range nHung {
		hungKeys = append(hungKeys, subscribe(t, p, Request{Address: hang.URL, Namespace: "evil", Kind: KindQueue, Query: fmt.Sprintf("vector(%d)", 100+i)}))
	}
	// Round 1 sends the hung address's queries; it holds Concurrency of them, the rest wait.
	p.launch(ctx, &hung, true)
	waitFor(t, func() bool { return hang.held.Load() == int64(cfg.Concurrency) })

	var healthy []Key
	for i := range nHealthy {
		healthy = append(healthy, subscribe(t, p, Request{Namespace: "good", Kind: KindQueue, Query: fmt.Sprintf("vector(%d)", i+1)}))
	}
	// Round 2: the hung queries are still in flight or waiting (skipped); the healthy ones
	// run. The deadline only keeps a regression from hanging the test; it asserts no timing.
	rctx, rcancel := context.WithTimeout(ctx, waitTimeout)
	p.Refresh(rctx)
	rcancel()
	for i, k := range healthy {
		wantValue(t, p, k, float64(i+1))
	}
	if got := hang.total.Load(); got != int64(cfg.Concurrency) {
		t.Errorf("hung address received %d queries, want %d (Concurrency per address: the rest wait for its own slots)", got, cfg.Concurrency)
	}
	waiting := 0
	for _, k := range hungKeys {
		r := p.Result(k)
		if !r.EvaluatedAt.IsZero() || r.Err != nil || r.Empty {
			t.Errorf("hung key %v = %+v, want not evaluated yet", k, r)
		}
		if r.Waiting {
			waiting++
		}
	}
	if want := nHung - cfg.Concurrency; waiting != want || p.waitingQueries() != want {
		t.Errorf("hung keys waiting for a slot: %d (gauge %d), want %d (the others are in flight)", waiting, p.waitingQueries(), want)
	}
	for _, k := range healthy {
		if p.Result(k).Waiting {
			t.Errorf("healthy key %v waits for a slot", k)
		}
	}
	if got := p.addresses(); got != 2 {
		t.Errorf("addresses = %d, want 2", got)
	}
}

// TestForgottenAddressEndsItsEvaluations: when the last query naming an address is
// forgotten, its evaluations end at once, those waiting for a slot and those in flight on a
// server that never answers, and the address's client and slots are dropped: a tenant
// cycling ScaledObjects that name hung servers leaves no goroutine, connection or state.
func TestForgottenAddressEndsItsEvaluations(t *testing.T) {
	hang := newHangServer(t)
	cfg := DefaultConfig()
	cfg.DefaultAddress = "http://127.0.0.1:1"
	cfg.Concurrency = 2
	cfg.QueryTimeout = 5 * time.Minute
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var keys []Key
	for i := range 5 {
		keys = append(keys, subscribe(t, p, Request{Address: hang.URL, Namespace: "evil", Kind: KindQueue, Query: fmt.Sprintf("vector(%d)", i)}))
	}
	var wg sync.WaitGroup
	p.launch(ctx, &wg, true)
	waitFor(t, func() bool { return hang.held.Load() == int64(cfg.Concurrency) })
	for _, k := range keys {
		p.Unsubscribe(k)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("evaluations of forgotten queries still running")
	}
	waitFor(t, func() bool { return hang.held.Load() == 0 }) // the server saw the requests cancelled
	if got := hang.total.Load(); got != int64(cfg.Concurrency) {
		t.Errorf("hung address received %d queries, want %d (the waiting ones were never sent)", got, cfg.Concurrency)
	}
	if got := len(p.endpoints); got != 0 {
		t.Errorf("endpoints = %d after every query was forgotten, want 0", got)
	}
}

// TestTenantAddressesShareSlots: the addresses ScaledObjects name themselves share
// TenantSlotsPerConcurrency × Concurrency slots on top of their own, so one tenant naming many
// hung addresses holds at most that many queries in flight (before, Concurrency × addresses:
// 80,000 at --max-triggers 10,000), while the default address keeps its own slots.
func TestTenantAddressesShareSlots(t *testing.T) {
	srv := promtest.Start(t)
	cfg := DefaultConfig()
	cfg.DefaultAddress = srv.URL()
	cfg.Concurrency = 1
	cfg.QueryTimeout = 5 * time.Minute
	p, err := NewPoller(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	slots := TenantSlotsPerConcurrency * cfg.Concurrency
	nHung := slots + 8
	var servers []*hangServer
	for i := range nHung {
		h := newHangServer(t)
		servers = append(servers, h)
		subscribe(t, p, Request{Address: h.URL, Namespace: "evil", Kind: KindQueue, Query: fmt.Sprintf("vector(%d)", i)})
	}
	held := func() (n int64) {
		for _, h := range servers {
			n += h.held.Load()
		}
		return n
	}
	p.launch(ctx, &wg, true)
	waitFor(t, func() bool { return held() == int64(slots) && p.waitingQueries() == nHung-slots })
	good := subscribe(t, p, Request{Namespace: "good", Kind: KindQueue, Query: "vector(7)"})
	rctx, rcancel := context.WithTimeout(ctx, waitTimeout)
	p.Refresh(rctx)
	rcancel()
	wantValue(t, p, good, 7)
	if got, want := held(), int64(slots); got != want {
		t.Errorf("queries held by the hung tenant addresses: %d, want %d (the shared slots)", got, want)
	}
	if got, want := p.waitingQueries(), nHung-slots; got != want {
		t.Errorf("waiting queries: %d, want %d", got, want)
	}
}
