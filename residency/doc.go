// Package residency decides which models stay loaded in a Triton Inference Server running in
// explicit model-control mode, keeps the loaded set within the memory budget of the pod's GPU
// slice, and drains the pod gracefully.
//
// The decision is the pure function plan.Plan (with its detailed form plan.Decide) of package
// residency/plan: catalog, budget, observed state, demand and the current time in; an ordered
// list of load and unload actions out, each carrying its reason and the accounted memory after
// it. The catalog and budget types live there too and are named there (plan.Catalog,
// plan.Budget, …), never under second names here.
//
// This package owns everything that touches the world around it: [Controller] re-reads
// Triton's index and statistics every loop, asks plan.Decide, and carries out one step of the
// plan (all unloads, or up to MaxConcurrentLoads loads), backing off and quarantining models
// whose loads fail; [NewHandler] serves /readyz, /healthz, /metrics and POST /drain; [Drainer]
// takes the pod out of service without dropping a request; [PromDemand] reads the demand of
// models that are not loaded from Prometheus (one grouped query per refresh, through package
// prom); [KubeEvents] records Kubernetes events; [ParseCatalog], [LoadCatalog] and
// [ReadCatalog] read the catalog YAML. Package residency/gpu reads the budget through NVML,
// and package residency/sidecar wires everything into cmd/residency.
//
// It must not import package scaler or any scaler/… package: the sidecar and the scaler are
// separate running parts, and what both need from Prometheus lives in package prom.
package residency
