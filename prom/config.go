package prom

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/internal/errtext"
)

// PollerConfig configures a [Poller].
type PollerConfig struct {
	// DefaultAddress is the Prometheus base URL (http or https) used by requests that name
	// none (the scaler's --prometheus-address flag). May be empty when every request names one.
	DefaultAddress string
	// RefreshInterval is how often every distinct query is evaluated. Default 5s, range
	// [100ms, 10m].
	RefreshInterval time.Duration
	// QueryTimeout bounds one query evaluation (sent to Prometheus as its timeout too).
	// Default 10s, range [100ms, 5m].
	QueryTimeout time.Duration
	// Concurrency is how many queries are in flight at once to one Prometheus address. Each
	// distinct address has its own Concurrency slots, so a slow or hung address delays only
	// its own queries, never another address's. Default 8, range [1, 256]. Across addresses
	// at most Concurrency × the distinct addresses are in flight, and never more than the
	// distinct queries; the scaler bounds the addresses by its triggers (--max-triggers, each
	// names one prometheusAddress, plus its own --prometheus-address).
	Concurrency int
	// ForgetAfter drops a subscription that nobody has subscribed to or read for this long,
	// so deleted ScaledObjects stop costing queries. Default 10m, at least RefreshInterval.
	ForgetAfter time.Duration
	// NamespaceLabel is the label that carries the Kubernetes namespace on every series;
	// confinement and the preset grouping use it. Default "namespace".
	NamespaceLabel string
	// PodLabel is the label that carries the pod name on engine and DCGM series; the
	// activity and ready presets join and count on it. Default "pod".
	PodLabel string
	// MaxResponseBytes bounds the Prometheus responses held at once, in bytes: one response
	// alone, and all the evaluations in flight together (from the first byte read until the
	// result is split). A query past it fails with an error wrapping [ErrResponseTooLarge]
	// (its keys' Result.Err) instead of growing the process without bound. 0 means
	// [DefaultMaxResponseBytes] (16 MiB, why there); otherwise range [64 KiB, 1 GiB].
	MaxResponseBytes int64
}

// DefaultConfig returns the defaults documented on [PollerConfig].
func DefaultConfig() PollerConfig {
	return PollerConfig{
		RefreshInterval:  5 * time.Second,
		QueryTimeout:     10 * time.Second,
		Concurrency:      8,
		ForgetAfter:      10 * time.Minute,
		NamespaceLabel:   "namespace",
		PodLabel:         "pod",
		MaxResponseBytes: DefaultMaxResponseBytes,
	}
}

// Validate returns every violation in c, each naming the field and the accepted range.
func (c PollerConfig) Validate() error {
	var errs []error
	if c.DefaultAddress != "" {
		if err := validateAddress(c.DefaultAddress); err != nil {
			errs = append(errs, fmt.Errorf("DefaultAddress: %w", err))
		}
	}
	if c.RefreshInterval < 100*time.Millisecond || c.RefreshInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("RefreshInterval %v: must be in [100ms, 10m]", c.RefreshInterval))
	}
	if c.QueryTimeout < 100*time.Millisecond || c.QueryTimeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("QueryTimeout %v: must be in [100ms, 5m]", c.QueryTimeout))
	}
	if c.Concurrency < 1 || c.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("Concurrency %d: must be in [1, 256]", c.Concurrency))
	}
	if c.ForgetAfter < c.RefreshInterval {
		errs = append(errs, fmt.Errorf("ForgetAfter %v: must be at least RefreshInterval (%v)", c.ForgetAfter, c.RefreshInterval))
	}
	if !ValidLabelName(c.NamespaceLabel) {
		errs = append(errs, fmt.Errorf("NamespaceLabel %q: must be %s", c.NamespaceLabel, LabelNameRule))
	}
	if !ValidLabelName(c.PodLabel) {
		errs = append(errs, fmt.Errorf("PodLabel %q: must be %s", c.PodLabel, LabelNameRule))
	}
	if c.NamespaceLabel == c.PodLabel && ValidLabelName(c.PodLabel) {
		errs = append(errs, fmt.Errorf("PodLabel %q: must differ from NamespaceLabel (the presets group by both)", c.PodLabel))
	}
	for _, l := range []struct{ field, value string }{{"NamespaceLabel", c.NamespaceLabel}, {"PodLabel", c.PodLabel}} {
		if l.value == SignalLabel {
			errs = append(errs, fmt.Errorf("%s %q: must not be %s, the label the preset bundles name each signal's series by", l.field, l.value, SignalLabel))
		}
		for _, e := range slices.Sorted(maps.Keys(Presets)) {
			if l.value == Presets[e].ModelLabel {
				errs = append(errs, fmt.Errorf("%s %q: must not be the %s preset's model label (the presets group by both)", l.field, l.value, e))
			}
		}
	}
	if c.MaxResponseBytes != 0 && (c.MaxResponseBytes < minResponseBytes || c.MaxResponseBytes > maxResponseBytes) {
		errs = append(errs, fmt.Errorf("MaxResponseBytes %d: must be 0 (default, %d) or in [%d, %d] (64 KiB, 1 GiB)", c.MaxResponseBytes, DefaultMaxResponseBytes, minResponseBytes, maxResponseBytes))
	}
	return errors.Join(errs...)
}

