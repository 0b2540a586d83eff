package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/internal/version"
)

func TestRetrySubcommand(t *testing.T) {
	var out bytes.Buffer
	if err := runRetry([]string{"--duration", "12m", "--burst-start", "5m", "--burst-length", "2m"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if n := strings.Count(s, "| inferscale: "); n != 5 {
		t.Errorf("%d inferscale rows, want 5:\n%s", n, s)
	}
	// The other families at their published settings (replay/settings.yaml).
	for _, want := range []string{"3 layers × 3 attempts, timeout 15s", "uniqueRateQuery, retryBudget 1.2", "retry budget 20% (min 3)", "cost per 1,000 verified",
		"minutes with amplification > 1.5", "| hpa-gpu: target 50% |", "| keda-queue: queue ≥ 5/replica, min 1 |", "| knative: target 70% of 4 slots, min 0, delay 0s |", "| static: ×1 peak"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "| hpa-gpu: "); n != 3 {
		t.Errorf("%d hpa-gpu rows, want 3 (no retries, layered, budget)", n)
	}
	out.Reset()
	if err := runRetry([]string{"--duration", "12m", "--burst-start", "5m", "--burst-factor", "1", "--initial-replicas", "3", "--reject", "0.5"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "; engine rejects 50 % of attempts |"); n != 17 {
		t.Errorf("--reject 0.5: %d rows name the rejections, want 17:\n%s", n, out.String())
	}
	// A settings file's published set replaces the embedded one.
	data, err := os.ReadFile("../../replay/settings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(f, bytes.Replace(data, []byte("published:\n  hpa-gpu:\n    value: 0.5"), []byte("published:\n  hpa-gpu:\n    value: 0.8"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runRetry([]string{"--duration", "12m", "--burst-start", "5m", "--settings", f}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| hpa-gpu: target 80% |") {
		t.Errorf("--settings with hpa-gpu 0.8: output lacks it:\n%s", out.String())
	}
	for _, bad := range [][]string{{"--layers", "9"}, {"--burst-factor", "0.5"}, {"--reject", "1"}, {"--settings", filepath.Join(t.TempDir(), "none.yaml")}, {"extra"}} {
		if err := runRetry(bad, &out, io.Discard); err == nil {
			t.Errorf("retry %v: want an error", bad)
		}
	}
}

// TestRetrySubcommandBounds: hostile scenarios are errors naming the field
// and its range, before any replay (--service=1000h never ended; the day
// of 10,000 × 100 req/s grew past 10 GB in 30 s).
func TestRetrySubcommandBounds(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"service 1000 h", []string{"--service=1000h"}, "burst scenario service 1000h0m0s: want a mean service time in (0s, 1h0m0s]"},
		{"a day of 10,000 × 100 req/s", []string{"--base-rate=10000", "--burst-factor=100", "--duration=24h"},
			"trace too large: burst scenario expects 1.042e+09 requests (base × (duration − length) + base × factor × length); want at most MaxRequests (50000000)"},
		// Up to 27 sends per request: 2.22e+06 expected unique requests could send 5.994e+07
		// attempts; it ran 1 min 37 s to 5.4 GB before the in-run guard refused it.
		{"base 1,000 under 3 × 3 retries", []string{"--base-rate=1000"},
			"trace too large: --base-rate 1000 × (--duration 25m0s − --burst-length 3m0s) + --base-rate × --burst-factor 5 × --burst-length expects 2.22e+06 unique requests, " +
				"each sent up to 27 times (--attempts 3 ^ --layers 3): up to 5.994e+07 sends in one replay; want at most MaxRequests (50000000) " +
				"(lower --base-rate, --burst-factor, --duration, --burst-length, --layers or --attempts)"},
		{"settings /dev/zero", []string{"--settings=/dev/zero"}, "settings /dev/zero: larger than 1048576 bytes (1 MiB); the embedded replay/settings.yaml is about 4 KiB"},
		{"two bad fields", []string{"--base-rate=0", "--burst-length=20m"},
			"burst scenario base rate 0 req/s: want (0, 10000]\nburst scenario length 20m0s: want [0s, duration − start (15m0s)]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runRetry(tt.args, &out, io.Discard); err == nil || err.Error() != tt.want {
				t.Errorf("runRetry(%q) = %v, want %q", tt.args, err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("runRetry(%q) wrote %q, want nothing", tt.args, out.String())
			}
		})
	}
}

// TestRetryVersion: every command prints its version with --version (README),
// the retry subcommand too, and runs nothing.
func TestRetryVersion(t *testing.T) {
	var out bytes.Buffer
	if err := runRetry([]string{"--version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), version.String("replay")+"\n"; got != want {
		t.Errorf("replay retry --version printed %q, want %q", got, want)
	}
}
