//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
)

// subresourceUser is the user standing for role in TestSubresourcesThroughKubectl.
func subresourceUser(role string) string { return "e2e-subres-" + role }

// TestSubresourcesThroughKubectl uses databases/connection, databases/restart and
// databases/switchover through kube-apiserver with kubectl, as the admin, edit and view
// users (--as): what `kubectl auth can-i` answers for each, the connection a viewer reads,
// a restart an editor asks for carried out on the simulated node (every Pod recreated, the
// record completed), a second restart refused while it runs, and a switchover refused to a
// member the controller has not seen stream (no server answers on the simulated node).
func TestSubresourcesThroughKubectl(t *testing.T) {
	ns := testNamespace(t, "e2e-subres")
	for _, role := range []string{"admin", "edit", "view"} {
		kubectl(t, "create", "rolebinding", subresourceUser(role), "-n", ns, "--clusterrole="+role, "--user="+subresourceUser(role))
	}
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: shop
  namespace: `+ns+`
spec:
  engine: mongodb
  version: "7.0"
  replicas: 2
  storage: 1Gi
`, "apply", "-f", "-")

	// kubectl auth can-i takes the subresource as a flag: "databases/restart" would be the
	// Database named restart.
	for _, tc := range []struct {
		verb, subresource string
		allowed           map[string]bool
	}{
		{"get", "connection", map[string]bool{"admin": true, "edit": true, "view": true}},
		{"create", "restart", map[string]bool{"admin": true, "edit": true, "view": false}},
		{"create", "switchover", map[string]bool{"admin": true, "edit": true, "view": false}},
	} {
		for role, allowed := range tc.allowed {
			eventually(t, 30*time.Second, func() error {
				out, _, _ := kubectlAs(cluster.KubeconfigPath, "", "auth", "can-i", tc.verb, "databases.example.com",
					"--subresource="+tc.subresource, "-n", ns, "--as", subresourceUser(role))
				if want := map[bool]string{true: "yes", false: "no"}[allowed]; strings.TrimSpace(out) != want {
					return fmt.Errorf("can-i %s databases/%s as %s: %q, want %s", tc.verb, tc.subresource, role, out, want)
				}
				return nil
			})
		}
	}

	waitReady(t, ns, "shop", 2)
	base := "/apis/example.com/v1/namespaces/" + ns + "/databases/shop"

	// A viewer learns how to connect, without the password.
	out := kubectl(t, "get", "--raw", base+"/connection", "--as", subresourceUser("view"))
	t.Logf("GET %s/connection as view:\n%s", base, out)
	var conn examplev1.DatabaseConnection
	require.NoError(t, json.Unmarshal([]byte(out), &conn))
	require.Equal(t, "DatabaseConnection", conn.Kind)
	require.Equal(t, "shop."+ns+".svc.cluster.local", conn.Host)
	require.Equal(t, int32(27017), conn.Port)
	require.Equal(t, "shop-credentials", conn.SecretName)
	require.True(t, conn.Ready)
	require.NotContains(t, out, `"password":`)

	restart := `{"apiVersion":"example.com/v1","kind":"DatabaseRestart","metadata":{"name":"shop"},"reason":"e2e"}`
	errOut := kubectlFails(t, cluster.KubeconfigPath, restart, "create", "--raw", base+"/restart", "-f", "-", "--as", subresourceUser("view"))
	t.Logf("restart as view: %s", errOut)
	require.Contains(t, errOut, "Forbidden")

	before := map[string]types.UID{}
	pods, err := kube(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=shop"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		before[p.Name] = p.UID
	}

	out = kubectlIn(t, restart, "create", "--raw", base+"/restart", "-f", "-", "--as", subresourceUser("edit"))
	var asked examplev1.Database
	require.NoError(t, json.Unmarshal([]byte(out), &asked))
	require.Equal(t, "Database", asked.Kind)
	require.NotNil(t, asked.Status.Restart)
	require.Equal(t, subresourceUser("edit"), asked.Status.Restart.RequestedBy)
	require.Equal(t, "e2e", asked.Status.Restart.Reason)
	t.Logf("restart as edit: status.restart %+v", *asked.Status.Restart)

	errOut = kubectlFails(t, cluster.KubeconfigPath, restart, "create", "--raw", base+"/restart", "-f", "-", "--as", subresourceUser("admin"))
	t.Logf("second restart: %s", errOut)
	require.Contains(t, errOut, "a restart is under way: requested by "+subresourceUser("edit"))

	// The controller rolls the Pods; the StatefulSet controller recreates them on the
	// simulated node, and the record is completed once every one is new and Ready.
	done := waitRestartCompleted(t, ns, "shop", 3*time.Minute)
	pods, err = kube(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=shop"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		require.NotEqual(t, before[p.Name], p.UID, "%s was recreated", p.Name)
		require.Equal(t, specs.RestartStamp(done), p.Annotations[specs.RestartedAtAnnotation], p.Name)
		require.True(t, podIsReady(&p), p.Name)
	}
	require.False(t, done.Status.Restart.CompletedAt.Time.Before(done.Status.Restart.RequestedAt.Time))
	eventually(t, 30*time.Second, func() error {
		events := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=shop,reason=RestartCompleted", "-o", "name")
		if strings.TrimSpace(events) == "" {
			return fmt.Errorf("no RestartCompleted Event")
		}
		return nil
	})
	t.Logf("kubectl get db shop -o yaml:\n%s", kubectl(t, "get", "db", "shop", "-n", ns, "-o", "yaml"))

	// A new restart may be asked for once the last one completed.
	kubectlIn(t, restart, "create", "--raw", base+"/restart", "-f", "-", "--as", subresourceUser("admin"))

	// While it is under way a switchover is refused, as a restart is during a switchover.
	switchover := `{"apiVersion":"example.com/v1","kind":"DatabaseSwitchover","target":"shop-1"}`
	errOut = kubectlFails(t, cluster.KubeconfigPath, switchover,
		"create", "--raw", base+"/switchover", "-f", "-", "--as", subresourceUser("edit"))
	t.Logf("switchover during a restart: %s", errOut)
	require.Contains(t, errOut, "a restart is under way: requested by "+subresourceUser("admin"))
	waitRestartCompleted(t, ns, "shop", 3*time.Minute)

	// No server answers here: shop-1 is not known to stream, and is no switchover's target.
	errOut = kubectlFails(t, cluster.KubeconfigPath, switchover,
		"create", "--raw", base+"/switchover", "-f", "-", "--as", subresourceUser("edit"))
	t.Logf("switchover of MongoDB: %s", errOut)
	require.Contains(t, errOut, "shop-1 is not a caught-up replica")
	db, err := getDatabase(t, ns, "shop")
	require.NoError(t, err)
	require.Empty(t, db.Spec.Primary)
	require.Nil(t, db.Status.Switchover)

	// An unknown subresource is a 404.
	errOut = kubectlFails(t, cluster.KubeconfigPath, "", "get", "--raw", base+"/snapshot")
	require.Contains(t, errOut, "NotFound")
}

// TestSubresourcesInDiscoveryAndExplain finds the subresources in kube-apiserver's discovery
// of example.com/v1 and the restart record in kubectl explain.
func TestSubresourcesInDiscoveryAndExplain(t *testing.T) {
	out := kubectl(t, "get", "--raw", "/apis/example.com/v1")
	var list metav1.APIResourceList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	kinds := map[string]string{}
	for _, r := range list.APIResources {
		kinds[r.Name] = r.Kind + " " + strings.Join(r.Verbs, ",")
	}
	require.Equal(t, "DatabaseConnection get", kinds["databases/connection"])
	require.Equal(t, "DatabaseRestart create", kinds["databases/restart"])
	require.Equal(t, "DatabaseSwitchover create", kinds["databases/switchover"])
	require.Equal(t, "DatabaseBackupRequest create", kinds["databases/backup"])

	out = kubectl(t, "explain", "databases.status.restart")
	require.Regexp(t, `FIELD:\s+restart\s+<DatabaseRestartStatus>`, out)
	require.Contains(t, out, "requestedBy")
	out = kubectl(t, "explain", "databases.status.switchover.target")
	require.Regexp(t, `FIELD:\s+target\s+<string>`, out)

	// The subresources' own kinds have no resource of their own: kubectl explain maps its
	// argument to a resource through discovery, which names them only as databases/...
	_, errOut, err := kubectlAs(cluster.KubeconfigPath, "", "explain", "databaseconnection")
	t.Logf("kubectl explain databaseconnection: %v: %s", err, errOut)
}

// podIsReady reports whether pod's Ready condition is True.
func podIsReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRestartCompleted waits up to timeout until the Database ns/name's status.restart has
// its completedAt, and returns the Database as then read.
func waitRestartCompleted(t *testing.T, ns, name string, timeout time.Duration) *examplev1.Database {
	t.Helper()
	var done *examplev1.Database
	eventually(t, timeout, func() error {
		db, err := getDatabase(t, ns, name)
		if err != nil {
			return err
		}
		if r := db.Status.Restart; r == nil || r.CompletedAt == nil {
			return fmt.Errorf("restart not completed: %+v", db.Status.Restart)
		}
		done = db
		return nil
	})
	return done
}
