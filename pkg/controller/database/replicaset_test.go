package database_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mongodb/mongoclient"
)

// fakeMongoDB plays the mongod servers of a Database: Observe answers the State scripted for
// the server's host (a Pod IP), or an error for a host with none; Initiate and Reconfig are
// recorded, in order, and change nothing.
type fakeMongoDB struct {
	mu      sync.Mutex
	states  map[string]mongoclient.State
	refused map[string]bool
	// calls are "initiate HOST SET MEMBER" and "reconfig HOST vVERSION ID:HOST:PRIORITY:VOTES,…";
	// servers their Servers.
	calls   []string
	servers []mongoclient.Server
	configs []mongoclient.Config
	// reconfigErr, when set, is Reconfig's answer (the call is recorded all the same), and
	// initiateErr Initiate's.
	reconfigErr, initiateErr error
}

func newFakeMongoDB() *fakeMongoDB {
	return &fakeMongoDB{states: map[string]mongoclient.State{}, refused: map[string]bool{}}
}

func (fm *fakeMongoDB) set(ordinal int, st mongoclient.State) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.states[podIP(ordinal)] = st
}

func (fm *fakeMongoDB) reset() {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.calls, fm.servers, fm.configs = nil, nil, nil
}

func (fm *fakeMongoDB) recorded() []string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return slices.Clone(fm.calls)
}

func (fm *fakeMongoDB) Observe(_ context.Context, s mongoclient.Server) (mongoclient.State, error) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if fm.refused[s.Host] {
		return mongoclient.State{}, fmt.Errorf("connect to %s: %w", s.Host, mongo.CommandError{Code: 18, Message: "Authentication failed."})
	}
	st, ok := fm.states[s.Host]
	if !ok {
		return mongoclient.State{}, fmt.Errorf("connect to %s: connection refused", s.Host)
	}
	return st, nil
}

func (fm *fakeMongoDB) Initiate(_ context.Context, s mongoclient.Server, setName, host string) error {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.calls = append(fm.calls, fmt.Sprintf("initiate %s %s %s", s.Host, setName, host))
	fm.servers = append(fm.servers, s)
	return fm.initiateErr
}

func (fm *fakeMongoDB) Reconfig(_ context.Context, s mongoclient.Server, cfg mongoclient.Config) error {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.calls = append(fm.calls, fmt.Sprintf("reconfig %s v%d %s", s.Host, cfg.Version, members(cfg)))
	fm.servers = append(fm.servers, s)
	fm.configs = append(fm.configs, cfg)
	return fm.reconfigErr
}

// members is cfg's members as "ID:POD:PRIORITY:VOTES,…".
func members(cfg mongoclient.Config) string {
	var out []string
	for _, m := range cfg.Members {
		pod, _, _ := strings.Cut(m.Host, ".")
		out = append(out, fmt.Sprintf("%d:%s:%g:%d", m.ID, pod, m.Priority, m.Votes))
	}
	return strings.Join(out, ",")
}

// mongoHost is the member name of the example Database's Pod of ordinal.
func mongoHost(ordinal int) string { return podHost(ordinal) + ":27017" }

// rsConfig is a configuration of version listing the Pods of ordinals, the first of
// priority 2 when preferred is true.
func rsConfig(version int64, preferred bool, ordinals ...int) *mongoclient.Config {
	cfg := &mongoclient.Config{Name: name, Version: version}
	for i, o := range ordinals {
		priority := 1.0
		if i == 0 && preferred {
			priority = 2
		}
		cfg.Members = append(cfg.Members, mongoclient.ConfigMember{ID: o, Host: mongoHost(o), Priority: priority, Votes: 1})
	}
	return cfg
}

