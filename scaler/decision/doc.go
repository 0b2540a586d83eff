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
// into a Policy (ParseMetadata), serves KEDA's protocol around Recommend and
// re-exports these names.
//
// The formulas are those of DESIGN.md, "The scaler":
//
//	N_rate   = ⌈λ / (μρ)⌉
//	N_drain  = ⌈(λ + Q/D) / (μρ)⌉
//	N_act    = ⌈R · A / A_target⌉,  A = min(1, activity / activityCeiling)
//	N_demand = max(N_drain, N_act)
//	warm     = max(warmReplicas, ⌈warmFraction · N_demand⌉)
//	N_raw    = clamp(N_demand + warm, min, max)
//
// shaped by a sliding up-window (minimum of recent raw values), a sliding
// down-window (maximum of recent raw values), a burst bypass and a bounded
// step-down.
package decision
