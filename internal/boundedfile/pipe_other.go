//go:build !linux

package boundedfile

import "os"

// anonymousPipe is false where pipefs cannot be asked for: an empty anonymous pipe then waits
// for a writer as a named FIFO does, until Read's deadline.
func anonymousPipe(*os.File) bool { return false }
