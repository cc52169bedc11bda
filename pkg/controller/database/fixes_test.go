package database_test

import (
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
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
)

var pods = corev1.SchemeGroupVersion.WithResource("pods")

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

func TestDeletionWhileTheStatefulSetIsReplacedDeletesItsOrphanedPods(t *testing.T) {
	f := newFixture(t, seedDatabase())
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
	require.Equal(t, []string{
		"get statefulsets my-database",
		"delete services my-database-headless",
		"delete services my-database",
		"delete poddisruptionbudgets my-database",
		"list pods",
		"delete pods my-database-0",
		"delete pods my-database-1",
		"delete pods my-database-2",
		"delete persistentvolumeclaims data-my-database-0",
		"delete persistentvolumeclaims data-my-database-1",
		"delete persistentvolumeclaims data-my-database-2",
		"get secrets my-database-credentials",
		"delete secrets my-database-credentials",
		"update databases/status my-database",
	}, f.actions)
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
		[]string{"get secrets my-database-credentials", "update databases/status my-database", "update databases my-database"}), f.actions,
		"the claims deleted by the first pass are looked for again: gone")
	require.Equal(t, []string{"Normal CleanupDone Cleanup done with deletionPolicy Delete: deleted the workload, volumes and credentials"}, f.events())
	require.Empty(t, f.database().Finalizers)
}

func TestDeletionWaitsForAStatefulSetOrphaningItsPods(t *testing.T) {
	f := newFixture(t, seedDatabase())
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

func TestDoNotTerminateProtectsTheClaimsAndTheSecretWithAFinalizer(t *testing.T) {
	db := seedDatabase()
	db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
	f := newFixture(t, db)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, firstReconcile, f.actions)
	require.Equal(t, []string{database.ProtectFinalizer}, f.secret().Finalizers)
	for i := range 3 {
		require.Equal(t, []string{database.ProtectFinalizer}, f.claim(fmt.Sprintf("data-my-database-%d", i)).Finalizers,
			"the claims the Reconciler creates are protected from the start")
	}
	f.createClaims(3)

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.actions)
	for i := range 3 {
		require.Equal(t, []string{database.ProtectFinalizer}, f.claim(fmt.Sprintf("data-my-database-%d", i)).Finalizers)
	}

	// The namespace is deleted: the Secret and the claims wait, Terminating.
	secret := f.secret().DeepCopy()
	secret.DeletionTimestamp = ptr.To(metav1.NewTime(start))
	require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, f.actions, "update secrets my-database-credentials")

	// Any other policy releases them.
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.DeletionPolicy = examplev1.DeletionPolicyDelete })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"update secrets my-database-credentials", "update persistentvolumeclaims data-my-database-0",
		"update persistentvolumeclaims data-my-database-1", "update persistentvolumeclaims data-my-database-2",
		"update databases/status my-database"}, f.actions, "the Secret still being deleted stops the pass, not the claims' release")
	require.Empty(t, f.secret().Finalizers)
	for i := range 3 {
		require.Empty(t, f.claim(fmt.Sprintf("data-my-database-%d", i)).Finalizers)
	}
}

