package tritontest

import "testing"

// Start creates a server from cfg, serves it on free loopback ports, and
// closes it when the test ends. It fails the test on a bad cfg.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s, err := New(cfg)
	if err != nil {
		tb.Fatalf("tritontest.New: %v", err)
	}
	if err := s.Listen("127.0.0.1:0", "127.0.0.1:0"); err != nil {
		tb.Fatalf("tritontest: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
