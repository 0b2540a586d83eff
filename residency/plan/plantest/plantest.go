// Package plantest holds the fixtures shared by the planner's tests (residency/plan) and the
// controller's (residency): a fixed start time, two digests, one MIG profile and builders of
// catalog models, catalogs and READY statuses. It is for tests only.
package plantest

import (
	"slices"
	"strings"
	"time"

	"github.com/inferscale/inferscale/residency/plan"
)

// T0 is the fixed start time of scenario tests.
var T0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// Gi is one GiB in bytes.
const Gi = int64(1) << 30

// Two valid catalog digests; DigestA is the one Model gives.
const (
	DigestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	DigestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// Profile is the MIG profile Model gives a peak for.
const Profile = "1g.10gb"

// Model is a catalog model with digest DigestA and a peak of peakGiB GiB on Profile.
func Model(name string, tier plan.Tier, peakGiB float64, load time.Duration) plan.Model {
	return plan.Model{Name: name, Digest: DigestA, Tier: tier, LoadTime: load,
		PeakMemoryBytes: map[string]int64{Profile: int64(peakGiB * float64(Gi))}}
}

// Catalog is a catalog of ms, sorted by name, with idleTimeout 10m and minResidency 2m.
func Catalog(ms ...plan.Model) plan.Catalog {
	c := plan.Catalog{IdleTimeout: 10 * time.Minute, MinResidency: 2 * time.Minute, Models: ms}
	slices.SortFunc(c.Models, func(a, b plan.Model) int { return strings.Compare(a.Name, b.Name) })
	return c
}

// Ready is a READY status loaded since since and last used at lastUsed.
func Ready(since, lastUsed time.Time) plan.ModelStatus {
	return plan.ModelStatus{State: plan.StateReady, LoadedSince: since, LastUsed: lastUsed}
}
