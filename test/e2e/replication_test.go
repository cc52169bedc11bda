//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// psqlAt runs sql with psql against host (a DNS name of the cluster) as the Secret's user, in
// a Pod named name, and returns its phase and output.
func psqlAt(t *testing.T, ns, name, db, host, sql string) (corev1.PodPhase, string) {
	t.Helper()
	return runPod(t, ns, name, pod(ns, name, db,
		`exec psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --tuples-only --no-align -h `+host+` -p "$PGPORT" -c "$SQL"`, sql, ""))
}

// psqlAsSuperuserIn runs sql with psql in the database container of the Pod named pod, as
// the superuser over the Unix socket (trusted; the superuser logs in over the network from
// the controller's address only), for what the application user may not read (every
// standby's row of pg_stat_replication), and returns its output.
func psqlAsSuperuserIn(t *testing.T, ns, pod, sql string) string {
	t.Helper()
	return kubectl(t, "exec", "-n", ns, pod, "-c", "database", "--", "sh", "-c",
		`exec psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 --no-psqlrc --quiet --tuples-only --no-align -c "$1"`, "sh", sql)
}

// memberHost is the stable DNS name of a Database's Pod under its headless Service.
func memberHost(ns, db string, ordinal int) string {
	return fmt.Sprintf("%s-%d.%s-headless.%s.svc.cluster.local", db, ordinal, db, ns)
}

// waitReplicating waits until the Database is Ready with replicas ready Pods, primary as
// status.primary, every member's role known, and Replicating True; it returns the Database.
func waitReplicating(t *testing.T, ns, db, primary string, replicas int) *examplev1.Database {
	t.Helper()
	var d *examplev1.Database
	eventually(t, realPodTimeout, func() error {
		var err error
		if d, err = getDatabase(t, ns, db); err != nil {
			return err
		}
		c := meta.FindStatusCondition(d.Status.Conditions, "Replicating")
		switch {
		case d.Status.Phase != examplev1.DatabasePhaseReady || d.Status.ReadyReplicas != int32(replicas):
			return fmt.Errorf("database %s is %s with %d ready: %+v", db, d.Status.Phase, d.Status.ReadyReplicas, d.Status.Conditions)
		case d.Status.Primary != primary:
			return fmt.Errorf("primary is %q, not %q", d.Status.Primary, primary)
		case c == nil || c.Status != metav1.ConditionTrue:
			return fmt.Errorf("not replicating: %+v", c)
		case len(d.Status.Members) != replicas:
			return fmt.Errorf("members: %+v", d.Status.Members)
		}
		return nil
	})
	for _, m := range d.Status.Members {
		want := examplev1.MemberRoleReplica
		if m.Name == primary {
			want = examplev1.MemberRolePrimary
		}
		require.Equal(t, want, m.Role, "%+v", d.Status.Members)
		require.True(t, m.Ready, "%+v", m)
		require.Equal(t, m.Name != primary, m.Streaming, "%+v", m)
	}
	return d
}

// podsWithRole returns the names of the Database's Pods labelled with role.
func podsWithRole(t *testing.T, ns, db, role string) []string {
	t.Helper()
	pods, err := kube(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": db, "database.example.com/role": role}).String(),
	})
	require.NoError(t, err)
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// sqlAt runs sql against host in a client Pod named name (psqlAt, mysqlAt) and returns its
// phase and output.
type sqlAt func(t *testing.T, ns, name, db, host, sql string) (corev1.PodPhase, string)

// waitRows waits until host returns want for sql, read by fresh psql Pods named prefix-N.
func waitRows(t *testing.T, ns, prefix, db, host, sql, want string) time.Duration {
	t.Helper()
	return waitAnswer(t, psqlAt, ns, prefix, db, host, sql, want)
}

// waitAnswer waits until host returns want for sql, asked by fresh client Pods named
// prefix-N.
func waitAnswer(t *testing.T, client sqlAt, ns, prefix, db, host, sql, want string) time.Duration {
	t.Helper()
	start := time.Now()
	for i := 0; ; i++ {
		phase, out := client(t, ns, fmt.Sprintf("%s-%d", prefix, i), db, host, sql)
		if phase == corev1.PodSucceeded && strings.TrimSpace(out) == want {
			return time.Since(start)
		}
		require.Less(t, i, 20, "%s never answered %q to %q: last %s %s", host, want, sql, phase, out)
		time.Sleep(2 * time.Second)
	}
}

// writeLoop is a shell script that runs insert (which sees the row's number as $i) one row
// after the other until insert prints 0, which it does once the test has written the stop
// row, or for at most limit seconds. insert prints 1 for a row it wrote. The script
// prints "ok N TIME" for each row acknowledged, "fail N TIME" for each refused one,
// "stopped N TIME" when it found the stop row and "gave up N TIME" at the limit (TIME in Unix
// seconds, of this machine's clock, which the real node's Pods read too).
func writeLoop(limit int, insert string) string {
	return `
i=0; end=$(( $(date +%s) + ` + strconv.Itoa(limit) + ` ))
while [ "$(date +%s)" -lt "$end" ]; do
  i=$((i+1))
  if out=$(` + insert + ` 2>/dev/null); then
    case "$out" in
      1) echo "ok $i $(date +%s.%N)" ;;
      0) echo "stopped $i $(date +%s.%N)"; exit 0 ;;
      *) echo "fail $i $(date +%s.%N) unexpected output: $out"; sleep 0.1 ;;
    esac
  else
    echo "fail $i $(date +%s.%N)"; sleep 0.1
  fi
done
echo "gave up $i $(date +%s.%N)"; exit 1`
}

