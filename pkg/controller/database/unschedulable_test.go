package database_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
)

// insufficientCPU is the scheduler's message for a Pod that no node has the CPU for, the
// real node of the local cluster being full and the simulated one tainted for it.
const insufficientCPU = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint " +
	"{localcluster.example.com/real-node: true}. preemption: 0/2 nodes are available: " +
	"1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."

// unboundClaims is the scheduler's message for a Pod whose claims of an Immediate
// StorageClass are not bound yet.
const unboundClaims = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. " +
	"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."

// unschedulablePod plays the StatefulSet controller and the scheduler: the Pod of ordinal of
// the example Database, controlled by its StatefulSet, Pending on no node, its PodScheduled
// condition False with reason Unschedulable and message since since (to the second, as the
// API server stores it). A Pod of that name keeps its metadata and spec: the scheduler
// writes only the status of a Pod it cannot place.
func (f *fixture) unschedulablePod(ordinal int, message string, since time.Time) {
	f.t.Helper()
	pod := newPod(f.statefulSet(), ordinal, types.UID(podName(ordinal)+"-uid"))
	if f.exists(pods, podName(ordinal)) {
		pod = f.pod(ordinal).DeepCopy()
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: message, LastTransitionTime: metav1.NewTime(since.Truncate(time.Second)),
	}}}
	f.putPod(pod)
}

// schedulePod plays the scheduler: the Pod of ordinal is bound to a node, PodScheduled True,
// its containers not started yet.
func (f *fixture) schedulePod(ordinal int) {
	f.t.Helper()
	pod := f.pod(ordinal).DeepCopy()
	pod.Spec.NodeName = "kwok-node-0"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	f.putPod(pod)
}

func (f *fixture) putPod(pod *corev1.Pod) {
	f.t.Helper()
	f.put(pods, pod)
}

// requireUnschedulable checks that the example Database reports message: in phase, Ready and
// Progressing False, Degraded True, each with reason Unschedulable.
func requireUnschedulable(t *testing.T, db *examplev1.Database, phase examplev1.DatabasePhase, message string) {
	t.Helper()
	requirePodsHeld(t, db, phase, "Unschedulable", message)
}

func TestUnschedulablePodWithNoReplicaReadyFailsUntilPlaced(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid", 1, 0)
	f.unschedulablePod(0, unboundClaims, start)

	// A Pod refused for less than UnschedulableAfter is provisioning: the scheduler also
	// refuses it while its claims are bound. The Reconciler looks again when the grace ends,
	// or sooner as it does for any Database that is not ready.
	f.clock.SetTime(start.Add(10 * time.Second))
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Empty(t, f.events())
	require.Equal(t, examplev1.DatabasePhaseProvisioning, f.database().Status.Phase)
	require.Equal(t, "Provisioning", condition(f.database(), "Ready").Reason)

	f.clock.SetTime(start.Add(25 * time.Second))
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: 5 * time.Second}, result, "the grace ends before the usual requeue")
	require.Equal(t, examplev1.DatabasePhaseProvisioning, f.database().Status.Phase)

	// The scheduler's next attempt has another message; the condition's transition time
	// stays. At UnschedulableAfter, the Database reports it.
	f.unschedulablePod(0, insufficientCPU, start)
	f.clock.SetTime(start.Add(database.UnschedulableAfter))
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result, "the Pod informer sees the Pod placed: nothing to poll")
	require.Equal(t, []string{"update databases/status my-database"}, f.actions)
	want := "Pod my-database-0 cannot be scheduled: " + insufficientCPU
	require.Equal(t, []string{"Warning Unschedulable " + want}, f.events(), "one Warning on the Database when it begins")
	db := f.database()
	requireUnschedulable(t, db, examplev1.DatabasePhaseFailed, want)
	require.Zero(t, db.Status.ReadyReplicas)

	// Another message of the scheduler is in the status, without another Event.
	other := "0/2 nodes are available: 2 Insufficient memory."
	f.unschedulablePod(0, other, start)
	f.clock.SetTime(start.Add(time.Minute))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.events())
	requireUnschedulable(t, f.database(), examplev1.DatabasePhaseFailed, "Pod my-database-0 cannot be scheduled: "+other)

	// Placed at last: the Pod starts, the Database provisions as usual.
	f.schedulePod(0)
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Empty(t, f.events())
	db = f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, "Provisioning", condition(db, "Ready").Reason)
	require.Equal(t, metav1.ConditionTrue, condition(db, "Progressing").Status)
	require.Equal(t, metav1.ConditionFalse, condition(db, "Degraded").Status)
	require.Equal(t, "AsExpected", condition(db, "Degraded").Reason)
}

