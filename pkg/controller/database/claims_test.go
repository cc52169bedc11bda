package database_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/names"
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

// Scaling up onto a data claim name held by a foreign claim stops before the StatefulSet is
// scaled, whether the claim cache holds the claim or it was created a moment ago and only the
// API server has it: the ordinals about to be mounted are read by name either way.
func TestScalingOntoAForeignClaimIsAConflict(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cached %v", cached), func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			f.ready()
			foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "data-my-database-3", UID: "foreign"}}
			require.NoError(t, f.kube.Tracker().Add(foreign))
			if !cached {
				f.pin(claims, foreign.Name, nil) // created a moment ago: the informer has not delivered it
			}
			f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](5) })

			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, requeueExternal, result)
			require.Equal(t, []string{
				"get persistentvolumeclaims data-my-database-3",
				"get persistentvolumeclaims data-my-database-4",
				"update databases/status my-database",
			}, f.actions, "both ordinals about to be mounted are read by name; nothing is created and the StatefulSet is not scaled")
			require.Equal(t, int32(3), *f.statefulSet().Spec.Replicas)
			require.Equal(t, "ChildConflict", condition(f.database(), "Ready").Reason)
			require.Equal(t, foreign, f.claim(foreign.Name))
		})
	}
}

func TestScalingUpOntoAClaimReplacedBehindAStaleCacheIsAConflict(t *testing.T) {
	f := newFixture(t, exampleDatabase())
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
		// Replicas > 1 again: the read Service and the Secret's read-host come back first.
		"update secrets my-database-credentials",
		"create services my-database-read",
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
			db := exampleDatabase()
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
		actions: slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials"},
			createServices, getClaims, []string{
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
			f := newFixture(t, exampleDatabase())
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

func TestNoClaimIsCreatedForAForeignStatefulSetOfTheName(t *testing.T) {
	// Unlabelled, so not in the cache: the StatefulSet controller would mount our claims in it.
	foreign := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "foreign"}}
	f := newFixture(t, exampleDatabase(), foreign)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.Equal(t, slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials"},
		createServices, getClaims,
		[]string{"get statefulsets my-database", "update databases/status my-database"}), f.actions)
	require.Contains(t, condition(f.database(), "Ready").Message, "StatefulSet my-database already exists")
	require.False(t, f.exists(claims, "data-my-database-0"))
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
				f := newFixture(t, exampleDatabase(), foreign)
				if !where.cached {
					f.pin(claims, foreign.Name, nil)
				}
				result, err := f.reconcile()
				require.NoError(t, err)
				require.Equal(t, requeueExternal, result)
				require.Equal(t, slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials"},
					createServices, getClaims,
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

func TestDataClaimsAreFoundByNameWhateverTheirLabels(t *testing.T) {
	edit := func(f *fixture) {
		claim := f.claim("data-my-database-1").DeepCopy()
		claim.Labels = map[string]string{"edited": "by-hand"}
		require.NoError(t, f.kube.Tracker().Update(claims, claim, namespace))
	}
	t.Run("expanded, labels restored", func(t *testing.T) {
		f := newFixture(t, exampleDatabase())
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
		require.Equal(t, names.ManagedByValue, claim.Labels[names.ManagedByLabel])
		require.Equal(t, name, claim.Labels["app.kubernetes.io/instance"])
	})
	t.Run("released by Retain", func(t *testing.T) {
		db := exampleDatabase()
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
