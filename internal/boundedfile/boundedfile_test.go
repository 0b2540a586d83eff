package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at")
	over := filepath.Join(dir, "over")
	if err := os.WriteFile(at, []byte(strings.Repeat("x", 16)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, []byte(strings.Repeat("x", 17)), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(at, 16); err != nil || len(data) != 16 {
		t.Errorf("a file at the limit: %d bytes, %v; want its 16 bytes", len(data), err)
	}
	if _, err := Read(over, 16); !errors.Is(err, ErrTooLarge) || err.Error() != "file too large: "+over+": larger than 16 bytes" {
		t.Errorf("one byte over: %v, want ErrTooLarge naming the path and the limit", err)
	}
	// An endless device costs the limit, not the memory.
	if _, err := Read("/dev/zero", 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("/dev/zero: %v, want ErrTooLarge", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 16); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want os.ErrNotExist unchanged", err)
	}
	if _, err := Read(at, -1); err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf("a negative limit: %v, want an error of its own", err)
	}
}
