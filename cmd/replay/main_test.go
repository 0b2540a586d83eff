package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"slots", []string{"--slots=0"}, "slots = 0: want 1..1024"},
		{"cold start", []string{"--cold-start=soon"}, `cold-start "soon"`},
		{"policy", []string{"--policies=magic"}, `policy "magic"`},
		{"format", []string{"--format=parquet"}, `format "parquet"`},
		{"decode", []string{"--decode-tps=0"}, "decode-tps 0: want > 0"},
		{"stray argument", []string{"trace.csv"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(append(tt.args, "--out", t.TempDir()))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestRunEmbeddedTrace(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"--out", dir, "--policies=inferscale,static", "--progress=false"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"table.md", "timeseries.csv", "report.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		if err := run([]string{arg}); err != nil {
			t.Errorf("run(%q) = %v, want nil (usage printed, exit 0)", arg, err)
		}
	}
}
