package database

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// A healthy Database: its state, the primary taking writes, members, volumes, no problem.
func TestStatusOfAHealthyDatabase(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	api.on(http.MethodGet, dbPath, http.StatusOK, db)

	code, out, errOut := api.run("status", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `Database:  production/shop: postgresql 15.8, 2/2 ready, Ready
Primary:   shop-0, taking writes
Members:
  Name    Role     Ready  Streaming  Lag
  ----    ----     -----  ---------  ---
  shop-0  Primary  true   -          -
  shop-1  Replica  true   true       0 B, 1 s
Volumes:
  data-shop-0  Bound  10Gi
Problems:  <none>
`, out)
}

// A Database in trouble: its primary takes no writes, a failover is under way, a replica does
// not answer, and the conditions that are not as they should be are listed with their reasons
// and messages, Progressing (what is under way) not among them.
func TestStatusSaysWhatIsWrong(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	db.Generation = 3
	db.Status.Phase = examplev1.DatabasePhaseDegraded
	db.Status.ReadyReplicas = 1
	db.Status.PrimaryLastWritableTime = &metav1.Time{Time: testNow.Add(-20 * time.Second)}
	db.Status.LastFailoverTime = &metav1.Time{Time: testNow.Add(-2 * time.Hour)}
	db.Status.Failover = &examplev1.DatabaseFailoverStatus{From: "shop-0", To: "shop-1", Phase: examplev1.FailoverPhasePromoting}
	db.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedBy: "alice", RequestedAt: metav1.NewMicroTime(testNow.Add(-time.Minute))}
	db.Status.Members[0].Role, db.Status.Members[0].Ready = "", false
	db.Status.Conditions = []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Failover", Message: "promoting shop-1"},
		{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "Failover", Message: "promoting shop-1"},
		{Type: "Degraded", Status: metav1.ConditionTrue, Reason: "PrimaryNotWritable", Message: "shop-0, the primary, has taken no writes since 11:59:40"},
		{Type: "Replicating", Status: metav1.ConditionTrue, Reason: "Streaming", Message: "every replica streams"},
	}
	api.on(http.MethodGet, dbPath, http.StatusOK, db)

	code, out, errOut := api.run("status", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Database:       production/shop: postgresql 15.8, 1/2 ready, Degraded\n")
	assert.Contains(t, out, "Primary:        shop-0, taking no writes since 2026-03-04T11:59:40Z (20s ago)\n")
	assert.Contains(t, out, "Last Failover:  2026-03-04T10:00:00Z (120m ago)\n")
	assert.Contains(t, out, "  shop-0  <none>   false  -          -\n")
	assert.Contains(t, out, "Under Way:\n  failover from shop-0 to shop-1: Promoting\n  rolling restart requested by alice\n")
	assert.Contains(t, out, "Problems:\n"+
		"  Ready=False    Failover            promoting shop-1\n"+
		"  Degraded=True  PrimaryNotWritable  shop-0, the primary, has taken no writes since 11:59:40\n"+
		"  Generation     NotObserved         the controller has not yet acted on the latest spec\n")
	assert.NotContains(t, out, "Progressing")
	assert.NotContains(t, out, "Replicating=")
}

// A primary whose server has not answered as the primary yet (starting, or on a node that
// runs no server) is not said to take writes.
func TestStatusDoesNotSayAPrimaryThatNeverAnsweredTakesWrites(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	db.Status.Members[0].Role = ""
	api.on(http.MethodGet, dbPath, http.StatusOK, db)

	code, out, errOut := api.run("status", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Primary:   shop-0, not seen taking writes: its server has not answered as the primary yet\n")
	assert.NotContains(t, out, "taking writes\n")
}

// A user who may read the Database but not its claims sees the rest, and why the volumes
// are missing.
func TestStatusShowsVolumesItMayNotReadInPlace(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath, http.StatusOK, shopDatabase())
	api.on(http.MethodGet, "/api/v1/namespaces/production/persistentvolumeclaims", http.StatusForbidden, status(http.StatusForbidden, metav1.StatusReasonForbidden,
		`persistentvolumeclaims is forbidden: User "viewer" cannot list resource "persistentvolumeclaims" in API group "" in the namespace "production"`))

	code, out, errOut := api.run("status", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Volumes:  <error: persistentvolumeclaims is forbidden: User \"viewer\" cannot list")
	assert.Contains(t, out, "Problems:  <none>\n")
}

