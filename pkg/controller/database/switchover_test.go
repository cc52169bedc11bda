package database_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
)

// restartController plays a controller process that restarts: a new Reconciler, with nothing
// in memory, over the same API server (the fake clientsets), informers (the listers) and
// servers, and a new Event recorder.
func (f *fixture) restartController() {
	f.t.Helper()
	f.recorder = record.NewFakeRecorder(100)
	f.newReconciler()
}

// setPodPhase plays the kubelet: the Pod of ordinal in phase, Ready only when Running.
func (f *fixture) setPodPhase(ordinal int, phase corev1.PodPhase) {
	f.t.Helper()
	pod := f.pod(ordinal).DeepCopy()
	pod.Status.Phase = phase
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if phase == corev1.PodRunning {
		pod.Status.Conditions[0].Status = corev1.ConditionTrue
	}
	require.NoError(f.t, f.kube.Tracker().Update(pods, pod, namespace))
}

// startSwitchoverTo1 asks for my-database-1 as the primary while it does not stream yet,
// so a pass records in status that a switchover is under way and waits; then it streams.
func startSwitchoverTo1(t *testing.T, f *fixture, fi *fakeInstances) {
	t.Helper()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	st := primaryState("my-database-2")
	st.Standbys["my-database-1"] = pgclient.Standby{State: "catchup"}
	fi.set(0, st)
	_, err := f.reconcile()
	require.NoError(t, err)
	requireSwitchover(t, f.database(), "switching over from my-database-0 to my-database-1: waiting for my-database-1 to stream from my-database-0")
	fi.set(0, primaryState("my-database-1", "my-database-2"))
}

// switchoverTo1 asks, on a Database whose first reconcile is done, for my-database-1 as the
// primary (startSwitchoverTo1), and runs the pass of step 1: the ConfigMap names it,
// my-database-0 is stopped.
func switchoverTo1(t *testing.T, f *fixture, fi *fakeInstances) {
	t.Helper()
	startSwitchoverTo1(t, f, fi)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.NotNil(t, f.pod(0).DeletionTimestamp, "step 1 stopped my-database-0")
}

// toStep3 runs a switchover from my-database-0 to my-database-1 through the controller up to
// step 3: step 1's pass is done, my-database-0 is back as a standby whose replay ends at 100
// (its shutdown checkpoint), and my-database-1 has received WAL up to received.
func toStep3(t *testing.T, f *fixture, fi *fakeInstances, received uint64) {
	t.Helper()
	switchoverTo1(t, f, fi)
	f.restartPod(0, "my-database-0-uid-2")
	fi.set(0, standbyState(0, 100))
	fi.set(1, standbyState(received, received))
	fi.set(2, standbyState(received, received))
	fi.reset()
}

// requireSwitchover checks what status says of a switchover from my-database-0 to
// my-database-1 that waits for what: status.primary is still my-database-0,
// status.switchoverProgress records the switchover, Progressing True and Replicating False
// with reason Switchover and the message.
func requireSwitchover(t *testing.T, db *examplev1.Database, message string) {
	t.Helper()
	require.Equal(t, "my-database-0", db.Status.Primary, "not moved yet")
	sp := db.Status.SwitchoverProgress
	require.NotNil(t, sp, "status.switchoverProgress")
	require.Equal(t, []string{"my-database-0", "my-database-1"}, []string{sp.From, sp.To})
	for typ, status := range map[string]metav1.ConditionStatus{"Progressing": metav1.ConditionTrue, "Replicating": metav1.ConditionFalse} {
		c := condition(db, typ)
		require.Equal(t, status, c.Status, typ)
		require.Equal(t, examplev1.ReasonSwitchover, c.Reason, typ)
		require.Equal(t, message, c.Message, typ)
	}
}

