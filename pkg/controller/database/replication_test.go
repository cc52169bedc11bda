package database_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine/postgresql"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
)

// fakeInstances plays the PostgreSQL servers of a Database: Observe answers the State
// scripted for the server's host (a Pod IP), or an error for a host with none (a server that
// does not answer); the other calls are recorded, in order, and change nothing, or fail as
// scripted (failOn).
type fakeInstances struct {
	mu     sync.Mutex
	states map[string]pgclient.State
	// hung are the hosts whose Observe waits for the caller to give up (its context's end):
	// a server that accepts the connection and never answers.
	hung map[string]bool
	// failures are the answers of the calls other than Observe that fail, by "VERB HOST"
	// (the first two words of the call as recorded; "application-role HOST" for
	// SetApplicationRole).
	failures map[string]error
	// observed counts the Observe calls by host; calls are the other calls, as
	// "promote HOST", "create-role HOST ROLE PASSWORD" and
	// "sync-slots HOST want=A,B drop=C,D".
	observed map[string]int
	calls    []string
	// servers are the Servers of the calls, in the order of calls.
	servers []pgclient.Server
	// refused are the hosts that refuse the credentials (SQLSTATE 28P01).
	refused map[string]bool
	// applicationRoles are the SetApplicationRole calls, as "HOST ROLE PASSWORD takeOver=BOOL"
	// (kept apart from calls: the application role has its own tests, credentials_test.go),
	// and applicationServers their Servers.
	applicationRoles   []string
	applicationServers []pgclient.Server
}

func newFakeInstances() *fakeInstances {
	return &fakeInstances{states: map[string]pgclient.State{}, observed: map[string]int{}, refused: map[string]bool{},
		hung: map[string]bool{}, failures: map[string]error{}}
}

// failOn makes the calls "VERB HOST" fail with err from now on (nil: they succeed again).
func (fi *fakeInstances) failOn(verb, host string, err error) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	if err == nil {
		delete(fi.failures, verb+" "+host)
		return
	}
	fi.failures[verb+" "+host] = err
}

// hang makes the Pod of ordinal accept connections and never answer (hung true), or answer
// again.
func (fi *fakeInstances) hang(ordinal int, hung bool) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.hung[podIP(ordinal)] = hung
}

// set scripts the State of the Pod of ordinal.
func (fi *fakeInstances) set(ordinal int, st pgclient.State) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.states[podIP(ordinal)] = st
}

// unset makes the Pod of ordinal not answer.
func (fi *fakeInstances) unset(ordinal int) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	delete(fi.states, podIP(ordinal))
}

// reset forgets the recorded calls.
func (fi *fakeInstances) reset() {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.observed, fi.calls, fi.servers = map[string]int{}, nil, nil
}

// record records call, and answers the failure scripted for its first two words.
func (fi *fakeInstances) record(s pgclient.Server, call string) error {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.calls = append(fi.calls, call)
	fi.servers = append(fi.servers, s)
	return fi.failures[verbHost(call)]
}

// verbHost is the first two words of a recorded call: "VERB HOST".
func verbHost(call string) string {
	f := strings.Fields(call)
	return strings.Join(f[:min(2, len(f))], " ")
}

// recorded are the calls other than Observe since the last reset.
func (fi *fakeInstances) recorded() []string {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return slices.Clone(fi.calls)
}

func (fi *fakeInstances) Observe(ctx context.Context, s pgclient.Server, roles []string) (pgclient.State, error) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.observed[s.Host]++
	if fi.hung[s.Host] {
		fi.mu.Unlock()
		<-ctx.Done()
		fi.mu.Lock()
		return pgclient.State{}, fmt.Errorf("read from %s: %w", s.Host, ctx.Err())
	}
	if fi.refused[s.Host] {
		return pgclient.State{}, fmt.Errorf("connect to %s: %w", s.Host,
			&pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: `password authentication failed for user "postgres"`})
	}
	st, ok := fi.states[s.Host]
	if !ok {
		return pgclient.State{}, fmt.Errorf("connect to %s: connection refused", s.Host)
	}
	// A copy: the Reconciler may change what it was given.
	st.Standbys, st.Slots, st.Roles = maps.Clone(st.Standbys), maps.Clone(st.Slots), slices.Clone(st.Roles)
	if !st.InRecovery {
		// A primary answers which of roles exist.
		st.Roles = slices.DeleteFunc(st.Roles, func(r string) bool { return !slices.Contains(roles, r) })
	}
	return st, nil
}

func (fi *fakeInstances) SetReplicationRole(_ context.Context, s pgclient.Server, role, password string) error {
	return fi.record(s, fmt.Sprintf("create-role %s %s %s", s.Host, role, password))
}

func (fi *fakeInstances) SetApplicationRole(_ context.Context, s pgclient.Server, role, password string, takeOver bool) error {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.applicationRoles = append(fi.applicationRoles, fmt.Sprintf("%s %s %s takeOver=%t", s.Host, role, password, takeOver))
	fi.applicationServers = append(fi.applicationServers, s)
	return fi.failures["application-role "+s.Host]
}