// writeLimit bounds a writeLoop in seconds: it stops long before, when the test inserts the
// stop row.
const writeLimit = 900

// ack is a row a writeLoop saw acknowledged: its number, and when.
type ack struct {
	id int
	at time.Time
}

// parseAcks returns the rows a writeLoop's log reports acknowledged, in order.
func parseAcks(t *testing.T, log string) []ack {
	t.Helper()
	var acks []ack
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "ok" {
			continue
		}
		id, err := strconv.Atoi(f[1])
		require.NoError(t, err, line)
		sec, nsec, _ := strings.Cut(f[2], ".")
		s, err := strconv.ParseInt(sec, 10, 64)
		require.NoError(t, err, line)
		ns, err := strconv.ParseInt(nsec, 10, 64)
		require.NoError(t, err, line)
		acks = append(acks, ack{id: id, at: time.Unix(s, ns)})
	}
	return acks
}

// waitAcks waits until the running writeLoop Pod named name has seen n rows acknowledged at
// or after since (read from its log), and returns how many it has seen in all.
func waitAcks(t *testing.T, ns, name string, since time.Time, n int) int {
	t.Helper()
	var all int
	eventually(t, 2*time.Minute, func() error {
		log, errOut, err := kubectlAs(cluster.KubeconfigPath, "", "logs", "-n", ns, name)
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		acks := parseAcks(t, log)
		all = len(acks)
		got := len(acks) - sort.Search(len(acks), func(i int) bool { return !acks[i].at.Before(since) })
		if got < n {
			return fmt.Errorf("pod %s/%s: %d rows acknowledged since %s, want %d", ns, name, got, since.Format(time.StampMilli), n)
		}
		return nil
	})
	return all
}

// switchoverMoments are when a switchover was asked (before the request was sent) and when
// status.primary was first seen naming the target.
type switchoverMoments struct{ asked, confirmed time.Time }

// switchOver asks for a switchover of the Database to the member to, as a user does with the
// plugin, and waits until status.primary names it.
func switchOver(t *testing.T, ns, db, to string) switchoverMoments {
	t.Helper()
	var m switchoverMoments
	m.asked = time.Now()
	out, errOut, err := kubectlDatabase(t, "switchover", db, "-n", ns, "--to", to)
	require.NoError(t, err, "%s%s", out, errOut)
	eventually(t, realPodTimeout, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if d.Status.Primary != to {
			return fmt.Errorf("status.primary is %q, not %q yet", d.Status.Primary, to)
		}
		return nil
	})
	m.confirmed = time.Now()
	t.Logf("measured: switchover to %s confirmed in status.primary %v after it was asked", to, m.confirmed.Sub(m.asked).Round(100*time.Millisecond))
	return m
}

// acknowledgedAround waits until the writeLoop Pod named name has ended, requires that it
// ended on the stop row, and returns the rows it saw acknowledged. It requires some of them
// acknowledged before the switchover was asked and some after status.primary named the new
// primary, and logs how many before, during and after it, and the longest pause between two.
func acknowledgedAround(t *testing.T, ns, name string, m switchoverMoments) []ack {
	t.Helper()
	pod, log := waitPodDone(t, ns, name)
	require.Equal(t, corev1.PodSucceeded, pod.Status.Phase, "the writer ends on the stop row: %s", lastLines(log, 3))
	require.Contains(t, lastLines(log, 1), "stopped ", log)
	acks := parseAcks(t, log)
	var before, during, after int
	for _, a := range acks {
		switch {
		case a.at.Before(m.asked):
			before++
		case a.at.Before(m.confirmed):
			during++
		default:
			after++
		}
	}
	var pause time.Duration
	var pauseEnd time.Time
	for i := 1; i < len(acks); i++ {
		if d := acks[i].at.Sub(acks[i-1].at); d > pause {
			pause, pauseEnd = d, acks[i].at
		}
	}
	t.Logf("measured: %d inserts acknowledged: %d before the switchover was asked, %d while it ran (%v), %d after status.primary named the new primary; longest write pause %v, ending %v after the switchover was asked",
		len(acks), before, during, m.confirmed.Sub(m.asked).Round(100*time.Millisecond), after,
		pause.Round(10*time.Millisecond), pauseEnd.Sub(m.asked).Round(100*time.Millisecond))
	require.Positive(t, before, "no insert acknowledged before the switchover was asked")
	require.Positive(t, after, "no insert acknowledged after the switchover")
	return acks
}

