package database_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/names"
)

// orphanedPods plays a StatefulSet deleted with propagationPolicy Orphan (a replacement for
// a storage increase) whose re-creation has not happened: it is gone, its Pods run on
// without a controller.
func orphanedPods(f *fixture) {
	f.t.Helper()
	sts := f.statefulSet()
	for i := range 3 {
		require.NoError(f.t, f.kube.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: fmt.Sprintf("%s-%d", name, i), UID: types.UID(fmt.Sprintf("pod-%d", i)),
			Labels: sts.Spec.Template.Labels,
		}}))
	}
	require.NoError(f.t, f.kube.Tracker().Delete(statefulSets, namespace, name))
}

// deleteDataActions are the calls that delete the example Database's data claims and Secret
// under deletionPolicy Delete (CredentialsFinalizer patched off the Secret first), then write
// its status.
var deleteDataActions = []string{
	"get secrets my-database-credentials",
	"delete persistentvolumeclaims data-my-database-0",
	"delete persistentvolumeclaims data-my-database-1",
	"delete persistentvolumeclaims data-my-database-2",
	"patch secrets my-database-credentials",
	"delete secrets my-database-credentials",
	"update databases/status my-database",
}

// forgetCredentials is the call that deletes the example Database's credentials record in the
// controller's namespace, once the rest of a deletionPolicy Delete is done.
const forgetCredentials = "delete configmaps credentials.production.my-database"

func TestDeletion(t *testing.T) {
	workload := []string{
		"delete statefulsets my-database",
		"delete services my-database-headless",
		"delete services my-database",
		"delete services my-database-read",
		"delete configmaps my-database-replication",
		"delete poddisruptionbudgets my-database",
		"list pods",
	}
	deleteData := append(slices.Clone(deleteDataActions), forgetCredentials, "update databases my-database")
	// Released: recorded first, in the controller's namespace.
	releaseData := []string{
		"get secrets my-database-credentials",
		"get configmaps released.production.my-database",
		"create configmaps released.production.my-database",
		"patch persistentvolumeclaims data-my-database-0",
		"patch persistentvolumeclaims data-my-database-1",
		"patch persistentvolumeclaims data-my-database-2",
		"patch secrets my-database-credentials",
		"update databases/status my-database",
		"update databases my-database",
	}
	kept := "Normal CleanupDone Cleanup done with deletionPolicy %s: deleted the workload; kept PersistentVolumeClaim data-my-database-0, PersistentVolumeClaim data-my-database-1, PersistentVolumeClaim data-my-database-2, Secret my-database-credentials, released from the Database"
	for _, tc := range []struct {
		policy  examplev1.DeletionPolicy
		actions []string
		events  []string
		keep    bool
	}{
		{policy: examplev1.DeletionPolicyDelete, actions: append(workload, deleteData...),
			events: []string{"Normal CleanupDone Cleanup done with deletionPolicy Delete: deleted the workload, volumes and credentials"}},
		{policy: "", actions: append(workload, deleteData...),
			events: []string{"Normal CleanupDone Cleanup done with deletionPolicy Delete: deleted the workload, volumes and credentials"}},
		{policy: examplev1.DeletionPolicyRetain, actions: append(workload, releaseData...), keep: true,
			events: []string{fmt.Sprintf(kept, "Retain")}},
		{policy: examplev1.DeletionPolicyDoNotTerminate, actions: append(workload, releaseData...), keep: true,
			events: []string{
				"Warning DoNotTerminate Database is being deleted despite deletionPolicy DoNotTerminate; keeping its PersistentVolumeClaims and Secret as with Retain",
				fmt.Sprintf(kept, "DoNotTerminate"),
			}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			f.ready()
			password := f.secret().Data["password"]
			f.recordReplicationPassword()
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.DeletionPolicy = tc.policy
				db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
			})

			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, database.Result{}, result)
			require.Equal(t, tc.actions, f.actions)
			require.Equal(t, tc.events, f.events())
			require.Empty(t, f.database().Finalizers)
			require.Equal(t, examplev1.DatabasePhaseDeleting, f.database().Status.Phase)

			require.False(t, f.exists(statefulSets, name))
			require.False(t, f.exists(services, name))
			require.False(t, f.exists(services, name+"-headless"))
			require.False(t, f.exists(pdbs, name))
			require.Equal(t, tc.keep, f.credentialsRecord() != nil,
				"the credentials record goes with the Secret it is of, and stays with a released one, which may be adopted")
			data := []struct {
				gvr schema.GroupVersionResource
				n   string
			}{{claims, "data-my-database-0"}, {claims, "data-my-database-1"}, {claims, "data-my-database-2"}, {secrets, "my-database-credentials"}}
			for _, d := range data {
				require.Equal(t, tc.keep, f.exists(d.gvr, d.n), d.n)
				if !tc.keep {
					continue
				}
				obj, err := f.kube.Tracker().Get(d.gvr, namespace, d.n)
				require.NoError(t, err)
				m := obj.(metav1.Object)
				require.Empty(t, m.GetOwnerReferences(), "released: the garbage collector must not take %s", d.n)
				require.NotContains(t, m.GetLabels(), names.ManagedByLabel)
				require.Equal(t, "production/my-database", m.GetAnnotations()[database.RetainedFromAnnotation], "marked for a Database of the same name")
				require.Equal(t, name, m.GetLabels()["app.kubernetes.io/instance"])
			}
			if tc.keep {
				require.Equal(t, password, f.secret().Data["password"])
				// The release record, where tenants cannot write, holds every released uid.
				obj, err := f.kube.Tracker().Get(configMaps, database.DefaultControllerNamespace, database.ReleasedRecordName(namespace, name))
				require.NoError(t, err)
				require.Equal(t, map[string]string{
					"data-my-database-0-uid":      "PersistentVolumeClaim data-my-database-0",
					"data-my-database-1-uid":      "PersistentVolumeClaim data-my-database-1",
					"data-my-database-2-uid":      "PersistentVolumeClaim data-my-database-2",
					"my-database-credentials-uid": "Secret my-database-credentials",
				}, obj.(*corev1.ConfigMap).Data)
				require.Equal(t, names.ManagedByValue, obj.(*corev1.ConfigMap).Labels[names.ManagedByLabel])
			} else {
				_, err := f.kube.Tracker().Get(configMaps, database.DefaultControllerNamespace, database.ReleasedRecordName(namespace, name))
				require.True(t, apierrors.IsNotFound(err), "nothing released: %v", err)
			}
		})
	}
}

