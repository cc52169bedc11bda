package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// breakerBackup is a valid spec.backup as JSON.
const breakerBackup = `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`

// breakerDatabase is a Database body with spec.backup and spec.restore as raw JSON ("" leaves
// the field out).
func breakerDatabase(ns, name, backup, restore string) []byte {
	spec := `"engine":"postgresql","version":"16","replicas":1,"storage":"10Gi"`
	if backup != "" {
		spec += `,"backup":` + backup
	}
	if restore != "" {
		spec += `,"restore":` + restore
	}
	return fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":%q,"namespace":%q},"spec":{%s}}`, name, ns, spec)
}

// Every refusal of a bad spec.backup sent as JSON is a 400 or 422 naming the field, never a
// 500; what is accepted is listed apart.
func TestBreakerBackupBadJSONIsRefusedOnItsField(t *testing.T) {
	ns := namespace(t)
	for i, tc := range []struct {
		name, query, backup, field string
	}{
		{"retention a string", "", `{"retentionFullBackups":"7","s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.retentionFullBackups"},
		{"retention 2^31", "", `{"retentionFullBackups":2147483648,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.retentionFullBackups"},
		{"retention a fraction", "", `{"retentionFullBackups":1.5,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.retentionFullBackups"},
		{"retention -1", "", `{"retentionFullBackups":-1,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.retentionFullBackups"},
		{"retention 0", "", `{"retentionFullBackups":0,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.retentionFullBackups"},
		{"s3 a list", "", `{"s3":[{"endpoint":"https://s3.example.com"}]}`, "spec.backup.s3"},
		{"backup a string", "", `"daily"`, "spec.backup"},
		{"schedule a number", "", `{"schedule":5,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.schedule"},
		{"unknown field, strict", "?fieldValidation=Strict", `{"scheduel":"0 3 * * *","s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.scheduel"},
		{"unknown s3 field, strict", "?fieldValidation=Strict", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store","accessKey":"AKIA"}}`, "spec.backup.s3.accessKey"},
		{"six-field schedule", "", `{"schedule":"0 0 3 * * *","s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.schedule"},
		{"@reboot", "", `{"schedule":"@reboot","s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.schedule"},
		{"CRON_TZ", "", `{"schedule":"CRON_TZ=UTC 0 3 * * *","s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.schedule"},
		{"endpoint with userinfo", "", `{"s3":{"endpoint":"https://AKIA:secret@s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"endpoint IPv6 with zone", "", `{"s3":{"endpoint":"https://[fe80::1%25eth0]:9000","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"endpoint IDN", "", `{"s3":{"endpoint":"https://bücher.example","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"endpoint trailing dot", "", `{"s3":{"endpoint":"https://s3.example.com.","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"endpoint leading space", "", `{"s3":{"endpoint":" https://s3.example.com","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"endpoint trailing space", "", `{"s3":{"endpoint":"https://s3.example.com ","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"endpoint two ports", "", `{"s3":{"endpoint":"https://s3.example.com:443:443","bucket":"backups","secretName":"store"}}`, "spec.backup.s3.endpoint"},
		{"prefix //", "", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","prefix":"//","secretName":"store"}}`, "spec.backup.s3.prefix"},
		{"prefix %2e%2e", "", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","prefix":"/%2e%2e/x","secretName":"store"}}`, "spec.backup.s3.prefix"},
		{"prefix unicode", "", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","prefix":"/bäckups","secretName":"store"}}`, "spec.backup.s3.prefix"},
		{"region unicode", "", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","region":"eu-wést-1","secretName":"store"}}`, "spec.backup.s3.region"},
		{"secretName with a slash", "", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"other-ns/store"}}`, "spec.backup.s3.secretName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, http.MethodPost, databasesPath(ns)+tc.query, breakerDatabase(ns, fmt.Sprintf("db-%d", i), tc.backup, ""), nil)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, resp.code, "%.2000s", resp.body)
			msg := resp.status(t).Message
			require.Contains(t, msg, tc.field, "the refusal names the field")
		})
	}
}

// "@every 1s" passes as a schedule (robfig/cron's descriptor; "@every 0s" and negative
// durations round up to a second): a full backup is due every second, so a new full backup
// starts as soon as the last ends, for ever. The docs promise "five cron fields ... and the
// @daily forms". It should be a 422 on spec.backup.schedule (or @every refused altogether).
func TestBreakerBackupScheduleEverySecondIsRefused(t *testing.T) {
	ns := namespace(t)
	for _, schedule := range []string{"@every 1s", "@every 0s", "@every -1h", "@every 1ns"} {
		t.Run(schedule, func(t *testing.T) {
			backup := fmt.Sprintf(`{"schedule":%q,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, schedule)
			resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "every", backup, ""), nil)
			if resp.code == http.StatusCreated {
				do(t, http.MethodDelete, databasesPath(ns)+"/every", nil, nil)
			}
			require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s", resp.body)
			require.Contains(t, resp.status(t).Message, "spec.backup.schedule")
		})
	}
}

// spec.restore.pointInTime of the year 1 ("0001-01-01T00:00:00Z", a zero time) is kept as
// written, not dropped: dropping it would restore to the END of the archive.
func TestBreakerRestorePointInTimeOfYearOneIsNotDropped(t *testing.T) {
	ns := namespace(t)
	resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger","pointInTime":"0001-01-01T00:00:00Z"}`), nil)
	if resp.code == http.StatusUnprocessableEntity {
		require.Contains(t, resp.status(t).Message, "spec.restore.pointInTime")
		return
	}
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	client, _ := clientFor(t)
	got, err := client.ExampleV1().Databases(ns).Get(context.Background(), "copy", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "0001-01-01T00:00:00Z", got.Spec.Restore.PointInTime, "pointInTime was dropped: the restore goes to the end of the archive")
}

// pointInTime with fractional seconds ("RFC 3339, whole seconds", the docs say) is accepted
// and silently truncated to the second (the restore stops up to a second before the time
// asked for); worse, sending the same manifest again (PUT, server-side apply) is then a 422
// "spec.restore is immutable", since the sent value is not the stored one. It should be a
// 422 on create, or be truncated on every write alike.
func TestBreakerRestorePointInTimeWithFractionalSeconds(t *testing.T) {
	ns := namespace(t)
	client, _ := clientFor(t)
	ctx := context.Background()
	const restore = `{"database":"ledger","pointInTime":"2026-12-05T04:59:30.900Z"}`
	// kubectl apply --server-side -f copy.yaml, twice.
	resp := do(t, http.MethodPatch, databasesPath(ns)+"/copy?fieldManager=kubectl", breakerDatabase(ns, "copy", breakerBackup, restore),
		map[string]string{"Content-Type": applyYAML})
	if resp.code == http.StatusUnprocessableEntity {
		require.Contains(t, resp.status(t).Message, "spec.restore.pointInTime")
		return
	}
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	got, err := client.ExampleV1().Databases(ns).Get(ctx, "copy", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "2026-12-05T04:59:30.900Z", got.Spec.Restore.PointInTime, "kept as written, fractions and all")

	// The same manifest applied again changes nothing: it must not be refused.
	apply := do(t, http.MethodPatch, databasesPath(ns)+"/copy?fieldManager=kubectl", breakerDatabase(ns, "copy", breakerBackup, restore),
		map[string]string{"Content-Type": applyYAML})
	require.Equal(t, http.StatusOK, apply.code, "re-applying the manifest the Database was created from: %s", apply.body)
	put := do(t, http.MethodPut, databasesPath(ns)+"/copy", breakerDatabase(ns, "copy", breakerBackup, restore), nil)
	require.Equal(t, http.StatusOK, put.code, "replacing with the manifest the Database was created from: %s", put.body)
}

// Malformed pointInTime values are a 4xx naming the field.
func TestBreakerRestorePointInTimeMalformed(t *testing.T) {
	ns := namespace(t)
	for _, tc := range []struct{ name, value string }{
		{"date only", `"2026-12-05"`},
		{"no zone", `"2026-12-05T04:59:30"`},
		{"space for T", `"2026-12-05 04:59:30Z"`},
		{"a number", `1764910770`},
		{"garbage", `"yesterday"`},
		{"year 10000", `"10000-01-01T00:00:00Z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger","pointInTime":`+tc.value+`}`), nil)
			if resp.code == http.StatusCreated {
				do(t, http.MethodDelete, databasesPath(ns)+"/copy", nil, nil)
			}
			require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, resp.code, "%s", resp.body)
			require.Contains(t, resp.status(t).Message, "pointInTime", "%s", resp.body)
		})
	}
}

// The 422 of a changed spec.restore names the field and shows the value as the user wrote it,
// not a Go struct with a pointer address.
func TestBreakerRestoreImmutableMessageIsReadable(t *testing.T) {
	ns := namespace(t)
	resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger","pointInTime":"2026-12-05T04:59:30Z"}`), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	for _, tc := range []struct{ name, contentType, body string }{
		{"merge patch removes it", mergePatch, `{"spec":{"restore":null}}`},
		{"merge patch changes the source", mergePatch, `{"spec":{"restore":{"database":"orders"}}}`},
		{"merge patch changes the time", mergePatch, `{"spec":{"restore":{"pointInTime":"2026-12-05T05:00:00Z"}}}`},
		{"apply changes the time", applyYAML, string(breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger","pointInTime":"2026-12-05T05:00:00Z"}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			query := "?fieldManager=breaker"
			if tc.contentType == applyYAML {
				query += "&force=true"
			}
			resp := do(t, http.MethodPatch, databasesPath(ns)+"/copy"+query, []byte(tc.body), map[string]string{"Content-Type": tc.contentType})
			t.Logf("%s", resp.status(t).Message)
			require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s", resp.body)
			msg := resp.status(t).Message
			require.Contains(t, msg, "spec.restore")
			require.NotContains(t, msg, "0xc", "the message shows a pointer: %s", msg)
			require.NotContains(t, msg, "example.DatabaseRestore", "the message shows the internal Go type: %s", msg)
		})
	}
}

// A restored Database may stop backing up: spec.backup is needed with spec.restore at
// creation only, and spec.restore stays.
func TestRestoredDatabaseMayRemoveItsBackup(t *testing.T) {
	ns := namespace(t)
	resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger","pointInTime":"2026-12-05T04:59:30Z"}`), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	resp = do(t, http.MethodPatch, databasesPath(ns)+"/copy", []byte(`{"spec":{"backup":null}}`), map[string]string{"Content-Type": mergePatch})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	client, _ := clientFor(t)
	got, err := client.ExampleV1().Databases(ns).Get(context.Background(), "copy", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, got.Spec.Backup)
	require.Equal(t, &examplev1.DatabaseRestore{Database: "ledger", PointInTime: "2026-12-05T04:59:30Z"}, got.Spec.Restore)
}

// Two databases/backup requests at once: exactly one is recorded, the others are 409.
func TestBreakerConcurrentBackupRequests(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	for round := 0; round < 5; round++ {
		name := fmt.Sprintf("race-%d", round)
		db := newDatabase(ns, name, examplev1.EnginePostgreSQL, "16")
		db.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{
			Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
		create(t, client, db)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = dbs.Backup(ctx, name, &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{})
			}()
		}
		close(start)
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.True(t, apierrors.IsConflict(err), "%v", err)
		}
		require.Equal(t, 1, ok, "round %d: %v", round, errs)
	}
}

// A backup request of a Failed Database, or of one being deleted, is a 409 and records
// nothing; a dry run of one is refused alike.
func TestBreakerBackupRequestRefusals(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	withBackup := func(name string) *examplev1.Database {
		db := newDatabase(ns, name, examplev1.EnginePostgreSQL, "16")
		db.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{
			Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
		return db
	}
	failed := create(t, client, withBackup("failed"))
	failed.Status.Phase = examplev1.DatabasePhaseFailed
	_, err := dbs.UpdateStatus(ctx, failed, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, dry := range [][]string{nil, {metav1.DryRunAll}} {
		_, err = dbs.Backup(ctx, "failed", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{DryRun: dry})
		require.True(t, apierrors.IsConflict(err), "%v", err)
		require.ErrorContains(t, err, "Failed")
	}

	going := withBackup("going")
	going.Finalizers = []string{"example.com/test-hold"}
	create(t, client, going)
	require.NoError(t, dbs.Delete(ctx, "going", metav1.DeleteOptions{}))
	t.Cleanup(func() {
		_, _ = dbs.Patch(context.Background(), "going", mergePatch, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	_, err = dbs.Backup(ctx, "going", &examplev1.DatabaseBackupRequest{}, metav1.CreateOptions{})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.ErrorContains(t, err, "being deleted")

	for _, name := range []string{"failed", "going"} {
		got, err := dbs.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, got.Status.Backup == nil || got.Status.Backup.Request == nil, "%s: %+v", name, got.Status.Backup)
	}

	// Bad bodies.
	base := databasesPath(ns) + "/failed/backup"
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"malformed JSON", `{"kind":`, http.StatusBadRequest},
		{"a list", `[]`, http.StatusBadRequest},
		{"name mismatch", `{"apiVersion":"example.com/v1","kind":"DatabaseBackupRequest","metadata":{"name":"other"}}`, http.StatusBadRequest},
		{"a Database", `{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"failed"}}`, http.StatusBadRequest},
		{"unknown field, strict", `{"apiVersion":"example.com/v1","kind":"DatabaseBackupRequest","type":"incremental"}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, http.MethodPost, base+"?fieldValidation=Strict", []byte(tc.body), nil)
			require.Equal(t, tc.code, resp.code, "%s", resp.body)
		})
	}
}

// A write of the main resource cannot set status.backup, nor can a create; server-side apply
// of status.backup.request through databases/status keeps the stored record.
func TestBreakerBackupStatusCannotBeSetThroughTheMainResource(t *testing.T) {
	client, _ := clientFor(t)
	ns := namespace(t)
	ctx := context.Background()
	dbs := client.ExampleV1().Databases(ns)
	db := newDatabase(ns, "shop", examplev1.EnginePostgreSQL, "16")
	db.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{
		Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
	db.Status.Backup = &examplev1.DatabaseBackupStatus{Request: &examplev1.DatabaseBackupRequestStatus{RequestedBy: "mallory", RequestedAt: metav1.Now()}}
	got := create(t, client, db)
	require.Nil(t, got.Status.Backup)

	got.Status.Backup = &examplev1.DatabaseBackupStatus{ActiveJob: "x", Request: &examplev1.DatabaseBackupRequestStatus{RequestedBy: "mallory", RequestedAt: metav1.Now()}}
	out, err := dbs.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Nil(t, out.Status.Backup)

	resp := do(t, http.MethodPatch, databasesPath(ns)+"/shop/status?fieldManager=mallory&force=true",
		[]byte(`{"apiVersion":"example.com/v1","kind":"Database","metadata":{"name":"shop"},"status":{"backup":{"request":{"requestedBy":"mallory","requestedAt":"2026-01-01T00:00:00Z"}}}}`),
		map[string]string{"Content-Type": applyYAML})
	require.Equal(t, http.StatusOK, resp.code, "%s", resp.body)
	stored, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, stored.Status.Backup == nil || stored.Status.Backup.Request == nil, "%+v", stored.Status.Backup)
}

// A Database may restore the stanza of its own name (a deleted predecessor's): accepted.
// (Whether the docs say so is in the report.)
func TestBreakerRestoreOfItsOwnName(t *testing.T) {
	ns := namespace(t)
	resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "ledger", breakerBackup, `{"database":"ledger"}`), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
}

// spec.restore on mysql and mongodb, and without spec.backup, is a 422 on spec.restore (and
// spec.backup).
func TestBreakerRestoreRefusals(t *testing.T) {
	ns := namespace(t)
	for _, tc := range []struct{ name, body, field string }{
		{"no spec.backup", string(breakerDatabase(ns, "copy", "", `{"database":"ledger"}`)), "spec.restore"},
		{"mysql", strings.Replace(string(breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger"}`)), `"postgresql","version":"16"`, `"mysql","version":"8.4"`, 1), "spec.restore"},
		{"mongodb", strings.Replace(string(breakerDatabase(ns, "copy", breakerBackup, `{"database":"ledger"}`)), `"postgresql","version":"16"`, `"mongodb","version":"7.0"`, 1), "spec.restore"},
		{"bad source", string(breakerDatabase(ns, "copy", breakerBackup, `{"database":"Ledger_1"}`)), "spec.restore.database"},
		{"restore a string", string(breakerDatabase(ns, "copy", breakerBackup, `"ledger"`)), "spec.restore"},
		{"restore empty", string(breakerDatabase(ns, "copy", breakerBackup, `{}`)), "spec.restore.database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, http.MethodPost, databasesPath(ns), []byte(tc.body), nil)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, resp.code, "%.1000s", resp.body)
			require.Contains(t, resp.status(t).Message, tc.field)
		})
	}
}

