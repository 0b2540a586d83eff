package prom_test

import (
	"fmt"

	"github.com/inferscale/inferscale/prom"
)

func ExampleConfine() {
	q, err := prom.Confine(`sum(rate(requests_total{namespace=~".*",model="m"}[1m]))`, "team-a", "namespace")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q)
	// Output: sum(rate(requests_total{model="m",namespace="team-a"}[1m]))
}

func ExamplePresetQuery() {
	q, _ := prom.PresetQuery(prom.EngineTriton, prom.KindQueue, prom.Labels{Namespace: "namespace", Pod: "pod"})
	fmt.Println(q)
	// Output: sum by (namespace, model) ({__name__=~"nv_inference_pending_request_count|inferscale_front_held_requests"})
}
