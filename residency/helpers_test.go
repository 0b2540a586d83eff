package residency

import (
	"slices"
	"strings"
	"time"
)

// Shared fixtures of the controller, drain and config tests (the planner's own tests live in
// residency/plan with copies of these).

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

const gi = int64(1) << 30

const prof = "1g.10gb"

func model(name string, tier Tier, peakGiB float64, load time.Duration) Model {
	return Model{Name: name, Digest: dgA, Tier: tier, LoadTime: load,
		PeakMemoryBytes: map[string]int64{prof: int64(peakGiB * float64(gi))}}
}

func catalog(ms ...Model) Catalog {
	c := Catalog{IdleTimeout: 10 * time.Minute, MinResidency: 2 * time.Minute, Models: ms}
	slices.SortFunc(c.Models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	return c
}

func ready(since time.Time, lastUsed time.Time) ModelStatus {
	return ModelStatus{State: StateReady, LoadedSince: since, LastUsed: lastUsed}
}
