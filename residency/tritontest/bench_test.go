package tritontest_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
	"github.com/inferscale/inferscale/residency/tritontest"
)

// BenchmarkModelInfer measures one inference round trip over loopback gRPC
// through the fake with zero service time: the fake's own overhead.
func BenchmarkModelInfer(b *testing.B) {
	cfg := explicit([]tritontest.Model{{Name: "a", MemoryBytes: gib, Concurrency: 64}}, "a")
	srv := tritontest.Start(b, cfg)
	conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := inference.NewGRPCInferenceServiceClient(conn)
	req := &inference.ModelInferRequest{ModelName: "a"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.ModelInfer(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkIndex measures the client's RepositoryIndex over loopback gRPC
// with 100 models in the repository.
func BenchmarkIndex(b *testing.B) {
	var models []tritontest.Model
	for i := range 100 {
		models = append(models, tritontest.Model{Name: "m" + string(rune('a'+i%26)) + string(rune('a'+i/26)), MemoryBytes: 1})
	}
	srv := tritontest.Start(b, explicit(models))
	c, err := triton.Dial(srv.GRPCAddr(), triton.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Index(context.Background(), false); err != nil {
			b.Fatal(err)
		}
	}
}
