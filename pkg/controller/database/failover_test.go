package database_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/engine"
)

// failoverServers are testServers that can be failed over (engine.Failover) and wait for
// replicas (engine.Synchronous): a replica stopped following has no source; a server holds
// another's transactions when its position reaches it; one marked errant has diverged.
type failoverServers struct {
	*testServers
	errant map[string]bool
	// rewinds says whether an errant server follows once its Pod restarts.
	rewinds bool
	// stopping, when set, is called with the servers locked as the server at host is made
	// to stop following: what happens to the servers while they are fenced.
	stopping func(servers map[string]*testServer, host string)
}

var (
	_ engine.Failover    = failoverServers{}
	_ engine.Synchronous = failoverServers{}
)

func (s failoverServers) StopFollowing(_ context.Context, _ engine.Pass, e engine.Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("stop-following " + e.Host)
	s.servers[e.Host].source = ""
	if s.stopping != nil {
		s.stopping(s.servers, e.Host)
	}
	return nil
}

func (failoverServers) Holds(a, b *engine.Member) bool {
	return testState(a).position >= testState(b).position
}

func (s failoverServers) Diverged(_, former *engine.Member) bool { return s.errant[former.Name] }

func (s failoverServers) Rewinds() bool { return s.rewinds }

func (s failoverServers) SetSynchronous(_ context.Context, _ engine.Pass, e engine.Endpoint, _ *engine.Member, k int32, replicas []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("synchronous " + e.Host + " " + strconv.Itoa(int(k)) + " " + strings.Join(replicas, ","))
	return nil
}

func (failoverServers) CommitsWaiting(primary *engine.Member) (int, time.Duration) {
	return testState(primary).commitsWaiting, testState(primary).longestWait
}

// failingOver is a Database of the test engine, replicas: 3, with spec changed by change,
// Ready with my-database-0 its primary, seen writable; my-database-1 and -2 stream from it,
// at positions 120 and 130.
func failingOver(t *testing.T, change func(*examplev1.Database)) (*fixture, *failoverServers) {
	registerTestEngine(t)
	servers := &failoverServers{testServers: &testServers{servers: map[string]*testServer{}}, errant: map[string]bool{}}
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version = testEngineName, "1"
	if change != nil {
		change(db)
	}
	f := newFixtureWithOptions(t, database.Options{Observers: map[examplev1.Engine]engine.Observer{testEngineName: servers}}, db)
	f.gracefulPodDeletion()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(3)
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	f.addPods(3)
	servers.set(0, testServer{writable: true, position: 130, users: []string{"streamer"}})
	servers.set(1, testServer{position: 120, source: "my-database-0"})
	servers.set(2, testServer{position: 130, source: "my-database-0"})
	for range 2 {
		result, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterPrimaryCheck}, result,
			"a primary with replicas is checked often, whether failed over automatically or by hand")
	}
	got := f.database()
	require.Equal(t, examplev1.DatabasePhaseReady, got.Status.Phase)
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	servers.mu.Lock()
	servers.calls = nil
	servers.mu.Unlock()
	return f, servers
}

