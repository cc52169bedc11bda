//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// TestRealDatabasesLogNoPassword runs a replicated PostgreSQL and a replicated MySQL side by
// side on the real node through the steps where the controller and the images handle
// passwords: the roles and users created, a switchover (databases/switchover), a change of the
// Secret's replication-password and password, and a rolling restart (databases/restart). After
// each, a user bound to the view ClusterRole, who may read Pod logs and Events but no Secret,
// reads every container's log of every Pod of the namespace (init containers too, and the
// previous instance of a container that restarted) and every Event there, and none holds any
// password the Secret held.
func TestRealDatabasesLogNoPassword(t *testing.T) {
	requireRealNode(t)
	for _, tc := range []struct {
		engine examplev1.Engine
		db     string
		// applicationRole: the controller gives the Secret's password to the application
		// user (PostgreSQL); the others' images make it once.
		applicationRole bool
	}{
		{examplev1.EnginePostgreSQL, "pgledger", true},
		{examplev1.EngineMySQL, "myshop", false},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			// Side by side: each has its namespace, viewer and Database (2 Pods each, which
			// the real node holds next to the example's 3).
			t.Parallel()
			// The release the real node's image holds, as the replication tests ask for it.
			img := realNodeImage(t, tc.engine)
			version := img.Line
			if tc.engine == examplev1.EnginePostgreSQL {
				version = img.Release
			}
			ns := restrictedNamespace(t, "e2e-secrets-"+string(tc.engine))
			db := tc.db
			viewer := "e2e-secrets-view-" + string(tc.engine)
			kubectl(t, "create", "rolebinding", viewer, "-n", ns, "--clusterrole=view", "--user="+viewer)
			asViewer := rest.CopyConfig(cluster.AdminConfig)
			asViewer.Impersonate = rest.ImpersonationConfig{UserName: viewer, Groups: []string{"system:authenticated"}}

			kubectlIn(t, fmt.Sprintf(`apiVersion: example.com/v1
kind: Database
metadata:
  name: %s
  namespace: %s
spec:
  engine: %s
  version: %q
  replicas: 2
  storage: 1Gi
`, db, ns, tc.engine, version), "apply", "-f", "-")
			waitReplicating(t, ns, db, db+"-0", 2)

			secrets := passwordsOf(t, ns, db, nil)
			requireNoPasswordSeen(t, asViewer, ns, "after creation", secrets)

			out, errOut, err := kubectlDatabase(t, "switchover", db, "-n", ns, "--to", db+"-1")
			require.NoError(t, err, "%s%s", out, errOut)
			waitReplicating(t, ns, db, db+"-1", 2)
			requireNoPasswordSeen(t, asViewer, ns, "after the switchover", secrets)

			// New passwords with a backslash and a colon (the escapes of SQL, libpq's
			// password file and MySQL's string literals), around a random core that no
			// escaping changes, which is looked for as well.
			replication, application := rand.Text(), rand.Text()
			secrets = append(secrets, replication, application)
			replicationPassword, applicationPassword := `r\`+replication+`:1`, `a\`+application+`:2`
			s, err := kube(t).CoreV1().Secrets(ns).Get(context.Background(), db+"-credentials", metav1.GetOptions{})
			require.NoError(t, err)
			s.Data["replication-password"] = []byte(replicationPassword)
			s.Data["password"] = []byte(applicationPassword)
			_, err = kube(t).CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{})
			require.NoError(t, err)
			secrets = passwordsOf(t, ns, db, secrets)
			replicationSum := sha256.Sum256([]byte(replicationPassword))
			applicationSum := sha256.Sum256([]byte(string(s.Data["username"]) + "\n" + applicationPassword))
			eventually(t, time.Minute, func() error {
				record, err := credentialsRecord(t, ns, db)
				if err != nil {
					return err
				}
				if got := record["replication-password-sha256"]; got != hex.EncodeToString(replicationSum[:]) {
					return fmt.Errorf("the primary's replication user does not have the new password yet (%s)", got)
				}
				if got := record["application-password-sha256"]; tc.applicationRole && got != hex.EncodeToString(applicationSum[:]) {
					return fmt.Errorf("the primary's application role does not have the new password yet (%s)", got)
				}
				return nil
			})
			if tc.applicationRole {
				// The application user logs in with the new password: the role's verifier
				// is the password's.
				phase, out := psqlAt(t, ns, "new-password", db, db+"."+ns+".svc.cluster.local", "SELECT current_user;")
				require.Equal(t, corev1.PodSucceeded, phase, out)
				require.Equal(t, string(s.Data["username"]), lastLines(out, 1), out)
			}
			requireNoPasswordSeen(t, asViewer, ns, "after the password change", secrets)

			restartReplicasFirst(t, ns, db, db+"-1", db+"-0")
			requireNoPasswordSeen(t, asViewer, ns, "after the restart", secrets)
		})
	}
}

// credentialsRecord is the data of the credentials record the controller keeps, in its own
// namespace, of what the servers of the Database ns/db were given
// ("credentials.<namespace>.<name>": the SHA-256 of the passwords, and the Secret's UID).
func credentialsRecord(t *testing.T, ns, db string) (map[string]string, error) {
	t.Helper()
	cm, err := kube(t).CoreV1().ConfigMaps(installNamespace).Get(context.Background(), "credentials."+ns+"."+db, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return cm.Data, nil
}

// passwordsOf returns had with every value of the Database db's credentials Secret whose key
// names a password, each once.
func passwordsOf(t *testing.T, ns, db string, had []string) []string {
	t.Helper()
	s, err := kube(t).CoreV1().Secrets(ns).Get(context.Background(), db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	for key, v := range s.Data {
		if strings.HasSuffix(key, "password") && !slices.Contains(had, string(v)) {
			require.GreaterOrEqual(t, len(v), 8, "%s: a password long enough not to be found by chance", key)
			had = append(had, string(v))
		}
	}
	require.GreaterOrEqual(t, len(had), 3, "the application user's, the superuser's and the replication user's")
	return had
}

// requireNoPasswordSeen reads, as the user of cfg, the log of every container of every Pod
// in ns (init containers too; the previous instance's as well where a container restarted),
// every Event there and the namespace's Databases, and requires none to hold any of
// passwords. step names the moment in the failure message.
func requireNoPasswordSeen(t *testing.T, cfg *rest.Config, ns, step string, passwords []string) {
	t.Helper()
	ctx := context.Background()
	viewer, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	type text struct{ what, body string }
	var read []text
	pods, err := viewer.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the view user lists the Pods")
	logs := 0
	for _, p := range pods.Items {
		restarts := map[string]int32{}
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			restarts[cs.Name] = cs.RestartCount
		}
		for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
			previous := []bool{false}
			if restarts[c.Name] > 0 {
				previous = append(previous, true)
			}
			for _, prev := range previous {
				b, err := viewer.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: prev}).DoRaw(ctx)
				if apierrors.IsNotFound(err) {
					continue // the Pod went away meanwhile
				}
				require.NoError(t, err, "the view user reads the log of %s/%s (previous %v)", p.Name, c.Name, prev)
				read = append(read, text{fmt.Sprintf("the log of %s/%s (previous %v)", p.Name, c.Name, prev), string(b)})
				logs++
			}
		}
	}
	events, err := viewer.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the view user lists the Events")
	for _, e := range events.Items {
		read = append(read, text{"Event " + e.Name, fmt.Sprintf("%+v", e)})
	}
	dbs, err := clientsetFor(t, cfg).ExampleV1().Databases(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the view user lists the Databases")
	for _, d := range dbs.Items {
		read = append(read, text{"Database " + d.Name, fmt.Sprintf("%+v", d)})
	}
	require.NotZero(t, logs)
	t.Logf("%s: read %d container logs, %d Events and %d Databases as the view user, for %d passwords", step, logs, len(events.Items), len(dbs.Items), len(passwords))
	for _, r := range read {
		for _, pw := range passwords {
			if i := strings.Index(r.body, pw); i >= 0 {
				line := r.body[strings.LastIndex(r.body[:i], "\n")+1:]
				if end := strings.IndexByte(line, '\n'); end >= 0 {
					line = line[:end]
				}
				t.Errorf("%s: %s holds a password of the Secret: %s", step, r.what, strings.ReplaceAll(line, pw, "<password>"))
			}
		}
	}
}
