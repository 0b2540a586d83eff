package decimalflag

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestApply: Go's flag package read --budget-bytes=010000000000 as octal (1 GiB); each
// integer kind now takes plain decimal only, the error naming the flag, and other flags and
// the defaults in the usage are as before.
func TestApply(t *testing.T) {
	parse := func(args ...string) (*flag.FlagSet, *int64, *int, *uint64, *uint, *float64, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		i64 := fs.Int64("budget-bytes", 0, "budget")
		i := fs.Int("slots", 4, "slots")
		u64 := fs.Uint64("seed", 1, "seed")
		u := fs.Uint("n", 0, "n")
		f := fs.Float64("rate", 0, "rate") // not an integer: untouched (0x1p3 stays Go's business)
		Apply(fs)
		return fs, i64, i, u64, u, f, fs.Parse(args)
	}
	_, i64, i, u64, u, f, err := parse("--budget-bytes=10000000000", "--slots", "-3", "--seed=7", "--n=0", "--rate=0x1p3")
	if err != nil {
		t.Fatal(err)
	}
	if *i64 != 10000000000 || *i != -3 || *u64 != 7 || *u != 0 || *f != 8 {
		t.Errorf("got %d %d %d %d %v, want 10000000000 -3 7 0 8", *i64, *i, *u64, *u, *f)
	}
	for _, tc := range []struct{ arg, flag string }{
		{"--budget-bytes=010000000000", "budget-bytes"},
		{"--slots=0x10", "slots"},
		{"--seed=1_000", "seed"},
		{"--n=0o7", "n"},
		{"--slots=00", "slots"},
		{"--slots=", "slots"},
		{"--slots=1e3", "slots"},
	} {
		_, _, _, _, _, _, err := parse(tc.arg)
		if err == nil || !strings.Contains(err.Error(), "for flag -"+tc.flag+": want a whole number in plain decimal") {
			t.Errorf("%s: got %v, want an error naming -%s", tc.arg, err, tc.flag)
		}
	}
	fs, _, _, _, _, _, _ := parse()
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	fs.PrintDefaults()
	if s := usage.String(); strings.Contains(s, "panic") || !strings.Contains(s, "(default 4)") || strings.Contains(s, "(default 0)") {
		t.Errorf("usage:\n%s\nwant the non-zero defaults only, no panic", s)
	}
	if got := fs.Lookup("slots").Value.(flag.Getter).Get(); got != 4 {
		t.Errorf("Get = %v, want 4", got)
	}
}
