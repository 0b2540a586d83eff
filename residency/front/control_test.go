package front_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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

// TestRepositoryControlSpellingsRefused: Triton routes a load or unload on the raw path
// (modelcontrol_regex_ /v2/repository(?:/([^/]+))?/(index|models/([^/]+)/(load|unload)),
// full-matched, not percent-decoded), so every spelling it would act on is refused before it
// reaches Triton, whatever the method; the index, and paths Triton does not route as control,
// pass. A match on the decoded path had let POST /v2/repository/models/a%2Fx/load through,
// which Triton takes as a load of a model named "a%2Fx".
func TestRepositoryControlSpellingsRefused(t *testing.T) {
	tc := oneModel("a", 0)
	tc.StartupModels = []string{"a"}
	h := start(t, tc, testConfig(), false, "a")
	var mu sync.Mutex
	var reached []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		_, _ = io.WriteString(w, "{}")
	}))
	srv := frontOver(t, h, up)
	do := func(method, path string) int {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	refused := []struct{ method, path string }{
		{"POST", "/v2/repository/models/a/load"},
		{"POST", "/v2/repository/models/a%2Fx/load"},
		{"POST", "/v2/repository/models/a%2fx/unload"},
		{"POST", "/v2/repository/models/%61/load"},
		{"POST", "/v2/repository/myrepo/models/a/load"},
		{"POST", "/v2/repository/models/a/load?x=1"},
		{"PUT", "/v2/repository/models/a/unload"},
	}
	for _, c := range refused {
		if got := do(c.method, c.path); got != http.StatusForbidden {
			t.Errorf("%s %s: %d, want 403", c.method, c.path, got)
		}
	}
	passed := []string{"/v2/repository/index", "/v2/repository/models/a/loadx", "/v2/repository/models/a/load/", "/v2/repository/models//load", "/v2/repository/models/lo%61d"}
	for _, p := range passed {
		if got := do("POST", p); got != http.StatusOK {
			t.Errorf("POST %s: %d, want it passed to Triton (200)", p, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := make([]string, 0, len(passed))
	for _, p := range passed {
		want = append(want, "POST "+p)
	}
	if !slices.Equal(reached, want) {
		t.Errorf("reached Triton: %q, want only %q", reached, want)
	}
}