// rsPrimary is the State of the Pod of ordinal as the primary of term with cfg, whose other
// members are SECONDARY, their last operation lag seconds behind its own.
func rsPrimary(ordinal int, term int64, cfg *mongoclient.Config, lag time.Duration) mongoclient.State {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := mongoclient.State{Initiated: true, SetName: name, Writable: true, Me: mongoHost(ordinal), Term: term, Config: cfg}
	for _, m := range cfg.Members {
		ms := mongoclient.MemberStatus{Name: m.Host, StateStr: "SECONDARY", Health: 1, OptimeDate: now.Add(-lag)}
		if m.Host == mongoHost(ordinal) {
			ms.StateStr, ms.Self, ms.OptimeDate = "PRIMARY", true, now
		}
		st.Members = append(st.Members, ms)
	}
	return st
}

// rsSecondary is the State of the Pod of ordinal as a SECONDARY of term with cfg.
func rsSecondary(ordinal int, term int64, cfg *mongoclient.Config) mongoclient.State {
	return mongoclient.State{Initiated: true, SetName: name, Secondary: true, Me: mongoHost(ordinal), Term: term, Config: cfg}
}

// replicaSet is the example Database on MongoDB 7.0 with replicas Pods, its children made, its
// Pods running and their servers answering as nothing yet (started with --replSet, no
// configuration).
func replicaSet(t *testing.T, replicas int) (*fixture, *fakeMongoDB) {
	t.Helper()
	fm := newFakeMongoDB()
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version, db.Spec.Replicas = examplev1.EngineMongoDB, "7.0", ptr.To(int32(replicas))
	f := newFixtureWithOptions(t, database.Options{Observers: map[examplev1.Engine]engine.Observer{examplev1.EngineMongoDB: mongoclient.NewReplicaSet(fm)}}, db)
	f.gracefulPodDeletion()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(replicas)
	f.setStatefulSetStatus(int32(replicas), "rev-1", "rev-1")
	f.addPods(replicas)
	for i := range replicas {
		fm.set(i, mongoclient.State{})
	}
	return f, fm
}

// replicaSetMembers is the Database's status.replicaSetMembers, comma-separated.
func (f *fixture) replicaSetMembers() string {
	f.t.Helper()
	return strings.Join(f.database().Status.ReplicaSetMembers, ",")
}

// A new replica set is initiated once, on the first Pod, with that member alone by its stable
// name; the others join it one reconfiguration at a time as the primary's configuration
// shows each step done, and the set is Replicating once they are SECONDARY.
func TestMongoDBInitiatesOnTheFirstPodThenAddsTheOthersOneAtATime(t *testing.T) {
	f, fm := replicaSet(t, 3)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"initiate 10.0.0.1 my-database " + mongoHost(0)}, fm.recorded())
	require.Equal(t, mongoclient.Server{Host: "10.0.0.1", Port: 27017, User: "admin", Password: string(f.secret().Data["superuser-password"])}, fm.servers[0],
		"as the Secret's superuser")
	require.Contains(t, f.events(), "Normal Created Initiated replica set my-database with "+mongoHost(0))
	require.Equal(t, "my-database-0", f.replicaSetMembers())

	// Initiated: the first Pod is PRIMARY of a set of one; the second joins.
	fm.set(0, rsPrimary(0, 1, rsConfig(1, false, 0), 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"reconfig 10.0.0.1 v2 0:my-database-0:2:1,1:my-database-1:1:1"}, fm.recorded(),
		"one member added; the primary, which spec.replicas keeps, of the highest priority")
	require.Equal(t, "my-database-0,my-database-1", f.replicaSetMembers())
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))

	fm.set(0, rsPrimary(0, 1, rsConfig(2, true, 0, 1), 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"reconfig 10.0.0.1 v3 0:my-database-0:2:1,1:my-database-1:1:1,2:my-database-2:1:1"}, fm.recorded())

	full := rsConfig(3, true, 0, 1, 2)
	fm.set(0, rsPrimary(0, 1, full, 3*time.Second))
	fm.set(1, rsSecondary(1, 1, full))
	fm.set(2, rsSecondary(2, 1, full))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded(), "the set is as it should be: no initiation, no reconfiguration")
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, []examplev1.DatabaseMember{
		{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "my-database-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagSeconds: ptr.To[int64](3)},
		{Name: "my-database-2", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagSeconds: ptr.To[int64](3)},
	}, db.Status.Members)
	require.Equal(t, metav1.ConditionTrue, condition(db, "Replicating").Status)
	require.Equal(t, "every replica streams from my-database-0", condition(db, "Replicating").Message)
}

