package errtext

import (
	"strings"
	"testing"
)

func TestCutMiddle(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"short", 8, "short"},
		{"query is long: 401", 8, "quer… (18 bytes) … 401"},
		// "é" (two bytes) straddles both cuts: the head backs off before it, the tail starts
		// after it.
		{"abcé" + "xxxxxxxx" + "éxyz", 8, "abc… (18 bytes) …xyz"},
		{"xy", 0, "… (2 bytes) …"},
	}
	for _, tt := range tests {
		if got := CutMiddle(tt.s, tt.max); got != tt.want {
			t.Errorf("CutMiddle(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func TestCutAndQuote(t *testing.T) {
	tests := []struct {
		s     string
		max   int
		cut   string
		quote string
	}{
		{"short", 8, "short", `"short"`},
		{"exactly8", 8, "exactly8", `"exactly8"`},
		{"nine byte", 8, "nine byt… (9 bytes)", `"nine byt"… (9 bytes)`},
		// "é" is two bytes at 7..8: a cut at 8 would split it, so it backs off to 7.
		{"abcdefgé", 8, "abcdefg… (9 bytes)", `"abcdefg"… (9 bytes)`},
		{"x", 0, "… (1 bytes)", `""… (1 bytes)`},
		{strings.Repeat("€", 3), 4, "€… (9 bytes)", `"€"… (9 bytes)`},
	}
	for _, tt := range tests {
		if got := Cut(tt.s, tt.max); got != tt.cut {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.cut)
		}
		if got := Quote(tt.s, tt.max); got != tt.quote {
			t.Errorf("Quote(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.quote)
		}
	}
}
