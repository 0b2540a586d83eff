package front

import (
	"errors"
	"fmt"
	"math"
	"net"
	"time"
)

// ErrConfig is wrapped by Config.Validate's error.
var ErrConfig = errors.New("invalid front config")

// Config configures the front. The sidecar's flag of each field is named in its comment.
type Config struct {
	// Upstream is Triton's gRPC endpoint, host:port (the sidecar's --triton-address).
	Upstream string
	// HoldTimeout bounds how long a request for a model that is not READY is held
	// (--hold-timeout); the client's own deadline bounds it too, whichever ends first. It should
	// exceed the longest catalog load time plus one loop interval, or held requests for that
	// model fail before the load ends. Range [1s, 30m].
	HoldTimeout time.Duration
	// MaxHeldRequests bounds the requests held per model (--hold-max-requests); one more fails
	// UNAVAILABLE at once. Range [1, 100000].
	MaxHeldRequests int
	// MaxHeldBytes bounds the request bytes held per model (--hold-max-bytes), chunked HTTP
	// bodies being read to be held included; a request that would pass it fails UNAVAILABLE at
	// once. Range [4 MiB, 16 GiB].
	MaxHeldBytes int64
	// MaxTotalHeldBytes bounds the request bytes held for all models together
	// (--hold-max-total-bytes), chunked HTTP bodies being read to be held included; a request
	// that would pass it fails at once with RESOURCE_EXHAUSTED (HTTP 429) and the pushback.
	// Without it the front could hold MaxHeldBytes for every catalog model at once.
	// Range [4 MiB, 64 GiB].
	MaxTotalHeldBytes int64
	// MaxRequestBytes bounds one request message (--max-request-bytes): a gRPC message (every
	// method; gRPC reads a message whole before the front sees it, so this is also what one
	// call can make the front buffer) or an HTTP request body. One larger fails
	// RESOURCE_EXHAUSTED (HTTP 413 Content Too Large) without being read further. Range
	// [4 MiB, 2 GiB − 1]: at least gRPC's default maximum, at most Triton's own gRPC maximum
	// (MAX_GRPC_MESSAGE_SIZE = INT32_MAX, triton-inference-server/server src/common.h).
	MaxRequestBytes int64
	// MaxRetainedBytes bounds the bytes of forwarded ModelInfer requests the front keeps, for
	// all models together, while Triton runs them (--retain-max-total-bytes): a kept request
	// that Triton answers NOT_FOUND because its model was unloaded since the front's view of it
	// (ModelReady says not ready) is held once and sent again. A request forwarded while the
	// kept bytes would pass the bound is not kept: it goes to Triton with its buffers, and such
	// a NOT_FOUND is answered UNAVAILABLE with the pushback, which a client's retry policy
	// retries (the planner is woken, so its view is right by then). A kept copy goes as soon as
	// Triton's answer needs no re-hold. Without the bound every forwarded request stayed in the sidecar's memory until
	// its answer (16 concurrent 3 MiB requests executing kept 48 MiB, their whole bytes, on
	// top of a chart sidecar's 64 MiB hold budget within its 128 MiB limit). Requests
	// forwarded after a hold, and stream messages, are never kept (they are not held again).
	// Range [0, 64 GiB]; 0 keeps none.
	MaxRetainedBytes int64
	// RetryPushback is the delay sent in grpc-retry-pushback-ms with every UNAVAILABLE the front
	// answers itself (--retry-pushback). Range [0, 10m].
	RetryPushback time.Duration
	// RecheckInterval is how often, while it holds requests for a model, the front asks Triton
	// (ModelReady) whether the model is ready; Recheck asks at once. Range [10ms, 10s].
	RecheckInterval time.Duration
}