// A set whose configuration names its members by partial names (before the names were fully
// qualified) is renamed in one reconfiguration, each member keeping its _id, priority and
// votes, and then left alone.
func TestMongoDBRenamesMembersToTheirFullyQualifiedNames(t *testing.T) {
	f, fm := replicaSet(t, 3)
	old := rsConfig(3, true, 0, 1, 2)
	for i := range old.Members {
		old.Members[i].Host = strings.Replace(old.Members[i].Host, ".svc.cluster.local:", ".svc:", 1)
	}
	fm.set(0, rsPrimary(0, 1, old, 0))
	fm.set(1, rsSecondary(1, 1, old))
	fm.set(2, rsSecondary(2, 1, old))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"reconfig 10.0.0.1 v4 0:my-database-0:2:1,1:my-database-1:1:1,2:my-database-2:1:1"}, fm.recorded())
	require.Equal(t, []string{mongoHost(0), mongoHost(1), mongoHost(2)},
		[]string{fm.configs[0].Members[0].Host, fm.configs[0].Members[1].Host, fm.configs[0].Members[2].Host})
	require.Equal(t, "my-database-1.my-database-headless.production.svc.cluster.local:27017", mongoHost(1))
	require.Contains(t, f.events(), "Normal Updated Renamed the members of replica set my-database to their fully qualified names (version 4): "+
		mongoHost(0)+" (priority 2), "+mongoHost(1)+" (priority 1), "+mongoHost(2)+" (priority 1)")

	renamed := rsConfig(4, true, 0, 1, 2)
	fm.set(0, rsPrimary(0, 1, renamed, 0))
	fm.set(1, rsSecondary(1, 1, renamed))
	fm.set(2, rsSecondary(2, 1, renamed))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
}

// A member still in initial sync is reported not streaming with its state; a Pod whose server
// has no configuration while the set has one is never initiated again: it is added instead.
func TestMongoDBReportsMembersThatDoNotStreamAndNeverInitiatesTwice(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, true, 0, 1, 2)
	primary := rsPrimary(0, 1, full, 0)
	primary.Members[2].StateStr, primary.Members[2].LastHeartbeatMessage = "STARTUP2", "initial sync"
	fm.set(0, primary)
	fm.set(1, rsSecondary(1, 1, full))
	fm.set(2, mongoclient.State{Me: mongoHost(2)})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
	require.Equal(t, "not streaming from my-database-0: my-database-2 (STARTUP2: initial sync)", condition(f.database(), "Replicating").Message)
}

// The primary is whichever member the set elected: status.primary, the role label (so the
// client Service follows the election) and the replication ConfigMap follow it, and the
// configuration gives it the highest priority, so it stays primary. A member that still
// answers as a primary of an older term (cut off from the majority, not stepped down yet) is
// neither primary nor replica for the Services.
func TestMongoDBPrimaryFollowsTheElection(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, true, 0, 1, 2)
	fm.set(0, rsPrimary(0, 1, full, 0))
	fm.set(1, rsSecondary(1, 1, full))
	fm.set(2, rsSecondary(2, 1, full))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-0", f.database().Status.Primary)

	fm.set(0, rsPrimary(0, 1, full, 0)) // the old primary of term 1
	fm.set(1, rsPrimary(1, 2, full, 0))
	fm.set(2, rsSecondary(2, 2, full))
	fm.reset()
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterPrimaryCheck}, result, "an election is asked about often: nothing else announces it")
	require.Equal(t, "my-database-1", f.database().Status.Primary)
	require.Equal(t, []string{"", "primary", "replica"}, f.roles(3))
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.Equal(t, []string{"reconfig 10.0.0.2 v4 0:my-database-0:1:1,1:my-database-1:2:1,2:my-database-2:1:1"}, fm.recorded(),
		"asked of the elected primary: it keeps the highest priority")
	require.Empty(t, f.podDeletions(), "the engine fails over: the controller stops no Pod")
	require.NotContains(t, strings.Join(f.events(), "\n"), "did not ask for", "the ConfigMap follows the election without a warning")
}