// A primary that stops answering makes the Database not Ready at once; once it has taken no
// writes for the failover delay, the controller fences it (its role label removed, every
// replica stopped following it) and records the failover, then names the replica that holds
// every other's transactions the primary, deletes the old primary's Pod, and promotes it;
// the other replica follows it, and the Services route to it.
// counted is the controller's counter name (database_failovers_total,
// database_switchovers_total) of the Database db, as /metrics reports it: 0 before the first.
func counted(t *testing.T, name string, db *examplev1.Database) float64 {
	t.Helper()
	database.RegisterMetrics(nil)
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == db.Namespace && labels["database"] == db.Name {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestAPrimaryThatStopsTakingWritesIsFailedOverAfterTheDelay(t *testing.T) {
	f, servers := failingOver(t, nil)
	failovers := counted(t, "database_failovers_total", f.database())
	seen := f.clock.Now()
	f.clock.SetTime(f.clock.Now().Add(time.Second))
	delete(servers.servers, podIP(0))

	result, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, seen.Truncate(time.Second), got.Status.PrimaryLastWritableTime.Time, "status.primaryLastWritableTime")
	ready := condition(got, "Ready")
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Equal(t, database.ReasonPrimaryNotWritable, ready.Reason)
	require.Contains(t, ready.Message, "my-database-0, the primary, has taken no writes since")
	require.Equal(t, metav1.ConditionTrue, condition(got, "Degraded").Status)
	require.Equal(t, examplev1.DatabasePhaseDegraded, got.Status.Phase)
	require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterPrimaryCheck}, result)
	require.Empty(t, servers.recorded(), "nothing fenced before the delay")
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))

	f.clock.SetTime(f.clock.Now().Add(9 * time.Second))
	_, err = f.reconcile()
	require.NoError(t, err)
	got = f.database()
	require.Equal(t, &examplev1.DatabaseFailoverStatus{
		From: "my-database-0", To: "my-database-2", Phase: examplev1.FailoverPhasePromoting,
		ReachableReplicas: 2, NeededReplicas: 1, StartTime: metav1.NewTime(f.clock.Now()).Rfc3339Copy(),
	}, got.Status.Failover)
	require.Equal(t, []string{"stop-following 10.0.0.2", "stop-following 10.0.0.3"}, servers.recorded())
	require.Equal(t, []string{"", "replica", "replica"}, f.roles(3), "fenced: no Service routes to my-database-0")
	require.Equal(t, "my-database-0", f.configMapPrimary(), "not named before status records the failover")
	require.Equal(t, database.ReasonFailover, condition(got, "Ready").Reason)
	require.Contains(t, f.events(), "Warning Failover my-database-0 has taken no writes since "+seen.UTC().Truncate(time.Second).Format(time.RFC3339)+
		": fenced it (2 of 2 replicas answered, 1 needed); promoting my-database-2, which holds every answering replica's transactions")

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-2", f.configMapPrimary())
	require.NotNil(t, f.pod(0).DeletionTimestamp, "the old primary's Pod is deleted")
	require.Contains(t, servers.recorded(), "promote 10.0.0.3")
	got = f.database()
	require.Equal(t, "my-database-2", got.Status.Primary)
	require.Nil(t, got.Status.Failover)
	require.Nil(t, got.Status.PrimaryLastWritableTime)
	require.Equal(t, int32(2), got.Status.ReadyReplicas, "the old primary's Pod, being deleted, counts no more, whatever the StatefulSet's status says")
	require.Equal(t, metav1.ConditionFalse, condition(got, "Ready").Status)
	require.Contains(t, servers.recorded(), "set-source 10.0.0.2 my-database-2", "the other replica follows the new primary")
	require.Contains(t, servers.recorded(), "synchronous 10.0.0.3 0 my-database-0,my-database-1", "asynchronous: no replica waited for")
	require.Equal(t, []string{"replica", "replica", "primary"}, f.roles(3))
	require.Contains(t, strings.Join(f.events(), "\n"), "Normal Failover Promoted my-database-2 in place of my-database-0")
	require.Equal(t, failovers+1, counted(t, "database_failovers_total", got), "the failover is counted once")

	// The old primary restarts as a replica of the new one; Ready again once it streams.
	f.restartPod(0, "my-database-0-uid-2")
	servers.set(0, testServer{position: 130, source: "my-database-2"})
	_, err = f.reconcile()
	require.NoError(t, err)
	got = f.database()
	require.Equal(t, metav1.ConditionTrue, condition(got, "Ready").Status)
	require.Equal(t, metav1.ConditionTrue, condition(got, "Replicating").Status, condition(got, "Replicating").Message)

	// Once the Database is gone its counter ends with it.
	require.NoError(t, f.dbs.Tracker().Delete(databases, got.Namespace, got.Name))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Zero(t, counted(t, "database_failovers_total", got))
}

