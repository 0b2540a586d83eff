package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMarshalParseRoundTrip(t *testing.T) {
	want := Record{Model: "on", Digest: "sha256:x", Profile: "1g.10gb", SLOThroughputRPS: 37.5, SuccessRate: 0.999,
		LatencySeconds:  Latency{P50: 0.1, P95: 0.2, P99: 0.3},
		Memory:          Memory{SteadyBytes: 1 << 30, PeakBytes: 1 << 30, SwapPeakBytes: 2 << 30, ReturnedAfterUnload: true},
		LoadTimeSeconds: 3, Verdict: Verdict{Allowed: true, HeadroomBytes: 5, Limits: []string{"x"}},
		Curve: []Point{{OfferedRPS: 10, ThroughputRPS: 10, Stable: true, Passed: true, Windows: 4, ErrorsByCode: map[string]int{"Unavailable": 1}}}}
	b, err := Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "model: \"on\"\n") && !strings.HasPrefix(string(b), "model: on\n") {
		t.Errorf("record starts %q, want the model key first", string(b)[:20])
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseErrorsNameKeys(t *testing.T) {
	_, err := Parse([]byte("model: m\nprofile: 1G\nmemory: {peakBytes: -1}\nsuccessRate: 2\nsloThroughputRPZ: 1\n"))
	for _, want := range []string{"sloThroughputRPZ: unknown field (line 5)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	_, err = Parse([]byte("model: m\nprofile: 1G\nmemory: {peakBytes: -1}\nsuccessRate: 2\n"))
	for _, want := range []string{`profile: "1G" is not a profile name`, "memory.peakBytes: -1 out of range", "successRate: 2 out of range",
		"sloThroughputRPS: missing (cmd/capacity writes it; absent, it would read as 0 or false)", "verdict.allowed: missing"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
}

// TestParseNullRequiredKey: a required key written as null reads as 0 or false just as an
// absent one does, so it is refused as missing.
func TestParseNullRequiredKey(t *testing.T) {
	for _, tt := range []struct{ give, want string }{
		{"model: m\nprofile: 1g.10gb\nsloThroughputRPS: 37.5\nverdict: {allowed: null}\n", "verdict.allowed: missing"},
		{"model: m\nprofile: 1g.10gb\nsloThroughputRPS: ~\nverdict: {allowed: true}\n", "sloThroughputRPS: missing"},
		{"model: m\nprofile: 1g.10gb\nsloThroughputRPS: 37.5\nverdict:\n", "verdict.allowed: missing"},
	} {
		if _, err := Parse([]byte(tt.give)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.give, err, tt.want)
		}
	}
}

// FuzzParse: any input parses to a record that validates, or fails; never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("model: on\nprofile: 1g.10gb\nsloThroughputRPS: 37.5\nverdict: {allowed: true}\n"))
	f.Add([]byte("model: y\nprofile: 1g.10gb\nmemory: {peakBytes: 1e3}\n"))
	f.Add([]byte("model: no\nprofile: 1g.10gb\ncurve: [{offeredRPS: .inf}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("Parse accepted a record Validate rejects: %v", err)
		}
	})
}

// TestReadIsBounded: a record file over MaxBytes (here valid YAML padded with comments, which
// the old unbounded read accepted) is refused naming the path, and an endless file is not read
// without end.
func TestReadIsBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.yaml")
	body := "model: m\nprofile: 1g.10gb\nsloThroughputRPS: 10\n" + strings.Repeat("# padding\n", MaxBytes/10+1)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), "larger than") || !strings.Contains(err.Error(), path) {
		t.Errorf("Read of a %d-byte record = %v; want ErrRecord naming %s and the limit", len(body), err, path)
	}
	if _, err := Read("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Read(/dev/zero) = %v; want the size limit", err)
	}
}

// TestParseErrorIsBounded: a file that is not a record (a `record:` pointing at
// /etc/passwd, or a file of unknown keys) gives an error of at most five lines of 160
// bytes; before, the decoder's every line came back, quoting the file.
func TestParseErrorIsBounded(t *testing.T) {
	var keys strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&keys, "secret%05d: value\n", i)
	}
	tests := []struct {
		name      string
		give      string
		wantLines []string
	}{
		{"10,000 unknown keys", keys.String(), []string{"secret00000", "… and 9995 more lines"}},
		{"one long line", "root:x:0:0:" + strings.Repeat("x", 10000) + "\n", []string{"… (", " bytes)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("Parse = %v, want ErrRecord", err)
			}
			msg := err.Error()
			if n := strings.Count(msg, "\n") + 1; n > maxErrLines+1 || len(msg) > (maxErrLines+1)*(maxErrLineBytes+40) {
				t.Errorf("error is %d lines, %d bytes: %.400q", n, len(msg), msg)
			}
			for _, w := range tt.wantLines {
				if !strings.Contains(msg, w) {
					t.Errorf("error %.400q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "secret00009") {
				t.Errorf("error repeats the 10th key: %.400q", msg)
			}
		})
	}
}