// A switchover (spec.primary) raises the target's priority, and the set elects it once it has
// caught up; no Pod is stopped for it. Meanwhile Progressing says what it waits for.
func TestMongoDBSwitchoverRaisesTheTargetsPriority(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, true, 0, 1, 2)
	fm.set(0, rsPrimary(0, 1, full, 0))
	fm.set(1, rsSecondary(1, 1, full))
	fm.set(2, rsSecondary(2, 1, full))
	_, err := f.reconcile()
	require.NoError(t, err)

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-2" })
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"reconfig 10.0.0.1 v4 0:my-database-0:1:1,1:my-database-1:1:1,2:my-database-2:2:1"}, fm.recorded())
	require.Empty(t, f.podDeletions())
	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, "switching over from my-database-0 to my-database-2: the replica set elects my-database-2, of the highest priority, once it has caught up",
		condition(db, "Progressing").Message)
	require.Equal(t, &examplev1.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-2", Step: examplev1.SwitchoverStepElecting},
		db.Status.SwitchoverProgress)

	moved := rsConfig(4, false, 0, 1, 2)
	moved.Members[2].Priority = 2
	fm.set(0, rsSecondary(0, 2, moved))
	fm.set(1, rsSecondary(1, 2, moved))
	fm.set(2, rsPrimary(2, 2, moved, 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
	db = f.database()
	require.Equal(t, "my-database-2", db.Status.Primary)
	require.Equal(t, []string{"replica", "replica", "primary"}, f.roles(3))
	require.NotEqual(t, examplev1.ReasonSwitchover, condition(db, "Progressing").Reason)
	require.Nil(t, db.Status.SwitchoverProgress)
}

// A scale-down takes the members out of the configuration, one at a time, before the
// StatefulSet removes their Pods: the remaining members keep a majority throughout.
func TestMongoDBScaleDownTakesMembersOutBeforeTheirPods(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, true, 0, 1, 2)
	fm.set(0, rsPrimary(0, 1, full, 0))
	fm.set(1, rsSecondary(1, 1, full))
	fm.set(2, rsSecondary(2, 1, full))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-0,my-database-1,my-database-2", f.replicaSetMembers())

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, fm.configs, 1)
	require.Len(t, fm.configs[0].Members, 2, "one member out")
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "no Pod removed while the configuration lists it")

	two := fm.configs[0]
	fm.set(0, rsPrimary(0, 1, &two, 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, fm.configs, 1)
	require.Equal(t, "0:my-database-0:2:1", members(fm.configs[0]))
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "held by the member the last configuration still listed")

	one := fm.configs[0]
	fm.set(0, rsPrimary(0, 1, &one, 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
	require.Equal(t, "my-database-0", f.replicaSetMembers())
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(1), *f.statefulSet().Spec.Replicas, "every member out: the Pods go")
}

// A scale-down past the primary first moves it: the first Pod gets the highest priority, and
// the primary stays in the configuration, and its Pod in the StatefulSet, until another is
// elected.
func TestMongoDBScaleDownPastThePrimaryMovesItFirst(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, false, 0, 1, 2)
	full.Members[2].Priority = 2
	fm.set(0, rsSecondary(0, 2, full))
	fm.set(1, rsSecondary(1, 2, full))
	fm.set(2, rsPrimary(2, 2, full, 0))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-2", f.database().Status.Primary)

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, fm.configs, 1)
	for _, m := range fm.configs[0].Members {
		if m.Host == mongoHost(0) {
			require.Equal(t, 2.0, m.Priority, "the first Pod is to be elected")
		}
	}
	require.Contains(t, members(fm.configs[0]), "my-database-2", "the primary stays a member")
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas)
	require.Equal(t, examplev1.ReasonSwitchover, condition(f.database(), "Progressing").Reason)
}