// With Synchronous durability a commit is on at least one of the two replicas: both must
// answer for one of them to surely hold it. With one of them down as well, the failover is
// refused, nothing is fenced, and status says the arithmetic; it goes on once both answer.
func TestASynchronousFailoverIsRefusedUntilEveryReplicaAnswers(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Durability = examplev1.DurabilitySynchronous })
	delete(servers.servers, podIP(0))
	delete(servers.servers, podIP(1))
	f.clock.SetTime(f.clock.Now().Add(11 * time.Second))

	got := reconcileRefused(t, f, 1, 2)
	ready := condition(got, "Ready")
	require.Equal(t, database.ReasonFailoverRefused, ready.Reason)
	require.Equal(t, "not failing over from my-database-0: 1 replicas answer, 2 needed to be sure one has every acknowledged commit", ready.Message)
	require.Empty(t, servers.recorded(), "nothing fenced, nothing promoted")
	require.Equal(t, "my-database-0", f.configMapPrimary())
	require.Nil(t, f.pod(0).DeletionTimestamp)
	require.Contains(t, f.events(), "Warning FailoverRefused "+ready.Message)

	servers.set(1, testServer{position: 125})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.FailoverPhasePromoting, f.database().Status.Failover.Phase)
	require.Equal(t, "my-database-2", f.database().Status.Failover.To)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-2", f.database().Status.Primary)
	calls := servers.recorded()
	promoted := slices.Index(calls, "promote 10.0.0.3")
	require.GreaterOrEqual(t, promoted, 0, "%v", calls)
	require.Equal(t, "synchronous 10.0.0.3 1 my-database-0,my-database-1", calls[promoted+1],
		"the new primary's commits wait for a replica from its promotion on: %v", calls)
	require.Equal(t, "primary", f.roles(3)[2])
}

// With spec.failover Manual the Database says no server takes writes and waits.
func TestAManualFailoverPolicyLeavesThePrimaryInPlace(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Failover = examplev1.FailoverManual })
	delete(servers.servers, podIP(0))
	f.clock.SetTime(f.clock.Now().Add(time.Hour))
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Nil(t, got.Status.Failover)
	require.Contains(t, condition(got, "Ready").Message, "spec.failover is Manual")
	require.Empty(t, servers.recorded())
	require.Equal(t, "my-database-0", got.Status.Primary)
}

// A controller that restarts after recording a failover goes on with it from status (its
// memory of the primary is gone).
func TestAFailoverGoesOnAcrossControllerRestarts(t *testing.T) {
	f, servers := failingOver(t, nil)
	primaryStops(t, f, servers)
	require.Equal(t, examplev1.FailoverPhasePromoting, f.database().Status.Failover.Phase)

	f.restartController()
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-2", f.database().Status.Primary)

}

// A controller that restarts after promoting but before status says so finds the new
// primary and takes it, without promoting it twice.
func TestAFailoverPromotedBeforeAControllerRestartIsNotPromotedTwice(t *testing.T) {
	f2, servers2 := failingOver(t, nil)
	delete(servers2.servers, podIP(0))
	f2.clock.SetTime(f2.clock.Now().Add(11 * time.Second))
	_, err := f2.reconcile()
	require.NoError(t, err)
	servers2.set(2, testServer{writable: true, position: 130, users: []string{"streamer"}})
	f2.restartController()
	_, err = f2.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-2", f2.database().Status.Primary)
	require.NotContains(t, servers2.recorded(), "promote 10.0.0.3", "not promoted twice")
}