func (fi *fakeInstances) SyncSlots(_ context.Context, s pgclient.Server, _ map[string]bool, want, drop []string) error {
	return fi.record(s, fmt.Sprintf("sync-slots %s want=%s drop=%s", s.Host, strings.Join(want, ","), strings.Join(drop, ",")))
}

func (fi *fakeInstances) WritePassfile(_ context.Context, s pgclient.Server, path, user, password string) error {
	return fi.record(s, fmt.Sprintf("write-passfile %s %s %s %s", s.Host, path, user, password))
}

func (fi *fakeInstances) StopFollowing(_ context.Context, s pgclient.Server) error {
	return fi.record(s, "stop-following "+s.Host)
}

func (fi *fakeInstances) Follow(_ context.Context, s pgclient.Server, conninfo string) error {
	return fi.record(s, "follow "+s.Host+" "+conninfo)
}

func (fi *fakeInstances) SetSynchronousStandbyNames(_ context.Context, s pgclient.Server, value string) error {
	return fi.record(s, "synchronous "+s.Host+" "+value)
}

func (fi *fakeInstances) Promote(_ context.Context, s pgclient.Server) error {
	return fi.record(s, "promote "+s.Host)
}

func (fi *fakeInstances) Checkpoint(_ context.Context, s pgclient.Server) error {
	return fi.record(s, "checkpoint "+s.Host)
}

// podIP is the IP of the example Database's Pod of ordinal: 10.0.0.<ordinal+1>.
func podIP(ordinal int) string { return fmt.Sprintf("10.0.0.%d", ordinal+1) }

func podName(ordinal int) string { return fmt.Sprintf("%s-%d", name, ordinal) }

// The States the fake servers answer.
var (
	// replicationRole is the example's Recipe.ReplicationUsername.
	replicationRole = []string{"replicator"}
	// dropSlots are the slots a primary of the example Database with three Pods drops (when
	// inactive): those of the ordinals past them, up to validation's ten.
	dropSlots = "my_database_3,my_database_4,my_database_5,my_database_6,my_database_7,my_database_8,my_database_9"
)

// primaryState is a primary whose standbys (Pod names) stream, each lagging by its index in
// bytes, with the replication role.
func primaryState(standbys ...string) pgclient.State {
	st := pgclient.State{Standbys: map[string]pgclient.Standby{}, Slots: map[string]bool{}, Roles: replicationRole}
	for i, sb := range standbys {
		st.Standbys[sb] = pgclient.Standby{State: "streaming", LagBytes: int64(i * 16)}
	}
	return st
}

func standbyState(received, replayed uint64) pgclient.State {
	return pgclient.State{InRecovery: true, ReceivedLSN: received, ReplayedLSN: replayed}
}

// addPods plays the StatefulSet controller and the kubelet: the example Database's Pods of
// ordinals 0..n-1, controlled by its StatefulSet, at its update revision, Running and Ready
// with IPs podIP. A Pod that exists is left alone.
func (f *fixture) addPods(n int) {
	f.t.Helper()
	sts := f.statefulSet()
	for i := range n {
		if f.exists(pods, podName(i)) {
			continue
		}
		require.NoError(f.t, f.kube.Tracker().Add(newPod(sts, i, types.UID(podName(i)+"-uid"))))
	}
}

func newPod(sts *appsv1.StatefulSet, ordinal int, uid types.UID) *corev1.Pod {
	labels := maps.Clone(sts.Spec.Template.Labels)
	labels[appsv1.StatefulSetPodNameLabel] = podName(ordinal)
	labels[appsv1.ControllerRevisionHashLabelKey] = sts.Status.UpdateRevision
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: podName(ordinal), UID: uid, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID,
				Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP(ordinal),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func (f *fixture) pod(ordinal int) *corev1.Pod {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(pods, namespace, podName(ordinal))
	require.NoError(f.t, err)
	return obj.(*corev1.Pod)
}

// roles are the role labels of the Pods of ordinals 0..n-1, "" for none.
func (f *fixture) roles(n int) []string {
	f.t.Helper()
	var out []string
	for i := range n {
		out = append(out, f.pod(i).Labels[specs.RoleLabel])
	}
	return out
}

// restartPod plays the StatefulSet controller after a Pod's deletion: a new Pod of the name,
// a new UID, Running and Ready again.
func (f *fixture) restartPod(ordinal int, uid types.UID) {
	f.t.Helper()
	require.NoError(f.t, f.kube.Tracker().Delete(pods, namespace, podName(ordinal)))
	require.NoError(f.t, f.kube.Tracker().Add(newPod(f.statefulSet(), ordinal, uid)))
}

// gracefulPodDeletion plays the API server's deletion of a Pod: the UID precondition checked
// (409 on a mismatch), then the Pod kept with a deletionTimestamp while it shuts down.
func (f *fixture) gracefulPodDeletion() {
	f.kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.record(a) // handled here, before the fixture's recording reactor
		d := a.(k8stesting.DeleteAction)
		obj, err := f.kube.Tracker().Get(pods, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		if uid := d.GetDeleteOptions().Preconditions; uid != nil && uid.UID != nil && *uid.UID != pod.UID {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods"), pod.Name, errors.New("the UID in the precondition does not match"))
		}
		if pod.DeletionTimestamp == nil {
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(start))
		}
		return true, nil, f.kube.Tracker().Update(pods, pod, namespace)
	})
}

