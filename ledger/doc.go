// Package ledger is the capacity ledger and the release audit: from the
// GPU node inventory, each service's measured safe throughput per replica
// and its peak demand, it proves per service that capacity, N+1 per
// failure domain, P0 spread and rolling-update headroom hold on valid MIG
// layouts (NVIDIA's MIG User Guide tables, mig.go), and finds the nodes
// that can stop billing with a re-sliced layout of the rest.
//
// Check, Audit and AuditExact are pure functions over a Spec: no I/O, no
// clock, standard library only. ledger/specfile reads a spec file,
// ledger/kube reads Nodes and autoscalers from a cluster, cmd/ledger
// prints the result. docs/ledger.md explains every check and its source.
package ledger
