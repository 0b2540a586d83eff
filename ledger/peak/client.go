package peak

import (
	"fmt"
	"io"
	"net/http"

	"github.com/inferscale/inferscale/prom"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// MaxResponseBytes bounds one Prometheus answer the ledger reads: the scaler's default,
// prom.DefaultMaxResponseBytes (16 MiB, why there). A peak query answers one series per
// ScaledObject's rate (a preset's, one per namespace and model), far under it; an answer past
// it is a failed read (ErrResponseTooLarge), not a process that grows until it is killed.
const MaxResponseBytes = prom.DefaultMaxResponseBytes

// NewAPI returns a Prometheus API client for address whose every response body is cut off
// past maxBytes (≤ 0: MaxResponseBytes): client_golang reads a body whole, so without a
// limit an answer of 1 GiB was held whole. The error of a query past it wraps
// prom.ErrResponseTooLarge and names the limit, never the body; Read adds the query. prom's
// own limited transport is the scaler poller's, with budgets shared by its evaluations; the
// ledger reads one peak at a time and needs only this per-answer bound.
func NewAPI(address string, maxBytes int64) (v1.API, error) {
	if maxBytes <= 0 {
		maxBytes = MaxResponseBytes
	}
	c, err := api.NewClient(api.Config{Address: address, RoundTripper: limitedTransport{base: api.DefaultRoundTripper, max: maxBytes}})
	if err != nil {
		return nil, err
	}
	return v1.NewAPI(c), nil
}

// limitedTransport bounds every response body to max bytes.
type limitedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

// limitedBody reads at most max bytes; past them every Read fails.
type limitedBody struct {
	rc        io.ReadCloser
	left, max int64
	err       error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the limit tells a body of exactly max from a longer one
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		b.err = fmt.Errorf("%w: the answer is over the %d-byte limit on a Prometheus response (peak.MaxResponseBytes)", prom.ErrResponseTooLarge, b.max)
		return 0, b.err
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
