// Package capacity measures what the rest of inferscale assumes: the highest arrival rate a
// model sustains within its SLO on one serving configuration (μ, the "SLO capacity"), its
// memory (steady, peak under load, peak while a reload holds two copies), its load time, and
// writes them as an admission record (Record) that the residency catalog, the scaler's
// metadata and the ledger read.
//
// The parts, each usable on its own:
//
//   - Generator offers an open-loop load (Poisson arrivals: a request is sent at its scheduled
//     time whether or not earlier ones have answered) to a Target — Triton's gRPC ModelInfer
//     (TritonTarget) or an OpenAI-compatible /v1/completions endpoint with streaming, for time
//     to first token (OpenAITarget) — and measures it in windows. Latency is counted from the
//     scheduled send time, so a late client cannot hide queueing (coordinated omission). When
//     the generator itself cannot keep the schedule (sends late by more than MaxLag, or its
//     in-flight cap is reached) the level is marked client-bound: no capacity is claimed.
//   - A level is stable when its last three windows agree within 10 % in throughput and in
//     latency at the SLO quantile: perf_analyzer's rule ("stable if the ratio of max / min from
//     the recent 3 measurements is within (stability percentage) in terms of both infer per
//     second and latency", default 10 %; Triton client docs, perf_analyzer cli.md), or it ends
//     after MaxWindows unstable.
//   - Search steps the rate up geometrically, then bisects between the highest passing and
//     the lowest failing level. A level passes when it is stable, keeps up (completions within
//     the stability tolerance of arrivals), meets the latency quantile (requests still waiting
//     past the limit count as late) and stays under the error-rate ceiling. μ is the highest
//     passing level's served rate (successes per second, perf_analyzer's throughput), capped at
//     its offered rate (MuFromLevel): never above what the replica completed there.
//   - Probe reads memory and load time through Triton's own interfaces in EXPLICIT mode
//     (RepositoryModelLoad/Unload, ModelStatistics memory_usage, nv_gpu_memory_used_bytes) and
//     NVML where the process sees the device (residency/gpu).
//
// All waiting goes through a Clock, so a test can run the generator against tritontest's
// server on a simulated clock and compare μ with queueing theory.
package capacity
