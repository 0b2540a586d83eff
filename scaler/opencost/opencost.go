// Package opencost reads the price of one replica-hour of a Deployment or StatefulSet from
// OpenCost's Allocation API (https://opencost.io/docs/integrations/api and
// https://opencost.io/docs/integrations/api-examples; the API listens on port 9003).
//
// One query per namespace and window:
//
//	GET <address>/allocation?window=<window>&aggregate=pod&accumulate=true&filter=namespace:"<namespace>"
//
// (filter is OpenCost's v2 filter language, the namespace quoted as strconv.Quote does). The
// answer is OpenCost's envelope {"code":200,"data":[{"<pod>":{…allocation…}}]}, one set with
// accumulate=true; each allocation carries properties.namespace, properties.controllerKind
// (OpenCost resolves a pod's ReplicaSet to its Deployment, so "deployment" for a Deployment's
// pods, "statefulset" for a StatefulSet's), properties.controller, minutes (the pod's running
// minutes in the window) and totalCost (its cost over them, in OpenCost's currency). From it,
// per controller,
//
//	price of one replica-hour = Σ totalCost ÷ (Σ minutes ÷ 60)
//
// over the controller's pods in the window, when Σ minutes ≥ MinMinutes; otherwise there is
// no price (absent, never 0). OpenCost's special entries (names starting with "__":
// __idle__, __unallocated__, __unmounted__) and pods without a controller are skipped; idle
// and shared costs are not spread onto pods (the query's defaults).
package opencost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/prom"
)

// DefaultPort is the port OpenCost serves its API on (opencost.io/docs/integrations/api).
const DefaultPort = 9003

// MinMinutes is the least pod-minutes (Σ minutes over a controller's pods in the window) a
// price is computed from: 30 pod-minutes, so that one pod's first minutes (a cold start
// billed before it serves, OpenCost's per-minute rounding) do not set the price alone.
const MinMinutes = 30.0

// DefaultMaxResponseBytes bounds one answer OpenCost sends: 16 MiB, ≈ 10,000 pods' entries at
// OpenCost's 1–2 KiB each, far more pods than one namespace's scale targets have. Past it
// the query fails naming the limit.
const DefaultMaxResponseBytes = 16 << 20

// DefaultTimeout bounds one query, connection and the whole answer included.
const DefaultTimeout = 30 * time.Second

// ErrTooLarge is wrapped by the error of an answer past Config.MaxResponseBytes.
var ErrTooLarge = errors.New("opencost: answer too large")

// Controller names one workload as OpenCost's properties do. Kind is OpenCost's lower-case
// controllerKind: "deployment" or "statefulset" for the workloads the scaler prices.
type Controller struct {
	Namespace, Kind, Name string
}

func (c Controller) String() string { return c.Kind + " " + c.Namespace + "/" + c.Name }

// echo is c as an error repeats it: its kind and name (from OpenCost's answer, any size)
// cut to maxEcho bytes each with their length (errtext.Cut); the namespace is the query's.
func (c Controller) echo() string {
	return errtext.Cut(c.Kind, maxEcho) + " " + c.Namespace + "/" + errtext.Cut(c.Name, maxEcho)
}

// maxEcho is how many bytes of a value from OpenCost's answer (an entry's key, a pod, a
// controller, a number's text) an error repeats: a 4 MiB pod key made a 4 MiB error, logged
// and kept per controller.
const maxEcho = 64

// echo quotes v for an error, cut to maxEcho bytes with its length when longer (errtext.Quote).
func echo(v string) string { return errtext.Quote(v, maxEcho) }

// Prices is one namespace's answer.
type Prices struct {
	// PerReplicaHour is Σ totalCost ÷ (Σ minutes ÷ 60) per controller with at least
	// MinMinutes pod-minutes and no bad entry, in OpenCost's currency per replica-hour.
	PerReplicaHour map[Controller]float64
	// Minutes is Σ minutes per controller seen with valid entries (those below MinMinutes
	// included), for logs.
	Minutes map[Controller]float64
	// Bad holds, per controller with a bad entry (a minutes or totalCost field that is
	// missing, null, not a number, out of float64's range (1e400), negative, or a sum that
	// overflows), the error naming the pod and the field; a value it repeats from the answer
	// is cut to maxEcho bytes with its length. Such a controller has no price: one bad pod
	// fails its controller, not the namespace (a sum without it would under-price the rest).
	Bad map[Controller]error
}

// Config configures a Client.
type Config struct {
	// Address is OpenCost's base URL (http:// or https://, e.g.
	// http://opencost.opencost.svc:9003), validated as prom.CheckAddress validates a
	// Prometheus address; a path is kept ("/allocation" is appended) and so is a query (sent
	// with every request). Logs and errors show it as prom.RedactAddress does.
	Address string
	// Timeout bounds one query; 0: DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds one answer; 0: DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Transport replaces the HTTP transport (tests); nil: http.DefaultTransport's settings
	// with prom.RefuseDial as the dialer's Control, so a hostname resolving to a link-local or
	// cloud-metadata address is refused as the literal address is.
	Transport http.RoundTripper
}