// A former primary that comes back with transactions the new primary lacks is kept out of
// the Services and not pointed at the primary; status says so.
func TestADivergedFormerPrimaryIsKeptOut(t *testing.T) {
	f, servers := failingOver(t, nil)
	delete(servers.servers, podIP(0))
	f.clock.SetTime(f.clock.Now().Add(11 * time.Second))
	for range 2 {
		_, err := f.reconcile()
		require.NoError(t, err)
	}
	f.restartPod(0, "my-database-0-uid-2")
	servers.set(0, testServer{position: 140})
	servers.errant["my-database-0"] = true
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"", "replica", "primary"}, f.roles(3))
	require.NotContains(t, servers.recorded(), "set-source 10.0.0.1 my-database-2")
	require.Contains(t, condition(f.database(), "Replicating").Message, "my-database-0 (has transactions my-database-2 lacks")
	require.Nil(t, f.pod(0).DeletionTimestamp, "an engine that cannot rewind: kept out until cloned anew")

	// An engine that rewinds at the Pod's start (pg_rewind): its Pod is restarted.
	servers.rewinds = true
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotNil(t, f.pod(0).DeletionTimestamp, "restarted, to rewind")
	require.Contains(t, f.events(), "Normal Diverged Restarting my-database-0, which has transactions my-database-2 lacks, to rewind it")
}

// A Database whose primary the controller never saw take writes (servers it never
// reached) is never failed over, and its readiness is the Pods'.
func TestAPrimaryNeverSeenWritableIsNotFailedOver(t *testing.T) {
	registerTestEngine(t)
	servers := failoverServers{testServers: &testServers{servers: map[string]*testServer{}}, errant: map[string]bool{}}
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version = testEngineName, "1"
	f := newFixtureWithOptions(t, database.Options{Observers: map[examplev1.Engine]engine.Observer{testEngineName: servers}}, db)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(3)
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	f.addPods(3)
	for range 3 {
		f.clock.SetTime(f.clock.Now().Add(time.Minute))
		_, err = f.reconcile()
		require.NoError(t, err)
	}
	got := f.database()
	require.Nil(t, got.Status.Failover)
	require.Nil(t, got.Status.PrimaryLastWritableTime)
	require.Equal(t, metav1.ConditionTrue, condition(got, "Ready").Status)
	require.Empty(t, servers.recorded())
	require.Equal(t, ptr.To("my-database-0"), ptr.To(f.configMapPrimary()))
}

// A primary whose Pod restarts (deleted for a roll or by hand, gone, made again) has
// StartupAllowance more before it is failed over: a planned restart is not a failover.
func TestAPrimaryWhosePodRestartsIsNotFailedOverWhileItStarts(t *testing.T) {
	f, servers := failingOver(t, nil)
	delete(servers.servers, podIP(0))
	require.NoError(t, f.kube.Tracker().Delete(pods, namespace, podName(0)))
	f.clock.SetTime(f.clock.Now().Add(30 * time.Second))
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Nil(t, got.Status.Failover, "its Pod is gone: the StatefulSet makes it again")
	require.Equal(t, database.ReasonPrimaryNotWritable, condition(got, "Ready").Reason)

	pod := newPod(f.statefulSet(), 0, "my-database-0-uid-2")
	pod.CreationTimestamp = metav1.NewTime(f.clock.Now())
	require.NoError(t, f.kube.Tracker().Add(pod))
	f.clock.SetTime(f.clock.Now().Add(30 * time.Second))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Nil(t, f.database().Status.Failover, "its new Pod's server is starting")
	require.Empty(t, servers.recorded())

	// It never starts: failed over once the allowance has run out.
	f.clock.SetTime(f.clock.Now().Add(database.StartupAllowance + 11*time.Second))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.FailoverPhasePromoting, f.database().Status.Failover.Phase)
}

// The replica promoted is picked from what the replicas answer once fenced: a transaction
// the primary sent one of them while they were being fenced counts.
func TestAFailoverPicksTheReplicaFromWhatItHoldsOnceFenced(t *testing.T) {
	f, servers := failingOver(t, nil)
	delete(servers.servers, podIP(0))
	servers.stopping = func(all map[string]*testServer, host string) {
		if host == podIP(1) {
			all[host].position = 140
		}
	}
	f.clock.SetTime(f.clock.Now().Add(11 * time.Second))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.database().Status.Failover.To)
}

