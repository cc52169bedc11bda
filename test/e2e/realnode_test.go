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

	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// realPodTimeout bounds a real Pod's way to Ready: the first pull of the PostgreSQL image
// from the loopback registry (about 170 MB), initdb, and the probes' first periods.
const realPodTimeout = 5 * time.Minute

// requireRealNode fails the test when the cluster runs no real node (it runs one as root with
// `make test-e2e`, which installs and builds what it needs; without one when its images do
// not match the version catalog, and then why says so).
func requireRealNode(t *testing.T) {
	t.Helper()
	ok, why := cluster.RealNode()
	require.True(t, ok, "the local cluster runs no real node: %s", why)
}

// realNodeImage requires the real node and returns its image of engine: its line, and the
// release of the server it holds, which is what the Debian mirror shipped when it was built
// (hack/build-node-images.sh); the local cluster checked both against the version catalog.
func realNodeImage(t *testing.T, engine examplev1.Engine) localcluster.NodeImage {
	t.Helper()
	requireRealNode(t)
	img, ok := cluster.RealNodeImage(engine)
	require.True(t, ok, "the real node has no %s image", engine)
	return img
}

// clientImage is the real node's image of engine (postgres:15, mysql:9.7) for client Pods,
// which hold psql or mysql; tests ask for it after requireRealNode.
func clientImage(engine examplev1.Engine) string {
	img, _ := cluster.RealNodeImage(engine)
	return img.Image
}

// psqlPod is a Pod on the real node running psql (the PostgreSQL image holds it) against the
// Database's client Service, found through the Service environment variables the kubelet
// sets, as the Secret's user, on the Secret's database, with password; it runs sql and exits.
func psqlPod(ns, name, db, password, sql string) string {
	svcEnv := strings.ToUpper(strings.ReplaceAll(db, "-", "_")) + "_SERVICE_HOST"
	return pod(ns, name, db, `exec psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --tuples-only --no-align -h "$`+svcEnv+`" -p "$PGPORT" -c "$SQL"`, sql, password)
}

// psqlURIPod is psqlPod connecting with the Secret's uri instead, whose host is the client
// Service's fully qualified DNS name, after resolving the first replica's name under the
// headless Service ("<pod>.<headless>.<namespace>.svc.cluster.local"): both through the
// cluster DNS.
func psqlURIPod(ns, name, db, sql string) string {
	replica := db + "-0." + db + "-headless." + ns + ".svc.cluster.local"
	return pod(ns, name, db, `getent hosts `+replica+` && exec psql "$URI" -v ON_ERROR_STOP=1 --no-psqlrc --quiet --tuples-only --no-align -c "$SQL"`, sql, "")
}

// pod is a Pod on the real node running script with psql's environment from the Database's
// Secret (PGPASSWORD is password, or the Secret's when empty; URI the Secret's uri) and SQL.
func pod(ns, name, db, script, sql, password string) string {
	secret := db + "-credentials"
	passwordEnv := fmt.Sprintf("{name: PGPASSWORD, value: %q}", password)
	if password == "" {
		passwordEnv = secretEnv("PGPASSWORD", secret, "password")
	}
	return clientPod(ns, name, clientImage(examplev1.EnginePostgreSQL), script,
		fmt.Sprintf("{name: SQL, value: %q}", sql),
		passwordEnv,
		secretEnv("URI", secret, "uri"),
		secretEnv("PGUSER", secret, "username"),
		secretEnv("PGDATABASE", secret, "database"),
		secretEnv("PGPORT", secret, "port"),
		`{name: PGCONNECT_TIMEOUT, value: "10"}`,
	)
}

// secretEnv is a container's environment variable name from the Secret's key, in a Pod
// manifest's flow style.
func secretEnv(name, secret, key string) string {
	return fmt.Sprintf("{name: %s, valueFrom: {secretKeyRef: {name: %s, key: %s}}}", name, secret, key)
}

