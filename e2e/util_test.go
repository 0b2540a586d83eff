//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kedaVersion is the KEDA release the wrapper module e2e/tools/keda pins.
const kedaVersion = "v2.21.0"

var base64Std = base64.StdEncoding

var suiteStart = time.Now()

// logf prints a line with the seconds since the suite started, so the
// output reads as a timeline.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7.1fs] %s\n", time.Since(suiteStart).Seconds(), fmt.Sprintf(format, args...))
}

// runOutput runs a command and returns its stdout; stderr goes into the error.
func runOutput(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// renewLease keeps the node's heartbeat Lease fresh (kube-node-lease).
func (c *cluster) renewLease(ctx context.Context) error {
	leases := c.kube.CoordinationV1().Leases("kube-node-lease")
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: nodeName},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(nodeName), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
