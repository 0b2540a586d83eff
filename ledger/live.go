package ledger

import (
	"fmt"
	"sort"
)

// MaxInstancesPerGPU is the most MIG instances one GPU holds: every
// profile takes at least one of its 7 compute slices.
const MaxInstancesPerGPU = 7

// SplitLayout spreads a node's MIG instance counts (GPU Feature
// Discovery's per-node nvidia.com/mig-<profile>.count labels) over its
// GPUs: evenly when every count divides by the GPU count (mig-parted
// applies one config to all devices), otherwise largest profiles first,
// each onto the first GPU whose layout stays valid. An instance that fits
// nowhere goes to the last GPU holding fewer than MaxInstancesPerGPU
// instances (the last GPU when none does), whose layout then fails its
// check, so the ledger reports the mismatch rather than hiding it; with at
// most gpus × MaxInstancesPerGPU instances no GPU gets more than that.
// Profiles the product does not offer are kept, for the same reason.
//
// The work is linear in the instances (times the GPUs): a layout is only
// checked while it holds fewer than MaxInstancesPerGPU instances, so each
// check is of at most MaxInstancesPerGPU+1 names. The caller bounds the
// counts (ledger/kube refuses more than gpus × MaxInstancesPerGPU).
func SplitLayout(p *Product, instances map[string]int, gpus int) [][]string {
	if gpus <= 0 {
		return nil
	}
	out := make([][]string, gpus)
	names := make([]string, 0, len(instances))
	for n, c := range instances {
		if c > 0 {
			names = append(names, n)
		}
	}
	size := func(n string) int {
		if k := p.profileIndex(n); k >= 0 {
			return p.Profiles[k].MemorySlices*10 + p.Profiles[k].ComputeSlices
		}
		return 1000
	}
	sort.Slice(names, func(a, b int) bool {
		if size(names[a]) != size(names[b]) {
			return size(names[a]) > size(names[b])
		}
		return names[a] < names[b]
	})
	even := true
	for _, n := range names {
		if instances[n]%gpus != 0 {
			even = false
		}
	}
	if even {
		for g := range out {
			for _, n := range names {
				for range instances[n] / gpus {
					out[g] = append(out[g], n)
				}
			}
		}
		return out
	}
	// A GPU holding MaxInstancesPerGPU instances takes no more (a valid layout
	// never has more), so it is not checked again: each check is of a short
	// layout, copied into trial rather than the growing out[g] copied per
	// instance (which took 16 s for 100 labels of 447 instances).
	trial := make([]string, 0, MaxInstancesPerGPU+1)
	for _, n := range names {
		for range instances[n] {
			placed := false
			for g := range out {
				if len(out[g]) >= MaxInstancesPerGPU {
					continue
				}
				trial = append(append(trial[:0], out[g]...), n)
				if ok, _ := p.CheckLayout(trial); ok {
					out[g] = append(out[g], n)
					placed = true
					break
				}
			}
			if !placed {
				g := gpus - 1
				for g > 0 && len(out[g]) >= MaxInstancesPerGPU {
					g--
				}
				if len(out[g]) >= MaxInstancesPerGPU {
					g = gpus - 1
				}
				out[g] = append(out[g], n)
			}
		}
	}
	return out
}

// Autoscaler is one object that writes a workload's replica count: a KEDA
// ScaledObject, a HorizontalPodAutoscaler that no ScaledObject owns, or a
// Knative Service (its own autoscaler owns its revisions).
type Autoscaler struct {
	Namespace, Kind, Name string
	// TargetKind and TargetName identify the scaled workload.
	TargetKind, TargetName string
}

// OwnerConflict is a workload that more than one autoscaler writes.
type OwnerConflict struct {
	Namespace, TargetKind, TargetName string
	// Owners are "Kind/name" of each autoscaler, sorted.
	Owners []string
}

// OwnerConflicts finds the workloads that two or more autoscalers own:
// each of the four control loops (MIG layout, residency, replicas, nodes)
// must write only its own state, and two replica writers fight.
func OwnerConflicts(as []Autoscaler) []OwnerConflict {
	type key struct{ ns, kind, name string }
	owners := map[key][]string{}
	for _, a := range as {
		k := key{a.Namespace, a.TargetKind, a.TargetName}
		owners[k] = append(owners[k], a.Kind+"/"+a.Name)
	}
	var out []OwnerConflict
	for k, o := range owners {
		if len(o) < 2 {
			continue
		}
		sort.Strings(o)
		out = append(out, OwnerConflict{Namespace: k.ns, TargetKind: k.kind, TargetName: k.name, Owners: o})
	}
	sort.Slice(out, func(a, b int) bool {
		return fmt.Sprint(out[a].Namespace, out[a].TargetKind, out[a].TargetName) < fmt.Sprint(out[b].Namespace, out[b].TargetKind, out[b].TargetName)
	})
	return out
}
