package record

import (
	"errors"
	"strings"
	"testing"

	"github.com/inferscale/inferscale/residency/plan"
)

// TestFileNameKeepsExactlyTheSafeBytes: the edges of each kept range ('a'–'z', 'A'–'Z',
// '0'–'9') stay, and their ASCII neighbours ('`' '{' '@' '[' '/' ':') become '_'.
func TestFileNameKeepsExactlyTheSafeBytes(t *testing.T) {
	if got, want := FileName("azAZ09._-", "1g.10gb"), "azAZ09._-.1g.10gb.yaml"; got != want {
		t.Errorf("FileName(edges) = %q, want %q", got, want)
	}
	if got, want := FileName("`{@[/:", "1g.10gb"), "______.1g.10gb.yaml"; got != want {
		t.Errorf("FileName(neighbours) = %q, want %q", got, want)
	}
}

// TestRecordValidateBounds: each checked field at the edges of its range.
func TestRecordValidateBounds(t *testing.T) {
	valid := func() Record {
		return Record{Model: "m", Profile: "1g.10gb", SLOThroughputRPS: 10, SuccessRate: 0.99}
	}
	for _, tt := range []struct {
		name string
		set  func(*Record)
		want string // the key named; "" means accepted
	}{
		{"bytes at 0", func(r *Record) { r.Memory = Memory{} }, ""},
		{"bytes at the bound", func(r *Record) {
			r.Memory = Memory{SteadyBytes: plan.MaxMemoryBytes, PeakBytes: plan.MaxMemoryBytes, SwapPeakBytes: plan.MaxMemoryBytes}
		}, ""},
		{"steady past the bound", func(r *Record) { r.Memory.SteadyBytes = plan.MaxMemoryBytes + 1 }, "memory.steadyBytes"},
		{"peak -1", func(r *Record) { r.Memory.PeakBytes = -1 }, "memory.peakBytes"},
		{"swap peak past the bound", func(r *Record) { r.Memory.SwapPeakBytes = plan.MaxMemoryBytes + 1 }, "memory.swapPeakBytes"},
		{"load time at MaxLoadTime", func(r *Record) { r.LoadTimeSeconds = plan.MaxLoadTime.Seconds() }, ""},
		{"load time past MaxLoadTime", func(r *Record) { r.LoadTimeSeconds = plan.MaxLoadTime.Seconds() + 0.001 }, "loadTimeSeconds"},
		{"load time -0.001", func(r *Record) { r.LoadTimeSeconds = -0.001 }, "loadTimeSeconds"},
		{"μ 0 (no rate met the SLO)", func(r *Record) { r.SLOThroughputRPS = 0 }, ""},
		{"μ -0.001", func(r *Record) { r.SLOThroughputRPS = -0.001 }, "sloThroughputRPS"},
		{"success rate 0", func(r *Record) { r.SuccessRate = 0 }, ""},
		{"success rate 1", func(r *Record) { r.SuccessRate = 1 }, ""},
		{"success rate 1.001", func(r *Record) { r.SuccessRate = 1.001 }, "successRate"},
	} {
		r := valid()
		tt.set(&r)
		err := r.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
		case tt.want != "" && (!errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), tt.want+": ")):
			t.Errorf("%s: Validate() = %v, want an ErrRecord naming %s", tt.name, err, tt.want)
		}
	}
}

// TestBoundedAtItsEdges: a message of exactly maxErrLines lines of maxErrLineBytes is returned
// as it is; one more line, or one more byte on a line, is cut and says so.
func TestBoundedAtItsEdges(t *testing.T) {
	line := strings.Repeat("x", maxErrLineBytes)
	full := errors.New(strings.TrimSuffix(strings.Repeat(line+"\n", maxErrLines), "\n"))
	if got := bounded(full); got != full {
		t.Errorf("%d lines of %d bytes: cut to %q, want the error itself", maxErrLines, maxErrLineBytes, got)
	}
	more := errors.New(full.Error() + "\nx")
	if got := bounded(more); !strings.HasSuffix(got.Error(), "… and 1 more lines") || !errors.Is(got, more) {
		t.Errorf("one line more: %q, want it cut with \"… and 1 more lines\", wrapping the original", got)
	}
	long := errors.New(line + "y")
	if got := bounded(long); got == long || len(got.Error()) > maxErrLineBytes+len("…")+64 {
		t.Errorf("one byte more on a line: %q (%d bytes), want it cut", got, len(got.Error()))
	}
}
