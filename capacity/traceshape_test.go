package capacity

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// stepClock is a Clock whose SleepUntil moves it to the time asked for at once, counting the
// sleeps and calling onSleep after each.
type stepClock struct {
	now     time.Time
	sleeps  int
	onSleep func()
}

func (c *stepClock) Now() time.Time { return c.now }

func (c *stepClock) SleepUntil(ctx context.Context, t time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.After(c.now) {
		c.now = t
	}
	c.sleeps++
	if c.onSleep != nil {
		c.onSleep()
	}
	return nil
}

func newTestGenerator(t *testing.T, clock Clock, seed uint64) *Generator {
	t.Helper()
	cfg := DefaultMeasureConfig()
	cfg.RequestTimeout = time.Second
	g, err := NewGenerator(&scripted{}, clock, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTraceShapeBounds: a trace shape needs two arrivals or more, in order, not all at one
// time; each refusal is ErrInvalidConfig naming what is wrong.
func TestTraceShapeBounds(t *testing.T) {
	for _, c := range []struct {
		name     string
		arrivals []time.Duration
		want     string // "" accepted
	}{
		{"none", nil, "at least 2 arrivals, got 0"},
		{"one", []time.Duration{time.Second}, "at least 2 arrivals, got 1"},
		{"two, distinct", []time.Duration{0, time.Second}, ""},
		{"out of order", []time.Duration{0, 2 * time.Second, time.Second}, "arrival 2 (1s) is before arrival 1 (2s)"},
		{"all at one time", []time.Duration{time.Second, time.Second, time.Second}, "every trace arrival is at the same time"},
	} {
		err := newTestGenerator(t, &stepClock{}, 1).UseTraceShape(c.arrivals)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrInvalidConfig) || err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want ErrInvalidConfig saying %q", c.name, err, c.want)
		}
	}
}

// TestTraceShapeGaps: arrivals at 0, 1, 1 and 4 s have gaps 1, 0 and 3 s, mean 4/3 s; scaled
// to mean 1 and divided by a rate of 2 req/s they are 0.375, 0 and 1.125 s, taken in order
// from a seeded start and wrapping around. Over seeds 1–30 every start occurs.
func TestTraceShapeGaps(t *testing.T) {
	base := []time.Duration{375 * time.Millisecond, 0, 1125 * time.Millisecond}
	starts := map[int]bool{}
	for seed := uint64(1); seed <= 30; seed++ {
		g := newTestGenerator(t, &stepClock{}, seed)
		if err := g.UseTraceShape([]time.Duration{0, time.Second, time.Second, 4 * time.Second}); err != nil {
			t.Fatal(err)
		}
		start := g.pos
		var got []time.Duration
		for range 7 {
			got = append(got, g.interArrival(2))
		}
		want := make([]time.Duration, 7)
		for i := range want {
			want[i] = base[(start+i)%len(base)]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: gaps %v, want %v (from gap %d, wrapping)", seed, got, want, start)
		}
		starts[start] = true
	}
	if len(starts) != 3 {
		t.Errorf("starting gaps over 30 seeds: %v, want all of 0, 1, 2", starts)
	}
}

// TestDrainWaitsForInFlight: drain polls every 10 ms until the cancelled requests have
// returned, and no longer; with one that never returns it stops at RequestTimeout (1 s: 100
// polls); with its context ended it returns the context's error.
func TestDrainWaitsForInFlight(t *testing.T) {
	clock := &stepClock{now: time.Unix(0, 0)}
	g := newTestGenerator(t, clock, 1)
	g.inFlight[7] = clock.now
	clock.onSleep = func() {
		if clock.sleeps == 5 {
			g.mu.Lock()
			delete(g.inFlight, 7)
			g.mu.Unlock()
		}
	}
	if err := g.drain(context.Background()); err != nil || clock.sleeps != 5 || clock.now != time.Unix(0, 0).Add(50*time.Millisecond) {
		t.Errorf("drain with the request back after 5 polls: %v after %d polls, at %v; want nil after 5, at +50ms", err, clock.sleeps, clock.now.Sub(time.Unix(0, 0)))
	}

	clock = &stepClock{now: time.Unix(0, 0)}
	g = newTestGenerator(t, clock, 1)
	g.inFlight[7] = clock.now
	if err := g.drain(context.Background()); err != nil || clock.sleeps != 100 || g.InFlight() != 1 {
		t.Errorf("drain with a request that never returns: %v after %d polls, %d in flight; want nil after 100 (RequestTimeout 1 s), 1", err, clock.sleeps, g.InFlight())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.drain(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("drain with its context ended: %v, want context.Canceled", err)
	}
	g.inFlight = map[uint64]time.Time{}
	clock.sleeps = 0
	if err := g.drain(ctx); err != nil || clock.sleeps != 0 {
		t.Errorf("drain with nothing in flight: %v after %d polls, want nil at once", err, clock.sleeps)
	}
}
