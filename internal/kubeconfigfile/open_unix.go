//go:build unix

package kubeconfigfile

import "syscall"

// openFlags opens a FIFO without waiting for a writer (the open returns at once and the fstat
// that follows refuses it) and never makes a terminal the controlling one.
const openFlags = syscall.O_NONBLOCK | syscall.O_NOCTTY
