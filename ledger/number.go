package ledger

import (
	"regexp"
	"strconv"
)

// numberRE is a number in plain decimal or exponent notation; its groups are the sign, the
// integer digits, the fraction digits and the exponent.
var numberRE = regexp.MustCompile(`^([-+]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]+))?$`)

// PlainNumber splits s, a number in plain decimal or exponent notation (1000, 2.5, .5, 1e3,
// -4E-2), into its sign, integer digits, fraction digits and exponent (index 1 to 4; index 0
// is s), or returns nil when s is not one: 1_000, 0x10, 0x1p3, NaN, Inf, " 1", "." and "" are
// not. It is the rule both readers of numbers follow: the spec file's (ledger/specfile, where
// yaml.v3 would read 1_000 as 1000 and 0x10 as 16) and the live price annotation's
// (ledger/kube, where strconv.ParseFloat would read 0x1p3 as 8 and 1_0 as 10).
func PlainNumber(s string) []string {
	m := numberRE.FindStringSubmatch(s)
	if m == nil || m[2] == "" && m[3] == "" {
		return nil
	}
	return m
}

// LeadingZero reports whether the integer digits of m, a PlainNumber, start with a zero that
// is not the whole of them (0367 and 012, not 0 or 0.5): yaml.v3 reads such a number as octal,
// so neither reader accepts it.
func LeadingZero(m []string) bool {
	return len(m[2]) > 1 && m[2][0] == '0'
}

// ParsePlainNumber reads s by the PlainNumber and LeadingZero rules; ok is false when s breaks
// them. A number past float64 reads as ±Inf with ok true, for the caller's range check to
// refuse.
func ParsePlainNumber(s string) (v float64, ok bool) {
	m := PlainNumber(s)
	if m == nil || LeadingZero(m) {
		return 0, false
	}
	v, _ = strconv.ParseFloat(s, 64) // a PlainNumber parses; past float64 it is ±Inf (ErrRange)
	return v, true
}
