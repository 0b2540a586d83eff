package kubeconfigfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/inferscale/inferscale/internal/kubeconfigfile/streamtest"
)

// TestReadFileStreams: /proc/self/pagemap is a regular file whose size says 0 and that reads
// on for the whole address space (8 bytes a page: hundreds of GiB). Check, which trusted the
// size, let it through, and client-go's os.ReadFile then ran out of memory; the read itself
// now stops past MaxBytes.
func TestReadFileStreams(t *testing.T) {
	const path = streamtest.Pagemap
	streamtest.SkipUnlessPagemap(t)
	data, err := ReadFile("--kubeconfig", path)
	const want = `--kubeconfig "/proc/self/pagemap": more than 1048576 bytes (1 MiB) read, though its size is 0; want a kubeconfig file`
	if err == nil || err.Error() != want || data != nil {
		t.Errorf("ReadFile(%s) = %d bytes, %v\nwant nil, %s", path, len(data), err, want)
	}
}

// TestReadFileFIFO: a FIFO is opened without waiting for a writer and refused by the opened
// file's type, the same handle that would be read (the path was stat'ed, then opened by
// client-go: a FIFO swapped in between blocked or streamed), with no writer and with one
// streaming more than MaxBytes into it.
func TestReadFileFIFO(t *testing.T) {
	dir := t.TempDir()
	for _, writer := range []bool{false, true} {
		fifo := filepath.Join(dir, "fifo")
		if writer {
			fifo += "-written"
		}
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var hold, w *os.File
		if writer {
			// A reader of the test's own lets the writer open at once and keeps the pipe
			// open until the test closes it: the writer is streaming when ReadFile opens.
			var err error
			if hold, err = os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
				t.Fatal(err)
			}
			if w, err = os.OpenFile(fifo, os.O_WRONLY, 0); err != nil {
				t.Fatal(err)
			}
			go func() {
				defer close(done)
				w.Write(make([]byte, 4*MaxBytes)) // blocks on the full pipe; EPIPE once no reader is left
			}()
		} else {
			close(done)
		}
		result := make(chan error, 1)
		go func() { _, err := ReadFile("--kubeconfig", fifo); result <- err }()
		select {
		case err := <-result:
			want := `--kubeconfig "` + fifo + `": not a regular file (p---------); want a kubeconfig file`
			if err == nil || err.Error() != want {
				t.Errorf("writer %v: %v\nwant %s", writer, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("writer %v: ReadFile(FIFO) still blocked after 10s", writer)
		}
		if writer {
			hold.Close() // the last reader: the writer's write ends with EPIPE
			<-done
			w.Close()
		}
	}
}
