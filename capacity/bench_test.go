package capacity

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// BenchmarkSend is the generator's cost per request (schedule check, in-flight map, goroutine,
// TritonTarget.Send, record) against the fake Triton with no service time, beside the
// baseline of the same run: a goroutine per request calling ModelInfer and nothing else. The
// ratio is what the generator's bookkeeping adds to a loopback round trip.
func BenchmarkSend(b *testing.B) {
	srv := tritontest.Start(b, tritontest.Config{ModelControlMode: tritontest.ModeExplicit, DeviceMemoryBytes: 1 << 30,
		Models: []tritontest.Model{{Name: "m", Concurrency: 1 << 16}}, StartupModels: []string{"m"}})
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := inference.NewGRPCInferenceServiceClient(conn)
	req := &inference.ModelInferRequest{ModelName: "m"}
	const batch = 256 // requests in flight at once, like an open-loop burst
	b.Run("generator", func(b *testing.B) {
		cfg := DefaultMeasureConfig()
		g, err := NewGenerator(TritonTarget{Client: client, Request: req}, nil, cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		var w Window
		for b.Loop() {
			var wg sync.WaitGroup
			now := time.Now()
			for range batch {
				g.send(ctx, &wg, now, &w)
			}
			wg.Wait()
			g.done = g.done[:0]
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/request")
	})
	b.Run("baseline=goroutine+ModelInfer", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			var wg sync.WaitGroup
			for range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = client.ModelInfer(ctx, req)
				}()
			}
			wg.Wait()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/request")
	})
}
