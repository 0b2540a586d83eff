package residency

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/inferscale/inferscale/prom"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/plan"
)

// ErrConfig is wrapped by Config.Validate's error.
var ErrConfig = errors.New("invalid residency config")

// Config configures the residency sidecar. Every duration is a time.Duration; the flag of each
// field is named in its comment (cmd/residency).
type Config struct {
	// TritonAddress is Triton's gRPC endpoint, host:port (--triton-address).
	TritonAddress string
	// TritonMetricsURL is Triton's Prometheus endpoint (--triton-metrics-url): without NVML,
	// its nv_gpu_memory_used_bytes is the device-memory check of every loop; while draining,
	// its pending and request counts; every loop, the queue lengths. Each read takes at most
	// MaxMetricsBytes. Empty, or unreachable at a read: the loop plans on the catalog's
	// accounting (see Deps.DeviceUsedBytes) and the drain reads statistics only.
	TritonMetricsURL string
	// CatalogPath is the catalog YAML (--catalog).
	CatalogPath string
	// BudgetBytes, when > 0, sets the budget instead of NVML (--budget-bytes).
	BudgetBytes int64
	// MIGProfile is the pod's profile (--mig-profile): it selects catalog peaks, and without
	// NVML or BudgetBytes it sets the budget from the profile table (ProfileBytes). With NVML
	// on a MIG device it defaults to the device's profile.
	MIGProfile string
	// ReserveBytes is the budget's reserve (--reserve-bytes); Plan keeps back the larger of it
	// and the catalog's reserveBytes. -1 leaves the catalog's alone. Range [-1, budget).
	ReserveBytes int64
	// PrometheusAddress is the Prometheus base URL for demand of models not loaded here
	// (--prometheus-address). Empty: those models have no demand (only P0 models load until
	// they are requested through Triton).
	PrometheusAddress string
	// DemandQuery is a PromQL template for the demand of a model not loaded here, with
	// ModelPlaceholder ($model) for its name (--demand-query); empty selects Triton's preset
	// request rate of the model across the namespace.
	DemandQuery string
	// Namespace is the pod's namespace, which demand queries are confined to and events are
	// recorded in (--namespace, default $POD_NAMESPACE).
	Namespace string
	// PodName names the pod in Kubernetes events (--pod-name, default $POD_NAME).
	PodName string
	// NVML selects the budget source (--nvml): "auto" uses NVML when libnvidia-ml loads and
	// NVIDIA_VISIBLE_DEVICES names a device, "on" requires it, "off" never uses it.
	NVML string
	// ListenAddress serves /readyz, /healthz, /metrics and /drain (--listen).
	ListenAddress string
	// LoopInterval is the period of observe-plan-act (--loop-interval). Range [100ms, 10m].
	LoopInterval time.Duration
	// FreeIdle unloads P1/P2 models unused for their idle timeout (the catalog's idleTimeout,
	// at least the model's load time) even when no other model needs the memory
	// (--free-idle; plan.Budget.FreeIdle). Default false: an idle model keeps memory nobody
	// else wants, so its next request finds it loaded.
	FreeIdle bool
	// MaxConcurrentLoads bounds loads in flight (--max-concurrent-loads). Range [1, 16].
	MaxConcurrentLoads int
	// FailureBackoff is the first wait after a failed load; it doubles per consecutive
	// failure up to FailureBackoffMax (--failure-backoff, --failure-backoff-max).
	// Ranges [100ms, 1h] and [FailureBackoff, 24h].
	FailureBackoff    time.Duration
	FailureBackoffMax time.Duration
	// QuarantineAfter consecutive failed loads quarantine a model until restart
	// (--quarantine-after). Range [1, 100].
	QuarantineAfter int
	// DrainTimeout bounds a drain after the propagation delay (--drain-timeout).
	// Range [1s, 1h].
	DrainTimeout time.Duration
	// PropagationDelay is waited after turning not-ready so endpoint removal reaches every
	// load balancer before the queue is watched (--propagation-delay). Range [0, 5m].
	PropagationDelay time.Duration
	// DrainPollInterval is the period between drain's reads of Triton's queue and counters
	// (--drain-poll-interval). Range [10ms, 1m].
	DrainPollInterval time.Duration
	// InferenceListen is where the inference front (residency/front) serves clients' gRPC
	// inference calls, [host]:port (--inference-listen); empty runs none.
	InferenceListen string
	// InferenceHTTPListen is where the front serves KServe v2 HTTP/REST, [host]:port
	// (--inference-http-listen), proxying to TritonHTTPURL (--triton-http-url, Triton's HTTP
	// endpoint); empty runs none. Needs InferenceListen (the gRPC front's upstream checks
	// readiness).
	InferenceHTTPListen string
	TritonHTTPURL       string
	// HoldTimeout, HoldMaxRequests, HoldMaxBytes and HoldMaxTotalBytes bound the front's
	// holds, MaxRequestBytes one request, RetainMaxTotalBytes the forwarded requests it keeps
	// for a re-hold, and RetryPushback is its grpc-retry-pushback-ms (--hold-timeout,
	// --hold-max-requests, --hold-max-bytes, --hold-max-total-bytes, --max-request-bytes,
	// --retain-max-total-bytes, --retry-pushback): front.Config's HoldTimeout,
	// MaxHeldRequests, MaxHeldBytes, MaxTotalHeldBytes, MaxRequestBytes, MaxRetainedBytes and
	// RetryPushback, with their ranges, checked only with InferenceListen.
	HoldTimeout         time.Duration
	HoldMaxRequests     int
	HoldMaxBytes        int64
	HoldMaxTotalBytes   int64
	MaxRequestBytes     int64
	RetainMaxTotalBytes int64
	RetryPushback       time.Duration
}

