// Package kube reads the ledger's live facts from a cluster: GPU Nodes and
// their GPU Feature Discovery / MIG manager labels, and the autoscalers
// that own each workload. It only lists (read-only RBAC: get/list on
// nodes, horizontalpodautoscalers, scaledobjects, knative services).
package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/ledger/peak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations the ledger reads. The nvidia.com ones are GPU
// Feature Discovery's and the MIG manager's (GPU Operator); the price is
// ours.
const (
	LabelProduct   = "nvidia.com/gpu.product"
	LabelCount     = "nvidia.com/gpu.count"
	LabelMIGConfig = "nvidia.com/mig.config"
	// LabelMIGCountPrefix and LabelMIGCountSuffix frame the per-profile
	// instance count label (mixed MIG strategy): nvidia.com/mig-<profile>.count.
	LabelMIGCountPrefix = "nvidia.com/mig-"
	LabelMIGCountSuffix = ".count"
	LabelZone           = "topology.kubernetes.io/zone"
	// AnnotationPrice (or a label of the same name) is the node's price,
	// USD per hour.
	AnnotationPrice = "inferscale.io/price-per-hour"
)

// NodeOptions select and interpret Nodes.
type NodeOptions struct {
	// Selector is a label selector; default: nodes with LabelProduct.
	Selector string
	// FailureDomainLabel names the label that holds a node's failure
	// domain; default topology.kubernetes.io/zone. A node without it is
	// its own failure domain.
	FailureDomainLabel string
}

