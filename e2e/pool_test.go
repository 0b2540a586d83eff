//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// poolParams are the numbers a scenario's expectations are computed from.
// The fake model serves one request at a time for serviceTime, so one pod
// sustains 1/serviceTime requests per second; replicaThroughput (μ) says so.
type poolParams struct {
	model             string
	serviceTime       time.Duration
	replicaThroughput float64 // μ, req/s per pod
	targetUtilization float64 // ρ
	sloQuantile       float64 // q: 0.5 pins the steady count to the cap (see steady)
	drainSeconds      float64 // D
	maxReplicas       int
	scaleDownWindow   time.Duration
	scaleDownPeriod   time.Duration
	scaleDownFraction float64
	staleAfter        time.Duration
	pollingInterval   int // KEDA, seconds
	cooldownPeriod    int // KEDA, seconds
	fallbackReplicas  int
	fallbackThreshold int
	coldStart         time.Duration // harness kubelet: pod bound -> processes start
	modelLoadTime     time.Duration // the fake's load of the P0 model
	drainTimeout      time.Duration
	propagationDelay  time.Duration

	// Residency: the catalog's models (nil: one P0 model), the fake's
	// repository (nil: the one model), the budget, and sidecar extra flags.
	minReplicas        int
	catalog            map[string]any
	fakeModels         []fakeModel
	budgetBytes        int64
	residencyExtraArgs []string

	// noScaledObject leaves the chart's ScaledObject out: the test scales
	// the Deployment itself (TestHarnessKubelet).
	noScaledObject bool
}

func defaultPoolParams() poolParams {
	return poolParams{
		model:             "llm",
		serviceTime:       100 * time.Millisecond,
		replicaThroughput: 10,
		targetUtilization: 0.8,
		sloQuantile:       0.5,
		drainSeconds:      30,
		maxReplicas:       6,
		scaleDownWindow:   30 * time.Second,
		scaleDownPeriod:   10 * time.Second,
		scaleDownFraction: 0.5,
		staleAfter:        20 * time.Second,
		pollingInterval:   5,
		cooldownPeriod:    15,
		fallbackReplicas:  5,
		fallbackThreshold: 3,
		coldStart:         3 * time.Second,
		modelLoadTime:     2 * time.Second,
		drainTimeout:      30 * time.Second,
		propagationDelay:  2 * time.Second,
	}
}

// steady is the replica count the scaler asks for at rps requests per
// second with no backlog: the pooled rule's answer, which with the suite's
// sloQuantile (0.5, so the forecast adds no prediction bound: z = Φ⁻¹(0.5) = 0)
// is the utilisation cap ⌈λS/ρ⌉ = ⌈λ/(μρ)⌉ (S = 1/μ, k = 1). At 20 req/s the
// cap gives 3 replicas for a load of a = 2 Erlangs, and Erlang C(3, 2) = 0.44
// already meets P(wait > T) ≤ 1 − q = 0.5; at 4 req/s, 1 replica with
// C(1, 0.4) = 0.4. The slo term therefore never exceeds the cap here, and
// the suite's expectations stay exact on a real, noisy control plane.
func (p poolParams) steady(rps float64) int {
	return ceilDiv(rps, p.replicaThroughput*p.targetUtilization)
}

