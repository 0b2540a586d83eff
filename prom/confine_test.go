package prom

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

func TestConfine(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    string
		wantErr error
	}{
		{name: "plain selector", give: `up`, want: `up{namespace="team-a"}`},
		{name: "keeps other matchers", give: `foo{model="m",pod=~"p.*"}`, want: `foo{model="m",namespace="team-a",pod=~"p.*"}`},
		{name: "replaces other namespace", give: `foo{namespace="team-b"}`, want: `foo{namespace="team-a"}`},
		{name: "replaces regex namespace", give: `foo{namespace=~".*"}`, want: `foo{namespace="team-a"}`},
		{name: "replaces negative namespace", give: `foo{namespace!="team-a"}`, want: `foo{namespace="team-a"}`},
		{name: "replaces duplicated namespace matchers", give: `foo{namespace="x",namespace=~"y|z"}`, want: `foo{namespace="team-a"}`},
		{name: "name only through __name__", give: `{__name__=~"nv_.*",namespace="team-b"}`, want: `{__name__=~"nv_.*",namespace="team-a"}`},
		{name: "matrix selector in rate", give: `sum(rate(foo{namespace="b"}[1m]))`, want: `sum(rate(foo{namespace="team-a"}[1m]))`},
		{name: "binary expression both sides", give: `a / on (pod) b{namespace="b"}`, want: `a{namespace="team-a"} / on (pod) b{namespace="team-a"}`},
		{name: "subquery", give: `max_over_time(foo{namespace="b"}[5m:30s])`, want: `max_over_time(foo{namespace="team-a"}[5m:30s])`},
		{name: "offset and at kept", give: `foo offset 5m`, want: `foo{namespace="team-a"} offset 5m`},
		{name: "scalar literal untouched", give: `3 * 2`, want: `3 * 2`},
		{name: "label_replace cannot add scope", give: `label_replace(foo{namespace="b"}, "namespace", "b", "", "")`, want: `label_replace(foo{namespace="team-a"}, "namespace", "b", "", "")`},
		{name: "unparseable", give: `sum(foo`, wantErr: ErrBadQuery},
		{name: "empty", give: ``, wantErr: ErrBadQuery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Confine(tt.give, "team-a", "namespace")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Confine(%q) error = %v, want %v", tt.give, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Confine(%q) (-want +got):\n%s", tt.give, diff)
			}
		})
	}
}

func TestConfineErrors(t *testing.T) {
	tests := []struct {
		name      string
		query     string
		namespace string
		label     string
		wantIs    error
		wantInMsg string
	}{
		{name: "parse error names the query", query: `rate(foo[1m]`, namespace: "a", label: "namespace", wantIs: ErrBadQuery, wantInMsg: `"rate(foo[1m]"`},
		{name: "bad query is a bad request", query: `)`, namespace: "a", label: "namespace", wantIs: ErrBadRequest, wantInMsg: `")"`},
		{name: "empty namespace", query: `foo`, namespace: "", label: "namespace", wantIs: ErrBadRequest, wantInMsg: "namespace is empty"},
		{name: "bad label", query: `foo`, namespace: "a", label: "kube-ns", wantIs: ErrBadRequest, wantInMsg: `"kube-ns"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Confine(tt.query, tt.namespace, tt.label)
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("error = %v, want it to wrap %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("error %q does not mention %s", err, tt.wantInMsg)
			}
		})
	}
}

// selectorsConfined reports the selectors of expr that do not carry exactly one
// label="namespace" matcher.
func selectorsConfined(t *testing.T, out, namespace, label string) {
	t.Helper()
	expr, err := promqlParser.ParseExpr(out)
	if err != nil {
		t.Fatalf("confined output %q does not parse: %v", out, err)
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		var got []*labels.Matcher
		for _, m := range vs.LabelMatchers {
			if m.Name == label {
				got = append(got, m)
			}
		}
		if len(got) != 1 || got[0].Type != labels.MatchEqual || got[0].Value != namespace {
			t.Fatalf("selector %s in %q: namespace matchers %v, want exactly %s=%q", vs, out, got, label, namespace)
		}
		return nil
	})
}

func FuzzConfine(f *testing.F) {
	for _, s := range []string{
		`up`, `foo{namespace="team-b"}`, `sum by (model) (rate(x{namespace=~".*"}[1m]))`,
		`a / on (pod) group_left () b`, `max_over_time(foo[5m:30s] offset 1m)`, `{__name__=~"a|b"}`,
		`vector(1)`, `1`, `foo @ 1609746000`, `histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))`,
		`label_replace(up, "namespace", "x", "", "")`, `absent(nope{namespace!="a"})`,
	} {
		f.Add(s, "team-a")
	}
	for _, h := range hostileQueries {
		f.Add(h.query, "team-a")
	}
	f.Fuzz(func(t *testing.T, query, namespace string) {
		if namespace == "" || !utf8.ValidString(namespace) {
			return
		}
		out, err := Confine(query, namespace, "namespace")
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("Confine(%.200q) error %.200v does not wrap ErrBadRequest", query, err)
			}
			return
		}
		if err := CheckBudget(query); err != nil {
			t.Fatalf("Confine accepted a query over the budget (%v)", err)
		}
		selectorsConfined(t, out, namespace, "namespace")
		again, err := Confine(out, namespace, "namespace")
		if err != nil {
			t.Fatalf("Confine(Confine(%q)) = error %v", query, err)
		}
		if again != out {
			t.Fatalf("Confine is not idempotent on %q: %q then %q", query, out, again)
		}
	})
}

func BenchmarkConfine(b *testing.B) {
	q := `sum by (model) (rate(nv_inference_request_success{namespace="team-b",model=~"llama.*"}[1m])) / on (model) group_left () sum by (model) (nv_inference_pending_request_count)`
	for b.Loop() {
		if _, err := Confine(q, "team-a", "namespace"); err != nil {
			b.Fatal(err)
		}
	}
}
