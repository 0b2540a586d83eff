// Package errtext bounds the text an error repeats from its input: a value a user or a
// server sent can be any size, and an error that quotes it whole is logged, stored and
// returned over gRPC whole. Every cut is at a rune boundary and says how long the text was.
package errtext

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Cut returns s when it has at most max bytes (max ≥ 0), else its first max bytes or fewer
// (backed off to a rune boundary) followed by "… (<len> bytes)".
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:boundary(s, max)] + fmt.Sprintf("… (%d bytes)", len(s))
}

// CutMiddle returns s when it has at most max bytes (max ≥ 0), else its first and last max/2
// bytes or fewer (each backed off to a rune boundary) joined by "… (<len> bytes) …": for an
// error whose cause comes last after a long quoted input (a query, then ": 401").
func CutMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	tail := len(s) - max/2
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:boundary(s, max/2)] + fmt.Sprintf("… (%d bytes) …", len(s)) + s[tail:]
}

// Quote is strconv.Quote of s when s has at most max bytes, else the quoted first max bytes
// or fewer (backed off to a rune boundary) followed by "… (<len> bytes)".
func Quote(s string, max int) string {
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:boundary(s, max)]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// boundary is the largest n ≤ limit (and ≥ 0) at which s[n] starts a rune.
func boundary(s string, limit int) int {
	n := max(0, min(limit, len(s)))
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
