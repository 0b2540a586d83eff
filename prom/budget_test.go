package prom

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

func TestQueryDepth(t *testing.T) {
	tests := []struct {
		name string
		give string
		want int
	}{
		{name: "selector", give: `up`, want: 0},
		{name: "matchers add nothing", give: `up{a="x",b!="y",c=~"z",d!~"w"}`, want: 0},
		{name: "rate over a range", give: `rate(x[1m])`, want: 2},
		{name: "preset rate", give: `sum by (namespace, model) (rate(a[1m])) + sum by (namespace, model) (rate(b[1m]))`, want: 4},
		{name: "chain of operators", give: `a + b - c * d / e`, want: 4},
		{name: "set operators and atan2", give: `a and b or c unless d atan2 e`, want: 4},
		{name: "comparison", give: `a >= 1 == bool b`, want: 2},
		{name: "operators in strings and comments do not count", give: "label_replace(up, \"a\", \"+-*/\", \"b\", \"(((\") # ((( + +\n", want: 1},
		{name: "a comment ends at a carriage return", give: "(0)#\r%0", want: 2},
		{name: "escaped quote in a string", give: `up{a="x\"((("} + 1`, want: 1},
		{name: "nested parentheses", give: strings.Repeat("(", 10) + "up" + strings.Repeat(")", 10), want: 10},
		{name: "unary minus", give: `---1`, want: 3},
		{name: "unbalanced is measured as far as it goes", give: `((((up`, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QueryDepth(tt.give); got != tt.want {
				t.Errorf("QueryDepth(%q) = %d, want %d", tt.give, got, tt.want)
			}
		})
	}
}

// hostileQueries are the inputs the budget exists for (each parses in 0.5 s to minutes
// without it).
var hostileQueries = map[string]struct {
	query    string
	wantText string
}{
	"1 MB of summed terms": {strings.Repeat("a+", 1<<19), "is 1048576 bytes; the limit is 16384 bytes"},
	"depth 8k":             {strings.Repeat("(", 8000) + "up" + strings.Repeat(")", 8000), "nests 8000 deep; the limit is depth 64"},
	"16 KiB chain":         {strings.Repeat("a+", 8000) + "a", "nests 8000 deep; the limit is depth 64"},
	"unary minus chain":    {strings.Repeat("-", 16000) + "1", "nests 16000 deep; the limit is depth 64"},
}

func TestCheckBudget(t *testing.T) {
	for name, tt := range hostileQueries {
		t.Run(name, func(t *testing.T) {
			err := CheckBudget(tt.query)
			if !errors.Is(err, ErrBadQuery) || !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadQuery", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantText)
			}
			if len(err.Error()) > 200 {
				t.Errorf("error is %d bytes; it must not echo the query", len(err.Error()))
			}
			// Confine and GroupByModel check the budget before parsing.
			if _, err := Confine(tt.query, "ns", "namespace"); !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Confine: err = %.200v, want the budget error", err)
			}
			if _, _, err := GroupByModel(tt.query, "$model"); !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("GroupByModel: err = %.200v, want the budget error", err)
			}
		})
	}
	for _, ok := range []string{
		strings.Repeat("a", MaxQueryBytes),
		strings.Repeat("(", MaxQueryDepth) + "up" + strings.Repeat(")", MaxQueryDepth),
		strings.Repeat("a+", MaxQueryDepth) + "a",
	} {
		if err := CheckBudget(ok); err != nil {
			t.Errorf("CheckBudget(%.40q… %d bytes) = %v; it is within the limits", ok, len(ok), err)
		}
	}
	for _, p := range Presets {
		for _, k := range Kinds {
			q, err := PresetQuery(p.Engine, k, Labels{Namespace: "namespace", Pod: "pod"})
			if err != nil {
				continue
			}
			if d := QueryDepth(q); d > MaxQueryDepth/4 || len(q) > MaxQueryBytes/16 {
				t.Errorf("preset %s %s: depth %d, %d bytes; the limits should leave real queries far below them", p.Engine, k, d, len(q))
			}
		}
	}
}

// worstAccepted is a query near both limits: a balanced tree of realistic terms (each
// `sum by (model) (rate(…[1m]))`) joined by + in parentheses, as long as fits in
// MaxQueryBytes, under a chain of nested calls up to MaxQueryDepth.
func worstAccepted() string {
	term := `sum by (model) (rate(nv_inference_request_success{model="m",pod=~"triton-.*"}[1m]))`
	level := []string{}
	for n := 0; n*(len(term)+4) < MaxQueryBytes-MaxQueryDepth*8; n++ {
		level = append(level, term)
	}
	for len(level) > 1 {
		var next []string
		for i := 0; i < len(level); i += 2 {
			if i+1 < len(level) {
				next = append(next, "("+level[i]+" + "+level[i+1]+")")
			} else {
				next = append(next, level[i])
			}
		}
		level = next
	}
	q := level[0]
	for QueryDepth("abs("+q+")") <= MaxQueryDepth {
		q = "abs(" + q + ")"
	}
	return q
}

// BenchmarkConfineWorstAccepted confines the most expensive query the budget lets through;
// compare with BenchmarkCheckBudgetHostile, what a rejected 1 MB query costs.
func BenchmarkConfineWorstAccepted(b *testing.B) {
	q := worstAccepted()
	if err := CheckBudget(q); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(q)), "bytes")
	b.ReportMetric(float64(QueryDepth(q)), "depth")
	for b.Loop() {
		if _, err := Confine(q, "ns", "namespace"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckBudgetHostile(b *testing.B) {
	q := hostileQueries["1 MB of summed terms"].query
	d := hostileQueries["depth 8k"].query
	for b.Loop() {
		_ = CheckBudget(q)
		_ = CheckBudget(d)
	}
}

// FuzzQueryDepth: QueryDepth bounds the depth of the parsed tree (nodes on the longest path,
// less one), so the budget's cheap scan can stand in for the parser.
func FuzzQueryDepth(f *testing.F) {
	for _, s := range []string{
		`up`, `sum by (a) (rate(x{a="(("}[1m:30s] offset 1m))`, `a + b * c ^ d`, `-(-(1))`,
		`a and on (x) b or c unless d`, `histogram_quantile(0.9, sum by (le) (rate(h[5m])))`,
		"max(a) # ((((\n + 1", "(0)#\r%0", `label_replace(up, "a", "$1", "b", "(.*)")`, `1e-3 - -2`,
		strings.Repeat("(", 70) + "1" + strings.Repeat(")", 70), strings.Repeat("a+", 70) + "a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		bound := QueryDepth(q)
		if len(q) > MaxQueryBytes || bound > 4*MaxQueryDepth {
			return // the parse would be slow; CheckBudget refuses these
		}
		expr, err := promqlParser.ParseExpr(q)
		if err != nil {
			return
		}
		depth := 0
		parser.Inspect(expr, func(_ parser.Node, path []parser.Node) error {
			depth = max(depth, len(path)+1)
			return nil
		})
		if depth > bound+1 {
			t.Fatalf("QueryDepth(%q) = %d, but the parsed tree is %d nodes deep", q, bound, depth)
		}
	})
}
