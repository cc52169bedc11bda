package database_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
)

// requestRestart plays databases/restart: status.restart asked for by alice at requestedAt,
// with reason "test".
func (f *fixture) requestRestart(requestedAt time.Time) {
	f.t.Helper()
	f.requestRestartBecause(requestedAt, "test")
}

// requestRestartBecause is requestRestart with reason.
func (f *fixture) requestRestartBecause(requestedAt time.Time, reason string) {
	f.t.Helper()
	f.updateDatabase(func(db *examplev1.Database) {
		db.Status.Restart = &examplev1.DatabaseRestartStatus{RequestedBy: "alice", RequestedAt: metav1.NewMicroTime(requestedAt), Reason: reason}
	})
}

// The Event of a restart's stamp says who asked, when and why: the reason Go-quoted, cut to
// MaxEventRestartReasonBytes on a character boundary; without a reason it says none.
func TestTheRestartEventCarriesItsReason(t *testing.T) {
	long := strings.Repeat("x", database.MaxEventRestartReasonBytes-1) + "é and more"
	for reason, want := range map[string]string{
		"":                            "rolling restart requested by alice at 2026-03-01T12:00:30Z",
		`pick up the "new" ConfigMap`: `rolling restart requested by alice at 2026-03-01T12:00:30Z, reason "pick up the \"new\" ConfigMap"`,
		long:                          `rolling restart requested by alice at 2026-03-01T12:00:30Z, reason "` + strings.Repeat("x", database.MaxEventRestartReasonBytes-1) + `…"`,
	} {
		db := exampleDatabase()
		db.Status.Primary = podName(1)
		f, fi := replicating(t, 3, db)
		fi.set(1, primaryState(podName(0), podName(2)))
		fi.set(0, standbyState(100, 100))
		_, err := f.reconcile()
		require.NoError(t, err)

		f.requestRestartBecause(start.Add(30*time.Second), reason)
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Contains(t, f.events(), "Normal Updated Updated StatefulSet my-database: "+want, "reason %q", reason)
	}
}

// A restart asked for through databases/restart stamps the Pod template, and the new
// revision rolls one Pod at a time, the replicas from the highest ordinal down and the
// primary last; it is completed once every Pod is at the new revision and Ready.
func TestARestartRollsTheReplicasFirstThePrimaryLastAndCompletes(t *testing.T) {
	db := exampleDatabase()
	db.Status.Primary = podName(1)
	f, fi := replicating(t, 3, db)
	fi.set(1, primaryState(podName(0), podName(2)))
	fi.set(0, standbyState(100, 100))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.podDeletions())

	requested := start.Add(30*time.Second + 123456*time.Microsecond)
	f.requestRestart(requested)
	_, err = f.reconcile()
	require.NoError(t, err)
	sts := f.statefulSet()
	require.Equal(t, "2026-03-01T12:00:30.123456Z", sts.Spec.Template.Annotations[specs.RestartedAtAnnotation])
	require.Contains(t, f.events(), `Normal Updated Updated StatefulSet my-database: rolling restart requested by alice at 2026-03-01T12:00:30Z, reason "test"`)
	got := f.database()
	require.Nil(t, got.Status.Restart.CompletedAt)
	require.Equal(t, "Restarting", condition(got, "Progressing").Reason)
	require.Equal(t, metav1.ConditionTrue, condition(got, "Progressing").Status)

	// The StatefulSet controller sees the new template: a new update revision. Until the
	// restart is done, Pods of both revisions serve the spec: the Database stays Ready, and
	// counts every ready Pod, while one is down.
	f.setStatefulSetStatus(2, "rev-1", "rev-2")
	for n, ordinal := range []int{2, 0, 1} {
		_, err := f.reconcile()
		require.NoError(t, err)
		got := f.database()
		require.Equal(t, examplev1.DatabasePhaseReady, got.Status.Phase, "restart %d", n)
		require.Equal(t, int32(2), got.Status.ReadyReplicas, "restart %d", n)
		require.Equal(t, metav1.ConditionTrue, condition(got, "Ready").Status, "restart %d", n)
		require.Equal(t, "Restarting", condition(got, "Ready").Reason, "restart %d", n)
		require.Equal(t, "2/3 replicas ready during a rolling restart", condition(got, "Ready").Message, "restart %d", n)
		require.Equal(t, []string{podName(ordinal) + " uid=" + string(f.pod(ordinal).UID)}, f.podDeletions(), "restart %d", n)
		require.Nil(t, f.database().Status.Restart.CompletedAt, "restart %d", n)
		_, err = f.reconcile()
		require.NoError(t, err)
		require.Empty(t, f.podDeletions(), "one Pod at a time")
		f.restartPod(ordinal, types.UID(fmt.Sprintf("%s-rev-2", podName(ordinal))))
	}
	// Every Pod is new and Ready; the StatefulSet controller completes the update.
	f.setStatefulSetStatus(3, "rev-2", "rev-2")
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.podDeletions())
	got = f.database()
	require.NotNil(t, got.Status.Restart.CompletedAt)
	require.Equal(t, "alice", got.Status.Restart.RequestedBy)
	require.Equal(t, examplev1.DatabasePhaseReady, got.Status.Phase)
	require.NotEqual(t, "Restarting", condition(got, "Progressing").Reason)
	require.Contains(t, f.events(), "Normal RestartCompleted Rolling restart requested by alice at 2026-03-01T12:00:30Z completed: every Pod was recreated and is Ready")

	// A completed restart restarts nothing again.
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.podDeletions())
	require.Empty(t, f.events())
}