// Settle is the loop's pause after a step that acted, so that a plan's next step follows
// quickly: min(LoopInterval, 250 ms). The sidecar paces the front's idle wakes by it too.
func (c Config) Settle() time.Duration { return min(c.LoopInterval, 250*time.Millisecond) }

// FrontConfig is the inference front's configuration: upstream Triton at TritonAddress, the
// hold bounds and pushback of c, front.DefaultConfig's re-check interval.
func (c Config) FrontConfig() front.Config {
	f := front.DefaultConfig()
	f.Upstream = c.TritonAddress
	f.HoldTimeout, f.MaxHeldRequests, f.MaxHeldBytes, f.RetryPushback = c.HoldTimeout, c.HoldMaxRequests, c.HoldMaxBytes, c.RetryPushback
	f.MaxTotalHeldBytes, f.MaxRequestBytes, f.MaxRetainedBytes = c.HoldMaxTotalBytes, c.MaxRequestBytes, c.RetainMaxTotalBytes
	return f
}

// DefaultConfig returns the defaults: Triton at localhost:8001 (metrics at
// http://localhost:8002/metrics), catalog at /etc/inferscale/catalog.yaml, NVML auto, listen
// on :8090, reserve from the catalog only (-1), 5s loop, idle models kept while nothing else
// needs their memory (FreeIdle false), 1 load at a time, 10s backoff doubling to 5m, quarantine after 3
// failures, 5s propagation delay, 60s drain timeout, 1s drain poll; no inference front, with
// front.DefaultConfig's hold bounds and pushback for when one is listened for.
func DefaultConfig() Config {
	fd := front.DefaultConfig()
	return Config{
		HoldTimeout:         fd.HoldTimeout,
		HoldMaxRequests:     fd.MaxHeldRequests,
		HoldMaxBytes:        fd.MaxHeldBytes,
		HoldMaxTotalBytes:   fd.MaxTotalHeldBytes,
		MaxRequestBytes:     fd.MaxRequestBytes,
		RetainMaxTotalBytes: fd.MaxRetainedBytes,
		RetryPushback:       fd.RetryPushback,
		TritonAddress:       "localhost:8001",
		TritonMetricsURL:    "http://localhost:8002/metrics",
		TritonHTTPURL:       "http://localhost:8000",
		CatalogPath:         "/etc/inferscale/catalog.yaml",
		ReserveBytes:        -1,
		NVML:                "auto",
		ListenAddress:       ":8090",
		LoopInterval:        5 * time.Second,
		MaxConcurrentLoads:  1,
		FailureBackoff:      10 * time.Second,
		FailureBackoffMax:   5 * time.Minute,
		QuarantineAfter:     3,
		DrainTimeout:        60 * time.Second,
		PropagationDelay:    5 * time.Second,
		DrainPollInterval:   time.Second,
	}
}