// ReadNodes lists GPU Nodes and turns their labels into ledger nodes.
func ReadNodes(ctx context.Context, c kubernetes.Interface, opt NodeOptions) ([]ledger.Node, error) {
	sel := opt.Selector
	if sel == "" {
		sel = LabelProduct
	}
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []ledger.Node
	for i := range list.Items {
		n, err := NodeFromLabels(&list.Items[i], opt.FailureDomainLabel)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// NodeFromLabels builds a ledger node from one Node's labels: the product
// from nvidia.com/gpu.product, the GPU count from nvidia.com/gpu.count
// (default 1), the MIG instances from nvidia.com/mig-<profile>.count
// spread over the GPUs (ledger.SplitLayout); a product label with a
// "-MIG-<profile>" suffix (single strategy, no per-profile counts) fills
// every GPU with that profile; nvidia.com/mig.config=all-disabled or no
// counts means whole GPUs. Errors name the node and label: among them a
// price annotation that is not a plain number in [0, 1e6] and MIG counts
// that total more than the GPUs hold (7 each).
func NodeFromLabels(n *corev1.Node, domainLabel string) (ledger.Node, error) {
	if domainLabel == "" {
		domainLabel = LabelZone
	}
	l := n.Labels
	out := ledger.Node{Name: n.Name, FailureDomain: l[domainLabel]}
	priceText, priceFrom := n.Annotations[AnnotationPrice], "annotation"
	if priceText == "" {
		priceText, priceFrom = l[AnnotationPrice], "label"
	}
	if priceText != "" {
		// The spec reader's rule (ledger.PlainNumber): strconv.ParseFloat alone read 0x1p3 as
		// 8 and 1_0 as 10, and let NaN, Inf and 2e6 through to an error naming nodes[i].
		p, ok := ledger.ParsePlainNumber(priceText)
		if !ok || !(p >= 0 && p <= ledger.MaxPricePerHour) {
			return out, fmt.Errorf("node %s: %s %s %s: want a price in USD per hour in [0, 1e6], in plain decimal or exponent notation (e.g. 3.67 or 1e3)",
				n.Name, priceFrom, AnnotationPrice, errtext.Quote(priceText, 64))
		}
		out.PricePerHour = p
	}
	productLabel := l[LabelProduct]
	product, ok := ledger.LookupProduct(productLabel)
	if !ok {
		return out, fmt.Errorf("node %s: %s %q is not a product the ledger knows (%s)", n.Name, LabelProduct, productLabel, strings.Join(ledger.ProductNames(), ", "))
	}
	gpus := 1
	if s, ok := l[LabelCount]; ok {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 64 {
			return out, fmt.Errorf("node %s: %s %q: want 1 to 64", n.Name, LabelCount, s)
		}
		gpus = v
	}
	instances := map[string]int{}
	total := 0
	for k, v := range l {
		if !strings.HasPrefix(k, LabelMIGCountPrefix) || !strings.HasSuffix(k, LabelMIGCountSuffix) {
			continue
		}
		profile := strings.TrimSuffix(strings.TrimPrefix(k, LabelMIGCountPrefix), LabelMIGCountSuffix)
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 || c > ledger.MaxInstancesPerGPU*64 {
			return out, fmt.Errorf("node %s: %s %s: want 0 to %d", n.Name, k, errtext.Quote(v, 64), ledger.MaxInstancesPerGPU*64)
		}
		instances[profile] = c
		total += c
	}
	// A GPU holds at most 7 MIG instances. Refused before the instances are laid out, whose
	// work grows with them: 100 labels of 447 on a 2-GPU node took 16 s.
	if limit := gpus * ledger.MaxInstancesPerGPU; total > limit {
		return out, fmt.Errorf("node %s: its %s<profile>%s labels count %d MIG instances (%s); %d GPUs (%s) hold at most %d (%d per GPU)",
			n.Name, LabelMIGCountPrefix, LabelMIGCountSuffix, total, migLabels(instances), gpus, LabelCount, limit, ledger.MaxInstancesPerGPU)
	}
	if i := strings.Index(strings.ToUpper(productLabel), "-MIG-"); i >= 0 && len(instances) == 0 {
		// Single strategy: GFD counts MIG devices in nvidia.com/gpu.count.
		profile := productLabel[i+len("-MIG-"):]
		per := 1
		for _, p := range product.Profiles {
			if p.Name == profile {
				per = p.MaxInstances
			}
		}
		devices := gpus
		gpus = (devices + per - 1) / per
		instances[profile] = devices
	}
	var layouts [][]string
	if l[LabelMIGConfig] != "all-disabled" && len(instances) > 0 {
		layouts = ledger.SplitLayout(product, instances, gpus)
	}
	for g := range gpus {
		gpu := ledger.GPU{Product: product.Name}
		if layouts != nil {
			gpu.MIG = layouts[g]
		}
		out.GPUs = append(out.GPUs, gpu)
	}
	return out, nil
}

// maxLabelsNamed bounds the labels an error lists.
const maxLabelsNamed = 8

// migLabels lists the non-zero counts of instances (profile → count, as read from the
// nvidia.com/mig-<profile>.count labels), sorted by label, as label=count: the first
// maxLabelsNamed, then how many more.
func migLabels(instances map[string]int) string {
	var names []string
	for profile, c := range instances {
		if c > 0 {
			names = append(names, LabelMIGCountPrefix+profile+LabelMIGCountSuffix)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i == maxLabelsNamed {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		profile := strings.TrimSuffix(strings.TrimPrefix(k, LabelMIGCountPrefix), LabelMIGCountSuffix)
		fmt.Fprintf(&b, "%s=%d", errtext.Cut(k, 80), instances[profile])
	}
	return b.String()
}

var (
	scaledObjects = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	knativeSvcs   = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
)

// Autoscalers lists every replica writer in the cluster: ScaledObjects,
// HPAs that no ScaledObject owns (KEDA creates one per ScaledObject), and
// Knative Services. A resource the cluster does not serve is skipped.
func Autoscalers(ctx context.Context, c kubernetes.Interface, d dynamic.Interface) ([]ledger.Autoscaler, error) {
	var out []ledger.Autoscaler
	hpas, err := c.AutoscalingV2().HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list horizontalpodautoscalers: %w", err)
	}
	for _, h := range hpas.Items {
		ownedBySO := false
		for _, o := range h.OwnerReferences {
			if o.Kind == "ScaledObject" {
				ownedBySO = true
			}
		}
		if ownedBySO {
			continue
		}
		out = append(out, ledger.Autoscaler{Namespace: h.Namespace, Kind: "HorizontalPodAutoscaler", Name: h.Name,
			TargetKind: h.Spec.ScaleTargetRef.Kind, TargetName: h.Spec.ScaleTargetRef.Name})
	}
	list := func(gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
		l, err := d.Resource(gvr).Namespace("").List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		return l.Items, nil
	}
	sos, err := list(scaledObjects)
	if err != nil {
		return nil, err
	}
	for _, so := range sos {
		kind, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "kind")
		name, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "name")
		if kind == "" {
			kind = "Deployment" // KEDA's default
		}
		out = append(out, ledger.Autoscaler{Namespace: so.GetNamespace(), Kind: "ScaledObject", Name: so.GetName(), TargetKind: kind, TargetName: name})
	}
	ks, err := list(knativeSvcs)
	if err != nil {
		return nil, err
	}
	for _, k := range ks {
		out = append(out, ledger.Autoscaler{Namespace: k.GetNamespace(), Kind: "KnativeService", Name: k.GetName(), TargetKind: "Service", TargetName: k.GetName()})
	}
	return out, nil
}

// PeakSources reads, per ScaledObject, where its request rate comes from:
// the first trigger of type external or external-push whose metadata
// names an engine preset (engine: triton or vllm, with model) or a
// rateQuery. ScaledObjects with neither are left out; a cluster without
// KEDA's API yields none.
func PeakSources(ctx context.Context, d dynamic.Interface) ([]peak.Source, error) {
	l, err := d.Resource(scaledObjects).Namespace("").List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list scaledobjects: %w", err)
	}
	var out []peak.Source
	for i := range l.Items {
		if src, ok := SourceOf(&l.Items[i]); ok {
			out = append(out, src)
		}
	}
	return out, nil
}

// SourceOf reads one ScaledObject's rate source (see PeakSources).
func SourceOf(so *unstructured.Unstructured) (peak.Source, bool) {
	triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	for _, tr := range triggers {
		m, ok := tr.(map[string]any)
		if !ok {
			continue
		}
		if typ, _ := m["type"].(string); typ != "external" && typ != "external-push" {
			continue
		}
		md, _ := m["metadata"].(map[string]any)
		str := func(k string) string { s, _ := md[k].(string); return s }
		src := peak.Source{Namespace: so.GetNamespace(), ScaledObject: so.GetName(),
			Engine: str("engine"), Model: str("model"), RateQuery: str("rateQuery")}
		if src.RateQuery == "" && (src.Model == "" || (src.Engine != "triton" && src.Engine != "vllm")) {
			continue
		}
		return src, true
	}
	return peak.Source{}, false
}
