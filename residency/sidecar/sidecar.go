package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/gpu"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/triton"
)

// ErrNoBudget is returned when no budget source applies.
var ErrNoBudget = errors.New("no memory budget")

// ErrUnknownProfile is returned by CheckProfile for a --mig-profile that nothing knows.
var ErrUnknownProfile = errors.New("unknown --mig-profile")

// CheckProfile returns an error wrapping ErrUnknownProfile when profile (--mig-profile) is set
// but is neither in the profile table (residency.Profiles) nor named by any catalog model's
// peakMemoryBytes: a typo that would leave the pod managing nothing. The error lists both.
func CheckProfile(profile string, cat plan.Catalog) error {
	if profile == "" {
		return nil
	}
	if _, ok := plan.ProfileBytes(profile); ok {
		return nil
	}
	inCat := cat.Profiles()
	if slices.Contains(inCat, profile) {
		return nil
	}
	return fmt.Errorf("%w: --mig-profile %q is neither in the profile table %v nor named by any catalog model (catalog profiles: %v)",
		ErrUnknownProfile, profile, plan.Profiles(), inCat)
}

// Device is the budget's device reading: UsedBytes is nil without NVML; Close releases NVML.
type Device struct {
	UsedBytes func() (int64, error)
	Close     func()
	// Source says where the budget came from, for the log: "nvml <uuid> (<name>)",
	// "--budget-bytes", "profile table".
	Source string
}

// ResolveBudget decides the pod's budget. open is gpu.System, or nil when cfg.NVML is
// "off"; visible is $NVIDIA_VISIBLE_DEVICES. Order: --budget-bytes when set (NVML, if it
// opens, still supplies the device's used memory); else NVML's reading of the device; else the
// profile table entry for --mig-profile. The profile is --mig-profile, or the MIG device's own
// resolved to cat's name for the same slice (gpu.ResolveProfile: NVML's name can carry another
// memory figure than the catalog's, e.g. 1g.12gb for 1g.10gb); a resolution that changes the
// name is logged, and a MIG device that no catalog profile matches is refused (ErrNoBudget
// wrapping gpu.ErrNoProfileMatch) rather than run with nothing loadable. The reserve is
// cfg.ReserveBytes when ≥ 0 (Plan keeps the larger of it and the catalog's); FreeIdle is
// cfg.FreeIdle (--free-idle).
func ResolveBudget(cfg residency.Config, cat plan.Catalog, open gpu.Opener, visible string, log *slog.Logger) (plan.Budget, Device, error) {
	reserve := max(cfg.ReserveBytes, 0)
	dev := Device{Close: func() {}}
	var nvmlDev *gpu.Device
	if open != nil && cfg.NVML != "off" {
		d, closeFn, err := open(visible)
		switch {
		case err == nil:
			nvmlDev, dev.Close = d, closeFn
			dev.UsedBytes = d.UsedBytes
		case cfg.NVML == "on":
			return plan.Budget{}, dev, fmt.Errorf("--nvml=on: %w", err)
		default:
			log.Info("NVML not used", "reason", err)
		}
	}
	var b plan.Budget
	switch {
	case cfg.BudgetBytes > 0:
		b = plan.Budget{Profile: cfg.MIGProfile, TotalBytes: cfg.BudgetBytes, ReserveBytes: reserve}
		dev.Source = "--budget-bytes"
	case nvmlDev != nil:
		profile := cfg.MIGProfile
		if profile == "" && nvmlDev.MIG {
			m, err := gpu.ResolveProfile(nvmlDev.Profile, cat.Profiles())
			if err != nil {
				dev.Close()
				return plan.Budget{}, Device{}, fmt.Errorf("%w: device %s (%s): %w (or set --mig-profile)", ErrNoBudget, nvmlDev.UUID, nvmlDev.Name, err)
			}
			if !m.Exact {
				log.Info("MIG profile resolved to the catalog's name", "reported", m.Reported, "profile", m.Profile,
					"device", nvmlDev.UUID, "total_bytes", nvmlDev.TotalBytes)
			}
			profile = m.Profile
		}
		nb, err := nvmlDev.Budget(profile, reserve)
		if err != nil {
			dev.Close()
			return plan.Budget{}, Device{}, fmt.Errorf("%w: %w (set --mig-profile on a whole GPU)", ErrNoBudget, err)
		}
		b = nb
		dev.Source = fmt.Sprintf("nvml %s (%s)", nvmlDev.UUID, nvmlDev.Name)
	case cfg.MIGProfile != "":
		total, ok := plan.ProfileBytes(cfg.MIGProfile)
		if !ok {
			return plan.Budget{}, dev, fmt.Errorf("%w: --mig-profile %q is not in the profile table %v; set --budget-bytes", ErrNoBudget, cfg.MIGProfile, plan.Profiles())
		}
		b = plan.Budget{Profile: cfg.MIGProfile, TotalBytes: total, ReserveBytes: reserve}
		dev.Source = "profile table"
	default:
		return plan.Budget{}, dev, fmt.Errorf("%w: no GPU through NVML; set --budget-bytes with --mig-profile, or --mig-profile alone (table: %v)", ErrNoBudget, plan.Profiles())
	}
	b.FreeIdle = cfg.FreeIdle
	if err := b.Validate(); err != nil {
		dev.Close()
		return plan.Budget{}, Device{}, fmt.Errorf("%w: %w", ErrNoBudget, err)
	}
	return b, dev, nil
}

