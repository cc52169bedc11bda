package database

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbfake "example.com/database-apiserver/pkg/generated/clientset/versioned/fake"
	"example.com/database-apiserver/pkg/names"
)

// newTestController returns a Controller on fake clientsets holding kubeObjects, with its
// informer factories (not started).
func newTestController(t *testing.T, kubeObjects ...runtime.Object) (*Controller, func(ctx context.Context)) {
	t.Helper()
	kube := kubefake.NewClientset(kubeObjects...)
	databases := dbfake.NewClientset()
	kubeInformers := NewKubeInformerFactory(kube, 0, metav1.NamespaceAll)
	databaseInformers := NewDatabaseInformerFactory(databases, 0, metav1.NamespaceAll)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		kubeInformers.Shutdown()
		databaseInformers.Shutdown()
	})
	c, err := NewController(ctx, kube, databases, kubeInformers, databaseInformers, Options{})
	require.NoError(t, err)
	start := func(ctx context.Context) {
		kubeInformers.Start(ctx.Done())
		databaseInformers.Start(ctx.Done())
	}
	return c, start
}

// drain returns the keys queued so far, in order, without blocking.
func drain(c *Controller) []string {
	var keys []string
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		c.queue.Done(key)
		keys = append(keys, key.String())
	}
	return keys
}

func controlledBy(apiVersion, kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name),
		Controller: ptr.To(true),
	}}
}

func TestDatabaseEventsEnqueueItsKey(t *testing.T) {
	c, _ := newTestController(t)
	db := &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "my-database"}}

	c.enqueueDatabase(db)
	c.enqueueDatabase(cache.DeletedFinalStateUnknown{Key: "production/gone", Obj: db})
	require.Equal(t, []string{"production/my-database", "production/gone"}, drain(c))
}

func TestOwnedObjectEventsEnqueueTheControllingDatabase(t *testing.T) {
	for _, tc := range []struct {
		name   string
		owners []metav1.OwnerReference
		want   []string
	}{
		{"controlled by a Database", controlledBy("example.com/v1", "Database", "my-database"),
			[]string{"production/my-database"}},
		{"not owned", nil, nil},
		{"owned by a Database but not as controller", []metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Database", Name: "my-database", UID: "u"}}, nil},
		{"controlled by another kind", controlledBy("apps/v1", "Deployment", "my-database"), nil},
		{"controlled by a Database of another group", controlledBy("other.example.org/v1", "Database", "my-database"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestController(t)
			meta := metav1.ObjectMeta{Namespace: "production", Name: "child", OwnerReferences: tc.owners}
			for _, obj := range []any{
				&appsv1.StatefulSet{ObjectMeta: meta},
				&corev1.Service{ObjectMeta: meta},
				&corev1.Secret{ObjectMeta: meta},
				&corev1.PersistentVolumeClaim{ObjectMeta: meta},
				cache.DeletedFinalStateUnknown{Key: "production/child", Obj: &corev1.Service{ObjectMeta: meta}},
			} {
				c.enqueueOwner(obj)
				// The queue deduplicates, so each object is checked on its own.
				require.Equal(t, tc.want, drain(c), "%T", obj)
			}
		})
	}
}

// A claim's events enqueue the Database its name is a data claim of, whoever controls it (a
// foreign claim that blocked it, now deleted), and its controller.
func TestClaimEventsEnqueueTheDatabaseTheirNameBelongsTo(t *testing.T) {
	c, _ := newTestController(t)
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "data-my-db-0"}}
	c.enqueueClaim(foreign)
	require.Equal(t, []string{"production/my-db"}, drain(c))

	c.enqueueClaim(cache.DeletedFinalStateUnknown{Key: "production/data-my-db-1", Obj: &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "data-my-db-1"}}})
	require.Equal(t, []string{"production/my-db"}, drain(c))

	other := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "scratch",
		OwnerReferences: controlledBy("example.com/v1", "Database", "owner")}}
	c.enqueueClaim(other)
	require.Equal(t, []string{"production/owner"}, drain(c))
}

