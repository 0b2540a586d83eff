package plan_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/plan"
)

func TestUnfitAndCheckPinned(t *testing.T) {
	budget := plan.Budget{Profile: prof, TotalBytes: 9856 << 20} // 1g.10gb: 9.62 GiB
	elsewhere := plan.Model{Name: "elsewhere", Digest: dgA, Tier: plan.TierP0, LoadTime: time.Second, PeakMemoryBytes: map[string]int64{"7g.80gb": gi}}
	tests := []struct {
		name      string
		reserve   int64
		models    []plan.Model
		wantUnfit []plan.Unfit
		wantErr   string // "" means nil
	}{
		{name: "P0 peak above the budget", models: []plan.Model{model("big", plan.TierP0, 20, time.Second), model("small", plan.TierP0, 2, time.Second)},
			wantUnfit: []plan.Unfit{{Name: "big", Tier: plan.TierP0, PeakBytes: 20 * gi,
				Reason: "peak 20.00GiB + reserve 0.0MiB = 20.00GiB exceeds the budget 9.62GiB of profile 1g.10gb"}},
			wantErr: `pinned model can never fit the budget: model "big" (P0): peak 20.00GiB + reserve 0.0MiB = 20.00GiB exceeds the budget 9.62GiB of profile 1g.10gb; it can never be loaded and the pod would never be ready`},
		{name: "the reserve tips a P0 model over", reserve: gi, models: []plan.Model{model("edge", plan.TierP0, 9, time.Second)},
			wantUnfit: []plan.Unfit{{Name: "edge", Tier: plan.TierP0, PeakBytes: 9 * gi,
				Reason: "peak 9.00GiB + reserve 1.00GiB = 10.00GiB exceeds the budget 9.62GiB of profile 1g.10gb"}},
			wantErr: `model "edge" (P0): peak 9.00GiB + reserve 1.00GiB = 10.00GiB exceeds`},
		{name: "P0 models that fit alone but not together", models: []plan.Model{model("a", plan.TierP0, 5, time.Second), model("b", plan.TierP0, 5, time.Second)},
			wantErr: "P0 models a, b together: peaks 10.00GiB + reserve 0.0MiB = 10.00GiB exceed the budget 9.62GiB of profile 1g.10gb"},
		{name: "P2 above the budget is unplaceable, not an error", models: []plan.Model{model("huge", plan.TierP2, 20, time.Second), model("pin", plan.TierP0, 9, time.Second)},
			wantUnfit: []plan.Unfit{{Name: "huge", Tier: plan.TierP2, PeakBytes: 20 * gi,
				Reason: "peak 20.00GiB + reserve 0.0MiB = 20.00GiB exceeds the budget 9.62GiB of profile 1g.10gb"}}},
		{name: "no peak for the profile is unplaceable, not an error", models: []plan.Model{elsewhere},
			wantUnfit: []plan.Unfit{{Name: "elsewhere", Tier: plan.TierP0, Reason: "no peak for profile 1g.10gb"}}},
		{name: "exactly the budget fits", models: []plan.Model{{Name: "full", Digest: dgA, Tier: plan.TierP0, LoadTime: time.Second,
			PeakMemoryBytes: map[string]int64{prof: 9856<<20 - gi}}}, reserve: gi},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cat := plan.Catalog{ReserveBytes: tt.reserve, IdleTimeout: time.Minute, Models: tt.models}
			if diff := cmp.Diff(tt.wantUnfit, cat.Unfit(budget)); diff != "" {
				t.Errorf("Unfit (-want +got):\n%s", diff)
			}
			err := cat.CheckPinned(budget)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("CheckPinned = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, plan.ErrNeverFits) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("CheckPinned = %v, want ErrNeverFits containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestCatalogErrorsBounded: a catalog error repeats at most 64 bytes of a value, saying its
// length (two 1,000,000-byte names made a 3 MB error, logged and written into the
// CatalogRejected event), and lists at most 20 model names (9,000 P0 names made 62 KB).
func TestCatalogErrorsBounded(t *testing.T) {
	long := strings.Repeat("ä", 500000) // 1,000,000 bytes
	cat := plan.Catalog{IdleTimeout: time.Minute, Models: []plan.Model{
		{Name: long, Digest: "sha256:" + long, Tier: plan.Tier(long), LoadTime: time.Second, PeakMemoryBytes: map[string]int64{long: 0}},
	}}
	err := cat.Violations()
	if err == nil {
		t.Fatal("Violations = nil")
	}
	cut := `"` + strings.Repeat("ä", 32) + `"… (1000000 bytes)`
	for _, want := range []string{
		"models[0].name: " + cut + " is not a Triton model name",
		"models[0].tier: " + cut + "; want one of P0, P1, P2",
		"models[0].peakMemoryBytes: profile " + cut + " is not a profile name",
		"models[0].peakMemoryBytes[" + cut + "]: 0 out of range",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Violations lacks %q", want)
		}
	}
	if n := len(err.Error()); n > 2000 {
		t.Errorf("Violations is %d bytes, want at most 2000", n)
	}

	var models []plan.Model
	for i := range 30 {
		models = append(models, model(fmt.Sprintf("p%02d", i), plan.TierP0, 1, time.Second))
	}
	err = plan.Catalog{IdleTimeout: time.Minute, Models: models}.CheckPinned(plan.Budget{Profile: prof, TotalBytes: 9856 << 20})
	want := "P0 models p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p10, p11, p12, p13, p14, p15, p16, p17, p18, p19 and 10 more together: peaks 30.00GiB"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckPinned = %v, want it to contain %q", err, want)
	}
}
