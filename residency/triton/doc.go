// Package triton is a small typed client for the parts of NVIDIA Triton
// Inference Server's gRPC protocol the residency controller uses: the model
// repository extension (index, load, unload), readiness and statistics.
//
// Every call carries a deadline: the caller's, or Config.CallTimeout
// (Config.LoadTimeout for Load, which returns only when the load has finished
// or failed) when the context has none. Errors are *StatusError values that
// keep Triton's own message (the reason a load failed, the model a request
// named) and match the sentinel errors of this package with errors.Is.
//
// Unloading a model Triton does not know counts as done, as the kserve
// modelmesh Triton adapter treats it. RepositoryModelUnload returns before
// the memory is free (the model stays UNLOADING until its in-flight requests
// finish), so callers that need the memory back use WaitState.
package triton
