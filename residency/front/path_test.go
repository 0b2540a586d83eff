package front

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInferPath(t *testing.T) {
	tests := []struct {
		method, path, want string
		ok                 bool
	}{
		{"POST", "/v2/models/resnet/infer", "resnet", true},
		{"POST", "/v2/models/resnet/versions/3/infer", "resnet", true},
		{"POST", "/v2/models/llama/generate", "llama", true},
		{"POST", "/v2/models/llama/generate_stream", "llama", true},
		{"POST", "/v2/models/llama/versions/1/generate_stream", "llama", true},
		{"POST", "/v2/models/llama/generate/extra", "", false},
		{"POST", "/v2/models/llama/generated", "", false},
		{"GET", "/v2/models/resnet/infer", "", false},
		{"POST", "/v2/models/resnet/ready", "", false},
		{"POST", "/v2/models//infer", "", false},
		{"POST", "/v2/health/ready", "", false},
		{"POST", "/v2/models/" + strings.Repeat("m", 256) + "/infer", "", false},
		// Triton matches the raw path, versions as [0-9]+ (model_regex_, src/http_server.cc).
		{"POST", "/v2/models/%6D/infer", "%6D", true},
		{"POST", "/v2/models/a%2Fb/infer", "a%2Fb", true},
		{"POST", "/v2/models/m/versions/x/infer", "", false},
		{"POST", "/v2/models/m/versions//infer", "", false},
		{"POST", "/v2/models/m/versions/-1/infer", "", false},
		{"POST", "/v2/models/m/versions/12/infer", "m", true},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path[:min(len(tt.path), 40)], func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			got, ok := inferPath(r)
			if got != tt.want || ok != tt.ok {
				t.Errorf("InferPath = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
