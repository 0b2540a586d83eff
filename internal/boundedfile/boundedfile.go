// Package boundedfile reads a whole file whose size has a bound: a flag or a field names the
// file, so a hostile or mistaken path (/dev/zero, a log, a disk image) must cost at most the
// bound, never the process's memory.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrTooLarge is wrapped by Read's error for a file past its limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the file at path if it has at most limit bytes (limit ≥ 0).
// It reads at most limit+1 bytes, whatever the file is (an endless device included).
// Errors: os.Open's and the read's, unchanged; past limit, one wrapping [ErrTooLarge] that
// says "<path>: larger than <limit> bytes". Callers add the flag or field that named the file.
func Read(path string, limit int64) ([]byte, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%s: negative limit %d", path, limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrTooLarge, path, limit)
	}
	return data, nil
}

// MaxPEMBytes bounds each TLS file (certificate, key, CA bundle) a command reads: they are
// kilobytes (Debian's whole ca-certificates bundle is about 220 KB); --tls-cert-file=/dev/zero
// was read until the process ran out of memory.
const MaxPEMBytes = 1 << 20

// ReadPEM reads the TLS file at path, at most MaxPEMBytes, for the flag or field named flag.
// Errors name flag: a missing or unreadable file as "<flag>: <open error>", a larger one as
// "<flag> "<path>": larger than 1048576 bytes (1 MiB); want a PEM file".
func ReadPEM(flag, path string) ([]byte, error) {
	data, err := Read(path, MaxPEMBytes)
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, fmt.Errorf("%s %q: larger than %d bytes (1 MiB); want a PEM file", flag, path, MaxPEMBytes)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%s: %w", flag, err)
	case err != nil:
		return nil, fmt.Errorf("%s %q: %w", flag, path, err)
	}
	return data, nil
}
