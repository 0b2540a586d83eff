package prom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/inferscale/inferscale/internal/errtext"
)

// DefaultMaxResponseBytes is the default [PollerConfig.MaxResponseBytes]: 16 MiB.
//
// Why: the largest legitimate answers are the preset bundles, one per (address, engine),
// each holding seven series per (namespace, model). A bundle series is about 130 bytes of
// Prometheus JSON (`{"metric":{"inferscale_signal":"activity","model":"…","namespace":"…"},
// "value":[1767225600.123,"0.123"]}`), so the 10,000 ScaledObjects the scaler is sized for
// (docs/scaler.md, "Memory") answer 70,000 × 130 B ≈ 9 MB in all, however they are spread
// over addresses and engines; custom queries add well under 1 KB each. 16 MiB leaves 1.8×
// that, so the default --max-triggers never meets the limit (past it every key of the answer
// fails, not only the extra ones). It is no memory guarantee: client_golang buffers the body,
// copies it and decodes it into model values; BenchmarkResponseDecode measures 4.0–4.6× the
// body retained by the decoded vector, and the peak RSS of one evaluation measured +66 MB
// for the 9.0 MB bundle of 10,000 ScaledObjects (7.3×) and +187 MB for a valid 16 MiB answer
// of one-label series (11×). The limit is shared by the evaluations in flight so that such
// answers do not add up (eight at once measured as one): one budget for the poller's
// DefaultAddress and one for every other address, so a tenant-named server cannot starve the
// operator's Prometheus.
const DefaultMaxResponseBytes = 16 << 20

// ErrResponseTooLarge is wrapped by the error of a query whose Prometheus response passed
// [PollerConfig.MaxResponseBytes], alone or together with the responses in flight beside it.
// The error names the limit and the address, never the body.
var ErrResponseTooLarge = errors.New("prometheus response too large")

// respBudget bounds the bytes of Prometheus responses held at once: by every evaluation from
// its first response byte until the evaluation has decoded and split its result (a body's
// bytes stay in client_golang's buffer and decoded values until then, not only while read).
type respBudget struct {
	max  int64
	held atomic.Int64
}

// charge is one evaluation's share of a respBudget.
type charge struct {
	b       *respBudget
	address string // as configured: redact it in errors
	mu      sync.Mutex
	n       int64
	done    bool // released: a late Read (client_golang reads on after a timeout) takes nothing
}

// add takes n more bytes; past the limit it returns an error wrapping ErrResponseTooLarge
// and keeps nothing of n.
func (c *charge) add(n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return fmt.Errorf("response from %s read after its evaluation ended", RedactAddress(c.address))
	}
	if c.n+n > c.b.max {
		return fmt.Errorf("%w: the answer from %s is over the %d-byte limit on Prometheus responses (MaxResponseBytes)", ErrResponseTooLarge, RedactAddress(c.address), c.b.max)
	}
	if held := c.b.held.Add(n); held > c.b.max {
		c.b.held.Add(-n)
		return fmt.Errorf("%w: the answers in flight together are over the %d-byte limit on Prometheus responses (MaxResponseBytes); the one from %s had %d bytes", ErrResponseTooLarge, c.b.max, RedactAddress(c.address), c.n)
	}
	c.n += n
	return nil
}

// release gives every byte of c back to the budget.
func (c *charge) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.held.Add(-c.n)
	c.n = 0
	c.done = true
}

type chargeKey struct{}

// withCharge returns ctx carrying c: responses to requests made with it are charged to c.
func withCharge(ctx context.Context, c *charge) context.Context {
	return context.WithValue(ctx, chargeKey{}, c)
}

// limitedTransport wraps a RoundTripper so that every response body is charged to the
// evaluation of the request's context (or, without one, to a charge of its own released
// when the body is closed).
type limitedTransport struct {
	base   http.RoundTripper
	budget *respBudget
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	c, ok := req.Context().Value(chargeKey{}).(*charge)
	own := !ok
	if own {
		c = &charge{b: t.budget, address: req.URL.Scheme + "://" + req.URL.Host}
	}
	resp.Body = &limitedBody{rc: resp.Body, c: c, own: own}
	return resp, nil
}

// NewLimitedAPI returns a Prometheus API client for address whose every answer is bounded to
// maxBytes (≤ 0: DefaultMaxResponseBytes), for a reader outside the poller (the ledger's peak
// query): past it the query fails with an error wrapping [ErrResponseTooLarge] that names the
// limit and the redacted address, never the body. Its answers are charged to one budget of
// their own, each released when its body is closed. Errors: api.NewClient's (a bad address).
func NewLimitedAPI(address string, maxBytes int64) (v1.API, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: &limitedTransport{base: api.DefaultRoundTripper, budget: &respBudget{max: maxBytes}}})
	if err != nil {
		return nil, err
	}
	return v1.NewAPI(c), nil
}

// limitedBody charges what it reads; once past the budget every Read fails.
type limitedBody struct {
	rc  io.ReadCloser
	c   *charge
	own bool
	err error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		if cerr := b.c.add(int64(n)); cerr != nil {
			b.err = cerr
			return 0, cerr
		}
	}
	return n, err
}

func (b *limitedBody) Close() error {
	if b.own {
		b.c.release()
	}
	return b.rc.Close()
}

// maxErrorMessageBytes bounds the Prometheus error message a failed query keeps: the message
// is the server's (any size a hostile server sends), and it is held in the snapshot and logged.
const maxErrorMessageBytes = 512

// maxErrorTypeBytes bounds the errorType a failed query keeps: Prometheus's are words
// (bad_data, timeout, execution), but the server's answer sets it, and a 1 MiB one was kept whole.
const maxErrorTypeBytes = 64

// boundedAPIError returns err without the response body that client_golang keeps in a
// *v1.Error's Detail (up to MaxResponseBytes held per failing query until its next
// evaluation), and with its message cut to maxErrorMessageBytes and its type to maxErrorTypeBytes. Other errors pass as they are.
func boundedAPIError(err error) error {
	var apiErr *v1.Error
	if !errors.As(err, &apiErr) {
		return err
	}
	return &v1.Error{Type: v1.ErrorType(errtext.Cut(string(apiErr.Type), maxErrorTypeBytes)), Msg: errtext.Cut(apiErr.Msg, maxErrorMessageBytes)}
}