// A Database whose Pods ran standalone servers (before it was a replica set) restarts its
// first Pod first for the new revision, whatever the others are: nothing can join a set that
// is not initiated, and the first Pod is the one served.
func TestMongoDBStandaloneServersRestartTheFirstPodFirst(t *testing.T) {
	f, fm := replicaSet(t, 3)
	for i := range 3 {
		fm.set(i, mongoclient.State{Standalone: true, Writable: true})
	}
	f.setStatefulSetStatus(3, "rev-1", "rev-2")
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
	require.Contains(t, f.events(), "Normal RollingUpdate Restarting my-database-0 first, to initiate replica set my-database on it (revision rev-2)")
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.podDeletions(), "one restart at a time")
	require.Empty(t, fm.recorded(), "a standalone server is never initiated")

	// Servers that do not answer at all (the simulated node) are restarted replicas first.
	f2, fm2 := replicaSet(t, 3)
	for i := range 3 {
		delete(fm2.states, podIP(i))
	}
	f2.setStatefulSetStatus(3, "rev-1", "rev-2")
	_, err = f2.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"my-database-2 uid=my-database-2-uid"}, f2.podDeletions())
}

// A refused reconfiguration (the last one not committed yet) is reported in an Event and
// asked again next pass; the pass goes on.
func TestMongoDBRefusedReconfigurationIsRetried(t *testing.T) {
	f, fm := replicaSet(t, 2)
	fm.set(0, rsPrimary(0, 1, rsConfig(1, true, 0), 0))
	fm.reconfigErr = errors.New("ConfigurationInProgress")
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Len(t, fm.configs, 1)
	events := strings.Join(f.events(), "\n")
	require.Contains(t, events, "Warning ReconcileError Reconfiguring replica set my-database on my-database-0 (version 2: ")
	require.Contains(t, events, "failed: ConfigurationInProgress")
	require.Equal(t, "my-database-0", f.replicaSetMembers())
	require.Equal(t, []string{"primary", "replica"}, f.roles(2))

	fm.reconfigErr = nil
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, fm.configs, 1)
	require.Equal(t, "my-database-0,my-database-1", f.replicaSetMembers())
}

// A member whose server refuses the Secret's credentials is reported, as on other engines.
func TestMongoDBMembersThatRefuseTheSecretsPasswordAreReported(t *testing.T) {
	f, fm := replicaSet(t, 3)
	full := rsConfig(3, true, 0, 1, 2)
	fm.set(0, rsPrimary(0, 1, full, 0))
	fm.set(1, rsSecondary(1, 1, full))
	fm.refused[podIP(2)] = true
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Contains(t, condition(f.database(), "Replicating").Message, "my-database-2 (refuses the Secret's password)")
	require.Equal(t, specs.RoleReplica, f.pod(2).Labels[specs.RoleLabel], "not a primary: clients may read from it once Ready")
}

// A members record that names anything but the running Pods (stale: the Pods it names are
// gone) holds every running Pod until the controller records the members from the primary
// again: a scale-down never goes by it.
func TestMongoDBMembersRecordOfOtherPodsHoldsThePods(t *testing.T) {
	for _, record := range [][]string{{"garbage"}, {"x", "y", "z"}, {"my-database-9"}, {"my-database-00001"}, {"my-database-0", "", "my-database-1"}} {
		t.Run(strings.Join(record, ","), func(t *testing.T) {
			f, fm := replicaSet(t, 3)
			for i := range 3 {
				delete(fm.states, podIP(i)) // nothing answers: the record is not written again
			}
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.Replicas = ptr.To[int32](1)
				db.Status.ReplicaSetMembers = record
			})
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas)
		})
	}
}

