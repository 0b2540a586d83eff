// Package streamtest gives the kubeconfig tests (internal/kubeconfigfile, scaler, cmd/ledger) a
// file whose size says 0 but that reads on far past any bound. It is for tests only.
package streamtest

import (
	"os"
	"testing"
)

// Pagemap is /proc/self/pagemap: a regular file of size 0 that reads 8 bytes for every page of
// the address space (hundreds of GiB).
const Pagemap = "/proc/self/pagemap"

// SkipUnlessPagemap skips t where Pagemap is not that file or cannot be read (not Linux, a
// restricted /proc).
func SkipUnlessPagemap(t testing.TB) {
	t.Helper()
	fi, err := os.Stat(Pagemap)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Skipf("%s: %v, %v: not the zero-size regular file this case needs (Linux's /proc)", Pagemap, fi, err)
	}
	f, err := os.Open(Pagemap)
	if err != nil {
		t.Skipf("%s is not readable here: %v", Pagemap, err)
	}
	f.Close()
}
