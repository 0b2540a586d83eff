package specfile

import (
	"errors"
	"strings"
	"testing"
)

// A spec is one YAML document: a second one (a file concatenated with another, a stray
// "---") is bad input naming its line, not silently dropped with whatever it holds — here a
// service of tier P9 that would otherwise leave the ledger passing.
func TestParseRefusesASecondDocument(t *testing.T) {
	give := "nodes: []\nservices: []\n---\nnodes: []\nservices:\n  - {name: evil, tier: P9}\n"
	_, err := Parse([]byte(give), "x.yaml")
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "x.yaml:4: spec: a second YAML document") {
		t.Errorf("Parse of two documents = %v; want an ErrInvalid naming x.yaml:4 and the second document", err)
	}
	// A document separator before the only document, and a trailing comment, are one document.
	if _, err := Parse([]byte("---\nnodes:\n  - {name: a, gpus: [{product: A100-SXM4-80GB}]}\nservices: []\n# end\n"), "x.yaml"); err != nil {
		t.Errorf("one document after ---: %v", err)
	}
}
