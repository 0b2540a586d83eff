package capacity

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// scripted answers its n-th request with codes[n] ("" a success), past the script with
// successes; the j-th success takes j × latency by the clock it is handed.
type scripted struct {
	codes      []string
	latency    time.Duration
	sent, good int
}

func (s *scripted) Send(_ context.Context, now func() time.Time) Outcome {
	i := s.sent
	s.sent++
	if i < len(s.codes) && s.codes[i] != "" {
		return Outcome{Code: s.codes[i], Done: now()}
	}
	s.good++
	return Outcome{Done: now().Add(time.Duration(s.good) * s.latency)}
}

func (s *scripted) Describe() string { return "scripted" }

func repeat(code string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = code
	}
	return out
}

// TestProbeStartAtItsEdges: the probe sends probeRequests (20) requests one after another and
// starts the search at 0.5 ÷ S, S their median latency (nearest rank); it gives up once more
// than half of them failed. Ten failures leave ten successes, enough; the eleventh failure ends
// it at once, after 11 sends. The successes take 10 s, 20 s, 30 s… by the target's clock (no
// wait): of 20 the median is the 10th, 100 s (0.005 req/s); of 10 the 5th, 50 s (0.01 req/s).
func TestProbeStartAtItsEdges(t *testing.T) {
	cfg := DefaultSearchConfig()
	cfg.MinRPS, cfg.MaxRPS = 0.001, 1000
	for _, tt := range []struct {
		name      string
		codes     []string
		wantSent  int
		wantRate  float64
		wantErr   string // "" for a rate
		wantUnrch bool
	}{
		{"all answer", nil, 20, 0.005, "", false},
		{"ten fail, ten answer", repeat("Unavailable", 10), 20, 0.01, "", false},
		{"eleven fail", repeat("Unavailable", 11), 11, 0, "probe: 11 of 11 requests failed (11 × Unavailable", false},
		{"eleven time out", repeat(codeTimeout, 11), 11, 0, "probe: 11 of 11 requests timed out", true},
	} {
		target := &scripted{codes: tt.codes, latency: 10 * time.Second}
		rate, err := probeStart(context.Background(), target, cfg, time.Second)
		if target.sent != tt.wantSent {
			t.Errorf("%s: %d requests sent, want %d", tt.name, target.sent, tt.wantSent)
		}
		if tt.wantErr == "" {
			// S also holds the moment between the probe's clock reading and the target's: the
			// rate is just under the figure (within 0.2 %: 100 ms of 50 s).
			if err != nil || rate > tt.wantRate || rate < 0.998*tt.wantRate {
				t.Errorf("%s: %v req/s, %v; want just under %v req/s", tt.name, rate, err, tt.wantRate)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, ErrUnreachable) != tt.wantUnrch {
			t.Errorf("%s: %v req/s, %v; want an error containing %q (unreachable: %v)", tt.name, rate, err, tt.wantErr, tt.wantUnrch)
		}
	}
	// The rate is held within [MinRPS, MaxRPS]: 0.005 is capped at 0.004 and raised to 0.01.
	for _, c := range []struct{ min, max, want float64 }{{0.001, 0.004, 0.004}, {0.01, 1000, 0.01}} {
		cfg.MinRPS, cfg.MaxRPS = c.min, c.max
		if rate, err := probeStart(context.Background(), &scripted{latency: 10 * time.Second}, cfg, time.Second); err != nil || rate != c.want {
			t.Errorf("MinRPS %v, MaxRPS %v: %v req/s, %v; want %v", c.min, c.max, rate, err, c.want)
		}
	}
}
