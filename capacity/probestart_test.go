package capacity

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// scripted answers its n-th request with codes[n] ("" a success), a success taking latency
// by the clock it is handed; past the script, successes.
type scripted struct {
	codes   []string
	latency time.Duration
	sent    int
}

func (s *scripted) Send(_ context.Context, now func() time.Time) Outcome {
	i := s.sent
	s.sent++
	if i < len(s.codes) && s.codes[i] != "" {
		return Outcome{Code: s.codes[i], Done: now()}
	}
	return Outcome{Done: now().Add(s.latency)}
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
// starts the search at 0.5 ÷ S, S their median latency; it gives up once more than half of
// them failed. Ten failures leave ten successes, enough; the eleventh failure ends it at once,
// after 11 sends.
func TestProbeStartAtItsEdges(t *testing.T) {
	cfg := DefaultSearchConfig()
	cfg.MinRPS, cfg.MaxRPS = 0.001, 1000
	for _, tt := range []struct {
		name      string
		codes     []string
		wantSent  int
		wantErr   string // "" for a rate
		wantUnrch bool
	}{
		// 100 s each (the target's clock, not a wait): 0.5 ÷ 100 s = 0.005 req/s.
		{"all answer", nil, 20, "", false},
		{"ten fail, ten answer", repeat("Unavailable", 10), 20, "", false},
		{"eleven fail", repeat("Unavailable", 11), 11, "probe: 11 of 11 requests failed (11 × Unavailable", false},
		{"eleven time out", repeat(codeTimeout, 11), 11, "probe: 11 of 11 requests timed out", true},
	} {
		target := &scripted{codes: tt.codes, latency: 100 * time.Second}
		rate, err := probeStart(context.Background(), target, cfg, time.Second)
		if target.sent != tt.wantSent {
			t.Errorf("%s: %d requests sent, want %d", tt.name, target.sent, tt.wantSent)
		}
		if tt.wantErr == "" {
			// S is 100 s plus the moment between the probe's clock reading and the target's
			// (under 200 ms keeps the rate above 0.00499).
			if err != nil || rate > 0.005 || rate < 0.00499 {
				t.Errorf("%s: %v req/s, %v; want just under 0.005 req/s", tt.name, rate, err)
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
		if rate, err := probeStart(context.Background(), &scripted{latency: 100 * time.Second}, cfg, time.Second); err != nil || rate != c.want {
			t.Errorf("MinRPS %v, MaxRPS %v: %v req/s, %v; want %v", c.min, c.max, rate, err, c.want)
		}
	}
}
