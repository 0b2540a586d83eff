// Package sidecar wires the residency controller into a process: catalog, budget (NVML through
// residency/gpu, or flags), Triton client, Prometheus demand, Kubernetes events, HTTP endpoints,
// and the drain on SIGTERM. cmd/residency parses flags into a residency.Config and calls Run.
//
// It owns the sidecar's process wiring only; the loop, the drain and the demand source live in
// package residency, the planner in residency/plan, the Prometheus poller in package prom. It
// must not import package scaler or any scaler/… package.
package sidecar
