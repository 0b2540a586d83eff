package replay

import (
	"math"
	"testing"
	"time"
)

// TestHeadlineNamesEachFigureWithItsPolicy: the first sentence used to print the winner's
// × optimum after the runner-up's GPU-hours ("static wins with 11.45 GPU-h, 17% less than
// inferscale (13.85 GPU-h; 4.04× optimum), 2 miss it"), so the ratio read as inferscale's.
func TestHeadlineNamesEachFigureWithItsPolicy(t *testing.T) {
	c := &Comparison{Pool: PoolConfig{SLO: 2 * time.Second, SLOTarget: 0.99}}
	rows := []Row{
		{Policy: "static", SettingSet: SetPublished, GPUHours: 11.45, MeetsSLO: true, RatioToOptimum: 4.04},
		{Policy: "inferscale", SettingSet: SetPublished, GPUHours: 13.85, MeetsSLO: true, RatioToOptimum: 4.89},
		{Policy: "hpa-gpu", SettingSet: SetPublished, GPUHours: 9, MeetsSLO: false, RatioToOptimum: 3},
		{Policy: "knative", SettingSet: SetTuned, GPUHours: 10, MeetsSLO: true, RatioToOptimum: math.NaN()},
	}
	got := headlineOf(c, rows)
	want := "At equal SLO (queue wait ≤ 2s for 99.0% of requests), with published settings static wins (11.45 GPU-h, 4.04× optimum), 17% less than the runner-up inferscale (13.85 GPU-h); 1 of 3 policies miss the SLO; with tuned settings only knative meets it (10.00 GPU-h)."
	if got != want {
		t.Errorf("Headline:\n got %s\nwant %s", got, want)
	}
}
