package database_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
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

func TestScalingUpOntoAClaimReplacedBehindAStaleCacheIsAConflict(t *testing.T) {
	f := newFixture(t, seedDatabase())
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](1) })
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int32(1), *f.statefulSet().Spec.Replicas)
	// Our data-my-database-2 stays after the scale-down; it is deleted and a foreign claim
	// takes its name, while the cache still holds ours.
	ours := f.claim("data-my-database-2").DeepCopy()
	f.pin(claims, ours.Name, ours)
	require.NoError(t, f.kube.Tracker().Delete(claims, namespace, ours.Name))
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ours.Name, UID: "foreign"}}
	require.NoError(t, f.kube.Tracker().Add(foreign))
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](3) })

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.Equal(t, []string{
		"get persistentvolumeclaims data-my-database-1",
		"get persistentvolumeclaims data-my-database-2",
		"update databases/status my-database",
	}, f.actions, "the ordinals about to be mounted are read from the API server although the cache holds them")
	require.Equal(t, int32(1), *f.statefulSet().Spec.Replicas, "not scaled onto the foreign claim")
	require.Equal(t, "ChildConflict", condition(f.database(), "Ready").Reason)
	require.Contains(t, condition(f.database(), "Ready").Message, "PersistentVolumeClaim data-my-database-2 already exists")
	require.Equal(t, foreign, f.claim(foreign.Name))
}

func TestTheReconcilerCreatesTheClaimsAsTheStatefulSetControllerWouldBeforeTheStatefulSet(t *testing.T) {
	for _, policy := range []examplev1.DeletionPolicy{examplev1.DeletionPolicyDelete, examplev1.DeletionPolicyDoNotTerminate} {
		t.Run(string(policy), func(t *testing.T) {
			db := seedDatabase()
			db.Spec.DeletionPolicy = policy
			f := newFixture(t, db)
			_, err := f.reconcile()
			require.NoError(t, err)
			sts := slices.Index(f.actions, "create statefulsets my-database")
			require.Positive(t, sts)
			for i := range 3 {
				require.Less(t, slices.Index(f.actions, fmt.Sprintf("create persistentvolumeclaims data-my-database-%d", i)), sts,
					"the claim exists before the StatefulSet, so the StatefulSet controller creates none")
			}

			// What the StatefulSet controller makes of the StatefulSet's volumeClaimTemplate
			// (getPersistentVolumeClaims in k8s.io/kubernetes/pkg/controller/statefulset).
			set := f.statefulSet()
			require.Len(t, set.Spec.VolumeClaimTemplates, 1)
			for i := range 3 {
				want := set.Spec.VolumeClaimTemplates[0].DeepCopy()
				want.Name = fmt.Sprintf("%s-%s-%d", want.Name, set.Name, i)
				want.Namespace = set.Namespace
				maps.Copy(want.Labels, set.Spec.Selector.MatchLabels)

				got := f.claim(want.Name)
				require.Equal(t, want.Labels, got.Labels)
				require.Equal(t, want.Annotations, got.Annotations)
				require.Equal(t, want.OwnerReferences, got.OwnerReferences)
				require.Equal(t, []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Database", Name: name, UID: dbUID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}, got.OwnerReferences)
				require.Equal(t, want.Spec, got.Spec)
				if policy == examplev1.DeletionPolicyDoNotTerminate {
					require.Equal(t, []string{database.ProtectFinalizer}, got.Finalizers)
				} else {
					require.Empty(t, got.Finalizers)
				}
			}
		})
	}
}

func TestAForeignClaimCreatedBetweenTheReadAndTheCreateIsAConflict(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup brings the Database to the pass that creates claim.
		setup   func(f *fixture)
		claim   string
		actions []string
		// replicas is the StatefulSet's afterwards, 0 for none.
		replicas int32
	}{{
		name:  "before the StatefulSet is created",
		setup: func(*fixture) {},
		claim: "data-my-database-1",
		actions: slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials",
			"create services my-database-headless", "create services my-database"}, getClaims, []string{
			"get statefulsets my-database",
			"create persistentvolumeclaims data-my-database-0",
			"create persistentvolumeclaims data-my-database-1",
			"get persistentvolumeclaims data-my-database-1",
			"update databases/status my-database",
		}),
	}, {
		name: "before the StatefulSet is scaled up",
		setup: func(f *fixture) {
			f.ready()
			f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](4) })
		},
		claim: "data-my-database-3",
		actions: []string{
			"get persistentvolumeclaims data-my-database-3",
			"create persistentvolumeclaims data-my-database-3",
			"get persistentvolumeclaims data-my-database-3",
			"update databases/status my-database",
		},
		replicas: 3,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, seedDatabase())
			tc.setup(f)
			foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: tc.claim, UID: "foreign"}}
			// Someone creates the claim after the Reconciler read it absent: its create finds it.
			f.kube.PrependReactor("create", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() == tc.claim && !f.exists(claims, tc.claim) {
					require.NoError(t, f.kube.Tracker().Add(foreign))
				}
				return false, nil, nil
			})

			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, requeueExternal, result)
			require.Equal(t, tc.actions, f.actions, "no StatefulSet create or scale")
			if tc.replicas == 0 {
				require.False(t, f.exists(statefulSets, name))
			} else {
				require.Equal(t, tc.replicas, *f.statefulSet().Spec.Replicas)
			}
			require.Equal(t, "ChildConflict", condition(f.database(), "Ready").Reason)
			require.Contains(t, condition(f.database(), "Ready").Message, "PersistentVolumeClaim "+tc.claim+" already exists")
			require.Equal(t, foreign, f.claim(tc.claim))
		})
	}
}

