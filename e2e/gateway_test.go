//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/proto/inference"
)

// Gateway metric names; the ScaledObject's queue and rate queries read them
// (a gateway queue is the only signal that exists while the pool is at 0).
const (
	gatewayQueueMetric    = "inferscale_e2e_gateway_queue"
	gatewayRequestsMetric = "inferscale_e2e_gateway_requests_total"
)

// gateway is the load generator: it plays an inference gateway in front of
// the pool. Requests arrive at a scripted rate per model, wait in the
// gateway while no pod is ready, and go round-robin to the ready pods as
// Triton ModelInfer calls. Every failed call is counted and kept.
type gateway struct {
	k  *kubelet
	ns string

	mu     sync.Mutex
	rates  map[string]float64 // model -> requests per second
	conns  map[string]*grpc.ClientConn
	fails  []string
	rr     int
	perPod map[string]int // requests in flight per pod
	closed bool

	sent, ok, failed atomic.Int64
	inflight         sync.WaitGroup

	queue    *prometheus.GaugeVec
	requests *prometheus.CounterVec
	srv      *http.Server
	addr     string
	stopCh   chan struct{}
	loopDone chan struct{}
}

func startGateway(k *kubelet, ns string, prom *promServer) (*gateway, error) {
	g := &gateway{k: k, ns: ns, rates: map[string]float64{}, conns: map[string]*grpc.ClientConn{},
		perPod: map[string]int{}, stopCh: make(chan struct{}), loopDone: make(chan struct{})}
	reg := prometheus.NewRegistry()
	g.queue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: gatewayQueueMetric,
		Help: "Requests waiting in the gateway for a ready pod."}, []string{"model"})
	g.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: gatewayRequestsMetric,
		Help: "Requests that arrived at the gateway."}, []string{"model"})
	reg.MustRegister(g.queue, g.requests)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.addr = l.Addr().String()
	g.srv = &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = g.srv.Serve(l) }()
	if err := prom.setTarget(g.addr, map[string]string{"namespace": ns, "pod": "gateway", "container": "gateway"}); err != nil {
		return nil, err
	}
	go g.loop()
	return g, nil
}

// setRate scripts the arrival rate of one model (requests per second).
func (g *gateway) setRate(model string, rps float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rates[model] = rps
	g.queue.WithLabelValues(model)
	g.requests.WithLabelValues(model)
	logf("gateway: %s at %.1f req/s", model, rps)
}

// loop turns rates into arrivals: a deterministic fluid schedule (credit
// accrues at the rate; each whole unit is one request).
func (g *gateway) loop() {
	defer close(g.loopDone)
	credit := map[string]float64{}
	last := time.Now()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-g.stopCh:
			return
		case now := <-t.C:
			dt := now.Sub(last).Seconds()
			last = now
			g.mu.Lock()
			for m, r := range g.rates {
				credit[m] += r * dt
				for credit[m] >= 1 {
					credit[m]--
					g.inflight.Add(1)
					go g.handle(m)
				}
			}
			g.mu.Unlock()
		}
	}
}

// errNoEndpoint: a request waited too long for any ready pod.
var errNoEndpoint = errors.New("no ready pod within the gateway timeout")

func (g *gateway) handle(model string) {
	defer g.inflight.Done()
	g.sent.Add(1)
	g.requests.WithLabelValues(model).Inc()
	q := g.queue.WithLabelValues(model)
	q.Inc()
	deadline := time.Now().Add(3 * time.Minute)
	var ep endpoint
	for {
		eps := g.k.endpoints()
		if len(eps) > 0 {
			g.mu.Lock()
			ep = eps[g.rr%len(eps)]
			g.rr++
			g.perPod[ep.pod]++
			g.mu.Unlock()
			break
		}
		if time.Now().After(deadline) {
			q.Dec()
			g.fail(model, "-", errNoEndpoint)
			return
		}
		select {
		case <-g.stopCh:
			q.Dec()
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	q.Dec()
	defer func() {
		g.mu.Lock()
		g.perPod[ep.pod]--
		g.mu.Unlock()
	}()
	conn, err := g.conn(ep.grpcAddr)
	if err != nil {
		g.fail(model, ep.pod, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = inference.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, &inference.ModelInferRequest{
		ModelName: model,
		Inputs:    []*inference.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, 1}}},
	})
	if err != nil {
		g.fail(model, ep.pod, err)
		return
	}
	g.ok.Add(1)
}

func (g *gateway) fail(model, pod string, err error) {
	g.failed.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.fails) < 50 {
		g.fails = append(g.fails, fmt.Sprintf("%s %s on %s: %v", time.Now().Format("15:04:05.000"), model, pod, err))
	}
}

func (g *gateway) conn(target string) (*grpc.ClientConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.conns[target]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	g.conns[target] = c
	return c, nil
}

// snapshot returns the counters and the first recorded failures.
func (g *gateway) snapshot() (sent, ok, failed int64, fails []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sent.Load(), g.ok.Load(), g.failed.Load(), append([]string(nil), g.fails...)
}

// quiesce stops arrivals and waits for every request in flight.
func (g *gateway) quiesce(timeout time.Duration) error {
	g.mu.Lock()
	for m := range g.rates {
		g.rates[m] = 0
	}
	g.mu.Unlock()
	done := make(chan struct{})
	go func() { g.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("requests still in flight after %v", timeout)
	}
}

func (g *gateway) stop() {
	close(g.stopCh)
	<-g.loopDone
	_ = g.quiesce(30 * time.Second)
	_ = g.srv.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.closed = true
}

// ceilDiv is ⌈a/b⌉ for the expected-replica arithmetic in scenarios.
func ceilDiv(a, b float64) int { return int(math.Ceil(a/b - 1e-9)) }

// totalRate is the scripted arrival rate summed over models.
func (g *gateway) totalRate() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var r float64
	for _, v := range g.rates {
		r += v
	}
	return r
}

// busiest returns the pod with the most requests in flight, and how many.
func (g *gateway) busiest() (string, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	best, n := "", 0
	for p, k := range g.perPod {
		if k > n || (k == n && p < best) {
			best, n = p, k
		}
	}
	return best, n
}

// joinLines joins lines with newlines.
func joinLines(lines []string) string { return strings.Join(lines, "\n") }
