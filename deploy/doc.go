// Package deploy holds inferscale's Helm chart (helm/inferscale), the Grafana dashboard
// (dashboards) and example values (examples). It has no Go API: its tests render the chart with
// the Helm SDK and check what Kubernetes, KEDA, the scaler and the residency sidecar will be
// given — typed strict decoding of every object, golden files (go test ./deploy -update
// rewrites them), the invariants the chart exists for (no replicas on scaled Deployments, a
// grace period longer than the drain, least-privilege RBAC), the chart's defaults against the
// Go defaults, schema rejections and helm lint.
package deploy