// Client queries one OpenCost. Its methods are safe for concurrent use.
type Client struct {
	base    *url.URL
	address string
	max     int64
	http    *http.Client
}

// New returns a Client for cfg. Errors: an address that is not an http:// or https:// URL
// with a host, or that names a refused IP address (prom.CheckAddress), shown redacted.
func New(cfg Config) (*Client, error) {
	if err := prom.CheckAddress(cfg.Address); err != nil {
		return nil, fmt.Errorf("opencost address %w", err)
	}
	u, err := url.Parse(cfg.Address)
	if err != nil { // CheckAddress parsed it
		return nil, fmt.Errorf("opencost address %s: does not parse", errtext.Quote(prom.RedactAddress(cfg.Address), 256))
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxBytes := cfg.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: prom.RefuseDial}).DialContext
		tr = t
	}
	return &Client{base: u, address: cfg.Address, max: maxBytes,
		http: &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: noRedirect}}, nil
}

// noRedirect refuses redirects: a redirect could lead the scaler to an address CheckAddress
// would refuse, and OpenCost's API does not redirect.
func noRedirect(*http.Request, []*http.Request) error {
	return errors.New("redirect refused (OpenCost's API does not redirect)")
}

// Address returns the address as logs show it (prom.RedactAddress).
func (c *Client) Address() string { return prom.RedactAddress(c.address) }

// FormatWindow writes d as OpenCost's duration window: whole days as "<n>d", whole hours as
// "<n>h", otherwise whole minutes as "<n>m". Error: d not a positive whole number of minutes.
func FormatWindow(d time.Duration) (string, error) {
	switch {
	case d < time.Minute || d%time.Minute != 0:
		return "", fmt.Errorf("opencost window %v: must be a positive whole number of minutes", d)
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d", nil
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h", nil
	}
	return strconv.FormatInt(int64(d/time.Minute), 10) + "m", nil
}

// Filter is the v2 filter selecting one namespace: namespace:"<namespace>", quoted as
// strconv.Quote quotes.
func Filter(namespace string) string { return "namespace:" + strconv.Quote(namespace) }

