// Package e2e is the end-to-end suite: a real etcd, kube-apiserver,
// kube-controller-manager (deployment, replicaset and HPA controllers),
// kube-scheduler, the real KEDA operator and metrics adapter, a real
// Prometheus, and inferscale's own scaler, Triton fake and residency sidecar,
// all on loopback. The harness plays the kubelet for the inference pool.
//
// Everything lives in files behind the `e2e` build tag; run it with
// `make e2e` (go test -tags e2e ./e2e/...). The control-plane binaries are
// built once from the wrapper modules in e2e/tools and cached; see
// docs/e2e.md.
package e2e