// The members record is status.replicaSetMembers, which only the controller writes: an
// annotation on the replication ConfigMap (which a user who may edit ConfigMaps can write)
// saying which Pods are members, added, changed or removed, changes nothing the controller
// decides. A scale-down still holds the Pods the configuration lists.
func TestMongoDBMembersAnnotationOnTheConfigMapIsNoRecord(t *testing.T) {
	const annotation = "database.example.com/replica-set-members"
	for name, edit := range map[string]func(*corev1.ConfigMap){
		"added, naming the first Pod alone": func(cm *corev1.ConfigMap) {
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, annotation, "my-database-0")
		},
		"changed to name no Pod": func(cm *corev1.ConfigMap) { metav1.SetMetaDataAnnotation(&cm.ObjectMeta, annotation, "") },
		"removed":                func(cm *corev1.ConfigMap) { delete(cm.Annotations, annotation) },
	} {
		t.Run(name, func(t *testing.T) {
			f, fm := replicaSet(t, 3)
			full := rsConfig(3, true, 0, 1, 2)
			fm.set(0, rsPrimary(0, 1, full, 0))
			fm.set(1, rsSecondary(1, 1, full))
			fm.set(2, rsSecondary(2, 1, full))
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, "my-database-0,my-database-1,my-database-2", f.replicaSetMembers())

			obj, err := f.kube.Tracker().Get(configMaps, namespace, "my-database-replication")
			require.NoError(t, err)
			cm := obj.(*corev1.ConfigMap).DeepCopy()
			metav1.SetMetaDataAnnotation(&cm.ObjectMeta, annotation, "my-database-0,my-database-1,my-database-2")
			edit(cm)
			require.NoError(t, f.kube.Tracker().Update(configMaps, cm, namespace))
			// Nothing answers now: the pass goes by the record alone.
			for i := range 3 {
				delete(fm.states, podIP(i))
			}
			f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "the Pods the configuration lists are kept")
			require.Equal(t, "my-database-0,my-database-1,my-database-2", f.replicaSetMembers())
		})
	}
}

// A set an older controller reconfigured carries its members record as an annotation on the
// replication ConfigMap, and status has none (an upgrade, perhaps half-way through a
// scale-down): every running Pod is kept, whatever the annotation names, until the controller
// records the members from the primary; from then on the annotation counts for nothing.
func TestMongoDBMembersAnnotationOfAnOlderControllerHoldsThePodsUntilRecorded(t *testing.T) {
	f, fm := replicaSet(t, 3)
	obj, err := f.kube.Tracker().Get(configMaps, namespace, "my-database-replication")
	require.NoError(t, err)
	cm := obj.(*corev1.ConfigMap).DeepCopy()
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, "database.example.com/replica-set-members", "my-database-0")
	require.NoError(t, f.kube.Tracker().Update(configMaps, cm, namespace))
	for i := range 3 {
		delete(fm.states, podIP(i)) // nothing answers: nothing is recorded
	}
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "every running Pod is kept, not the one the annotation names")
	require.Empty(t, f.replicaSetMembers())

	// The primary answers with a configuration of two members: recorded, and from then on
	// the Pods it lists are held, whatever the annotation says.
	two := rsConfig(3, true, 0, 1)
	fm.set(0, rsPrimary(0, 1, two, 0))
	fm.set(1, rsSecondary(1, 1, two))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Len(t, fm.configs, 1, "my-database-1 is taken out")
	require.Equal(t, "my-database-0", f.replicaSetMembers())
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(1), *f.statefulSet().Spec.Replicas, "the record, not the annotation, lets the Pods go")
}

// The keyfile is the one the members started with: a Secret that lost it, while the Pods read
// one, or holds one mongod refuses, halts the Database with the reason; no new key is made.
func TestMongoDBKeyFileIsNeverReplaced(t *testing.T) {
	for name, change := range map[string]func(*corev1.Secret){
		"removed": func(s *corev1.Secret) { delete(s.Data, "keyfile") },
		"invalid": func(s *corev1.Secret) { s.Data["keyfile"] = []byte("short") },
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := replicaSet(t, 3)
			secret := f.secret().DeepCopy()
			change(secret)
			require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
			_, err := f.reconcile()
			require.NoError(t, err)
			db := f.database()
			require.Equal(t, "InvalidCredentials", condition(db, "Ready").Reason)
			require.Contains(t, condition(db, "Ready").Message, `"keyfile"`)
			require.Equal(t, string(secret.Data["keyfile"]), string(f.secret().Data["keyfile"]), "left as it is")
		})
	}
}
