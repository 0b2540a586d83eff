// Package residency decides which models stay loaded in a Triton Inference Server running in
// explicit model-control mode, keeps the loaded set within the memory budget of the pod's GPU
// slice, and drains the pod gracefully.
//
// The decision is the pure function [Plan]: catalog, budget, observed state, demand and the
// current time in; an ordered list of load and unload actions out. Everything that touches the
// world lives around it: [Controller] re-reads Triton every loop, asks Plan, and acts on the
// answer one step at a time; [Server] serves readiness, liveness, metrics and the drain
// endpoint; [Drainer] takes the pod out of service without dropping a request.
//
// The catalog ([Catalog], loaded by [LoadCatalog]) is the operator's record of every model the
// pod may serve: its immutable digest, tier, admitted peak memory per MIG profile, swap
// overhead and typical load time. The budget ([Budget]) is the usable memory of the slice, read
// through NVML by package residency/gpu or set from a profile table ([ProfileBytes]).
package residency
