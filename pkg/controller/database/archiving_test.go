package database

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
)

// What the primary says of its archiving lands in status.backup; a last attempt that
// failed, once a backup made the stanza, turns BackedUp False, over any backup's outcome;
// an archiver that recovered clears it.
func TestArchivingIsReportedAndItsFailureIsBackedUpFalse(t *testing.T) {
	at := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	succeeded := func() *backups {
		return &backups{
			status:    examplev1.DatabaseBackupStatus{LastSuccessfulTime: &metav1.Time{Time: at}, LastSuccessfulJob: "db-backup-1"},
			condition: metav1.ConditionTrue, reason: examplev1.ReasonBackupSucceeded, message: "backup Job db-backup-1 succeeded",
		}
	}

	// A failure last seen, which the primary's answer now clears.
	b := succeeded()
	b.status.ArchiveFailureTime = &metav1.Time{Time: at.Add(time.Minute)}
	b.judge()
	require.Equal(t, examplev1.ReasonArchiveFailing, b.reason)
	b.archived("db-0", engine.Archiving{Last: at.Add(90*time.Second + 500*time.Millisecond), Failed: at.Add(time.Minute), FailedWhat: "000000010000000000000003"})
	require.True(t, b.archiving)
	require.Equal(t, &metav1.Time{Time: at.Add(90 * time.Second)}, b.status.LastArchivedTime, "to the second")
	require.Nil(t, b.status.ArchiveFailureTime, "an attempt failed, a later one succeeded")
	require.Equal(t, examplev1.ReasonBackupSucceeded, b.reason)
	require.Equal(t, metav1.ConditionTrue, b.condition)

	b = succeeded()
	b.archived("db-0", engine.Archiving{Last: at, Failed: at.Add(time.Minute), FailedWhat: "000000010000000000000004"})
	require.Equal(t, &metav1.Time{Time: at.Add(time.Minute)}, b.status.ArchiveFailureTime)
	require.Equal(t, metav1.ConditionFalse, b.condition)
	require.Equal(t, examplev1.ReasonArchiveFailing, b.reason)
	require.Equal(t, "db-0, the primary, failed to archive 000000010000000000000004 at 2026-03-01T12:01:00Z (it last archived at 2026-03-01T12:00:00Z): "+
		"its changes pile up on its volume until the store takes them; its log says why", b.message)

	// Never archived yet, and failing.
	b = succeeded()
	b.archived("db-0", engine.Archiving{Failed: at, FailedWhat: "000000010000000000000001"})
	require.Nil(t, b.status.LastArchivedTime)
	require.Contains(t, b.message, "(it last archived at never)")

	// Before the first backup, archiving waits for its stanza: nothing is judged.
	b = &backups{condition: metav1.ConditionUnknown, reason: examplev1.ReasonBackupPending}
	b.archived("db-0", engine.Archiving{Failed: at, FailedWhat: "000000010000000000000001"})
	require.Nil(t, b.status.ArchiveFailureTime)
	require.Equal(t, examplev1.ReasonBackupPending, b.reason)
}