// chartValues are the Helm values of the suite's pool: the chart's own
// templates produce the Deployment and the ScaledObject; only the numbers
// are shortened so the suite runs in minutes.
func (p poolParams) chartValues(promURL string) map[string]any {
	sel := fmt.Sprintf(`model=%q`, p.model)
	catalog := p.catalog
	if catalog == nil {
		catalog = map[string]any{
			"models": []any{map[string]any{
				"name": p.model, "digest": "sha256:" + strings.Repeat("ab", 32), "tier": "P0",
				"peakMemoryBytes": map[string]any{"1g.10gb": "2Gi"}, "loadTime": p.modelLoadTime.String(),
			}},
		}
	}
	budget := p.budgetBytes
	if budget == 0 {
		budget = 8 << 30
	}
	return map[string]any{
		"prometheus": map[string]any{"address": promURL},
		"scaler":     map[string]any{"config": map[string]any{"refreshInterval": "1s"}},
		"residency": map[string]any{"config": map[string]any{
			"drainTimeout":      p.drainTimeout.String(),
			"propagationDelay":  p.propagationDelay.String(),
			"drainPollInterval": "200ms",
			"loopInterval":      "1s",
			"reserveBytes":      0,
		}, "extraArgs": toAny(p.residencyExtraArgs)},
		"pools": []any{map[string]any{
			"name":            "pool",
			"engine":          "triton",
			"model":           p.model,
			"image":           map[string]any{"repository": "nvcr.io/nvidia/tritonserver", "tag": "25.01-py3"},
			"modelRepository": "/models",
			"migProfile":      "1g.10gb",
			"residency": map[string]any{
				"budgetBytes": budget,
				"catalog":     catalog,
			},
			"scaling": map[string]any{
				"replicaThroughput":    p.replicaThroughput,
				"targetUtilization":    p.targetUtilization,
				"sloQuantile":          p.sloQuantile,
				"drainSeconds":         p.drainSeconds,
				"minReplicas":          p.minReplicas,
				"maxReplicas":          p.maxReplicas,
				"scaleUpWindow":        "0s",
				"scaleDownWindow":      p.scaleDownWindow.String(),
				"scaleDownPeriod":      p.scaleDownPeriod.String(),
				"scaleDownMaxFraction": p.scaleDownFraction,
				"staleAfter":           p.staleAfter.String(),
				// The gateway queue exists while the pool is at zero; Triton's
				// pending count adds the work queued inside the pods.
				"queueQuery": fmt.Sprintf(`sum(%s{%s}) + (sum(nv_inference_pending_request_count{%s}) or vector(0))`, gatewayQueueMetric, sel, sel),
				"rateQuery":  fmt.Sprintf(`sum(rate(%s{%s}[15s]))`, gatewayRequestsMetric, sel),
				// No DCGM here: engine activity is Triton's own busy fraction
				// (compute time per second; the fake runs one request at a
				// time), averaged over the pods.
				"activityQuery": fmt.Sprintf(`avg(rate(nv_inference_compute_infer_duration_us{%s}[15s])) / 1e6`, sel),
			},
			"keda": map[string]any{
				"pollingInterval": p.pollingInterval,
				"cooldownPeriod":  p.cooldownPeriod,
				"fallback": map[string]any{
					"failureThreshold": p.fallbackThreshold,
					"replicas":         p.fallbackReplicas,
				},
			},
		}},
	}
}

// poolEnv is one pool under test: the chart's objects applied, Prometheus,
// the scaler, the harness kubelet and the gateway.
type poolEnv struct {
	t       *testing.T
	c       *cluster
	ns      string
	p       poolParams
	prom    *promServer
	scaler  *scalerProc
	kubelet *kubelet
	gw      *gateway
	tl      *timeline

	deployment, hpaName, scaledObject string
	meta                              map[string]string
}

func (e *poolEnv) ref() *externalscaler.ScaledObjectRef {
	return refOf(e.scaledObject, e.ns, e.meta)
}

