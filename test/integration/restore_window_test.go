package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// A restore whose pointInTime lies outside its source's recoverability window (before
// status.backup.firstRecoverableTime, or later than now) is a 422 naming the field on every
// way a Database is created: a POST, and a server-side apply of one that does not exist.
func TestRestoreOutsideTheSourcesWindowIsRefusedByEveryCreate(t *testing.T) {
	ns := namespace(t)
	client, _ := clientFor(t)
	source := newDatabase(ns, "ledger", examplev1.EnginePostgreSQL, "16")
	source.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{
		Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
	got := create(t, client, source)
	first := time.Now().Add(-time.Hour).Truncate(time.Second)
	got.Status.Backup = &examplev1.DatabaseBackupStatus{FirstRecoverableTime: &metav1.Time{Time: first}}
	_, err := client.ExampleV1().Databases(ns).UpdateStatus(context.Background(), got, metav1.UpdateOptions{})
	require.NoError(t, err)

	before := `{"database":"ledger","pointInTime":"2000-01-01T00:00:00Z"}`
	future := `{"database":"ledger","pointInTime":"2999-01-01T00:00:00Z"}`
	for name, restore := range map[string]string{"posted-before": before, "posted-future": future} {
		resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, name, breakerBackup, restore), nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s: %s", name, resp.body)
		require.Contains(t, string(resp.body), "spec.restore.pointInTime", name)
		require.Contains(t, string(resp.body), "recoverability window of Database \\\"ledger\\\": from "+first.UTC().Format(time.RFC3339), name)
	}
	for name, restore := range map[string]string{"applied-before": before, "applied-future": future} {
		resp := do(t, http.MethodPatch, databasesPath(ns)+"/"+name+"?fieldManager=restorer",
			breakerDatabase(ns, name, breakerBackup, restore), map[string]string{"Content-Type": applyYAML})
		require.Equal(t, http.StatusUnprocessableEntity, resp.code, "%s: %s", name, resp.body)
		require.Contains(t, string(resp.body), "spec.restore.pointInTime", name)
	}
	// Inside the window, both create.
	inside := `{"database":"ledger","pointInTime":"` + first.Add(time.Minute).UTC().Format(time.RFC3339) + `"}`
	resp := do(t, http.MethodPost, databasesPath(ns), breakerDatabase(ns, "posted-inside", breakerBackup, inside), nil)
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
	resp = do(t, http.MethodPatch, databasesPath(ns)+"/applied-inside?fieldManager=restorer",
		breakerDatabase(ns, "applied-inside", breakerBackup, inside), map[string]string{"Content-Type": applyYAML})
	require.Equal(t, http.StatusCreated, resp.code, "%s", resp.body)
}