// requestURL is the allocation query for namespace over window.
func (c *Client) requestURL(namespace, window string) string {
	u := c.base.JoinPath("allocation")
	q := c.base.Query()
	q.Set("window", window)
	q.Set("aggregate", "pod")
	q.Set("accumulate", "true")
	q.Set("filter", Filter(namespace))
	u.RawQuery = q.Encode()
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// envelope is OpenCost's answer (core/pkg/protocol: HTTPResponse).
type envelope struct {
	Code    *int                    `json:"code"`
	Message string                  `json:"message"`
	Data    []map[string]allocation `json:"data"`
}

// allocation holds the fields of one OpenCost allocation the price reads.
type allocation struct {
	Name       string `json:"name"`
	Properties struct {
		Namespace      string `json:"namespace"`
		ControllerKind string `json:"controllerKind"`
		Controller     string `json:"controller"`
		Pod            string `json:"pod"`
	} `json:"properties"`
	Minutes   number `json:"minutes"`
	TotalCost number `json:"totalCost"`
}

// number is a JSON number that remembers whether it was present and whether it was null
// (OpenCost writes NaN and ±Inf as null). A value that is not a number float64 holds (a
// string, an object, 1e400) is kept as bad, its text cut (echo), so that it fails its
// controller, not the whole answer as json.Unmarshal's error did.
type number struct {
	v         float64
	set, null bool
	bad       string // the value as sent, echoed, when it is not a number float64 holds; "" otherwise
}

func (n *number) UnmarshalJSON(b []byte) error {
	n.set = true
	if string(b) == "null" {
		n.null = true
		return nil
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) { // a string, object, array or bool
		n.bad = echo(string(b))
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64) // a JSON number always parses; err is ErrRange
	if err != nil {
		n.bad = echo(string(b))
		return nil
	}
	n.v = v
	return nil
}

// check returns nil for a present, finite value ≥ 0, else why not, naming field.
func (n number) check(field string) error {
	switch {
	case !n.set:
		return fmt.Errorf("%s is missing", field)
	case n.null:
		return fmt.Errorf("%s is null (OpenCost writes NaN and ±Inf as null)", field)
	case n.bad != "":
		return fmt.Errorf("%s %s: must be a finite number ≥ 0", field, n.bad)
	case math.IsNaN(n.v) || math.IsInf(n.v, 0):
		return fmt.Errorf("%s %v: must be finite", field, n.v)
	case n.v < 0:
		return fmt.Errorf("%s %v: must be ≥ 0", field, n.v)
	}
	return nil
}

// Prices queries OpenCost for namespace over window (FormatWindow) and computes every
// controller's price of one replica-hour (see the package doc and Prices). Errors name the
// redacted address and the namespace: the request failing or timing out, an HTTP status
// other than 200 or a code other than 200 (quoting OpenCost's message), an answer past
// MaxResponseBytes (wrapping ErrTooLarge), an answer that is not OpenCost's JSON, and an
// entry of another namespace (an OpenCost that ignores the v2 filter). A bad entry fails
// only its controller (Prices.Bad).
func (c *Client) Prices(ctx context.Context, namespace string, window time.Duration) (Prices, error) {
	w, err := FormatWindow(window)
	if err != nil {
		return Prices{}, err
	}
	where := fmt.Sprintf("opencost %s, namespace %q", c.Address(), namespace)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.requestURL(namespace, w), nil)
	if err != nil {
		return Prices{}, fmt.Errorf("%s: %w", where, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its URL repeats the address's query: keep only the cause
			err = ue.Err
		}
		return Prices{}, fmt.Errorf("%s: GET /allocation: %w", where, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	if err != nil {
		return Prices{}, fmt.Errorf("%s: reading the answer: %w", where, err)
	}
	if int64(len(body)) > c.max {
		return Prices{}, fmt.Errorf("%s: %w: more than %d bytes (opencost.Config.MaxResponseBytes)", where, ErrTooLarge, c.max)
	}
	var env envelope
	jerr := json.Unmarshal(body, &env)
	if resp.StatusCode != http.StatusOK || (jerr == nil && env.Code != nil && *env.Code != http.StatusOK) {
		msg := env.Message
		if jerr != nil || msg == "" {
			msg = string(bytes.TrimSpace(body))
		}
		code := resp.StatusCode
		if jerr == nil && env.Code != nil {
			code = *env.Code
		}
		return Prices{}, fmt.Errorf("%s: HTTP %d, code %d: %s", where, resp.StatusCode, code, errtext.Quote(msg, 512))
	}
	if jerr != nil {
		return Prices{}, fmt.Errorf("%s: the answer is not OpenCost's allocation JSON: %w", where, jerr)
	}
	if env.Code == nil {
		return Prices{}, fmt.Errorf("%s: the answer has no code: not OpenCost's allocation JSON", where)
	}
	return compute(namespace, env.Data)
}

// compute sums every controller's minutes and totalCost over sets (see Prices).
func compute(namespace string, sets []map[string]allocation) (Prices, error) {
	type sum struct{ minutes, cost float64 }
	sums := map[Controller]*sum{}
	bad := map[Controller]error{}
	for _, set := range sets {
		for key, a := range set {
			if strings.HasPrefix(key, "__") || strings.HasPrefix(a.Name, "__") {
				continue // __idle__, __unallocated__, __unmounted__
			}
			if a.Properties.Namespace != namespace {
				return Prices{}, fmt.Errorf("opencost: entry %s is in namespace %s, not %q: this OpenCost does not apply the v2 filter (filter=namespace:\"…\"); upgrade it",
					echo(key), echo(a.Properties.Namespace), namespace)
			}
			if a.Properties.Controller == "" || a.Properties.ControllerKind == "" {
				continue // a bare pod: no scale target to price
			}
			ctl := Controller{Namespace: namespace, Kind: strings.ToLower(a.Properties.ControllerKind), Name: a.Properties.Controller}
			if _, ok := bad[ctl]; ok {
				continue
			}
			pod := a.Properties.Pod
			if pod == "" {
				pod = key
			}
			if err := firstBad(a.Minutes.check("minutes"), a.TotalCost.check("totalCost")); err != nil {
				bad[ctl] = fmt.Errorf("opencost: %s: pod %s: %w", ctl.echo(), echo(pod), err)
				delete(sums, ctl)
				continue
			}
			s := sums[ctl]
			if s == nil {
				s = &sum{}
				sums[ctl] = s
			}
			s.minutes += a.Minutes.v
			s.cost += a.TotalCost.v
		}
	}
	out := Prices{PerReplicaHour: map[Controller]float64{}, Minutes: map[Controller]float64{}, Bad: bad}
	for ctl, s := range sums {
		if math.IsInf(s.minutes, 0) || math.IsInf(s.cost, 0) {
			bad[ctl] = fmt.Errorf("opencost: %s: the sum of minutes or totalCost over its pods overflows", ctl.echo())
			continue
		}
		out.Minutes[ctl] = s.minutes
		if s.minutes < MinMinutes {
			continue
		}
		p := s.cost / (s.minutes / 60)
		if math.IsNaN(p) || math.IsInf(p, 0) {
			bad[ctl] = fmt.Errorf("opencost: %s: price %v over %v minutes is not finite", ctl.echo(), p, s.minutes)
			continue
		}
		out.PerReplicaHour[ctl] = p
	}
	return out, nil
}

// firstBad is the first non-nil error of errs, with the second's text when both are set.
func firstBad(a, b error) error {
	switch {
	case a != nil && b != nil:
		return fmt.Errorf("%w; %w", a, b)
	case a != nil:
		return a
	}
	return b
}