// ackIDs returns the acknowledged rows' numbers, as SQL literals.
func ackIDs(acks []ack) string {
	ids := make([]string, len(acks))
	for i, a := range acks {
		ids[i] = strconv.Itoa(a.id)
	}
	return strings.Join(ids, ",")
}

// restartReplicasFirst restarts the Database through the restart subresource (the plugin's
// restart) and waits until the record is completed and it replicates again from primary:
// each Pod is new, every replica restarted before the primary.
func restartReplicasFirst(t *testing.T, ns, db, primary string, replicas ...string) {
	t.Helper()
	asked := time.Now()
	out, errOut, err := kubectlDatabase(t, "restart", db, "-n", ns, "--reason", "e2e")
	require.NoError(t, err, "%s%s", out, errOut)
	waitRestartCompleted(t, ns, db, realPodTimeout)
	t.Logf("measured: rolling restart of %d Pods done in %v", len(replicas)+1, time.Since(asked).Round(time.Second))
	waitReplicating(t, ns, db, primary, len(replicas)+1)
	p, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), primary, metav1.GetOptions{})
	require.NoError(t, err)
	for _, name := range replicas {
		r, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, r.CreationTimestamp.After(asked.Add(-time.Second)), "the replica %s was restarted (%s)", name, r.CreationTimestamp)
		require.True(t, r.CreationTimestamp.Before(&p.CreationTimestamp),
			"the replica %s restarted first (%s), the primary last (%s)", name, r.CreationTimestamp, p.CreationTimestamp)
	}
}

