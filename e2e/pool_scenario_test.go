//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/inferscale/inferscale/scaler"
)

// TestPool walks one pool through its life on the real control plane. The
// phases share the pool and run in order; each polls with a deadline and
// the timeline lines in the log show what happened when.
func TestPool(t *testing.T) {
	p := defaultPoolParams()
	env := newPoolEnv(t, "pool", p)
	high := 20.0 // req/s: ⌈20 / (10 · 0.8)⌉ = 3 replicas
	low := 4.0   // req/s: ⌈4 / 8⌉ = 1 replica
	nHigh, nLow := p.steady(high), p.steady(low)

	phases := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"idle pool scales to zero", func(t *testing.T) {
			// The chart leaves .spec.replicas unset (1); with no demand KEDA
			// deactivates the pool after the cooldown.
			env.waitReplicas(t, "pool at 0", 0, 2*time.Minute)
		}},
		{"activation and scale-up follow the scaler", func(t *testing.T) {
			start := time.Now()
			env.gw.setRate(p.model, high)
			eventually(t, "activation 0 -> 1 (KEDA)", time.Minute, func() (bool, string) {
				spec, ready, err := env.state(context.Background())
				return err == nil && spec >= 1, describe("spec", spec, "ready", ready)
			})
			// The gateway backlog of the cold start may push the scaler
			// above the steady count for a while; wait for the steady answer.
			env.waitReplicas(t, "HPA lands on the scaler's number", nHigh, 4*time.Minute)
			hpa, err := env.c.kube.AutoscalingV2().HorizontalPodAutoscalers(env.ns).Get(context.Background(), env.hpaName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("KEDA's HPA %s: %v", env.hpaName, err)
			}
			if int(hpa.Status.DesiredReplicas) != nHigh {
				t.Errorf("HPA %s desiredReplicas = %d, want the scaler's %d", env.hpaName, hpa.Status.DesiredReplicas, nHigh)
			}
			logf("scale-up: 0 -> %d in %.1fs", nHigh, time.Since(start).Seconds())
			requireNoFailures(t, env)
		}},
		{"load falls: hold through the down-window, then bounded steps", func(t *testing.T) {
			from := time.Now()
			env.gw.setRate(p.model, low)
			env.waitReplicas(t, "scaled down to the low-load count", nLow, 3*time.Minute)
			checkScaleDown(t, env.tl.since(from), nHigh, p)
			requireNoFailures(t, env)
		}},
		{"no demand: cooldown to zero", func(t *testing.T) {
			env.gw.setRate(p.model, 0)
			env.waitReplicas(t, "pool back at 0", 0, 3*time.Minute)
			requireNoFailures(t, env)
		}},
		{"prometheus outage: hold, fallback, recover", func(t *testing.T) {
			env.gw.setRate(p.model, high)
			env.waitReplicas(t, "steady before the outage", nHigh, 4*time.Minute)
			stopped := time.Now()
			env.prom.stop()
			logf("prometheus stopped")
			// Within staleAfter the scaler answers from its last good data.
			holdUntil := stopped.Add(p.staleAfter - 2*time.Second)
			for time.Now().Before(holdUntil) {
				spec, _, err := env.state(context.Background())
				if err == nil && int(spec) != nHigh {
					t.Fatalf("replicas changed to %d %.1fs into the outage, before staleAfter %v", spec, time.Since(stopped).Seconds(), p.staleAfter)
				}
				time.Sleep(time.Second)
			}
			// Past staleAfter every signal is out: the RPC fails, and after
			// failureThreshold polls KEDA applies fallback (currentReplicasIfHigher).
			want := max(nHigh, p.fallbackReplicas)
			eventually(t, "KEDA fallback applied", 2*time.Minute, func() (bool, string) {
				spec, _, err := env.state(context.Background())
				_, serr := env.scaler.desired(context.Background(), env.ref())
				return err == nil && serr != nil && int(spec) == want, describe("spec", spec, "want", want, "scalerErr", serr)
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := env.prom.start(ctx); err != nil {
				t.Fatal(err)
			}
			logf("prometheus back")
			env.waitReplicas(t, "normal scaling after the outage", nHigh, 4*time.Minute)
			// The scaler wrote the outage and the recovery as events.k8s.io/v1 Events on the
			// ScaledObject (client-go's dynamic client), accepted by the real API server.
			eventually(t, "Unavailable and Recovered events on the ScaledObject", time.Minute, func() (bool, string) {
				l, err := env.c.kube.EventsV1().Events(env.ns).List(context.Background(), metav1.ListOptions{})
				if err != nil {
					return false, err.Error()
				}
				seen := map[string]bool{}
				for _, ev := range l.Items {
					if ev.Regarding.Kind == "ScaledObject" && ev.Regarding.Name == env.scaledObject && ev.ReportingController == "inferscale.io/scaler" {
						seen[ev.Reason] = true
					}
				}
				return seen[scaler.EventUnavailable] && seen[scaler.EventRecovered], fmt.Sprint("reasons seen: ", seen)
			})
			requireNoFailures(t, env)
		}},
		{"scaler restart causes no scale-down", func(t *testing.T) {
			// Demand falls, and the scaler is restarted once its rate query
			// (15 s window) sees only the low rate but before its down-window
			// (30 s) lets the old process scale down: a restarted process that
			// forgot its history would answer the low count at once; one that
			// seeds its history with the current count holds a full
			// down-window from the restart.
			env.gw.setRate(p.model, high)
			// The down-window must fill with steady answers (after the
			// outage the first rate windows span the gap).
			waitSteady(t, env, nHigh, p.scaleDownWindow, 5*time.Minute)
			env.gw.setRate(p.model, low)
			time.Sleep(18 * time.Second)
			if spec, _, err := env.state(context.Background()); err != nil || int(spec) != nHigh {
				t.Fatalf("precondition: %d replicas 18 s after demand fell (err %v), want %d still held by the down-window", spec, err, nHigh)
			}
			env.scaler.stop()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := env.scaler.start(ctx); err != nil {
				t.Fatal(err)
			}
			restarted := time.Now()
			logf("scaler restarted")
			for time.Since(restarted) < p.scaleDownWindow-5*time.Second {
				spec, _, err := env.state(context.Background())
				if err == nil && int(spec) < nHigh {
					t.Fatalf("replicas fell to %d %.1fs after the scaler restart, inside the down-window %v", spec, time.Since(restarted).Seconds(), p.scaleDownWindow)
				}
				time.Sleep(time.Second)
			}
			env.waitReplicas(t, "down-window over: scaled down", nLow, 3*time.Minute)
			requireNoFailures(t, env)
		}},
		{"drain with requests in flight loses nothing", func(t *testing.T) {
			env.gw.setRate(p.model, high)
			env.waitReplicas(t, "steady before the drain", nHigh, 4*time.Minute)
			// Push the pods over capacity so work queues inside them.
			env.gw.setRate(p.model, 2*high)
			victim := eventuallyInFlight(t, env, 3)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := env.c.kube.CoreV1().Pods(env.ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			logf("deleted pod %s with requests in flight", victim)
			eventually(t, "victim drained and gone", 2*time.Minute, func() (bool, string) {
				_, err := env.c.kube.CoreV1().Pods(env.ns).Get(context.Background(), victim, metav1.GetOptions{})
				return err != nil, describe("pod", victim, "err", err)
			})
			env.gw.setRate(p.model, high)
			d, ok := env.kubelet.drainOf(victim)
			if !ok {
				t.Fatalf("pod %s was not drained through its sidecar", victim)
			}
			if !d.notReady {
				t.Errorf("pod %s: sidecar never reported not-ready during its drain", victim)
			}
			logf("drain: %s drained in %.1fs, not-ready during drain: %v", victim, d.took.Seconds(), d.notReady)
			requireNoFailures(t, env)
		}},
	}
	for _, ph := range phases {
		if !t.Run(ph.name, ph.fn) {
			return // later phases assume the earlier ones' state
		}
	}
}

// requireNoFailures fails when the gateway saw any failed request.
func requireNoFailures(t *testing.T, env *poolEnv) {
	t.Helper()
	sent, ok, failed, fails := env.gw.snapshot()
	logf("gateway: sent=%d ok=%d failed=%d", sent, ok, failed)
	if failed > 0 {
		t.Errorf("%d of %d requests failed; first failures:\n%s", failed, sent, joinLines(fails))
	}
}

// checkScaleDown asserts the scale-down shape in the samples since demand
// fell: .spec.replicas stays at from for the scaler's down-window (less the
// 15 s the rate query needs to see the fall), and every later step down is
// at most max(1, ⌊fraction · from⌋), steps at least scaleDownPeriod apart.
func checkScaleDown(t *testing.T, samples []sample, from int, p poolParams) {
	t.Helper()
	if len(samples) == 0 {
		t.Fatal("no timeline samples")
	}
	t0 := samples[0].at
	prev := int32(from)
	var lastStep time.Time
	for _, s := range samples {
		if s.spec >= prev {
			prev = max(prev, s.spec)
			continue
		}
		el := s.at.Sub(t0)
		if el < p.scaleDownWindow {
			t.Errorf("replicas fell %d -> %d %.1fs after demand fell, inside the down-window %v", prev, s.spec, el.Seconds(), p.scaleDownWindow)
		}
		bound := max(1, int32(float64(prev)*p.scaleDownFraction))
		if prev-s.spec > bound {
			t.Errorf("step down %d -> %d exceeds max(1, ⌊%.2f · %d⌋) = %d", prev, s.spec, p.scaleDownFraction, prev, bound)
		}
		// The HPA sync (5 s) and the 1 s sampling blur the step spacing.
		if !lastStep.IsZero() && s.at.Sub(lastStep) < p.scaleDownPeriod-6*time.Second {
			t.Errorf("steps down %.1fs apart, want about scaleDownPeriod %v", s.at.Sub(lastStep).Seconds(), p.scaleDownPeriod)
		}
		logf("scale-down step %d -> %d at +%.1fs", prev, s.spec, el.Seconds())
		lastStep, prev = s.at, s.spec
	}
}

// eventuallyInFlight waits until some ready pod has at least n gateway
// requests in flight, and returns its name.
func eventuallyInFlight(t *testing.T, env *poolEnv, n int) string {
	t.Helper()
	var victim string
	eventually(t, "a pod with requests in flight", time.Minute, func() (bool, string) {
		pod, k := env.gw.busiest()
		victim = pod
		return k >= n, describe("pod", pod, "inflight", k)
	})
	return victim
}

// waitSteady waits until .spec.replicas, the ready replicas and the
// scaler's answer have all equalled n for d without a break.
func waitSteady(t *testing.T, env *poolEnv, n int, d, timeout time.Duration) {
	t.Helper()
	var since time.Time
	eventually(t, fmt.Sprintf("steady at %d for %v", n, d), timeout, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		spec, ready, err := env.state(ctx)
		want, serr := env.scaler.desired(ctx, env.ref())
		if err != nil || serr != nil || int(spec) != n || int(ready) != n || int(want) != n {
			since = time.Time{}
			return false, describe("spec", spec, "ready", ready, "scaler", want, "want", n)
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) >= d, describe("steady for", time.Since(since).Round(time.Second))
	})
}
