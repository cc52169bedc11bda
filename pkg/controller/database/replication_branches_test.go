package database_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine/mongodb/mongoclient"
)

// The servers are asked as the Secret's superuser: while the Secret cache has not delivered
// it, no server is asked and nothing is written to one; the confirmed primary keeps its
// role, and Replicating is Unknown.
func TestServersAreNotAskedBeforeTheSecretIsInTheCache(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.pin(secrets, name+"-credentials", nil)
	fi.set(0, standbyState(1, 1)) // would be a primary that does not answer as one
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fi.observed, "nothing asked")
	require.Empty(t, fi.recorded())
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	c := condition(db, "Replicating")
	require.Equal(t, metav1.ConditionUnknown, c.Status)
	require.Equal(t, examplev1.ReasonNotObserved, c.Reason)
}

// Only the Pods of the Database's StatefulSet are members: a Pod of the same name and labels
// that another controller made is neither asked, written to, nor labelled.
func TestAPodNotOfTheStatefulSetIsNoMember(t *testing.T) {
	for _, tc := range []struct {
		name  string
		owner []metav1.OwnerReference
	}{
		{"no controller", nil},
		{"another StatefulSet", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "other", UID: "other-uid", Controller: ptr.To(true)}}},
		{"a ReplicaSet of the same name", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: "rs-uid", Controller: ptr.To(true)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			pod := f.pod(2).DeepCopy()
			pod.OwnerReferences = tc.owner
			require.NoError(t, f.kube.Tracker().Update(pods, pod, namespace))
			fi.reset()

			_, err := f.reconcile()
			require.NoError(t, err)
			require.Zero(t, fi.observed[podIP(2)], "not asked")
			require.Equal(t, "", f.pod(2).Labels[specs.RoleLabel], "not labelled")
			require.Equal(t, []string{"primary", "replica"}, f.roles(2))
			db := f.database()
			require.Equal(t, examplev1.DatabaseMember{Name: "my-database-2"}, db.Status.Members[2])
			require.Equal(t, "not streaming from my-database-0: my-database-2 (no Pod)", condition(db, "Replicating").Message)
		})
	}
}

// A MySQL primary that answers read-only with no source is made to take writes again only
// while it is the primary the ConfigMap names and no other server takes writes: one
// answering writable besides, or a switchover under way, leaves it as it is.
func TestAMySQLPrimaryRestartedReadOnlyIsNotMadeWritableBesideAnother(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*testing.T, *fixture, *fakeMySQL)
	}{
		{"another server takes writes", func(t *testing.T, _ *fixture, fm *fakeMySQL) {
			fm.set(2, mysqlPrimary(t, uuid0+":1-10"))
		}},
		{"a switchover names another Pod", func(t *testing.T, f *fixture, _ *fakeMySQL) {
			f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
			f.designate("my-database-1")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fm := replicatingMySQL(t)
			_, err := f.reconcile()
			require.NoError(t, err)
			fm.set(0, mysqlReplica(t, uuid0+":1-10", -1))
			tc.setup(t, f, fm)
			fm.reset()

			_, err = f.reconcile()
			require.NoError(t, err)
			require.Empty(t, filter(fm.recorded(), "promote 10.0.0.1"), "my-database-0 is not made to take writes")
			require.NotContains(t, f.events(), "Normal Updated my-database-0, the primary, answered read-only with no primary to follow: it takes writes again")
			require.NotEqual(t, specs.RolePrimary, f.pod(0).Labels[specs.RoleLabel], "read-only: not served as the primary")
		})
	}
}

