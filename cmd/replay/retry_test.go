package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRetrySubcommand(t *testing.T) {
	var out bytes.Buffer
	if err := runRetry([]string{"--duration", "12m", "--burst-start", "5m", "--burst-length", "2m"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if n := strings.Count(s, "| inferscale: "); n != 5 {
		t.Errorf("%d table rows, want 5:\n%s", n, s)
	}
	for _, want := range []string{"3 layers × 3 attempts, timeout 15s", "uniqueRateQuery, retryBudget 1.2", "retry budget 20% (min 3)", "cost per 1,000 verified"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range [][]string{{"--layers", "9"}, {"--burst-factor", "0.5"}, {"extra"}} {
		if err := runRetry(bad, &out); err == nil {
			t.Errorf("retry %v: want an error", bad)
		}
	}
}
