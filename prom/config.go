package prom

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/common/model"
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
	// Concurrency is how many queries are in flight at once during a refresh. Default 8,
	// range [1, 256].
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
}

// DefaultConfig returns the defaults documented on [PollerConfig].
func DefaultConfig() PollerConfig {
	return PollerConfig{
		RefreshInterval: 5 * time.Second,
		QueryTimeout:    10 * time.Second,
		Concurrency:     8,
		ForgetAfter:     10 * time.Minute,
		NamespaceLabel:  "namespace",
		PodLabel:        "pod",
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
	if !model.LegacyValidation.IsValidLabelName(c.NamespaceLabel) {
		errs = append(errs, fmt.Errorf("NamespaceLabel %q: must be a label name matching [a-zA-Z_][a-zA-Z0-9_]*", c.NamespaceLabel))
	}
	if !model.LegacyValidation.IsValidLabelName(c.PodLabel) {
		errs = append(errs, fmt.Errorf("PodLabel %q: must be a label name matching [a-zA-Z_][a-zA-Z0-9_]*", c.PodLabel))
	}
	return errors.Join(errs...)
}

// ValidAddress reports whether addr is an absolute http or https URL with a
// host: the one rule for a Prometheus base URL, shared by the poller, the
// scaler's --prometheus-address and the prometheusAddress metadata key.
func ValidAddress(addr string) bool {
	u, err := url.Parse(addr)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// validateAddress is ValidAddress as an error wrapping ErrBadRequest.
func validateAddress(addr string) error {
	if _, err := url.Parse(addr); err != nil {
		return fmt.Errorf("%w: prometheusAddress %q: %w", ErrBadRequest, addr, err)
	}
	if !ValidAddress(addr) {
		return fmt.Errorf("%w: prometheusAddress %q: must be an http:// or https:// URL with a host", ErrBadRequest, addr)
	}
	return nil
}
