package main

import (
	"net"
	"testing"
)

// TestExitCode: the health probe's exit status tells a misconfigured probe (2, as package
// flag's convention) from a server that is not serving (1).
func TestExitCode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"probe flag does not parse", []string{"--health-probe=" + closed, "--health-probe-timeout=soon"}, 2},
		{"probe address out of range", []string{"--health-probe=127.0.0.1:99999"}, 2},
		{"nothing serving", []string{"--health-probe=" + closed, "--health-probe-timeout=300ms"}, 1},
		{"a boolean flag's value given apart", []string{"--object-metrics", "false", "--max-triggers=0"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(run(tt.args)); got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
		})
	}
}

// TestStrayArgument: an argument that is not a flag is a usage error (exit 2) that says the
// flags after it were not read. Before, it exited 1, as a failure of a valid configuration
// would, and said only "unexpected arguments".
func TestStrayArgument(t *testing.T) {
	err := run([]string{"--object-metrics", "false", "--max-triggers=0"})
	const want = `usage: unexpected arguments ["false" "--max-triggers=0"]: scaler takes only flags, and the flags after "false" were not read (a boolean flag takes its value as --object-metrics=false)`
	if err == nil || err.Error() != want || exitCode(err) != 2 {
		t.Errorf("run = %v (exit %d), want exit 2 and %q", err, exitCode(err), want)
	}
}
