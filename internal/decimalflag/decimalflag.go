// Package decimalflag makes a flag set's integer flags take plain decimal only. Go's flag
// package parses an int, int64, uint or uint64 flag with strconv.ParseInt(s, 0, …), so
// --budget-bytes=010000000000 is octal (1 GiB, not 10 GB), 0x10 is 16 and 1_000 is 1000,
// silently. The catalog, spec and record readers refuse those forms already; this makes the
// command lines agree with them.
package decimalflag

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/inferscale/inferscale/internal/errtext"
)

// plain is an integer in plain decimal: an optional sign, then 0 or digits without a
// leading zero.
var plain = regexp.MustCompile(`^[-+]?(0|[1-9][0-9]*)$`)

// Parse is fs.Parse(args) with the values of fs's integer flags (whose Get returns an int,
// int64, uint or uint64) checked first: one that is not plain decimal is an error
// `invalid value "010" for flag -budget-bytes: want a whole number in plain decimal, …`, printed
// with the usage and handled as fs's error handling says, as the flag package does with a
// value it cannot parse. The arguments are walked as the flag package walks them (up to "--"
// or the first non-flag; "-name=value", or "-name value" for a flag that is not boolean);
// anything it would refuse itself (an unknown flag, bad syntax) is left to fs.Parse. The
// flags' own types, and so the usage ("-slots int"), are unchanged.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := check(fs, args); err != nil {
		fmt.Fprintln(fs.Output(), err)
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fs.PrintDefaults()
		}
		switch fs.ErrorHandling() {
		case flag.ExitOnError:
			os.Exit(2)
		case flag.PanicOnError:
			panic(err)
		}
		return err
	}
	return fs.Parse(args)
}

// check returns the error for the first integer flag in args whose value is not plain decimal.
func check(fs *flag.FlagSet, args []string) error {
	for len(args) > 0 {
		s := args[0]
		args = args[1:]
		if len(s) < 2 || s[0] != '-' || s == "--" {
			return nil // the flags end here
		}
		name := strings.TrimPrefix(s[1:], "-")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return nil // bad syntax: fs.Parse says so
		}
		value, hasValue := "", false
		if i := strings.IndexByte(name, '='); i >= 0 {
			name, value, hasValue = name[:i], name[i+1:], true
		}
		f := fs.Lookup(name)
		if f == nil {
			return nil // unknown (or -h): fs.Parse says so
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if !hasValue {
			if len(args) == 0 {
				return nil // fs.Parse: "flag needs an argument"
			}
			value, args = args[0], args[1:]
		}
		if !isInteger(f) || plain.MatchString(value) {
			continue
		}
		return fmt.Errorf("invalid value %s for flag -%s: want a whole number in plain decimal (no leading zero, 0x, 0o, 0b or _)", errtext.Quote(value, 64), name)
	}
	return nil
}

// isInteger reports whether f is an integer flag: its Get returns an int, int64, uint or uint64.
func isInteger(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return true
	}
	return false
}
