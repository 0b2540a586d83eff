package decision

import (
	"math"
	"testing"
)

// refLeast is leastReplicas as it was before the underflow shortcut: one recurrence step per
// server, to the end.
func refLeast(m queueModel, logEps float64, maxN int64) (float64, float64, int64, float64) {
	if m.a == 0 {
		return 0, 0, 0, 0
	}
	if math.IsInf(m.a, 1) || math.IsNaN(m.a) || m.a >= float64(maxN)*float64(m.k) {
		return float64(maxN) + 1, 1, 0, 0
	}
	up := m.boundReplicas(logEps)
	n, b := m.start()
	last := int64(math.Min(up, float64(maxN))) * m.k
	if float64(last) > float64(n)+maxQueueSteps {
		last = n + maxQueueSteps
	}
	for n < last {
		n++
		b = m.a * b / (float64(n) + m.a*b)
		if n%m.k != 0 || float64(n) <= m.a {
			continue
		}
		if lt := m.logTail(n, b); lt <= logEps {
			return float64(n / m.k), math.Exp(lt), n, b
		}
	}
	if up > float64(maxN) {
		return float64(maxN) + 1, 1, n, b
	}
	return up, math.Exp(logEps), n, b
}

// refTail is tail as it was before the shortcut.
func refTail(m queueModel, replicas int64) float64 {
	if m.a == 0 {
		return 0
	}
	c := float64(replicas) * float64(m.k)
	if math.IsNaN(m.a) || c <= m.a {
		return 1
	}
	n, b := m.start()
	if last := replicas * m.k; m.memoN > n && m.memoN <= last {
		n, b = m.memoN, m.memoB
	}
	if c-float64(n) > maxQueueSteps {
		return math.Exp(-(c - m.a) * m.theta)
	}
	last := replicas * m.k
	for n < last {
		n++
		b = m.a * b / (float64(n) + m.a*b)
	}
	return math.Exp(m.logTail(last, b))
}

// TestQueueUnderflowShortcut: once Erlang B underflows to 0 the search steps straight to the
// next whole replica, with exactly the answers, tails and memo of stepping one server at a
// time. Before, replicaConcurrency 10⁶ at a load of 1,000 Erlangs walked 10⁶ recurrence steps
// to the first replica (≈ 4 ms per decision, twice with the tail at the answer, every refresh,
// for every such trigger).
func TestQueueUnderflowShortcut(t *testing.T) {
	logEps := math.Log(0.01)
	for _, a := range []float64{0.001, 0.5, 3, 999.5, 1000, 2000, 5e4} {
		for _, k := range []int64{1, 7, 1000, 4096, 1000000} {
			for _, theta := range []float64{0, 1e-9, 2, math.Inf(1)} {
				for _, maxN := range []int64{1, 100000} {
					m := queueModel{a: a, theta: theta, k: k}
					wantN, wantTail, wantMemoN, wantMemoB := refLeast(m, logEps, maxN)
					gotN, gotTail := m.leastReplicas(logEps, maxN)
					if gotN != wantN || gotTail != wantTail || m.memoN != wantMemoN || m.memoB != wantMemoB {
						t.Fatalf("a=%g k=%d θ=%g maxN=%d: leastReplicas %g, %g (memo %d, %g), want %g, %g (memo %d, %g)",
							a, k, theta, maxN, gotN, gotTail, m.memoN, m.memoB, wantN, wantTail, wantMemoN, wantMemoB)
					}
					for _, r := range []int64{1, 2, int64(gotN), int64(gotN) + 1, maxN} {
						if r < 1 || r > maxN {
							continue
						}
						if got, want := m.tail(r), refTail(m, r); got != want {
							t.Fatalf("a=%g k=%d θ=%g maxN=%d: tail(%d) = %g, want %g", a, k, theta, maxN, r, got, want)
						}
					}
				}
			}
		}
	}

	m := queueModel{a: 1000, theta: 2, k: 1000000}
	n, tail := m.leastReplicas(logEps, 100000)
	if n != 1 || tail != 0 {
		t.Errorf("a=1000, k=10⁶: %g replicas at tail %g, want 1 at 0", n, tail)
	}
	if got := m.tail(1); got != 0 {
		t.Errorf("tail(1) = %g, want 0", got)
	}
	if m.steps > 5000 {
		t.Errorf("a=1000, k=10⁶: %d recurrence steps, want at most 5000 (B underflows near 2,600 servers; it took 10⁶)", m.steps)
	}
}
