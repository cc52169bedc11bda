package database_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
)

// quotaRefusal is the StatefulSet controller's message for a Pod a ResourceQuota refuses.
const quotaRefusal = `create Pod my-database-0 in StatefulSet my-database failed error: pods "my-database-0" is forbidden: exceeded quota: no-pods, requested: pods=1, used: pods=0, limited: pods=0`

// setPods plays the StatefulSet controller: the stored StatefulSet gets uid (the fake
// clientset sets none) and, at its generation and one revision, pods Pods of which ready
// are ready.
func (f *fixture) setPods(uid types.UID, pods, ready int32) {
	f.t.Helper()
	sts := f.statefulSet().DeepCopy()
	sts.UID = uid
	sts.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: sts.Generation,
		Replicas:           pods,
		ReadyReplicas:      ready,
		AvailableReplicas:  ready,
		CurrentReplicas:    pods,
		UpdatedReplicas:    pods,
		CurrentRevision:    "rev-1",
		UpdateRevision:     "rev-1",
	}
	require.NoError(f.t, f.kube.Tracker().Update(statefulSets, sts, namespace))
}

// statefulSetEvent stores (or updates) the Event eventName of the StatefulSet controller on
// the StatefulSet of the example Database with uid, as the core/v1 recorder writes it: reason,
// message, and lastTimestamp at, to the second. change, if not nil, edits it further.
func (f *fixture) statefulSetEvent(eventName string, uid types.UID, reason, message string, at time.Time, change func(*corev1.Event)) {
	f.t.Helper()
	typ := corev1.EventTypeNormal
	if reason == examplev1.ReasonFailedCreate {
		typ = corev1.EventTypeWarning
	}
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: eventName},
		InvolvedObject: corev1.ObjectReference{
			Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: namespace, Name: name, UID: uid,
		},
		Reason: reason, Message: message, Type: typ, Count: 1,
		Source:         corev1.EventSource{Component: database.StatefulSetControllerName},
		FirstTimestamp: metav1.NewTime(at.Truncate(time.Second)),
		LastTimestamp:  metav1.NewTime(at.Truncate(time.Second)),
	}
	if stored, err := f.kube.Tracker().Get(events, namespace, eventName); err == nil {
		old := stored.(*corev1.Event)
		event.FirstTimestamp, event.Count = old.FirstTimestamp, old.Count+1
	}
	if change != nil {
		change(event)
	}
	f.put(events, event)
}

// put stores obj, a kind of resource in the fixture's namespace, in the fake clientset: an
// update of the object of its name, or a create when there is none.
func (f *fixture) put(resource schema.GroupVersionResource, obj runtime.Object) {
	f.t.Helper()
	err := f.kube.Tracker().Update(resource, obj, namespace)
	if apierrors.IsNotFound(err) {
		err = f.kube.Tracker().Add(obj)
	}
	require.NoError(f.t, err)
}

// requireRefused checks that the example Database reports the refusal message: in phase,
// Ready and Progressing False, Degraded True, each with reason FailedCreate.
func requireRefused(t *testing.T, db *examplev1.Database, phase examplev1.DatabasePhase, message string) {
	t.Helper()
	requirePodsHeld(t, db, phase, "FailedCreate", message)
}

// requirePodsHeld checks that the example Database reports why its Pods are held, message: in
// phase, Ready and Progressing False, Degraded True, each with reason.
func requirePodsHeld(t *testing.T, db *examplev1.Database, phase examplev1.DatabasePhase, reason, message string) {
	t.Helper()
	require.Equal(t, phase, db.Status.Phase)
	for typ, status := range map[string]metav1.ConditionStatus{
		"Ready": metav1.ConditionFalse, "Progressing": metav1.ConditionFalse, "Degraded": metav1.ConditionTrue,
	} {
		c := condition(db, typ)
		require.Equal(t, status, c.Status, typ)
		require.Equal(t, reason, c.Reason, typ)
		require.Equal(t, message, c.Message, typ)
	}
}

func TestRefusedPodsWithNoReplicaReadyFailUntilThePodsAreCreated(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid", 0, 0)
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", quotaRefusal, start.Add(time.Second), nil)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result, "the Event and StatefulSet informers see the refusal end: nothing to poll")
	require.Equal(t, []string{"update databases/status my-database"}, f.actions)
	require.Equal(t, []string{"Warning FailedCreate " + quotaRefusal}, f.events(), "one Warning on the Database when the refusal begins")
	db := f.database()
	requireRefused(t, db, examplev1.DatabasePhaseFailed, quotaRefusal)
	require.Zero(t, db.Status.ReadyReplicas)

	// The StatefulSet controller retries: its Event's count and lastTimestamp move on, the
	// Database's status does not, and no Event of ours repeats it.
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", quotaRefusal, start.Add(30*time.Second), nil)
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Empty(t, f.actions)
	require.Empty(t, f.events())

	// The quota is lifted: the next attempt creates the first Pod, a later SuccessfulCreate.
	f.statefulSetEvent("my-database.created-0", "sts-uid", "SuccessfulCreate",
		"create Pod my-database-0 in StatefulSet my-database successful", start.Add(time.Minute), nil)
	f.setPods("sts-uid", 1, 0)
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	db = f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, "Provisioning", condition(db, "Ready").Reason)
	require.Equal(t, metav1.ConditionFalse, condition(db, "Degraded").Status)
	require.Equal(t, "AsExpected", condition(db, "Degraded").Reason)
	require.Equal(t, metav1.ConditionTrue, condition(db, "Progressing").Status)
}

