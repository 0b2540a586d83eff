// Package decimalflag makes a flag set's integer flags take plain decimal only. Go's flag
// package parses an int, int64, uint or uint64 flag with strconv.ParseInt(s, 0, …), so
// --budget-bytes=010000000000 is octal (1 GiB, not 10 GB), 0x10 is 16 and 1_000 is 1000,
// silently. The catalog, spec and record readers refuse those forms already; this makes the
// command lines agree with them.
package decimalflag

import (
	"flag"
	"fmt"
	"regexp"

	"github.com/inferscale/inferscale/internal/errtext"
)

// plain is an integer in plain decimal: an optional sign, then 0 or digits without a
// leading zero.
var plain = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

// Apply wraps every integer flag fs defines so far (its Get returns an int, int64, uint or
// uint64): a value that is not plain decimal is refused before the flag's own parsing, and
// fs.Parse reports it as `invalid value "010" for flag -budget-bytes: …`, naming the flag.
// Call it after the flags are defined and before fs.Parse. Other flags are left as they are.
// The usage then names the argument of a wrapped flag "value", not "int" (the flag package
// names only its own types), unless its usage text back-quotes a name.
func Apply(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch g.Get().(type) {
		case int, int64, uint, uint64:
			f.Value = decimal{g}
		}
	})
}

// decimal is an integer flag's value that takes plain decimal only.
type decimal struct{ flag.Getter }

// Set refuses s unless it is plain decimal, then sets the wrapped value.
func (d decimal) Set(s string) error {
	if !plain.MatchString(s) {
		return fmt.Errorf("want a whole number in plain decimal, not %s (no leading zero, 0x, 0o, 0b or _)", errtext.Quote(s, 64))
	}
	return d.Getter.Set(s)
}

// String is the wrapped value's; "0" for the zero decimal, which the flag package makes to
// tell a default of 0 (not printed in the usage) from others.
func (d decimal) String() string {
	if d.Getter == nil {
		return "0"
	}
	return d.Getter.String()
}
