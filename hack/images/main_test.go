package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/internal/imagebuild"
)

// TestOnlyUnknownListsEveryImage: --only=foo said "want scaler, residency or tritonfake" while
// imagebuild.Images also builds ledger. The message now comes from Images; it is refused before
// any file is read.
func TestOnlyUnknownListsEveryImage(t *testing.T) {
	var stderr bytes.Buffer
	err := run([]string{"--only=foo"}, &stderr)
	if got, want := errString(err), `--only "foo": want scaler, residency, tritonfake or ledger`; got != want {
		t.Errorf("run(--only=foo) = %q, want %q", got, want)
	}
	if len(imagebuild.Images) != 4 {
		t.Errorf("imagebuild.Images has %d images; this test's messages name 4", len(imagebuild.Images))
	}
}

// TestHelpListsEveryImage: --help showed "(scaler, residency, tritonfake)" for --only; it is
// now every name in imagebuild.Images, and --help is no error.
func TestHelpListsEveryImage(t *testing.T) {
	var stderr bytes.Buffer
	if err := run([]string{"--help"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run(--help) = %v, want flag.ErrHelp", err)
	}
	if want := "build only this image (scaler, residency, tritonfake, ledger)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("--help does not contain %q:\n%s", want, stderr.String())
	}
}

// TestMakefileHelpListsEveryImage: `make help` printed "(scaler residency tritonfake; …)";
// the Makefile's images help line must name imagebuild.Images, in order.
func TestMakefileHelpListsEveryImage(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^images: ## OCI image archives \(([^;)]*);`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no `images: ## OCI image archives (<names>; …)` help line in the Makefile")
	}
	var want []string
	for _, im := range imagebuild.Images {
		want = append(want, im.Name)
	}
	if diff := cmp.Diff(want, strings.Fields(string(m[1]))); diff != "" {
		t.Errorf("Makefile images help line names (-want +got):\n%s", diff)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