// TestRealPostgreSQLReplicates runs a replicated PostgreSQL on the real node, at the release
// its image holds: a primary and standbys that follow it, scale-up by cloning, a replica
// restarted from its volume, a switchover (databases/switchover) under a steady write load
// that keeps every acknowledged row, an update to the release line alone, and a rolling
// restart (databases/restart), replica first. It logs the measured lag, catch-up time and
// write pause.
//
// The namespace enforces the "restricted" Pod Security Standard: the clone by pg_basebackup
// and the standbys run as the non-root server user too.
func TestRealPostgreSQLReplicates(t *testing.T) {
	// Side by side with the other engine's (the only top-level tests that run in parallel:
	// both after every other test), on three Pods each at most.
	t.Parallel()
	img := realNodeImage(t, examplev1.EnginePostgreSQL)
	ns := restrictedNamespace(t, "e2e-real-replication")
	const db = "ledger"
	kubectlIn(t, replicatedDatabase(ns, db, examplev1.EnginePostgreSQL, img.Release, 2), "apply", "-f", "-")
	waitReplicating(t, ns, db, db+"-0", 2)
	require.Equal(t, []string{db + "-0"}, podsWithRole(t, ns, db, "primary"))
	require.Equal(t, []string{db + "-1"}, podsWithRole(t, ns, db, "replica"))
	secret, err := kube(t).CoreV1().Secrets(ns).Get(context.Background(), db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db+"-read."+ns+".svc.cluster.local", string(secret.Data["read-host"]))
	require.Equal(t, "replicator", string(secret.Data["replication-username"]))

	// Writes through the client Service reach the primary; the standby has them.
	primaryHost := db + "." + ns + ".svc.cluster.local"
	phase, out := psqlAt(t, ns, "create", db, primaryHost,
		"CREATE TABLE items (id int PRIMARY KEY, at timestamptz DEFAULT now()); INSERT INTO items (id) SELECT generate_series(1, 100); SELECT pg_is_in_recovery();")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "f", lastLines(out, 1), out)
	lag := waitRows(t, ns, "replica-read", db, memberHost(ns, db, 1), "SELECT count(*) FROM items;", "100")
	t.Logf("measured: 100 rows visible on the standby %v after the primary's commit (including Pod start-up)", lag.Round(time.Millisecond))
	phase, out = psqlAt(t, ns, "read-service", db, db+"-read."+ns+".svc.cluster.local", "SELECT pg_is_in_recovery(), count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "t|100", lastLines(out, 1), out)

	// A standby refuses writes.
	phase, out = psqlAt(t, ns, "replica-write", db, memberHost(ns, db, 1), "INSERT INTO items (id) VALUES (1000);")
	require.Equal(t, corev1.PodFailed, phase, out)
	require.Contains(t, out, "read-only transaction")

	// Scale-up: the new replica clones the primary and catches up.
	scaled := time.Now()
	kubectl(t, "scale", "db/"+db, "-n", ns, "--replicas=3")
	waitReplicating(t, ns, db, db+"-0", 3)
	t.Logf("measured: scale-up to 3 replicated (cloned, Ready, streaming) in %v", time.Since(scaled).Round(time.Second))
	waitRows(t, ns, "new-replica-read", db, memberHost(ns, db, 2), "SELECT count(*) FROM items;", "100")

	// A replica's Pod deleted comes back from its volume and streams again, with the rows
	// written while it was away.
	replica, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), db+"-2", metav1.GetOptions{})
	require.NoError(t, err)
	kubectl(t, "delete", "pod", "-n", ns, replica.Name, "--wait=true")
	phase, out = psqlAt(t, ns, "write-while-away", db, primaryHost, "INSERT INTO items (id) SELECT generate_series(101, 200);")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	waitReplicating(t, ns, db, db+"-0", 3)
	waitRows(t, ns, "back-replica-read", db, memberHost(ns, db, 2), "SELECT count(*) FROM items;", "200")

	// The replication password rotated in the Secret: the primary's role and the running
	// standbys get it, so once the primary has restarted they stream from it again, with the
	// rows written since.
	const rotated = "Rotated-by-e2e-1"
	kubectl(t, "patch", "secret", db+"-credentials", "-n", ns, "--type=merge", "-p", `{"stringData":{"replication-password":"`+rotated+`"}}`)
	sum := sha256.Sum256([]byte(rotated))
	eventually(t, time.Minute, func() error {
		record, err := credentialsRecord(t, ns, db)
		if err != nil {
			return err
		}
		if got := record["replication-password-sha256"]; got != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("the primary's role does not have the rotated password yet (%s)", got)
		}
		return nil
	})
	kubectl(t, "delete", "pod", "-n", ns, db+"-0", "--wait=true")
	serverPod(t, ns, db, "")
	phase, out = psqlAt(t, ns, "write-after-rotation", db, primaryHost, "INSERT INTO items (id) SELECT generate_series(201, 250);")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	waitRows(t, ns, "rotated-replica-read", db, memberHost(ns, db, 1), "SELECT count(*) FROM items;", "250")
	waitRows(t, ns, "rotated-replica-read-2", db, memberHost(ns, db, 2), "SELECT count(*) FROM items;", "250")
	waitReplicating(t, ns, db, db+"-0", 3)

	// A switchover under a steady write load: inserts are acknowledged before it and after
	// it, every acknowledged insert is on the new primary, and the old primary follows it.
	// The writer connects to the client Service for each insert, and stops at the row in
	// load_stop.
	writer := pod(ns, "writer", db, writeLoop(writeLimit,
		`psql -v ON_ERROR_STOP=1 --no-psqlrc --quiet --tuples-only --no-align -h "$HOST" -p "$PGPORT" -c "WITH w AS (INSERT INTO load SELECT $i WHERE NOT EXISTS (SELECT 1 FROM load_stop) RETURNING 1) SELECT count(*) FROM w"`), "", "")
	writer = strings.Replace(writer, "    env:\n", "    env:\n    - {name: HOST, value: "+primaryHost+"}\n", 1)
	phase, out = psqlAt(t, ns, "create-load", db, primaryHost, "CREATE TABLE load (id int PRIMARY KEY); CREATE TABLE load_stop (at timestamptz DEFAULT now());")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	kubectlIn(t, writer, "apply", "-f", "-")
	waitAcks(t, ns, "writer", time.Time{}, 20)
	// The lag of each standby under that load, as the primary reports it.
	out = psqlAsSuperuserIn(t, ns, db+"-0", `SELECT application_name || ' ' || state || ' ' ||
		COALESCE(EXTRACT(epoch FROM replay_lag)::text, '0') || 's ' || pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) || 'B'
		FROM pg_stat_replication ORDER BY application_name;`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		t.Logf("measured: replication lag under the write load: %s", line)
	}
	// Through the switchover subresource, as a user asks for it with the plugin.
	switched := switchOver(t, ns, db, db+"-1")
	d := waitReplicating(t, ns, db, db+"-1", 3)
	t.Logf("measured: switchover to %s-1 done (every member replicating from it) in %v", db, time.Since(switched.asked).Round(time.Second))
	require.Equal(t, []string{db + "-1"}, podsWithRole(t, ns, db, "primary"))
	require.Equal(t, []string{db + "-0", db + "-2"}, podsWithRole(t, ns, db, "replica"))
	require.Equal(t, db+"-1", d.Status.Primary)
	// The writer goes on through the client Service to the new primary, until stopped.
	waitAcks(t, ns, "writer", switched.confirmed, 20)
	phase, out = psqlAt(t, ns, "stop-writer", db, primaryHost, "INSERT INTO load_stop DEFAULT VALUES;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	acks := acknowledgedAround(t, ns, "writer", switched)

	// Every acknowledged row is on the new primary and, once caught up, on the old one.
	present := "SELECT count(*) FROM load WHERE id IN (" + ackIDs(acks) + ");"
	want := strconv.Itoa(len(acks))
	phase, out = psqlAt(t, ns, "check-new-primary", db, primaryHost, present+" SELECT pg_is_in_recovery();")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, want+"\nf", lastLines(out, 2), "acknowledged rows lost on the new primary: %s", out)
	waitRows(t, ns, "check-old-primary", db, memberHost(ns, db, 0), present, want)
	phase, out = psqlAt(t, ns, "old-primary-write", db, memberHost(ns, db, 0), "INSERT INTO items (id) VALUES (1001);")
	require.Equal(t, corev1.PodFailed, phase, out)
	require.Contains(t, out, "read-only transaction")

	// Scale-down keeps the primary: ledger-2 goes.
	kubectl(t, "scale", "db/"+db, "-n", ns, "--replicas=2")
	waitReplicating(t, ns, db, db+"-1", 2)

	// An update to the line alone ("15", the newest 15.x: a new image name) restarts the
	// replica first and the primary last, with the data kept.
	kubectl(t, "patch", "db/"+db, "-n", ns, "--type=merge", "-p", `{"spec":{"version":"`+img.Line+`"}}`)
	eventually(t, realPodTimeout, func() error {
		for _, name := range []string{db + "-0", db + "-1"} {
			p, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if image := p.Spec.Containers[0].Image; image != img.Image {
				return fmt.Errorf("pod %s runs %s", name, image)
			}
		}
		return nil
	})
	waitReplicating(t, ns, db, db+"-1", 2)
	replica0, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), db+"-0", metav1.GetOptions{})
	require.NoError(t, err)
	primary1, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), db+"-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, replica0.CreationTimestamp.Before(&primary1.CreationTimestamp),
		"the replica restarted first (%s), the primary last (%s)", replica0.CreationTimestamp, primary1.CreationTimestamp)
	phase, out = psqlAt(t, ns, "after-update", db, primaryHost, "SELECT count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "250", lastLines(out, 1), out)

	// A restart through the restart subresource: the replica first, the primary last, each
	// Pod new, the record completed, the data kept.
	restartReplicasFirst(t, ns, db, db+"-1", db+"-0")
	phase, out = psqlAt(t, ns, "after-restart", db, primaryHost, "SELECT count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "250", lastLines(out, 1), out)
}

// requireReplicationServices requires the client Service of the Database db to select the
// primary by role label on port, and its read Service the replicas.
func requireReplicationServices(t *testing.T, ns, db string, port int32) {
	t.Helper()
	ctx := context.Background()
	client, err := kube(t).CoreV1().Services(ns).Get(ctx, db, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "primary", client.Spec.Selector["database.example.com/role"])
	require.Equal(t, port, client.Spec.Ports[0].Port)
	read, err := kube(t).CoreV1().Services(ns).Get(ctx, db+"-read", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "replica", read.Spec.Selector["database.example.com/role"])
}

// requireSimulatedReplicationShape requires of d, a Ready Database of three replicas on the
// simulated node, where no server answers: the first Pod labelled primary and the others
// replica, status.primary the first Pod with three members, Replicating not True, and
// kubectl get -o wide's PRIMARY the first Pod.
func requireSimulatedReplicationShape(t *testing.T, ns string, d *examplev1.Database) {
	t.Helper()
	db := d.Name
	eventually(t, 30*time.Second, func() error {
		if got := podsWithRole(t, ns, db, "primary"); !slices.Equal(got, []string{db + "-0"}) {
			return fmt.Errorf("primary Pods %v", got)
		}
		if got := podsWithRole(t, ns, db, "replica"); !slices.Equal(got, []string{db + "-1", db + "-2"}) {
			return fmt.Errorf("replica Pods %v", got)
		}
		return nil
	})
	require.Equal(t, db+"-0", d.Status.Primary)
	require.Len(t, d.Status.Members, 3)
	c := meta.FindStatusCondition(d.Status.Conditions, "Replicating")
	require.NotNil(t, c)
	require.NotEqual(t, metav1.ConditionTrue, c.Status, "no server answers on the simulated node: %+v", c)

	out := kubectl(t, "get", "db", db, "-n", ns, "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	i := slices.Index(header, "PRIMARY")
	require.GreaterOrEqual(t, i, 0, out)
	require.Equal(t, db+"-0", row[i], out)
}

// TestReplicatedMySQLHasTheReplicatedShape runs a MySQL Database of three replicas on the
// simulated node, where no server answers: it gets the replicated shape all the same (the
// client Service selecting the primary by role label, the read Service the replicas, the
// Secret's replication and read keys, the replication ConfigMap with the setup script, the
// setup init container, status.primary and -o wide's PRIMARY), and the controller's attempts
// to reach the servers that are not there do not keep the Database from Ready.
func TestReplicatedMySQLHasTheReplicatedShape(t *testing.T) {
	ns := restrictedNamespace(t, "e2e-mysql-replication")
	const db = "orders"
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: `+db+`
  namespace: `+ns+`
spec:
  engine: mysql
  version: "8.4"
  replicas: 3
  storage: 1Gi
`, "apply", "-f", "-")
	d := waitReady(t, ns, db, 3)
	ctx := context.Background()

	requireReplicationServices(t, ns, db, 3306)

	secret, err := kube(t).CoreV1().Secrets(ns).Get(ctx, db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "replicator", string(secret.Data["replication-username"]))
	require.NotEmpty(t, secret.Data["replication-password"])
	require.Equal(t, db+"-read."+ns+".svc.cluster.local", string(secret.Data["read-host"]))
	require.True(t, strings.HasPrefix(string(secret.Data["read-uri"]), "mysql://admin:"), "read-uri")
	require.Contains(t, string(secret.Data["read-uri"]), "@"+db+"-read."+ns+".svc.cluster.local:3306/orders")

	cm, err := kube(t).CoreV1().ConfigMaps(ns).Get(ctx, db+"-replication", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db+"-0", cm.Data["primary"])
	require.Contains(t, cm.Data["mysql-setup.sh"], "CLONE INSTANCE FROM")
	sts, err := kube(t).AppsV1().StatefulSets(ns).Get(ctx, db, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, sts.Spec.Template.Spec.InitContainers, 1)
	require.Equal(t, []string{"bash", "/etc/database/mysql-setup.sh"}, sts.Spec.Template.Spec.InitContainers[0].Command)

	requireSimulatedReplicationShape(t, ns, d)
}

// TestReplicatedMongoDBHasTheReplicaSetShape runs a MongoDB Database of three replicas on the
// simulated node, where no mongod answers: it gets the replica set's shape all the same (the
// client Service selecting the primary by role label, the read Service the replicas, the
// Secret's keyfile and read keys, the setup init container that copies the keyfile, mongod
// run with --replSet and --keyFile, a readiness probe that passes on a PRIMARY or SECONDARY
// only, status.primary and -o wide's PRIMARY), in a namespace that enforces the "restricted"
// profile, and the servers that are not there do not keep the Database from Ready. No mongod
// is to be had on this machine's registries: the replica set itself (initiation,
// reconfiguration, elections) is covered by the controller's unit tests only.
func TestReplicatedMongoDBHasTheReplicaSetShape(t *testing.T) {
	ns := restrictedNamespace(t, "e2e-mongodb-replication")
	const db = "catalog"
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: `+db+`
  namespace: `+ns+`
spec:
  engine: mongodb
  version: "7.0"
  replicas: 3
  storage: 1Gi
`, "apply", "-f", "-")
	d := waitReady(t, ns, db, 3)
	ctx := context.Background()

	requireReplicationServices(t, ns, db, 27017)

	secret, err := kube(t).CoreV1().Secrets(ns).Get(ctx, db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(secret.Data["keyfile"]), 6, "a keyfile of 6 to 1024 base64 characters")
	require.NotContains(t, secret.Data, "replication-password", "members authenticate with the keyfile")
	require.Equal(t, db+"-read."+ns+".svc.cluster.local", string(secret.Data["read-host"]))
	require.Contains(t, string(secret.Data["read-uri"]), "@"+db+"-read."+ns+".svc.cluster.local:27017/catalog?authSource=catalog&readPreference=secondaryPreferred")

	cm, err := kube(t).CoreV1().ConfigMaps(ns).Get(ctx, db+"-replication", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, cm.Data["mongodb-setup.sh"], "install -m 0400")
	sts, err := kube(t).AppsV1().StatefulSets(ns).Get(ctx, db, metav1.GetOptions{})
	require.NoError(t, err)
	pod := sts.Spec.Template.Spec
	require.Len(t, pod.InitContainers, 1)
	require.Equal(t, []string{"bash", "/etc/database/mongodb-setup.sh"}, pod.InitContainers[0].Command)
	require.Equal(t, []string{"mongod", "--replSet", db, "--keyFile", "/etc/mongodb-key/keyfile"}, pod.Containers[0].Args)
	require.Contains(t, strings.Join(pod.Containers[0].ReadinessProbe.Exec.Command, " "), "isWritablePrimary")

	requireSimulatedReplicationShape(t, ns, d)
}

// mysqlPod is a Pod on the real node running script with $MYSQL, the mysql client's command
// line (the MySQL image holds it) against host as the Secret's user (or, superuser, its
// superuser) on the Secret's database, in batch mode (tab-separated, without column names),
// and $SQL, sql.
func mysqlPod(ns, name, db, host, script, sql string, superuser bool) string {
	secret := db + "-credentials"
	user, password := "username", "password"
	if superuser {
		user, password = "superuser-username", "superuser-password"
	}
	return clientPod(ns, name, clientImage(examplev1.EngineMySQL), script,
		fmt.Sprintf("{name: SQL, value: %q}", sql),
		secretEnv("MYSQL_PWD", secret, password),
		secretEnv("DB_USER", secret, user),
		secretEnv("DB_NAME", secret, "database"),
		secretEnv("DB_PORT", secret, "port"),
		fmt.Sprintf("{name: DB_HOST, value: %q}", host),
		`{name: MYSQL, value: 'mysql --host=$(DB_HOST) --port=$(DB_PORT) --user=$(DB_USER) --database=$(DB_NAME) --connect-timeout=10 --batch --skip-column-names'}`,
	)
}

// mysqlRunsSQL is mysqlPod's script that runs $SQL.
const mysqlRunsSQL = `exec $MYSQL -e "$SQL"`

// mysqlAt runs sql with the mysql client against host as the Secret's user, in a Pod named
// name, and returns its phase and output.
func mysqlAt(t *testing.T, ns, name, db, host, sql string) (corev1.PodPhase, string) {
	t.Helper()
	return runPod(t, ns, name, mysqlPod(ns, name, db, host, mysqlRunsSQL, sql, false))
}

// mysqlAsSuperuserIn runs sql with the mysql client in the database container of the Pod
// named pod, as root@localhost over the Unix socket with the Secret's superuser password (root
// logs in over the network from the controller's address only), for what the application user
// may not read (performance_schema's replication tables), and returns its output.
func mysqlAsSuperuserIn(t *testing.T, ns, pod, sql string) string {
	t.Helper()
	return kubectl(t, "exec", "-n", ns, pod, "-c", "database", "--", "sh", "-c",
		`MYSQL_PWD=$(cat `+credentialsPath+`/superuser-password) exec mysql --user=root --batch --skip-column-names -e "$1"`, "sh", sql)
}

// credentialsPath is where the database container mounts the credentials Secret's passwords.
const credentialsPath = "/etc/database-credentials"

// TestRealMySQLReplicates runs a replicated MySQL on the real node, at the release line of
// its image (9.7): a primary and replicas that follow it by GTID auto-positioning, scale-up by
// the CLONE plugin, a switchover (databases/switchover) under a steady write load that keeps
// every acknowledged row, and a rolling restart (databases/restart), replicas first. It logs
// the measured catch-up time, the replicas' apply delay and the write pause.
//
// The namespace enforces the "restricted" Pod Security Standard: the clone and the servers
// run as the non-root server user.
func TestRealMySQLReplicates(t *testing.T) {
	// Side by side with the other engine's (the only top-level tests that run in parallel:
	// both after every other test), on three Pods each at most.
	t.Parallel()
	img := realNodeImage(t, examplev1.EngineMySQL)
	ns := restrictedNamespace(t, "e2e-real-mysql-replication")
	const db = "shop"
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: `+db+`
  namespace: `+ns+`
spec:
  engine: mysql
  version: "`+img.Line+`"
  replicas: 2
  storage: 1Gi
`, "apply", "-f", "-")
	waitReplicating(t, ns, db, db+"-0", 2)
	require.Equal(t, []string{db + "-0"}, podsWithRole(t, ns, db, "primary"))
	require.Equal(t, []string{db + "-1"}, podsWithRole(t, ns, db, "replica"))

	// Writes through the client Service reach the primary; the replica has them.
	primaryHost := db + "." + ns + ".svc.cluster.local"
	readHost := db + "-read." + ns + ".svc.cluster.local"
	phase, out := mysqlAt(t, ns, "create", db, primaryHost, `CREATE TABLE items (id int PRIMARY KEY);
		INSERT INTO items WITH RECURSIVE n(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM n WHERE id < 100) SELECT id FROM n;
		SELECT @@global.super_read_only;`)
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "0", lastLines(out, 1), out)
	lag := waitAnswer(t, mysqlAt, ns, "replica-read", db, memberHost(ns, db, 1), "SELECT count(*) FROM items;", "100")
	t.Logf("measured: 100 rows visible on the replica %v after the primary's commit (including Pod start-up)", lag.Round(time.Millisecond))
	phase, out = mysqlAt(t, ns, "read-service", db, readHost, "SELECT @@global.super_read_only, count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "1\t100", lastLines(out, 1), out)

	// A replica refuses writes: the application user, no SUPER, meets read_only (which
	// super_read_only implies).
	phase, out = mysqlAt(t, ns, "replica-write", db, memberHost(ns, db, 1), "INSERT INTO items VALUES (1000);")
	require.Equal(t, corev1.PodFailed, phase, out)
	require.Contains(t, out, "running with the --read-only option")

	// Scale-up: the new replica is a CLONE of the primary (it has the rows written before it
	// existed, and the clone's GTIDs as gtid_purged: it read none of them from a binary log)
	// and follows it by GTID auto-positioning.
	scaled := time.Now()
	kubectl(t, "scale", "db/"+db, "-n", ns, "--replicas=3")
	scaledUp := waitReplicating(t, ns, db, db+"-0", 3)
	t.Logf("measured: scale-up to 3 replicated (cloned, Ready, replicating) in %v", time.Since(scaled).Round(time.Second))
	for _, m := range scaledUp.Status.Members[1:] {
		require.NotNil(t, m.LagSeconds, "%s: the applier's lag in seconds (performance_schema's commit timestamps)", m.Name)
		t.Logf("measured: %s's status.members lagSeconds %d", m.Name, *m.LagSeconds)
	}
	waitAnswer(t, mysqlAt, ns, "new-replica-read", db, memberHost(ns, db, 2), "SELECT count(*) FROM items;", "100")
	out = mysqlAsSuperuserIn(t, ns, db+"-2", `SELECT c.AUTO_POSITION,
		c.HOST = '`+memberHost(ns, db, 0)+`', @@global.gtid_purged <> '', GTID_SUBSET(@@global.gtid_purged, @@global.gtid_executed)
		FROM performance_schema.replication_connection_configuration c WHERE c.CHANNEL_NAME = '';`)
	require.Equal(t, "1\t1\t1\t1", lastLines(out, 1), out)
	for i := 1; i <= 2; i++ {
		phase, out = mysqlAt(t, ns, fmt.Sprintf("pod-read-%d", i), db, memberHost(ns, db, i), "SELECT @@global.super_read_only, count(*) FROM items;")
		require.Equal(t, corev1.PodSucceeded, phase, out)
		require.Equal(t, "1\t100", lastLines(out, 1), out)
	}

	// A switchover under a steady write load: inserts are acknowledged before it and after
	// it, every acknowledged insert is on the new primary, and the old primary follows it,
	// read-only. The writer connects to the client Service for each insert, and stops at the
	// row in writes_stop.
	writer := mysqlPod(ns, "writer", db, primaryHost, writeLoop(writeLimit,
		`$MYSQL -e "INSERT INTO writes SELECT $i FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM writes_stop); SELECT ROW_COUNT();"`), "", false)
	phase, out = mysqlAt(t, ns, "create-load", db, primaryHost, "CREATE TABLE writes (id int PRIMARY KEY); CREATE TABLE writes_stop (id int PRIMARY KEY);")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	kubectlIn(t, writer, "apply", "-f", "-")
	waitAcks(t, ns, "writer", time.Time{}, 20)
	// How far behind each replica applies under that load: the original commit time of the
	// last transaction it applied against the end of its apply.
	for i := 1; i <= 2; i++ {
		out = mysqlAsSuperuserIn(t, ns, fmt.Sprintf("%s-%d", db, i), `SELECT
			MAX(TIMESTAMPDIFF(MICROSECOND, LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP, LAST_APPLIED_TRANSACTION_END_APPLY_TIMESTAMP)) / 1e6
			FROM performance_schema.replication_applier_status_by_worker;`)
		t.Logf("measured: %s-%d applies %ss after the primary's commit under the write load", db, i, lastLines(out, 1))
	}
	switched := switchOver(t, ns, db, db+"-1")
	d := waitReplicating(t, ns, db, db+"-1", 3)
	t.Logf("measured: switchover to %s-1 done (every member replicating from it) in %v", db, time.Since(switched.asked).Round(time.Second))
	require.Equal(t, []string{db + "-1"}, podsWithRole(t, ns, db, "primary"))
	require.Equal(t, []string{db + "-0", db + "-2"}, podsWithRole(t, ns, db, "replica"))
	require.Equal(t, db+"-1", d.Status.Primary)
	// The writer goes on through the client Service to the new primary, until stopped.
	waitAcks(t, ns, "writer", switched.confirmed, 20)
	phase, out = mysqlAt(t, ns, "stop-writer", db, primaryHost, "INSERT INTO writes_stop VALUES (1);")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	acks := acknowledgedAround(t, ns, "writer", switched)

	present := "SELECT count(*) FROM writes WHERE id IN (" + ackIDs(acks) + ");"
	want := strconv.Itoa(len(acks))
	phase, out = mysqlAt(t, ns, "check-new-primary", db, primaryHost, present+" SELECT @@global.super_read_only;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, want+"\n0", lastLines(out, 2), "acknowledged rows lost on the new primary: %s", out)
	phase, out = mysqlAt(t, ns, "new-primary-write", db, primaryHost, "INSERT INTO items VALUES (1001); SELECT count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "101", lastLines(out, 1), out)
	for _, i := range []int{0, 2} {
		waitAnswer(t, mysqlAt, ns, fmt.Sprintf("check-replica-%d", i), db, memberHost(ns, db, i), present+" SELECT count(*) FROM items;", want+"\n101")
	}
	phase, out = mysqlAt(t, ns, "old-primary-write", db, memberHost(ns, db, 0), "INSERT INTO items VALUES (1002);")
	require.Equal(t, corev1.PodFailed, phase, out)
	require.Contains(t, out, "running with the --read-only option")
	out = mysqlAsSuperuserIn(t, ns, db+"-0", `SELECT c.AUTO_POSITION, c.HOST = '`+memberHost(ns, db, 1)+`'
		FROM performance_schema.replication_connection_configuration c WHERE c.CHANNEL_NAME = '';`)
	require.Equal(t, "1\t1", lastLines(out, 1), out)

	// A restart through the restart subresource: the replicas first, the primary last, the
	// data kept.
	restartReplicasFirst(t, ns, db, db+"-1", db+"-0", db+"-2")
	phase, out = mysqlAt(t, ns, "after-restart", db, primaryHost, "SELECT count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "101", lastLines(out, 1), out)
	// The primary came back read-only, as every server starts, and took writes again only
	// once the controller promoted it.
	out = kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+db+",reason=Updated", "-o", "jsonpath={.items[*].message}")
	require.Contains(t, out, db+"-1, the primary, answered read-only with no primary to follow: it takes writes again", out)
	phase, out = mysqlAt(t, ns, "after-restart-write", db, primaryHost, "INSERT INTO items VALUES (1003); SELECT count(*) FROM items;")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "102", lastLines(out, 1), out)
}