// newPoolEnv brings a pool up in namespace ns and registers its teardown.
// On failure the component logs are printed.
func newPoolEnv(t *testing.T, ns string, p poolParams) *poolEnv {
	t.Helper()
	requireCommands(t, "scaler", "tritonfake", "residency")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := suite.cluster
	e := &poolEnv{t: t, c: c, ns: ns, p: p}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(60)
		}
	})
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	dir := filepath.Join(suite.tmp, ns)
	if e.prom, err = newPromServer(suite.bins.prometheus, suite.logDir, filepath.Join(dir, "prometheus")); err != nil {
		t.Fatal(err)
	}
	if err := e.prom.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.prom.stop)
	if e.scaler, err = newScalerProc(suite.bins.scaler, suite.logDir, e.prom.URL(), c.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := e.scaler.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.scaler.close)

	objs, err := renderChart("e2e", ns, p.chartValues(e.prom.URL()))
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.PodTemplateSpec
	for _, u := range objs {
		switch {
		case u.GetKind() == "ScaledObject":
			e.scaledObject = u.GetName()
			e.deployment, _, _ = unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
			e.hpaName, _, _ = unstructured.NestedString(u.Object, "spec", "advanced", "horizontalPodAutoscalerConfig", "name")
			if e.hpaName == "" {
				e.hpaName = "keda-hpa-" + u.GetName()
			}
			trig, _, _ := unstructured.NestedSlice(u.Object, "spec", "triggers")
			if len(trig) != 1 {
				t.Fatalf("chart's ScaledObject has %d triggers, want 1", len(trig))
			}
			tm := trig[0].(map[string]any)
			md, _ := tm["metadata"].(map[string]any)
			md["scalerAddress"] = e.scaler.addr()
			e.meta = map[string]string{}
			for k, v := range md {
				e.meta[k] = fmt.Sprint(v)
			}
			if err := unstructured.SetNestedSlice(u.Object, trig, "spec", "triggers"); err != nil {
				t.Fatal(err)
			}
		case u.GetKind() == "Deployment" && u.GetLabels()["app.kubernetes.io/component"] == "pool":
			pod = &corev1.PodTemplateSpec{}
			tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
			if err := fromUnstructured(tmpl, pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	if e.scaledObject == "" || pod == nil {
		t.Fatalf("chart rendered no pool ScaledObject/Deployment (got %d objects)", len(objs))
	}
	logf("pool %s: ScaledObject %s -> Deployment %s, HPA %s; trigger metadata %v", ns, e.scaledObject, e.deployment, e.hpaName, e.meta)

	launcher := &pairLauncherImpl{ns: ns, dir: dir, p: p, c: c, promURL: e.prom.URL(), models: p.fakeModels}
	selector := labelSelector(pod.Labels)
	e.kubelet = startKubelet(c, ns, selector, launcher, e.prom, p.coldStart)
	t.Cleanup(e.kubelet.stop)
	if e.gw, err = startGateway(e.kubelet, ns, e.prom); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.gw.stop)
	e.gw.setRate(p.model, 0)

	if p.noScaledObject {
		kept := objs[:0]
		for _, u := range objs {
			if u.GetKind() != "ScaledObject" {
				kept = append(kept, u)
			}
		}
		objs = kept
	}
	applied, err := applyPool(ctx, c, objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	logf("pool %s: applied %s", ns, strings.Join(applied, ", "))
	e.tl = startTimeline(e)
	t.Cleanup(e.tl.close)
	// Runs first: KEDA stops polling (and scaling) this pool before the
	// scaler, the pairs and Prometheus go away.
	t.Cleanup(func() {
		if p.noScaledObject {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.dyn.Resource(gvrScaledObj).Namespace(ns).Delete(ctx, e.scaledObject, metav1.DeleteOptions{}); err != nil {
			logf("delete ScaledObject %s: %v", e.scaledObject, err)
		}
	})
	return e
}

// state is the Deployment's spec and ready replica counts and the HPA's.
func (e *poolEnv) state(ctx context.Context) (spec, ready int32, err error) {
	d, err := e.c.kube.AppsV1().Deployments(e.ns).Get(ctx, e.deployment, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	if d.Spec.Replicas != nil {
		spec = *d.Spec.Replicas
	}
	return spec, d.Status.ReadyReplicas, nil
}

// waitReplicas waits until .spec.replicas and ready replicas both equal n
// and the scaler answers n.
func (e *poolEnv) waitReplicas(t *testing.T, what string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	return eventually(t, what, timeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		spec, ready, err := e.state(ctx)
		if err != nil {
			return false, err.Error()
		}
		want, serr := e.scaler.desired(ctx, e.ref())
		d := describe("spec", spec, "ready", ready, "scaler", want, "want", n)
		if serr != nil {
			d += " scalerErr=" + serr.Error()
		}
		return int(spec) == n && int(ready) == n && serr == nil && int(want) == n, d
	})
}

// toAny converts a string slice for Helm values (nil stays an empty list).
func toAny(ss []string) []any {
	out := []any{}
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}
