package kube

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/ledger/peak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func node(name string, labels, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
}

func TestNodeFromLabels(t *testing.T) {
	tests := []struct {
		name string
		give *corev1.Node
		want ledger.Node
	}{
		{"mixed strategy, two GPUs balanced", node("gpu-a", map[string]string{
			LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "2", LabelMIGConfig: "all-balanced",
			"nvidia.com/mig-3g.40gb.count": "2", "nvidia.com/mig-2g.20gb.count": "2", "nvidia.com/mig-1g.10gb.count": "4",
			"nvidia.com/mig-1g.10gb.memory": "9728", LabelZone: "zone-a",
		}, map[string]string{AnnotationPrice: "7.34"}), ledger.Node{
			Name: "gpu-a", FailureDomain: "zone-a", PricePerHour: 7.34,
			GPUs: []ledger.GPU{
				{Product: "A100-SXM4-80GB", MIG: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
				{Product: "A100-SXM4-80GB", MIG: []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}},
			}}},
		{"uneven counts packed first fit", node("gpu-b", map[string]string{
			LabelProduct: "NVIDIA-H100-80GB-HBM3", LabelCount: "2",
			"nvidia.com/mig-3g.40gb.count": "3", "nvidia.com/mig-1g.10gb.count": "1",
		}, nil), ledger.Node{
			Name: "gpu-b",
			GPUs: []ledger.GPU{
				// 3g + 3g + 1g.10gb would need 9 memory slices.
				{Product: "H100-80GB-HBM3", MIG: []string{"3g.40gb", "3g.40gb"}},
				{Product: "H100-80GB-HBM3", MIG: []string{"3g.40gb", "1g.10gb"}},
			}}},
		{"single strategy", node("gpu-c", map[string]string{
			LabelProduct: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", LabelCount: "14",
		}, nil), ledger.Node{
			Name: "gpu-c",
			GPUs: []ledger.GPU{
				{Product: "A100-SXM4-40GB", MIG: strings.Split("1g.5gb 1g.5gb 1g.5gb 1g.5gb 1g.5gb 1g.5gb 1g.5gb", " ")},
				{Product: "A100-SXM4-40GB", MIG: strings.Split("1g.5gb 1g.5gb 1g.5gb 1g.5gb 1g.5gb 1g.5gb 1g.5gb", " ")},
			}}},
		{"MIG disabled", node("gpu-d", map[string]string{LabelProduct: "NVIDIA-H200", LabelCount: "8", LabelMIGConfig: "all-disabled"}, nil),
			ledger.Node{Name: "gpu-d", GPUs: []ledger.GPU{{Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}, {Product: "H200-141GB-HBM3E"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeFromLabels(tt.give, "")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestNodeFromLabelsErrors(t *testing.T) {
	tests := []struct {
		name string
		give *corev1.Node
		want string
	}{
		{"unknown product", node("n", map[string]string{LabelProduct: "Tesla-T4"}, nil), `node n: nvidia.com/gpu.product "Tesla-T4" is not a product the ledger knows`},
		{"bad count", node("n", map[string]string{LabelProduct: "NVIDIA-H200", LabelCount: "0"}, nil), `node n: nvidia.com/gpu.count "0": want 1 to 64`},
		{"bad price", node("n", map[string]string{LabelProduct: "NVIDIA-H200"}, map[string]string{AnnotationPrice: "cheap"}), `node n: annotation inferscale.io/price-per-hour "cheap": want a price in USD per hour in [0, 1e6]`},
		{"bad mig count", node("n", map[string]string{LabelProduct: "NVIDIA-H200", "nvidia.com/mig-1g.18gb.count": "x"}, nil), `node n: nvidia.com/mig-1g.18gb.count "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NodeFromLabels(tt.give, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSourceOf(t *testing.T) {
	so := func(triggers ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"triggers": triggers}}}
		u.SetNamespace("ml")
		u.SetName("chat")
		return u
	}
	trig := func(typ string, md map[string]any) any { return map[string]any{"type": typ, "metadata": md} }
	tests := []struct {
		name string
		give *unstructured.Unstructured
		want peak.Source
		ok   bool
	}{
		{"preset", so(trig("cpu", map[string]any{"value": "50"}), trig("external", map[string]any{"engine": "triton", "model": "chat"})),
			peak.Source{Namespace: "ml", ScaledObject: "chat", Engine: "triton", Model: "chat"}, true},
		{"rateQuery", so(trig("external-push", map[string]any{"engine": "custom", "rateQuery": "sum(rate(x[1m]))"})),
			peak.Source{Namespace: "ml", ScaledObject: "chat", Engine: "custom", RateQuery: "sum(rate(x[1m]))"}, true},
		{"custom without rateQuery", so(trig("external", map[string]any{"engine": "custom", "queueQuery": "q"})), peak.Source{}, false},
		{"no triggers", so(), peak.Source{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := SourceOf(tt.give)
			if ok != tt.ok || got != tt.want {
				t.Errorf("SourceOf = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestNodeFromLabelsMIGTotalBounded: MIG count labels that total more instances than the
// node's GPUs hold (7 each) are refused, naming the node, the labels and the bound, before
// any work that grows with the counts: 100 labels of 447 on a 2-GPU node took 16 s.
func TestNodeFromLabelsMIGTotalBounded(t *testing.T) {
	l := map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "2"}
	for i := range 100 {
		l[fmt.Sprintf("nvidia.com/mig-x%d.count", i)] = "447"
	}
	_, err := NodeFromLabels(node("gpu-a", l, nil), "")
	want := "node gpu-a: its nvidia.com/mig-<profile>.count labels count 44700 MIG instances " +
		"(nvidia.com/mig-x0.count=447, nvidia.com/mig-x1.count=447, nvidia.com/mig-x10.count=447, nvidia.com/mig-x11.count=447, " +
		"nvidia.com/mig-x12.count=447, nvidia.com/mig-x13.count=447, nvidia.com/mig-x14.count=447, nvidia.com/mig-x15.count=447 and 92 more); " +
		"2 GPUs (nvidia.com/gpu.count) hold at most 14 (7 per GPU)"
	if err == nil || err.Error() != want {
		t.Errorf("error\n%v\nwant\n%s", err, want)
	}

	// At the bound: 14 instances on 2 GPUs are read, and one more is refused.
	l = map[string]string{LabelProduct: "NVIDIA-A100-SXM4-80GB", LabelCount: "2",
		"nvidia.com/mig-1g.10gb.count": "13", "nvidia.com/mig-7g.80gb.count": "1", "nvidia.com/mig-2g.20gb.count": "0"}
	n, err := NodeFromLabels(node("gpu-b", l, nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(n.GPUs[0].MIG) + len(n.GPUs[1].MIG); got != 14 {
		t.Errorf("%d instances laid out, want 14: %v", got, n.GPUs)
	}
	l["nvidia.com/mig-1g.10gb.count"] = "14"
	_, err = NodeFromLabels(node("gpu-b", l, nil), "")
	want = "node gpu-b: its nvidia.com/mig-<profile>.count labels count 15 MIG instances " +
		"(nvidia.com/mig-1g.10gb.count=14, nvidia.com/mig-7g.80gb.count=1); 2 GPUs (nvidia.com/gpu.count) hold at most 14 (7 per GPU)"
	if err == nil || err.Error() != want {
		t.Errorf("error\n%v\nwant\n%s", err, want)
	}
}

// TestNodeFromLabelsPrice: the price annotation (or label) is read by the spec reader's rule,
// plain decimal or exponent notation in [0, 1e6]; anything else is one error naming the node,
// the annotation and the range. strconv.ParseFloat alone read 0x1p3 as 8 and 1_0 as 10, and
// let NaN, Inf and 2e6 through to `nodes[0].pricePerHour: NaN is outside [0, 1e6]`.
func TestNodeFromLabelsPrice(t *testing.T) {
	for give, want := range map[string]float64{"3.67": 3.67, "1e3": 1000, "0": 0, "0.5": 0.5, ".5": 0.5, "1e6": 1e6, "2.5E2": 250} {
		n, err := NodeFromLabels(node("n", map[string]string{LabelProduct: "NVIDIA-H200"}, map[string]string{AnnotationPrice: give}), "")
		if err != nil || n.PricePerHour != want {
			t.Errorf("price %q: %v, %v; want %v", give, n.PricePerHour, err, want)
		}
	}
	for _, give := range []string{"0x1p3", "1_0", "0x10", "NaN", "nan", "Inf", "+Inf", "-1", "2e6", "1e400", "0367", "cheap", " 1", "."} {
		_, err := NodeFromLabels(node("gpu-z", map[string]string{LabelProduct: "NVIDIA-H200"}, map[string]string{AnnotationPrice: give}), "")
		want := fmt.Sprintf("node gpu-z: annotation inferscale.io/price-per-hour %q: want a price in USD per hour in [0, 1e6], in plain decimal or exponent notation (e.g. 3.67 or 1e3)", give)
		if err == nil || err.Error() != want {
			t.Errorf("price %q: error\n%v\nwant\n%s", give, err, want)
		}
	}
	// From a label, and a long value is quoted cut.
	_, err := NodeFromLabels(node("gpu-z", map[string]string{LabelProduct: "NVIDIA-H200", AnnotationPrice: "0x8"}, nil), "")
	if err == nil || !strings.HasPrefix(err.Error(), `node gpu-z: label inferscale.io/price-per-hour "0x8": want`) {
		t.Errorf("label price: %v", err)
	}
	_, err = NodeFromLabels(node("gpu-z", map[string]string{LabelProduct: "NVIDIA-H200"}, map[string]string{AnnotationPrice: strings.Repeat("9", 100000)}), "")
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "(100000 bytes)") {
		t.Errorf("long price: %.400v", err)
	}
}
