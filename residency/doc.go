// Package residency decides which models stay loaded in a Triton Inference Server running in
// explicit model-control mode, keeps the loaded set within the memory budget of the pod's GPU
// slice, and drains the pod gracefully.
//
// The decision is the pure function [Plan] (with its detailed form [Decide]): catalog, budget,
// observed state, demand and the current time in; an ordered list of load and unload actions
// out, each carrying its reason and the accounted memory after it. [Apply] plays actions onto
// an observation, for tests and for the offline replay. They live, with the catalog and budget
// types, in the dependency-light package residency/plan and are re-exported here.
//
// Everything that touches the world lives around it: [Controller] re-reads Triton's index and
// statistics every loop, asks Decide, and carries out one step of the plan (all unloads, or up
// to MaxConcurrentLoads loads), backing off and quarantining models whose loads fail;
// [NewHandler] serves /readyz, /healthz, /metrics and POST /drain; [Drainer] takes the pod out
// of service without dropping a request; [PromDemand] reads the demand of models that are not
// loaded from Prometheus; [KubeEvents] records Kubernetes events. Package residency/gpu reads
// the budget through NVML, and package residency/sidecar wires everything into cmd/residency.
//
// The catalog ([Catalog], loaded by [LoadCatalog]) is the operator's record of every model the
// pod may serve: its immutable digest, tier, admitted peak memory per MIG profile, swap
// overhead and typical load time. Without NVML the budget can come from the profile table
// ([ProfileBytes]).
package residency
