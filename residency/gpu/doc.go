// Package gpu reads the memory budget of the pod's GPU or MIG slice through NVML (go-nvml).
//
// The device is resolved from NVIDIA_VISIBLE_DEVICES as the NVIDIA container toolkit sets it:
// a MIG device UUID (MIG-…), a GPU UUID (GPU-…), a GPU index (0), a MIG index pair (0:1), or
// "all" when the container sees exactly one device. Tests drive it with go-nvml's own mock
// servers (pkg/nvml/mock/dgxa100, dgxh100, …); production passes nvml.New().
//
// It owns the NVML side of the budget and imports residency/plan (the profile table and the
// Budget type) only; it must not import package residency (the controller), residency/sidecar,
// or any scaler package.
package gpu
