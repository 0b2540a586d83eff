package residency

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/inferscale/inferscale/scaler/prom"
)

// ModelPlaceholder in a demand query template is replaced by each model's name.
const ModelPlaceholder = "$model"

// PromDemand reads the demand of models that are not loaded in this pod from Prometheus through
// the scaler's poller (scaler/prom): by default Triton's preset request rate of the model across
// the namespace's pods (sum of rate(nv_inference_request_success|failure[1m])), or a query
// template of the operator's — typically a gateway's request counter, the only place requests
// for a model loaded nowhere show up — with ModelPlaceholder for the model name. Queries are
// confined to Namespace by the poller. The poller's Run must be running.
type PromDemand struct {
	poller    *prom.Poller
	namespace string
	template  string
}

// NewPromDemand returns a demand source over poller for namespace; template "" selects the
// Triton preset.
func NewPromDemand(poller *prom.Poller, namespace, template string) (*PromDemand, error) {
	if namespace == "" {
		return nil, errors.New("demand: namespace is empty; want the pod's namespace")
	}
	if template != "" && !strings.Contains(template, ModelPlaceholder) {
		return nil, fmt.Errorf("demand query %q: want a PromQL template containing %s", template, ModelPlaceholder)
	}
	return &PromDemand{poller: poller, namespace: namespace, template: template}, nil
}

// Rates implements DemandSource from the poller's last snapshot; it never waits on Prometheus.
// A model whose query has not been evaluated yet, came back empty, failed, or gave a value that
// is not a finite rate ≥ 0 is left out; failures are joined into the error.
func (d *PromDemand) Rates(_ context.Context, models []string) (map[string]float64, error) {
	out := make(map[string]float64, len(models))
	var errs []error
	for _, m := range models {
		r := prom.Request{Namespace: d.namespace, Kind: prom.KindRate, Engine: prom.EngineTriton, Model: m}
		if d.template != "" {
			r = prom.Request{Namespace: d.namespace, Kind: prom.KindRate, Query: strings.ReplaceAll(d.template, ModelPlaceholder, m)}
		}
		key, err := d.poller.Subscribe(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("model %q: %w", m, err))
			continue
		}
		res := d.poller.Result(key)
		switch {
		case res.Err != nil:
			errs = append(errs, fmt.Errorf("model %q: %w", m, res.Err))
		case res.Empty || res.EvaluatedAt.IsZero():
		case math.IsNaN(res.Value) || math.IsInf(res.Value, 0) || res.Value < 0:
			errs = append(errs, fmt.Errorf("model %q: rate %v is not a finite value ≥ 0", m, res.Value))
		default:
			out[m] = res.Value
		}
	}
	return out, errors.Join(errs...)
}