// replicating is the example Database (three replicas, or replicas) with its children made
// by one Reconcile, its claims bound, its StatefulSet rolled out with every replica ready,
// and its Pods running: pod 0 answering as the primary of the others, which stream from it.
func replicating(t *testing.T, replicas int, db *examplev1.Database) (*fixture, *fakeInstances) {
	t.Helper()
	fi := newFakeInstances()
	if db == nil {
		db = exampleDatabase()
	}
	db.Spec.Replicas = ptr.To(int32(replicas))
	f := newFixtureWith(t, fi, db)
	f.gracefulPodDeletion()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(replicas)
	f.setStatefulSetStatus(int32(replicas), "rev-1", "rev-1")
	f.addPods(replicas)
	var standbys []string
	for i := 1; i < replicas; i++ {
		standbys = append(standbys, podName(i))
		fi.set(i, standbyState(100, 100))
	}
	fi.set(0, primaryState(standbys...))
	// The role was given the Secret's password by an earlier pass.
	f.recordReplicationPassword()
	return f, fi
}

// A replication password that changes (a Secret restored without it gets a new one, a user
// rotates it) is given to the primary's role, then to every standby's password file, once.
func TestAChangedReplicationPasswordIsGivenToThePrimarysRoleAndTheStandbys(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, strings.Join(fi.recorded(), " "), "create-role", "the role has the Secret's password")

	secret := f.secret().DeepCopy()
	secret.Data["replication-password"] = []byte(`NEW'PASS\WORD`)
	require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{
		`create-role 10.0.0.1 replicator NEW'PASS\WORD`,
		`write-passfile 10.0.0.2 /var/lib/postgresql/data/replication.pgpass replicator NEW'PASS\WORD`,
		`write-passfile 10.0.0.3 /var/lib/postgresql/data/replication.pgpass replicator NEW'PASS\WORD`,
	}, fi.recorded()[:3], "the role first, then the standbys")
	require.Contains(t, f.events(), "Normal Updated Gave standby my-database-1 the new replication password")
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, strings.Join(fi.recorded(), " "), "create-role", "given once")
}

// patches are the Pod and ConfigMap patches of the last reconcile, as "NAME BODY".
func (f *fixture) patches() []string {
	var out []string
	for _, a := range f.raw {
		if p, ok := a.(k8stesting.PatchAction); ok && (p.GetResource() == pods || p.GetResource() == configMaps) {
			out = append(out, p.GetName()+" "+string(p.GetPatch()))
		}
	}
	return out
}

// podDeletions are the Pod deletions of the last reconcile, as "NAME uid=UID" (the UID
// precondition, empty for none).
func (f *fixture) podDeletions() []string {
	var out []string
	for _, a := range f.raw {
		if d, ok := a.(k8stesting.DeleteAction); ok && d.GetResource() == pods {
			uid := ""
			if p := d.GetDeleteOptions().Preconditions; p != nil && p.UID != nil {
				uid = string(*p.UID)
			}
			out = append(out, d.GetName()+" uid="+uid)
		}
	}
	return out
}

func (f *fixture) configMapPrimary() string {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(configMaps, namespace, name+"-replication")
	require.NoError(f.t, err)
	return obj.(*corev1.ConfigMap).Data["primary"]
}

// designate plays a switchover's first step done by an earlier pass: the ConfigMap names pod,
// and status records the switchover from the confirmed primary.
func (f *fixture) designate(pod string) {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(configMaps, namespace, name+"-replication")
	require.NoError(f.t, err)
	cm := obj.(*corev1.ConfigMap).DeepCopy()
	cm.Data["primary"] = pod
	from := f.database().Status.Primary
	if from == "" {
		from = podName(0)
	}
	require.NoError(f.t, f.kube.Tracker().Update(configMaps, cm, namespace))
	// And the status the pass of step 1 writes.
	f.updateDatabase(func(db *examplev1.Database) {
		db.Status.SwitchoverProgress = &examplev1.DatabaseSwitchoverProgress{From: from, To: pod, Step: examplev1.SwitchoverStepStoppingPrimary}
		meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: "Progressing", Status: metav1.ConditionTrue,
			Reason: examplev1.ReasonSwitchover, Message: fmt.Sprintf("switching over from %s to %s: stopping %s", from, pod, from)})
	})
}