// Run runs the sidecar until ctx is done (SIGTERM), then drains and returns. A drain requested
// through POST /drain leaves the sidecar running, not ready, until ctx is done.
//
// With cfg.InferenceListen set, the inference front (residency/front) serves there: it holds requests
// for catalog models that are not READY, counts them as the planner's queued work and wakes
// the loop, and drains with the sidecar.
func Run(ctx context.Context, cfg residency.Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cat, catBytes, err := residency.ReadCatalog(cfg.CatalogPath)
	if err != nil {
		return err
	}
	if err := CheckProfile(cfg.MIGProfile, cat); err != nil {
		return err
	}
	var open gpu.Opener
	if cfg.NVML != "off" {
		open = gpu.System
	}
	budget, dev, err := ResolveBudget(cfg, cat, open, os.Getenv("NVIDIA_VISIBLE_DEVICES"), log)
	if err != nil {
		return err
	}
	defer dev.Close()
	if err := cat.CheckPinned(budget); err != nil {
		return fmt.Errorf("%s: %w", cfg.CatalogPath, err)
	}
	log.Info("budget", "profile", budget.Profile, "total_bytes", budget.TotalBytes,
		"reserve_bytes", plan.ReserveBytes(cat, budget), "source", dev.Source, "models", len(cat.Models))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := residency.NewMetrics(reg)
	if err != nil {
		return err
	}
	tc, err := triton.Dial(cfg.TritonAddress, triton.DefaultConfig())
	if err != nil {
		return err
	}
	defer tc.Close()

	deps := residency.Deps{Triton: tc, DeviceUsedBytes: dev.UsedBytes, Log: log, Metrics: m}
	if deps.DeviceUsedBytes == nil && cfg.TritonMetricsURL != "" {
		// Without NVML, Triton's own nv_gpu_memory_used_bytes tells whether an unload gave
		// its memory back.
		deps.DeviceUsedBytes = residency.TritonMemoryProbe(cfg.TritonMetricsURL, nil)
		log.Info("device memory from Triton's metrics", "url", cfg.TritonMetricsURL)
	}
	var poller *prom.Poller
	if cfg.PrometheusAddress != "" {
		pc := prom.DefaultConfig()
		pc.DefaultAddress = cfg.PrometheusAddress
		pc.RefreshInterval = cfg.LoopInterval
		if poller, err = prom.NewPoller(pc, reg, log); err != nil {
			return err
		}
		if deps.Demand, err = residency.NewPromDemand(poller, cfg.Namespace, cfg.DemandQuery); err != nil {
			return err
		}
	}
	ev, err := residency.NewKubeEvents(cfg.Namespace, cfg.PodName, log)
	switch {
	case errors.Is(err, residency.ErrNotInCluster):
		log.Info("not in a cluster: no Kubernetes events")
	case err != nil:
		log.Warn("no Kubernetes events", "err", err)
	default:
		defer ev.Close()
		deps.Events = ev
	}
	var fr *front.Front
	// idle carries the front's OnIdle to paceWakes (capacity 1: wakes that come while one is
	// pending are one wake).
	idle := make(chan struct{}, 1)
	if cfg.InferenceListen != "" {
		deps.Held = func() map[string]plan.Held { return fr.Held() } // fr is set before the loop runs
		deps.FrontActive = func() int { return fr.Active() }         // and before any drain
		deps.Forwarding = func() map[string]int { return fr.Forwarding() }
	}
	ctl, err := residency.NewController(cfg, cat, budget, deps)
	if err != nil {
		return err
	}
	dr := residency.NewDrainer(cfg, ctl, nil)
	var handler http.Handler = residency.NewHandler(ctl, dr, reg)
	var fln net.Listener
	var frontHTTP *http.Server
	var frontHTTPLn net.Listener
	if cfg.InferenceListen != "" {
		fm, err := front.NewMetrics(reg)
		if err != nil {
			return err
		}
		fcfg := cfg.FrontConfig()
		fr, err = front.New(fcfg, front.Deps{Readiness: readiness{ctl: ctl, initial: cat},
			OnHold: func(string) { ctl.Wake() }, OnIdle: func(string) {
				select {
				case idle <- struct{}{}:
				default:
				}
			}, Metrics: fm, Log: log})
		if err != nil {
			return err
		}
		defer fr.Close()
		if fln, err = net.Listen("tcp", cfg.InferenceListen); err != nil {
			return fmt.Errorf("listen %s (--inference-listen): %w", cfg.InferenceListen, err)
		}
		handler = drainFront(handler, fr)
		if cfg.InferenceHTTPListen != "" {
			up, err := url.Parse(cfg.TritonHTTPURL)
			if err != nil {
				return fmt.Errorf("--triton-http-url %q: %w", cfg.TritonHTTPURL, err)
			}
			hln, err := net.Listen("tcp", cfg.InferenceHTTPListen)
			if err != nil {
				_ = fln.Close()
				return fmt.Errorf("listen %s (--inference-http-listen): %w", cfg.InferenceHTTPListen, err)
			}
			// IdleTimeout: a kept-alive connection with no request goes after 2 minutes (above
			// the 90 s Go's and many clients' transports keep idle ones, so the client closes
			// first); without it idle connections stayed open for ever, each holding memory.
			frontHTTP = &http.Server{Handler: fr.HTTPHandler(up), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
			frontHTTPLn = hln
			log.Info("inference front (HTTP)", "addr", hln.Addr().String(), "triton", cfg.TritonHTTPURL)
		}
		log.Info("inference front", "addr", fln.Addr().String(), "hold_timeout", fcfg.HoldTimeout,
			"hold_max_requests", fcfg.MaxHeldRequests, "hold_max_bytes", fcfg.MaxHeldBytes)
	}
	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		if fln != nil {
			_ = fln.Close()
		}
		if frontHTTPLn != nil {
			_ = frontHTTPLn.Close()
		}
		return fmt.Errorf("listen %s: %w", cfg.ListenAddress, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving", "addr", ln.Addr().String(), "triton", cfg.TritonAddress)

	loopCtx, stopLoop := context.WithCancel(context.Background())
	defer stopLoop()
	// gctx ends when a goroutine fails (the listener), so that nothing waits for a SIGTERM
	// that will not come.
	g, gctx := errgroup.WithContext(context.Background())
	g.Go(func() error { return ctl.Run(loopCtx) })
	g.Go(func() error { return ctl.WatchCatalog(loopCtx, cfg.CatalogPath, catBytes) })
	if fr != nil {
		g.Go(func() error { paceWakes(loopCtx, idle, cfg.Settle(), ctl.Wake); return nil })
	}
	if poller != nil {
		g.Go(func() error { return poller.Run(loopCtx) })
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	if fr != nil {
		g.Go(func() error { return fr.Serve(fln) })
	}
	if frontHTTP != nil {
		g.Go(func() error {
			if err := frontHTTP.Serve(frontHTTPLn); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve --inference-http-listen: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		select {
		case <-gctx.Done():
			stopLoop()
			if fr != nil {
				_ = fr.Close()
			}
			if frontHTTP != nil {
				_ = frontHTTP.Close()
			}
			return srv.Close()
		case <-ctx.Done():
		}
		log.Info("terminating: draining")
		// A POST /drain (Triton's preStop) that already finished has waited out the
		// propagation delay: the endpoints are gone.
		drainedBefore := false
		select {
		case <-dr.Done():
			drainedBefore = true
		default:
		}
		frontDone := make(chan struct{})
		go func() {
			defer close(frontDone)
			if fr == nil {
				return
			}
			// Until the endpoints are gone requests for READY models are still served (new
			// holds fail at once: nothing loads now); then every new one fails UNAVAILABLE and
			// the held and forwarded ones finish, within the drain's own deadline.
			fr.StartDrain()
			if !drainedBefore {
				time.Sleep(cfg.PropagationDelay)
			}
			fctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
			defer cancel()
			if err := fr.Drain(fctx); err != nil {
				log.Warn("front drain incomplete: held requests failed UNAVAILABLE", "err", err)
			}
		}()
		derr := dr.Drain(context.Background())
		<-frontDone
		if frontHTTP != nil {
			_ = frontHTTP.Close() // Drain has waited for its requests
		}
		if fr != nil {
			_ = fr.Close()
		}
		stopLoop()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Shutdown lets a POST /drain that is waiting receive its answer.
		return errors.Join(derr, srv.Shutdown(sctx))
	})
	err = g.Wait()
	if errors.Is(err, residency.ErrDrainTimeout) {
		log.Warn("drain deadline passed; exiting", "err", err)
		return nil
	}
	return err
}

// paceWakes calls wake for each signal on idle, at most once every every (Config.Settle, the
// loop's pause after a step that acted): a model goes idle at the end of each request of a
// client that sends one at a time, thousands of times a second, and each wake is a loop that
// reads Triton's index, statistics and metrics. A signal that comes sooner wakes the loop when
// that time has passed (the last idle model is never missed, only coalesced). It returns when
// ctx is done.
func paceWakes(ctx context.Context, idle <-chan struct{}, every time.Duration, wake func()) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle:
		}
		wake()
		t.Reset(every)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
