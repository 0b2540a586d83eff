package residency

import (
	"io"
	"log/slog"
)

// NewLogger returns the sidecar's logger: JSON lines on w at level and above. Durations are
// written as Go duration strings ("1.5s"), not slog's default integer nanoseconds, so that the
// "took" of a load or a drain step reads as a time.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}))
}

// durationString is a slog ReplaceAttr that writes time.Duration values as strings.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// pendingValue is a Work.Pending for logs: "unknown" when Triton's metrics were not read.
func pendingValue(p int64) slog.Value {
	if p < 0 {
		return slog.StringValue("unknown")
	}
	return slog.Int64Value(p)
}

// LogValue writes a reading as {"pending": n or "unknown", "finished": n}.
func (w Work) LogValue() slog.Value {
	return slog.GroupValue(slog.Attr{Key: "pending", Value: pendingValue(w.Pending)}, slog.Uint64("finished", w.Finished))
}

// String is the reading in error messages: "pending 3, finished 120" (pending "unknown" when
// Triton's metrics were not read).
func (w Work) String() string {
	return "pending " + pendingValue(w.Pending).String() + ", finished " + slog.Uint64Value(w.Finished).String()
}