// A ConfigMap edited by hand that cannot be set back (the API server refuses the write)
// ends the pass with the error before anything else: nothing is stopped or promoted, no
// Event claims it was set back, and the next pass sets it back.
func TestAConfigMapEditedByHandThatCannotBeSetBackIsThePassError(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	obj, err := f.kube.Tracker().Get(configMaps, namespace, name+"-replication")
	require.NoError(t, err)
	cm := obj.(*corev1.ConfigMap).DeepCopy()
	cm.Data["primary"] = "my-database-1"
	require.NoError(t, f.kube.Tracker().Update(configMaps, cm, namespace))
	f.inject("patch", "configmaps", 1, apierrors.NewInternalError(errors.New("etcd timeout")))
	fi.reset()

	_, err = f.reconcile()
	const want = `name my-database-0 the primary in ConfigMap "my-database-replication": Internal error occurred: etcd timeout`
	require.EqualError(t, err, want)
	events := f.events()
	require.Equal(t, []string{"Warning ReconcileError " + want}, events)
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.Empty(t, fi.observed, "the servers are not asked")
	require.Empty(t, f.podDeletions())

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-0", f.configMapPrimary())
	require.Contains(t, f.events(), `Warning InvalidChild ConfigMap my-database-replication named "my-database-1" the primary, which the controller did not ask for; set it back to my-database-0 (change spec.primary to move the primary)`)
}

// A replication password the Secret cache does not have yet (the pass generated it) is the
// pass's error; the next pass, with the cache up to date, gives it to the role and the
// standbys.
func TestAReplicationPasswordNotInTheCacheYetIsAskedAgain(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	secret := f.secret().DeepCopy()
	delete(secret.Data, "replication-password")
	require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
	fi.reset()

	_, err = f.reconcile()
	const want = `secret "my-database-credentials" has no "replication-password" yet`
	require.EqualError(t, err, want)
	require.Empty(t, fi.recorded())
	password := string(f.secret().Data["replication-password"])
	require.NotEmpty(t, password, "generated")

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "create-role 10.0.0.1 replicator "+password, fi.recorded()[0])
	require.Len(t, filter(fi.recorded(), "write-passfile"), 2)
}

// A restart for a new revision that the API server refuses ends the pass with the error; the
// next pass restarts the same Pod.
func TestARefusedRestartForANewRevisionIsAskedAgain(t *testing.T) {
	f, _ := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setStatefulSetStatus(3, "rev-1", "rev-2")
	f.inject("delete", "pods", 1, apierrors.NewInternalError(errors.New("etcd timeout")))

	_, err = f.reconcile()
	const want = `delete Pod "my-database-2" to restart it for revision rev-2: Internal error occurred: etcd timeout`
	require.EqualError(t, err, want)
	require.Contains(t, f.events(), "Warning ReconcileError "+want)
	require.Nil(t, f.pod(2).DeletionTimestamp)

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"my-database-2 uid=my-database-2-uid"}, f.podDeletions())
}