// Once picked, the replica a failover promotes is never changed: it may have been promoted
// by a pass that did not live to say so. A replica that holds more afterwards (Asynchronous
// durability) does not change it.
func TestAFailoverNeverChangesTheReplicaItPromotes(t *testing.T) {
	f, servers := failingOver(t, nil)
	primaryStops(t, f, servers)
	require.Equal(t, "my-database-2", f.database().Status.Failover.To)
	servers.set(1, testServer{position: 150})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-2", f.database().Status.Primary)
	require.Equal(t, "my-database-2", f.configMapPrimary())
	require.NotContains(t, servers.recorded(), "promote 10.0.0.2")
}

// reconcileRefused runs a pass and requires it to refuse the failover, reachable of the
// needed replicas answering; it returns the Database.
func reconcileRefused(t *testing.T, f *fixture, reachable, needed int32) *examplev1.Database {
	t.Helper()
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, examplev1.FailoverPhaseRefused, got.Status.Failover.Phase)
	require.Equal(t, []int32{reachable, needed}, []int32{got.Status.Failover.ReachableReplicas, got.Status.Failover.NeededReplicas})
	return got
}

// A failover whose replicas answer too few once fenced is refused, and the primary it fenced
// is not labelled primary again in that pass.
func TestAFailoverRefusedAfterFencingKeepsThePrimaryFenced(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Durability = examplev1.DurabilitySynchronous })
	delete(servers.servers, podIP(0))
	servers.stopping = func(all map[string]*testServer, host string) {
		if host == podIP(2) {
			delete(all, podIP(1))
		}
	}
	f.clock.SetTime(f.clock.Now().Add(11 * time.Second))
	got := reconcileRefused(t, f, 1, 2)
	require.Equal(t, []string{"stop-following 10.0.0.2", "stop-following 10.0.0.3"}, servers.recorded())
	require.Equal(t, "", f.roles(3)[0], "fenced")
	require.Equal(t, "my-database-0", got.Status.Primary)
	require.NotContains(t, servers.recorded(), "promote 10.0.0.3")
}

// While the primary takes no writes, a scale-down removes no Pod: any replica may be the one
// holding every acknowledged commit.
func TestAScaleDownWaitsWhileThePrimaryTakesNoWrites(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Failover = examplev1.FailoverManual })
	delete(servers.servers, podIP(0))
	f.clock.SetTime(f.clock.Now().Add(time.Second))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.NotNil(t, f.database().Status.PrimaryLastWritableTime)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](2) })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "held while the primary takes no writes")

	servers.set(0, testServer{writable: true, position: 130, users: []string{"streamer"}})
	_, err = f.reconcile()
	require.NoError(t, err)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(2), *f.statefulSet().Spec.Replicas, "scaled down once it takes writes again")
}

// With Synchronous durability, the replica a failover picked is not promoted, nor taken for
// promoted, while another replica holds transactions it lacks: a server that came back
// empty (its data claim deleted, initialised anew) would lose every acknowledged commit.
func TestAFailoverDoesNotTakeAnEmptyServerForThePromotedReplica(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Durability = examplev1.DurabilitySynchronous })
	primaryStops(t, f, servers)
	require.Equal(t, "my-database-2", f.database().Status.Failover.To)

	// Initialised anew, as the primary the ConfigMap names.
	servers.set(2, testServer{writable: true, users: []string{"streamer"}})
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, "my-database-0", got.Status.Primary, "not taken for the promoted replica")
	require.Equal(t, examplev1.FailoverPhasePromoting, got.Status.Failover.Phase)
	require.Contains(t, condition(got, "Ready").Message, "my-database-1 holds transactions my-database-2 lacks")
	require.NotEqual(t, "primary", f.roles(3)[2])

	// As a replica, empty: not promoted.
	servers.set(2, testServer{position: 0})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, servers.recorded(), "promote 10.0.0.3")
	require.Equal(t, "my-database-0", f.database().Status.Primary)
}