// LabelNameRule is the accepted form of the namespace and pod labels (PollerConfig's
// NamespaceLabel and PodLabel, the scaler's --namespace-label and --pod-label), for errors.
const LabelNameRule = `a label name matching [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus's internal labels, such as __name__)`

// ValidLabelName reports whether name is a label the poller may confine, group and join on:
// a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*) that does not start with "__", the prefix
// Prometheus reserves for its internal labels. `__name__` as the namespace label would
// confine every query to the metric named after the namespace, and the relabeling-only
// `__meta_*` labels never reach a stored series.
func ValidLabelName(name string) bool {
	return model.LegacyValidation.IsValidLabelName(name) && !strings.HasPrefix(name, "__")
}

// The range of PollerConfig.MaxResponseBytes: 64 KiB holds several hundred series (a small
// deployment's bundles); 1 GiB, about 1.1 million preset ScaledObjects' bundles, is past any
// memory the scaler would be given.
const (
	minResponseBytes = 64 << 10
	maxResponseBytes = 1 << 30
)

// AddressRule is, in words, what [CheckAddress] accepts.
const AddressRule = "an http:// or https:// URL with a host that is not a link-local, cloud-metadata or unspecified IP address"

// CheckAddress returns nil for an absolute http or https URL with a host that is not a refused
// IP address (see [refusedIP]): the one rule for a base URL the project queries or pushes to
// (Prometheus: the poller, the scaler's --prometheus-address and the prometheusAddress metadata
// key; OpenCost; the ledger's Pushgateway). Otherwise its error quotes addr, redacted and cut
// to 256 bytes, and says which part of [AddressRule] it breaks: it does not parse, the scheme
// or host is missing, a user or password is not valid in a URL, it has a fragment, the port is
// out of [1, 65535], the host is a numeric address in a form other than a.b.c.d, or the host
// is a refused IP address. Callers prefix the field's name. Hostnames are not resolved here
// (the answer could change by the time of the query: DNS rebinding); the poller's dialer
// refuses the same addresses once resolved, and a NetworkPolicy on the egress is the real
// control.
//
// A host made only of numeric labels (2852039166, 0251.0376.0251.0376, 0xa9.254.169.254) must
// be an IPv4 address in dotted-decimal form: other spellings are read as IPv4 by some
// resolvers (inet_aton) and are no hostname (no top-level domain is numeric, RFC 3696 §2).
func CheckAddress(addr string) error {
	q := quoteAddr(addr)
	u, err := url.Parse(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", q, parseError(addr))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: must be an http:// or https:// URL with a host", q)
	}
	if misparsedUserinfo(u) { // a request would go to the wrong host
		return fmt.Errorf("%s: %w", q, errBadUserinfo)
	}
	if u.Fragment != "" || strings.HasSuffix(addr, "#") {
		return fmt.Errorf("%s: has a fragment (#…), which HTTP never sends; percent-encode a # in the user or password as %%23", q)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: port %s out of range [1, 65535]", q, errtext.Quote(p, 16))
		}
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%s: must be an http:// or https:// URL with a host", q)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if numericHost(host) {
			return fmt.Errorf("%s: host %s is a numeric address not in dotted-decimal form; write the IP address as a.b.c.d", q, errtext.Quote(host, 256))
		}
		return nil // a hostname
	}
	if why := refusedIP(ip); why != "" {
		return fmt.Errorf("%s: %s is %s: %w", q, host, why, errRefusedIP)
	}
	return nil
}

