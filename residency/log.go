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

// pendingValue is w.Pending for logs: "invalid" when a metrics series was not a count
// (Invalid), "unknown" when Triton's metrics were not read.
func (w Work) pendingValue() slog.Value {
	switch {
	case w.Invalid != "":
		return slog.StringValue("invalid")
	case w.Pending < 0:
		return slog.StringValue("unknown")
	}
	return slog.Int64Value(w.Pending)
}

// LogValue writes a reading as {"pending": n, "unknown" or "invalid", "finished": n}, with
// "invalid": why when a series was not a count.
func (w Work) LogValue() slog.Value {
	attrs := []slog.Attr{{Key: "pending", Value: w.pendingValue()}, slog.Uint64("finished", w.Finished)}
	if w.Invalid != "" {
		attrs = append(attrs, slog.String("invalid", w.Invalid))
	}
	return slog.GroupValue(attrs...)
}

// String is the reading in error messages: "pending 3, finished 120" (pending "unknown" when
// Triton's metrics were not read; "invalid (why)" when a series was not a count).
func (w Work) String() string {
	s := "pending " + w.pendingValue().String() + ", finished " + slog.Uint64Value(w.Finished).String()
	if w.Invalid != "" {
		s += " (" + w.Invalid + ")"
	}
	return s
}
