package prom

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGroupByModel(t *testing.T) {
	tests := []struct {
		name      string
		give      string
		want      string
		wantLabel string
	}{
		{name: "gateway counter", give: `sum(rate(gateway_requests_total{model="$model"}[1m]))`,
			want: `sum by (model) (rate(gateway_requests_total[1m]))`, wantLabel: "model"},
		{name: "other label name, other matchers kept", give: `sum(rate(req_total{model_name="$model",code="200"}[5m]))`,
			want: `sum by (model_name) (rate(req_total{code="200"}[5m]))`, wantLabel: "model_name"},
		{name: "existing grouping extended", give: `sum by (route) (rate(r{model="$model"}[1m]))`,
			want: `sum by (route, model) (rate(r[1m]))`, wantLabel: "model"},
		{name: "without drops the model label from its list", give: `sum without (model, pod) (rate(r{model="$model"}[1m]))`,
			want: `sum without (pod) (rate(r[1m]))`, wantLabel: "model"},
		{name: "no aggregation", give: `rate(r{model="$model"}[1m])`, want: `rate(r[1m])`, wantLabel: "model"},
		{name: "scalar arithmetic", give: `2 * sum(rate(r{model="$model"}[1m]))`,
			want: `2 * sum by (model) (rate(r[1m]))`, wantLabel: "model"},
		{name: "on() match keeps the model", give: `sum(rate(a{model="$model"}[1m])) + on () sum(rate(b{model="$model"}[1m]))`,
			want: `sum by (model) (rate(a[1m])) + on (model) sum by (model) (rate(b[1m]))`, wantLabel: "model"},
		{name: "ignoring(model) no longer ignores it", give: `a{model="$model"} / ignoring (model, pod) b{model="$model"}`,
			want: `a / ignoring (pod) b`, wantLabel: "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, label, err := GroupByModel(tt.give, "$model")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("query (-want +got):\n%s", diff)
			}
			if label != tt.wantLabel {
				t.Errorf("label = %q, want %q", label, tt.wantLabel)
			}
		})
	}
}

func TestGroupByModelRefuses(t *testing.T) {
	tests := []struct {
		name     string
		give     string
		wantText string
	}{
		{name: "does not parse", give: `sum(rate(x{model="$model"}[1m])`, wantText: "parse"},
		{name: "selector without the matcher", give: `sum(rate(a{model="$model"}[1m])) / sum(rate(b[1m]))`, wantText: "no matcher"},
		{name: "placeholder in a regex", give: `sum(rate(a{model=~"$model|x"}[1m]))`, wantText: "whole value"},
		{name: "two labels", give: `a{model="$model"} + b{name="$model"}`, wantText: "whole value"},
		{name: "placeholder in a string argument", give: `label_replace(a{model="$model"}, "x", "$model", "", "")`, wantText: "only as a matcher"},
		{name: "scalar drops labels", give: `scalar(sum(a{model="$model"}))`, wantText: "scalar()"},
		{name: "absent invents labels", give: `absent(a{model="$model"})`, wantText: "absent()"},
		{name: "range vector", give: `a{model="$model"}[1m]`, wantText: "instant vector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := GroupByModel(tt.give, "$model")
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("err = %v, want ErrBadQuery", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantText)
			}
		})
	}
}
