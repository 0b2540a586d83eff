//go:build unix

package boundedfile

import "syscall"

// openNonBlocking opens a FIFO without waiting for a writer, and makes a pipe pollable, so
// that Read's deadline applies.
const openNonBlocking = syscall.O_NONBLOCK
