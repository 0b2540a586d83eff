package decimalflag

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestParse: Go's flag package read --budget-bytes=010000000000 as octal (1 GiB); each
// integer kind now takes plain decimal only, in either argument form, the error naming the
// flag; other flags, the usage's argument names and what follows the flags are as before.
func TestParse(t *testing.T) {
	parse := func(args ...string) (*flag.FlagSet, *int64, *int, *uint64, *uint, *float64, *bool, *bytes.Buffer, error) {
		var out bytes.Buffer
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(&out)
		i64 := fs.Int64("budget-bytes", 0, "budget")
		i := fs.Int("slots", 4, "slots")
		u64 := fs.Uint64("seed", 1, "seed")
		u := fs.Uint("n", 0, "n")
		f := fs.Float64("rate", 0, "rate") // not an integer: untouched (0x1p3 stays Go's business)
		b := fs.Bool("v", false, "verbose")
		err := Parse(fs, args)
		return fs, i64, i, u64, u, f, b, &out, err
	}
	fs, i64, i, u64, u, f, b, _, err := parse("--budget-bytes=10000000000", "-slots", "-3", "--v", "--seed=7", "--n", "0", "--rate=0x1p3", "--", "--slots=010")
	if err != nil {
		t.Fatal(err)
	}
	if *i64 != 10000000000 || *i != -3 || *u64 != 7 || *u != 0 || *f != 8 || !*b || fs.NArg() != 1 {
		t.Errorf("got %d %d %d %d %v %v %v, want 10000000000 -3 7 0 8 true [--slots=010]", *i64, *i, *u64, *u, *f, *b, fs.Args())
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--budget-bytes=010000000000"}, "budget-bytes"},
		{[]string{"--slots", "0x10"}, "slots"},
		{[]string{"-seed=1_000"}, "seed"},
		{[]string{"--v", "--n=0o7"}, "n"},
		{[]string{"--slots=00"}, "slots"},
		{[]string{"--slots="}, "slots"},
		{[]string{"--slots", "1e3"}, "slots"},
	} {
		_, _, _, _, _, _, _, out, err := parse(tc.args...)
		want := "for flag -" + tc.flag + ": want a whole number in plain decimal"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "-slots int") {
			t.Errorf("%v: got %v, output %q; want an error naming -%s, printed with the usage", tc.args, err, out.String(), tc.flag)
		}
	}
	// What the flag package refuses itself is left to it.
	for _, args := range [][]string{{"--nope=010"}, {"--slots"}, {"---slots=1"}} {
		if _, _, _, _, _, _, _, _, err := parse(args...); err == nil || strings.Contains(err.Error(), "plain decimal") {
			t.Errorf("%v: got %v, want the flag package's own error", args, err)
		}
	}
	// A non-flag ends the flags, as for the flag package.
	if fs, _, i, _, _, _, _, _, err := parse("pos", "--slots=010"); err != nil || *i != 4 || fs.NArg() != 2 {
		t.Errorf("after a positional argument: %v, slots %d", err, *i)
	}
}
