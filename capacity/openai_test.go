package capacity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/inferscale/inferscale/capacity"
)

// TestOpenAITargetStreams: against a server speaking the OpenAI completions stream (as vLLM
// does: data: {...} lines, then data: [DONE]) the target sends the request shape asked for and
// sees the first token before the end.
func TestOpenAITargetStreams(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/completions" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
			f.Flush()
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	tg := capacity.OpenAITarget{BaseURL: srv.URL, Model: "llama", PromptTokens: 4, MaxTokens: 3, IgnoreEOS: true}
	start := time.Now()
	out := tg.Send(context.Background(), time.Now)
	if out.Code != "" {
		t.Fatalf("code %q", out.Code)
	}
	if out.FirstToken.IsZero() || !out.FirstToken.Before(out.Done) || out.Done.Sub(start) < 40*time.Millisecond {
		t.Errorf("first token %v, done %v after start; want the first token before the end, the end after the stream", out.FirstToken.Sub(start), out.Done.Sub(start))
	}
	if got["prompt"] != "hi hi hi hi" || got["max_tokens"] != 3.0 || got["stream"] != true || got["ignore_eos"] != true || got["model"] != "llama" {
		t.Errorf("request body %v", got)
	}
	bad := capacity.OpenAITarget{BaseURL: srv.URL + "/nope", Model: "llama", PromptTokens: 1, MaxTokens: 1}
	if out := bad.Send(context.Background(), time.Now); out.Code != "http 404" {
		t.Errorf("404: code %q, want http 404", out.Code)
	}
}

func TestInferRequest(t *testing.T) {
	req, err := capacity.InferRequest("m", "", []string{"INPUT0:FP32:1,16", "ids:int64:2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Inputs) != 2 || req.Inputs[0].Datatype != "FP32" || len(req.RawInputContents[0]) != 64 || len(req.RawInputContents[1]) != 16 || req.Inputs[1].Datatype != "INT64" {
		t.Errorf("request %v", req)
	}
	for _, bad := range []string{"X:FP32", "X:STRING:1", "X:FP32:0", "X:FP32:1,99999999"} {
		if _, err := capacity.InferRequest("m", "", []string{bad}); err == nil {
			t.Errorf("--input %q accepted", bad)
		}
	}
}
