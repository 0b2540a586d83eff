package residency

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		give  func(*Config)
		wants []string
	}{
		{name: "every violation named", give: func(c *Config) {
			c.TritonAddress = "triton"
			c.TritonMetricsURL = "ftp://x"
			c.CatalogPath = ""
			c.BudgetBytes = -1
			c.MIGProfile = "1G.10GB"
			c.ReserveBytes = -2
			c.PrometheusAddress = "http://prom:9090"
			c.DemandQuery = "sum(rate(x[1m]))"
			c.NVML = "maybe"
			c.ListenAddress = "8090"
			c.LoopInterval = time.Millisecond
			c.MaxConcurrentLoads = 0
			c.FailureBackoff = time.Hour
			c.FailureBackoffMax = time.Minute
			c.QuarantineAfter = 0
			c.DrainTimeout = 0
			c.PropagationDelay = -time.Second
			c.DrainPollInterval = 0
		}, wants: []string{
			`TritonAddress (--triton-address): "triton": want host:port`,
			`TritonMetricsURL (--triton-metrics-url): "ftp://x"`,
			"CatalogPath (--catalog): empty",
			"BudgetBytes (--budget-bytes): -1 out of range [0, 1125899906842624]",
			`MIGProfile (--mig-profile): "1G.10GB" is not a profile name`,
			"ReserveBytes (--reserve-bytes): -2 out of range [-1,",
			"Namespace (--namespace): empty; required with --prometheus-address",
			`DemandQuery (--demand-query): "sum(rate(x[1m]))": want a PromQL template containing $model`,
			`NVML (--nvml): "maybe"; want auto, on or off`,
			`ListenAddress (--listen): "8090": want [host]:port`,
			"LoopInterval (--loop-interval): 1ms out of range [100ms, 10m0s]",
			"MaxConcurrentLoads (--max-concurrent-loads): 0 out of range [1, 16]",
			"FailureBackoffMax (--failure-backoff-max): 1m0s out of range [1h0m0s, 24h0m0s]",
			"QuarantineAfter (--quarantine-after): 0 out of range [1, 100]",
			"DrainTimeout (--drain-timeout): 0s out of range [1s, 1h0m0s]",
			"PropagationDelay (--propagation-delay): -1s out of range [0s, 5m0s]",
			"DrainPollInterval (--drain-poll-interval): 0s out of range [10ms, 1m0s]",
		}},
	}
	tests = append(tests, struct {
		name  string
		give  func(*Config)
		wants []string
	}{name: "a bad backoff does not set the max's range", give: func(c *Config) {
		c.FailureBackoff, c.FailureBackoffMax = 30*time.Hour, 25*time.Hour
	}, wants: []string{
		"FailureBackoff (--failure-backoff): 30h0m0s out of range [100ms, 1h0m0s]",
		"FailureBackoffMax (--failure-backoff-max): 25h0m0s out of range [100ms, 24h0m0s]",
	}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.give(&c)
			err := c.Validate()
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	c := DefaultConfig() // 10s doubling, capped at 5m
	var got []time.Duration
	for n := 1; n <= 7; n++ {
		got = append(got, c.Backoff(n))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Backoff(1..7) = %v, want %v", got, want)
		}
	}
}

func TestBudgetValidate(t *testing.T) {
	err := plan.Budget{Profile: "", TotalBytes: 0, ReserveBytes: 5}.Validate()
	for _, w := range []string{`profile: "" is not a profile name`, "totalBytes: 0 out of range [1,", "reserveBytes: 5 out of range [0, totalBytes 0)"} {
		if !errors.Is(err, plan.ErrBudget) || !strings.Contains(err.Error(), w) {
			t.Errorf("Budget.Validate() = %v; want ErrBudget naming %q", err, w)
		}
	}
}