// clientPod is a Pod on the real node running script with sh in image, with env (flow-style
// entries of the container's env). It passes the "restricted" Pod Security Standard, as a
// client in a restrictedNamespace must.
func clientPod(ns, name, image, script string, env ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  restartPolicy: Never
  securityContext:
    runAsNonRoot: true
    runAsUser: 999
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: client
    image: %[3]s
    command: ["sh", "-c", %[4]q]
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
    env:
    - %[5]s
`, name, ns, image, script, strings.Join(env, "\n    - "))
}

// runPsql runs psqlPod to completion and returns its phase and its log.
func runPsql(t *testing.T, ns, name, db, password, sql string) (corev1.PodPhase, string) {
	t.Helper()
	return runPod(t, ns, name, psqlPod(ns, name, db, password, sql))
}

// runPod applies the Pod manifest, waits until it ends, and returns its phase and its log.
func runPod(t *testing.T, ns, name, manifest string) (corev1.PodPhase, string) {
	t.Helper()
	kubectlIn(t, manifest, "apply", "-f", "-")
	pod, log := waitPodDone(t, ns, name)
	require.Equal(t, localcluster.RealNodeName, pod.Spec.NodeName, "psql ran on the simulated node")
	return pod.Status.Phase, log
}

// waitPodDone waits until the Pod ends (Succeeded or Failed) and returns it and its log.
func waitPodDone(t *testing.T, ns, name string) (*corev1.Pod, string) {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, realPodTimeout, func() error {
		var err error
		pod, err = kube(t).CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p := pod.Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			return fmt.Errorf("pod %s/%s is %s: %+v", ns, name, p, pod.Status.ContainerStatuses)
		}
		return nil
	})
	return pod, kubectl(t, "logs", "-n", ns, name)
}

// serverPod returns the Database's first Pod once it runs Ready on the real node, with a
// container the runtime started (a containerd ID, not a simulated one).
func serverPod(t *testing.T, ns, db string, not string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, realPodTimeout, func() error {
		var err error
		pod, err = kube(t).CoreV1().Pods(ns).Get(context.Background(), db+"-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if string(pod.UID) == not {
			return fmt.Errorf("pod %s still the deleted one", pod.Name)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == engine.ContainerName && cs.Ready {
				return nil
			}
		}
		return fmt.Errorf("pod %s/%s not ready on %q: %s %+v", ns, pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.ContainerStatuses)
	})
	require.Equal(t, localcluster.RealNodeName, pod.Spec.NodeName)
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == engine.ContainerName {
			require.True(t, strings.HasPrefix(cs.ContainerID, "containerd://"), "container ID %q", cs.ContainerID)
		}
	}
	return pod
}

// TestRealPostgreSQLAnswersThroughItsServiceAndKeepsItsData runs in a namespace that enforces
// the "restricted" Pod Security Standard: the server runs for real with the restricted
// security context (non-root, no capabilities) on a freshly provisioned volume.
func TestRealPostgreSQLAnswersThroughItsServiceAndKeepsItsData(t *testing.T) {
	img := realNodeImage(t, examplev1.EnginePostgreSQL)
	ns := restrictedNamespace(t, "e2e-real-postgres")
	const db = "orders"
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: `+db+`
  namespace: `+ns+`
spec:
  engine: postgresql
  version: "`+img.Line+`"
  storage: 1Gi
`, "apply", "-f", "-")

	// Ready because the server answers the controller's pg_isready probes.
	first := serverPod(t, ns, db, "")
	eventually(t, realPodTimeout, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if d.Status.Phase != "Ready" || d.Status.ReadyReplicas != 1 {
			return fmt.Errorf("database %s: %+v", db, d.Status)
		}
		return nil
	})
	secret, err := kube(t).CoreV1().Secrets(ns).Get(context.Background(), db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	password := string(secret.Data[names.SecretKeyPassword])
	require.NotEmpty(t, password)

	phase, out := runPsql(t, ns, "write", db, password,
		"CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'apple'), (2, 'pear'); SELECT name FROM items ORDER BY id;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "apple\npear", strings.TrimSpace(lastLines(out, 2)), out)

	// The Secret's user is the application role, which owns the database and is no superuser.
	phase, out = runPsql(t, ns, "whoami", db, password,
		"SELECT current_user || ' ' || rolsuper::text || ' ' || rolcreaterole::text || ' ' || pg_get_userbyid(datdba) FROM pg_roles, pg_database WHERE rolname = current_user AND datname = current_database();")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "app false false app", lastLines(out, 1), out)

	phase, out = runPsql(t, ns, "wrong-password", db, password+"-wrong", "SELECT 1;")
	require.Equal(t, corev1.PodFailed, phase, out)
	require.Contains(t, out, "password authentication failed", out)

	// The Pod deleted comes back on the same claim, with the rows.
	kubectl(t, "delete", "pod", "-n", ns, first.Name, "--wait=true")
	serverPod(t, ns, db, string(first.UID))
	phase, out = runPsql(t, ns, "read", db, password, "SELECT count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "2", strings.TrimSpace(out), out)

	// The Secret's URI works as given: its host is a cluster DNS name.
	phase, out = runPod(t, ns, "read-by-uri", psqlURIPod(ns, "read-by-uri", db, "SELECT name FROM items WHERE id = 2;"))
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Regexp(t, `(?m)^10\.245\.0\.\d+\s+`+db+`-0\.`+db+`-headless\.`+ns+`\.svc\.cluster\.local$`, out)
	require.Equal(t, "pear", lastLines(out, 1), out)
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestRealNodeRunsOnlyTheImagesItHas(t *testing.T) {
	requireRealNode(t)
	ns := testNamespace(t, "e2e-real-selection")
	// PostgreSQL 16 has no local image: the policy leaves its Pod to the simulated node.
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: other
  namespace: `+ns+`
spec:
  engine: postgresql
  version: "16"
  storage: 1Gi
`, "apply", "-f", "-")
	eventually(t, 2*time.Minute, func() error {
		pod, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), "other-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != localcluster.FakeNodeName {
			return fmt.Errorf("pod other-0 on %q", pod.Spec.NodeName)
		}
		return nil
	})
	node, err := kube(t).CoreV1().Nodes().Get(context.Background(), localcluster.RealNodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, node.Spec.Taints, corev1.Taint{Key: localcluster.RealNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule})
}

// TestRealExampleReplicates runs the README's example (artifacts/examples/: PostgreSQL 14.5,
// three replicas, in production) on the real node, as a newcomer's first apply after `make
// run` does: its three Pods run the 14.5 server there, the client Service reaches the
// primary, and both standbys stream what it writes. The other tests share the example, so it
// stays.
func TestRealExampleReplicates(t *testing.T) {
	requireRealNode(t)
	const ns, db = "production", "my-database"
	applyExamples(t)
	waitReplicating(t, ns, db, db+"-0", 3)
	for i := range 3 {
		p, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), fmt.Sprintf("%s-%d", db, i), metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, localcluster.RealNodeName, p.Spec.NodeName, p.Name)
		require.Equal(t, "postgres:14.5", p.Spec.Containers[0].Image, p.Name)
	}
	out := kubectl(t, "get", "db", db, "-n", ns, "-o", "wide")
	require.Regexp(t, `(?m)^my-database\s+postgresql\s+14\.5\s+3\s+Ready\s+\S+\s+3/3\s+100Gi\s+my-database-0$`, out)

	t.Cleanup(func() {
		pods, err := kube(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "example-") {
				_ = kube(t).CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
			}
		}
	})
	phase, out := psqlAt(t, ns, "example-write", db, db+"."+ns+".svc.cluster.local",
		"DROP TABLE IF EXISTS example; CREATE TABLE example AS SELECT generate_series(1, 10) AS id; SELECT current_setting('server_version'), pg_is_in_recovery();")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "14.5|f", lastLines(out, 1), out)
	for i := 1; i <= 2; i++ {
		waitRows(t, ns, fmt.Sprintf("example-read-%d", i), db, memberHost(ns, db, i),
			"SELECT current_setting('server_version'), pg_is_in_recovery(), count(*) FROM example;", "14.5|t|10")
	}
}
