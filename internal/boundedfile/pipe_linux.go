//go:build linux

package boundedfile

import (
	"os"
	"syscall"
)

// pipefsMagic is the f_type statfs(2) gives for a file on pipefs, where anonymous pipes live
// (PIPEFS_MAGIC, linux/magic.h); a named FIFO lives on the file system that holds its name.
const pipefsMagic = 0x50495045

// anonymousPipe reports whether f is an anonymous pipe (what /dev/stdin or <(cmd) name), not a
// named FIFO. It asks through f's raw connection, which leaves f non-blocking (f.Fd would not).
func anonymousPipe(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var fs syscall.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstatfs(int(fd), &fs) }); err != nil || serr != nil {
		return false
	}
	return fs.Type == pipefsMagic
}