// primaryStops makes the primary, my-database-0, stop answering, lets the failover delay run
// out and reconciles once: the pass that decides on the failover.
func primaryStops(t *testing.T, f *fixture, servers *failoverServers) {
	t.Helper()
	delete(servers.servers, podIP(0))
	f.clock.SetTime(f.clock.Now().Add(11 * time.Second))
	_, err := f.reconcile()
	require.NoError(t, err)
}

// A failover from the Pod spec.primary names does not move the primary back to it once it
// streams again: spec.primary was asked before the failover (status.lastFailoverTime). A
// request to move it made since (status.switchover, which the API server records) is acted
// on.
func TestAFailoverFromSpecPrimaryDoesNotMoveThePrimaryBack(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Primary = "my-database-0" })
	primaryStops(t, f, servers)
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, "my-database-2", got.Status.Primary)
	require.Equal(t, metav1.NewTime(f.clock.Now()).Rfc3339Copy(), *got.Status.LastFailoverTime)

	f.restartPod(0, "my-database-0-uid-2")
	servers.set(0, testServer{position: 130, source: "my-database-2"})
	for range 3 {
		f.clock.SetTime(f.clock.Now().Add(5 * time.Second))
		_, err = f.reconcile()
		require.NoError(t, err)
	}
	got = f.database()
	require.Equal(t, "my-database-2", got.Status.Primary)
	require.Nil(t, got.Status.SwitchoverProgress, "no switchover back to my-database-0")
	require.Equal(t, "my-database-2", f.configMapPrimary())
	require.Equal(t, metav1.ConditionTrue, condition(got, "Ready").Status, condition(got, "Ready").Message)

	// Asked again since the failover: the switchover begins.
	f.updateDatabase(func(db *examplev1.Database) {
		db.Status.Switchover = &examplev1.DatabaseSwitchoverStatus{RequestedBy: "jane", RequestedAt: metav1.NewTime(f.clock.Now()).Rfc3339Copy(), Target: "my-database-0"}
	})
	_, err = f.reconcile()
	require.NoError(t, err)
	sp := f.database().Status.SwitchoverProgress
	require.NotNil(t, sp)
	require.Equal(t, []string{"my-database-2", "my-database-0"}, []string{sp.From, sp.To})
}

// A request to move the primary recorded in the second the failover completes, before it,
// is superseded by it whatever the clocks say: the failover is recorded one second after
// the request the pass read (status.lastFailoverTime), and the primary does not move back.
func TestARequestInTheFailoversSecondDoesNotMoveThePrimaryBack(t *testing.T) {
	f, servers := failingOver(t, nil)
	primaryStops(t, f, servers)
	require.Equal(t, examplev1.FailoverPhasePromoting, f.database().Status.Failover.Phase)
	asked := metav1.NewTime(f.clock.Now()).Rfc3339Copy()
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.Primary = "my-database-0"
		db.Status.Switchover = &examplev1.DatabaseSwitchoverStatus{RequestedBy: "gitops", RequestedAt: asked, Target: "my-database-0"}
	})
	f.clock.SetTime(f.clock.Now().Add(300 * time.Millisecond))
	_, err := f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, "my-database-2", got.Status.Primary)
	require.True(t, asked.Add(time.Second).Equal(got.Status.LastFailoverTime.Time), "a second after the request: %v", got.Status.LastFailoverTime)

	f.restartPod(0, "my-database-0-uid-2")
	servers.set(0, testServer{position: 130, source: "my-database-2"})
	for range 3 {
		f.clock.SetTime(f.clock.Now().Add(5 * time.Second))
		_, err = f.reconcile()
		require.NoError(t, err)
	}
	require.Nil(t, f.database().Status.SwitchoverProgress, "no switchover back to the Pod that failed")
}