// A Database with spec.backup: where it is backed up and on what schedule, the last backup
// that succeeded and the last that failed, the one running, and a BackedUp condition that is
// not True among the problems.
func TestStatusShowsBackups(t *testing.T) {
	api := newFakeAPI(t)
	describeFixture(api)
	db := shopDatabase()
	db.Spec.Backup = &examplev1.DatabaseBackupPolicy{Schedule: "0 3 * * *",
		S3: examplev1.DatabaseBackupS3{Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
	db.Status.Backup = &examplev1.DatabaseBackupStatus{
		LastSuccessfulTime: &metav1.Time{Time: testNow.Add(-26 * time.Hour)}, LastSuccessfulJob: "shop-backup-a",
		LastFailureTime: &metav1.Time{Time: testNow.Add(-2 * time.Hour)}, LastFailedJob: "shop-backup-b",
		ActiveJob:            "shop-backup-c",
		FirstRecoverableTime: &metav1.Time{Time: testNow.Add(-7 * 24 * time.Hour)},
		LastArchivedTime:     &metav1.Time{Time: testNow.Add(-30 * time.Second)},
	}
	db.Status.Conditions = append(db.Status.Conditions, metav1.Condition{Type: "BackedUp", Status: metav1.ConditionFalse,
		Reason: "BackupFailed", Message: "backup Job shop-backup-b failed"})
	api.on(http.MethodGet, dbPath, http.StatusOK, db)
	backupsPath := "/apis/example.com/v1/namespaces/production/databasebackups"
	api.on(http.MethodGet, backupsPath, http.StatusOK, &examplev1.DatabaseBackupList{Items: []examplev1.DatabaseBackup{
		{Database: "shop", ID: "20260303-100000F", EndTime: metav1.NewTime(testNow.Add(-26 * time.Hour))},
		{Database: "shop", ID: "20260225-115959F", EndTime: metav1.NewTime(testNow.Add(-7*24*time.Hour - time.Second))},
	}})

	code, out, errOut := api.run("status", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "  In Store:      2 backups, ended from 2026-02-25T11:59:59Z to 2026-03-03T10:00:00Z\n")
	assert.Contains(t, api.request(http.MethodGet, backupsPath).Query, "fieldSelector=database%3Dshop")
	assert.Contains(t, out, "Backups:         to https://s3.example.com, bucket backups (0 3 * * *)\n")
	assert.Contains(t, out, "  Last Success:  2026-03-03T10:00:00Z (26h ago), Job shop-backup-a\n")
	assert.Contains(t, out, "  Recoverable:   from 2026-02-25T12:00:00Z to 2026-03-04T11:59:30Z (last archived)\n")
	assert.Contains(t, out, "  Last Failure:  2026-03-04T10:00:00Z (120m ago), Job shop-backup-b\n")
	assert.Contains(t, out, "  Running:       Job shop-backup-c\n")
	assert.Contains(t, out, "BackedUp=False  BackupFailed  backup Job shop-backup-b failed\n")
}

// The claim of a member a scale-down removed is listed as not in use; the claims of the
// members spec.replicas keeps are not.
func TestStatusMarksTheClaimsOfRemovedMembers(t *testing.T) {
	api := newFakeAPI(t)
	api.on(http.MethodGet, dbPath, http.StatusOK, shopDatabase()) // spec.replicas: 2
	claim := func(name string) corev1.PersistentVolumeClaim {
		return corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		}
	}
	api.on(http.MethodGet, "/api/v1/namespaces/production/persistentvolumeclaims", http.StatusOK, &corev1.PersistentVolumeClaimList{
		Items: []corev1.PersistentVolumeClaim{claim("data-shop-2"), claim("data-shop-0"), claim("data-shop-1"), claim("data-shop-10")},
	})

	code, out, errOut := api.run("status", "shop", "-n", "production")

	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `Volumes:
  data-shop-0   Bound  10Gi
  data-shop-1   Bound  10Gi
  data-shop-10  Bound  10Gi  not in use (kept from a scale-down)
  data-shop-2   Bound  10Gi  not in use (kept from a scale-down)
`)
}

// A store the API server cannot read, or one that holds nothing of the Database, is said
// in place of the count.
func TestStatusSaysWhatTheStoreHolds(t *testing.T) {
	for name, tc := range map[string]struct {
		code int
		body any
		want string
	}{
		"nothing": {http.StatusOK, &examplev1.DatabaseBackupList{}, "  In Store:      <none>\n"},
		"unreadable": {http.StatusServiceUnavailable, status(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the store cannot be read"),
			"  In Store:      <error: the store cannot be read>\n"},
	} {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			describeFixture(api)
			db := shopDatabase()
			db.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: "store"}}
			api.on(http.MethodGet, dbPath, http.StatusOK, db)
			api.on(http.MethodGet, "/apis/example.com/v1/namespaces/production/databasebackups", tc.code, tc.body)
			code, out, errOut := api.run("status", "shop", "-n", "production")
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, tc.want)
		})
	}
}