// A ConfigMap that names another primary, forged by someone who can edit it while status says
// no switchover is under way, is set back: nothing is stopped or promoted. Whatever else the
// forger writes counts for nothing: an annotation on the ConfigMap saying which primary the
// switchover moves from, and condition messages that read as a switchover's (which a user
// cannot write, since the API server keeps status out of writes of the Database, but which
// the controller would not read either), or a switchover recorded in status for other Pods.
func TestAForgedSwitchoverInTheConfigMapIsSetBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forge func(*fixture, *corev1.ConfigMap)
	}{
		{"the primary alone", func(*fixture, *corev1.ConfigMap) {}},
		{"with a switchover-from annotation", func(_ *fixture, cm *corev1.ConfigMap) {
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, "database.example.com/switchover-from", podName(0))
		}},
		{"with conditions that read as a switchover's", func(f *fixture, _ *corev1.ConfigMap) {
			f.updateDatabase(func(db *examplev1.Database) {
				for _, typ := range []string{"Progressing", "Replicating"} {
					meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue,
						Reason: examplev1.ReasonSwitchover, Message: "switching over from my-database-0 to my-database-1: stopping my-database-0"})
				}
			})
		}},
		{"with the annotation and conditions that read as a switchover's", func(f *fixture, cm *corev1.ConfigMap) {
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, "database.example.com/switchover-from", podName(0))
			f.updateDatabase(func(db *examplev1.Database) {
				meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: "Replicating", Status: metav1.ConditionFalse,
					Reason: examplev1.ReasonSwitchover, Message: "switching over from my-database-0 to my-database-1: stopping my-database-0"})
			})
		}},
		{"while status records a switchover to another Pod", func(f *fixture, _ *corev1.ConfigMap) {
			f.updateDatabase(func(db *examplev1.Database) {
				db.Status.SwitchoverProgress = &examplev1.DatabaseSwitchoverProgress{From: podName(0), To: podName(2), Step: examplev1.SwitchoverStepPreparing}
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			obj, err := f.kube.Tracker().Get(configMaps, namespace, name+"-replication")
			require.NoError(t, err)
			cm := obj.(*corev1.ConfigMap).DeepCopy()
			cm.Data["primary"] = podName(1)
			tc.forge(f, cm)
			require.NoError(t, f.kube.Tracker().Update(configMaps, cm, namespace))
			fi.reset()

			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, podName(0), f.configMapPrimary())
			require.Empty(t, f.podDeletions(), "the primary is not stopped")
			require.Empty(t, filter(fi.recorded(), "promote"))
			require.Contains(t, f.events(), `Warning InvalidChild ConfigMap my-database-replication named "my-database-1" the primary, which the controller did not ask for; set it back to my-database-0 (change spec.primary to move the primary)`)
			require.Equal(t, podName(0), f.database().Status.Primary)
		})
	}
}

// A switchover's step 1 stops the primary only once status.switchoverProgress, written by an
// earlier pass, records it: conditions whose reason and message read as that record (which
// the controller wrote itself before it kept the record in status) do not make a pass that
// first finds the target streaming stop the primary.
func TestASwitchoverMessageInTheConditionsIsNoRecord(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.Primary = podName(1)
		for _, typ := range []string{"Progressing", "Replicating"} {
			meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue,
				Reason: examplev1.ReasonSwitchover, Message: "switching over from my-database-0 to my-database-1: my-database-1 streams from my-database-0; stopping my-database-0 next"})
		}
	})
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, podName(0), f.configMapPrimary(), "not named yet")
	require.Empty(t, f.podDeletions(), "the primary is not stopped by this pass")
	require.Equal(t, &examplev1.DatabaseSwitchoverProgress{From: podName(0), To: podName(1), Step: examplev1.SwitchoverStepPreparing},
		f.database().Status.SwitchoverProgress, "this pass records it")

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, podName(1), f.configMapPrimary())
	require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
}

// A primary whose last checkpoint is on an older timeline than the one it writes (promoted,
// its checkpoint not done) is checkpointed, so that its control file names its timeline
// before a former primary is rewound from it; one checkpointed on it is not.
func TestAPrimaryPromotedIsCheckpointedOnItsTimeline(t *testing.T) {
	f, fi := replicating(t, 2, nil)
	streaming := map[string]pgclient.Standby{"my-database-1": {State: "streaming"}}
	fi.set(0, pgclient.State{Timeline: 2, CheckpointTimeline: 1, Standbys: streaming, Slots: map[string]bool{"my_database_1": true}})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Contains(t, fi.recorded(), "checkpoint 10.0.0.1")

	fi.set(0, pgclient.State{Timeline: 2, CheckpointTimeline: 2, Standbys: streaming, Slots: map[string]bool{"my_database_1": true}})
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, fi.recorded(), "checkpoint 10.0.0.1")
}

