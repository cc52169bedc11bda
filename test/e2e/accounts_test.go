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

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// credentialsOf is the Database's credentials Secret's data, as strings.
func credentialsOf(t *testing.T, ns, db string) map[string]string {
	t.Helper()
	s, err := kube(t).CoreV1().Secrets(ns).Get(context.Background(), db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	data := map[string]string{}
	for k, v := range s.Data {
		data[k] = string(v)
	}
	return data
}

// realDatabase is a Database manifest of one replica of engine and version in ns, of an
// image the real node runs.
func realDatabase(ns, name string, engine examplev1.Engine, version string) string {
	return `apiVersion: example.com/v1
kind: Database
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  engine: ` + string(engine) + `
  version: "` + version + `"
  replicas: 1
  storage: 1Gi
`
}

// waitPrimaryAnswers waits until the Database of one Pod is Ready with that Pod as
// status.primary, which the controller sets once the server answered it as the superuser.
func waitPrimaryAnswers(t *testing.T, ns, db string) {
	t.Helper()
	eventually(t, realPodTimeout, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if d.Status.Phase != examplev1.DatabasePhaseReady || d.Status.Primary != db+"-0" {
			return fmt.Errorf("database %s is %s with primary %q: %+v", db, d.Status.Phase, d.Status.Primary, d.Status.Conditions)
		}
		return nil
	})
}

// valueEnv is a container env entry of a literal value.
func valueEnv(name, value string) string { return fmt.Sprintf("{name: %s, value: %q}", name, value) }

// accountsProbe runs script, whose commands each print "== <what>" and then what the server
// answered, in a client Pod named name of ns with env, and returns each answer by what.
func accountsProbe(t *testing.T, ns, name, image, script string, env ...string) map[string]string {
	t.Helper()
	phase, log := runPod(t, ns, name, clientPod(ns, name, image, script, env...))
	require.Equal(t, corev1.PodSucceeded, phase, log)
	answers := map[string]string{}
	for _, part := range strings.Split(log, "== ")[1:] {
		what, answer, _ := strings.Cut(part, "\n")
		answers[what] = strings.TrimSpace(answer)
	}
	return answers
}

// TestRealPostgreSQLAccountsRefuseOtherPods: on the real node, a Pod that is not one of the
// Database's (in another namespace, or in the Database's own but behind no Service) holding
// every password of the Secret is refused by pg_hba.conf as the superuser, for a replication
// connection as the replication role (pg_basebackup) and for an ordinary session as it; the
// application user connects, its role made by the controller, which logs in as the
// superuser from the node's address.
func TestRealPostgreSQLAccountsRefuseOtherPods(t *testing.T) {
	requireRealNode(t)
	ns := restrictedNamespace(t, "e2e-real-pg-accounts")
	other := restrictedNamespace(t, "e2e-real-pg-accounts-other")
	const db = "vault"
	kubectlIn(t, realDatabase(ns, db, examplev1.EnginePostgreSQL, "15.18"), "apply", "-f", "-")
	waitPrimaryAnswers(t, ns, db)
	c := credentialsOf(t, ns, db)
	require.Equal(t, db+"."+ns+".svc.cluster.local", c["host"])
	// The rules are the ConfigMap's, not the data directory's pg_hba.conf, to which the
	// image's entrypoint adds "host all all all" as the official image does.
	require.Equal(t, "/etc/database/pg_hba.conf", strings.TrimSpace(psqlAsSuperuserIn(t, ns, db+"-0", "SHOW hba_file")))

	const script = `
echo "== superuser"; PGPASSWORD="$SUPERUSER_PASSWORD" psql -h "$HOST" -U "$SUPERUSER" -d postgres -tAc 'SELECT 1' 2>&1
echo "== replication"; PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup -h "$HOST" -U "$REPLICATION_USER" -D /tmp/copy 2>&1
echo "== replication role session"; PGPASSWORD="$REPLICATION_PASSWORD" psql -h "$HOST" -U "$REPLICATION_USER" -d postgres -tAc 'SELECT 1' 2>&1
echo "== application"; PGPASSWORD="$PASSWORD" psql -h "$HOST" -U "$USERNAME" -d "$DATABASE" -tAc 'SELECT current_user' 2>&1
exit 0`
	env := []string{valueEnv("HOST", c["host"]), valueEnv("SUPERUSER", c["superuser-username"]), valueEnv("SUPERUSER_PASSWORD", c["superuser-password"]),
		valueEnv("REPLICATION_USER", c["replication-username"]), valueEnv("REPLICATION_PASSWORD", c["replication-password"]),
		valueEnv("USERNAME", c["username"]), valueEnv("PASSWORD", c["password"]), valueEnv("DATABASE", c["database"])}
	for _, where := range []string{other, ns} {
		answers := accountsProbe(t, where, "probe", "postgres:15", script, env...)
		t.Logf("from a Pod of %s: %q", where, answers)
		require.Regexp(t, `pg_hba.conf rejects connection for host "10\.245\.0\.\d+", user "postgres"`, answers["superuser"])
		require.Regexp(t, `no pg_hba.conf entry for replication connection from host "10\.245\.0\.\d+", user "replicator"`, answers["replication"])
		require.Regexp(t, `pg_hba.conf rejects connection for host "10\.245\.0\.\d+", user "replicator"`, answers["replication role session"])
		require.Equal(t, "app", answers["application"])
	}
}

