package fuzzer_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"example.com/database-apiserver/pkg/apis/example"
	examplefuzzer "example.com/database-apiserver/pkg/apis/example/fuzzer"
	"example.com/database-apiserver/pkg/apis/example/install"
	"example.com/database-apiserver/pkg/apis/example/validation"
)

// TestFuzzedDatabasesAreValidShaped pins that the fuzzer makes what users and
// the controller write: specs valid but for the fields defaulting fills in,
// versions of one to three numbers, backup policies valid, statuses valid.
func TestFuzzedDatabasesAreValidShaped(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	f := fuzzer.FuzzerFor(examplefuzzer.Funcs, rand.NewSource(1), runtimeserializer.NewCodecFactory(scheme))
	// spec.backup is fuzzed on any engine; which engines take backups is the engine packages'
	// say, and none is linked here.
	for _, e := range example.SupportedEngines {
		validation.RegisterEngineRules(e, validation.EngineRules{Backups: true})
		t.Cleanup(func() { validation.UnregisterEngineRules(e) })
	}

	var sawReplicasUnset, sawStorageUnset, sawConditions, sawMembers, sawPrimary, sawBackup, sawBackupStatus bool
	for i := 0; i < 500; i++ {
		var db example.Database
		f.Fill(&db)

		require.Regexp(t, `^[0-9]+(\.[0-9]+){0,2}$`, db.Spec.Version)

		for _, e := range validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec")) {
			require.Equal(t, field.ErrorTypeRequired, e.Type, "%v in %+v", e, db.Spec)
			require.Contains(t, []string{"spec.replicas", "spec.storage"}, e.Field)
		}
		require.Empty(t, validation.ValidateDatabaseStatus(&db.Status, field.NewPath("status")), "%+v", db.Status)

		sawReplicasUnset = sawReplicasUnset || db.Spec.Replicas == nil
		sawStorageUnset = sawStorageUnset || db.Spec.Storage == ""
		sawConditions = sawConditions || len(db.Status.Conditions) > 0
		sawMembers = sawMembers || len(db.Status.Members) > 0
		sawPrimary = sawPrimary || (db.Spec.Primary != "" && db.Status.Primary != "")
		sawBackup = sawBackup || (db.Spec.Backup != nil && db.Spec.Backup.Schedule != "" && db.Spec.Backup.S3.Prefix != "")
		sawBackupStatus = sawBackupStatus || (db.Status.Backup != nil && db.Status.Backup.LastSuccessfulTime != nil)
	}
	require.True(t, sawReplicasUnset, "replicas is sometimes unset, as before defaulting")
	require.True(t, sawStorageUnset, "storage is sometimes unset, as before defaulting")
	require.True(t, sawConditions, "conditions are sometimes set")
	require.True(t, sawMembers, "members are sometimes set")
	require.True(t, sawPrimary, "spec.primary and status.primary are sometimes set")
	require.True(t, sawBackup, "spec.backup is sometimes set, with a schedule and a prefix")
	require.True(t, sawBackupStatus, "status.backup is sometimes set, with a backup that succeeded")
}