// A primary whose commits wait for replicas' acknowledgements for CommitWaitLimit or longer,
// at two passes in a row, takes no write a client sees acknowledged: Ready is False and the
// Database Degraded, with how many wait and for how long, until they no longer do. A wait
// shorter than that is a commit's round trip to a replica.
func TestAPrimaryWhoseCommitsWaitForReplicasIsNotReady(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Durability = examplev1.DurabilitySynchronous })
	primary := testServer{writable: true, position: 130, users: []string{"streamer"}, commitsWaiting: 3, longestWait: database.CommitWaitLimit - time.Second}
	servers.set(0, primary)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, metav1.ConditionTrue, condition(f.database(), "Ready").Status, "commits waiting for less than the limit")

	// Seen once, it may be a long statement that began to wait just now: not yet.
	primary.longestWait = database.CommitWaitLimit + 1500*time.Millisecond
	servers.set(0, primary)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, metav1.ConditionTrue, condition(f.database(), "Ready").Status, "commits seen waiting at one pass only")
	_, err = f.reconcile()
	require.NoError(t, err)
	got := f.database()
	ready := condition(got, "Ready")
	require.Equal(t, metav1.ConditionFalse, ready.Status)
	require.Equal(t, database.ReasonCommitsWaiting, ready.Reason)
	require.Equal(t, "3 sessions of my-database-0, the primary, wait for a replica to acknowledge their commit, one for 7s: "+
		"no write is acknowledged until a replica has it", ready.Message)
	require.Equal(t, metav1.ConditionTrue, condition(got, "Degraded").Status)
	require.Equal(t, examplev1.DatabasePhaseDegraded, got.Status.Phase)
	require.Equal(t, "my-database-0", got.Status.Primary, "no failover: the primary takes writes")
	require.Nil(t, got.Status.Failover)

	servers.set(0, testServer{writable: true, position: 131, users: []string{"streamer"}})
	_, err = f.reconcile()
	require.NoError(t, err)
	got = f.database()
	require.Equal(t, metav1.ConditionTrue, condition(got, "Ready").Status)
	require.Equal(t, examplev1.DatabasePhaseReady, got.Status.Phase)
}

// A scale-down of a Synchronous Database removes no replica that may hold the one copy of an
// acknowledged commit but the primary's: the Pods it removes stop following the primary, whose
// commits no longer wait for them, and the StatefulSet keeps them until a replica kept holds
// every transaction they hold. Removed earlier, a failover from the primary would promote a
// replica that lacks the commit.
func TestASynchronousScaleDownWaitsForAKeptReplicaToHoldWhatItRemoves(t *testing.T) {
	f, servers := failingOver(t, func(db *examplev1.Database) { db.Spec.Durability = examplev1.DurabilitySynchronous })
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](2) })
	for range 2 {
		_, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas, "my-database-1 (120) lacks what my-database-2 (130) holds")
	}
	calls := servers.recorded()
	require.Contains(t, calls, "stop-following 10.0.0.3")
	require.Contains(t, calls, "synchronous 10.0.0.1 1 my-database-1", "the primary's commits wait for the replica kept only")
	require.NotContains(t, calls, "set-source 10.0.0.3 my-database-0", "not pointed at the primary again")

	// The kept replica catches up.
	servers.set(1, testServer{position: 130, source: "my-database-0"})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Contains(t, f.events(), "Normal Updated Scaling down: every transaction of my-database-2, stopped from following the primary, is on a replica kept")
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(2), *f.statefulSet().Spec.Replicas, "scaled down once drained")
}

// A pass whose cached Database predates the status this process last wrote (the informer has
// not delivered it yet) acts on the API server's copy: from the cached one, which records no
// failover, it would label the fenced primary primary again once it answers, and the client
// Service would route to it beside the replica being promoted.
func TestAPassFromAStaleCachedDatabaseDoesNotUndoAFailover(t *testing.T) {
	f, servers := failingOver(t, nil)
	before := f.database()
	primaryStops(t, f, servers)
	require.Equal(t, examplev1.FailoverPhasePromoting, f.database().Status.Failover.Phase)
	f.pin(databases, name, before)
	// The old primary answers again, writable, before the replica is promoted.
	servers.set(0, testServer{writable: true, position: 131, users: []string{"streamer"}})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.NotEqual(t, "primary", f.roles(3)[0], "the fenced primary is not labelled primary again")
	require.Equal(t, "my-database-2", f.database().Status.Failover.To)
}

