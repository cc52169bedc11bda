package database_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/postgres"
	"example.com/database-apiserver/pkg/controller/specs"
)

// A switchover that waits for its target to stream has not stopped anything yet: the
// primary keeps its label (clients keep writing) and its slots are kept in sync.
func TestAWaitingSwitchoverKeepsThePrimaryServing(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	st := primaryState("my-database-2")
	st.Standbys["my-database-1"] = postgres.Standby{State: "catchup", LagBytes: 1 << 20}
	fi.set(0, st)
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "switching over from my-database-0 to my-database-1: waiting for my-database-1 to stream from my-database-0",
		condition(f.database(), "Progressing").Message)
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3), "the client Service still routes to my-database-0")
	require.Equal(t, []string{"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots}, fi.recorded())
}

// A scale-up that also moves the primary to a new Pod: the new Pods clone through slots the
// primary must create first, or the target never streams and the switchover never starts.
func TestScaleUpOntoANewPrimaryCreatesTheSlotsItsClonesNeed(t *testing.T) {
	f, fi := replicating(t, 1, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.Replicas = ptr.To[int32](3)
		db.Spec.Primary = "my-database-2"
	})
	fi.set(0, primaryState())
	f.createClaims(3)
	f.addPods(2) // my-database-1 is cloning: its setup container retries pg_basebackup
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "primary", f.pod(0).Labels[specs.RoleLabel])
	require.Equal(t, []string{"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots}, fi.recorded())
}

// Scaling to one replica removes read-host and read-uri from the Secret: the Event says so.
func TestSecretUpdateEventNamesTheKeysSetAndRemoved(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Contains(t, f.events(), "Normal Updated Updated Secret my-database-credentials: removed read-host, read-uri")

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](3) })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Contains(t, f.events(), "Normal Updated Updated Secret my-database-credentials: set read-host, read-uri")
}