// serverChecksPatchUID plays the API server's refusal of a patch of a claim whose metadata.uid
// is not the stored claim's (uid is immutable: 422, a cause on metadata.uid), which the fake
// clientset does not check.
func serverChecksPatchUID(f *fixture) {
	f.kube.PrependReactor("patch", "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var patch struct {
			Metadata struct {
				UID *types.UID `json:"uid"`
			} `json:"metadata"`
		}
		require.NoError(f.t, json.Unmarshal(p.GetPatch(), &patch))
		stored, err := f.kube.Tracker().Get(claims, namespace, p.GetName())
		if err != nil || patch.Metadata.UID == nil || *patch.Metadata.UID == stored.(metav1.Object).GetUID() {
			return false, nil, nil
		}
		f.record(a) // handled here, before the fixture's recording reactor
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, p.GetName(),
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), *patch.Metadata.UID, "field is immutable")})
	})
}

func TestReleaseAndUnprotectPatchesApplyOnlyToTheClaimTheyWereMadeFor(t *testing.T) {
	for _, tc := range []struct {
		policy examplev1.DeletionPolicy
	}{
		{examplev1.DeletionPolicyRetain}, // releasePatch
		{examplev1.DeletionPolicyDelete}, // unprotectPatch, our claim protected before a policy change
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			db := seedDatabase()
			db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
			f := newFixture(t, db)
			f.ready()
			serverChecksPatchUID(f)
			// The cache still holds our data-my-database-2 (protected); on the API server a
			// foreign claim, protected by some other owner, has taken its name.
			ours := f.claim("data-my-database-2").DeepCopy()
			require.Equal(t, []string{database.ProtectFinalizer}, ours.Finalizers)
			f.pin(claims, ours.Name, ours)
			require.NoError(t, f.kube.Tracker().Delete(claims, namespace, ours.Name))
			foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ours.Name, UID: "foreign",
				Finalizers: []string{database.ProtectFinalizer}, Labels: map[string]string{specs.ManagedByLabel: "someone-else"}}}
			require.NoError(t, f.kube.Tracker().Add(foreign))
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.DeletionPolicy = tc.policy
				db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
			})

			_, err := f.reconcile()
			require.True(t, apierrors.IsConflict(err), "retried with a fresh copy: %v", err)
			require.Contains(t, f.actions, "patch persistentvolumeclaims data-my-database-2")
			for _, a := range f.raw {
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetResource() == claims {
					var patch struct {
						Metadata struct {
							UID types.UID `json:"uid"`
						} `json:"metadata"`
					}
					require.NoError(t, json.Unmarshal(p.GetPatch(), &patch))
					require.Equal(t, types.UID(p.GetName()+"-uid"), patch.Metadata.UID, "%s %s", p.GetName(), p.GetPatch())
				}
			}
			require.Equal(t, foreign, f.claim(foreign.Name), "the foreign claim is neither released nor modified")
			require.Equal(t, []string{database.FinalizerName}, f.database().Finalizers, "the cleanup is not done")
			for _, e := range f.events() {
				require.NotContains(t, e, "CleanupDone")
			}

			// The cache catches up: the foreign claim is not ours, the cleanup completes.
			f.unpin(claims, ours.Name)
			_, err = f.reconcile()
			require.NoError(t, err)
			require.NotContains(t, f.actions, "patch persistentvolumeclaims data-my-database-2")
			require.Empty(t, f.database().Finalizers)
			require.Equal(t, foreign, f.claim(foreign.Name))
		})
	}
}

func TestNoClaimIsCreatedForAForeignStatefulSetOfTheName(t *testing.T) {
	// Unlabelled, so not in the cache: the StatefulSet controller would mount our claims in it.
	foreign := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "foreign"}}
	f := newFixture(t, seedDatabase(), foreign)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.Equal(t, slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials",
		"create services my-database-headless", "create services my-database"}, getClaims,
		[]string{"get statefulsets my-database", "update databases/status my-database"}), f.actions)
	require.Contains(t, condition(f.database(), "Ready").Message, "StatefulSet my-database already exists")
	require.False(t, f.exists(claims, "data-my-database-0"))
}
