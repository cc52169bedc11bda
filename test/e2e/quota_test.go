//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestResourceQuotaCapsDatabasesPerNamespace sets count/databases.example.com to 1 in a
// namespace: the first Database is admitted and counted in the quota's status.used, the
// second is refused by our server's ResourceQuota admission with the message kube-apiserver
// gives for built-in kinds, and deleting the first frees its place.
func TestResourceQuotaCapsDatabasesPerNamespace(t *testing.T) {
	const ns = "e2e-quota"
	kubectl(t, "create", "namespace", ns)
	t.Cleanup(func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "namespace", ns, "--wait=false")
	})
	kubectl(t, "create", "quota", "databases", "-n", ns, "--hard=count/databases.example.com=1")
	kube, err := kubernetes.NewForConfig(cluster.AdminConfig)
	require.NoError(t, err)
	used := func() (string, error) {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(context.Background(), "databases", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		n, ok := q.Status.Used[corev1.ResourceName("count/databases.example.com")]
		if !ok {
			return "", fmt.Errorf("status.used has no count/databases.example.com yet: %v", q.Status.Used)
		}
		return n.String(), nil
	}
	wantUsed := func(want string) func() error {
		return func() error {
			got, err := used()
			if err == nil && got != want {
				err = fmt.Errorf("status.used count/databases.example.com is %s, want %s", got, want)
			}
			return err
		}
	}
	// kube-controller-manager's resource quota controller counts what exists first; until then
	// admission refuses with "status unknown for quota".
	eventually(t, 60*time.Second, wantUsed("0"))

	inNamespace := func(name string) string {
		return strings.Replace(database(name, "mysql", "8.0", 1), "namespace: production", "namespace: "+ns, 1)
	}
	kubectlIn(t, inNamespace("first"), "create", "-f", "-")
	eventually(t, 30*time.Second, wantUsed("1"))

	errOut := kubectlFails(t, cluster.KubeconfigPath, inNamespace("second"), "create", "-f", "-")
	require.Contains(t, errOut, `Error from server (Forbidden): error when creating "STDIN": databases.example.com "second" is forbidden: `+
		`exceeded quota: databases, requested: count/databases.example.com=1, used: count/databases.example.com=1, limited: count/databases.example.com=1`)

	// The controller's finalizer goes first; then the quota controller sees the delete.
	kubectl(t, "delete", "db", "first", "-n", ns, "--wait=true", "--timeout=60s")
	eventually(t, 60*time.Second, wantUsed("0"))
	eventually(t, 30*time.Second, func() error {
		_, errOut, err := kubectlAs(cluster.KubeconfigPath, inNamespace("second"), "create", "-f", "-")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	eventually(t, 30*time.Second, wantUsed("1"))
}
