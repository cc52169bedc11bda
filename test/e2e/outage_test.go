//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/database-apiserver/internal/localcluster"
)

// TestControllerRidesOutAKubeAPIServerOutage stops kube-apiserver until the controller has
// lost its Lease (it cannot renew it past its renew deadline, 5s here, and logs "Stopped
// leading") and starts it again. The controller loses the Lease but not its process: the same
// process leads again, recreates a child deleted before it did, and a Database created after
// the outage turns Ready with no manual step.
func TestControllerRidesOutAKubeAPIServerOutage(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-outage")
	kubectlIn(t, databaseIn(ns, "before", 1, ""), "apply", "-f", "-")
	waitReady(t, ns, "before", 1)
	waitLeading(t)
	pid := cluster.PID(localcluster.ControllerName)
	restarts := cluster.Restarts(localcluster.ControllerName)
	require.NotZero(t, pid)
	svc, err := kube(t).CoreV1().Services(ns).Get(ctx, "before", metav1.GetOptions{})
	require.NoError(t, err)

	mark := controllerLogMark(t)
	require.NoError(t, cluster.StopComponent("kube-apiserver"))
	stopped := time.Now()
	eventually(t, time.Minute, func() error {
		if !strings.Contains(controllerLogSince(t, mark), `"Stopped leading"`) {
			return fmt.Errorf("the controller has not logged that it lost the Lease")
		}
		return nil
	})
	down := time.Since(stopped)
	require.NoError(t, cluster.StartComponent(ctx, "kube-apiserver"))
	back := time.Now()

	// Deleted as soon as kube-apiserver answers, before the controller leads again.
	require.NoError(t, kube(t).CoreV1().Services(ns).Delete(ctx, "before", metav1.DeleteOptions{}))
	eventually(t, time.Minute, func() error { // the aggregator finds our server again
		_, errOut, err := kubectlAs(cluster.KubeconfigPath, databaseIn(ns, "after", 1, ""), "apply", "-f", "-")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	waitReady(t, ns, "after", 1)
	eventually(t, readyTimeout, func() error {
		again, err := kube(t).CoreV1().Services(ns).Get(ctx, "before", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if again.UID == svc.UID {
			return fmt.Errorf("Service %s/before not deleted yet", ns)
		}
		return nil
	})
	waitReady(t, ns, "before", 1)
	reconciled := time.Since(back)
	waitLeading(t)
	require.Equal(t, pid, cluster.PID(localcluster.ControllerName), "the controller's process exited")
	require.Equal(t, restarts, cluster.Restarts(localcluster.ControllerName))
	t.Logf("measured: kube-apiserver down %v, until the controller lost its Lease: the controller kept its process; the Service deleted and the Database created once it was back reconciled %v after it",
		down.Round(100*time.Millisecond), reconciled.Round(100*time.Millisecond))
}

// TestKilledComponentsAreRestarted kills the controller, kube-scheduler,
// kube-controller-manager, kwok and our API server with SIGKILL, one after another, as a crash
// would. The local control plane starts each again (a new process), and a Database created
// afterwards turns Ready: it needs every one of them.
func TestKilledComponentsAreRestarted(t *testing.T) {
	ns := testNamespace(t, "e2e-killed")
	for _, name := range []string{localcluster.ControllerName, "kube-scheduler", "kube-controller-manager", "kwok", "database-apiserver"} {
		pid := cluster.PID(name)
		require.NotZero(t, pid, name)
		restarts := cluster.Restarts(name)
		require.NoError(t, cluster.Signal(name, syscall.SIGKILL))
		started := time.Now()
		eventually(t, time.Minute, func() error {
			if now := cluster.PID(name); now == 0 || now == pid {
				return fmt.Errorf("%s not started again yet (pid %d, was %d)", name, now, pid)
			}
			return nil
		})
		require.Equal(t, restarts+1, cluster.Restarts(name), name)
		t.Logf("measured: %s running again %v after SIGKILL", name, time.Since(started).Round(100*time.Millisecond))
	}

	eventually(t, time.Minute, func() error { // the aggregator finds our server again
		_, errOut, err := kubectlAs(cluster.KubeconfigPath, databaseIn(ns, "after-kills", 2, ""), "apply", "-f", "-")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	waitReady(t, ns, "after-kills", 2)
}
