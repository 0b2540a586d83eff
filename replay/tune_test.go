package replay

import (
	"math"
	"testing"
)

func TestPickTuned(t *testing.T) {
	grid := []float64{1, 2, 3}
	tests := []struct {
		name   string
		meets  [][]bool
		ratio  [][]float64
		attain [][]float64
		want   float64
		wantG  float64
		wantA  float64
	}{
		{
			name:   "meeting it everywhere: the cheapest of those, whatever their attainment",
			meets:  [][]bool{{true, true}, {true, true}, {true, false}},
			ratio:  [][]float64{{4, 9}, {2, 8}, {1, 1}},
			attain: [][]float64{{1, 1}, {0.99, 0.99}, {0.995, 0.5}},
			want:   2, wantG: 4, wantA: 0.99,
		},
		{
			name:   "none meets it anywhere: the highest mean attainment, not the cheapest",
			meets:  [][]bool{{false, false}, {false, false}, {false, false}},
			ratio:  [][]float64{{3, 3}, {2, 2}, {0.5, 2}},
			attain: [][]float64{{0.9, 0.8}, {0.7, 0.7}, {0.1, 0.6}},
			want:   1, wantG: 3, wantA: 0.85,
		},
		{
			name:   "the most traces first, then attainment among them",
			meets:  [][]bool{{true, false, false}, {true, false, true}, {false, true, true}},
			ratio:  [][]float64{{1, 1, 1}, {2, 2, 2}, {4, 1, 2}},
			attain: [][]float64{{1, 0.98, 0.98}, {0.99, 0.5, 0.99}, {0.9, 0.99, 0.99}},
			want:   3, wantG: 2, wantA: 0.96,
		},
		{
			name:   "a full tie: the first in grid order",
			meets:  [][]bool{{true}, {true}, {true}},
			ratio:  [][]float64{{3}, {2}, {2}},
			attain: [][]float64{{1}, {0.99}, {0.995}},
			want:   2, wantG: 2, wantA: 0.99,
		},
		{
			name:   "equal attainment: the cheaper",
			meets:  [][]bool{{false}, {false}, {false}},
			ratio:  [][]float64{{3}, {2}, {5}},
			attain: [][]float64{{0.5}, {0.5}, {0.4}},
			want:   2, wantG: 2, wantA: 0.5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pickTuned("f", grid, len(tt.meets[0]), tt.meets, tt.ratio, tt.attain)
			if got.Value != tt.want || math.Abs(got.GeoMean-tt.wantG) > 1e-12 || math.Abs(got.MeanAttainment-tt.wantA) > 1e-12 {
				t.Errorf("value %v geomean %v attainment %v, want %v %v %v", got.Value, got.GeoMean, got.MeanAttainment, tt.want, tt.wantG, tt.wantA)
			}
		})
	}
}
