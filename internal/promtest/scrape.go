package promtest

import (
	"io"
	"testing"

	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"
)

// ModelValue parses a text exposition (what a /metrics endpoint answers) and returns the sum,
// over the series of the family name whose "model" label is model (a series without one reads
// as model ""), of each gauge's or counter's value: as Prometheus would scrape it, summed over
// any other labels (a Triton model's versions). 0 when no series matches. A body that does not
// parse fails the test.
func ModelValue(t testing.TB, body io.Reader, name, model string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parsing the metrics exposition: %v", err)
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		label := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "model" {
				label = l.GetValue()
			}
		}
		if label == model {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}
