package replay

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDemoSpanInDocs: the docs' "8,819 requests, 57 minutes" is the embedded trace's count and
// span (first to last arrival: 57 m 15.9 s), which the comparison's header, printing hours to
// one decimal, shows as "1.0 h" (0.954 h). A new user's trial took the two for a contradiction;
// README.md now says the header rounds it. Each place that states the span is tied to the trace.
func TestDemoSpanInDocs(t *testing.T) {
	tr, err := DemoTrace()
	if err != nil {
		t.Fatal(err)
	}
	span := tr.Requests[len(tr.Requests)-1].At - tr.Requests[0].At
	if len(tr.Requests) != 8819 || span.Round(100*time.Millisecond) != 57*time.Minute+15900*time.Millisecond {
		t.Fatalf("demo trace: %d requests over %v; want 8819 over 57m15.9s", len(tr.Requests), span)
	}
	if got := fmt.Sprintf("%.1f h", span.Hours()); got != "1.0 h" {
		t.Errorf("header's span %q, want %q", got, "1.0 h")
	}
	minutes := int(span.Minutes()) // whole minutes, 57
	for _, c := range []struct{ file, want string }{
		{"../README.md", fmt.Sprintf("(8,819 requests over %d minutes, first to last arrival; the table's header rounds it to %.1f h)", minutes, span.Hours())},
		{"../docs/replay.md", fmt.Sprintf("8,819 requests over %d minutes", minutes)},
		{"demo/README.md", fmt.Sprintf("8,819 requests over %d minutes", minutes)},
	} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(data)), " "), c.want) {
			t.Errorf("%s does not say %q", c.file, c.want)
		}
	}
}