func TestDeletionToleratesChildrenAlreadyGone(t *testing.T) {
	db := exampleDatabase()
	db.Finalizers = []string{database.FinalizerName}
	db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
	f := newFixture(t, db)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Equal(t, slices.Concat([]string{
		"get statefulsets my-database",
		"list pods",
	}, getClaims, []string{
		"get secrets my-database-credentials",
		"update databases/status my-database",
		forgetCredentials,
		"update databases my-database",
	}), f.actions, "the claims of spec.replicas are looked for on the API server: none is in the cache")
	require.Empty(t, f.database().Finalizers)
}

func TestDeletionLeavesChildrenOfOthersAlone(t *testing.T) {
	db := exampleDatabase()
	db.Finalizers = []string{database.FinalizerName}
	db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
	other := []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Database", Name: name, UID: "old-uid", Controller: ptr.To(true)}}
	managed := map[string]string{names.ManagedByLabel: names.ManagedByValue, "app.kubernetes.io/name": "postgresql", "app.kubernetes.io/instance": name}
	f := newFixture(t, db,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: managed, OwnerReferences: other}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials", Labels: managed, OwnerReferences: other}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "data-my-database-0", Labels: managed, OwnerReferences: other}},
	)

	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{
		"get statefulsets my-database",
		"list pods",
		"get persistentvolumeclaims data-my-database-1",
		"get persistentvolumeclaims data-my-database-2",
		"get secrets my-database-credentials",
		"update databases/status my-database",
		forgetCredentials,
		"update databases my-database",
	}, f.actions)
	require.True(t, f.exists(services, name))
	require.True(t, f.exists(secrets, name+"-credentials"))
	require.True(t, f.exists(claims, "data-my-database-0"))
}

func TestDeletionWithoutOurFinalizerDoesNothing(t *testing.T) {
	db := exampleDatabase()
	db.Finalizers = []string{"someone.else/finalizer"}
	db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
	f := newFixture(t, db)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Empty(t, f.actions)
}

