package ledger

import (
	"fmt"
	"math"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Tier is a service's priority class.
type Tier string

const (
	// P0 services are pinned: capacity, N+1 and spread over at least two
	// nodes must hold.
	P0 Tier = "P0"
	// P1 services are in demand: capacity and N+1 must hold.
	P1 Tier = "P1"
	// P2 services are async or best effort: hosted, never checked for capacity.
	P2 Tier = "P2"
)

// Spec is the ledger's input: the GPU nodes and the services they host.
// Its YAML form is documented in docs/ledger.md; ledger/specfile decodes it.
type Spec struct {
	Nodes    []Node    `yaml:"nodes" json:"nodes"`
	Services []Service `yaml:"services" json:"services"`
}

// Node is one GPU node that bills while it exists.
type Node struct {
	// Name is the Kubernetes node name (a DNS-1123 subdomain); unique in
	// the spec.
	Name string `yaml:"name" json:"name"`
	// FailureDomain is the rack or zone the node fails with, a label value
	// (at most 63 characters); empty means the node is its own failure
	// domain.
	FailureDomain string `yaml:"failureDomain,omitempty" json:"failureDomain,omitempty"`
	// PricePerHour is what the node bills, USD per hour; 0 when unknown.
	PricePerHour float64 `yaml:"pricePerHour,omitempty" json:"pricePerHour,omitempty"`
	// GPUs are the node's GPUs in device-index order.
	GPUs []GPU `yaml:"gpus" json:"gpus"`
}

// Domain is the node's failure domain: FailureDomain, or the node's name.
func (n Node) Domain() string {
	if n.FailureDomain != "" {
		return n.FailureDomain
	}
	return n.Name
}

// GPU is one physical GPU and its MIG layout.
type GPU struct {
	// Product is the GPU product, a name or alias LookupProduct knows.
	Product string `yaml:"product" json:"product"`
	// MIG lists the GPU instances by profile name; empty is a whole GPU
	// (MIG disabled).
	MIG []string `yaml:"mig,omitempty" json:"mig,omitempty"`
}

// Service is one inference service the GPUs must host.
type Service struct {
	// Name is unique in the spec and a Kubernetes object name (DNS-1123
	// subdomain: the ScaledObject's name in live mode).
	Name string `yaml:"name" json:"name"`
	// Tier is P0, P1 or P2.
	Tier Tier `yaml:"tier" json:"tier"`
	// Profile is the MIG profile one replica needs, or a product name for a
	// whole GPU.
	Profile string `yaml:"profile" json:"profile"`
	// PeakRPS is the demand the service must meet, requests per second.
	// Required for P0 and P1: PeakUnset (ledger/specfile's value for a peakRPS
	// the spec leaves out) is a Validate error for them.
	PeakRPS float64 `yaml:"peakRPS,omitempty" json:"peakRPS,omitempty"`
	// SafeRPSPerReplica is the measured throughput of one replica within
	// its SLO on Profile, requests per second. Required for P0 and P1,
	// directly or through Record.
	SafeRPSPerReplica float64 `yaml:"safeRPSPerReplica,omitempty" json:"safeRPSPerReplica,omitempty"`
	// Record is the path of an admission record (issue 13's capacity
	// package) that supplies SafeRPSPerReplica; ledger/specfile reads it.
	Record string `yaml:"record,omitempty" json:"record,omitempty"`
	// ReadyReplicas is today's replica count; nil lets the ledger choose
	// the fewest replicas that pass every check.
	ReadyReplicas *int `yaml:"readyReplicas,omitempty" json:"readyReplicas,omitempty"`
	// Placement is the node of each ready replica; empty lets the ledger
	// place the replicas, spread across failure domains.
	Placement []string `yaml:"placement,omitempty" json:"placement,omitempty"`
	// Refused is set when the admission record's verdict did not allow the
	// model on this profile; the service then fails its checks.
	Refused bool `yaml:"-" json:"-"`
}

// MaxRPS bounds peakRPS and safeRPSPerReplica; larger values are typos.
const MaxRPS = 1e9

// MaxPricePerHour bounds a node's pricePerHour (and ledger/kube's price annotation), USD.
const MaxPricePerHour = 1e6

// PeakUnset is the PeakRPS of a P0 or P1 service whose spec leaves peakRPS out, as
// ledger/specfile decodes it: NaN, not 0, because `peakRPS: 0` is a demand a spec may give and
// an absent one is not, and because no capacity comparison passes with NaN. Validate reports
// it (PeakRequired) unless something has replaced it first: `ledger --live
// --prometheus-address` reads the peak of the ScaledObject of the same name.
var PeakUnset = math.NaN()

// PeakRequired begins Validate's message for a P0 or P1 service's PeakUnset peakRPS.
const PeakRequired = "required for"

// MaxReplicas bounds readyReplicas.
const MaxReplicas = 100000

// MaxNodes and MaxServices bound one spec, so that one run's CPU stays bounded: the checks'
// placement and the audit's packing grow with nodes × services. At the limits (× 8 GPUs a
// node) the checks took 0.9 s and the audit 0.09 s on the shared 2-core development machine,
// the audit at most 15 s when slices do not settle its retries (MaxRetryWork bounds them);
// docs/ledger.md has the figures.
const (
	MaxNodes    = 10000
	MaxServices = 5000
)

// FieldError is one invalid field of a spec. Path is the field's location,
// e.g. "services[2].peakRPS"; ledger/specfile adds the YAML line.
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// Validate returns every violation in the spec, each naming its field and
// the accepted range; nil when the spec is usable.
func (s Spec) Validate() []FieldError {
	var errs []FieldError
	add := func(path, format string, a ...any) {
		errs = append(errs, FieldError{Path: path, Msg: fmt.Sprintf(format, a...)})
	}
	if len(s.Nodes) > MaxNodes {
		add("nodes", "%d nodes; at most %d", len(s.Nodes), MaxNodes)
	}
	switch {
	case len(s.Nodes) == 0 && len(s.Services) == 0:
		add("spec", "no nodes and no services: nothing to check (a layout-only spec lists nodes)")
	case len(s.Services) > MaxServices:
		add("services", "%d services; at most %d", len(s.Services), MaxServices)
	}
	nodes := map[string]bool{}
	for i, n := range s.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		switch {
		case n.Name == "":
			add(p+".name", "required")
		case nodes[n.Name]:
			add(p+".name", "duplicate node name %q", n.Name)
		default:
			if msgs := validation.IsDNS1123Subdomain(n.Name); msgs != nil {
				add(p+".name", "%q is not a Kubernetes node name: %s", n.Name, strings.Join(msgs, "; "))
			}
		}
		nodes[n.Name] = true
		if n.FailureDomain != "" {
			if msgs := validation.IsValidLabelValue(n.FailureDomain); msgs != nil {
				add(p+".failureDomain", "%q is not a label value (a zone or rack label): %s", n.FailureDomain, strings.Join(msgs, "; "))
			}
		}
		if bad(n.PricePerHour) || n.PricePerHour < 0 || n.PricePerHour > MaxPricePerHour {
			add(p+".pricePerHour", "%v is outside [0, 1e6] USD per hour", n.PricePerHour)
		}
		if len(n.GPUs) == 0 || len(n.GPUs) > 64 {
			add(p+".gpus", "a node has 1 to 64 GPUs, got %d", len(n.GPUs))
		}
		for j, g := range n.GPUs {
			gp := fmt.Sprintf("%s.gpus[%d]", p, j)
			if _, ok := LookupProduct(g.Product); !ok {
				add(gp+".product", "unknown product %q; known: %s", g.Product, strings.Join(ProductNames(), ", "))
			}
			if len(g.MIG) > 7 {
				add(gp+".mig", "a GPU has at most 7 MIG instances, got %d", len(g.MIG))
			}
		}
	}
	services := map[string]bool{}
	for i, sv := range s.Services {
		p := fmt.Sprintf("services[%d]", i)
		switch {
		case sv.Name == "":
			add(p+".name", "required")
		case services[sv.Name]:
			add(p+".name", "duplicate service name %q", sv.Name)
		default:
			if msgs := validation.IsDNS1123Subdomain(sv.Name); msgs != nil {
				add(p+".name", "%q is not a Kubernetes object name (the ScaledObject's): %s", sv.Name, strings.Join(msgs, "; "))
			}
		}
		services[sv.Name] = true
		if sv.Tier != P0 && sv.Tier != P1 && sv.Tier != P2 {
			add(p+".tier", "%q is not one of P0, P1, P2", sv.Tier)
		}
		if _, whole := LookupProduct(sv.Profile); !whole && !IsProfileName(sv.Profile) {
			add(p+".profile", "%q is neither a MIG profile nor a product (%s)", sv.Profile, strings.Join(ProductNames(), ", "))
		}
		switch {
		case math.IsNaN(sv.PeakRPS) && (sv.Tier == P0 || sv.Tier == P1):
			add(p+".peakRPS", "%s %s service %q: the demand to meet, req/s in [0, %g], is not in the spec nor read from Prometheus (ledger --live --prometheus-address reads it from the ScaledObject named %q when that has data)", PeakRequired, sv.Tier, sv.Name, MaxRPS, sv.Name)
		case bad(sv.PeakRPS) || sv.PeakRPS < 0 || sv.PeakRPS > MaxRPS:
			add(p+".peakRPS", "%v is outside [0, %g]", sv.PeakRPS, MaxRPS)
		}
		// One error per fault: a P0 or P1 value out of range names the tier's range, (0, MaxRPS],
		// and is not also reported as missing.
		required := (sv.Tier == P0 || sv.Tier == P1) && !sv.Refused
		v := sv.SafeRPSPerReplica
		switch out := bad(v) || v < 0 || v > MaxRPS; {
		case out && required:
			add(p+".safeRPSPerReplica", "%v is outside (0, %g], required for %s (or record: an admission record)", v, MaxRPS, sv.Tier)
		case out:
			add(p+".safeRPSPerReplica", "%v is outside [0, %g]", v, MaxRPS)
		case v == 0 && required:
			add(p+".safeRPSPerReplica", "required for %s (> 0, or record: an admission record)", sv.Tier)
		}
		if sv.ReadyReplicas != nil && (*sv.ReadyReplicas < 0 || *sv.ReadyReplicas > MaxReplicas) {
			add(p+".readyReplicas", "%d is outside [0, %d]", *sv.ReadyReplicas, MaxReplicas)
		}
		if len(sv.Placement) > 0 && sv.ReadyReplicas != nil && *sv.ReadyReplicas != len(sv.Placement) {
			add(p+".placement", "names %d nodes but readyReplicas is %d; give one node per ready replica", len(sv.Placement), *sv.ReadyReplicas)
		}
		for j, n := range sv.Placement {
			if !nodes[n] {
				add(fmt.Sprintf("%s.placement[%d]", p, j), "node %q is not in nodes", n)
			}
		}
	}
	return errs
}

func bad(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }
