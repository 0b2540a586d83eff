package decision

import "math"

// This file holds the queueing model behind N_slo: the least number of
// servers c = N·k of a pooled M/M/c queue (Erlang 1917; Kleinrock, Queueing
// Systems Vol. 1, 1975, §3.5) whose predicted P(wait > T) is at most 1 − q,
// corrected for arrivals burstier than Poisson after Allen and Cunneen
// (Allen, Probability, Statistics and Queueing Theory, 2nd ed., 1990, §6.5).
//
// For c servers, offered load a = λ·S Erlangs (a < c) and mean service S:
//
//	B(0) = 1,  B(n) = a·B(n−1) / (n + a·B(n−1))         Erlang B, the stable recurrence
//	C(c, a)  = c·B(c) / (c − a·(1 − B(c)))              Erlang C, P(wait > 0)
//	P(W > T) = C(c, a) · exp(−(c − a)·T / (S·β))
//
// β = (ca² + cs²)/2 is the Allen–Cunneen factor: their approximation scales
// the M/M/c mean wait, Wq(G/G/c) ≈ Wq(M/M/c)·β, and keeps P(wait > 0) at
// C(c, a). Given a wait, the M/M/c wait is exponential with mean
// S/(c − a); scaling that conditional mean by β keeps the G/G/c mean wait
// equal to Allen–Cunneen's, which is the tail above. ca² is estimated by the
// index of dispersion of arrival counts (Var/mean of counts in short
// windows: 1 for Poisson, larger for bursts); cs² is taken as 1
// (exponential service), since no engine exports the variance of its
// service time.
//
// The recurrence never overflows: every B(n) lies in (0, 1]. It also
// forgets where it starts: around n ≈ a an error in B is multiplied by about
// n/a per step below a and by a/n above it, so starting at n₀ = a − 10√a − 10
// from the overloaded-regime value B ≈ 1 − n₀/a leaves an error below
// exp(−(a − n₀)²/(2a)) ≤ e⁻⁵⁰ (the Halfin–Whitt scale √a: Halfin and Whitt,
// Operations Research 29(3), 1981). The search therefore costs
// O(√a + ln(1/ε)·S·β/T) steps, whatever a is.

// maxQueueSteps bounds the recurrence steps of one search. Past it the
// search answers the closed-form bound c − a ≥ ln(1/ε)·S·β/T, which meets the
// SLO because C(c, a) ≤ 1 (a conservative, never smaller answer).
const maxQueueSteps = 1 << 20

// queueModel is the pooled queue of one decision.
type queueModel struct {
	a     float64 // offered load, Erlangs (λ·S or running requests), ≥ 0, may be +Inf
	theta float64 // T/(S·β), per server of headroom: the tail's exponent per unit of c − a; > 0
	k     int64   // servers per replica, ≥ 1

	// memo is where leastReplicas left the recurrence, B(memoN) = memoB, so that
	// tail at the answer (or above it) continues from there instead of starting again.
	memoN int64
	memoB float64

	// steps counts the recurrence steps taken (tests).
	steps int64
}

// start returns the recurrence's starting point n₀ and B(n₀) (see above).
func (m queueModel) start() (int64, float64) {
	n0 := math.Floor(m.a - 10*math.Sqrt(m.a) - 10)
	if n0 <= 0 {
		return 0, 1
	}
	return int64(n0), 1 - n0/m.a
}

// logTail is ln P(W > T) at c servers, given B = B(c); c > a.
func (m queueModel) logTail(c int64, b float64) float64 {
	cf := float64(c)
	erlangC := cf * b / (cf - m.a*(1-b))
	if erlangC > 1 {
		erlangC = 1 // rounding near c ≈ a
	}
	return math.Log(erlangC) - (cf-m.a)*m.theta
}

// boundReplicas is the closed-form answer ⌈(a + ln(1/ε)/θ)/k⌉ replicas
// (C ≤ 1), saturating at +Inf.
func (m queueModel) boundReplicas(logEps float64) float64 {
	return math.Ceil((math.Floor(m.a) + 1 + math.Ceil(-logEps/m.theta)) / float64(m.k))
}

// leastReplicas returns the least N ≥ 0 for which N·k servers give
// P(W > T) ≤ ε (logEps = ln ε < 0), and P(W > T) at that N. An answer above
// maxN is reported as maxN + 1 (the pool cannot meet the SLO within its
// bound) with the tail 1. No load (a = 0) needs no replica. The exact search
// takes at most maxQueueSteps steps; when it has not found N by then it
// answers the closed-form bound ⌈(⌊a⌋ + 1 + ⌈ln(1/ε)/θ⌉)/k⌉, which meets
// the SLO (C ≤ 1), with the tail ε.
func (m *queueModel) leastReplicas(logEps float64, maxN int64) (float64, float64) {
	if m.a == 0 {
		return 0, 0
	}
	if math.IsInf(m.a, 1) || math.IsNaN(m.a) || m.a >= float64(maxN)*float64(m.k) {
		return float64(maxN) + 1, 1
	}
	up := m.boundReplicas(logEps) // feasible: the answer is at most up (+Inf when θ = 0)
	n, b := m.start()
	last := int64(math.Min(up, float64(maxN))) * m.k
	if float64(last) > float64(n)+maxQueueSteps {
		last = n + maxQueueSteps
	}
	defer func() { m.memoN, m.memoB = n, b }()
	for n < last {
		n++
		m.steps++
		b = m.a * b / (float64(n) + m.a*b)
		if b == 0 {
			// B underflowed: every later B(n) is exactly 0 too, and so is the tail, which
			// meets the SLO at the first count of whole replicas above a. Step straight there
			// (the same answer and memo as stepping one by one): with replicaConcurrency 10⁶
			// the walk to the first replica's 10⁶ servers took 10⁶ steps, ≈ 4 ms per decision.
			next := max((n+m.k-1)/m.k*m.k, (int64(m.a)/m.k+1)*m.k) // the least multiple of k ≥ n and > a
			if next > last {
				n = last
				break
			}
			n = next
			return float64(n / m.k), 0
		}
		if n%m.k != 0 || float64(n) <= m.a {
			continue
		}
		if lt := m.logTail(n, b); lt <= logEps {
			return float64(n / m.k), math.Exp(lt)
		}
	}
	if up > float64(maxN) {
		return float64(maxN) + 1, 1
	}
	return up, math.Exp(logEps) // out of steps, or rounding kept the search from confirming the bound
}

// tail returns P(W > T) at N replicas (N·k servers): 1 when N·k ≤ a (the
// queue grows without bound), 0 with no load. Past maxQueueSteps it returns
// the bound exp(−(c − a)θ), which is never smaller than the exact value.
func (m *queueModel) tail(replicas int64) float64 {
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
	for n < last && b != 0 { // once B underflows to 0 it stays 0 (see leastReplicas)
		n++
		m.steps++
		b = m.a * b / (float64(n) + m.a*b)
	}
	return math.Exp(m.logTail(last, b))
}

// normalQuantile is Φ⁻¹(p), the standard normal quantile, for p in (0, 1).
func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }
