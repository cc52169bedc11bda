package database_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/engine/mysql/myclient"
)

// requireFailedPass checks what a pass that failed reports: the error it returns (for the
// workqueue's backoff) is want, and so are a Warning ReconcileError Event and the message of
// the Progressing condition, False with reason ReconcileError; the replication part of
// status (primary, members, Replicating) is still the one the last pass that completed wrote.
// It returns the pass's Events.
func requireFailedPass(t *testing.T, f *fixture, before *examplev1.Database, err error, want string) []string {
	t.Helper()
	require.EqualError(t, err, want)
	events := f.events()
	require.Contains(t, events, "Warning ReconcileError "+want)
	db := f.database()
	c := condition(db, "Progressing")
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, examplev1.ReasonReconcileError, c.Reason)
	require.Equal(t, want, c.Message)
	require.Equal(t, before.Status.Primary, db.Status.Primary)
	require.Equal(t, before.Status.Members, db.Status.Members)
	was, is := condition(before, "Replicating"), condition(db, "Replicating")
	require.Equal(t, []string{string(was.Status), was.Reason, was.Message}, []string{string(is.Status), is.Reason, is.Message})
	return events
}

// recordReplicationPassword plays an earlier pass that gave the replication role the
// Secret's replication password: the credentials record in the controller's namespace says so.
func (f *fixture) recordReplicationPassword() {
	f.t.Helper()
	secret := f.secret()
	sum := sha256.Sum256(secret.Data["replication-password"])
	f.recordCredential(database.CredentialsKeyReplication, hex.EncodeToString(sum[:]))
}

// secretUID gives the credentials Secret a UID, as the API server does, unless it has one,
// and returns it.
func (f *fixture) secretUID() types.UID {
	f.t.Helper()
	secret := f.secret().DeepCopy()
	if secret.UID == "" {
		secret.UID = "5ec7e7a1-0000-4000-8000-000000000001"
		require.NoError(f.t, f.kube.Tracker().Update(secrets, secret, namespace))
	}
	return secret.UID
}

// credentialsRecord is the data of the Database's credentials record in the controller's
// namespace, nil when there is none.
func (f *fixture) credentialsRecord() map[string]string {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(configMaps, database.DefaultControllerNamespace, database.CredentialsRecordName(namespace, name))
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return obj.(*corev1.ConfigMap).Data
}

// recordCredential sets key to value in the Database's credentials record, of the Secret as it
// is, as an earlier pass would have; the Reconciler is made again, as after a restart, since a
// running one remembers the record as it last wrote it.
func (f *fixture) recordCredential(key, value string) {
	f.t.Helper()
	uid := f.secretUID()
	data := map[string]string{}
	if have := f.credentialsRecord(); have[database.CredentialsKeySecretUID] == string(uid) {
		data = have
	}
	data[database.CredentialsKeySecretUID], data[key] = string(uid), value
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: database.DefaultControllerNamespace,
		Name: database.CredentialsRecordName(namespace, name), Labels: map[string]string{"app.kubernetes.io/managed-by": "database-controller"}},
		Data: data}
	if f.credentialsRecord() == nil {
		require.NoError(f.t, f.kube.Tracker().Create(configMaps, cm, database.DefaultControllerNamespace))
	} else {
		require.NoError(f.t, f.kube.Tracker().Update(configMaps, cm, database.DefaultControllerNamespace))
	}
	f.newReconciler()
}

// setSecretKey changes key of the credentials Secret as a user would.
func (f *fixture) setSecretKey(key, value string) {
	f.t.Helper()
	secret := f.secret().DeepCopy()
	secret.Data[key] = []byte(value)
	require.NoError(f.t, f.kube.Tracker().Update(secrets, secret, namespace))
}