func TestRefusedScaleUpOfAServingDatabaseDegradesIt(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.setPods("sts-uid", 3, 3)
	f.statefulSetEvent("my-database.created", "sts-uid", "SuccessfulCreate",
		"create Pod my-database-2 in StatefulSet my-database successful", start, nil)
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](5) })
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(5), *f.statefulSet().Spec.Replicas)

	refusal := strings.ReplaceAll(quotaRefusal, "my-database-0", "my-database-3")
	f.setPods("sts-uid", 3, 3)
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", refusal, start.Add(time.Minute), nil)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Equal(t, []string{"Warning FailedCreate " + refusal}, f.events())
	db := f.database()
	requireRefused(t, db, examplev1.DatabasePhaseDegraded, refusal)
	require.Equal(t, int32(3), db.Status.ReadyReplicas, "the Database still serves on three replicas")

	// Pod 3 is created at last; pod 4 is yet to come: scaling as usual.
	f.statefulSetEvent("my-database.created", "sts-uid", "SuccessfulCreate",
		"create Pod my-database-3 in StatefulSet my-database successful", start.Add(2*time.Minute), nil)
	f.setPods("sts-uid", 4, 3)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.events())
	db = f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, "Scaling", condition(db, "Progressing").Reason)

	f.setPods("sts-uid", 5, 5)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
}

// The Events of a StatefulSet deleted and created again under the same name (another UID)
// are not this StatefulSet's.
func TestRefusalOfAnotherStatefulSetUIDDoesNotCount(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid-2", 0, 0)
	f.statefulSetEvent("my-database.failed", "sts-uid-1", "FailedCreate", quotaRefusal, start.Add(time.Minute), nil)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Empty(t, f.events())
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, "Provisioning", condition(db, "Ready").Reason)
}

// Once the StatefulSet has every Pod its spec asks for, an old FailedCreate is history, even
// without a later SuccessfulCreate (the Event may have been dropped or expired).
func TestRefusalEndsWhenThePodsExist(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.setPods("sts-uid", 3, 3)
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", quotaRefusal, start.Add(time.Hour), nil)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Empty(t, f.actions)
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
}

// The latest FailedCreate and SuccessfulCreate are compared by their last occurrence:
// series.lastObservedTime, lastTimestamp, or eventTime (an Event written through
// events.k8s.io/v1), whichever the Event has.
func TestRefusalIsTheLatestAttemptByLastOccurrence(t *testing.T) {
	at := func(d time.Duration) time.Time { return start.Add(d) }
	for _, tc := range []struct {
		name    string
		failed  func(*corev1.Event)
		refused bool
	}{
		{"lastTimestamp before the success", func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(at(time.Second)) }, false},
		{"lastTimestamp equal to the success", func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(at(2 * time.Second)) }, false},
		{"lastTimestamp after the success", func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(at(3 * time.Second)) }, true},
		{"a series observed after the success", func(e *corev1.Event) {
			e.LastTimestamp, e.EventTime = metav1.Time{}, metav1.NewMicroTime(at(0))
			e.Series = &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(at(3 * time.Second))}
		}, true},
		{"a series last observed before the success", func(e *corev1.Event) {
			e.LastTimestamp, e.EventTime = metav1.Time{}, metav1.NewMicroTime(at(0))
			e.Series = &corev1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(at(time.Second))}
		}, false},
		{"eventTime alone after the success", func(e *corev1.Event) {
			e.LastTimestamp, e.EventTime = metav1.Time{}, metav1.NewMicroTime(at(2500*time.Millisecond))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			_, err := f.reconcile()
			require.NoError(t, err)
			f.setPods("sts-uid", 1, 0)
			f.statefulSetEvent("my-database.created", "sts-uid", "SuccessfulCreate",
				"create Pod my-database-0 in StatefulSet my-database successful", at(2*time.Second), nil)
			f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", quotaRefusal, at(0), tc.failed)

			_, err = f.reconcile()
			require.NoError(t, err)
			if tc.refused {
				requireRefused(t, f.database(), examplev1.DatabasePhaseFailed, quotaRefusal)
			} else {
				require.Equal(t, examplev1.DatabasePhaseProvisioning, f.database().Status.Phase)
			}
		})
	}
}

func TestRefusalMessageIsCutToAConditionsLength(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid", 0, 0)
	// A webhook's refusal may say more than a condition may hold (32 KiB). "é" is two bytes
	// and the prefix odd, so byte 32768 falls inside one: the cut leaves it out whole.
	long := quotaRefusal + ":" + strings.Repeat("é", 20*1024)
	require.Equal(t, 1, (len(quotaRefusal)+1)%2)
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", long, start.Add(time.Second), nil)

	_, err = f.reconcile()
	require.NoError(t, err)
	msg := condition(f.database(), "Ready").Message
	require.Len(t, msg, 32*1024-1)
	require.True(t, utf8.ValidString(msg))
	require.True(t, strings.HasPrefix(long, msg))
}

// The Warning of a refusal is recorded once its status is written: a status write that
// fails (a conflict with a stale cache) is retried, and the Event is not repeated.
func TestRefusalWarningFollowsTheStatusWrite(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.setPods("sts-uid", 0, 0)
	f.statefulSetEvent("my-database.failed", "sts-uid", "FailedCreate", quotaRefusal, start.Add(time.Second), nil)
	f.inject("update", "databases/status", 1, apierrors.NewConflict(examplev1.Resource("databases"), name, errors.New("modified")))

	_, err = f.reconcile()
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Empty(t, f.events())

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"Warning FailedCreate " + quotaRefusal}, f.events())
	requireRefused(t, f.database(), examplev1.DatabasePhaseFailed, quotaRefusal)
}
