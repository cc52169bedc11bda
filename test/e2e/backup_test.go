//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	miniocredentials "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/objectstore"
)

// backupTimeout bounds a backup Job's way to its end: its Pod's start on the real node,
// stanza-create, a checkpoint and a full backup of a small database.
const backupTimeout = 3 * time.Minute

// TestRealPostgreSQLBackups backs up a replicated PostgreSQL Database on the real node to a
// real S3-compatible store (SeaweedFS) and restores what it wrote: the first full backup
// starts once the Database is Ready, BackedUp turns True with status.backup naming the Job,
// the schedule then takes another backup, and kubectl database backup one more;
// pgBackRest restores every row of two batches of acknowledged inserts at the archive's
// end; kubectl get databasebackups lists what pgBackRest's own info lists, and a backup
// deleted with kubectl or from the store by hand leaves the list at once; once the source
// is deleted, its backups are still listed, and a new Database with spec.restore as of a
// time between the two batches holds every row of the first and none of the second, on its
// primary and on its replica, takes writes and is backed up in turn; a restore that meets a
// corrupt object in the store fails with the Restored condition and an Event saying why,
// never Ready; a restore from a Database of which the store holds no backup is a 422. The
// Databases come and go so that the real node's CPU holds them with the shared example's.
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

	// kubectl get databasebackups lists what the store holds, as pgBackRest itself reads it;
	// a backup deleted with kubectl, and one deleted from the store by hand, are gone from
	// it at once. Both ended after the restore's time below, which the first one serves.
	backups := storedBackups(t, ns, store, db, img.Image)
	listed := listBackups(t, ns, "--field-selector=database="+db)
	require.Equal(t, backups, listed)
	require.Equal(t, listed, listBackups(t, ns, "-l", "app.kubernetes.io/instance="+db))
	table := kubectl(t, "get", "databasebackups", "-n", ns)
	require.Contains(t, table, "RECOVERABLE FROM", table)
	require.Contains(t, table, db+"."+strings.ToLower(backups[0].ID), table)
	var after []examplev1.DatabaseBackup
	for _, b := range listed {
		if b.EndTime.After(at) {
			after = append(after, b)
		}
	}
	require.GreaterOrEqual(t, len(after), 2, "backups %+v, restore time %s", listed, at)
	byKubectl, byHand := after[len(after)-1], after[len(after)-2]
	require.Equal(t, fmt.Sprintf("databasebackup.example.com %q deleted\n", byKubectl.Name),
		kubectl(t, "delete", "databasebackup", byKubectl.Name, "-n", ns))
	objects := storeClient(t, store)
	require.NoError(t, objects.DeleteAll(context.Background(), "e2e/"+ns+"/backup/"+db+"/"+byHand.ID+"/"))
	var kept []examplev1.DatabaseBackup
	for _, b := range listed {
		if b.Name != byKubectl.Name && b.Name != byHand.Name {
			kept = append(kept, b)
		}
	}
	require.Equal(t, kept, listBackups(t, ns, "--field-selector=database="+db))
	_, errOut, err = kubectlAs(cluster.KubeconfigPath, "", "get", "databasebackup", byKubectl.Name, "-n", ns)
	require.Error(t, err)
	require.Contains(t, errOut, "NotFound", errOut)

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
	// The deleted source's backups are still listed: the copy names their store.
	require.Equal(t, kept, listBackups(t, ns, "--field-selector=database="+db))
	waitReplicating(t, ns, copyDB, copyDB+"-0", 2)
	// It restored the latest backup that ended before the time, which the restore chose
	// among those the store holds (pgBackRest's index may still name the deleted ones).
	var from examplev1.DatabaseBackup
	for _, b := range kept {
		if b.EndTime.Before(&metav1.Time{Time: at}) {
			from = b
		}
	}
	restoreLog := kubectl(t, "logs", "-n", ns, copyDB+"-0", "-c", "restore")
	require.Contains(t, restoreLog, "postgresql-restore: from backup "+from.ID+"\n", restoreLog)
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

	// A restore that finds an object of its backup corrupt in the store fails, says why, and
	// never serves: the control file of the backup the copy restored, overwritten.
	controlFiles := storeKeys(t, store, "e2e/"+ns+"/backup/"+db+"/"+from.ID+"/pg_data/global/")
	i := slices.IndexFunc(controlFiles, func(k string) bool { return strings.Contains(k, "/pg_control") })
	require.GreaterOrEqual(t, i, 0, "%v", controlFiles)
	putObject(t, store, controlFiles[i], []byte("not the control file"))
	kubectlIn(t, backedUpDatabase(ns, "corrupt", img.Line, 1, store)+fmt.Sprintf(`  restore:
    database: %s
    pointInTime: %s
`, db, at.UTC().Format(time.RFC3339)), "apply", "-f", "-")
	waitRestoreFailed(t, ns, "corrupt", "FormatError") // pgBackRest: the object does not decompress
	out = kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=corrupt,reason=RestoreFailed", "-o", "jsonpath={.items[*].message}")
	require.Contains(t, out, "could not restore the backups of "+db, out)

	// A restore from a Database of which the store holds no backup is refused at once: our
	// server reads the store.
	_, errOut, err = kubectlAs(cluster.KubeconfigPath, backedUpDatabase(ns, "nothing", img.Line, 1, store)+`  restore:
    database: never-backed-up
`, "apply", "-f", "-")
	require.Error(t, err)
	require.Contains(t, errOut, `spec.restore.database: Invalid value: "never-backed-up": the store spec.backup names (bucket backups at https://`+store.Host+`) holds no backup of Database "never-backed-up"`, errOut)
	_, err = getDatabase(t, ns, "nothing")
	require.True(t, apierrors.IsNotFound(err), "%v", err)
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

