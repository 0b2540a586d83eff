package residency

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestWatchCatalogMissingWarnsOncePerEpisode (issue 12): a catalog file that goes missing warns
// once, not every loop; its return is logged once; a second disappearance warns again.
func TestWatchCatalogMissingWarnsOncePerEpisode(t *testing.T) {
	path := t.TempDir() + "/catalog.yaml"
	body := []byte("models: [{name: pin, digest: " + dgA + ", tier: P0, peakMemoryBytes: {" + prof + ": 1Gi}}]")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	cat, loaded, err := ReadCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 * gi,
		Models: []tritontest.Model{fakeModel("pin", 1)}}, cat, plan.Budget{Profile: prof, TotalBytes: 10 * gi})
	var logs bytes.Buffer
	h.ctl.deps.Log = NewLogger(&logs, slog.LevelInfo)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.ctl.WatchCatalog(watchCtx, path, loaded) }()
	if err := h.clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ticks := func(n int) {
		t.Helper()
		for range n {
			h.clock.Advance(DefaultConfig().LoopInterval)
			if err := h.clock.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(msg string) int { return strings.Count(logs.String(), `"msg":"`+msg+`"`) }
	const missing, back = "catalog not readable; keeping the current one until it is", "catalog readable again"

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ticks(10)
	if got := count(missing); got != 1 {
		t.Fatalf("%d warnings in 10 loops with the file missing, want 1:\n%s", got, logs.String())
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	ticks(3)
	if got := count(back); got != 1 || !strings.Contains(logs.String(), `"unreadable_for":"50s"`) {
		t.Fatalf("%d recovery logs (want 1, unreadable for 50s):\n%s", got, logs.String())
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	ticks(3)
	if got := count(missing); got != 2 {
		t.Fatalf("%d warnings after a second episode, want 2", got)
	}
	if m, ok := h.ctl.catalog().Model("pin"); !ok || m.Digest != dgA {
		t.Errorf("the current catalog was not kept: %+v", m)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
