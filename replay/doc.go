// Package replay runs inferscale's decision code offline against recorded
// request traces and compares it with the autoscalers teams run today.
//
// It has four parts:
//
//   - trace readers (Azure LLM 2023, a generic CSV, Alibaba GenTD26, the Azure
//     Functions 2019 per-minute matrix, ServeGen per-client windows), each
//     streaming, validated, and reporting bad input as a *ParseError that
//     names the line and the column;
//   - a pool simulator with a simulated clock, in two modes: per request
//     (event-driven, FIFO queue, replicas with concurrent slots, cold starts,
//     drain-before-remove) and binned per second (a fluid model for rate
//     traces with billions of requests);
//   - autoscaling policies driven through Kubernetes' own control semantics
//     (HPA AverageValue rounding, tolerance and behaviour; KEDA activation and
//     cooldown): inferscale's decision.Recommend, an HPA on GPU utilisation,
//     KEDA's Prometheus scaler on queue depth, Knative's stable/panic
//     autoscaler and static peak provisioning, measured against a proven
//     lower bound on GPU-time and an offline optimum schedule (optimum.go);
//   - a residency replay that drives plan.Plan (package residency/plan)
//     against LRU, LFU and Belady's furthest-next-use under the same memory
//     budget.
//
// Everything is deterministic for a given seed.
package replay
