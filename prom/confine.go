package prom

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// ErrBadRequest is wrapped by every error that is caused by the caller's input (a bad field
// of a [Request], a query that does not parse). The scaler maps it to gRPC InvalidArgument.
var ErrBadRequest = errors.New("bad request")

// ErrBadQuery is wrapped by errors about a PromQL query that cannot be used: it does not
// parse, or it does not return an instant vector or a scalar. errors.Is(err, ErrBadRequest)
// also holds for these errors.
var ErrBadQuery = fmt.Errorf("%w: bad PromQL query", ErrBadRequest)

// promqlParser is Prometheus's own parser with default options: no experimental functions
// and no syntax newer than what a Prometheus 2.x server understands is accepted by default.
var promqlParser = parser.NewParser(parser.Options{})

// Confine returns query rewritten so that every vector and matrix selector in it carries
// exactly one matcher on label, the equality label="namespace". Any matcher the query
// already had on label (label="other", label=~".*", label!="x", …) is removed first, so a
// query cannot widen or move its scope. Subqueries, offsets and @ modifiers are kept; the
// result is the parser's canonical printing of the rewritten tree.
//
// Errors wrap [ErrBadQuery] when query is over the budget of [CheckBudget] (checked before
// parsing; the message does not quote the query) or does not parse (the message quotes the
// query), and [ErrBadRequest] when namespace is empty or label is not a valid Prometheus label
// name.
func Confine(query, namespace, label string) (string, error) {
	expr, _, err := confineExpr(query, namespace, label)
	if err != nil {
		return "", err
	}
	return expr.String(), nil
}

// checkConfined parses out again and reports whether every selector carries exactly the
// pin matcher on label. It guards against a printer/parser round trip that would lose the
// matcher, so confinement holds by construction, not by trust in the printer.
func checkConfined(out, namespace, label string) error {
	expr, err := promqlParser.ParseExpr(out)
	if err != nil {
		return fmt.Errorf("re-parse confined query %q: %w", out, err)
	}
	var bad error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || bad != nil {
			return nil
		}
		n := 0
		for _, m := range vs.LabelMatchers {
			if m.Name != label {
				continue
			}
			n++
			if m.Type != labels.MatchEqual || m.Value != namespace {
				bad = fmt.Errorf("selector %s has matcher %s", vs, m)
			}
		}
		if n != 1 && bad == nil {
			bad = fmt.Errorf("selector %s has %d matchers on %q, want 1", vs, n, label)
		}
		return nil
	})
	return bad
}

// confineExpr parses query and pins every selector to namespace; see [Confine]. replaced
// lists, once each in order of appearance, the matchers on label that were removed and
// widened or moved the scope (anything but label="namespace" itself).
func confineExpr(query, namespace, label string) (expr parser.Expr, replaced []string, err error) {
	if namespace == "" {
		return nil, nil, fmt.Errorf("%w: namespace is empty; confinement needs a namespace", ErrBadRequest)
	}
	if !model.LegacyValidation.IsValidLabelName(label) {
		return nil, nil, fmt.Errorf("%w: namespace label %q is not a valid label name ([a-zA-Z_][a-zA-Z0-9_]*)", ErrBadRequest, label)
	}
	if err := CheckBudget(query); err != nil {
		return nil, nil, err
	}
	expr, err = promqlParser.ParseExpr(query)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: parse %q: %w", ErrBadQuery, query, err)
	}
	pin := labels.MustNewMatcher(labels.MatchEqual, label, namespace)
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		kept := make([]*labels.Matcher, 0, len(vs.LabelMatchers)+1)
		for _, m := range vs.LabelMatchers {
			if m == nil {
				continue
			}
			if m.Name == label {
				if m.Type != labels.MatchEqual || m.Value != namespace {
					if s := m.String(); !slices.Contains(replaced, s) {
						replaced = append(replaced, s)
					}
				}
				continue
			}
			kept = append(kept, m)
		}
		vs.LabelMatchers = append(kept, pin)
		return nil
	})
	if err := checkConfined(expr.String(), namespace, label); err != nil {
		return nil, nil, fmt.Errorf("%w: %q cannot be confined to namespace %q: %w", ErrBadQuery, query, namespace, err)
	}
	return expr, replaced, nil
}
