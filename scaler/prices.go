package scaler

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
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
// at most openCostConcurrency at once), and once more, at once, for a namespace with a
// controller that needs a price for the first time; RPCs and scrapes only read the last
// answer. Of an answer only the controllers the triggers need (their scale targets) are
// kept, so memory is bounded by the triggers, not by the answer. A namespace's
// prices older than openCostStaleAfter refresh intervals (OpenCost unreachable or failing)
// are dropped: its triggers' price is absent, and the drop is logged once per episode with
// the redacted address. An entry OpenCost answers that is refused (opencost.Prices.Bad: a
// minutes or totalCost that is missing, null, not a number or negative, a sum that
// overflows, a price that is not finite; and here a price outside gpuHourPrice's range
// (0, maxGPUHourPrice]) leaves its controller without a price. The refused controllers a
// trigger needs are logged in at most one line per namespace and refresh for each of: at
// WARN those that start being refused, at DEBUG those still refused, at INFO those no longer
// refused; each line gives the count, at most maxLoggedControllers names and the first one's
// error. They are counted per namespace in inferscale_scaler_opencost_refused_controllers
// (absent while the namespace's prices are dropped: it counts the last good answer's
// refusals, and that answer is gone).

// openCostStaleAfter is how many refresh intervals a namespace's last good answer lasts.
const openCostStaleAfter = 3

// openCostConcurrency bounds the OpenCost queries in flight at once.
const openCostConcurrency = 4

// openCostFetcher is what the loop needs of *opencost.Client.
type openCostFetcher interface {
	Prices(ctx context.Context, namespace string, window time.Duration) (opencost.Prices, error)
	Address() string
}

// nsPrices is one namespace's last answer, of the controllers triggers need.
type nsPrices struct {
	prices map[opencost.Controller]float64
	// covered holds the controllers wanted when the namespace was last queried (answered or
	// failed): one wanted since is queried at once (openCostPrices.want), not a refresh later.
	covered map[opencost.Controller]struct{}
	at      time.Time // the last successful refresh; zero: none
	failing bool      // the last refresh failed (logged at WARN once per failure episode)
	dropped bool      // prices are stale and were dropped (logged once per episode)
	lastErr error
	// refused holds the wanted controllers the last good answer refused (wantedPrices), each
	// logged at WARN when its episode began; nil: none.
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
	wanted map[string]map[opencost.Controller]struct{} // per namespace, the controllers triggers need (Server.pricedNamespaces)
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
			Help: "Scale targets of the namespace's triggers that OpenCost's last good answer priced with a refused entry (minutes or totalCost missing, null, not a number or negative, a sum that overflows, a price outside gpuHourPrice's range (0, 1e9]): they have no OpenCost price. Absent while the namespace's prices are dropped as stale.",
		}, []string{"namespace"}),
		byNS: map[string]*nsPrices{}, wanted: map[string]map[opencost.Controller]struct{}{}, kick: make(chan struct{}, 1)}
}

