// Package kubeconfigfile checks a kubeconfig path before client-go's clientcmd reads it:
// clientcmd reads the whole file itself, with no bound, so --kubeconfig=/dev/zero read until
// the process ran out of memory. The ledger and the scaler both take a --kubeconfig; this is
// their one rule.
package kubeconfigfile

import (
	"errors"
	"fmt"
	"os"
)

// MaxBytes bounds a kubeconfig file, in bytes (1 MiB). A kubeconfig with a few clusters and
// embedded certificates is kilobytes.
const MaxBytes = 1 << 20

// Check refuses a kubeconfig that is not a regular file of at most MaxBytes, before clientcmd
// reads it. flag names where the path came from in the error ("--kubeconfig",
// "Kubeconfig (--kubeconfig)", "kubeconfig ($KUBECONFIG or ~/.kube/config)").
//
// A path that does not exist is nil: it is left to clientcmd, which skips a missing
// $KUBECONFIG entry and reports a missing explicit file itself. Errors:
//   - `<flag> "<path>": not a regular file (<mode type>); want a kubeconfig file` for a
//     device, directory, FIFO or socket;
//   - `<flag> "<path>": <size> bytes, larger than 1048576 (1 MiB); want a kubeconfig file`;
//   - `<flag> "<path>": <os.Stat's error>` for any other stat failure (permission).
//
// The file is stat'ed, not opened: a path replaced between Check and clientcmd's read is not
// caught (the path is the operator's, not an attacker's).
func Check(flag, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s %q: %w", flag, path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s %q: not a regular file (%v); want a kubeconfig file", flag, path, fi.Mode().Type())
	case fi.Size() > MaxBytes:
		return fmt.Errorf("%s %q: %d bytes, larger than %d (1 MiB); want a kubeconfig file", flag, path, fi.Size(), MaxBytes)
	}
	return nil
}