// TestRealMySQLAccountsRefuseOtherPods: on the real node, root's accounts are root@localhost
// and root@<the node's address>, the replication user's of the namespace's Service domain,
// and a Pod that is not one of the Database's (in another namespace, or in the Database's
// own but behind no Service) holding every password of the Secret is refused as root and as
// the replication user; the application user connects. The replicas clone the primary and
// replicate through that account (TestRealMySQLReplicates).
func TestRealMySQLAccountsRefuseOtherPods(t *testing.T) {
	requireRealNode(t)
	ns := restrictedNamespace(t, "e2e-real-my-accounts")
	other := restrictedNamespace(t, "e2e-real-my-accounts-other")
	const db = "till"
	kubectlIn(t, realDatabase(ns, db, examplev1.EngineMySQL, "9.7"), "apply", "-f", "-")
	waitPrimaryAnswers(t, ns, db)
	c := credentialsOf(t, ns, db)
	require.Equal(t, db+"."+ns+".svc.cluster.local", c["host"])
	const accounts = `SELECT CONCAT(user, '@', host) FROM mysql.user WHERE user IN ('root', 'replicator') ORDER BY user, host;`
	want := "replicator@%." + ns + ".svc.cluster.local\nroot@10.245.0.1\nroot@localhost"
	require.Equal(t, want, strings.TrimSpace(mysqlAsSuperuserIn(t, ns, db+"-0", accounts)))

	// The accounts of a Database made before they were narrowed, of any host: the controller
	// gives root the node's account (from the one it logs in as, no password sent) and the
	// replication user the namespace's, and drops those of any host.
	// Renamed and read in one session: a pass of the controller between two would narrow
	// them before they are read.
	require.Equal(t, "replicator@%\nroot@%\nroot@localhost", strings.TrimSpace(mysqlAsSuperuserIn(t, ns, db+"-0",
		"RENAME USER 'root'@'10.245.0.1' TO 'root'@'%'; RENAME USER 'replicator'@'%."+ns+".svc.cluster.local' TO 'replicator'@'%'; "+accounts)))
	narrowed := time.Now()
	eventually(t, 2*time.Minute, func() error {
		if got := strings.TrimSpace(mysqlAsSuperuserIn(t, ns, db+"-0", accounts)); got != want {
			return fmt.Errorf("accounts %q", got)
		}
		return nil
	})
	t.Logf("measured: accounts of any host narrowed by the controller in %v", time.Since(narrowed).Round(time.Second))
	require.Contains(t, kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+db, "-o", "jsonpath={.items[*].message}"),
		"Gave root the accounts of 10.245.0.1 (it had %) on "+db+"-0")

	const script = `
ask() { mysql --host="$HOST" --port=3306 --connect-timeout=10 --batch --skip-column-names "$@" 2>&1; }
echo "== root"; MYSQL_PWD="$SUPERUSER_PASSWORD" ask --user=root -e 'SELECT 1'
echo "== replication"; MYSQL_PWD="$REPLICATION_PASSWORD" ask --user="$REPLICATION_USER" -e 'SELECT 1'
echo "== application"; MYSQL_PWD="$PASSWORD" ask --user="$USERNAME" --database="$DATABASE" -e 'SELECT CURRENT_USER()'
exit 0`
	env := []string{valueEnv("HOST", c["host"]), valueEnv("SUPERUSER_PASSWORD", c["superuser-password"]),
		valueEnv("REPLICATION_USER", c["replication-username"]), valueEnv("REPLICATION_PASSWORD", c["replication-password"]),
		valueEnv("USERNAME", c["username"]), valueEnv("PASSWORD", c["password"]), valueEnv("DATABASE", c["database"])}
	for _, where := range []string{other, ns} {
		answers := accountsProbe(t, where, "probe", "mysql:9.7", script, env...)
		t.Logf("from a Pod of %s: %q", where, answers)
		require.Regexp(t, `ERROR (1045|1130) .*'root'@'10\.245\.0\.\d+'|ERROR 1130 .*Host '10\.245\.0\.\d+' is not allowed`, answers["root"])
		require.Regexp(t, `ERROR (1045|1130) .*'replicator'@'10\.245\.0\.\d+'|ERROR 1130 .*Host '10\.245\.0\.\d+' is not allowed`, answers["replication"])
		require.Equal(t, c["username"]+"@%", answers["application"])
	}
	// Every connection of an address without a name (the controller's, the probes') was
	// looked up, and none of them warned in the server's log.
	log := kubectl(t, "logs", "-n", ns, db+"-0", "-c", "database")
	require.NotContains(t, log, "could not be resolved", "MY-010055 is suppressed")
}