// A write to the PostgreSQL primary or a standby that fails ends the pass with the error and
// leaves what it was to record unrecorded (the Secret's annotations), so the next pass asks
// again, and goes on.
func TestAFailedPostgreSQLWriteIsAskedAgainByTheNextPass(t *testing.T) {
	reset := errors.New("connection reset by peer")
	for _, tc := range []struct {
		name string
		// break_ makes the pass need the write, and makes it fail.
		break_ func(*fixture, *fakeInstances)
		// want is the error the pass returns.
		want string
		// retried are the calls of the next pass that redo the write.
		retried []string
	}{
		{
			"replication role",
			func(_ *fixture, fi *fakeInstances) {
				st := primaryState("my-database-1", "my-database-2")
				st.Roles = nil
				fi.set(0, st)
				fi.failOn("create-role", "10.0.0.1", reset)
			},
			"connection reset by peer",
			[]string{"create-role 10.0.0.1 replicator R", "sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots},
		},
		{
			"the replication role's new password given to a standby (password file)",
			func(f *fixture, fi *fakeInstances) {
				f.setSecretKey("replication-password", "R2")
				fi.failOn("write-passfile", "10.0.0.2", reset)
			},
			"give standby my-database-1 the new replication password: connection reset by peer",
			[]string{
				"create-role 10.0.0.1 replicator R2",
				"write-passfile 10.0.0.2 /var/lib/postgresql/data/replication.pgpass replicator R2",
				"write-passfile 10.0.0.3 /var/lib/postgresql/data/replication.pgpass replicator R2",
				"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots,
			},
		},
		{
			"the record of the replication password",
			func(f *fixture, _ *fakeInstances) {
				f.setSecretKey("replication-password", "R2")
				f.inject("update", "configmaps", 1, apierrors.NewInternalError(errors.New("etcd timeout")))
			},
			`record what the primary was given in ConfigMap database-system/credentials.production.my-database: Internal error occurred: etcd timeout`,
			[]string{
				"create-role 10.0.0.1 replicator R2",
				"write-passfile 10.0.0.2 /var/lib/postgresql/data/replication.pgpass replicator R2",
				"write-passfile 10.0.0.3 /var/lib/postgresql/data/replication.pgpass replicator R2",
				"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots,
			},
		},
		{
			"slots",
			func(_ *fixture, fi *fakeInstances) { fi.failOn("sync-slots", "10.0.0.1", reset) },
			"connection reset by peer",
			[]string{"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots},
		},
		{
			"the record of the application role's password",
			func(f *fixture, _ *fakeInstances) {
				f.setSecretKey("password", "A")
				f.inject("update", "configmaps", 1, apierrors.NewInternalError(errors.New("etcd timeout")))
			},
			`record what the primary was given in ConfigMap database-system/credentials.production.my-database: Internal error occurred: etcd timeout`,
			[]string{"application-role 10.0.0.1 app A takeOver=false", "sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots},
		},
		{
			"application role",
			func(f *fixture, fi *fakeInstances) {
				f.setSecretKey("password", "A")
				fi.failOn("application-role", "10.0.0.1", reset)
			},
			"connection reset by peer",
			[]string{"application-role 10.0.0.1 app A takeOver=false", "sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			before := f.database()
			require.Equal(t, examplev1.DatabasePhaseReady, before.Status.Phase)
			f.setSecretKey("replication-password", "R")
			f.recordReplicationPassword()
			tc.break_(f, fi)
			fi.reset()

			_, err = f.reconcile()
			requireFailedPass(t, f, before, err, tc.want)
			require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3), "no Pod changes role")

			fi.mu.Lock()
			fi.failures = map[string]error{}
			fi.applicationRoles = nil
			fi.mu.Unlock()
			fi.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			calls := fi.recorded()
			fi.mu.Lock()
			calls = append(calls, prefixed("application-role ", fi.applicationRoles)...)
			fi.mu.Unlock()
			for _, call := range tc.retried {
				require.Contains(t, calls, call)
			}
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
			require.Equal(t, examplev1.ReasonComplete, condition(f.database(), "Progressing").Reason)
		})
	}
}

// prefixed is each of calls after prefix.
func prefixed(prefix string, calls []string) []string {
	var out []string
	for _, c := range calls {
		out = append(out, prefix+c)
	}
	return out
}

// A write of a switchover that fails (naming the target in the ConfigMap, turning clients
// away from the old primary, deleting its Pod, promoting the target) ends the pass with the
// error, leaves the switchover as far as it got, never further, and the next pass goes on
// from there: it neither takes its own ConfigMap for one edited by hand nor undoes the
// switchover.
func TestAFailedSwitchoverWriteIsDoneByTheNextPass(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd timeout")
	for _, tc := range []struct {
		name string
		// at brings the switchover to the pass that writes, and makes the write fail.
		at   func(*testing.T, *fixture, *fakeInstances)
		want string
		// then checks the state the failed pass left.
		then func(*testing.T, *fixture, *fakeInstances)
		// next checks what the next pass did.
		next func(*testing.T, *fixture, *fakeInstances)
	}{
		{
			name: "naming the target in the ConfigMap",
			at: func(t *testing.T, f *fixture, fi *fakeInstances) {
				startSwitchoverTo1(t, f, fi)
				f.inject("patch", "configmaps", 1, unavailable)
			},
			want: `name my-database-1 the primary in ConfigMap "my-database-replication": etcd timeout`,
			then: func(t *testing.T, f *fixture, _ *fakeInstances) {
				require.Equal(t, "my-database-0", f.configMapPrimary())
				require.Equal(t, "primary", f.pod(0).Labels["database.example.com/role"], "still serving")
				require.Empty(t, f.podDeletions())
			},
			next: func(t *testing.T, f *fixture, _ *fakeInstances) {
				require.Equal(t, "my-database-1", f.configMapPrimary())
				require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
			},
		},
		{
			name: "turning clients away from the old primary",
			at: func(t *testing.T, f *fixture, fi *fakeInstances) {
				startSwitchoverTo1(t, f, fi)
				f.inject("patch", "pods", 1, unavailable)
			},
			want: `label Pod "my-database-0" database.example.com/role="": etcd timeout`,
			then: func(t *testing.T, f *fixture, _ *fakeInstances) {
				require.Equal(t, "my-database-1", f.configMapPrimary())
				require.Equal(t, "primary", f.pod(0).Labels["database.example.com/role"])
				require.Empty(t, f.podDeletions(), "not stopped while clients are sent to it")
			},
			next: func(t *testing.T, f *fixture, _ *fakeInstances) {
				require.Equal(t, "", f.pod(0).Labels["database.example.com/role"])
				require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
			},
		},
		{
			name: "deleting the old primary's Pod",
			at: func(t *testing.T, f *fixture, fi *fakeInstances) {
				startSwitchoverTo1(t, f, fi)
				f.inject("delete", "pods", 1, unavailable)
			},
			want: `delete Pod "my-database-0" to stop the old primary: etcd timeout`,
			then: func(t *testing.T, f *fixture, _ *fakeInstances) {
				require.Equal(t, "my-database-1", f.configMapPrimary())
				require.Equal(t, "", f.pod(0).Labels["database.example.com/role"], "clients turned away")
				require.Nil(t, f.pod(0).DeletionTimestamp)
			},
			next: func(t *testing.T, f *fixture, _ *fakeInstances) {
				require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
			},
		},
		{
			name: "deleting again an old primary that came back as one",
			at: func(t *testing.T, f *fixture, fi *fakeInstances) {
				toStep3(t, f, fi, 100)
				fi.set(0, primaryState("my-database-2"))
				f.inject("delete", "pods", 1, unavailable)
			},
			want: `delete Pod "my-database-0" to stop the old primary: etcd timeout`,
			then: func(t *testing.T, f *fixture, fi *fakeInstances) {
				require.Empty(t, fi.recorded(), "nothing promoted")
				require.Nil(t, f.pod(0).DeletionTimestamp)
			},
			next: func(t *testing.T, f *fixture, fi *fakeInstances) {
				require.Empty(t, fi.recorded(), "nothing promoted")
				require.Equal(t, []string{"my-database-0 uid=my-database-0-uid-2"}, f.podDeletions())
			},
		},
		{
			name: "promoting the target",
			at: func(t *testing.T, f *fixture, fi *fakeInstances) {
				toStep3(t, f, fi, 90)
				_, err := f.reconcile()
				require.NoError(t, err)
				fi.set(1, standbyState(100, 100))
				fi.failOn("promote", "10.0.0.2", errors.New("promote 10.0.0.2: connection reset by peer"))
			},
			want: "promote 10.0.0.2: connection reset by peer",
			then: func(t *testing.T, f *fixture, fi *fakeInstances) {
				require.Equal(t, []string{"promote 10.0.0.2"}, fi.recorded())
				require.NotContains(t, f.roles(3), "primary")
				fi.failOn("promote", "10.0.0.2", nil)
			},
			next: func(t *testing.T, f *fixture, fi *fakeInstances) {
				require.Equal(t, "promote 10.0.0.2", fi.recorded()[0], "asked again")
				require.Equal(t, "my-database-1", f.database().Status.Primary)
				require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
			},
		},
		{
			name: "promoting the target, whose answer is lost",
			at: func(t *testing.T, f *fixture, fi *fakeInstances) {
				toStep3(t, f, fi, 90)
				_, err := f.reconcile()
				require.NoError(t, err)
				fi.set(1, standbyState(100, 100))
				fi.failOn("promote", "10.0.0.2", errors.New("promote 10.0.0.2: connection reset by peer"))
			},
			want: "promote 10.0.0.2: connection reset by peer",
			then: func(_ *testing.T, _ *fixture, fi *fakeInstances) {
				// It was promoted all the same.
				fi.set(1, primaryState("my-database-0", "my-database-2"))
				fi.set(0, standbyState(100, 100))
			},
			next: func(t *testing.T, f *fixture, fi *fakeInstances) {
				require.Empty(t, filter(fi.recorded(), "promote"), "not asked again")
				require.Equal(t, "my-database-1", f.database().Status.Primary)
				require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			tc.at(t, f, fi)
			before := f.database()
			fi.reset()

			_, err = f.reconcile()
			requireFailedPass(t, f, before, err, tc.want)
			tc.then(t, f, fi)

			fi.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			require.NotContains(t, strings.Join(f.events(), "\n"), "did not ask for", "its own ConfigMap is not set back")
			tc.next(t, f, fi)
		})
	}
}

// A MySQL write that fails ends the pass with the error, claims nothing it did not do (no
// Event says a replica was pointed at the primary, or given a password, when it was not),
// and the next pass asks again.
func TestAFailedMySQLWriteIsAskedAgainByTheNextPass(t *testing.T) {
	reset := errors.New("connection reset by peer")
	for _, tc := range []struct {
		name   string
		break_ func(*testing.T, *fixture, *fakeMySQL)
		want   string
		// events are the Normal Events of the failed pass: the writes it did.
		events []string
		// retried are calls of the next pass, by prefix.
		retried []string
	}{
		{
			"replication user",
			func(t *testing.T, _ *fixture, fm *fakeMySQL) {
				fm.set(0, mysqlPrimaryWithoutUser(t))
				fm.failOn("set-user", "10.0.0.1", reset)
			},
			"connection reset by peer",
			nil,
			[]string{"set-user 10.0.0.1 " + replicationAccount},
		},
		{
			"root's accounts on the primary (set superuser hosts)",
			func(t *testing.T, _ *fixture, fm *fakeMySQL) {
				st := mysqlPrimary(t, uuid0+":1-10")
				st.SuperuserHosts = []string{"10.245.0.1"}
				fm.set(0, st)
				fm.failOn("set-superuser-hosts", "10.0.0.1", reset)
			},
			`give root the accounts of ["%"] on my-database-0: connection reset by peer`,
			nil,
			[]string{"set-superuser-hosts 10.0.0.1 %"},
		},
		{
			"pointing a replica at the primary (set source)",
			func(t *testing.T, _ *fixture, fm *fakeMySQL) {
				fm.set(1, mysqlReplica(t, uuid0+":1-10", -1))
				fm.failOn("set-source", "10.0.0.2", reset)
			},
			"point replica my-database-1 at my-database-0: connection reset by peer",
			nil,
			[]string{"set-source 10.0.0.2 " + podHost(0) + " 3306 replicator"},
		},
		{
			"the replication user's new password given to a replica (set source)",
			func(t *testing.T, f *fixture, fm *fakeMySQL) {
				f.setSecretKey("replication-password", "R2")
				fm.failOn("set-source", "10.0.0.3", reset)
			},
			"give standby my-database-2 the new replication password: connection reset by peer",
			[]string{"Normal Updated Gave standby my-database-1 the new replication password"},
			[]string{"set-user 10.0.0.1 " + replicationAccount + " R2", "set-source 10.0.0.2 " + podHost(0) + " 3306 replicator R2", "set-source 10.0.0.3 " + podHost(0) + " 3306 replicator R2"},
		},
		{
			"making a primary restarted read-only take writes again (promote)",
			func(t *testing.T, _ *fixture, fm *fakeMySQL) {
				fm.set(0, mysqlReplica(t, uuid0+":1-10", -1))
				fm.failOn("promote", "10.0.0.1", errors.New("promote 10.0.0.1: SET GLOBAL super_read_only = OFF: connection reset by peer"))
			},
			"promote 10.0.0.1: SET GLOBAL super_read_only = OFF: connection reset by peer",
			nil,
			[]string{"promote 10.0.0.1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fm := replicatingMySQL(t)
			_, err := f.reconcile()
			require.NoError(t, err)
			before := f.database()
			tc.break_(t, f, fm)
			fm.reset()

			_, err = f.reconcile()
			events := requireFailedPass(t, f, before, err, tc.want)
			require.Equal(t, tc.events, filter(events, "Normal"), "no Event claims a write that failed")

			fm.mu.Lock()
			fm.failures = map[string]error{}
			fm.mu.Unlock()
			fm.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			calls := fm.recorded()
			for _, call := range tc.retried {
				require.NotEmpty(t, filter(calls, call), "%s asked again, in %q", call, calls)
			}
		})
	}
}

// mysqlPrimaryWithoutUser is a primary whose data has no replication user yet.
func mysqlPrimaryWithoutUser(t *testing.T) myclient.State {
	st := mysqlPrimary(t, uuid0+":1-10")
	st.Users = nil
	return st
}

// A promotion of a MySQL switchover's target that fails ends the pass with the error; the
// next pass promotes it, then points the others at it.
func TestAFailedMySQLPromotionIsAskedAgainByTheNextPass(t *testing.T) {
	f, fm := replicatingMySQL(t)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	for range 2 { // status says a switchover is under way, then step 1
		_, err = f.reconcile()
		require.NoError(t, err)
	}
	require.Equal(t, "my-database-1", f.configMapPrimary())
	f.restartPod(0, "my-database-0-uid-2")
	fm.set(0, mysqlReplica(t, uuid0+":1-12", 1))
	fm.set(1, mysqlReplica(t, uuid0+":1-11", 0))
	_, err = f.reconcile()
	require.NoError(t, err)
	before := f.database()
	fm.set(1, mysqlReplica(t, uuid0+":1-12", 0))
	fm.failOn("promote", "10.0.0.2", errors.New("promote 10.0.0.2: STOP REPLICA: connection reset by peer"))
	fm.reset()

	_, err = f.reconcile()
	requireFailedPass(t, f, before, err, "promote 10.0.0.2: STOP REPLICA: connection reset by peer")
	require.Equal(t, []string{"promote 10.0.0.2"}, fm.recorded(), "nothing else written")
	require.NotContains(t, f.roles(3), "primary")

	fm.failOn("promote", "10.0.0.2", nil)
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "promote 10.0.0.2", fm.recorded()[0])
	require.NotContains(t, strings.Join(f.events(), "\n"), "did not ask for")
	require.Equal(t, "my-database-1", f.database().Status.Primary)
	require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
}