// With spec.failover Manual, a switchover asked for while the primary does not answer as
// one (down, refusing the Secret's password, read-only, its Pod not running) waits, and
// stops, names or promotes nothing; once it answers, the switchover starts.
func TestASwitchoverAskedWhileThePrimaryDoesNotAnswerStopsNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*fixture, *fakeInstances)
		// role is the primary's role label meanwhile: a server that may still take writes
		// keeps it, one that answers read-only has none.
		role string
	}{
		{"not answering", func(_ *fixture, fi *fakeInstances) { fi.unset(0) }, "primary"},
		{"refusing the Secret's password", func(_ *fixture, fi *fakeInstances) {
			fi.mu.Lock()
			fi.refused[podIP(0)] = true
			fi.mu.Unlock()
		}, "primary"},
		{"answering as a standby", func(_ *fixture, fi *fakeInstances) { fi.set(0, standbyState(100, 100)) }, ""},
		{"its Pod not running", func(f *fixture, _ *fakeInstances) { f.setPodPhase(0, corev1.PodPending) }, "primary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.Primary, db.Spec.Failover = "my-database-1", examplev1.FailoverManual
			})
			tc.break_(f, fi)
			fi.reset()

			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterPrimaryCheck}, result, "the primary is asked again soon")
			require.Equal(t, "my-database-0", f.configMapPrimary())
			require.NotContains(t, f.actions, "patch configmaps my-database-replication", "the ConfigMap is not written")
			require.Empty(t, f.podDeletions())
			require.Empty(t, fi.recorded(), "nothing promoted, nothing written to any server")
			require.Equal(t, []string{tc.role, "replica", "replica"}, f.roles(3))
			requireSwitchover(t, f.database(),
				"switching over from my-database-0 to my-database-1: waiting for my-database-0 to answer as the primary")

			// The primary answers again: step 1.
			f.setPodPhase(0, corev1.PodRunning)
			fi.mu.Lock()
			fi.refused = map[string]bool{}
			fi.mu.Unlock()
			fi.set(0, primaryState("my-database-1", "my-database-2"))
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, "my-database-1", f.configMapPrimary())
			require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
		})
	}
}

// The primary is stopped (step 1) only for a target that answers as a standby and streams
// from it: the primary's view of its standbys (PostgreSQL's pg_stat_replication) may still
// list one whose server the controller cannot reach, or that took writes of its own, and
// step 3 cannot promote a target the controller does not reach, nor may it promote one
// that is not a standby.
func TestTheSwitchoverTargetMustAnswerAsAStandbyBeforeThePrimaryIsStopped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*fixture, *fakeInstances)
	}{
		{"not answering", func(_ *fixture, fi *fakeInstances) { fi.unset(1) }},
		{"its Pod not running", func(f *fixture, _ *fakeInstances) { f.setPodPhase(1, corev1.PodPending) }},
		{"answering as a primary of its own", func(_ *fixture, fi *fakeInstances) { fi.set(1, primaryState()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
			tc.break_(f, fi)
			// The primary still lists my-database-1 streaming.
			fi.set(0, primaryState("my-database-1", "my-database-2"))
			fi.reset()

			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, "my-database-0", f.configMapPrimary())
			require.Empty(t, f.podDeletions(), "the primary keeps serving")
			require.Equal(t, "primary", f.pod(0).Labels[specs.RoleLabel])
			require.Empty(t, filter(fi.recorded(), "promote"))
			requireSwitchover(t, f.database(), "switching over from my-database-0 to my-database-1: waiting for my-database-1 to stream from my-database-0")
		})
	}

	t.Run("MySQL, not answering", func(t *testing.T) {
		f, fm := replicatingMySQL(t)
		_, err := f.reconcile()
		require.NoError(t, err)
		f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
		fm.unset(1)
		fm.reset()
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Equal(t, "my-database-0", f.configMapPrimary())
		require.Empty(t, f.podDeletions())
		require.Empty(t, fm.recorded())
		requireSwitchover(t, f.database(), "switching over from my-database-0 to my-database-1: waiting for my-database-1 to stream from my-database-0")
	})
}