func TestDeletionKeepsTheFinalizerWhenCleanupFails(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.DeletionTimestamp = ptr.To(metav1.NewTime(start)) })
	f.inject("delete", "services", 1, apierrors.NewInternalError(errors.New("etcd timeout")))

	_, err := f.reconcile()
	require.ErrorContains(t, err, "etcd timeout")
	require.NotContains(t, f.actions, "update databases my-database")
	require.Contains(t, f.actions, "delete secrets my-database-credentials", "the rest of the cleanup still ran")
	require.Equal(t, []string{database.FinalizerName}, f.database().Finalizers)

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, slices.Concat([]string{"get statefulsets my-database", "delete services my-database-headless", "list pods"},
		getClaims, // deleted by the first pass, gone from the API server as from the cache
		[]string{"get secrets my-database-credentials", "update databases/status my-database", forgetCredentials, "update databases my-database"}), f.actions)
	require.Empty(t, f.database().Finalizers)
}

func TestDeletionWhileTheStatefulSetIsReplacedDeletesItsOrphanedPods(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	orphanedPods(f)
	// Not ours: another owner, another name, another app with the same name and instance.
	require.NoError(t, f.kube.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "my-database-client",
		Labels: f.claim("data-my-database-0").Labels}}))
	require.NoError(t, f.kube.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "my-database-7",
		Labels: map[string]string{"app.kubernetes.io/name": "postgresql", "app.kubernetes.io/instance": name}}}))
	f.updateDatabase(func(db *examplev1.Database) { db.DeletionTimestamp = ptr.To(metav1.NewTime(start)) })

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result, "the Pods must be gone before the cleanup is done")
	require.Equal(t, slices.Concat([]string{
		"get statefulsets my-database",
		"delete services my-database-headless",
		"delete services my-database",
		"delete services my-database-read",
		"delete configmaps my-database-replication",
		"delete poddisruptionbudgets my-database",
		"list pods",
		"delete pods my-database-0",
		"delete pods my-database-1",
		"delete pods my-database-2",
	}, deleteDataActions), f.actions)
	require.Empty(t, f.events(), "no CleanupDone while children remain")
	require.Equal(t, []string{database.FinalizerName}, f.database().Finalizers)
	require.Equal(t, "cleaning up with deletionPolicy Delete: waiting: Pods left without their StatefulSet are being deleted: my-database-0, my-database-1, my-database-2",
		condition(f.database(), "Progressing").Message)
	require.Equal(t, int32(0), f.database().Status.ReadyReplicas)
	require.True(t, f.exists(pods, "my-database-client"))
	require.True(t, f.exists(pods, "my-database-7"))

	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Equal(t, slices.Concat([]string{"get statefulsets my-database", "list pods"}, getClaims,
		[]string{"get secrets my-database-credentials", "update databases/status my-database", forgetCredentials, "update databases my-database"}), f.actions,
		"the claims deleted by the first pass are looked for again: gone")
	require.Equal(t, []string{"Normal CleanupDone Cleanup done with deletionPolicy Delete: deleted the workload, volumes and credentials"}, f.events())
	require.Empty(t, f.database().Finalizers)
}

func TestDeletionWaitsForAStatefulSetOrphaningItsPods(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	sts := f.statefulSet().DeepCopy()
	sts.DeletionTimestamp, sts.Finalizers = ptr.To(metav1.NewTime(start)), []string{metav1.FinalizerOrphanDependents}
	require.NoError(t, f.kube.Tracker().Update(statefulSets, sts, namespace))
	f.updateDatabase(func(db *examplev1.Database) { db.DeletionTimestamp = ptr.To(metav1.NewTime(start)) })

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.NotContains(t, f.actions, "list pods", "its Pods are not orphans yet")
	require.NotContains(t, f.actions, "update databases my-database")
	require.Equal(t, "cleaning up with deletionPolicy Delete: waiting: StatefulSet my-database is being deleted",
		condition(f.database(), "Progressing").Message)
}

func TestDeletionRemovesTheProtectionOfAPolicyChangedJustBefore(t *testing.T) {
	for _, policy := range []examplev1.DeletionPolicy{examplev1.DeletionPolicyRetain, examplev1.DeletionPolicyDelete} {
		t.Run(string(policy), func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
			f := newFixture(t, db)
			f.ready()
			_, err := f.reconcile() // protects the claims created by f.ready
			require.NoError(t, err)
			require.Equal(t, []string{database.CredentialsFinalizer, database.ProtectFinalizer}, f.secret().Finalizers)
			require.Equal(t, []string{database.ProtectFinalizer}, f.claim("data-my-database-0").Finalizers)
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.DeletionPolicy = policy
				db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
			})
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Empty(t, f.database().Finalizers)
			if policy == examplev1.DeletionPolicyRetain {
				require.Empty(t, f.secret().Finalizers, "released without our finalizer")
				require.Empty(t, f.secret().OwnerReferences)
				require.Empty(t, f.claim("data-my-database-0").Finalizers)
				return
			}
			require.Contains(t, f.actions, "patch persistentvolumeclaims data-my-database-0")
			require.Contains(t, f.actions, "delete persistentvolumeclaims data-my-database-0")
			require.Contains(t, f.actions, "patch secrets my-database-credentials")
			require.False(t, f.exists(secrets, name+"-credentials"))
			require.False(t, f.exists(claims, "data-my-database-0"))
		})
	}
}

