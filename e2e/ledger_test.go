//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ledgerSelector marks the GPU Nodes this test creates, so the ledger
// reads only them (and the scheduler never uses them: they are
// unschedulable and tainted).
const ledgerSelector = "inferscale.io/ledger-e2e"

// ledgerServices is the source material's case without nodes: the ledger
// reads those live.
const ledgerServices = `nodes: []
services:
  - {name: embedding, tier: P0, profile: 1g.10gb, peakRPS: 60, safeRPSPerReplica: 40, readyReplicas: 3}
  - {name: classifier, tier: P1, profile: 1g.10gb, peakRPS: 18, safeRPSPerReplica: 30, readyReplicas: 2}
  - {name: asr, tier: P1, profile: 2g.20gb, peakRPS: 50, safeRPSPerReplica: 35, readyReplicas: 3}
  - {name: chat, tier: P1, profile: 3g.40gb, peakRPS: 24, safeRPSPerReplica: 12, readyReplicas: 3}
  - {name: document-extraction, tier: P2, profile: 1g.10gb}
`

// TestLedgerLive runs cmd/ledger --live against the real kube-apiserver:
// three Nodes labelled as GPU Feature Discovery and the MIG manager label
// an A100 80 GB laid out 3g.40gb + 2g.20gb + 2 × 1g.10gb, one per zone.
// Every check passes with capacity after one loss 80, 30, 70, 24; then a
// second HPA on a workload that one already scales fails one owner per loop.
// Each run writes its report into a ConfigMap, as the chart's CronJob does.
func TestLedgerLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := suite.cluster
	bin := filepath.Join(t.TempDir(), "ledger")
	build := exec.Command("go", "build", "-o", bin, "./cmd/ledger")
	build.Dir = suite.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/ledger: %v\n%s", err, out)
	}
	for i, zone := range []string{"rack-1", "rack-2", "rack-3"} {
		name := "ledger-gpu-" + string(rune('a'+i))
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{
					ledgerSelector:                  "true",
					"nvidia.com/gpu.product":        "NVIDIA-A100-SXM4-80GB",
					"nvidia.com/gpu.count":          "1",
					"nvidia.com/mig.config":         "all-balanced",
					"nvidia.com/mig.strategy":       "mixed",
					"nvidia.com/mig-3g.40gb.count":  "1",
					"nvidia.com/mig-2g.20gb.count":  "1",
					"nvidia.com/mig-1g.10gb.count":  "2",
					"topology.kubernetes.io/zone":   zone,
					"nvidia.com/mig-1g.10gb.memory": "9728",
				},
				Annotations: map[string]string{"inferscale.io/price-per-hour": "3.67"},
			},
			Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: ledgerSelector, Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := c.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	// The report goes into a ConfigMap the chart would create.
	ns := "ledger-e2e"
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := c.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ledger-report"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "services.yaml")
	if err := os.WriteFile(spec, []byte(ledgerServices), 0o600); err != nil {
		t.Fatal(err)
	}
	runLedger := func(format string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, "--live", "--kubeconfig="+c.kubeconfig, "--spec="+spec,
			"--node-selector="+ledgerSelector+"=true", "--format="+format,
			"--configmap=ledger-report", "--namespace="+ns)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		if stderr.Len() > 0 {
			t.Logf("ledger stderr: %s", stderr.String())
		}
		return stdout.String(), cmd.ProcessState.ExitCode()
	}

	out, code := runLedger("json")
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	var doc struct {
		OK       bool `json:"ok"`
		Services []struct {
			Name      string  `json:"name"`
			AfterLoss float64 `json:"capacityAfterWorstLossRPS"`
			Verdict   string  `json:"verdict"`
		} `json:"services"`
		Layouts []struct {
			Node  string `json:"node"`
			Valid bool   `json:"valid"`
		} `json:"layouts"`
		Release []struct {
			Node    string `json:"node"`
			Release bool   `json:"release"`
		} `json:"release"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var after []float64
	for _, s := range doc.Services[:4] {
		after = append(after, s.AfterLoss)
	}
	if !doc.OK || len(after) != 4 || after[0] != 80 || after[1] != 30 || after[2] != 70 || after[3] != 24 {
		t.Errorf("ok %v, capacity after one loss %v; want true, [80 30 70 24]\n%s", doc.OK, after, out)
	}
	if len(doc.Layouts) != 3 || len(doc.Release) != 3 {
		t.Errorf("%d layouts, %d release rows; want 3 and 3 (only the labelled nodes)", len(doc.Layouts), len(doc.Release))
	}
	for _, l := range doc.Layouts {
		if !l.Valid {
			t.Errorf("layout of %s refused", l.Node)
		}
	}
	for _, r := range doc.Release {
		if r.Release {
			t.Errorf("%s released; every node is needed", r.Node)
		}
	}
	cm, err := c.kube.CoreV1().ConfigMaps(ns).Get(ctx, "ledger-report", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["ledger.json"] != out || !strings.Contains(cm.Data["ledger.md"], "**PASS — every check holds**") {
		t.Errorf("ConfigMap ledger-report holds %d bytes of JSON (stdout %d) and markdown %q", len(cm.Data["ledger.json"]), len(out), cm.Data["ledger.md"])
	}

	// Two HPAs on one Deployment: two replica loops fight.
	one := int32(1)
	for _, name := range []string{"chat-cpu", "chat-queue"} {
		h := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "chat"},
				MinReplicas:    &one, MaxReplicas: 3,
			},
		}
		if _, err := c.kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, h, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	md, code := runLedger("markdown")
	if code != 1 {
		t.Errorf("exit %d with two HPAs on one Deployment, want 1", code)
	}
	if want := "**ledger-e2e/Deployment chat** is scaled by HorizontalPodAutoscaler/chat-cpu and HorizontalPodAutoscaler/chat-queue"; !strings.Contains(md, want) {
		t.Errorf("markdown lacks %q:\n%s", want, md)
	}
}
