//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// backupTimeout bounds a backup Job's way to its end: its Pod's start on the real node,
// stanza-create, a checkpoint and a full backup of a small database.
const backupTimeout = 3 * time.Minute

// TestRealPostgreSQLBackups backs up a replicated PostgreSQL Database on the real node to a
// real S3-compatible store (SeaweedFS) and restores what it wrote: the first full backup
// starts once the Database is Ready, BackedUp turns True with status.backup naming the Job,
// the schedule then takes another backup, and kubectl database backup one more;
// pgBackRest restores every row of two batches of
// acknowledged inserts at the archive's end; once the source is deleted, a new Database with
// spec.restore as of a time between the two batches holds every row of the first and none
// of the second, on its primary and on its replica, takes writes and is backed up in turn; a
// restore from a
// Database without backups fails with the Restored condition and an Event saying why, never
// Ready. The Databases come and go so that the real node's CPU holds them with the shared
// example's.
func TestRealPostgreSQLBackups(t *testing.T) {
	img := realNodeImage(t, examplev1.EnginePostgreSQL)
	ns := restrictedNamespace(t, "e2e-backup")
	store := startObjectStore(t, ns)
	_, err := kube(t).CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "store"},
		Data: map[string][]byte{
			examplev1.BackupSecretKeyAccessKeyID:     []byte(store.AccessKey),
			examplev1.BackupSecretKeySecretAccessKey: []byte(store.SecretKey),
			examplev1.BackupSecretKeyCA:              store.CA,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	const db = "ledger"
	kubectlIn(t, backedUpDatabase(ns, db, img.Line, 2, store), "apply", "-f", "-")
	t.Cleanup(func() {
		if t.Failed() {
			out, _, _ := kubectlAs(cluster.KubeconfigPath, "", "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
			t.Logf("events of %s:\n%s", ns, out)
			out, _, _ = kubectlAs(cluster.KubeconfigPath, "", "logs", "-n", ns, "-l", "app.kubernetes.io/component=backup", "--all-containers", "--tail=60")
			t.Logf("backup Jobs:\n%s", out)
		}
	})
	waitReplicating(t, ns, db, db+"-0", 2)

	// The first backup starts by itself.
	first := waitBackedUp(t, ns, db, "")
	require.NotNil(t, first.LastScheduleTime)
	require.True(t, strings.HasPrefix(first.LastSuccessfulJob, db+"-backup-"), first.LastSuccessfulJob)
	job, err := kube(t).BatchV1().Jobs(ns).Get(context.Background(), first.LastSuccessfulJob, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Database", job.OwnerReferences[0].Kind)
	// Its report: the window starts at the end of the one backup the store holds, between
	// the Job's start and its end.
	var firstRecoverable time.Time
	eventually(t, time.Minute, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if b := d.Status.Backup; b == nil || b.FirstRecoverableTime == nil {
			return fmt.Errorf("status.backup %+v: no firstRecoverableTime", b)
		}
		firstRecoverable = d.Status.Backup.FirstRecoverableTime.Time
		return nil
	})
	require.False(t, firstRecoverable.Before(first.LastScheduleTime.Time), "%v, Job started at %v", firstRecoverable, first.LastScheduleTime)
	require.False(t, firstRecoverable.After(first.LastSuccessfulTime.Add(time.Second)), "%v, Job ended at %v", firstRecoverable, first.LastSuccessfulTime)

	// Then the schedule: every minute, from now on.
	kubectl(t, "patch", "database", db, "-n", ns, "--type=merge", "-p", `{"spec":{"backup":{"schedule":"* * * * *"}}}`)

	// Two batches of acknowledged inserts, the server's clock read between them.
	host := db + "." + ns + ".svc.cluster.local"
	phase, out := psqlAt(t, ns, "batch-1", db, host,
		"CREATE TABLE entries (id int PRIMARY KEY); INSERT INTO entries SELECT generate_series(1, 300); SELECT 'at=' || to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	read, err := time.Parse("2006-01-02 15:04:05.999999", strings.TrimPrefix(strings.TrimSpace(out[strings.Index(out, "at="):]), "at="))
	require.NoError(t, err, out)
	// spec.restore.pointInTime is in whole seconds: the second after the clock's reading,
	// and the second batch well after it.
	at := read.Truncate(time.Second).Add(time.Second)
	time.Sleep(2 * time.Second)
	phase, out = psqlAt(t, ns, "batch-2", db, host, "INSERT INTO entries SELECT generate_series(301, 500)")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	// The segment holding the second batch is archived now, not at archive_timeout.
	psqlAsSuperuserIn(t, ns, db+"-0", "SELECT pg_switch_wal()")

	// The store restores both batches at the archive's end (pgBackRest by hand).
	eventually(t, 2*time.Minute, func() error {
		if n := restoredCount(t, ns, store, db, img.Image, fmt.Sprintf("restore-end-%d", time.Now().Unix()), ""); n != "500" {
			return fmt.Errorf("the archive's end restores %s rows, want 500", n)
		}
		return nil
	})

	// The schedule took another backup, which the status and the store both show, with the
	// primary's archiving past the second batch.
	second := waitBackedUp(t, ns, db, first.LastSuccessfulJob)
	eventually(t, 2*time.Minute, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		if b := d.Status.Backup; b == nil || b.LastArchivedTime == nil || !b.LastArchivedTime.After(at) || b.ArchiveFailureTime != nil {
			return fmt.Errorf("status.backup %+v: no archiving after %s yet", b, at)
		}
		return nil
	})
	require.True(t, second.LastScheduleTime.After(first.LastScheduleTime.Time), "%+v", second)
	phase, out = runPod(t, ns, "info", clientPod(ns, "info", img.Image,
		`printf '%s' "$CA" >/tmp/ca.crt; exec pgbackrest --stanza=`+db+` info --output=json`, storeEnv(store, ns)...))
	require.Equal(t, corev1.PodSucceeded, phase, out)
	var info []struct {
		Backup []struct {
			Type      string `json:"type"`
			Timestamp struct {
				Stop int64 `json:"stop"`
			} `json:"timestamp"`
		} `json:"backup"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info), out)
	require.Len(t, info, 1, out)
	require.GreaterOrEqual(t, len(info[0].Backup), 2, out)
	for _, b := range info[0].Backup {
		require.Equal(t, "full", b.Type, out)
	}
	// The window's start on status is the second after the end of the oldest backup the
	// store lists (the retention, 7, keeps the first).
	require.Equal(t, info[0].Backup[0].Timestamp.Stop+1, firstRecoverable.Unix(), out)
	d, err := getDatabase(t, ns, db)
	require.NoError(t, err)
	require.Equal(t, firstRecoverable, d.Status.Backup.FirstRecoverableTime.Time, "the later reports say the same")

	// A backup now, through the plugin (databases/backup), with the schedule off; a second
	// request while it is pending or runs is a Conflict.
	kubectl(t, "patch", "database", db, "-n", ns, "--type=merge", "-p", `{"spec":{"backup":{"schedule":""}}}`)
	eventually(t, backupTimeout, func() error {
		out, errOut, err := kubectlDatabase(t, "backup", db, "-n", ns)
		if err != nil {
			// The last scheduled Job may still run.
			return fmt.Errorf("%v: %s", err, errOut)
		}
		require.Equal(t, "database.example.com/"+db+" backup requested\n", out)
		return nil
	})
	_, errOut, err := kubectlDatabase(t, "backup", db, "-n", ns)
	require.Error(t, err)
	require.Contains(t, errOut, "Error from server (Conflict)")
	// The Job the request started ends: the last Job started at or after the request, done.
	// (A Job the schedule started before the patch reached the controller may end first.)
	requested := waitBackedUpAs(t, ns, db, func(b *examplev1.DatabaseBackupStatus) bool {
		return b.Request != nil && b.LastScheduleTime != nil && !b.LastScheduleTime.Before(&b.Request.RequestedAt) &&
			b.ActiveJob == "" && b.LastSuccessfulTime != nil && !b.LastSuccessfulTime.Before(b.LastScheduleTime)
	})
	require.NotEqual(t, second.LastSuccessfulJob, requested.LastSuccessfulJob)

	// A restore to a time before the window, or after now, is refused at once, naming the
	// window; nothing is made.
	for pointInTime, refusal := range map[string]string{
		firstRecoverable.Add(-time.Hour).UTC().Format(time.RFC3339): fmt.Sprintf(`must be within the recoverability window of Database %q: from %s`,
			db, firstRecoverable.UTC().Format(time.RFC3339)),
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339): "must be within the recoverability window",
	} {
		_, errOut, err := kubectlAs(cluster.KubeconfigPath, backedUpDatabase(ns, "too-early", img.Line, 1, store)+fmt.Sprintf(`  restore:
    database: %s
    pointInTime: %s
`, db, pointInTime), "apply", "-f", "-")
		require.Error(t, err, pointInTime)
		require.Contains(t, errOut, "spec.restore.pointInTime", errOut)
		require.Contains(t, errOut, refusal, errOut)
	}
	_, err = getDatabase(t, ns, "too-early")
	require.True(t, apierrors.IsNotFound(err), "%v", err)

	// The source goes; its backups stay in the store, and a new Database restores them.
	kubectl(t, "delete", "database", db, "-n", ns, "--wait=true", "--timeout=3m")

	// A new Database restored as of that time holds the first batch alone, on its primary
	// and on the replica cloned from it, and takes writes (the statement's snapshot is
	// taken before its own insert).
	const copyDB = "ledger-copy"
	kubectlIn(t, backedUpDatabase(ns, copyDB, img.Line, 2, store)+fmt.Sprintf(`  restore:
    database: %s
    pointInTime: %s
`, db, at.UTC().Format(time.RFC3339)), "apply", "-f", "-")
	waitReplicating(t, ns, copyDB, copyDB+"-0", 2)
	restoredDB, err := getDatabase(t, ns, copyDB)
	require.NoError(t, err)
	restoredCond := meta.FindStatusCondition(restoredDB.Status.Conditions, examplev1.ConditionRestored)
	require.NotNil(t, restoredCond)
	require.Equal(t, metav1.ConditionTrue, restoredCond.Status, "%+v", restoredCond)
	copyHost := copyDB + "." + ns + ".svc.cluster.local"
	phase, out = psqlAt(t, ns, "copy-count", copyDB, copyHost, "WITH written AS (INSERT INTO entries VALUES (1000) RETURNING id) SELECT count(*) || '|' || max(id) FROM entries")
	require.Equal(t, corev1.PodSucceeded, phase, out)
	require.Equal(t, "300|300", strings.TrimSpace(out))
	waitRows(t, ns, "copy-replica", copyDB, memberHost(ns, copyDB, 1), "SELECT count(*) FROM entries", "301")
	// The copy is backed up into a stanza of its own, from its new timeline.
	waitBackedUp(t, ns, copyDB, "")

	// A restore from a Database that has no backups fails, says why, and never serves.
	kubectlIn(t, backedUpDatabase(ns, "nothing", img.Line, 1, store)+`  restore:
    database: never-backed-up
`, "apply", "-f", "-")
	eventually(t, realPodTimeout, func() error {
		d, err := getDatabase(t, ns, "nothing")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionRestored)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Restored is %+v", c)
		}
		require.Equal(t, examplev1.ReasonRestoreFailed, c.Reason)
		require.Contains(t, c.Message, "never-backed-up")
		require.False(t, meta.IsStatusConditionTrue(d.Status.Conditions, examplev1.ConditionReady))
		return nil
	})
	out = kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=nothing,reason=RestoreFailed", "-o", "jsonpath={.items[*].message}")
	require.Contains(t, out, "could not restore the backups of never-backed-up", out)
}

// backedUpDatabase is the manifest of a PostgreSQL Database of replicas Pods at version
// (replicatedDatabase) backed up to store under the prefix /e2e with the keys of the Secret
// "store".
func backedUpDatabase(ns, name, version string, replicas int, store objectStore) string {
	return replicatedDatabase(ns, name, examplev1.EnginePostgreSQL, version, replicas) + fmt.Sprintf(`  backup:
    s3:
      endpoint: https://%s
      bucket: %s
      prefix: /e2e
      secretName: store
`, store.Host, store.Bucket)
}

// waitBackedUp waits until the Database's BackedUp condition is True for a backup Job other
// than not, and returns status.backup.
func waitBackedUp(t *testing.T, ns, db, not string) examplev1.DatabaseBackupStatus {
	t.Helper()
	return waitBackedUpAs(t, ns, db, func(b *examplev1.DatabaseBackupStatus) bool { return b.LastSuccessfulJob != not })
}

// waitBackedUpAs waits until the Database db of ns is BackedUp (BackupSucceeded) with a
// status.backup that done accepts, and returns it.
func waitBackedUpAs(t *testing.T, ns, db string, done func(*examplev1.DatabaseBackupStatus) bool) examplev1.DatabaseBackupStatus {
	t.Helper()
	var status examplev1.DatabaseBackupStatus
	eventually(t, backupTimeout, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionBackedUp)
		if c == nil || c.Status != metav1.ConditionTrue || d.Status.Backup == nil || !done(d.Status.Backup) {
			return fmt.Errorf("BackedUp is %+v, status.backup %+v", c, d.Status.Backup)
		}
		require.Equal(t, examplev1.ReasonBackupSucceeded, c.Reason)
		status = *d.Status.Backup
		return nil
	})
	return status
}

// storeEnv is the environment of a pgBackRest client of the repository of ns's Databases in
// store, under the prefix /e2e (the store's CA in CA, for the script to write to
// /tmp/ca.crt).
func storeEnv(store objectStore, ns string) []string {
	return append(store.pgbackrestEnv("/tmp/ca.crt"), `{name: PGBACKREST_REPO1_PATH, value: "/e2e/`+ns+`"}`,
		fmt.Sprintf("{name: CA, value: %q}", store.CA))
}

// restoredCount restores the Database's stanza from store into an empty directory of a Pod
// named name (pgBackRest's restore with options), starts a server on it, waits until its
// recovery has ended, and returns how many rows the table entries holds.
func restoredCount(t *testing.T, ns string, store objectStore, db, image, name, options string) string {
	t.Helper()
	script := `set -e; printf '%s' "$CA" >/tmp/ca.crt; mkdir -m 700 /tmp/restore
pgbackrest --stanza=` + db + ` --pg1-path=/tmp/restore restore ` + options + `
pg_ctl -D /tmp/restore -l /tmp/server.log -o "-p 5433 -c unix_socket_directories=/tmp -c listen_addresses=''" start >/dev/null
for i in $(seq 1 120); do
  if [ "$(psql -h /tmp -p 5433 -U postgres -d ` + db + ` -tAc 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; then break; fi
  sleep 1
done
echo "count=$(psql -h /tmp -p 5433 -U postgres -d ` + db + ` -tAc 'SELECT count(*) FROM entries')"`
	phase, out := runPod(t, ns, name, clientPod(ns, name, image, script, storeEnv(store, ns)...))
	require.Equal(t, corev1.PodSucceeded, phase, out)
	i := strings.LastIndex(out, "count=")
	require.GreaterOrEqual(t, i, 0, out)
	n := strings.TrimSpace(out[i+len("count="):])
	_, err := strconv.Atoi(n)
	require.NoError(t, err, out)
	return n
}
