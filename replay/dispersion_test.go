package replay

import (
	"math"
	"testing"
	"time"

	"github.com/inferscale/inferscale/prom"
)

func TestDispersion(t *testing.T) {
	tests := []struct {
		name   string
		rates  []float64
		want   float64
		wantOK bool
	}{
		// Squared differences 1,1,4,4,1,1,4,4,1,361: median (1+4)/2 = 2.5 (the final step
		// to 30/s is one of ten and does not move it); mean of the last ten rates 12.7
		// (the first, 10, only feeds a difference).
		{"step at the end", []float64{10, 11, 10, 12, 10, 11, 10, 12, 10, 11, 30}, 30 * 2.5 / (0.4549 * 12.7), true},
		// Level shift from 0 to 20/s: nine of ten differences are 0.
		{"level shift", []float64{0, 0, 0, 0, 0, 0, 20, 20, 20, 20, 20}, 0, true},
		// On/off every minute at 40/s: every difference is ±40, the mean 20.
		{"on/off bursts", []float64{0, 40, 0, 40, 0, 40, 0, 40, 0, 40, 0}, 30 * 1600 / (0.4549 * 20), true},
		// Two samples: one difference (4²) and the mean of both.
		{"two samples", []float64{4, 6}, 30 * 4 / (0.4549 * 5), true},
		// Odd count: squared differences 4, 0, 9, median 4; mean 17/4.
		{"four samples", []float64{2, 4, 4, 7}, 30 * 4 / (0.4549 * 4.25), true},
		{"one sample", []float64{5}, 0, false},
		{"idle", []float64{0, 0, 0}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := dispersion(tt.rates)
			if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-12*math.Abs(tt.want) {
				t.Errorf("dispersion(%v) = %v, %v; want %v, %v", tt.rates, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	// The literal values, so a change of constant fails here too.
	if got, _ := dispersion([]float64{10, 11, 10, 12, 10, 11, 10, 12, 10, 11, 30}); math.Abs(got-12.982000024233066) > 1e-9 {
		t.Errorf("step at the end: I = %v, want 12.982000024233066", got)
	}
	if got, _ := dispersion([]float64{0, 40, 0, 40, 0, 40, 0, 40, 0, 40, 0}); math.Abs(got-5275.884809848318) > 1e-9 {
		t.Errorf("on/off bursts: I = %v, want 5275.884809848318", got)
	}
}

// The replay reads what the preset computes: its constant and its span.
func TestDispersionMatchesPreset(t *testing.T) {
	if dispersionMedianChi2 != prom.DispersionMedianChi2 {
		t.Errorf("dispersionMedianChi2 = %v, prom.DispersionMedianChi2 = %v", dispersionMedianChi2, prom.DispersionMedianChi2)
	}
	span, err := time.ParseDuration(prom.DispersionSpan)
	if err != nil {
		t.Fatal(err)
	}
	window, err := time.ParseDuration(prom.DispersionWindow)
	if err != nil {
		t.Fatal(err)
	}
	if want := int(span/window) + 1; DispersionSamples != want {
		t.Errorf("DispersionSamples = %d, want %d (the span's windows and one before, for offset %s)", DispersionSamples, want, prom.DispersionWindow)
	}
}
