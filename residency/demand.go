package residency

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/inferscale/inferscale/prom"
)

// ModelPlaceholder in a demand query template stands for a model's name.
const ModelPlaceholder = "$model"

// PromDemand reads the demand of models that are not loaded in this pod from Prometheus through
// a [prom.Poller], with one grouped query per refresh for every model: by default Triton's
// preset request rate (sum of rate(nv_inference_request_success|failure[1m]) by namespace and
// model across the pods), or an operator's per-model template — typically a gateway's request
// counter, the only place requests for a model loaded nowhere show up — with ModelPlaceholder
// for the model name, rewritten by [prom.GroupByModel] into one query grouped by the model
// label (`sum(rate(g{model="$model"}[1m]))` is evaluated as
// `sum by (model) (rate(g[1m]))`). Queries are confined to the namespace by the poller.
// The poller's Run must be running.
type PromDemand struct {
	poller    *prom.Poller
	namespace string
	query     string // grouped template; "" selects the Triton preset
	label     string // the model label query is split by
}

// NewPromDemand returns a demand source over poller for namespace; template "" selects the
// Triton preset. Errors: an empty namespace, or a template that [prom.GroupByModel] refuses.
func NewPromDemand(poller *prom.Poller, namespace, template string) (*PromDemand, error) {
	if namespace == "" {
		return nil, errors.New("demand: namespace is empty; want the pod's namespace")
	}
	d := &PromDemand{poller: poller, namespace: namespace}
	if template != "" {
		q, label, err := prom.GroupByModel(template, ModelPlaceholder)
		if err != nil {
			return nil, fmt.Errorf("demand query: %w", err)
		}
		d.query, d.label = q, label
	}
	return d, nil
}

// request is the poller request for model m; every model's request shares one query.
func (d *PromDemand) request(m string) prom.Request {
	if d.query == "" {
		return prom.Request{Namespace: d.namespace, Kind: prom.KindRate, Engine: prom.EngineTriton, Model: m}
	}
	return prom.Request{Namespace: d.namespace, Kind: prom.KindRate, Query: d.query, ModelLabel: d.label, Model: m}
}

// Rates implements DemandSource from the poller's last snapshot; it never waits on Prometheus.
// A model whose query has not been evaluated yet, has no series, failed, or gave a value that
// is not a finite rate ≥ 0 is left out; failures are joined into the error.
func (d *PromDemand) Rates(_ context.Context, models []string) (map[string]float64, error) {
	out := make(map[string]float64, len(models))
	var errs []error
	for _, m := range models {
		key, err := d.poller.Subscribe(d.request(m))
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
