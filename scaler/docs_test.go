package scaler

import (
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDocsExamplesParse keeps docs/scaler.md honest: every ScaledObject
// example's trigger metadata is accepted by ParseMetadata.
func TestDocsExamplesParse(t *testing.T) {
	md, err := os.ReadFile("../docs/scaler.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(md, -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d YAML examples, want a Triton and a vLLM ScaledObject", len(blocks))
	}
	for _, b := range blocks {
		var so struct {
			Metadata struct{ Name string }
			Spec     struct {
				Triggers []struct {
					Type     string
					Metadata map[string]string
				}
			}
		}
		if err := yaml.Unmarshal(b[1], &so); err != nil {
			t.Fatalf("example: %v", err)
		}
		if len(so.Spec.Triggers) == 0 {
			t.Fatalf("example %q has no triggers", so.Metadata.Name)
		}
		for _, tr := range so.Spec.Triggers {
			if _, err := ParseMetadata(tr.Metadata, Defaults{PrometheusAddress: "http://prometheus:9090"}); err != nil {
				t.Errorf("example %s: %v", so.Metadata.Name, err)
			}
		}
	}
}