// Validate returns every violation (errors.Join), each naming the field and its accepted range,
// wrapped in ErrConfig.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.TritonAddress); err != nil {
		add("TritonAddress (--triton-address): %q: want host:port", c.TritonAddress)
	}
	if c.TritonMetricsURL != "" && !httpURL(c.TritonMetricsURL) {
		add("TritonMetricsURL (--triton-metrics-url): %q: want an http(s) URL or empty", c.TritonMetricsURL)
	}
	if c.CatalogPath == "" {
		add("CatalogPath (--catalog): empty; want the catalog YAML's path")
	}
	if c.BudgetBytes < 0 || c.BudgetBytes > plan.MaxMemoryBytes {
		add("BudgetBytes (--budget-bytes): %d out of range [0, %d] (0: from NVML or --mig-profile)", c.BudgetBytes, plan.MaxMemoryBytes)
	}
	if c.MIGProfile != "" && !plan.ValidProfile(c.MIGProfile) {
		add("MIGProfile (--mig-profile): %q is not a profile name (lower case, e.g. 1g.10gb; table: %v)", c.MIGProfile, plan.Profiles())
	}
	if c.ReserveBytes < -1 || c.ReserveBytes > plan.MaxMemoryBytes {
		add("ReserveBytes (--reserve-bytes): %d out of range [-1, %d] (-1: the catalog's reserveBytes)", c.ReserveBytes, plan.MaxMemoryBytes)
	}
	if c.PrometheusAddress != "" {
		if err := prom.CheckAddress(c.PrometheusAddress); err != nil {
			add("PrometheusAddress (--prometheus-address) %w; want empty or %s", err, prom.AddressRule)
		}
	}
	if c.PrometheusAddress != "" && c.Namespace == "" {
		add("Namespace (--namespace): empty; required with --prometheus-address (demand queries are confined to it)")
	}
	if c.DemandQuery != "" && !strings.Contains(c.DemandQuery, ModelPlaceholder) {
		add("DemandQuery (--demand-query): %q: want a PromQL template containing %s, or empty", c.DemandQuery, ModelPlaceholder)
	} else if c.DemandQuery != "" {
		if _, _, err := prom.GroupByModel(c.DemandQuery, ModelPlaceholder); err != nil {
			add("DemandQuery (--demand-query): %v", err)
		}
	}
	switch c.NVML {
	case "auto", "on", "off":
	default:
		add("NVML (--nvml): %q; want auto, on or off", c.NVML)
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		add("ListenAddress (--listen): %q: want [host]:port", c.ListenAddress)
	}
	inRange := func(name string, d, lo, hi time.Duration) {
		if d < lo || d > hi {
			add("%s: %s out of range [%s, %s]", name, d, lo, hi)
		}
	}
	inRange("LoopInterval (--loop-interval)", c.LoopInterval, 100*time.Millisecond, 10*time.Minute)
	if c.MaxConcurrentLoads < 1 || c.MaxConcurrentLoads > 16 {
		add("MaxConcurrentLoads (--max-concurrent-loads): %d out of range [1, 16]", c.MaxConcurrentLoads)
	}
	inRange("FailureBackoff (--failure-backoff)", c.FailureBackoff, 100*time.Millisecond, time.Hour)
	// The max is judged against --failure-backoff only when that is valid itself: a 30h backoff
	// (refused above) made the range read [30h, 24h].
	backoffLo := 100 * time.Millisecond
	if c.FailureBackoff >= backoffLo && c.FailureBackoff <= time.Hour {
		backoffLo = c.FailureBackoff
	}
	inRange("FailureBackoffMax (--failure-backoff-max)", c.FailureBackoffMax, backoffLo, 24*time.Hour)
	if c.QuarantineAfter < 1 || c.QuarantineAfter > 100 {
		add("QuarantineAfter (--quarantine-after): %d out of range [1, 100]", c.QuarantineAfter)
	}
	inRange("DrainTimeout (--drain-timeout)", c.DrainTimeout, time.Second, time.Hour)
	inRange("PropagationDelay (--propagation-delay)", c.PropagationDelay, 0, 5*time.Minute)
	inRange("DrainPollInterval (--drain-poll-interval)", c.DrainPollInterval, 10*time.Millisecond, time.Minute)
	if c.InferenceHTTPListen != "" {
		if _, _, err := net.SplitHostPort(c.InferenceHTTPListen); err != nil {
			add("InferenceHTTPListen (--inference-http-listen): %q: want [host]:port or empty", c.InferenceHTTPListen)
		}
		if !httpURL(c.TritonHTTPURL) {
			add("TritonHTTPURL (--triton-http-url): %q: want an http(s) URL", c.TritonHTTPURL)
		}
		if c.InferenceListen == "" {
			add("InferenceHTTPListen (--inference-http-listen): needs --inference-listen")
		}
		if u, err := url.Parse(c.TritonHTTPURL); err == nil && httpURL(c.TritonHTTPURL) {
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			if selfLoop(c.InferenceHTTPListen, net.JoinHostPort(u.Hostname(), port)) {
				add("TritonHTTPURL (--triton-http-url): %q is the front's own --inference-http-listen %q: the front would proxy to itself; want Triton's HTTP port (the chart moves it to the front's port + 100, --http-port=8100)", c.TritonHTTPURL, c.InferenceHTTPListen)
			}
		}
	}
	if c.InferenceListen != "" {
		if _, _, err := net.SplitHostPort(c.InferenceListen); err != nil {
			add("InferenceListen (--inference-listen): %q: want [host]:port or empty", c.InferenceListen)
		}
		if selfLoop(c.InferenceListen, c.TritonAddress) {
			add("TritonAddress (--triton-address): %q is the front's own --inference-listen %q: the front would proxy to itself; want Triton's gRPC port (the chart moves it to the front's port + 100, --grpc-port=8101)", c.TritonAddress, c.InferenceListen)
		}
		if err := c.FrontConfig().Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// Backoff returns the wait after the n-th consecutive failed load (n ≥ 1):
// FailureBackoff × 2^(n-1), capped at FailureBackoffMax.
func (c Config) Backoff(n int) time.Duration {
	d := c.FailureBackoff
	for i := 1; i < n && d < c.FailureBackoffMax; i++ {
		d *= 2
	}
	return min(d, c.FailureBackoffMax)
}

// selfLoop reports whether dialing target reaches listen, this process's own listener: the
// same port, and a target host that is this machine (localhost, a loopback IP, or no host)
// while listen is on every address or on that host. A target it cannot tell (another host
// name, an address that does not parse) is not a loop.
func selfLoop(listen, target string) bool {
	lh, lp, err1 := net.SplitHostPort(listen)
	th, tp, err2 := net.SplitHostPort(target)
	if err1 != nil || err2 != nil || lp != tp {
		return false
	}
	local := func(h string) bool {
		if h == "" || strings.EqualFold(h, "localhost") {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
	}
	if !local(th) {
		return false
	}
	lip := net.ParseIP(lh)
	return lh == "" || lh == th || (lip != nil && (lip.IsUnspecified() || lip.IsLoopback()))
}
