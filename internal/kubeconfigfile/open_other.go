//go:build !unix

package kubeconfigfile

// openFlags is 0 where O_NONBLOCK does not exist: the fstat after the open still refuses
// anything that is not a regular file.
const openFlags = 0