// storedBackups is what pgBackRest's info says the store holds of the stanza db: its full
// backups as DatabaseBackups would show them (name, Database, id, times, sizes, WAL range),
// oldest first.
func storedBackups(t *testing.T, ns string, store objectStore, db, image string) []examplev1.DatabaseBackup {
	t.Helper()
	name := fmt.Sprintf("info-%d", time.Now().Unix())
	phase, out := runPod(t, ns, name, clientPod(ns, name, image,
		`printf '%s' "$CA" >/tmp/ca.crt; exec pgbackrest --stanza=`+db+` info --output=json`, storeEnv(store, ns)...))
	require.Equal(t, corev1.PodSucceeded, phase, out)
	var info []struct {
		Backup []struct {
			Label     string `json:"label"`
			Type      string `json:"type"`
			Timestamp struct {
				Start int64 `json:"start"`
				Stop  int64 `json:"stop"`
			} `json:"timestamp"`
			Info struct {
				Size       int64 `json:"size"`
				Repository struct {
					Size int64 `json:"size"`
				} `json:"repository"`
			} `json:"info"`
			Archive struct {
				Start string `json:"start"`
				Stop  string `json:"stop"`
			} `json:"archive"`
		} `json:"backup"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "["):]), &info), out)
	require.Len(t, info, 1, out)
	var backups []examplev1.DatabaseBackup
	for _, b := range info[0].Backup {
		backups = append(backups, examplev1.DatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: db + "." + strings.ToLower(b.Label)},
			Database:   db, ID: b.Label, Engine: examplev1.EnginePostgreSQL, Method: "pgBackRest full",
			StartTime: metav1.Unix(b.Timestamp.Start, 0), EndTime: metav1.Unix(b.Timestamp.Stop, 0),
			DataBytes: b.Info.Size, StoredBytes: b.Info.Repository.Size,
			LogStart: b.Archive.Start, LogEnd: b.Archive.Stop,
		})
	}
	return backups
}

// listBackups is kubectl get databasebackups -n ns with args, each item cut to what
// storedBackups shows.
func listBackups(t *testing.T, ns string, args ...string) []examplev1.DatabaseBackup {
	t.Helper()
	out := kubectl(t, append([]string{"get", "databasebackups", "-n", ns, "-o", "json"}, args...)...)
	var list examplev1.DatabaseBackupList
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	var backups []examplev1.DatabaseBackup
	for _, b := range list.Items {
		require.Equal(t, b.Database+"."+strings.ToLower(b.ID), b.Name)
		require.Equal(t, b.EndTime.Add(time.Second), b.RecoverableFrom.Time, "%+v", b)
		backups = append(backups, examplev1.DatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: b.Name},
			Database:   b.Database, ID: b.ID, Engine: b.Engine, Method: b.Method,
			StartTime: metav1.NewTime(b.StartTime.Local()), EndTime: metav1.NewTime(b.EndTime.Local()),
			DataBytes: b.DataBytes, StoredBytes: b.StoredBytes, LogStart: b.LogStart, LogEnd: b.LogEnd,
		})
	}
	return backups
}

// storeClient reaches the store from the test, as any S3 client of the cluster's network
// would, through the real node's DNS.
func storeClient(t *testing.T, store objectStore) *objectstore.Store {
	t.Helper()
	s, err := objectstore.New(objectstore.Config{
		Host: store.Host, Port: int32(store.Port), Bucket: store.Bucket, Region: "us-east-1",
		AccessKeyID: store.AccessKey, SecretAccessKey: store.SecretKey, CA: store.CA,
		Resolver: clusterResolver(),
	})
	require.NoError(t, err)
	return s
}

// waitRestoreFailed waits until the Database db of ns says its restore failed (Restored
// False, RestoreFailed) with a message that holds why, and is not Ready.
func waitRestoreFailed(t *testing.T, ns, db, why string) {
	t.Helper()
	eventually(t, realPodTimeout, func() error {
		d, err := getDatabase(t, ns, db)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionRestored)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Restored is %+v", c)
		}
		require.Equal(t, examplev1.ReasonRestoreFailed, c.Reason)
		require.Contains(t, c.Message, why)
		require.False(t, meta.IsStatusConditionTrue(d.Status.Conditions, examplev1.ConditionReady))
		return nil
	})
}

// storeKeys lists every key of the store under prefix.
func storeKeys(t *testing.T, store objectStore, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range minioClient(t, store).ListObjects(context.Background(), store.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		require.NoError(t, o.Err)
		keys = append(keys, o.Key)
	}
	return keys
}

// putObject writes data to the store as key, in place of what it held.
func putObject(t *testing.T, store objectStore, key string, data []byte) {
	t.Helper()
	_, err := minioClient(t, store).PutObject(context.Background(), store.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	require.NoError(t, err)
}

// minioClient is an S3 client of the store for what the product never does to it: writing.
func minioClient(t *testing.T, store objectStore) *minio.Client {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(store.CA))
	dialer := &net.Dialer{Resolver: clusterResolver()}
	client, err := minio.New(net.JoinHostPort(store.Host, strconv.Itoa(store.Port)), &minio.Options{
		Creds: miniocredentials.NewStaticV4(store.AccessKey, store.SecretKey, ""), Secure: true,
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
		Transport: &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}},
	})
	require.NoError(t, err)
	return client
}

// clusterResolver resolves names through the real node's DNS, as the cluster's Pods do.
func clusterResolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, cluster.DNSServer())
	}}
}
