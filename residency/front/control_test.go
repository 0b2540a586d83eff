package front_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
)

// TestRepositoryControlRefused: the residency controller owns what is loaded (it talks to
// Triton on the pod's loopback). A client of the front that loads or unloads a model would
// bypass the memory budget (a load can exhaust the device for every model) or evict what the
// plan keeps, so RepositoryModelLoad and RepositoryModelUnload — gRPC and HTTP — are refused
// with PERMISSION_DENIED / 403 and never reach Triton; the read-only repository index still
// passes.
func TestRepositoryControlRefused(t *testing.T) {
	tc := oneModel("a", 0)
	tc.StartupModels = []string{"a"}
	h := start(t, tc, testConfig(), false, "a")
	ctx := context.Background()
	_, err := h.client.RepositoryModelUnload(ctx, &inference.RepositoryModelUnloadRequest{ModelName: "a"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("unload through the front: %v, want PermissionDenied", err)
	}
	_, err = h.client.RepositoryModelLoad(ctx, &inference.RepositoryModelLoadRequest{ModelName: "a"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("load through the front: %v, want PermissionDenied", err)
	}
	if st, _ := h.triton.Model("a"); st.State != triton.StateReady || st.Loads != 1 {
		t.Errorf("model a: %+v; want still READY after its one startup load", st)
	}
	if _, err := h.client.RepositoryIndex(ctx, &inference.RepositoryIndexRequest{}); err != nil {
		t.Errorf("repository index through the front: %v", err)
	}

	srv := httptest.NewServer(h.front.HTTPHandler(httpUpstream(t, h)))
	defer srv.Close()
	for _, path := range []string{"/v2/repository/models/a/unload", "/v2/repository/models/a/load"} {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s: %d, want 403", path, resp.StatusCode)
		}
	}
}
