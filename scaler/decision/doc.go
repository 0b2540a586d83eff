// Package decision is the scaler's pure core: the validated Policy of one
// ScaledObject trigger and Recommend, a plain function of a policy, an
// observation, the previous State and the evaluation time:
//
//	Recommend(policy, observation, prev, now) (Recommendation, State)
//
// No context, logger, clock, goroutine or interface is inside, and the
// package imports the standard library only, so that the replay simulator
// (cmd/replay) and tests link it without the gRPC server, KEDA's stubs, the
// PromQL parser or client-go. Package scaler parses ScaledObject metadata
// into a Policy (ParseMetadata) and serves KEDA's protocol around Recommend.
//
// The pool is sized as one queue for the SLO it is given (T =
// sloWaitSeconds, q = sloQuantile, k = replicaConcurrency):
//
//	λ_H      = λ_now + H·max(0, trend) + Φ⁻¹(q)·(prediction spread)   forecast.go
//	a        = max(λ_H·S, running)                                    offered load, Erlangs
//	N_slo    = least N: P(W > T) ≤ 1 − q for N·k servers,             queue.go
//	           P(W > T) = C(N·k, a)·exp(−(N·k − a)·T/(S·(I + 1)/2))   Erlang C, Allen–Cunneen
//	N_drain  = ⌈(max(λ·S, running) + Q_H·S/D) / (k·ρ)⌉,  Q_H = Q + max(0, λ − R·k/S)·H while Q > 0
//	N_cap    = ⌈a / (k·ρ)⌉ when targetUtilization ρ is set
//	N_demand = max of the terms that could be computed
//	warm     = max(warmReplicas, ⌈warmFraction · N_demand⌉)
//	N_raw    = clamp(N_demand + warm, min, max)
//
// S is the measured mean service time, else k/μ (replicaThroughput); I is
// the measured index of dispersion of arrival counts, at least 1 (the
// correction is for arrivals burstier than Poisson; 1 when not measured); H is coldStart, else the measured pod start time, else 60 s.
// GPU engine activity sizes nothing beside a load signal: at its ceiling it
// only forbids a scale-down (the saturation guard). The answer is shaped by
// a sliding up-window (minimum of recent raw values), a sliding down-window
// (maximum of recent raw values), a burst bypass and a bounded step-down.
// Every term saturates at +Inf instead of overflowing, and NaN never
// reaches a clamp: a huge signal answers the upper bound.
package decision