// DefaultConfig returns the defaults: Triton at localhost:8001; hold up to 60 s, 1,000 requests
// and 256 MiB per model, 256 MiB for all models together; requests up to 64 MiB; 16 MiB of
// forwarded requests kept for a re-hold; 1 s pushback; readiness re-checked every 100 ms.
//
// Why these values: 60 s covers six of the catalog's default 10 s load times plus loop
// intervals, and stays under the 5-minute request timeouts common in front of inference
// services, so a held request resolves before a gateway gives up on it. 1,000 held small
// requests cost under 16 MiB (BENCHMARKS.md); 256 MiB of held tensors is 64 messages at gRPC's
// default 4 MiB maximum, a bound on the sidecar's memory per model, and the same 256 MiB for
// all models together keeps that bound whatever the catalog's size. 64 MiB per request is
// Triton's own default bound on HTTP inference input (--http-max-input-size,
// HTTP_DEFAULT_MAX_INPUT_SIZE = 1<<26 in triton-inference-server/server src/common.h); its gRPC
// bound, 2 GiB − 1 and not configurable, is no bound on a sidecar's memory, so the front takes
// over both protocols what Triton's HTTP endpoint takes by default. A 1 s pushback lets a
// client's retry reach another pod after a load-balancer update without turning every refusal
// into an immediate retry (a retry storm). 16 MiB of kept requests covers a few thousand
// text requests of a few KiB (an LLM prompt) or a few large tensors, and stays a small share
// of the chart's 128 MiB sidecar beside its 64 MiB hold budget; a NOT_FOUND past it costs the
// client one retry, not the request.
// 100 ms re-checks add at most 100 ms to a hold that lasts a load time (seconds), for one cheap
// ModelReady per held model per check.
func DefaultConfig() Config {
	return Config{
		Upstream:          "localhost:8001",
		HoldTimeout:       60 * time.Second,
		MaxHeldRequests:   1000,
		MaxHeldBytes:      256 << 20,
		MaxTotalHeldBytes: 256 << 20,
		MaxRequestBytes:   64 << 20,
		MaxRetainedBytes:  16 << 20,
		RetryPushback:     time.Second,
		RecheckInterval:   100 * time.Millisecond,
	}
}

// Validate returns every violation (errors.Join), each naming the field and its accepted range,
// wrapped in ErrConfig.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.Upstream); err != nil {
		add("Upstream (--triton-address): %q: want host:port", c.Upstream)
	}
	inRange := func(name string, d, lo, hi time.Duration) {
		if d < lo || d > hi {
			add("%s: %s out of range [%s, %s]", name, d, lo, hi)
		}
	}
	inRange("HoldTimeout (--hold-timeout)", c.HoldTimeout, time.Second, 30*time.Minute)
	if c.MaxHeldRequests < 1 || c.MaxHeldRequests > 100000 {
		add("MaxHeldRequests (--hold-max-requests): %d out of range [1, 100000]", c.MaxHeldRequests)
	}
	if c.MaxHeldBytes < 4<<20 || c.MaxHeldBytes > 16<<30 {
		add("MaxHeldBytes (--hold-max-bytes): %d out of range [%d, %d]", c.MaxHeldBytes, 4<<20, int64(16<<30))
	}
	if c.MaxTotalHeldBytes < 4<<20 || c.MaxTotalHeldBytes > 64<<30 {
		add("MaxTotalHeldBytes (--hold-max-total-bytes): %d out of range [%d, %d]", c.MaxTotalHeldBytes, 4<<20, int64(64<<30))
	}
	if c.MaxRequestBytes < 4<<20 || c.MaxRequestBytes > math.MaxInt32 {
		add("MaxRequestBytes (--max-request-bytes): %d out of range [%d, %d]", c.MaxRequestBytes, 4<<20, math.MaxInt32)
	}
	if c.MaxRetainedBytes < 0 || c.MaxRetainedBytes > 64<<30 {
		add("MaxRetainedBytes (--retain-max-total-bytes): %d out of range [0, %d]", c.MaxRetainedBytes, int64(64<<30))
	}
	inRange("RetryPushback (--retry-pushback)", c.RetryPushback, 0, 10*time.Minute)
	inRange("RecheckInterval", c.RecheckInterval, 10*time.Millisecond, 10*time.Second)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}