func TestUnschedulableScaleUpOfAServingDatabaseDegradesIt(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.setPods("sts-uid", 3, 3)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](4) })
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(4), *f.statefulSet().Spec.Replicas)

	f.setPods("sts-uid", 4, 3)
	f.unschedulablePod(3, insufficientCPU, start)
	f.clock.SetTime(start.Add(time.Minute))
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	want := "Pod my-database-3 cannot be scheduled: " + insufficientCPU
	require.Equal(t, []string{"Warning Unschedulable " + want}, f.events())
	db := f.database()
	requireUnschedulable(t, db, examplev1.DatabasePhaseDegraded, want)
	require.Equal(t, int32(3), db.Status.ReadyReplicas, "the Database still serves on three replicas")

	// Room is made: the Pod is placed and becomes ready.
	f.schedulePod(3)
	f.setPods("sts-uid", 4, 4)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.events())
	db = f.database()
	require.Equal(t, examplev1.DatabasePhaseReady, db.Status.Phase)
	require.Equal(t, "AllReplicasReady", condition(db, "Ready").Reason)
	require.Equal(t, "AsExpected", condition(db, "Degraded").Reason)
}

// A refused Pod creation comes first: the Pods that exist are placed or not once they all do.
// The Unschedulable Warning follows when the refusal ends.
func TestFailedCreateComesBeforeUnschedulable(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid", 1, 0)
	f.unschedulablePod(0, insufficientCPU, start)
	refusal := strings.ReplaceAll(quotaRefusal, "my-database-0", "my-database-1")
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", refusal, start.Add(time.Second), nil)
	f.clock.SetTime(start.Add(time.Minute))

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"Warning FailedCreate " + refusal}, f.events())
	requireRefused(t, f.database(), examplev1.DatabasePhaseFailed, refusal)

	// The Pod is created: the refusal ends, and the other Pod is still not placed.
	f.statefulSetEvent("my-database.created-1", "sts-uid", "SuccessfulCreate",
		"create Pod my-database-1 in StatefulSet my-database successful", start.Add(2*time.Minute), nil)
	f.setPods("sts-uid", 2, 0)
	f.clock.SetTime(start.Add(2 * time.Minute))
	_, err = f.reconcile()
	require.NoError(t, err)
	want := "Pod my-database-0 cannot be scheduled: " + insufficientCPU
	require.Equal(t, []string{"Warning Unschedulable " + want}, f.events())
	requireUnschedulable(t, f.database(), examplev1.DatabasePhaseFailed, want)
}

// The message names at most three Pods, by ordinal, with each distinct message of the
// scheduler once, each cut to 1 KiB at a character boundary.
func TestUnschedulableMessageIsBounded(t *testing.T) {
	db := exampleDatabase()
	db.Spec.Replicas = ptr.To[int32](12)
	f := newFixture(t, db)
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid", 12, 0)
	// "é" is two bytes and the prefix odd, so byte 1024 falls inside one.
	long := "0/2 nodes are available: " + strings.Repeat("é", 2048)
	require.Equal(t, 1, len("0/2 nodes are available: ")%2)
	f.unschedulablePod(10, insufficientCPU, start)
	f.unschedulablePod(2, insufficientCPU, start)
	f.unschedulablePod(11, insufficientCPU, start)
	f.unschedulablePod(9, long, start)
	f.clock.SetTime(start.Add(time.Minute))

	_, err = f.reconcile()
	require.NoError(t, err)
	msg := condition(f.database(), "Ready").Message
	prefix := "Pods my-database-2, my-database-9, my-database-10 and 1 more cannot be scheduled: " +
		"my-database-2, my-database-10: " + insufficientCPU + "; my-database-9: "
	require.True(t, strings.HasPrefix(msg, prefix), msg)
	cut := strings.TrimPrefix(msg, prefix)
	require.Len(t, cut, 1023)
	require.True(t, utf8.ValidString(cut))
	require.True(t, strings.HasPrefix(long, cut))
	requireUnschedulable(t, f.database(), examplev1.DatabasePhaseFailed, msg)

	// The same message for every Pod named is said once.
	f.unschedulablePod(9, insufficientCPU, start)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "Pods my-database-2, my-database-9, my-database-10 and 1 more cannot be scheduled: "+insufficientCPU,
		condition(f.database(), "Ready").Message)
}

// Only a Pending Pod of the Database's StatefulSet that the scheduler refuses counts: not one
// it placed, one being deleted, one waiting on scheduling gates, nor one another controller
// owns.
func TestOnlyPodsTheSchedulerRefusesAreUnschedulable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
	}{
		{"bound to a node", func(p *corev1.Pod) { p.Spec.NodeName = "kwok-node-0" }},
		{"being deleted", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(start)) }},
		{"scheduling gated", func(p *corev1.Pod) { p.Status.Conditions[0].Reason = corev1.PodReasonSchedulingGated }},
		{"another controller's", func(p *corev1.Pod) { p.OwnerReferences[0].Name = "other" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			_, err := f.reconcile()
			require.NoError(t, err)
			f.setPods("sts-uid", 1, 0)
			f.unschedulablePod(0, insufficientCPU, start)
			pod := f.pod(0).DeepCopy()
			tc.change(pod)
			f.putPod(pod)
			f.clock.SetTime(start.Add(time.Minute))

			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, requeue, result)
			require.Empty(t, f.events())
			require.Equal(t, examplev1.DatabasePhaseProvisioning, f.database().Status.Phase)
		})
	}
}
