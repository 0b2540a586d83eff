// Package inference holds the Go code generated from grpc_service.proto, a
// wire-compatible subset of NVIDIA Triton Inference Server's gRPC protocol
// (package inference, service GRPCInferenceService).
//
// The generated files are committed. Regenerate with `make generate` (or
// `go generate ./proto/...`): it needs protoc on PATH (Debian's
// protobuf-compiler, 3.21) and runs the protoc-gen-go and protoc-gen-go-grpc
// versions pinned as tool dependencies in go.mod.
package inference

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-go-grpc=$(go tool -n protoc-gen-go-grpc) --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_service.proto"
