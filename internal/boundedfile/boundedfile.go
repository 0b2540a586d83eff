// Package boundedfile reads a whole file whose size has a bound: a flag or a field names the
// file, so a hostile or mistaken path (/dev/zero, a log, a disk image) must cost at most the
// bound, never the process's memory.
package boundedfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// ErrTooLarge is wrapped by Read's error for a file past its limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the file at path if it has at most limit bytes (limit ≥ 0).
// A regular file larger than limit is refused by its size, before anything is read, and one
// within it is read into a buffer of its size; anything else (a pipe, an endless device such
// as /dev/zero) is read in chunks of [ChunkBytes] to at most limit+1 bytes, so memory grows by
// the bytes read, not by io.ReadAll's doubling (which took /dev/zero at a 256 MiB limit to
// 607 MB of RSS before the refusal).
// A file that is not regular is opened without blocking and must reach its end within
// [ReadTimeout], or Read returns an error saying so; a FIFO's writer may come within it (an
// empty read is taken for no writer yet, so a FIFO written empty is an error too).
// Errors: os.Open's and the read's, unchanged; past limit, one wrapping [ErrTooLarge] that
// says "<path>: larger than <limit> bytes". Callers add the flag or field that named the file.
func Read(path string, limit int64) ([]byte, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%s: negative limit %d", path, limit)
	}
	// A path that is not a regular file is opened without blocking (a FIFO's open waits for a
	// writer) and read under a deadline: a pipe nobody writes to (record: /proc/self/fd/1 with
	// stdout piped, a FIFO whose writer never comes) hung the ledger and the residency sidecar,
	// which then ignored SIGTERM.
	flags := os.O_RDONLY
	st, err := os.Stat(path)
	regular := err == nil && st.Mode().IsRegular()
	if !regular {
		flags |= openNonBlocking
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deadline := time.Now().Add(readTimeout)
	if !regular {
		// os.ErrNoDeadline for a file the poller cannot wait on (/dev/zero): its reads do not
		// wait for a writer.
		_ = f.SetReadDeadline(deadline)
	}
	tooLarge := fmt.Errorf("%w: %s: larger than %d bytes", ErrTooLarge, path, limit)
	noEnd := func() error { // the read deadline passed
		return fmt.Errorf("%s: no end of file within %v (a pipe or device nobody writes to and closes); want a file", path, readTimeout)
	}
	var first []byte
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if st.Size() > limit {
			return nil, tooLarge
		}
		// Its size and one byte more: a file that grew since the stat reads on in chunks.
		first = make([]byte, st.Size()+1)
		n, err := io.ReadFull(f, first)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return first[:n], nil
		case err != nil:
			return nil, err
		}
	}
	// A named FIFO opened without blocking reads as empty until a writer opens it (Linux's pipe
	// read: no writer, no data, end of file), so `mkfifo f; reader f & … > f` read nothing and
	// left the late writer blocked: an empty read is tried again, a byte at a time, until the
	// deadline. (A writer that opens and closes without writing then reads as no writer.) An
	// anonymous pipe (/dev/stdin, <(cmd)), which os.Stat also calls a named pipe, has had its
	// writer from the start: its empty read is an empty file.
	if st != nil && st.Mode()&os.ModeNamedPipe != 0 && !anonymousPipe(f) {
		var b [1]byte
		for {
			n, err := f.Read(b[:])
			if n == 1 {
				if limit < 1 {
					return nil, tooLarge
				}
				first = b[:]
				break
			}
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, noEnd()
			case err != io.EOF:
				return nil, err
			}
			time.Sleep(fifoPoll)
			if !time.Now().Before(deadline) {
				return nil, fmt.Errorf("%s: no writer within %v (a FIFO nobody opened for writing, or opened and closed empty); want a file", path, readTimeout)
			}
		}
	}
	rest, over, err := readChunks(f, limit-int64(len(first)))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, noEnd()
	case err != nil:
		return nil, err
	case over:
		return nil, tooLarge
	case first == nil:
		return rest, nil
	}
	return append(first, rest...), nil
}

// ReadTimeout bounds how long Read waits for a file that is not regular (a pipe, a FIFO) to
// reach its end: a writer that sends its contents at once (process substitution, a shell pipe
// into /dev/stdin) is done long before.
const ReadTimeout = 30 * time.Second

// readTimeout is ReadTimeout, shortened by tests.
var readTimeout = ReadTimeout

// fifoPoll is how often Read looks again for a FIFO's writer.
const fifoPoll = 50 * time.Millisecond

// ChunkBytes is the piece Read reads at a time from a file that is not regular.
const ChunkBytes = 1 << 20

// readChunks reads r to its end or past limit bytes (limit may be negative: then any byte is
// past it), whichever comes first, and reports whether it had more than limit (then the data
// is nil). It reads at most max(limit, 0)+1 bytes, holding them in chunks of ChunkBytes that
// are joined once at the end: a refused stream costs what was read, an accepted one twice.
func readChunks(r io.Reader, limit int64) (data []byte, over bool, err error) {
	lr := io.LimitReader(r, max(limit, 0)+1)
	var chunks [][]byte
	var n int64
	for {
		c := make([]byte, min(ChunkBytes, max(limit, 0)+1-n))
		k, err := io.ReadFull(lr, c)
		chunks, n = append(chunks, c[:k]), n+int64(k)
		if n > limit {
			return nil, true, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return bytes.Join(chunks, nil), false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
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
