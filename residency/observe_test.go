package residency

import (
	"math"
	"testing"
)

// TestAddSat: the statistics' byte sums saturate at math.MaxInt64 instead of wrapping negative.
func TestAddSat(t *testing.T) {
	for _, tt := range []struct{ a, b, want int64 }{
		{3, 4, 7}, {0, 0, 0}, {math.MaxInt64 - 1, 1, math.MaxInt64}, {math.MaxInt64 - 1, 2, math.MaxInt64},
		{math.MaxInt64, 1 << 50, math.MaxInt64},
	} {
		if got := addSat(tt.a, tt.b); got != tt.want {
			t.Errorf("addSat(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
