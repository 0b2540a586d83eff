// Package prom reads the scaler's signals from Prometheus.
//
// It has three parts:
//
//   - [Confine] rewrites a user-supplied PromQL query so that every selector is pinned to one
//     namespace, using Prometheus's own parser, so a ScaledObject can never read another
//     namespace's series.
//   - Presets ([Preset]) hold the standard queries for Triton and vLLM pools and for NVIDIA
//     DCGM engine activity. Preset queries are grouped `by (namespace, model)` and evaluated
//     once for every ScaledObject that uses them; the poller splits the result per key.
//   - A [Poller] evaluates each distinct query once per refresh with client_golang's API
//     client and keeps the results in a snapshot. [Poller.Result] only reads the snapshot; it
//     never waits on Prometheus. The poller does not judge values (NaN, negative, stale): the
//     pure decision in package scaler does.
package prom
