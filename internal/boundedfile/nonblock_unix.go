//go:build unix

package boundedfile

import "syscall"

// openNonBlocking opens a FIFO without waiting for a writer, and makes a pipe pollable, so
// that Read's deadline applies.
const openNonBlocking = syscall.O_NONBLOCK

// openNoCTTY keeps ReadRegular's open from making a terminal the controlling one.
const openNoCTTY = syscall.O_NOCTTY
