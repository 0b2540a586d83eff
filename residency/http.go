package residency

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewHandler serves the sidecar's endpoints:
//
//   - GET /healthz: 200 while the process runs (liveness must not follow Triton or a drain).
//   - GET /readyz: 200 "ok" only when every P0 model is READY in the latest observation and
//     no drain is under way; 503 with the reason otherwise.
//   - GET /metrics: gather (the sidecar's private registry) in Prometheus text format.
//   - POST /drain: starts the drain (or joins the one under way) and answers when it is over:
//     200 "drained", or 504 with the reason when the deadline passed with work left. For
//     Triton's preStop hook (e.g. curl -fsS -XPOST localhost:8090/drain).
func NewHandler(ctl *Controller, dr *Drainer, gather prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := ctl.Ready()
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gather, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST /drain", func(w http.ResponseWriter, r *http.Request) {
		err := dr.Drain(r.Context())
		switch {
		case err == nil:
			fmt.Fprintln(w, "drained")
		case errors.Is(err, ErrDrainTimeout):
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			http.Error(w, "drain still running: "+err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	return mux
}
