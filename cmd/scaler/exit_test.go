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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitCode(run(tt.args)); got != tt.want {
				t.Errorf("exit %d, want %d", got, tt.want)
			}
		})
	}
}
