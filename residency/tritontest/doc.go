// Package tritontest is a fake NVIDIA Triton Inference Server for tests,
// the e2e suite and demos, like net/http/httptest for HTTP.
//
// It serves Triton's gRPC protocol (the subset in proto/inference) and
// Triton's Prometheus metrics, and keeps the behaviour of Triton that the
// residency controller must cope with: explicit versus default model control,
// a device of limited memory where a load that does not fit fails out of
// memory, loads that take time, an unload that returns at once while the
// model holds its memory until its in-flight requests finish, a reload during
// which old and new copy both hold memory, per-model queues with a number of
// concurrent executions, statistics, and injectable faults (failing, hanging
// and leaking loads, slow responses, restarts). Each model's service time follows a documented
// distribution (Distribution: deterministic, exponential, or lognormal with a coefficient of
// variation), drawn from a generator seeded by Config.Seed, so that a load test's answer can
// be checked against queueing theory (M/D/c, M/M/c, M/G/c).
//
// All time comes from Config.Clock: the real clock for processes
// (cmd/tritonfake), a FakeClock in tests, which the test advances with
// Advance after FakeClock.BlockUntil or Server.Await tells it the fake is
// waiting. The package does not use testing/synctest.
//
// See docs/triton.md for where the fake differs from a real Triton.
package tritontest