// A restart is not completed while the StatefulSet controller has not observed the stamped
// template, nor while a Pod is at the old revision or not Ready.
func TestARestartIsNotCompletedBeforeEveryPodIsNewAndReady(t *testing.T) {
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMongoDB, "7.0"
	f := newFixture(t, db)
	f.ready()
	requested := start.Add(time.Minute)
	f.requestRestart(requested)
	_, err := f.reconcile()
	require.NoError(t, err)
	sts := f.statefulSet()
	require.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, sts.Spec.UpdateStrategy.Type, "the controller rolls the Pods of a replica set")
	require.Equal(t, "2026-03-01T12:01:00.000000Z", sts.Spec.Template.Annotations[specs.RestartedAtAnnotation])

	for _, tc := range []struct {
		name    string
		observe func(*appsv1.StatefulSet)
	}{
		{"template not observed", func(s *appsv1.StatefulSet) { s.Status.ObservedGeneration = s.Generation - 1 }},
		{"a Pod at the old revision", func(s *appsv1.StatefulSet) {
			s.Status.UpdatedReplicas, s.Status.CurrentRevision, s.Status.UpdateRevision = 2, "rev-1", "rev-2"
		}},
		{"a Pod not Ready", func(s *appsv1.StatefulSet) {
			s.Status.ReadyReplicas, s.Status.CurrentRevision, s.Status.UpdateRevision = 2, "rev-2", "rev-2"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := f.statefulSet().DeepCopy()
			s.Generation = 2
			s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentReplicas: 3}
			tc.observe(s)
			require.NoError(t, f.kube.Tracker().Update(statefulSets, s, namespace))
			_, err := f.reconcile()
			require.NoError(t, err)
			got := f.database()
			require.Nil(t, got.Status.Restart.CompletedAt)
			require.Equal(t, "Restarting", condition(got, "Progressing").Reason)
		})
	}

	s := f.statefulSet().DeepCopy()
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentReplicas: 3, CurrentRevision: "rev-2", UpdateRevision: "rev-2"}
	require.NoError(t, f.kube.Tracker().Update(statefulSets, s, namespace))
	// Done within the second it was asked for: completedAt keeps the microseconds, so it
	// does not read earlier than requestedAt.
	f.clock.SetTime(requested.Add(400*time.Millisecond + 7*time.Microsecond + 500*time.Nanosecond))
	_, err = f.reconcile()
	require.NoError(t, err)
	got := f.database().Status.Restart
	require.NotNil(t, got.CompletedAt)
	require.Equal(t, requested.Add(400*time.Millisecond+7*time.Microsecond), got.CompletedAt.Time.UTC())
	require.False(t, got.CompletedAt.Before(&got.RequestedAt))
}
