package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/inferscale/inferscale/capacity/record"
)

// TestOpenAITraceTokenPairs: with --protocol=openai and a --trace, only requests carrying both
// token counts lend their lengths (rows with an output count missing are passed over, not
// sent as max_tokens 1); a trace with no complete pair keeps --max-tokens and the record's
// default request description.
func TestOpenAITraceTokenPairs(t *testing.T) {
	var rows strings.Builder
	rows.WriteString("timestamp,model,input_tokens,output_tokens\n")
	for i := range 400 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&rows, "%d.%02d,m,100,7\n", i/100, i%100)
		case 1:
			fmt.Fprintf(&rows, "%d.%02d,m,30,9\n", i/100, i%100)
		case 2:
			fmt.Fprintf(&rows, "%d.%02d,m,50,\n", i/100, i%100) // no output count
		default:
			fmt.Fprintf(&rows, "%d.%02d,m,,11\n", i/100, i%100) // no input count
		}
	}
	noPairs := strings.NewReplacer(",7\n", ",\n", ",9\n", ",\n", ",11\n", ",\n").Replace(rows.String())
	for _, c := range []struct {
		name, csv   string
		wantTokens  []float64
		wantInTurns bool
	}{
		{"complete pairs", rows.String(), []float64{7, 9}, true},
		{"no complete pair", noPairs, []float64{33}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, maxTokens := maxTokensServer(t, "m")
			dir := t.TempDir()
			trace := filepath.Join(dir, "trace.csv")
			if err := os.WriteFile(trace, []byte(c.csv), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			args := append([]string{"--protocol=openai", "--target=" + url, "--model=m", "--mig-profile=h100-80gb", "--slo-latency=1s",
				"--max-tokens=33", "--trace=" + trace, "--start-rate=50", "--max-rate=50", "--min-rate=50", "--max-lag=1s", "--out=" + dir}, short...)
			if code := run(context.Background(), args, &stdout, &stderr); code != 0 && code != 1 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			rec, err := record.Read(filepath.Join(dir, "m.h100-80gb.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(rec.LoadShape.Request, "trace requests in turn"); got != c.wantInTurns {
				t.Errorf("record's request %q: says trace requests in turn %v, want %v", rec.LoadShape.Request, got, c.wantInTurns)
			}
			if got := maxTokens(); !slices.Equal(got, c.wantTokens) {
				t.Errorf("server saw max_tokens %v, want %v", got, c.wantTokens)
			}
		})
	}
}

// maxTokensServer is openAIServer for model, answering every request and recording its
// max_tokens; seen returns the distinct values, sorted.
func maxTokensServer(t *testing.T, model string) (url string, seen func() []float64) {
	var mu sync.Mutex
	maxTokens := map[float64]bool{}
	url = openAIServer(t, model, func(r *http.Request) bool {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		v, ok := body["max_tokens"].(float64)
		if !ok {
			t.Errorf("a request without a numeric max_tokens: %v", body["max_tokens"])
			return true
		}
		mu.Lock()
		maxTokens[v] = true
		mu.Unlock()
		return true
	})
	return url, func() []float64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(maps.Keys(maxTokens))
	}
}
