// Package scaler is inferscale's KEDA external scaler.
//
// It turns the metadata of a ScaledObject trigger into a validated Policy
// (ParseMetadata), computes a replica count from queue depth, request rate,
// GPU engine activity and a warm pool with the pure function Recommend
// (which lives, with Policy and its types, in the dependency-free package
// scaler/decision and is re-exported here), and
// serves KEDA's externalscaler gRPC protocol (Server) from a snapshot that is
// refreshed in the background, so no RPC ever waits on Prometheus.
//
// The signals themselves come from package scaler/prom (Prometheus queries,
// confinement to a namespace, presets and the background poller) and the
// bounds and ready replicas of a scale target from package scaler/kube; this
// package sees them only through the Signals and Targets interfaces.
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
package scaler
