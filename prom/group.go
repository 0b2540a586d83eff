package prom

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// GroupByModel turns a per-model PromQL template into one grouped query: the template selects
// one model with an equality matcher label="<placeholder>" on every selector (for example
// `sum(rate(gateway_requests_total{model="$model"}[1m]))`); the result drops those matchers
// and adds label to the grouping of every aggregation and to every `on (…)` vector match, so
// it yields one series per model carrying label (here
// `sum by (model) (rate(gateway_requests_total[1m]))`). Evaluated once with
// [Request.ModelLabel] set to label, it replaces one query per model with one query for all of
// them (as the presets are grouped), and each model reads the series whose label equals its
// name.
//
// The rewrite is the per-model template evaluated for every model at once only when each
// selector is narrowed to one model by that matcher, so the template is refused (errors wrap
// [ErrBadQuery]) when it is over the budget of [CheckBudget] or does not parse, when a
// selector lacks the matcher, when the placeholder appears anywhere else (a regex, another
// label, a string argument), when the matchers name different labels, when it uses a function
// that drops or invents labels (scalar, absent, absent_over_time), or when it returns
// something other than an instant vector.
func GroupByModel(template, placeholder string) (query, label string, err error) {
	if placeholder == "" {
		return "", "", fmt.Errorf("%w: the model placeholder is empty", ErrBadRequest)
	}
	if err := CheckBudget(template); err != nil {
		return "", "", err
	}
	expr, err := promqlParser.ParseExpr(template)
	if err != nil {
		return "", "", fmt.Errorf("%w: parse %q: %w", ErrBadQuery, template, err)
	}
	fail := func(format string, args ...any) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q cannot be grouped by model: %s", ErrBadQuery, template, fmt.Sprintf(format, args...))
	}
	var bad string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if bad != "" {
			return nil
		}
		switch n := node.(type) {
		case *parser.VectorSelector:
			kept := n.LabelMatchers[:0:0]
			found := false
			for _, m := range n.LabelMatchers {
				switch {
				case m.Type == labels.MatchEqual && m.Value == placeholder && (label == "" || m.Name == label):
					label, found = m.Name, true
				case strings.Contains(m.Value, placeholder):
					bad = fmt.Sprintf("matcher %s: the placeholder %s must be the whole value of one equality matcher on the model label", m, placeholder)
				default:
					kept = append(kept, m)
				}
			}
			if !found && bad == "" {
				bad = fmt.Sprintf("selector %s has no matcher label=%q narrowing it to one model", n, placeholder)
			}
			n.LabelMatchers = kept
		case *parser.StringLiteral:
			if strings.Contains(n.Val, placeholder) {
				bad = fmt.Sprintf("string %q: the placeholder may appear only as a matcher value", n.Val)
			}
		case *parser.Call:
			switch n.Func.Name {
			case "scalar", "absent", "absent_over_time":
				bad = fmt.Sprintf("%s() drops or invents labels, so its result cannot be split by model", n.Func.Name)
			}
		}
		return nil
	})
	if bad != "" {
		return fail("%s", bad)
	}
	// Now that the label is known, keep it through every aggregation and vector match.
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.AggregateExpr:
			if n.Without {
				n.Grouping = slices.DeleteFunc(n.Grouping, func(l string) bool { return l == label })
			} else if !slices.Contains(n.Grouping, label) {
				n.Grouping = append(n.Grouping, label)
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil {
				if vm.On {
					if !slices.Contains(vm.MatchingLabels, label) {
						vm.MatchingLabels = append(vm.MatchingLabels, label)
					}
				} else {
					vm.MatchingLabels = slices.DeleteFunc(vm.MatchingLabels, func(l string) bool { return l == label })
				}
			}
		}
		return nil
	})
	if t := expr.Type(); t != parser.ValueTypeVector {
		return fail("it returns a %s; it must return an instant vector", t)
	}
	query = expr.String()
	if _, err := promqlParser.ParseExpr(query); err != nil {
		return fail("the grouped form %q does not parse: %v", query, err)
	}
	return query, label, nil
}