// A refusal of a huge value echoes it back, twice for the schedule (the value, then the cron
// parser's error quoting it again): a 1 MiB schedule makes a 4 MiB 422. And a huge schedule
// that parses (five fields and a megabyte of spaces) is stored as is.
func TestBreakerHugeValuesAreNotEchoedNorStored(t *testing.T) {
	ns := namespace(t)
	huge := strings.Repeat("x", 1<<20)
	for i, tc := range []struct{ name, backup string }{
		{"huge schedule", `{"schedule":"` + huge + `","s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`},
		{"huge endpoint", `{"s3":{"endpoint":"https://` + huge + `.com","bucket":"backups","secretName":"store"}}`},
		{"huge prefix", `{"s3":{"endpoint":"https://s3.example.com","bucket":"backups","prefix":"/` + huge + `","secretName":"store"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, fmt.Sprintf("huge-%d", i), tc.backup, ""), nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%.300s", resp.body)
			require.Less(t, len(resp.body), 64<<10, "a refusal does not echo a megabyte back: %.300s", resp.body)
		})
	}
	t.Run("huge schedule that parses", func(t *testing.T) {
		schedule := "0 3 * * *" + strings.Repeat(" ", 1<<20)
		backup := fmt.Sprintf(`{"schedule":%q,"s3":{"endpoint":"https://s3.example.com","bucket":"backups","secretName":"store"}}`, schedule)
		resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "spaces", backup, ""), nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.code, "a megabyte schedule is stored (%d bytes back)", len(resp.body))
	})
}

// Bucket names S3 itself refuses (an IP address, "xn--" prefix: AWS's naming rules) pass
// validation; the docs' rule is only "3 to 63 lower-case letters, digits, dots and hyphens".
// Low: a store other than AWS may take them.
func TestBreakerBucketNamesS3Refuses(t *testing.T) {
	ns := namespace(t)
	for i, bucket := range []string{"192.168.5.4", "xn--bucket", "bucket-s3alias"} {
		t.Run(bucket, func(t *testing.T) {
			backup := fmt.Sprintf(`{"s3":{"endpoint":"https://s3.example.com","bucket":%q,"secretName":"store"}}`, bucket)
			resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, fmt.Sprintf("bucket-%d", i), backup, ""), nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%.300s", resp.body)
		})
	}
}
