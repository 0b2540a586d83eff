//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// scalerProc is cmd/scaler run on a fixed loopback port, so KEDA's
// ScaledObject keeps pointing at it across a restart.
type scalerProc struct {
	bin, logDir string
	promURL     string
	kubeconfig  string
	port        int
	metricsPort int
	p           *proc
	conn        *grpc.ClientConn
	client      externalscaler.ExternalScalerClient
	starts      int
}

func newScalerProc(bin, logDir, promURL, kubeconfig string) (*scalerProc, error) {
	s := &scalerProc{bin: bin, logDir: logDir, promURL: promURL, kubeconfig: kubeconfig, port: freePort(), metricsPort: freePort()}
	conn, err := grpc.NewClient(s.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	s.conn, s.client = conn, externalscaler.NewExternalScalerClient(conn)
	return s, nil
}

func (s *scalerProc) addr() string { return addr(s.port) }

// args are the flags the chart's scaler Deployment passes
// (templates/scaler-deployment.yaml), on loopback, plus the kubeconfig a
// pod would get from its ServiceAccount.
func (s *scalerProc) args() []string {
	return []string{
		"--listen=" + s.addr(),
		"--metrics-listen=" + addr(s.metricsPort),
		"--prometheus-address=" + s.promURL,
		"--refresh-interval=1s",
		"--kubeconfig=" + s.kubeconfig,
	}
}

// start runs the scaler and waits until its gRPC health service says SERVING.
func (s *scalerProc) start(ctx context.Context) error {
	s.starts++
	p, err := startProc(s.logDir, "scaler", s.bin, s.args(), []string{"KUBECONFIG=" + s.kubeconfig})
	if err != nil {
		return err
	}
	s.p = p
	hc := healthpb.NewHealthClient(s.conn)
	return waitFor(ctx, "scaler", p, time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%w: %s", errNotReady, r.GetStatus())
		}
		return nil
	})
}

func (s *scalerProc) stop() { s.p.stop(10 * time.Second) }

func (s *scalerProc) close() {
	s.stop()
	_ = s.conn.Close()
}

// desired asks the scaler what KEDA asks it: GetMetricSpec, then
// GetMetrics for that metric. With target 1 (AverageValue) the value is the
// replica count the HPA will land on.
func (s *scalerProc) desired(ctx context.Context, ref *externalscaler.ScaledObjectRef) (float64, error) {
	spec, err := s.client.GetMetricSpec(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("GetMetricSpec: %w", err)
	}
	if len(spec.GetMetricSpecs()) != 1 {
		return 0, fmt.Errorf("GetMetricSpec: %d metric specs, want 1", len(spec.GetMetricSpecs()))
	}
	ms := spec.GetMetricSpecs()[0]
	resp, err := s.client.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref, MetricName: ms.GetMetricName()})
	if err != nil {
		return 0, fmt.Errorf("GetMetrics: %w", err)
	}
	if len(resp.GetMetricValues()) != 1 {
		return 0, fmt.Errorf("GetMetrics: %d values, want 1", len(resp.GetMetricValues()))
	}
	v := resp.GetMetricValues()[0]
	val := v.GetMetricValueFloat()
	if val <= 0 {
		val = float64(v.GetMetricValue())
	}
	target := ms.GetTargetSizeFloat()
	if target <= 0 {
		target = float64(ms.GetTargetSize())
	}
	if target <= 0 {
		return 0, fmt.Errorf("metric spec %q has target %v, want > 0", ms.GetMetricName(), target)
	}
	// The HPA's AverageValue rule: replicas = ceil(value / target).
	return math.Ceil(val/target - 1e-9), nil
}

var _ = strconv.Itoa
