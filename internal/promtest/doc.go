// Package promtest runs a real Prometheus server for tests, with an exporter whose values
// the test sets, a proxy that makes Prometheus slow, and [ModelValue], which reads one model's
// value from a /metrics answer as Prometheus would scrape it.
//
// [Start] runs the Debian prometheus binary (2.42; /usr/bin/prometheus, or $PROMETHEUS_BIN)
// on a free loopback port with a 1 s scrape interval, scraping the targets it is given
// through a file_sd file that [Server.SetTargets] rewrites. When the binary is missing the
// test is skipped, or fails when INFERSCALE_REQUIRE_PROMETHEUS=1 (make test sets it).
//
//	exp := promtest.NewExporter(t)
//	exp.Gauge("nv_inference_pending_request_count", "namespace", "model").WithLabelValues("a", "m").Set(7)
//	srv := promtest.Start(t, exp.Target())
//	srv.WaitFor(t, `nv_inference_pending_request_count`, promtest.HasValue(7), 30*time.Second)
package promtest