func TestInformersSeeOnlyManagedChildrenButEveryClaim(t *testing.T) {
	managed := map[string]string{names.ManagedByLabel: names.ManagedByValue}
	c, start := newTestController(t,
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "ours", Labels: managed,
			OwnerReferences: controlledBy("example.com/v1", "Database", "ours")}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "foreign",
			OwnerReferences: controlledBy("example.com/v1", "Database", "foreign")}},
		// Labels edited by hand: still in the claim cache, and its event maps to its Database.
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "data-edited-0",
			Labels: map[string]string{"edited": "by-hand"}, OwnerReferences: controlledBy("example.com/v1", "Database", "edited")}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "data-a-b-1"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "staging", Name: "scratch"}},
	)
	require.False(t, c.HasSynced(), "nothing is synced before the informers start")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	require.ElementsMatch(t, []string{"production/ours", "staging/edited", "staging/a-b"}, drain(c),
		"an unlabelled object is outside the informers' label selector, even with our owner reference; claims are not, and a data claim enqueues the Database of its name")

	claims := c.reconciler.(*Reconciler).listers.PersistentVolumeClaims
	require.Len(t, claims.List(), 3, "every claim of every namespace is cached")
	for key, want := range map[string][]string{"staging/a-b": {"data-a-b-1"}, "staging/edited": {"data-edited-0"}, "staging/scratch": nil} {
		objs, err := claims.ByIndex(ClaimsByDatabaseIndex, key)
		require.NoError(t, err)
		var names []string
		for _, obj := range objs {
			names = append(names, obj.(*corev1.PersistentVolumeClaim).Name)
		}
		require.Equal(t, want, names, key)
	}
}

func TestNewControllerRefusesAClaimInformerWithoutItsIndex(t *testing.T) {
	kube := kubefake.NewClientset()
	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	kubeInformers.Core().V1().PersistentVolumeClaims().Informer() // label-scoped or not, it lacks the index
	_, err := NewController(t.Context(), kube, dbfake.NewClientset(), kubeInformers, NewDatabaseInformerFactory(dbfake.NewClientset(), 0, metav1.NamespaceAll), Options{})
	require.ErrorContains(t, err, ClaimsByDatabaseIndex)
}

func TestNewControllerRefusesAnEventInformerWithoutItsIndex(t *testing.T) {
	kube := kubefake.NewClientset()
	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	kubeInformers.InformerFor(&corev1.PersistentVolumeClaim{}, NewClaimInformer)
	kubeInformers.Core().V1().Events().Informer() // unselected, and it lacks the index
	_, err := NewController(t.Context(), kube, dbfake.NewClientset(), kubeInformers, NewDatabaseInformerFactory(dbfake.NewClientset(), 0, metav1.NamespaceAll), Options{})
	require.ErrorContains(t, err, EventsByObjectUIDIndex)
}

// The Event informer lists and watches, in every namespace, only the StatefulSet controller's
// Events on StatefulSets: by fields, with no label selector (Events have no labels).
func TestEventInformerSelectsTheStatefulSetControllersEventsByFields(t *testing.T) {
	kube := kubefake.NewClientset()
	var restrictions []string
	kube.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.ListAction).GetListRestrictions()
		restrictions = append(restrictions, fmt.Sprintf("ns=%q labels=%q fields=%q", a.GetNamespace(), r.Labels, r.Fields))
		return false, nil, nil
	})
	kubeInformers := NewKubeInformerFactory(kube, 0, metav1.NamespaceAll)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	informer := kubeInformers.InformerFor(&corev1.Event{}, NewEventInformer)
	kubeInformers.Start(ctx.Done())
	defer kubeInformers.Shutdown() // after cancel: it waits for the informers to stop
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
	cancel()
	require.Equal(t, []string{`ns="" labels="" fields="involvedObject.kind=StatefulSet,source=statefulset-controller"`}, restrictions)
}