// setContainerRunning plays the kubelet: the database container of the Pod of ordinal
// reported running (true) or terminated.
func (f *fixture) setContainerRunning(ordinal int, running bool) {
	f.t.Helper()
	pod := f.pod(ordinal).DeepCopy()
	s := corev1.ContainerStatus{Name: engine.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if !running {
		s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{s}
	require.NoError(f.t, f.kube.Tracker().Update(pods, pod, namespace))
}

// A primary that does not answer may be hung rather than gone, and would take writes again
// if it resumed: the failover deletes its Pod and promotes the replica only once the kubelet
// reports its server stopped, or FencedStopWait after the deletion when the node does not
// say (its kubelet may not answer at all).
func TestAFailoverPromotesOnceTheFencedPrimaryIsStopped(t *testing.T) {
	for _, stops := range []bool{true, false} {
		t.Run(map[bool]string{true: "the kubelet stops it", false: "the node does not say"}[stops], func(t *testing.T) {
			f, servers := failingOver(t, nil)
			f.setContainerRunning(0, true)
			f.clock.SetTime(f.clock.Now().Add(time.Second))
			delete(servers.servers, podIP(0)) // hung: it does not answer
			_, err := f.reconcile()
			require.NoError(t, err)
			f.clock.SetTime(f.clock.Now().Add(9 * time.Second))
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, examplev1.FailoverPhasePromoting, f.database().Status.Failover.Phase)

			// The pass that deletes the Pod does not promote: its server still runs.
			result, err := f.reconcile()
			require.NoError(t, err)
			require.NotNil(t, f.pod(0).DeletionTimestamp, "the old primary's Pod is deleted")
			require.Equal(t, "my-database-2", f.configMapPrimary())
			require.NotContains(t, servers.recorded(), "promote 10.0.0.3")
			got := f.database()
			require.Equal(t, "my-database-0", got.Status.Primary)
			require.Equal(t, examplev1.FailoverPhasePromoting, got.Status.Failover.Phase)
			require.Contains(t, condition(got, "Ready").Message, "waiting up to 10s for the kubelet to stop my-database-0, deleted, whose server does not answer")
			require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterSwitchover}, result, "asked again soon: the kubelet's report wakes it first")

			// The API server's deletion as it is: its time, the grace period after it.
			pod := f.pod(0).DeepCopy()
			pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = ptr.To(metav1.NewTime(f.clock.Now().Add(time.Second))), ptr.To[int64](database.FencedPodGracePeriod)
			require.NoError(t, f.kube.Tracker().Update(pods, pod, namespace))
			f.clock.SetTime(f.clock.Now().Add(4 * time.Second))
			result, err = f.reconcile()
			require.NoError(t, err)
			require.NotContains(t, servers.recorded(), "promote 10.0.0.3")
			require.Contains(t, condition(f.database(), "Ready").Message, "waiting up to 6s for the kubelet")

			if stops {
				f.setContainerRunning(0, false)
			} else {
				require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterSwitchover}, result)
				f.clock.SetTime(f.clock.Now().Add(5 * time.Second))
				_, err = f.reconcile()
				require.NoError(t, err)
				require.NotContains(t, servers.recorded(), "promote 10.0.0.3", "9 s after the deletion")
				f.clock.SetTime(f.clock.Now().Add(time.Second))
			}
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Contains(t, servers.recorded(), "promote 10.0.0.3")
			got = f.database()
			require.Equal(t, "my-database-2", got.Status.Primary)
			require.Nil(t, got.Status.Failover)
			require.Equal(t, []string{"replica", "replica", "primary"}, f.roles(3))
		})
	}
}