// errRefusedIP ends CheckAddress's error for a refused IP address.
var errRefusedIP = errors.New("refused")

// validateAddress is [CheckAddress] as the poller reports it: an error wrapping ErrBadRequest
// that names prometheusAddress, and for a refused IP address why the scaler refuses it.
func validateAddress(addr string) error {
	err := CheckAddress(addr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errRefusedIP):
		return fmt.Errorf("%w: prometheusAddress %w (the scaler is shared by every namespace, so such an address would let any ScaledObject reach it)", ErrBadRequest, err)
	}
	return fmt.Errorf("%w: prometheusAddress %w", ErrBadRequest, err)
}

// errBadUserinfo is why an address does not parse when only its user or password is at fault.
var errBadUserinfo = errors.New(`the user or password is not valid in a URL (percent-encode characters such as "/", "?", "#", "@", ":", "%" and spaces in them)`)

// parseError is why addr does not parse, without quoting its secrets: url.Parse's message can
// repeat a piece of the password (`invalid port ":pa" after host` for a "/" in it), so it is
// the message of the redacted address's parse, or, when that parses, errBadUserinfo.
func parseError(addr string) error {
	_, err := url.Parse(RedactAddress(addr))
	if err == nil {
		return errBadUserinfo
	}
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the URL, quoted (cut) by the caller
	}
	return err
}

// quoteAddr quotes addr for an error, redacted ([RedactAddress]) and cut to its first 256
// bytes: the address is the user's, may be of any length, and may carry credentials.
func quoteAddr(addr string) string { return errtext.Quote(RedactAddress(addr), 256) }

// refusedIP says why the scaler does not query ip, or "" when it may: link-local addresses
// (169.254.0.0/16, fe80::/10, and their multicast ranges), where every major cloud serves its
// instance metadata and credentials (169.254.169.254: AWS, GCP, Azure, OCI); the two metadata
// addresses outside them (AWS's IPv6 fd00:ec2::254, Alibaba Cloud's 100.100.100.200); and the
// unspecified addresses 0.0.0.0 and ::, which connect to the scaler's own host. Loopback and
// the private ranges stay allowed: an in-cluster Prometheus lives there.
func refusedIP(ip netip.Addr) string {
	ip = ip.Unmap() // ::ffff:169.254.169.254 is 169.254.169.254
	switch {
	case ip.IsUnspecified():
		return "the unspecified address (it reaches the scaler's own host)"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there)"
	case ip == awsMetadataIPv6, ip == alibabaMetadata:
		return "a cloud instance metadata address"
	}
	return ""
}

var (
	awsMetadataIPv6 = netip.MustParseAddr("fd00:ec2::254")
	alibabaMetadata = netip.MustParseAddr("100.100.100.200")
)

// numericHost reports whether every dot-separated label of host is a decimal, octal or
// 0x-hex number (the forms inet_aton accepts).
func numericHost(host string) bool {
	for label := range strings.SplitSeq(host, ".") {
		if label == "" {
			return false
		}
		digits := label
		hex := len(label) > 2 && (label[:2] == "0x" || label[:2] == "0X")
		if hex {
			digits = label[2:]
		}
		for _, r := range digits {
			if !(r >= '0' && r <= '9' || hex && (r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F')) {
				return false
			}
		}
	}
	return true
}

// RefuseDial is [refuseDial] for the scaler's other HTTP clients (scaler/opencost): a
// net.Dialer Control that refuses, after name resolution, a connection to a link-local,
// cloud-metadata or unspecified IP address, the addresses [CheckAddress] refuses when they are
// written literally. Its error names the address and why ("prom: refusing to connect to
// 169.254.169.254:80: a link-local address …"); an address that is not IP:port (a unix
// socket) is allowed.
func RefuseDial(network, address string, c syscall.RawConn) error {
	return refuseDial(network, address, c)
}

// refuseDial is the poller's net.Dialer Control: it refuses a connection to an address
// [refusedIP] names, after name resolution, so a hostname that resolves to the metadata
// endpoint (metadata.google.internal) is refused as its IP address would be. It runs before
// the connection is attempted.
func refuseDial(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil // not an IP:port (unix sockets): nothing to judge
	}
	if why := refusedIP(ap.Addr()); why != "" {
		return fmt.Errorf("prom: refusing to connect to %s: %s", address, why)
	}
	return nil
}
