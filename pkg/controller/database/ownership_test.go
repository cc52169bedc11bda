package database_test

import (
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
)

func TestFinalizerConflictReadsAgainAndRetries(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.inject("update", "databases", 1, apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "databases"}, name, errors.New("modified")))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, append([]string{"update databases my-database", "get databases my-database"}, firstReconcile...), f.actions)
	require.Equal(t, []string{database.FinalizerName}, f.database().Finalizers)
}

func TestDoNotTerminateProtectsTheClaimsAndTheSecretWithAFinalizer(t *testing.T) {
	db := exampleDatabase()
	db.Spec.DeletionPolicy = examplev1.DeletionPolicyDoNotTerminate
	f := newFixture(t, db)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, firstReconcile, f.actions)
	require.Equal(t, []string{database.CredentialsFinalizer, database.ProtectFinalizer}, f.secret().Finalizers)
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
		"update databases/status my-database"}, f.actions)
	require.Equal(t, []string{database.CredentialsFinalizer}, f.secret().Finalizers, "kept while the Database exists")
	for i := range 3 {
		require.Empty(t, f.claim(fmt.Sprintf("data-my-database-%d", i)).Finalizers)
	}
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
			old := newFixture(t, exampleDatabase())
			old.ready()
			secret := old.secret().DeepCopy()
			retained(secret)
			objects := []runtime.Object{secret}
			for i := range 3 {
				claim := old.claim(fmt.Sprintf("data-my-database-%d", i)).DeepCopy()
				retained(claim)
				objects = append(objects, claim)
			}
			db := exampleDatabase()
			db.UID = "new-uid"
			f := newFixture(t, db, objects...)
			if !tc.cached {
				for i := range 3 {
					f.pin(claims, fmt.Sprintf("data-my-database-%d", i), nil)
				}
			}

			// Retained claims in the cache hold data: the Secret the cache misses is read (it is
			// there), never generated; otherwise its create finds it.
			secretActions := []string{"get secrets my-database-credentials", "update secrets my-database-credentials"}
			if !tc.cached {
				secretActions = slices.Insert(secretActions, 0, "create secrets my-database-credentials")
			}
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, slices.Concat([]string{"update databases my-database"}, secretActions, createServices, getClaims, []string{
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
			db := exampleDatabase()
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