// replSetInitiate that fails is reported in a Warning Event and asked again by the next pass,
// which goes on meanwhile; one whose answer was lost (the set is initiated) is not asked
// again; and a failure to record the members it initiated is the pass's error, recorded by
// the next pass from the primary's configuration.
func TestAFailedReplicaSetInitiationIsAskedAgain(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		f, fm := replicaSet(t, 3)
		fm.initiateErr = errors.New("replSetInitiate: connection reset by peer")
		result, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterReplication}, result)
		require.Equal(t, []string{"initiate 10.0.0.1 my-database " + mongoHost(0)}, fm.recorded())
		require.Contains(t, f.events(), "Warning ReconcileError Initiating replica set my-database on my-database-0 failed: replSetInitiate: connection reset by peer")
		require.Empty(t, f.replicaSetMembers(), "no members recorded")

		fm.initiateErr = nil
		fm.reset()
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Equal(t, []string{"initiate 10.0.0.1 my-database " + mongoHost(0)}, fm.recorded())
		require.Equal(t, "my-database-0", f.replicaSetMembers())
	})

	t.Run("its answer lost", func(t *testing.T) {
		f, fm := replicaSet(t, 3)
		fm.initiateErr = errors.New("replSetInitiate: connection reset by peer")
		_, err := f.reconcile()
		require.NoError(t, err)
		fm.initiateErr = nil
		fm.set(0, rsPrimary(0, 1, rsConfig(1, false, 0), 0))
		fm.reset()
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Empty(t, filter(fm.recorded(), "initiate"), "initiated once")
		require.Equal(t, "my-database-0,my-database-1", f.replicaSetMembers())
	})

	t.Run("recording its members", func(t *testing.T) {
		f, fm := replicaSet(t, 3)
		f.inject("patch", "databases/status", 1, apierrors.NewInternalError(errors.New("etcd timeout")))
		_, err := f.reconcile()
		const want = `record the replica set's members in status: Internal error occurred: etcd timeout`
		require.EqualError(t, err, want)
		require.Contains(t, f.events(), "Warning ReconcileError "+want)
		require.Equal(t, want, condition(f.database(), "Progressing").Message)

		fm.set(0, rsPrimary(0, 1, rsConfig(1, false, 0), 0))
		fm.reset()
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Empty(t, filter(fm.recorded(), "initiate"))
		require.Equal(t, "my-database-0,my-database-1", f.replicaSetMembers())
	})
}

