package boundedfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// NotRegularError is ReadRegular's error for a path whose opened file is not a regular file.
type NotRegularError struct {
	Mode fs.FileMode // the opened file's mode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("not a regular file (%v)", e.Mode.Type())
}

// TooLargeError is ReadRegular's error for a file past its limit, by the size its stat gave
// (Streamed false) or by what it read past it (Streamed true: a file whose size says less than
// it reads, such as /proc/self/pagemap, size 0). It wraps ErrTooLarge.
type TooLargeError struct {
	Size, Limit int64 // bytes: the stat's size, and the limit
	Streamed    bool
}

func (e *TooLargeError) Error() string {
	if e.Streamed {
		return fmt.Sprintf("more than %d bytes read, though its size is %d", e.Limit, e.Size)
	}
	return fmt.Sprintf("%d bytes, larger than %d", e.Size, e.Limit)
}

// Unwrap returns ErrTooLarge.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// regularChunk is ReadRegular's read size: a multiple of 8, since /proc/self/pagemap refuses any
// other read size (EINVAL), and it is a file this bound is tested with.
const regularChunk = 32 << 10

// ReadRegular returns the contents of the regular file at path, of at most limit bytes (limit ≥
// 0), for files that must be regular (a kubeconfig and the files it names). The path is opened
// once, without blocking (a FIFO's open does not wait for a writer), and the opened file must
// be regular (fstat: a path swapped after a check cannot slip through) with a size of at most
// limit; at most limit+1 bytes are read from it, in chunks of 32 KiB, so a file whose size says
// less than it reads is refused too.
// Errors: os.OpenFile's and the read's, unchanged; *NotRegularError; *TooLargeError (wrapping
// ErrTooLarge). Callers add the flag or field that named the file.
func ReadRegular(path string, limit int64) ([]byte, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%s: negative limit %d", path, limit)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlocking|openNoCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, &NotRegularError{Mode: fi.Mode()}
	case fi.Size() > limit:
		return nil, &TooLargeError{Size: fi.Size(), Limit: limit}
	}
	data := make([]byte, 0, fi.Size())
	var chunk [regularChunk]byte
	for {
		n, err := f.Read(chunk[:])
		data = append(data, chunk[:n]...)
		switch {
		case int64(len(data)) > limit:
			return nil, &TooLargeError{Size: fi.Size(), Limit: limit, Streamed: true}
		case err == io.EOF:
			return data, nil
		case err != nil:
			return nil, err
		}
	}
}
