// Package front is the residency sidecar's model-aware gRPC front for Triton's inference
// service (KServe v2 gRPC, package inference.GRPCInferenceService): clients connect to it
// instead of Triton, and it forwards their calls to Triton without decoding tensors.
//
// A ModelInfer or ModelStreamInfer for a catalog model that is not READY is held — bounded per
// model in count and bytes, for the pod in bytes (Config.MaxTotalHeldBytes), and in time by the
// smaller of the client's deadline and Config.HoldTimeout — while the planner is told at once
// (Deps.OnHold); once Triton reports the model ready the held requests go on in arrival order.
// A request that cannot be served within that budget fails at once: NOT_FOUND for a model
// outside the catalog, UNAVAILABLE with gRPC's retry pushback trailer (grpc-retry-pushback-ms,
// gRFC A6) for a quarantined model, one that never fits the pod, a full hold queue or a
// draining pod, RESOURCE_EXHAUSTED with the pushback for a full pod hold budget. Every request
// message is bounded by Config.MaxRequestBytes (RESOURCE_EXHAUSTED, unread). RepositoryModelLoad and
// RepositoryModelUnload (and their HTTP forms) fail PERMISSION_DENIED: the residency controller
// owns what is loaded. Every other RPC passes through unchanged.
//
// Only field 1 (model_name) of a ModelInferRequest is read, with protowire, from the raw bytes;
// messages travel as the reference-counted buffers gRPC received them in (a pass-through
// CodecV2), so the front costs one extra loopback hop and no protobuf decode.
//
// HTTPHandler fronts HTTP/REST (KServe v2 over HTTP) by the same rules, with the model name
// taken from the infer URL's path. See docs/residency.md, "Hold and fail fast".
package front
