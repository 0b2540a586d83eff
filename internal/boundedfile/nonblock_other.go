//go:build !unix

package boundedfile

// openNonBlocking is 0 where O_NONBLOCK does not exist: Read's deadline applies where the file
// supports one.
const openNonBlocking = 0

// openNoCTTY is 0 where O_NOCTTY does not exist.
const openNoCTTY = 0
