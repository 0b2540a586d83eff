package scaler

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// TestDocsBenchCommands keeps docs/scaler.md's benchmark commands runnable: every
// `go test … -bench PATTERN … ./pkg/` names a package holding, for each |-alternative of
// PATTERN, a benchmark it matches (a moved benchmark otherwise runs nothing, silently).
func TestDocsBenchCommands(t *testing.T) {
	md, err := os.ReadFile("../docs/scaler.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := regexp.MustCompile(`go test [^\n`+"`"+`]*?-bench '?([^' ]+)'? [^\n`+"`"+`]*?\./([\w/]*?)/?(?:\s|$|`+"`"+`)`).FindAllSubmatch(md, -1)
	if len(cmds) < 3 {
		t.Fatalf("found %d -bench commands in docs/scaler.md, want at least 3", len(cmds))
	}
	decl := regexp.MustCompile(`(?m)^func (Benchmark\w+)\(`)
	for _, c := range cmds {
		pattern, pkg := string(c[1]), string(c[2])
		files, err := filepath.Glob(filepath.Join("..", pkg, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("-bench %s ./%s: no test files in ./%s (%v)", pattern, pkg, pkg, err)
			continue
		}
		var benches []string
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range decl.FindAllSubmatch(src, -1) {
				benches = append(benches, string(m[1]))
			}
		}
		for _, alt := range strings.Split(pattern, "|") {
			re, err := regexp.Compile(alt)
			if err != nil {
				t.Errorf("-bench %s: %v", pattern, err)
				continue
			}
			if !slices.ContainsFunc(benches, re.MatchString) {
				t.Errorf("-bench %s ./%s: %q matches none of %v", pattern, pkg, alt, benches)
			}
		}
	}
}

// TestDocsEchoExample: the cut-value example in docs/scaler.md is the real format: the first
// 64 bytes quoted, then "…" and the length outside the quotes (the doc showed `"999…" (1048576
// bytes)`, the ellipsis inside the quotes, for a value no trigger can carry).
func TestDocsEchoExample(t *testing.T) {
	md, err := os.ReadFile("../docs/scaler.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`got \"(9+)…(9+)\"… \\((\\d+) bytes\\)`, the quotes holding (\\d+) nines").FindSubmatch(md)
	if m == nil {
		t.Fatal("docs/scaler.md has no echo example `got \"9…9\"… (N bytes)`, the quotes holding N nines")
	}
	n, _ := strconv.Atoi(string(m[3]))
	held, _ := strconv.Atoi(string(m[4]))
	_, err = ParseMetadata(queueMeta(KeySLOWaitSeconds, strings.Repeat("9", n)), testDefaults)
	want := fmt.Sprintf(`got "%s"… (%d bytes)`, strings.Repeat("9", held), n)
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("sloWaitSeconds of %d nines: error %v, want it to end %q as the doc says", n, err, want)
	}
}