// A FailedCreate or SuccessfulCreate Event of a StatefulSet a Database controls enqueues the
// Database; Events of other reasons, of a StatefulSet of another UID (deleted and created
// again) and of a StatefulSet not in the cache do not.
func TestStatefulSetEventsEnqueueTheControllingDatabase(t *testing.T) {
	managed := map[string]string{names.ManagedByLabel: names.ManagedByValue}
	c, start := newTestController(t,
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "ours", UID: "sts-uid", Labels: managed,
			OwnerReferences: controlledBy("example.com/v1", "Database", "ours")}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "theirs", UID: "theirs-uid", Labels: managed}},
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), c.HasSynced))
	drain(c)

	event := func(stsName string, uid types.UID, reason string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "production", Name: stsName + "." + reason},
			InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Namespace: "production", Name: stsName, UID: uid},
			Reason:         reason,
			Source:         corev1.EventSource{Component: StatefulSetControllerName},
		}
	}
	for _, tc := range []struct {
		name  string
		event any
		want  []string
	}{
		{"FailedCreate", event("ours", "sts-uid", "FailedCreate"), []string{"production/ours"}},
		{"SuccessfulCreate", event("ours", "sts-uid", "SuccessfulCreate"), []string{"production/ours"}},
		{"a tombstone", cache.DeletedFinalStateUnknown{Key: "production/ours.FailedCreate", Obj: event("ours", "sts-uid", "FailedCreate")},
			[]string{"production/ours"}},
		{"another reason", event("ours", "sts-uid", "SuccessfulDelete"), nil},
		{"another UID", event("ours", "old-uid", "FailedCreate"), nil},
		{"a StatefulSet no Database controls", event("theirs", "theirs-uid", "FailedCreate"), nil},
		{"a StatefulSet not cached", event("unknown", "unknown-uid", "FailedCreate"), nil},
	} {
		c.enqueueEvent(tc.event)
		require.Equal(t, tc.want, drain(c), tc.name)
	}
}

// fakeReconciler returns result and err and records the keys it was given.
type fakeReconciler struct {
	result Result
	err    error
	keys   []cache.ObjectName
}

func (f *fakeReconciler) Reconcile(_ context.Context, key cache.ObjectName) (Result, error) {
	f.keys = append(f.keys, key)
	return f.result, f.err
}

// recordingQueue records the calls that decide what happens to a key after a reconcile.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	calls []string
}

func (q *recordingQueue) AddRateLimited(key cache.ObjectName) {
	q.calls = append(q.calls, "AddRateLimited "+key.String())
	q.TypedRateLimitingInterface.AddRateLimited(key)
}

func (q *recordingQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.calls = append(q.calls, fmt.Sprintf("AddAfter %s %v", key, d))
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

func (q *recordingQueue) Forget(key cache.ObjectName) {
	q.calls = append(q.calls, "Forget "+key.String())
	q.TypedRateLimitingInterface.Forget(key)
}

func TestReconcileResultDecidesWhatTheQueueDoes(t *testing.T) {
	RegisterMetrics(nil)
	key := cache.ObjectName{Namespace: "production", Name: "my-database"}
	for _, tc := range []struct {
		name      string
		result    Result
		err       error
		wantCalls []string
		metric    string
	}{
		{"success forgets the key", Result{}, nil,
			[]string{"Forget production/my-database"}, resultSuccess},
		{"RequeueAfter forgets the failures and adds the key after the delay", Result{RequeueAfter: 30 * time.Second}, nil,
			[]string{"Forget production/my-database", "AddAfter production/my-database 30s"}, resultRequeue},
		{"an error requeues the key rate limited", Result{RequeueAfter: time.Minute}, errors.New("connection refused"),
			[]string{"AddRateLimited production/my-database"}, resultError},
		{"a conflict requeues the key rate limited", Result{},
			fmt.Errorf("updating status: %w", apierrors.NewConflict(examplev1.Resource("databases"), "my-database", errors.New("modified"))),
			[]string{"AddRateLimited production/my-database"}, resultError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newTestController(t)
			fake := &fakeReconciler{result: tc.result, err: tc.err}
			queue := &recordingQueue{TypedRateLimitingInterface: c.queue}
			c.reconciler, c.queue = fake, queue
			before, err := testutil.GetCounterMetricValue(reconcileTotal.WithLabelValues(tc.metric))
			require.NoError(t, err)

			queue.Add(key)
			require.True(t, c.processNextWorkItem(context.Background()))

			require.Equal(t, []cache.ObjectName{key}, fake.keys)
			require.Equal(t, tc.wantCalls, queue.calls)
			after, err := testutil.GetCounterMetricValue(reconcileTotal.WithLabelValues(tc.metric))
			require.NoError(t, err)
			require.Equal(t, before+1, after)
			queue.ShutDown()
			require.False(t, c.processNextWorkItem(context.Background()), "a shut down queue stops the worker")
		})
	}
}
