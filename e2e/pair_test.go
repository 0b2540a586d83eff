//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// pairLauncherImpl runs one pool pod as cmd/tritonfake plus cmd/residency.
// The sidecar runs with the arguments the chart rendered into the pod's
// residency container, rewritten only where a pod and a loopback process
// differ: its listen address, the Triton address, and the catalog path
// (the ConfigMap volume the kubelet would mount is written to a file).
type pairLauncherImpl struct {
	c       *cluster
	ns, dir string
	p       poolParams
	promURL string
	// models, when set, replaces the fake's repository (residency scenario).
	models []fakeModel
	device int64
}

// fakeModel is one model of cmd/tritonfake's YAML (see cmd/tritonfake/example.yaml).
type fakeModel struct {
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memoryBytes"`
	LoadTime    string `json:"loadTime,omitempty"`
	ServiceTime string `json:"serviceTime,omitempty"`
	Concurrency int    `json:"concurrency,omitempty"`
}

func (l *pairLauncherImpl) launch(ctx context.Context, pod *corev1.Pod) (*pair, error) {
	dir := pairDir(l.dir, pod.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	pr := &pair{dir: dir, grpcAddr: addr(ports[0]), metricsAddr: addr(ports[1]), sidecarAddr: addr(ports[2]),
		frontHTTPAddr: addr(ports[4]), tritonHTTPAddr: addr(ports[5])}
	frontAddr := addr(ports[3])

	// Triton: explicit model control, nothing loaded at start; the sidecar
	// loads the P0 model (the pod is not Ready until it has).
	models := l.models
	if models == nil {
		models = []fakeModel{{Name: l.p.model, MemoryBytes: 2 << 30, LoadTime: l.p.modelLoadTime.String(),
			ServiceTime: l.p.serviceTime.String(), Concurrency: 1}}
	}
	device := l.device
	if device == 0 {
		device = 10 << 30
	}
	cfg, err := yaml.Marshal(map[string]any{
		"modelControlMode":  "explicit",
		"deviceMemoryBytes": device,
		"gpuUUID":           "MIG-e2e-" + pod.Name,
		"models":            models,
	})
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "triton.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, err
	}
	pr.triton, err = startProc(suite.logDir, pod.Name+"-triton", suite.bins.tritonfake, []string{
		"--grpc-listen=" + pr.grpcAddr, "--metrics-listen=" + pr.metricsAddr, "--config=" + cfgPath,
		"--exit-timeout=" + (l.p.drainTimeout + 10*time.Second).String(),
	}, nil)
	if err != nil {
		return nil, err
	}

	args, env, err := l.sidecarArgs(ctx, pod, pr, frontAddr)
	if err != nil {
		pr.triton.kill()
		return nil, err
	}
	pr.sidecar, err = startProc(suite.logDir, pod.Name+"-residency", suite.bins.residency, args, env)
	if err != nil {
		pr.triton.kill()
		return nil, err
	}
	return pr, nil
}

// sidecarArgs takes the residency container's args and env from the pod
// spec (the chart's rendering) and rewrites the pod-local parts.
func (l *pairLauncherImpl) sidecarArgs(ctx context.Context, pod *corev1.Pod, pr *pair, frontAddr string) ([]string, []string, error) {
	var ctr *corev1.Container
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == "residency" {
				ctr = &cs[i]
			}
		}
	}
	if ctr == nil {
		return nil, nil, fmt.Errorf("pod %s has no residency container", pod.Name)
	}
	catalogPath := filepath.Join(pr.dir, "catalog.yaml")
	if err := l.writeCatalog(ctx, pod, catalogPath); err != nil {
		return nil, nil, err
	}
	var args []string
	for _, a := range append(append([]string{}, ctr.Command[min(1, len(ctr.Command)):]...), ctr.Args...) {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--listen":
			a = "--listen=" + pr.sidecarAddr
		case "--triton-address":
			a = "--triton-address=" + pr.grpcAddr
		case "--inference-listen": // the chart routes the pool's gRPC port through the front
			pr.frontAddr = frontAddr
			a = "--inference-listen=" + frontAddr
		case "--inference-http-listen": // and its HTTP port: every pod of the pool listens on it
			a = "--inference-http-listen=" + pr.frontHTTPAddr
		case "--triton-http-url":
			// cmd/tritonfake serves gRPC and /metrics only, so nothing listens here: the suite
			// sends inference over gRPC, and an HTTP request through the front would get 502.
			a = "--triton-http-url=http://" + pr.tritonHTTPAddr
		case "--triton-metrics-url":
			a = "--triton-metrics-url=http://" + pr.metricsAddr + "/metrics"
		case "--catalog":
			a = "--catalog=" + catalogPath
		}
		args = append(args, a)
	}
	env := []string{"POD_NAME=" + pod.Name, "POD_NAMESPACE=" + pod.Namespace, "KUBECONFIG=" + l.c.kubeconfig}
	for _, e := range ctr.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return args, env, nil
}

// writeCatalog writes the catalog ConfigMap the pod mounts, as the kubelet would.
func (l *pairLauncherImpl) writeCatalog(ctx context.Context, pod *corev1.Pod, path string) error {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, err := l.c.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("catalog ConfigMap: %w", err)
		}
		if data, ok := cm.Data["catalog.yaml"]; ok {
			return os.WriteFile(path, []byte(data), 0o600)
		}
	}
	return fmt.Errorf("pod %s mounts no ConfigMap with catalog.yaml", pod.Name)
}

// fromUnstructured converts a map into a typed object.
func fromUnstructured(m map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}

// labelSelector renders a label set as a selector string.
func labelSelector(l map[string]string) string {
	var parts []string
	for k, v := range l {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}
