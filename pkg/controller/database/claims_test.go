package database_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
)

func TestClaimsByDatabaseIndexesDataClaimNames(t *testing.T) {
	for _, tc := range []struct {
		claim string
		want  []string
	}{
		{"data-a-b-0", []string{"production/a-b"}},
		{"data-a-10", []string{"production/a"}},
		{"data-my-database-2", []string{"production/my-database"}},
		{"data-a-2147483647", []string{"production/a"}},
		{"data-x", nil},
		{"other-a-0", nil},
		{"data--0", nil},
		{"data-a-", nil},
		{"data-a-01", nil},
		{"data-a-b", nil},
		{"data-a-+1", nil},
		{"data-a-2147483648", nil},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			got, err := database.ClaimsByDatabase(&corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: tc.claim}})
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := database.ClaimsByDatabase("not an object")
	require.Error(t, err)
}

func TestScalingOntoAForeignClaimTheCacheHasNotSeenIsAConflict(t *testing.T) {
	f := newFixture(t, seedDatabase())
	f.ready()
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "data-my-database-3", UID: "foreign"}}
	require.NoError(t, f.kube.Tracker().Add(foreign))
	f.pin(claims, foreign.Name, nil) // created a moment ago: the informer has not delivered it
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](5) })

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.Equal(t, []string{
		"get persistentvolumeclaims data-my-database-3",
		"get persistentvolumeclaims data-my-database-4",
		"update databases/status my-database",
	}, f.actions, "the ordinals about to be mounted are read by name; the StatefulSet is not scaled")
	require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas)
	require.Equal(t, "ChildConflict", condition(f.database(), "Ready").Reason)
	require.Equal(t, foreign, f.claim(foreign.Name))
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
			f := newFixture(t, seedDatabase())
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
	db := seedDatabase()
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
