package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadRegular(file, 10); err != nil || string(data) != "0123456789" {
		t.Errorf("at its limit: %q, %v; want the 10 bytes", data, err)
	}
	_, err := ReadRegular(file, 9)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Streamed || tl.Size != 10 || tl.Limit != 9 || !errors.Is(err, ErrTooLarge) || err.Error() != "10 bytes, larger than 9" {
		t.Errorf("past its limit: %v (%+v); want a TooLargeError by size, 10 bytes of 9", err, tl)
	}
	var nr *NotRegularError
	if _, err := ReadRegular(dir, 10); !errors.As(err, &nr) || !nr.Mode.IsDir() || err.Error() != "not a regular file (d---------)" {
		t.Errorf("a directory: %v; want a NotRegularError", err)
	}
	if _, err := ReadRegular(filepath.Join(dir, "missing"), 10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v; want os.ErrNotExist", err)
	}
	if _, err := ReadRegular(file, -1); err == nil {
		t.Error("a negative limit: no error")
	}
}