// The first Pod of a Database whose Pods ran standalone servers is restarted first, once the
// StatefulSet controller has observed the new revision: not while it has not, not while the
// Pod is already being deleted or missing; one already at the update revision leaves the
// others to rollPods, replicas first.
func TestMongoDBFirstPodRestartWaitsForItsTurn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(*fixture)
		deleted []string
	}{
		{"the StatefulSet controller has not observed the revision", func(f *fixture) {
			sts := f.statefulSet().DeepCopy()
			sts.Status.ObservedGeneration = sts.Generation - 1
			require.NoError(t, f.kube.Tracker().Update(statefulSets, sts, namespace))
		}, nil},
		{"the first Pod is being deleted", func(f *fixture) {
			pod := f.pod(0).DeepCopy()
			pod.DeletionTimestamp = &metav1.Time{Time: start}
			require.NoError(t, f.kube.Tracker().Update(pods, pod, namespace))
		}, nil},
		{"the first Pod is missing", func(f *fixture) {
			require.NoError(t, f.kube.Tracker().Delete(pods, namespace, podName(0)))
		}, nil},
		{"the first Pod is at the update revision", func(f *fixture) {
			pod := f.pod(0).DeepCopy()
			pod.Labels[appsv1.ControllerRevisionHashLabelKey] = "rev-2"
			require.NoError(t, f.kube.Tracker().Update(pods, pod, namespace))
		}, []string{"my-database-2 uid=my-database-2-uid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fm := replicaSet(t, 3)
			for i := range 3 {
				fm.set(i, mongoclient.State{Standalone: true, Writable: true})
			}
			f.setStatefulSetStatus(3, "rev-1", "rev-2")
			tc.setup(f)
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, tc.deleted, f.podDeletions())
			require.Empty(t, fm.recorded(), "a standalone server is never initiated")
		})
	}

	t.Run("the restart refused", func(t *testing.T) {
		f, fm := replicaSet(t, 3)
		for i := range 3 {
			fm.set(i, mongoclient.State{Standalone: true, Writable: true})
		}
		f.setStatefulSetStatus(3, "rev-1", "rev-2")
		f.inject("delete", "pods", 1, apierrors.NewInternalError(errors.New("etcd timeout")))
		_, err := f.reconcile()
		const want = `delete Pod "my-database-0" to restart it as the replica set's first member: Internal error occurred: etcd timeout`
		require.EqualError(t, err, want)
		require.Contains(t, f.events(), "Warning ReconcileError "+want)
		require.Nil(t, f.pod(0).DeletionTimestamp)

		_, err = f.reconcile()
		require.NoError(t, err)
		require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions(), "the first Pod again, not another")
	})
}

// A replication ConfigMap's name taken by a ConfigMap the Database does not control halts the
// pass before any server is asked: nothing is stopped, promoted or labelled on its word.
func TestAReplicationConfigMapNameTakenHaltsBeforeTheServersAreAsked(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.NoError(t, f.kube.Tracker().Delete(configMaps, namespace, name+"-replication"))
	require.NoError(t, f.kube.Tracker().Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-replication", UID: "theirs"},
		Data:       map[string]string{"primary": "my-database-1"},
	}))
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fi.observed, "no server asked")
	require.Empty(t, fi.recorded())
	require.Empty(t, f.podDeletions())
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
	require.Equal(t, "ChildConflict", condition(db, "Ready").Reason)
	require.Equal(t, "my-database-0", db.Status.Primary)
}

// The replication ConfigMap of a replica set follows the elected primary; a write of it that
// fails is the pass's error, and the next pass writes it.
func TestMongoDBFailedWriteOfTheElectedPrimaryIsAskedAgain(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, false, 0, 1, 2)
	full.Members[1].Priority = 2
	fm.set(0, rsSecondary(0, 2, full))
	fm.set(1, rsPrimary(1, 2, full, 0))
	fm.set(2, rsSecondary(2, 2, full))
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.Primary = "my-database-1"
		// The members as the controller recorded them: only the primary's name is written.
		db.Status.ReplicaSetMembers = []string{"my-database-0", "my-database-1", "my-database-2"}
	})
	f.inject("patch", "configmaps", 1, apierrors.NewInternalError(errors.New("etcd timeout")))

	_, err := f.reconcile()
	const want = `name my-database-1 the primary in ConfigMap "my-database-replication": Internal error occurred: etcd timeout`
	require.EqualError(t, err, want)
	require.Contains(t, f.events(), "Warning ReconcileError "+want)
	require.Equal(t, "my-database-0", f.configMapPrimary())
	require.Empty(t, fm.recorded(), "the configuration is as it should be")

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.Equal(t, "my-database-1", f.database().Status.Primary)
}

// A primary whose configuration was not read (none in its answer) is not reconfigured, nor
// its members recorded.
func TestMongoDBPrimaryWithoutAConfigurationIsNotReconfigured(t *testing.T) {
	f, fm := replicaSet(t, 3)
	st := rsPrimary(0, 1, rsConfig(1, true, 0), 0)
	st.Config = nil
	fm.set(0, st)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
	require.Empty(t, f.replicaSetMembers())
	require.Equal(t, "my-database-0", f.database().Status.Primary)
}
