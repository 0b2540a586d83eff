// Package scaler is inferscale's KEDA external scaler.
//
// It owns the scaler's running part: parsing the metadata of a ScaledObject trigger into a
// validated [decision.Policy] ([ParseMetadata]), serving KEDA's externalscaler gRPC protocol
// ([Server]) from a snapshot that is refreshed in the background, so no RPC ever waits on
// Prometheus, the scaler's metrics, and [Run], which cmd/scaler calls.
//
// The replica count itself is the pure function decision.Recommend of package scaler/decision
// (with Policy, Observation, State and the signal names); this package calls it and names its
// types there, never under second names. The signals come from package prom (Prometheus
// queries, confinement to a namespace, presets and the background poller), and the bounds and
// ready replicas of a scale target from package scaler/kube; this package sees them only
// through the [Signals] and [Targets] interfaces.
//
// It must not import package residency or any residency/… package: the scaler and the
// residency sidecar are separate running parts, and what both need from Prometheus lives in
// package prom.
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