// A reconfiguration is recorded in status.replicaSetMembers as soon as it is done, by a write
// of its own: a later write of the pass that fails (a role label, the pass's status) loses
// nothing of the record, which the next pass sizes the StatefulSet by.
func TestAReplicaSetReconfigurationIsRecordedBeforeTheRestOfThePass(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("etcd timeout")
	for name, fail := range map[string]func(*fixture){
		"a role label":      func(f *fixture) { f.inject("patch", "pods", 1, unavailable) },
		"the pass's status": func(f *fixture) { f.inject("update", "databases/status", 1, unavailable) },
	} {
		t.Run(name, func(t *testing.T) {
			f, fm := replicaSet(t, 2)
			fm.set(0, rsPrimary(0, 1, rsConfig(1, true, 0), 0))
			f.updateDatabase(func(db *examplev1.Database) { db.Status.ReplicaSetMembers = []string{"my-database-0"} })
			fail(f)
			_, err := f.reconcile()
			require.Error(t, err)
			require.Equal(t, []string{"reconfig 10.0.0.1 v2 0:my-database-0:2:1,1:my-database-1:1:1"}, fm.recorded())
			require.Equal(t, "my-database-0,my-database-1", f.replicaSetMembers())

			// Scaled down before the next pass reaches the primary: the new member's Pod is kept.
			delete(fm.states, podIP(0))
			f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, int32(2), *f.statefulSet().Spec.Replicas)
		})
	}
}
