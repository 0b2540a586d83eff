package scaler

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inferscale/inferscale/scaler/opencost"
)

// Replica-hour prices from OpenCost (--opencost-address).
//
// A trigger's price of one replica-hour is its gpuHourPrice metadata when set; only a trigger
// without it, whose scale target the scaler knows (cluster mode: the ScaledObject's
// spec.scaleTargetRef, an apps/v1 Deployment or StatefulSet), reads OpenCost's price of that
// controller (package scaler/opencost: Σ totalCost ÷ (Σ minutes ÷ 60) over its pods in
// --opencost-window). The two are never both used nor summed: the metadata wins, so a pool
// is never counted twice.
//
// A background loop (openCostPrices.Run) queries OpenCost once per --opencost-refresh for
// every namespace with a trigger that needs a price (one query per namespace per refresh,
// at most openCostConcurrency at once), and once more, at once, for a namespace that needs
// a price for the first time; RPCs and scrapes only read the last answer. A namespace's
// prices older than openCostStaleAfter refresh intervals (OpenCost unreachable or failing)
// are dropped: its triggers' price is absent, and the drop is logged once per episode with
// the redacted address. An entry OpenCost answers that is refused (opencost.Prices.Bad: a
// minutes or totalCost that is missing, null or negative, a sum that overflows, a price that
// is not finite) leaves its controller without a price; it is logged at WARN once per episode
// (when the controller starts being refused), at DEBUG on every refresh it still is, at INFO
// when an answer no longer refuses it, and counted per namespace in
// inferscale_scaler_opencost_refused_controllers (absent while the namespace's prices are
// dropped: it counts the last good answer's refusals, and that answer is gone).

// openCostStaleAfter is how many refresh intervals a namespace's last good answer lasts.
const openCostStaleAfter = 3

// openCostConcurrency bounds the OpenCost queries in flight at once.
const openCostConcurrency = 4

// openCostFetcher is what the loop needs of *opencost.Client.
type openCostFetcher interface {
	Prices(ctx context.Context, namespace string, window time.Duration) (opencost.Prices, error)
	Address() string
}

// nsPrices is one namespace's last answer.
type nsPrices struct {
	prices  map[opencost.Controller]float64
	at      time.Time // the last successful refresh; zero: none
	failing bool      // the last refresh failed (logged at WARN once per failure episode)
	dropped bool      // prices are stale and were dropped (logged once per episode)
	lastErr error
	// refused holds the controllers the last good answer refused (prices.Bad), each logged at
	// WARN when its episode began; nil: none.
	refused map[opencost.Controller]error
}

// openCostPrices holds every wanted namespace's prices and refreshes them.
type openCostPrices struct {
	client  openCostFetcher
	window  time.Duration
	refresh time.Duration
	log     *slog.Logger
	now     func() time.Time

	failures prometheus.Counter
	refused  *prometheus.GaugeVec // by namespace: controllers the last good answer refused

	mu     sync.Mutex
	byNS   map[string]*nsPrices
	wanted map[string]struct{}
	kick   chan struct{}
}

func newOpenCostPrices(client openCostFetcher, window, refresh time.Duration, log *slog.Logger) *openCostPrices {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &openCostPrices{client: client, window: window, refresh: refresh, log: log, now: time.Now,
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferscale_scaler_opencost_refresh_failures_total",
			Help: "OpenCost allocation queries (one per namespace per --opencost-refresh) that failed: unreachable, an error answer, an oversize or malformed answer.",
		}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inferscale_scaler_opencost_refused_controllers",
			Help: "Controllers of the namespace that OpenCost's last good answer priced with a refused entry (minutes or totalCost missing, null or negative, a sum that overflows, a price not finite): they have no OpenCost price. Absent while the namespace's prices are dropped as stale.",
		}, []string{"namespace"}),
		byNS: map[string]*nsPrices{}, wanted: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

// want sets the namespaces that need a price (Server.Refresh's view) and wakes the loop when
// one of them has never been queried.
func (p *openCostPrices) want(namespaces map[string]struct{}) {
	p.mu.Lock()
	p.wanted = namespaces
	fresh := false
	for ns := range namespaces {
		if _, ok := p.byNS[ns]; !ok {
			fresh = true
		}
	}
	p.mu.Unlock()
	if fresh {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// price returns ctl's price when its namespace's last good answer is at most
// openCostStaleAfter refresh intervals old at now.
func (p *openCostPrices) price(ctl opencost.Controller, now time.Time) (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.byNS[ctl.Namespace]
	if e == nil || e.at.IsZero() || now.Sub(e.at) > openCostStaleAfter*p.refresh {
		return 0, false
	}
	v, ok := e.prices[ctl]
	return v, ok
}

// Run refreshes the wanted namespaces every refresh interval, and a namespace wanted for the
// first time at once, until ctx is done. It returns nil.
func (p *openCostPrices) Run(ctx context.Context) error {
	t := time.NewTicker(p.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.refreshOnce(ctx, false)
		case <-p.kick:
			p.refreshOnce(ctx, true)
		}
	}
}

// refreshOnce queries every wanted namespace (onlyNew: those never queried), forgets the
// namespaces no longer wanted and drops stale prices.
func (p *openCostPrices) refreshOnce(ctx context.Context, onlyNew bool) {
	p.mu.Lock()
	var todo []string
	for ns := range p.wanted {
		if _, ok := p.byNS[ns]; !onlyNew || !ok {
			todo = append(todo, ns)
		}
	}
	if !onlyNew {
		for ns := range p.byNS {
			if _, ok := p.wanted[ns]; !ok {
				delete(p.byNS, ns)
				p.refused.DeleteLabelValues(ns)
			}
		}
	}
	p.mu.Unlock()
	sort.Strings(todo) // a fixed order keeps logs reproducible
	sem := make(chan struct{}, openCostConcurrency)
	var wg sync.WaitGroup
	for _, ns := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			prices, err := p.client.Prices(ctx, ns, p.window)
			p.store(ns, prices, err, p.now())
		}()
	}
	wg.Wait()
	p.dropStale(p.now())
}

