package prom

import (
	"fmt"
	"strings"
)

// Limits on user-supplied PromQL, checked by [CheckBudget] before the query reaches
// Prometheus's parser. The parser's time grows super-linearly with the depth of the expression
// tree (measured on a 2-core machine, Prometheus v0.316: 16 KiB of `a+a+…` (8k chained
// operators) 0.6 s, 8k nested parentheses 0.5 s, 16k unary minus 1.4 s, 87 KB of summed terms
// 19 s), while 16 KiB of realistic terms at depth ≤ 64 parses in milliseconds. The limits
// are generous for real queries: the scaler's longest preset (Triton's running) is 676
// bytes, its deepest (Triton's service time) 14 deep, and rule and dashboard queries of the kube-prometheus mixins stay under 2 KiB and 20 deep.
const (
	// MaxQueryBytes is the longest query accepted, in bytes: 16 KiB, 24× the longest preset.
	MaxQueryBytes = 16 << 10
	// MaxQueryDepth is the deepest expression accepted, as [QueryDepth] measures it: enough for
	// a sum of 60 terms or 60 nested function calls.
	MaxQueryDepth = 64
)

// CheckBudget returns an error wrapping [ErrBadQuery] when query is longer than
// MaxQueryBytes or deeper than MaxQueryDepth. It scans the bytes once and never parses, so a
// hostile query costs microseconds; the error quotes neither the query nor any part of it.
func CheckBudget(query string) error {
	if n := len(query); n > MaxQueryBytes {
		return fmt.Errorf("%w: the query is %d bytes; the limit is %d bytes (16 KiB)", ErrBadQuery, n, MaxQueryBytes)
	}
	if d := QueryDepth(query); d > MaxQueryDepth {
		return fmt.Errorf("%w: the query nests %d deep; the limit is depth %d (parentheses, brackets, calls and chained operators)", ErrBadQuery, d, MaxQueryDepth)
	}
	return nil
}

// QueryDepth is a cheap upper bound of the depth of query's expression tree, computed by one
// scan without parsing: every ( or [ opens a level, and every operator (+ - * / % ^ == != < >
// <= >= and or unless atan2, unary minus included) adds a level within its group, as a chain
// of binary operators parses into a tree as deep as the chain is long. Strings, comments and
// label matchers inside { } add nothing (matchers do not nest). Unbalanced input is measured
// as far as it goes; the parser reports the syntax error.
func QueryDepth(query string) int {
	type frame struct {
		ops, child int
		brace      bool
	}
	stack := []frame{{}}
	closeTop := func() {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		d := f.ops + f.child + 1
		if f.brace {
			d = 0
		}
		top := &stack[len(stack)-1]
		top.child = max(top.child, d)
	}
	for i := 0; i < len(query); i++ {
		c := query[i]
		top := &stack[len(stack)-1]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(query, i)
		case c == '#':
			// A comment runs to the end of the line, \r or \n (promql/parser/lex.go, isEndOfLine).
			if j := strings.IndexAny(query[i:], "\r\n"); j >= 0 {
				i += j
			} else {
				i = len(query)
			}
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, frame{brace: c == '{' || top.brace})
		case c == ')' || c == ']' || c == '}':
			if len(stack) > 1 {
				closeTop()
			}
		case top.brace:
			// label matchers: = != =~ !~ are not operators
		case strings.IndexByte("+-*/%^<>!", c) >= 0 || c == '=' && i > 0 && query[i-1] == '=':
			top.ops++
		case isWordStart(c):
			j := i + 1
			for j < len(query) && isWordByte(query[j]) {
				j++
			}
			switch strings.ToLower(query[i:j]) {
			case "and", "or", "unless", "atan2":
				top.ops++
			}
			i = j - 1
		}
	}
	for len(stack) > 1 {
		closeTop()
	}
	return stack[0].ops + stack[0].child
}

// skipString returns the index of the quote that closes the string opening at query[i]
// (len(query) when it is not closed). Raw `…` strings have no escapes.
func skipString(query string, i int) int {
	q := query[i]
	for j := i + 1; j < len(query); j++ {
		switch query[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j
		}
	}
	return len(query)
}

func isWordStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isWordByte(c byte) bool { return isWordStart(c) || '0' <= c && c <= '9' }