func TestDeletionFindsClaimsTheCacheHasNotSeen(t *testing.T) {
	for _, tc := range []struct {
		policy examplev1.DeletionPolicy
		write  string
		kept   bool
	}{
		{examplev1.DeletionPolicyDelete, "delete persistentvolumeclaims data-my-database-2", false},
		{examplev1.DeletionPolicyRetain, "patch persistentvolumeclaims data-my-database-2", true},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			f.ready()
			f.pin(claims, "data-my-database-2", nil)
			// Scaled down just before the deletion: the StatefulSet still has three replicas.
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.Replicas = ptr.To[int32](1)
				db.Spec.DeletionPolicy = tc.policy
				db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
			})

			_, err := f.reconcile()
			require.NoError(t, err)
			require.Contains(t, f.actions, "get persistentvolumeclaims data-my-database-2")
			require.Contains(t, f.actions, tc.write)
			require.NotContains(t, f.actions, "list persistentvolumeclaims")
			require.Empty(t, f.database().Finalizers)
			require.Equal(t, tc.kept, f.exists(claims, "data-my-database-2"))
			if tc.kept {
				require.Empty(t, f.claim("data-my-database-2").OwnerReferences, "released, not left to the garbage collector")
			}
		})
	}
}

func TestDeletionOfAClaimFromAStaleCacheConflictsInsteadOfLeavingItTerminating(t *testing.T) {
	db := exampleDatabase()
	db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
	f := newFixture(t, db)
	f.ready() // protects the claims
	live := f.claim("data-my-database-0").DeepCopy()
	require.Equal(t, []string{database.ProtectFinalizer}, live.Finalizers)
	live.ResourceVersion = "2"
	require.NoError(t, f.kube.Tracker().Update(claims, live, namespace))
	// The cache still has the claim as it was before the Reconciler protected it.
	stale := live.DeepCopy()
	stale.ResourceVersion, stale.Finalizers = "1", nil
	f.pin(claims, stale.Name, stale)
	// The API server's resourceVersion precondition, which the fake clientset does not check.
	f.kube.PrependReactor("delete", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		want := d.GetDeleteOptions().Preconditions
		stored, err := f.kube.Tracker().Get(claims, namespace, d.GetName())
		if err != nil || want == nil || want.ResourceVersion == nil || *want.ResourceVersion == stored.(metav1.Object).GetResourceVersion() {
			return false, nil, nil
		}
		f.record(a) // handled here, before the fixture's recording reactor
		return true, nil, apierrors.NewConflict(claims.GroupResource(), d.GetName(), errors.New("the object has been modified"))
	})
	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.DeletionPolicy = examplev1.DeletionPolicyDelete
		db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
	})

	_, err := f.reconcile()
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Contains(t, f.actions, "delete persistentvolumeclaims data-my-database-0")
	require.Equal(t, []string{database.FinalizerName}, f.database().Finalizers, "the cleanup is not done")
	require.Equal(t, []string{database.ProtectFinalizer}, f.claim(stale.Name).Finalizers)
	require.Nil(t, f.claim(stale.Name).DeletionTimestamp, "not left Terminating with the finalizer")

	f.unpin(claims, stale.Name)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Contains(t, f.actions, "patch persistentvolumeclaims data-my-database-0")
	require.False(t, f.exists(claims, stale.Name))
	require.Empty(t, f.database().Finalizers)
}

// A MongoDB's initialisation ConfigMap goes with the workload.
func TestDeletionDeletesTheInitConfigMap(t *testing.T) {
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMongoDB, "7.0"
	f := newFixture(t, db)
	f.ready()
	require.True(t, f.exists(configMaps, "my-database-initdb"))
	f.updateDatabase(func(db *examplev1.Database) { db.DeletionTimestamp = ptr.To(metav1.NewTime(start)) })

	_, err := f.reconcile()
	require.NoError(t, err)
	require.Contains(t, f.actions, "delete configmaps my-database-initdb")
	require.False(t, f.exists(configMaps, "my-database-initdb"))
	require.Empty(t, f.database().Finalizers)
}
