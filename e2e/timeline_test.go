//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// sample is one observation of the loop, taken every second.
type sample struct {
	at          time.Time
	spec        int32  // Deployment .spec.replicas
	ready       int32  // Deployment .status.readyReplicas
	hpaDesired  int32  // HPA .status.desiredReplicas (-1: no HPA yet)
	scaler      int    // the scaler's answer (GetMetrics), -1 on error
	scalerErr   string // the scaler's error, if any
	running     int    // process pairs the harness runs
	active      string // ScaledObject Active condition
	fallback    string // ScaledObject Fallback condition
	rate        float64
	sent, fails int64
}

func (s sample) key() string {
	return fmt.Sprintf("%d/%d/%d/%d/%d/%s/%s/%.0f/%d/%s", s.spec, s.ready, s.hpaDesired, s.scaler, s.running, s.active, s.fallback, s.rate, s.fails, s.scalerErr)
}

func (s sample) String() string {
	errText := ""
	if s.scalerErr != "" {
		errText = " scalerErr=" + truncate(s.scalerErr, 120)
	}
	return fmt.Sprintf("spec=%d ready=%d hpa=%d scaler=%d pairs=%d active=%s fallback=%s load=%.0f/s sent=%d fails=%d%s",
		s.spec, s.ready, s.hpaDesired, s.scaler, s.running, s.active, s.fallback, s.rate, s.sent, s.fails, errText)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// timeline samples the pool every second and prints a line whenever
// anything changes, so a scenario's log reads as what happened when.
type timeline struct {
	env     *poolEnv
	mu      sync.Mutex
	samples []sample
	stop    context.CancelFunc
	done    chan struct{}
}

func startTimeline(env *poolEnv) *timeline {
	ctx, cancel := context.WithCancel(context.Background())
	tl := &timeline{env: env, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := ""
		for {
			s := tl.observe(ctx)
			tl.mu.Lock()
			tl.samples = append(tl.samples, s)
			tl.mu.Unlock()
			if k := s.key(); k != last {
				logf("timeline: %s", s)
				last = k
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return tl
}

func (tl *timeline) observe(ctx context.Context) sample {
	env := tl.env
	s := sample{at: time.Now(), hpaDesired: -1, scaler: -1}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if d, err := env.c.kube.AppsV1().Deployments(env.ns).Get(cctx, env.deployment, metav1.GetOptions{}); err == nil {
		if d.Spec.Replicas != nil {
			s.spec = *d.Spec.Replicas
		}
		s.ready = d.Status.ReadyReplicas
	}
	if h, err := env.c.kube.AutoscalingV2().HorizontalPodAutoscalers(env.ns).Get(cctx, env.hpaName, metav1.GetOptions{}); err == nil {
		s.hpaDesired = h.Status.DesiredReplicas
	}
	if n, err := env.scaler.desired(cctx, env.ref()); err == nil {
		s.scaler = int(n)
	} else {
		s.scalerErr = err.Error()
	}
	if so, err := env.c.dyn.Resource(gvrScaledObj).Namespace(env.ns).Get(cctx, env.scaledObject, metav1.GetOptions{}); err == nil {
		s.active = conditionStatus(so, "Active")
		s.fallback = conditionStatus(so, "Fallback")
	}
	s.running, _ = env.kubelet.counts()
	s.rate = env.gw.totalRate()
	s.sent, _, s.fails, _ = env.gw.snapshot()
	return s
}

// since returns the samples taken at or after t.
func (tl *timeline) since(t time.Time) []sample {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []sample
	for _, s := range tl.samples {
		if !s.at.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

func (tl *timeline) close() {
	tl.stop()
	<-tl.done
}

// conditionStatus returns status.conditions[type=t].status, or "-".
func conditionStatus(u *unstructured.Unstructured, t string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == t {
			if s, ok := m["status"].(string); ok {
				return s
			}
		}
	}
	return "-"
}

// eventually polls cond every second until it holds or the deadline
// passes, logging what it waited for; it fails the test on timeout.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	last := ""
	for {
		ok, detail := cond()
		last = detail
		if ok {
			logf("%s: after %.1fs (%s)", what, time.Since(start).Seconds(), detail)
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		time.Sleep(time.Second) // polling an external system with a deadline
	}
}

// refOf builds the ScaledObjectRef KEDA sends for a trigger.
func refOf(name, ns string, meta map[string]string) *externalscaler.ScaledObjectRef {
	return &externalscaler.ScaledObjectRef{Name: name, Namespace: ns, ScalerMetadata: meta}
}

// describe joins key=value pairs for log lines.
func describe(kv ...any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%v=%v", kv[i], kv[i+1])
	}
	return b.String()
}