// want sets, per namespace, the controllers that need a price (Server.Refresh's view; the
// maps are not written after) and wakes the loop when one of them was not wanted when its
// namespace was last queried (a namespace never queried, or a new scale target).
func (p *openCostPrices) want(namespaces map[string]map[opencost.Controller]struct{}) {
	p.mu.Lock()
	p.wanted = namespaces
	fresh := false
	for ns := range namespaces {
		if p.uncoveredLocked(ns) {
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

// uncoveredLocked is whether namespace ns has a wanted controller its last query did not
// cover (or was never queried).
func (p *openCostPrices) uncoveredLocked(ns string) bool {
	e := p.byNS[ns]
	if e == nil {
		return true
	}
	for c := range p.wanted[ns] {
		if _, ok := e.covered[c]; !ok {
			return true
		}
	}
	return false
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

// refreshOnce queries every wanted namespace (onlyNew: those with a controller their last
// query did not cover), forgets the namespaces no longer wanted and drops stale prices.
func (p *openCostPrices) refreshOnce(ctx context.Context, onlyNew bool) {
	p.mu.Lock()
	var todo []string
	for ns := range p.wanted {
		if !onlyNew || p.uncoveredLocked(ns) {
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

// store records one namespace's answer (or failure) at now, keeping only the wanted
// controllers' prices (wantedPrices), logging failure and recovery once per episode, and the
// refused controllers once per episode (logRefused).
func (p *openCostPrices) store(ns string, prices opencost.Prices, err error, now time.Time) {
	p.mu.Lock()
	e := p.byNS[ns]
	if e == nil {
		e = &nsPrices{}
		p.byNS[ns] = e
	}
	want := p.wanted[ns]
	e.covered = want
	wasFailing, wasDropped, wasRefused := e.failing, e.dropped, e.refused
	var kept map[opencost.Controller]float64
	var refused map[opencost.Controller]error
	if err != nil {
		e.failing, e.lastErr = true, err
	} else {
		kept, refused = wantedPrices(prices, want)
		e.prices, e.at, e.failing, e.dropped, e.lastErr = kept, now, false, false, nil
		e.refused = refused
		p.refused.WithLabelValues(ns).Set(float64(len(refused)))
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
		p.log.Info("OpenCost refresh succeeded again", "opencostAddress", addr, "namespace", ns, "controllers", len(kept))
	}
	p.logRefused(addr, ns, kept, refused, wasRefused, want)
}

// wantedPrices splits one answer's controllers in want (the rest of the answer is not kept)
// into their prices (kept) and their refusals: opencost's (prices.Bad), and a price outside
// gpuHourPrice's range (0, maxGPUHourPrice], which no replica-hour costs: 1e307 over 30
// pod-minutes exported a price of 2e307 and a cost rate saturated at 1.8e308, and a free
// replica-hour (totalCost 0) is a price OpenCost did not measure. refused is nil when none is.
func wantedPrices(prices opencost.Prices, want map[opencost.Controller]struct{}) (kept map[opencost.Controller]float64, refused map[opencost.Controller]error) {
	kept = map[opencost.Controller]float64{}
	refuse := func(c opencost.Controller, err error) {
		if refused == nil {
			refused = map[opencost.Controller]error{}
		}
		refused[c] = err
	}
	for c := range want {
		if err, bad := prices.Bad[c]; bad {
			refuse(c, err)
			continue
		}
		switch v, ok := prices.PerReplicaHour[c]; {
		case !ok:
		case !(v > 0 && v <= maxGPUHourPrice):
			refuse(c, fmt.Errorf("opencost: %s: price %v per replica-hour (Σ totalCost ÷ (Σ minutes ÷ 60) over %v pod-minutes): must be in %s, gpuHourPrice's range",
				c, v, prices.Minutes[c], gpuHourPriceRange))
		default:
			kept[c] = v
		}
	}
	return kept, refused
}

// maxLoggedControllers is how many controllers one log line of logRefused names; the
// count gives the rest.
const maxLoggedControllers = 3

// logRefused logs one namespace's refused controllers (refused, of the wanted ones; was: the
// previous good answer's) as the refresh failures are, in at most one line each: at WARN
// those that start being refused, at DEBUG those still refused (they stay visible, and
// counted in inferscale_scaler_opencost_refused_controllers), at INFO those still wanted that
// an answer no longer refuses (priced: how many of them kept has a price now). A line gives
// the count, at most maxLoggedControllers names (sorted) and the first one's error, which
// names the pod and the field. Before, every refused controller of the answer had a line:
// 20,000 refused controllers wrote 20,000 WARN lines per refresh.
func (p *openCostPrices) logRefused(addr, ns string, kept map[opencost.Controller]float64, refused, was map[opencost.Controller]error, want map[opencost.Controller]struct{}) {
	var started, still, back []opencost.Controller
	for c := range refused {
		if _, ok := was[c]; ok {
			still = append(still, c)
		} else {
			started = append(started, c)
		}
	}
	for c := range was {
		_, wanted := want[c]
		if _, ok := refused[c]; !ok && wanted {
			back = append(back, c)
		}
	}
	sortControllers(started)
	sortControllers(still)
	sortControllers(back)
	line := func(cs []opencost.Controller) []any {
		return []any{"opencostAddress", addr, "namespace", ns, "count", len(cs), "controllers", controllerList(cs)}
	}
	if len(started) > 0 {
		p.log.Warn("OpenCost entries refused: no price for these controllers", append(line(started), "err", refused[started[0]])...)
	}
	if len(still) > 0 {
		p.log.Debug("OpenCost entries still refused: no price for these controllers", append(line(still), "err", refused[still[0]])...)
	}
	if len(back) > 0 {
		priced := 0
		for _, c := range back {
			if _, ok := kept[c]; ok {
				priced++
			}
		}
		p.log.Info("OpenCost entries no longer refused", append(line(back), "priced", priced)...)
	}
}

// controllerList names the first maxLoggedControllers of cs, then how many more there are.
func controllerList(cs []opencost.Controller) string {
	names := make([]string, 0, maxLoggedControllers)
	for _, c := range cs[:min(len(cs), maxLoggedControllers)] {
		names = append(names, c.String())
	}
	out := strings.Join(names, ", ")
	if n := len(cs) - len(names); n > 0 {
		out += fmt.Sprintf(" and %d more", n)
	}
	return out
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
