package front

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestForwardingSecondsIntegrates: the counter is the integral of the requests in flight,
// read at any instant, on a fake clock: one request from 0 s, a second from 1 s, one answered
// at 3 s, the other at 6 s: 1·1 + 2·2 + 1·3 = 8 request-seconds, and 5 at 3 s. A count never
// goes below zero, and each model has its own series.
func TestForwardingSecondsIntegrates(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	c := newForwardingSeconds("inferscale_front_forwarding_seconds_total", func() time.Time { return now })
	at := func(s float64) { now = t0.Add(time.Duration(s * float64(time.Second))) }
	read := func(model string) float64 {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == model {
					return m.GetCounter().GetValue()
				}
			}
		}
		t.Fatalf("no series for %q", model)
		return 0
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

	c.add("a", 1)
	at(1)
	c.add("a", 1)
	at(2.5)
	if got := read("a"); !near(got, 1+2*1.5) {
		t.Errorf("at 2.5 s: %v request-seconds, want 4 (1 alone for 1 s, then 2 for 1.5 s)", got)
	}
	at(3)
	c.add("a", -1)
	if got := read("a"); !near(got, 5) {
		t.Errorf("at 3 s: %v, want 5", got)
	}
	at(6)
	c.add("a", -1)
	at(60)
	if got := read("a"); !near(got, 8) {
		t.Errorf("at 60 s, idle since 6 s: %v, want 8", got)
	}
	c.add("a", -1) // unbalanced: the count stays at 0, the counter does not fall
	at(70)
	if got := read("a"); !near(got, 8) {
		t.Errorf("after an unbalanced end: %v, want 8", got)
	}
	c.add("b", 1)
	at(72)
	if got := read("b"); !near(got, 2) {
		t.Errorf("model b: %v, want 2", got)
	}
	want := `# HELP inferscale_front_forwarding_seconds_total Request-seconds of unary and HTTP inference requests forwarded to Triton and not yet answered (gRPC streams not counted); its rate is the mean number of them.
# TYPE inferscale_front_forwarding_seconds_total counter
inferscale_front_forwarding_seconds_total{model="a"} 8
inferscale_front_forwarding_seconds_total{model="b"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
