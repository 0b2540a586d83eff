//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHarnessKubelet checks the harness's kubelet without KEDA: the chart's
// pool Deployment scaled by hand gets a process pair per pod, the pods turn
// Ready when their sidecars do, the Deployment controller counts them, and
// a scale-down drains the removed pod while the gateway loses nothing.
func TestHarnessKubelet(t *testing.T) {
	p := defaultPoolParams()
	p.noScaledObject = true
	env := newPoolEnv(t, "harness", p)
	scale := func(n int32) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := env.c.kube.AppsV1().Deployments(env.ns).UpdateScale(ctx, env.deployment, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: env.deployment, Namespace: env.ns},
			Spec:       autoscalingv1.ScaleSpec{Replicas: n},
		}, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	ready := func(n int32) func() (bool, string) {
		return func() (bool, string) {
			spec, r, err := env.state(context.Background())
			running, _ := env.kubelet.counts()
			return err == nil && spec == n && r == n && running == int(n), describe("spec", spec, "ready", r, "pairs", running)
		}
	}
	scale(2)
	eventually(t, "two pods ready", 2*time.Minute, ready(2))
	env.gw.setRate(p.model, 10)
	eventually(t, "requests served", time.Minute, func() (bool, string) {
		sent, ok, failed, _ := env.gw.snapshot()
		return ok >= 50, describe("sent", sent, "ok", ok, "failed", failed)
	})
	scale(1)
	eventually(t, "scaled to one, removed pod drained", 2*time.Minute, ready(1))
	if err := env.gw.quiesce(time.Minute); err != nil {
		t.Fatal(err)
	}
	requireNoFailures(t, env)
	if env.kubelet.drainedCount() != 1 {
		t.Errorf("drained %d pods, want 1", env.kubelet.drainedCount())
	}
}
