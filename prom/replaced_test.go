package prom

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReplacedNamespaceMatcherIsWarnedOnce: a custom query naming another
// namespace is still confined, but the rewrite is logged at WARN once per
// distinct query (naming the replaced matcher and the namespace) and
// counted; a query that names only its own namespace is not.
func TestReplacedNamespaceMatcherIsWarnedOnce(t *testing.T) {
	var buf bytes.Buffer
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.DefaultAddress = "http://127.0.0.1:1"
	p, err := NewPoller(cfg, reg, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	sneaky := `sum(q{namespace="team-b"}) + sum(q{namespace=~".*"}) + sum(q{namespace="team-b"})`
	subscribe(t, p, Request{Namespace: "team-a", Kind: KindQueue, Query: sneaky})
	subscribe(t, p, Request{Namespace: "team-a", Kind: KindActivity, Query: sneaky}) // same query, another kind
	subscribe(t, p, Request{Namespace: "team-a", Kind: KindQueue, Query: `sum(q{namespace="team-a"})`})
	subscribe(t, p, Request{Namespace: "team-a", Kind: KindRate, Query: `sum(q)`})

	logs := buf.String()
	if got := strings.Count(logs, "level=WARN"); got != 1 {
		t.Errorf("%d warnings, want 1:\n%s", got, logs)
	}
	for _, want := range []string{`namespace=team-a`, `replaced="[namespace=\"team-b\" namespace=~\".*\"]"`, "namespace matchers were replaced"} {
		if !strings.Contains(logs, want) {
			t.Errorf("warning lacks %s:\n%s", want, logs)
		}
	}
	got := testutil.ToFloat64(p.m.replaced.WithLabelValues("team-a"))
	if diff := cmp.Diff(1.0, got); diff != "" {
		t.Errorf("replaced counter (-want +got):\n%s", diff)
	}
}