// store records one namespace's answer (or failure) at now, logging failure and recovery
// once per episode, and each refused entry once per episode (logRefused).
func (p *openCostPrices) store(ns string, prices opencost.Prices, err error, now time.Time) {
	p.mu.Lock()
	e := p.byNS[ns]
	if e == nil {
		e = &nsPrices{}
		p.byNS[ns] = e
	}
	wasFailing, wasDropped, wasRefused := e.failing, e.dropped, e.refused
	if err != nil {
		e.failing, e.lastErr = true, err
	} else {
		e.prices, e.at, e.failing, e.dropped, e.lastErr = prices.PerReplicaHour, now, false, false, nil
		e.refused = prices.Bad
		p.refused.WithLabelValues(ns).Set(float64(len(prices.Bad)))
	}
	p.mu.Unlock()
	addr := p.client.Address()
	if err != nil {
		p.failures.Inc()
		if !wasFailing {
			p.log.Warn("OpenCost refresh failed: keeping the last prices until they are "+(openCostStaleAfter*p.refresh).String()+" old",
				"opencostAddress", addr, "namespace", ns, "err", err)
		} else {
			p.log.Debug("OpenCost refresh failed", "opencostAddress", addr, "namespace", ns, "err", err)
		}
		return
	}
	if wasFailing || wasDropped {
		p.log.Info("OpenCost refresh succeeded again", "opencostAddress", addr, "namespace", ns, "controllers", len(prices.PerReplicaHour))
	}
	p.logRefused(addr, ns, prices, wasRefused)
}

// logRefused logs the entries of one namespace's answer that OpenCost answered and the price
// refused (prices.Bad), as the refresh failures are: at WARN when a controller starts being
// refused, at DEBUG on each later refresh that still refuses it (the entry stays visible, and
// counted in inferscale_scaler_opencost_refused_controllers), at INFO when an answer no longer
// refuses it (was: the controllers the previous good answer refused). A refused entry's error
// names the pod and the field, so its WARN says which.
func (p *openCostPrices) logRefused(addr, ns string, prices opencost.Prices, was map[opencost.Controller]error) {
	bad := make([]opencost.Controller, 0, len(prices.Bad))
	for c := range prices.Bad {
		bad = append(bad, c)
	}
	sortControllers(bad)
	for _, c := range bad {
		if _, ok := was[c]; ok {
			p.log.Debug("OpenCost entry still refused: no price for this controller", "opencostAddress", addr, "namespace", ns,
				"controller", c.String(), "err", prices.Bad[c])
			continue
		}
		p.log.Warn("OpenCost entry refused: no price for this controller", "opencostAddress", addr, "namespace", ns,
			"controller", c.String(), "err", prices.Bad[c])
	}
	var back []opencost.Controller
	for c := range was {
		if _, ok := prices.Bad[c]; !ok {
			back = append(back, c)
		}
	}
	sortControllers(back)
	for _, c := range back {
		price, priced := prices.PerReplicaHour[c]
		attrs := []any{"opencostAddress", addr, "namespace", ns, "controller", c.String(), "priced", priced}
		if priced {
			attrs = append(attrs, "pricePerReplicaHour", price)
		}
		p.log.Info("OpenCost entry no longer refused", attrs...)
	}
}

// sortControllers sorts cs by name, so that logs come in a reproducible order.
func sortControllers(cs []opencost.Controller) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].String() < cs[j].String() })
}

// dropStale drops the prices of namespaces without a good answer for openCostStaleAfter
// refresh intervals, logging each drop once per episode.
func (p *openCostPrices) dropStale(now time.Time) {
	type drop struct {
		ns   string
		at   time.Time
		last error
	}
	var drops []drop
	p.mu.Lock()
	for ns, e := range p.byNS {
		if !e.at.IsZero() && !e.dropped && now.Sub(e.at) > openCostStaleAfter*p.refresh {
			e.dropped, e.prices = true, nil
			p.refused.DeleteLabelValues(ns) // it counted the dropped answer's refusals
			drops = append(drops, drop{ns, e.at, e.lastErr})
		}
	}
	p.mu.Unlock()
	sort.Slice(drops, func(i, j int) bool { return drops[i].ns < drops[j].ns })
	for _, d := range drops {
		p.log.Warn("OpenCost prices dropped: no successful refresh for "+(openCostStaleAfter*p.refresh).String()+"; cost metrics of triggers priced by OpenCost are absent",
			"opencostAddress", p.client.Address(), "namespace", d.ns, "lastSuccess", d.at.UTC().Format(time.RFC3339), "err", d.last)
	}
}
