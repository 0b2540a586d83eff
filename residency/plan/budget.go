package plan

import (
	"errors"
	"fmt"
	"slices"
)

// ErrBudget is wrapped by errors about the memory budget.
var ErrBudget = errors.New("invalid budget")

// Budget is the memory a pod may fill with models.
type Budget struct {
	// Profile names the pod's GPU slice (a MIG profile such as "1g.10gb", or a whole-GPU name
	// such as "h100-80gb"). It selects each model's PeakMemoryBytes entry; a model without an
	// entry for Profile is never loaded.
	Profile string
	// TotalBytes is the usable memory of the device or slice, as NVML reports it (or from the
	// profile table, or a flag).
	TotalBytes int64
	// ReserveBytes is kept back for the CUDA context and allocator slack. Plan keeps back the
	// larger of this and the catalog's reserveBytes.
	ReserveBytes int64
	// FreeIdle makes Plan unload P1/P2 models unused for their IdleTimeout even when no other
	// model needs the memory (to hand the slice back, e.g. before a MIG re-layout). Off by
	// default: an idle model costs nothing while nobody else wants its memory, and it is
	// evicted by value as soon as someone does.
	FreeIdle bool
}

// Validate returns every violation, naming the field and accepted range.
func (b Budget) Validate() error {
	var errs []error
	if b.Profile == "" || !profileRE.MatchString(b.Profile) {
		errs = append(errs, fmt.Errorf("profile: %q is not a profile name (lower case, e.g. 1g.10gb or h100-80gb)", b.Profile))
	}
	if b.TotalBytes < 1 || b.TotalBytes > MaxMemoryBytes {
		errs = append(errs, fmt.Errorf("totalBytes: %d out of range [1, %d]", b.TotalBytes, MaxMemoryBytes))
	}
	if b.ReserveBytes < 0 || b.ReserveBytes >= b.TotalBytes {
		errs = append(errs, fmt.Errorf("reserveBytes: %d out of range [0, totalBytes %d)", b.ReserveBytes, b.TotalBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrBudget, errors.Join(errs...))
	}
	return nil
}

const mib = 1 << 20

// profileMiB holds the usable memory of MIG profiles and whole GPUs in MiB.
//
// Sources, in order of trust:
//   - A100 40GB and 80GB: the MemorySizeMB values of go-nvml v0.13.4-1's mock
//     (pkg/nvml/mock/gpus/a100.go), which match what `nvidia-smi mig -lgip` prints on those
//     cards (e.g. 1g.5gb = 4864 MiB, 1g.10gb = 9856 MiB ≈ 9.6 GiB).
//   - H100 80GB: same memory slicing as A100 80GB; the A100 80GB figures are used
//     (approximation; go-nvml's H100 mock lists nominal sizes only).
//   - H200 141GB: APPROXIMATIONS, nominal size from go-nvml's H200 mock times 9856/10240 (the
//     usable/nominal ratio of the A100 80GB 1g.10gb slice), rounded down to 128 MiB.
//   - Whole GPUs: nominal memory from the same mocks; a real card reports a little less, so
//     use NVML (residency/gpu) or --budget-bytes on real hardware.
//
// Where a pod has NVML, its reading replaces this table.
var profileMiB = map[string]int64{
	// A100-SXM4-40GB / A100-PCIE-40GB.
	"1g.5gb": 4864, "1g.5gb+me": 4864, "1g.10gb": 9856, "1g.10gb+me": 9856,
	"2g.10gb": 9856, "3g.20gb": 19968, "4g.20gb": 19968, "7g.40gb": 40192,
	// A100 80GB and H100 80GB.
	"1g.20gb": 19968, "2g.20gb": 19968, "3g.40gb": 40192, "4g.40gb": 40192, "7g.80gb": 80384,
	// H200 141GB (approximations, see above).
	"1g.18gb": 17664, "1g.18gb+me": 17664, "1g.35gb": 34432, "2g.35gb": 34432,
	"3g.71gb": 69888, "4g.71gb": 69888, "7g.141gb": 138880,
	// Whole GPUs (nominal).
	"a100-40gb": 40960, "a100-80gb": 81920, "h100-80gb": 81920, "h200-141gb": 144384,
}

// ProfileBytes returns the usable bytes of a MIG profile or whole GPU from the documented
// profile table (see Profiles), and whether the profile is known.
func ProfileBytes(profile string) (int64, bool) {
	m, ok := profileMiB[profile]
	return m * mib, ok
}

// Profiles returns the names in the profile table, sorted.
func Profiles() []string {
	out := make([]string, 0, len(profileMiB))
	for p := range profileMiB {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