func TestSteadyStateLabelsTheRolesCreatesTheSlotsAndReportsStreaming(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	fi.set(0, pgclient.State{Standbys: map[string]pgclient.Standby{
		"my-database-1": {State: "streaming", LagBytes: 0, ReplayLag: -1},
		"my-database-2": {State: "streaming", LagBytes: 16, ReplayLag: 0.25},
	}, Slots: map[string]bool{}}) // no replication role yet

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterPrimaryCheck}, result, "the servers are asked again, soon: the primary fails over automatically")
	require.Equal(t, map[string]int{podIP(0): 1, podIP(1): 1, podIP(2): 1}, fi.observed, "every Pod asked once")
	secret := f.secret()
	require.Equal(t, []string{
		"create-role 10.0.0.1 replicator " + string(secret.Data["replication-password"]),
		"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots,
	}, fi.recorded(), "on the primary only: the role with the Secret's password, a slot per replica")
	superuser := pgclient.Server{Host: "10.0.0.1", Port: 5432, User: "postgres", Password: string(secret.Data["superuser-password"]),
		Database: "my_database"}
	rewind := superuser
	rewind.Database = postgresql.RewindDatabase
	require.Equal(t, []pgclient.Server{rewind, superuser}, fi.servers,
		"as the Secret's superuser; the replication role in the database pg_rewind's session opens, the only one where its grants hold")
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	for _, a := range f.raw {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetResource() == pods {
			var patch struct {
				Metadata struct {
					UID types.UID `json:"uid"`
				} `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(p.GetPatch(), &patch))
			require.Equal(t, types.UID(p.GetName()+"-uid"), patch.Metadata.UID, "a label patch applies to the Pod asked only")
		}
	}

	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseReady, db.Status.Phase)
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, []examplev1.DatabaseMember{
		{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "my-database-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0), LagSeconds: ptr.To[int64](0)},
		{Name: "my-database-2", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](16), LagSeconds: ptr.To[int64](0)},
	}, db.Status.Members)
	replicatingCond := condition(db, "Replicating")
	require.Equal(t, metav1.ConditionTrue, replicatingCond.Status)
	require.Equal(t, "Streaming", replicatingCond.Reason)
	require.Equal(t, "every replica streams from my-database-0", replicatingCond.Message)

	// The role exists now: not created again; the slots are synced (the client creates only
	// the missing ones); labels in place are not patched again.
	fi.set(0, primaryState("my-database-1", "my-database-2"))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots}, fi.recorded())
	require.Empty(t, f.actions, "nothing changed: no label patch, no status write")

	// A replica falls behind: Replicating False, naming it.
	fi.set(0, pgclient.State{Standbys: map[string]pgclient.Standby{
		"my-database-1": {State: "streaming"},
		"my-database-2": {State: "catchup", LagBytes: 4096, ReplayLag: 12.5},
	}, Roles: replicationRole})
	_, err = f.reconcile()
	require.NoError(t, err)
	db = f.database()
	replicatingCond = condition(db, "Replicating")
	require.Equal(t, metav1.ConditionFalse, replicatingCond.Status)
	require.Equal(t, "NotStreaming", replicatingCond.Reason)
	require.Equal(t, "not streaming from my-database-0: my-database-2 (catchup)", replicatingCond.Message)
	require.Equal(t, examplev1.DatabaseMember{Name: "my-database-2", Role: examplev1.MemberRoleReplica, Ready: true,
		LagBytes: ptr.To[int64](4096), LagSeconds: ptr.To[int64](12)}, db.Status.Members[2])
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3), "a replica catching up still serves reads")

	// One that does not answer, and one the primary does not see.
	fi.set(0, primaryState("my-database-1"))
	fi.unset(1)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "not streaming from my-database-0: my-database-1 (not answering), my-database-2 (not connected to my-database-0)",
		condition(f.database(), "Replicating").Message)
}

func TestWithoutInstancesTheFirstPodIsPrimaryAndReplicatingIsUnknown(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(3)
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	f.addPods(3)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result, "no servers to ask again")
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	c := condition(db, "Replicating")
	require.Equal(t, metav1.ConditionUnknown, c.Status)
	require.Equal(t, "NotObserved", c.Reason)
	require.Equal(t, examplev1.DatabasePhaseReady, db.Status.Phase, "Replicating does not hold Ready back")
}

func TestSwitchoverStopsTheOldPrimaryOnceTheNewOneStreams(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-0", f.database().Status.Primary)

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	fi.reset()
	// Status says a switchover is under way before anything is stopped.
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterNotReady}, result)
	require.Equal(t, "my-database-0", f.configMapPrimary())
	require.Empty(t, f.podDeletions())
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	require.Equal(t, "switching over from my-database-0 to my-database-1: my-database-1 streams from my-database-0; stopping my-database-0 next",
		condition(f.database(), "Replicating").Message)
	require.Equal(t, &examplev1.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-1", Step: examplev1.SwitchoverStepPreparing},
		f.database().Status.SwitchoverProgress)

	fi.reset()
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterSwitchover}, result)
	require.Equal(t, "my-database-1", f.configMapPrimary(), "a Pod that starts now follows my-database-1")
	require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions(), "the Pod asked, by UID")
	cm := slices.Index(f.actions, "patch configmaps my-database-replication")
	require.GreaterOrEqual(t, cm, 0)
	require.Less(t, cm, slices.Index(f.actions, "patch pods my-database-0"), "named in the ConfigMap before it is stopped")
	require.Less(t, slices.Index(f.actions, "patch pods my-database-0"), slices.Index(f.actions, "delete pods my-database-0"),
		"clients are turned away before the server stops")
	require.Equal(t, "", f.pod(0).Labels[specs.RoleLabel], "out of the client Service")
	require.NotNil(t, f.pod(0).DeletionTimestamp)
	require.Empty(t, fi.recorded(), "no promotion, no slot work during the switchover")
	require.Contains(t, f.events(), "Normal Switchover Switching over from my-database-0 to my-database-1: stopping my-database-0")

	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary, "not promoted yet")
	require.Equal(t, &examplev1.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-1", Step: examplev1.SwitchoverStepStoppingPrimary},
		db.Status.SwitchoverProgress)
	const msg = "switching over from my-database-0 to my-database-1: stopping my-database-0"
	for typ, status := range map[string]metav1.ConditionStatus{"Progressing": metav1.ConditionTrue, "Replicating": metav1.ConditionFalse} {
		c := condition(db, typ)
		require.Equal(t, status, c.Status, typ)
		require.Equal(t, "Switchover", c.Reason, typ)
		require.Equal(t, msg, c.Message, typ)
	}

	// The next pass while the Pod shuts down: not deleted again, not asked.
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.podDeletions())
	require.Zero(t, fi.observed[podIP(0)], "a Pod being deleted is not asked")
	require.Equal(t, "switching over from my-database-0 to my-database-1: waiting for my-database-0 to restart as a standby",
		condition(f.database(), "Progressing").Message)
}

func TestSwitchoverWaitsForTheNewPrimaryToStream(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	st := primaryState("my-database-2")
	st.Standbys["my-database-1"] = pgclient.Standby{State: "catchup", LagBytes: 1 << 20}
	fi.set(0, st)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterNotReady}, result)
	require.Equal(t, "my-database-0", f.configMapPrimary())
	require.Empty(t, f.podDeletions())
	require.NotContains(t, f.actions, "patch configmaps my-database-replication")
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	c := condition(db, "Progressing")
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, "Switchover", c.Reason)
	require.Equal(t, "switching over from my-database-0 to my-database-1: waiting for my-database-1 to stream from my-database-0", c.Message)
}

func TestSwitchoverPromotesOnlyOnceTheNewPrimaryHasAllTheOldOnesWAL(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	// Steps 1 and 2 done: the ConfigMap names my-database-1, my-database-0 came back as a
	// standby whose shutdown checkpoint ends at 100.
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	f.designate("my-database-1")
	f.restartPod(0, "my-database-0-uid-2")
	fi.set(0, standbyState(0, 100))
	fi.set(1, standbyState(99, 90))
	fi.set(2, standbyState(99, 99))
	fi.reset()

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterSwitchover}, result)
	require.Empty(t, fi.recorded(), "no promotion while my-database-1 lacks WAL")
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, "switching over from my-database-0 to my-database-1: my-database-1 has WAL up to 99, my-database-0's ends at 100",
		condition(db, "Progressing").Message)
	require.Equal(t, &examplev1.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-1", Step: examplev1.SwitchoverStepPromoting},
		db.Status.SwitchoverProgress)
	require.Equal(t, "", f.pod(0).Labels[specs.RoleLabel], "no primary: clients wait")
	require.Equal(t, metav1.ConditionFalse, condition(db, "Ready").Status, "no server takes writes")
	require.Equal(t, "Switchover", condition(db, "Ready").Reason)
	require.Equal(t, examplev1.DatabasePhaseDegraded, db.Status.Phase)
	require.NotEqual(t, "primary", f.pod(1).Labels[specs.RoleLabel])

	fi.set(1, standbyState(100, 95))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	calls := fi.recorded()
	require.NotEmpty(t, calls)
	require.Equal(t, "promote 10.0.0.2", calls[0])
	require.Equal(t, pgclient.Server{Host: "10.0.0.2", Port: 5432, User: "postgres", Password: string(f.secret().Data["superuser-password"]),
		Database: "my_database"}, fi.servers[0])
	require.Equal(t, "sync-slots 10.0.0.2 want=my_database_0,my_database_2 drop="+dropSlots, calls[len(calls)-1],
		"the new primary keeps a slot for the old one")
	require.Contains(t, f.events(), "Normal Switchover Promoted my-database-1; my-database-0 follows it as a standby")
	db = f.database()
	require.Equal(t, "my-database-1", db.Status.Primary)
	require.Nil(t, db.Status.SwitchoverProgress, "the switchover is done")
	require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
	require.NotEqual(t, "Switchover", condition(db, "Progressing").Reason)

	// The new primary answers as one; the switchover is over.
	fi.set(1, primaryState("my-database-0", "my-database-2"))
	fi.set(0, standbyState(200, 200))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, fi.recorded(), "promote 10.0.0.2", "promoted once")
	require.Equal(t, metav1.ConditionTrue, condition(f.database(), "Replicating").Status)
	require.Equal(t, "every replica streams from my-database-1", condition(f.database(), "Replicating").Message)
}

func TestAnOldPrimaryStillTakingWritesIsStoppedAgainNeverPromotedOver(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	f.designate("my-database-1")
	// my-database-0 came back but started as a primary (its data directory was not set up
	// to follow): it may take writes.
	f.restartPod(0, "my-database-0-uid-2")
	fi.set(0, primaryState("my-database-2"))
	fi.set(1, standbyState(500, 500))
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fi.recorded(), "never promoted while the old primary answers as one")
	require.Equal(t, []string{"my-database-0 uid=my-database-0-uid-2"}, f.podDeletions(), "fenced again, this Pod by its UID")
	require.Equal(t, "", f.pod(0).Labels[specs.RoleLabel])
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, "switching over from my-database-0 to my-database-1: stopping my-database-0", condition(db, "Progressing").Message)
}

func TestAReplicaAnsweringAsAPrimaryIsInNoService(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	fi.set(0, primaryState("my-database-1"))
	fi.set(2, primaryState()) // data of its own
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"primary", "replica", ""}, f.roles(3))
	require.Equal(t, []string{"sync-slots 10.0.0.1 want=my_database_1,my_database_2 drop=" + dropSlots}, fi.recorded(),
		"only the confirmed primary is written to")
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	c := condition(db, "Replicating")
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, "not streaming from my-database-0: my-database-2 (a primary of its own, not a replica of my-database-0)", c.Message)
	require.Equal(t, examplev1.DatabaseMember{Name: "my-database-2", Role: examplev1.MemberRolePrimary, Ready: true}, db.Status.Members[2])

	// A replica labelled before is unlabelled.
	fi.set(2, standbyState(1, 1))
	fi.set(0, primaryState("my-database-1", "my-database-2"))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "replica", f.pod(2).Labels[specs.RoleLabel])
	fi.set(2, primaryState())
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "", f.pod(2).Labels[specs.RoleLabel])
}

func TestScaleDownMovesThePrimaryOffTheRemovedPodsFirst(t *testing.T) {
	db := exampleDatabase()
	db.Status.Primary = "my-database-2"
	f, fi := replicating(t, 3, db)
	require.Equal(t, "my-database-2", f.configMapPrimary(), "a new ConfigMap names the confirmed primary")
	fi.set(2, primaryState("my-database-0", "my-database-1"))
	fi.set(0, standbyState(100, 100))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"replica", "replica", "primary"}, f.roles(3))

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
	_, err = f.reconcile() // status says a switchover is under way
	require.NoError(t, err)
	require.Empty(t, f.podDeletions())
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "the primary's Pod is kept")
	require.Equal(t, "my-database-0", f.configMapPrimary(), "moved to the first Pod")
	require.Equal(t, []string{"my-database-2 uid=my-database-2-uid"}, f.podDeletions())
	require.Equal(t, "Switchover", condition(f.database(), "Progressing").Reason)

	// my-database-2 is back as a standby; my-database-0 has its WAL: promoted. The
	// StatefulSet still runs the Pods of this pass.
	f.restartPod(2, "my-database-2-uid-2")
	fi.set(2, standbyState(0, 300))
	fi.set(0, standbyState(300, 300))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Contains(t, fi.recorded(), "promote 10.0.0.1")
	require.Equal(t, "my-database-0", f.database().Status.Primary)
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas)

	// Confirmed: the StatefulSet goes to spec.replicas; the primary keeps the slots of the
	// removed replicas, whose claims are kept, for a scale-up to find the WAL they need.
	fi.set(0, primaryState("my-database-1", "my-database-2"))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(1), *f.statefulSet().Spec.Replicas)
	require.Equal(t, []string{"sync-slots 10.0.0.1 want= drop=" + dropSlots}, fi.recorded())
	require.Equal(t, []examplev1.DatabaseMember{{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true}},
		f.database().Status.Members)
}

func TestOneReplicaHasNoReadServiceNorReplicatingCondition(t *testing.T) {
	f, fi := replicating(t, 1, nil)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.False(t, f.exists(services, "my-database-read"))
	require.Equal(t, []string{"primary"}, f.roles(1))
	require.Equal(t, []string{"sync-slots 10.0.0.1 want= drop=my_database_1,my_database_2," + dropSlots}, fi.recorded())
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseReady, db.Status.Phase)
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, []examplev1.DatabaseMember{{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true}}, db.Status.Members)
	require.Equal(t, metav1.Condition{}, condition(db, "Replicating"))

	secret := f.secret()
	require.Equal(t, "replicator", string(secret.Data["replication-username"]))
	require.GreaterOrEqual(t, len(secret.Data["replication-password"]), 24)
	require.NotEqual(t, secret.Data["password"], secret.Data["replication-password"], "a password of its own")
	require.NotContains(t, secret.Data, "read-host")
	require.NotContains(t, secret.Data, "read-uri")
}

func TestReplicasHaveAReadHost(t *testing.T) {
	f, _ := replicating(t, 3, nil)
	secret := f.secret()
	require.Equal(t, "my-database-read.production.svc.cluster.local", string(secret.Data["read-host"]))
	require.Equal(t, "postgresql://app:"+string(secret.Data["password"])+"@my-database-read.production.svc.cluster.local:5432/my_database",
		string(secret.Data["read-uri"]))
	require.True(t, f.exists(services, "my-database-read"))
}

// A switchover that waits for its target to stream has not stopped anything yet: the
// primary keeps its label (clients keep writing) and its slots are kept in sync.
func TestAWaitingSwitchoverKeepsThePrimaryServing(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	st := primaryState("my-database-2")
	st.Standbys["my-database-1"] = pgclient.Standby{State: "catchup", LagBytes: 1 << 20}
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

// A ConfigMap edited by hand to name a primary that is none of the Database's Pods is set
// back to the confirmed primary, which is neither stopped nor unlabelled: with the name kept,
// every Pod would start as a standby of no one.
func TestAReplicationConfigMapNamingNoPodIsSetBack(t *testing.T) {
	for _, named := range []string{"my-database-7", "other-0", ""} {
		t.Run(named, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			cm, err := f.kube.CoreV1().ConfigMaps(namespace).Get(t.Context(), "my-database-replication", metav1.GetOptions{})
			require.NoError(t, err)
			cm.Data[specs.ConfigMapKeyPrimary] = named
			_, err = f.kube.CoreV1().ConfigMaps(namespace).Update(t.Context(), cm, metav1.UpdateOptions{})
			require.NoError(t, err)
			fi.reset()

			_, err = f.reconcile()
			require.NoError(t, err)
			cm, err = f.kube.CoreV1().ConfigMaps(namespace).Get(t.Context(), "my-database-replication", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, "my-database-0", cm.Data[specs.ConfigMapKeyPrimary])
			require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
			require.Nil(t, f.pod(0).DeletionTimestamp, "the primary was stopped")
			require.NotContains(t, strings.Join(fi.recorded(), " "), "promote")
			if named != "" { // an empty one is filled in as a ConfigMap's missing key
				require.Contains(t, f.events(), `Warning InvalidChild ConfigMap my-database-replication named "`+named+`" the primary, which the controller did not ask for; set it back to my-database-0 (change spec.primary to move the primary)`)
			}
		})
	}
}

// A new revision (an image update, say) restarts one Pod at a time, only while all are Ready:
// the replicas from the highest ordinal down, then the primary last, wherever it is.
func TestANewRevisionRestartsTheReplicasFirstAndThePrimaryLast(t *testing.T) {
	for _, tc := range []struct {
		primary int
		order   []int
	}{
		{0, []int{2, 1, 0}},
		{1, []int{2, 0, 1}},
	} {
		t.Run(podName(tc.primary), func(t *testing.T) {
			db := exampleDatabase()
			db.Status.Primary = podName(tc.primary)
			f, fi := replicating(t, 3, db)
			var standbys []string
			for i := range 3 {
				if i != tc.primary {
					standbys = append(standbys, podName(i))
					fi.set(i, standbyState(100, 100))
				}
			}
			fi.set(tc.primary, primaryState(standbys...))
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Empty(t, f.podDeletions(), "every Pod at the update revision")
			require.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, f.statefulSet().Spec.UpdateStrategy.Type)

			f.setStatefulSetStatus(3, "rev-1", "rev-2")
			for n, ordinal := range tc.order {
				_, err := f.reconcile()
				require.NoError(t, err)
				require.Equal(t, []string{podName(ordinal) + " uid=" + string(f.pod(ordinal).UID)}, f.podDeletions(), "restart %d", n)
				which := "a replica"
				if ordinal == tc.primary {
					which = "the primary, last"
				}
				require.Contains(t, f.events(), fmt.Sprintf("Normal RollingUpdate Restarting %s (%s) for revision rev-2", podName(ordinal), which))
				// Being deleted: nothing else restarts until it is back Ready.
				_, err = f.reconcile()
				require.NoError(t, err)
				require.Empty(t, f.podDeletions(), "one Pod at a time")
				f.restartPod(ordinal, types.UID(fmt.Sprintf("%s-rev-2", podName(ordinal))))
			}
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Empty(t, f.podDeletions(), "done")
		})
	}
}

// A ConfigMap edited by hand to name another of the Database's Pods starts no switchover: it
// is set back, and the primary keeps serving.
func TestAReplicationConfigMapEditedByHandStartsNoSwitchover(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	obj, err := f.kube.Tracker().Get(configMaps, namespace, name+"-replication")
	require.NoError(t, err)
	cm := obj.(*corev1.ConfigMap).DeepCopy()
	cm.Data["primary"] = "my-database-1"
	require.NoError(t, f.kube.Tracker().Update(configMaps, cm, namespace))
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-0", f.configMapPrimary())
	require.Empty(t, f.podDeletions(), "the primary was not stopped")
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	require.NotContains(t, strings.Join(fi.recorded(), " "), "promote")
}

// A Secret whose password the servers refuse (edited by hand) is reported, not taken for
// servers that do not answer: clients given the Secret cannot connect.
func TestServersThatRefuseTheSecretsPasswordMakeTheDatabaseDegraded(t *testing.T) {
	f, fi := replicating(t, 2, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)

	fi.mu.Lock()
	fi.refused[podIP(0)], fi.refused[podIP(1)] = true, true
	fi.mu.Unlock()
	_, err = f.reconcile()
	require.NoError(t, err)
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseDegraded, db.Status.Phase)
	for _, typ := range []string{"Ready", "Degraded"} {
		c := condition(db, typ)
		require.Equal(t, "CredentialsRefused", c.Reason, typ)
		require.Equal(t, "my-database-0, my-database-1 refuse the username and password of Secret my-database-credentials, which clients are given: "+
			"the database keeps the password its data was initialised with; set the Secret's back to it", c.Message)
	}
	require.Equal(t, metav1.ConditionFalse, condition(db, "Ready").Status)
	require.Contains(t, condition(db, "Replicating").Message, "my-database-1 (refuses the Secret's password)")

	fi.mu.Lock()
	fi.refused = map[string]bool{}
	fi.mu.Unlock()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
}