func TestDeletionRemovesTheProtectionOfAPolicyChangedJustBefore(t *testing.T) {
	for _, policy := range []examplev1.DeletionPolicy{examplev1.DeletionPolicyRetain, examplev1.DeletionPolicyDelete} {
		t.Run(string(policy), func(t *testing.T) {
			db := seedDatabase()
			db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
			f := newFixture(t, db)
			f.ready()
			_, err := f.reconcile() // protects the claims created by f.ready
			require.NoError(t, err)
			require.Equal(t, []string{database.ProtectFinalizer}, f.secret().Finalizers)
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

func TestTerminatingNamespaceIsReported(t *testing.T) {
	f := newFixture(t, seedDatabase())
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace production is being terminated", Field: "metadata.namespace"})
	f.inject("create", "statefulsets", 1, terminating)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result, "not a hot loop of creates")
	db := f.database()
	require.Equal(t, metav1.ConditionFalse, condition(db, "Ready").Status)
	require.Equal(t, "NamespaceTerminating", condition(db, "Ready").Reason)
	require.Equal(t, `cannot create StatefulSet "my-database": the namespace is being deleted`, condition(db, "Ready").Message)
}

// retained is a child as a Retain of a Database of the same name (uid old-uid) left it.
func retained(obj metav1.Object) {
	obj.SetOwnerReferences(nil)
	obj.SetAnnotations(map[string]string{database.RetainedFromAnnotation: namespace + "/" + name})
	l := obj.GetLabels()
	delete(l, specs.ManagedByLabel)
	obj.SetLabels(l)
}

func TestRetainedDataIsAdoptedByADatabaseOfTheSameName(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cached: the claims are in the claim cache; otherwise only on the API server (released
		// a moment ago). Either way they are read by name before the StatefulSet mounts them.
		cached bool
	}{
		{"claims in the cache", true},
		{"claims not yet in the cache", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := newFixture(t, seedDatabase())
			old.ready()
			secret := old.secret().DeepCopy()
			retained(secret)
			objects := []runtime.Object{secret}
			for i := range 3 {
				claim := old.claim(fmt.Sprintf("data-my-database-%d", i)).DeepCopy()
				retained(claim)
				objects = append(objects, claim)
			}
			db := seedDatabase()
			db.UID = "new-uid"
			f := newFixture(t, db, objects...)
			if !tc.cached {
				for i := range 3 {
					f.pin(claims, fmt.Sprintf("data-my-database-%d", i), nil)
				}
			}

			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, slices.Concat([]string{
				"update databases my-database",
				"create secrets my-database-credentials",
				"get secrets my-database-credentials",
				"update secrets my-database-credentials",
				"create services my-database-headless",
				"create services my-database",
			}, getClaims, []string{
				"update persistentvolumeclaims data-my-database-0",
				"update persistentvolumeclaims data-my-database-1",
				"update persistentvolumeclaims data-my-database-2",
				"create statefulsets my-database",
				"create poddisruptionbudgets my-database",
				"update databases/status my-database",
			}), f.actions)
			events := f.events()
			for _, e := range []string{"Normal Adopted Adopted retained Secret my-database-credentials",
				"Normal Adopted Adopted retained PersistentVolumeClaim data-my-database-0"} {
				require.Contains(t, events, e)
			}
			require.Equal(t, secret.Data["password"], f.secret().Data["password"], "the data keeps the old password")
			for _, obj := range []metav1.Object{f.secret(), f.claim("data-my-database-2")} {
				ref := metav1.GetControllerOf(obj)
				require.NotNil(t, ref, obj.GetName())
				require.Equal(t, types.UID("new-uid"), ref.UID)
				require.NotContains(t, obj.GetAnnotations(), database.RetainedFromAnnotation)
				require.Equal(t, specs.ManagedByValue, obj.GetLabels()[specs.ManagedByLabel])
			}
			require.NotEqual(t, examplev1.DatabasePhaseFailed, f.database().Status.Phase)
		})
	}
}

func TestForeignClaimWithADataClaimNameIsAConflict(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
	}{
		{"unmarked", nil, nil},
		{"retained from another Database", map[string]string{database.RetainedFromAnnotation: "other/my-database"}, nil},
		{"retained from a Database of another engine", map[string]string{database.RetainedFromAnnotation: "production/my-database"},
			map[string]string{"app.kubernetes.io/name": "mysql"}},
	} {
		for _, where := range []struct {
			name string
			// cached: the foreign claim is in the claim cache; otherwise it was created a moment
			// ago and only the API server has it. Either way the claims about to be mounted are
			// read by name, and none is created before the conflict.
			cached bool
		}{
			{"in the cache", true},
			{"not yet in the cache", false},
		} {
			t.Run(tc.name+", "+where.name, func(t *testing.T) {
				foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "data-my-database-0",
					UID: "foreign", Annotations: tc.annotations, Labels: tc.labels}}
				f := newFixture(t, seedDatabase(), foreign)
				if !where.cached {
					f.pin(claims, foreign.Name, nil)
				}
				result, err := f.reconcile()
				require.NoError(t, err)
				require.Equal(t, requeueExternal, result)
				require.Equal(t, slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials",
					"create services my-database-headless", "create services my-database"}, getClaims,
					[]string{"update databases/status my-database"}), f.actions, "no StatefulSet mounts it")
				require.False(t, f.exists(statefulSets, name))
				db := f.database()
				require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
				require.Equal(t, "ChildConflict", condition(db, "Ready").Reason)
				require.Contains(t, condition(db, "Ready").Message, "PersistentVolumeClaim data-my-database-0 already exists")
				require.Equal(t, foreign, f.claim("data-my-database-0"))
			})
		}
	}
}

func TestScalingOntoAForeignClaimIsAConflict(t *testing.T) {
	f := newFixture(t, seedDatabase())
	f.ready()
	require.NoError(t, f.kube.Tracker().Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: "data-my-database-3", UID: "foreign"}}))
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](5) })
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.Equal(t, []string{"get persistentvolumeclaims data-my-database-3", "get persistentvolumeclaims data-my-database-4",
		"update databases/status my-database"}, f.actions,
		"both ordinals about to be mounted are read by name, data-my-database-3 although the cache has it; nothing is created")
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas)
}

func TestDataClaimsAreFoundByNameWhateverTheirLabels(t *testing.T) {
	edit := func(f *fixture) {
		claim := f.claim("data-my-database-1").DeepCopy()
		claim.Labels = map[string]string{"edited": "by-hand"}
		require.NoError(t, f.kube.Tracker().Update(claims, claim, namespace))
	}
	t.Run("expanded, labels restored", func(t *testing.T) {
		f := newFixture(t, seedDatabase())
		f.ready()
		edit(f)
		f.updateDatabase(func(db *examplev1.Database) { db.Spec.Storage = "200Gi" })
		_, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, []string{
			"patch persistentvolumeclaims data-my-database-0",
			"update persistentvolumeclaims data-my-database-1",
			"patch persistentvolumeclaims data-my-database-1",
			"patch persistentvolumeclaims data-my-database-2",
			"delete statefulsets my-database",
			"create statefulsets my-database",
			"update databases/status my-database",
		}, f.actions, "data-my-database-1 is found in the claim cache's index, outside ManagedBySelector, with no read from the API server")
		claim := f.claim("data-my-database-1")
		require.Equal(t, "200Gi", ptr.To(claim.Spec.Resources.Requests[corev1.ResourceStorage]).String())
		require.Equal(t, "by-hand", claim.Labels["edited"])
		require.Equal(t, specs.ManagedByValue, claim.Labels[specs.ManagedByLabel])
		require.Equal(t, name, claim.Labels["app.kubernetes.io/instance"])
	})
	t.Run("released by Retain", func(t *testing.T) {
		db := seedDatabase()
		db.Spec.DeletionPolicy = examplev1.DeletionPolicyRetain
		f := newFixture(t, db)
		f.ready()
		edit(f)
		f.updateDatabase(func(db *examplev1.Database) { db.DeletionTimestamp = ptr.To(metav1.NewTime(start)) })
		_, err := f.reconcile()
		require.NoError(t, err)
		require.Contains(t, f.actions, "patch persistentvolumeclaims data-my-database-1")
		require.Empty(t, f.claim("data-my-database-1").OwnerReferences, "the garbage collector must not take it")
	})
}
