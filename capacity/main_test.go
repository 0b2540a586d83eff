package capacity_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The generator, the simulated clock's pump and the memory sampler start goroutines; none may
// outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
