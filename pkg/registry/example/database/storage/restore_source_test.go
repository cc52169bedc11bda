package storage

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"example.com/database-apiserver/pkg/apis/example"
	_ "example.com/database-apiserver/pkg/engine/postgresql" // backups of PostgreSQL Databases
)

// At creation, a restore's source backups are read from the store spec.backup names: none
// there is a 422 on spec.restore.database; the oldest starts the window, before the
// source's own report; a store that cannot be read leaves the source's report; a body whose
// spec.backup is invalid, or that admission refuses, is not read from at all; a create by
// update is checked alike.
func TestCreateRestoringReadsTheSourcesBackupsFromTheStore(t *testing.T) {
	s := newStorage(t)
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	s.Database.now = func() time.Time { return now }
	source := create(t, s, validDatabase("ledger"))
	reported := metav1.NewTime(now.Add(-24 * time.Hour))
	source.Status.Backup = &example.DatabaseBackupStatus{FirstRecoverableTime: &reported}
	_, _, err := s.Status.Update(testContext(s, "status"), "ledger", rest.DefaultUpdatedObjectInfo(source),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	require.NoError(t, err)

	inStore := now.Add(-48 * time.Hour)
	var read []string
	s.Database.SourceBackups = func(_ context.Context, db *example.Database) ([]time.Time, error) {
		read = append(read, db.Spec.Restore.Database)
		switch db.Spec.Restore.Database {
		case "ledger", "gone":
			return []time.Time{inStore, inStore.Add(time.Hour)}, nil
		case "unreadable":
			return nil, errors.New("the store answered AccessDenied")
		}
		return nil, nil
	}
	copies := 0
	restoring := func(from, at string) *example.Database {
		copies++
		db := validDatabase(fmt.Sprintf("copy-%d", copies))
		db.Spec.Backup = &example.DatabaseBackupPolicy{S3: example.DatabaseBackupS3{
			Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
		db.Spec.Restore = &example.DatabaseRestore{Database: from, PointInTime: at}
		return db
	}
	createCopy := func(db *example.Database) error {
		_, err := s.Database.Create(testContext(s), db, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		return err
	}

	// No backup of it in the store: refused, whatever the time.
	for _, at := range []string{"", "2026-12-04T08:00:00Z"} {
		err := createCopy(restoring("never-backed-up", at))
		requireInvalidOn(t, err, example.Kind("Database"), "spec.restore.database")
		require.ErrorContains(t, err, `the store spec.backup names (bucket backups at https://s3.example.com) holds no backup of Database "never-backed-up"`)
	}
	// The store's oldest backup starts the window, for a source that exists or is gone.
	for _, from := range []string{"ledger", "gone"} {
		err := createCopy(restoring(from, "2026-12-03T07:59:59Z"))
		requireInvalidOn(t, err, example.Kind("Database"), "spec.restore.pointInTime")
		require.ErrorContains(t, err, `recoverability window of Database "`+from+`": from 2026-12-03T08:00:00Z`)
	}
	require.NoError(t, createCopy(restoring("ledger", "2026-12-03T08:00:00Z")))
	// An unreadable store, of a source that is gone: not checked.
	err = createCopy(restoring("unreadable", "2026-12-03T08:00:00Z"))
	require.NoError(t, err, "a source that is gone and a store that cannot be read: not checked")
	read = nil
	bad := restoring("ledger", "2026-12-03T08:00:00Z")
	bad.Spec.Backup.S3.Endpoint = "https://169.254.169.254"
	err = createCopy(bad)
	require.Error(t, err)
	require.Empty(t, read, "an invalid spec.backup is never read from")
	// Nor is a store named by a Database that admission refuses.
	_, err = s.Database.Create(testContext(s), restoring("ledger", "2026-12-03T08:00:00Z"),
		func(context.Context, runtime.Object) error { return errors.New("refused by admission") }, &metav1.CreateOptions{})
	require.ErrorContains(t, err, "refused by admission")
	require.Empty(t, read, "a refused Database's store is never read from")
	// A server-side apply that creates is checked as a create.
	applied := restoring("never-backed-up", "")
	_, _, err = s.Database.Update(testContext(s), applied.Name, rest.DefaultUpdatedObjectInfo(applied),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, true, &metav1.UpdateOptions{})
	requireInvalidOn(t, err, example.Kind("Database"), "spec.restore.database")
}
