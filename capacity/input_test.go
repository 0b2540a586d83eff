package capacity

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/residency/tritontest"
)

// TestInferRequestTotalBound: 30 tensors of 64 MiB each passed the per-tensor bound and made
// 2 GB requests (6 GB of RSS before the server refused them): the total is bounded too, and
// refused before the tensor past it is allocated.
func TestInferRequestTotalBound(t *testing.T) {
	var inputs []string
	for i := range 30 {
		inputs = append(inputs, "X"+string(rune('a'+i))+":FP64:8388608")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := InferRequest("m", "", inputs)
	runtime.ReadMemStats(&after)
	want := `--input "Xb:FP64:8388608": the --input tensors come to 134217731 bytes of request with it, over the 68157440-byte bound on one request (64 MiB of tensors + 1 MiB, all inputs together)`
	if err == nil || err.Error() != want {
		t.Fatalf("InferRequest = %v; want %s", err, want)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 80<<20 {
		t.Errorf("allocated %d bytes before refusing; want about the one 64 MiB tensor that fits", got)
	}
	// One tensor at the per-tensor bound still fits.
	req, err := InferRequest("m", "", inputs[:1])
	if err != nil || len(req.RawInputContents[0]) != 64<<20 {
		t.Errorf("one 64 MiB tensor: %v", err)
	}
}

// TestReadBoundedStopsAtTheLimit: --input-data=/dev/zero peaked at 607 MB of RSS (ReadAll's
// doubling buffer up to the 256 MiB limit) before it was refused. A device is now refused
// before any read (boundedfile's tests check that a stream is read to limit+1 bytes, in
// chunks).
func TestReadBoundedStopsAtTheLimit(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := InferRequest("m", "/dev/zero", nil)
	runtime.ReadMemStats(&after)
	want := "--input-data: /dev/zero is a device (Dcrw-rw-rw-); want a file or a pipe holding a ModelInferRequest in protobuf JSON"
	if err == nil || err.Error() != want {
		t.Errorf("InferRequest(/dev/zero) = %v; want %s", err, want)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("/dev/zero: allocated %d bytes; want none read", got)
	}

	// A regular file over the limit is refused by its size, before reading.
	huge := filepath.Join(t.TempDir(), "huge.json")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<40); err != nil { // sparse
		t.Fatal(err)
	}
	if _, err := readBounded(huge, maxInputDataBytes); err == nil || !strings.Contains(err.Error(), huge+" is over 268435456 bytes") {
		t.Errorf("readBounded(1 TiB sparse file) = %v", err)
	}
}

// TestTraceErrorsNameCapacitysFlags: a trace replay cannot read told the user to "pass
// --format", a flag capacity does not have, and the generator's trace errors came out as
// "--trace FILE: capacity: invalid config: …".
func TestTraceErrorsNameCapacitysFlags(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "one.csv")
	if err := os.WriteFile(unknown, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "single.csv")
	if err := os.WriteFile(one, []byte("timestamp\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string
	}{
		{unknown, "capacity: invalid config: --trace " + unknown + ": unknown trace format: not a recognised CSV trace: header \"a,b\" matches no format; capacity detects the format from the header, and reads "},
		{one, "capacity: invalid config: --trace " + one + ": trace shape needs at least 2 arrivals, got 1"},
	}
	fake := tritontest.Start(t, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 10 << 30,
		Models: []tritontest.Model{{Name: "m", MemoryBytes: 1 << 30, ServiceTime: time.Millisecond, Concurrency: 4}}, StartupModels: []string{"m"}})
	for _, tt := range tests {
		cfg := DefaultConfig()
		cfg.Target, cfg.Model, cfg.Profile, cfg.NVML, cfg.SkipMemory, cfg.OutDir = fake.GRPCAddr(), "m", "1g.10gb", "off", true, dir
		cfg.Trace, cfg.Search.StartRPS = tt.path, 10
		_, err := Run(context.Background(), cfg, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "--format") || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Run(--trace %s) = %v; want ErrInvalidConfig starting %q", tt.path, err, tt.want)
		}
	}
}