// TestParseRefusesOtherNumberNotations: the decoder read sloThroughputRPS: 0x10 as 16,
// 1_000 as 1000, .5 as 0 and -.inf as -9.223372036854776e+18; a record's numbers are plain
// decimal or exponent notation (JSON's syntax), as cmd/capacity writes them.
func TestParseRefusesOtherNumberNotations(t *testing.T) {
	const head = "model: m\nprofile: 1g.10gb\nverdict: {allowed: true}\n"
	tests := []struct{ give, want string }{
		{"0x10", `"0x10" (line 4): write numbers in plain decimal or exponent notation`},
		{"1_000", `"1_000" (line 4): write numbers`},
		{"0o17", `"0o17" (line 4): write numbers`},
		{"-.inf", `"-.inf" (line 4): write numbers`},
		{".nan", `".nan" (line 4): write numbers`},
		{".5", `".5" (line 4): write numbers`},
		{"+5", `"+5" (line 4): write numbers`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(head + "sloThroughputRPS: " + tt.give + "\n"))
		if !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sloThroughputRPS: %s: Parse = %v, want ErrRecord containing %q", tt.give, err, tt.want)
		}
	}
	for _, ok := range []string{"40", "2.5", "1e3", "1.5E+02", "0", "1e+03"} {
		if r, err := Parse([]byte(head + "sloThroughputRPS: 1\nloadTimeSeconds: " + ok + "\n")); err != nil {
			t.Errorf("loadTimeSeconds: %s: Parse = %v, want it read", ok, err)
		} else if want, _ := strconv.ParseFloat(ok, 64); r.LoadTimeSeconds != want {
			t.Errorf("loadTimeSeconds: %s read as %v", ok, r.LoadTimeSeconds)
		}
	}
}

// TestFileNameIsOnePathElement: a vLLM model name with a slash went into a folder that did
// not exist (the write failed after the measurement); ../ went outside --out.
func TestFileNameIsOnePathElement(t *testing.T) {
	tests := []struct{ model, want string }{
		{"classifier-v5", "classifier-v5.1g.10gb.yaml"},
		{"meta-llama/Llama-3.1-8B-Instruct", "meta-llama_Llama-3.1-8B-Instruct.1g.10gb.yaml"},
		{"../../etc/cron.d/x", ".._.._etc_cron.d_x.1g.10gb.yaml"},
		{"a\\b c\x00é", "a_b_c___.1g.10gb.yaml"},
	}
	for _, tt := range tests {
		got := FileName(tt.model, "1g.10gb")
		if got != tt.want || filepath.Base(got) != got {
			t.Errorf("FileName(%q) = %q, want %q", tt.model, got, tt.want)
		}
	}
}

// TestParseKeysExact: a record's keys are fixed (docs/capacity.md), case included:
// SLOTHROUGHPUTRPS was read as sloThroughputRPS. A required key given through a merge key is
// present (`<<: {sloThroughputRPS: 400}` was reported missing).
func TestParseKeysExact(t *testing.T) {
	_, err := Parse([]byte("model: m\nprofile: 1g.10gb\nSLOTHROUGHPUTRPS: 4000\nverdict: {allowed: true}\n"))
	want := "invalid admission record: SLOTHROUGHPUTRPS: unknown field; keys are case-sensitive: want sloThroughputRPS (line 3)"
	if err == nil || err.Error() != want {
		t.Errorf("SLOTHROUGHPUTRPS: err = %v\nwant %s", err, want)
	}
	r, err := Parse([]byte("model: m\nprofile: 1g.10gb\n<<: {sloThroughputRPS: 400}\nverdict: {<<: {allowed: true}}\n"))
	if err != nil || r.SLOThroughputRPS != 400 || !r.Verdict.Allowed {
		t.Errorf("merged keys: %v allowed %v, err %v; want 400, true, no error", r.SLOThroughputRPS, r.Verdict.Allowed, err)
	}
}

// TestParseMergeBomb: a record whose merge keys name one mapping 2^40 times is refused by its
// unknown keys at once; the strict reader worked out every copy and never finished.
func TestParseMergeBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("_x0: &a0 {p50: 0.1}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "_x%d: &a%d {<<: [*a%d, *a%d]}\n", i, i, i-1, i-1)
	}
	b.WriteString("model: m\nprofile: 1g.10gb\nsloThroughputRPS: 4\nverdict: {allowed: true}\nlatencySeconds: {<<: [*a40, *a40]}\n")
	_, err := Parse([]byte(b.String()))
	if want := "invalid admission record: _x0: unknown field (line 1)\n_x1: unknown field (line 2)\n"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %.300v\nwant it to begin %s", err, want)
	}
}
