package sidecar

import (
	"net/http"
	"slices"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/front"
	"github.com/inferscale/inferscale/residency/plan"
)

// readiness is the front's view of the controller: the catalog, observation and unplaceable
// models of its latest loop (Status), or the catalog read at start before the first loop.
type readiness struct {
	ctl     *residency.Controller
	initial plan.Catalog
}

// Verdict implements front.Readiness: outside the catalog → NotInCatalog; unplaceable in this
// pod → NeverFits; quarantined → Quarantined; READY at the last observation → Ready; LOADING
// then, or a load the controller has issued since (Controller.LoadInFlight) → Loading; else
// NotReady (hold: the planner counts it as queued work and may load it).
func (r readiness) Verdict(model string) front.Verdict {
	st := r.ctl.Status()
	cat := st.Catalog
	if st.Observed.Models == nil { // not observed yet
		cat = r.initial
	}
	if _, ok := cat.Model(model); !ok {
		return front.NotInCatalog
	}
	if slices.Contains(st.Unplaceable, model) {
		return front.NeverFits
	}
	ms := st.Observed.Models[model]
	switch {
	case ms.Quarantined:
		return front.Quarantined
	case ms.State == plan.StateReady:
		return front.Ready
	case ms.State == plan.StateLoading || r.ctl.LoadInFlight(model):
		return front.Loading
	}
	return front.NotReady
}

// drainFront makes a POST /drain also start the front's drain (front.StartDrain: requests it
// would hold fail UNAVAILABLE with a pushback, so clients retry on another pod; READY models
// are still served until SIGTERM) before h serves it.
func drainFront(h http.Handler, fr *front.Front) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/drain" {
			fr.StartDrain()
		}
		h.ServeHTTP(w, r)
	})
}