// Once the old primary is stopped (steps 2 and 3), a server that stops answering (refuses
// connections, hangs past the controller's bound on asking, its Pod restarts) holds the
// switchover where it is: nothing is promoted, no Pod serves as the primary, status says who
// is waited for and the Database is Degraded; when it answers again, the switchover goes on.
func TestAServerThatStopsAnsweringMidSwitchoverHoldsIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*fixture, *fakeInstances)
		heal   func(*fixture, *fakeInstances)
		what   string
	}{
		{
			"the target refuses connections",
			func(_ *fixture, fi *fakeInstances) { fi.unset(1) },
			func(_ *fixture, fi *fakeInstances) { fi.set(1, standbyState(100, 100)) },
			"waiting for my-database-1 to answer",
		},
		{
			"the target hangs",
			func(_ *fixture, fi *fakeInstances) { fi.hang(1, true) },
			func(_ *fixture, fi *fakeInstances) { fi.hang(1, false) },
			"waiting for my-database-1 to answer",
		},
		{
			"the target's Pod restarts",
			func(f *fixture, _ *fakeInstances) { f.setPodPhase(1, corev1.PodPending) },
			func(f *fixture, _ *fakeInstances) { f.setPodPhase(1, corev1.PodRunning) },
			"waiting for my-database-1 to answer",
		},
		{
			"the old primary refuses connections",
			func(_ *fixture, fi *fakeInstances) { fi.unset(0) },
			func(_ *fixture, fi *fakeInstances) { fi.set(0, standbyState(0, 100)) },
			"waiting for my-database-0 to restart as a standby",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			toStep3(t, f, fi, 100)
			tc.break_(f, fi)

			began := time.Now()
			result, err := f.reconcile()
			require.NoError(t, err)
			t.Logf("the pass took %v", time.Since(began))
			require.Equal(t, database.Result{RequeueAfter: database.RequeueAfterSwitchover}, result)
			require.Empty(t, fi.recorded(), "nothing promoted")
			require.Equal(t, "my-database-1", f.configMapPrimary(), "the switchover is not undone")
			require.NotContains(t, f.roles(3), "primary", "no server takes writes: the client Service has no endpoint")
			db := f.database()
			requireSwitchover(t, db, "switching over from my-database-0 to my-database-1: "+tc.what)
			require.Equal(t, examplev1.DatabasePhaseDegraded, db.Status.Phase)
			require.Equal(t, examplev1.ReasonSwitchover, condition(db, "Ready").Reason)
			require.Equal(t, metav1.ConditionFalse, condition(db, "Ready").Status)

			tc.heal(f, fi)
			fi.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, "promote 10.0.0.2", fi.recorded()[0])
			require.Equal(t, "my-database-1", f.database().Status.Primary)
			require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
		})
	}
}

// A controller that stops after promoting the target and before status names it (status is
// written last) finds, restarted with nothing in memory, the target answering as a primary:
// it confirms it, without promoting it again, undoing the switchover or warning of a
// ConfigMap it did not ask for.
func TestAControllerRestartedBetweenPromotionAndStatusConfirmsThePromotedPrimary(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("the API server is shutting down")
	for _, tc := range []struct {
		name string
		// crash makes the pass of the promotion end where the controller stopped.
		crash func(*fixture)
		roles []string
	}{
		{"before the role labels", func(f *fixture) {
			f.inject("patch", "pods", 1, unavailable)
			f.inject("update", "databases/status", 1, unavailable)
		}, []string{"", "replica", "replica"}},
		{"after the role labels", func(f *fixture) {
			f.inject("update", "databases/status", 1, unavailable)
		}, []string{"replica", "primary", "replica"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			_, err := f.reconcile()
			require.NoError(t, err)
			toStep3(t, f, fi, 90)
			_, err = f.reconcile() // step 3 waits: status says so
			require.NoError(t, err)
			requireSwitchover(t, f.database(), "switching over from my-database-0 to my-database-1: my-database-1 has WAL up to 90, my-database-0's ends at 100")

			fi.set(1, standbyState(100, 100))
			tc.crash(f)
			fi.reset()
			_, err = f.reconcile()
			require.Error(t, err)
			require.Equal(t, []string{"promote 10.0.0.2"}, filter(fi.recorded(), "promote"))
			require.Equal(t, tc.roles, f.roles(3))
			require.Equal(t, "my-database-0", f.database().Status.Primary, "status not written")

			f.restartController()
			fi.set(1, primaryState("my-database-0", "my-database-2"))
			fi.set(0, standbyState(100, 100))
			fi.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Empty(t, filter(fi.recorded(), "promote"), "promoted once")
			require.Empty(t, f.podDeletions())
			require.Equal(t, "my-database-1", f.configMapPrimary())
			db := f.database()
			require.Equal(t, "my-database-1", db.Status.Primary)
			require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
			require.NotEqual(t, examplev1.ReasonSwitchover, condition(db, "Progressing").Reason)
			require.Nil(t, db.Status.SwitchoverProgress, "the switchover is done")
			require.Equal(t, "every replica streams from my-database-1", condition(db, "Replicating").Message)
			require.Empty(t, f.events(), "no warning, nothing promoted")
		})
	}
}

