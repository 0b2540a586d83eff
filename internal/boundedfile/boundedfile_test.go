package boundedfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestReadMemory: an endless device is read to limit+1 bytes in chunks and refused, costing
// about the limit (io.ReadAll's doubling had cost more than twice it), and a regular file
// past the limit is refused by its size without being read (a 1 TiB sparse file).
func TestReadMemory(t *testing.T) {
	const limit = 16 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Read("/dev/zero", limit)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || err.Error() != "file too large: /dev/zero: larger than 16777216 bytes" {
		t.Errorf("Read(/dev/zero) = %v, want ErrTooLarge naming the path and the limit", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > limit+2*ChunkBytes {
		t.Errorf("Read(/dev/zero, %d) allocated %d bytes; want about the limit", limit, got)
	}
	huge := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<40); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&before)
	_, err = Read(huge, limit)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read(1 TiB sparse file) = %v, want ErrTooLarge", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("Read(1 TiB sparse file) allocated %d bytes; want nothing read", got)
	}
	// Exactly the limit, from a regular file: read whole.
	exact := filepath.Join(t.TempDir(), "exact")
	if err := os.WriteFile(exact, make([]byte, limit), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(exact, limit); err != nil || len(data) != limit {
		t.Errorf("Read(exact) = %d bytes, %v; want %d", len(data), err, limit)
	}
}

// TestReadPipeNobodyWrites: a path naming a pipe whose writer never writes nor closes
// (record: /proc/self/fd/1 with stdout piped) was read forever; it is now an error after the
// read timeout, and a FIFO without a writer is not waited for at its open. A pipe whose writer
// sends and closes is read as before.
func TestReadPipeNobodyWrites(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/fd")
	}
	defer func(d time.Duration) { readTimeout = d }(readTimeout)
	readTimeout = 200 * time.Millisecond
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	path := fmt.Sprintf("/proc/self/fd/%d", r.Fd())
	start := time.Now()
	_, err = Read(path, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "no end of file within 200ms") || time.Since(start) > 10*time.Second {
		t.Errorf("silent pipe: %v after %v; want the timeout's error", err, time.Since(start))
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	go func() { w2.Write([]byte("models: []\n")); w2.Close() }()
	data, err := Read(fmt.Sprintf("/proc/self/fd/%d", r2.Fd()), 1<<20)
	if err != nil || string(data) != "models: []\n" {
		t.Errorf("pipe that is written and closed: %q, %v", data, err)
	}

	// An empty anonymous pipe whose writer has closed (printf '' | … /dev/stdin, <(true)) is an
	// empty file at once: os.Stat calls it a named pipe too, but it had its writer from the start.
	r3, w3, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	w3.Close()
	data, err = Read(fmt.Sprintf("/proc/self/fd/%d", r3.Fd()), 1<<20)
	if err != nil || len(data) != 0 {
		t.Errorf("empty closed pipe: %q, %v; want an empty file (it waited for a writer, then said none came)", data, err)
	}

	// A FIFO without a writer is not waited for at its open, and is an error after the
	// timeout, not an empty file.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() {
		data, err := Read(fifo, 1<<20)
		if err == nil {
			err = fmt.Errorf("read %q", data)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no writer within 200ms") {
			t.Errorf("a FIFO nobody writes to: %v; want the no-writer error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO without a writer: Read still waiting after 10 s")
	}

	// A FIFO whose writer comes after the reader (mkfifo f; reader f & … > f) is read whole;
	// opened without blocking it read as empty, and the late writer blocked for ever.
	readTimeout = 5 * time.Second
	type result struct {
		data []byte
		err  error
	}
	got := make(chan result, 1)
	go func() { d, err := Read(fifo, 1<<20); got <- result{d, err} }()
	go func() { // in a goroutine: without a reader holding the FIFO this open would block
		time.Sleep(300 * time.Millisecond)
		if wf, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			wf.Write([]byte("models: []\n"))
			wf.Close()
		}
	}()
	select {
	case r := <-got:
		if r.err != nil || string(r.data) != "models: []\n" {
			t.Errorf("a FIFO with a late writer: %q, %v; want its contents", r.data, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO with a late writer: Read still waiting after 10 s")
	}
}
