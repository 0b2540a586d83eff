//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/inferscale/inferscale/residency/triton"
)

// TestResidency moves demand between two models that do not fit the pod's
// budget together: the sidecar must follow the demand (load the wanted
// model, unload the other), the fake Triton's device memory must never
// exceed the budget on the way, and no request fails: the sidecar's front
// holds requests for a model through its load, and evictions that race
// traffic to both models fail none.
func TestResidency(t *testing.T) {
	const gib = int64(1) << 30
	p := defaultPoolParams()
	p.model = "base"
	p.minReplicas, p.maxReplicas = 1, 1
	p.budgetBytes = 8 * gib
	digest := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	entry := func(name, tier, mem, digestChar string) map[string]any {
		return map[string]any{"name": name, "digest": digest(digestChar), "tier": tier,
			"peakMemoryBytes": map[string]any{"1g.10gb": mem}, "loadTime": "2s"}
	}
	p.catalog = map[string]any{
		"idleTimeout":  "20s",
		"minResidency": "5s",
		"models": []any{
			entry("base", "P0", "1Gi", "a"),
			entry("alpha", "P2", "5Gi", "b"),
			entry("beta", "P2", "5Gi", "c"),
		},
	}
	// The device is larger than the budget, so a breach of the budget is
	// visible in the fake's memory gauge instead of failing as out-of-memory.
	p.fakeModels = []fakeModel{
		{Name: "base", MemoryBytes: 1 * gib, LoadTime: "1s", ServiceTime: "20ms", Concurrency: 4},
		{Name: "alpha", MemoryBytes: 5 * gib, LoadTime: "2s", ServiceTime: "20ms", Concurrency: 4},
		{Name: "beta", MemoryBytes: 5 * gib, LoadTime: "2s", ServiceTime: "20ms", Concurrency: 4},
	}
	p.residencyExtraArgs = []string{
		fmt.Sprintf(`--demand-query=sum(rate(%s{model="$model"}[15s]))`, gatewayRequestsMetric),
	}
	env := newPoolEnv(t, "residency", p)
	env.waitReplicas(t, "one pod ready", 1, 3*time.Minute)
	pr := env.kubelet.onlyPair(t)
	client, err := triton.Dial(pr.grpcAddr, triton.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	resident := func() (map[string]bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		idx, err := client.Index(ctx, true)
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, m := range idx {
			out[m.Name] = true
		}
		return out, nil
	}
	follows := func(want, gone string) func() (bool, string) {
		return func() (bool, string) {
			r, err := resident()
			if err != nil {
				return false, err.Error()
			}
			return r[want] && !r[gone] && r["base"], fmt.Sprintf("resident %v", r)
		}
	}

	start := time.Now()
	env.gw.setRate("alpha", 5)
	eventually(t, "alpha loaded on demand", 2*time.Minute, follows("alpha", "beta"))
	env.gw.setRate("alpha", 0)
	env.gw.setRate("beta", 5)
	eventually(t, "demand moved: beta loaded, alpha unloaded", 3*time.Minute, follows("beta", "alpha"))

	// Evictions racing traffic: both models now receive requests on a budget that holds one
	// of them, beta at 5 req/s and alpha at 0.5 req/s. A held alpha request ages (its wait in
	// load times adds to alpha's worth) until alpha outranks beta and takes beta's memory
	// between beta's 20 ms requests; beta's requests are then held until alpha's minimum
	// residency has passed and beta comes back. So each eviction happens while its model still
	// receives requests, and a request forwarded as the unload begins must be held again, not
	// failed. The resident 5 GiB model must change at least twice (alpha in, beta back).
	env.gw.setRate("alpha", 0.5)
	swaps, was, together := 0, "beta", false
	raceEnd := time.Now().Add(150 * time.Second)
	for swaps < 2 && time.Now().Before(raceEnd) {
		time.Sleep(250 * time.Millisecond) // polling Triton's index while traffic runs
		r, err := resident()
		if err != nil {
			continue
		}
		now := ""
		switch {
		case r["alpha"] && !r["beta"]:
			now = "alpha"
		case r["beta"] && !r["alpha"]:
			now = "beta"
		}
		if now != "" && now != was {
			swaps++
			logf("residency: both models live: %s resident after %s (swap %d)", now, was, swaps)
			was = now
		}
		if r["alpha"] && r["beta"] && !together { // reported once, not at every poll
			together = true
			t.Errorf("alpha and beta resident together (10 GiB) on an 8 GiB budget: %v", r)
		}
	}
	if swaps < 2 {
		t.Errorf("both models live for 150 s: the resident model changed %d times, want ≥ 2 (alpha in, beta back); evictions never raced traffic", swaps)
	}
	if err := env.gw.quiesce(2 * time.Minute); err != nil {
		t.Errorf("after the race: %v", err)
	}

	// The fake's device gauge, scraped every second by Prometheus, over the
	// whole scenario.
	window := time.Since(start).Round(time.Second) + 10*time.Second
	q := fmt.Sprintf(`max(max_over_time(nv_gpu_memory_used_bytes{namespace=%q}[%s]))`, env.ns, model.Duration(window))
	v, err := env.prom.query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 {
		t.Fatalf("%s: %d samples, want 1", q, len(v))
	}
	peak := int64(v[0].Value)
	logf("residency: peak device memory %.2f GiB, budget %.2f GiB", float64(peak)/float64(gib), float64(p.budgetBytes)/float64(gib))
	if peak > p.budgetBytes {
		t.Errorf("device memory peaked at %d bytes, over the budget %d", peak, p.budgetBytes)
	}
	if peak < 6*gib {
		t.Errorf("device memory peaked at %d bytes; base + one 5 GiB model (6 GiB) was expected to be resident", peak)
	}
	// The load generator calls the sidecar's inference front (the chart's Service does): a
	// request for a model that is not loaded yet is held through its load, not failed as
	// Triton alone fails it (92 of 100 failed NOT_FOUND before the front).
	sent, ok, failed, fails := env.gw.snapshot()
	logf("residency: sent=%d ok=%d failed=%d", sent, ok, failed)
	if failed > 0 || ok == 0 {
		t.Errorf("%d of %d requests failed (ok %d), want 0 through the front; first failures:\n%s",
			failed, sent, ok, joinLines(fails[:min(5, len(fails))]))
	}
}