// A controller that stops after step 1's writes (the ConfigMap names the target, the old
// primary's Pod is deleted) and before the status that says a switchover is under way,
// finishes the switchover once restarted: its own ConfigMap is not taken for one edited by
// hand and set back, which would leave the old primary, restarted as a standby of the target,
// and the target, standbys of each other, with no primary.
func TestAControllerRestartedAfterStoppingThePrimaryFinishesTheSwitchover(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	for i := 0; ; i++ {
		require.Less(t, i, 3, "the switchover does not start")
		// A pass whose status write fails, by a controller that stops then.
		f.inject("update", "databases/status", 1, apierrors.NewServiceUnavailable("the API server is shutting down"))
		_, err = f.reconcile()
		if len(f.podDeletions()) > 0 {
			require.Error(t, err)
			break
		}
		require.Error(t, err, "a pass that stops nothing")
		require.Equal(t, "my-database-0", f.configMapPrimary())
		f.restartController()
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Empty(t, f.podDeletions())
	}
	require.Equal(t, "my-database-1", f.configMapPrimary())

	f.restartController()
	f.restartPod(0, "my-database-0-uid-2")
	fi.set(0, standbyState(0, 100))
	fi.set(1, standbyState(100, 100))
	fi.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary(), "not set back")
	require.NotContains(t, strings.Join(f.events(), "\n"), "did not ask for")
	require.Equal(t, []string{"promote 10.0.0.2"}, filter(fi.recorded(), "promote"))
	require.Equal(t, "my-database-1", f.database().Status.Primary)
}

// A primary whose Pod is already being deleted when it is fenced (the Pod cache had not seen
// the deletion when the pass began) loses its role label and is not deleted again: its
// deletion is left to finish.
func TestAPrimaryWhosePodIsAlreadyBeingDeletedIsNotDeletedAgain(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	startSwitchoverTo1(t, f, fi)
	stale := f.pod(0).DeepCopy()
	deleting := stale.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: start}
	require.NoError(t, f.kube.Tracker().Update(pods, deleting, namespace))
	f.pin(pods, podName(0), stale)
	fi.reset()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.Equal(t, "", f.pod(0).Labels[specs.RoleLabel], "turned away from the client Service")
	require.Empty(t, f.podDeletions())
	requireSwitchover(t, f.database(), "switching over from my-database-0 to my-database-1: stopping my-database-0")
}

// A role label written to a Pod that is gone, or was made again (its UID differs from the
// one the pass saw), is skipped, and the pass goes on: the next pass sees the new Pod. Any
// other refusal of the patch ends the pass with the error.
func TestARoleLabelForAPodGoneOrMadeAgainIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		// fails is the error the pass returns, "" for none.
		fails string
	}{
		{"gone", apierrors.NewNotFound(corev1.Resource("pods"), podName(0)), ""},
		{"made again", apierrors.NewConflict(corev1.Resource("pods"), podName(0), errors.New("the UID in the precondition does not match")), ""},
		{"refused", apierrors.NewInternalError(errors.New("etcd timeout")), `label Pod "my-database-0" database.example.com/role="primary": Internal error occurred: etcd timeout`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := replicating(t, 3, nil)
			f.inject("patch", "pods", 1, tc.err)
			_, err := f.reconcile()
			if tc.fails == "" {
				require.NoError(t, err)
				require.Equal(t, []string{"", "replica", "replica"}, f.roles(3), "the Pods after it are labelled")
				return
			}
			require.EqualError(t, err, tc.fails)
			require.Equal(t, []string{"", "", ""}, f.roles(3), "the Pods after it are not")
			require.Contains(t, f.events(), "Warning ReconcileError "+tc.fails)
			require.Equal(t, examplev1.ReasonReconcileError, condition(f.database(), "Progressing").Reason)
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
		})
	}
}
