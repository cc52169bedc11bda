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
	"example.com/database-apiserver/pkg/names"
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
	delete(l, names.ManagedByLabel)
	obj.SetLabels(l)
}

// releasedRecord is the release record a Retain of the example Database writes for objs
// (Secrets and claims), in the controller's namespace.
func releasedRecord(objs ...metav1.Object) *corev1.ConfigMap {
	data := map[string]string{}
	for _, obj := range objs {
		kind := "PersistentVolumeClaim"
		if _, ok := obj.(*corev1.Secret); ok {
			kind = "Secret"
		}
		data[string(obj.GetUID())] = kind + " " + obj.GetName()
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: database.DefaultControllerNamespace,
		Name: database.ReleasedRecordName(namespace, name), Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue}},
		Data: data}
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
			released := []metav1.Object{secret}
			for i := range 3 {
				claim := old.claim(fmt.Sprintf("data-my-database-%d", i)).DeepCopy()
				retained(claim)
				objects = append(objects, claim)
				released = append(released, claim)
			}
			objects = append(objects, releasedRecord(released...))
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
			// The release record is read once, and each adopted uid removed from it; the last
			// removal deletes it.
			record := "released.production.my-database"
			secretActions := []string{"get configmaps " + record, "get secrets my-database-credentials", "update secrets my-database-credentials",
				"get configmaps " + record, "update configmaps " + record}
			if !tc.cached {
				secretActions = []string{"create secrets my-database-credentials", "get secrets my-database-credentials", "get configmaps " + record,
					"update secrets my-database-credentials", "get configmaps " + record, "update configmaps " + record}
			}
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, slices.Concat([]string{"update databases my-database"}, secretActions, createServices, getClaims, []string{
				"update persistentvolumeclaims data-my-database-0",
				"get configmaps " + record, "update configmaps " + record,
				"update persistentvolumeclaims data-my-database-1",
				"get configmaps " + record, "update configmaps " + record,
				"update persistentvolumeclaims data-my-database-2",
				"get configmaps " + record, "delete configmaps " + record,
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
				require.Equal(t, names.ManagedByValue, obj.GetLabels()[names.ManagedByLabel])
			}
			require.NotEqual(t, examplev1.DatabasePhaseFailed, f.database().Status.Phase)
			_, err = f.kube.Tracker().Get(configMaps, database.DefaultControllerNamespace, record)
			require.True(t, apierrors.IsNotFound(err), "every recorded uid adopted: the record is gone (%v)", err)
		})
	}
}

// TestLookAlikesOfRetainedDataAreNotAdopted plants, before a Database is created, a Secret and
// a claim of its children's names marked retained-from it, as anyone who may create Secrets
// and claims in the namespace can: none is adopted, since no Retain of this controller
// released them (the record does not hold their uids, or holds another object's), and the
// Database says why.
func TestLookAlikesOfRetainedDataAreNotAdopted(t *testing.T) {
	plantedSecret := func() *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials", UID: "planted-secret"},
			Data: map[string][]byte{"username": []byte("postgres"), "password": []byte("known")}}
		retained(s)
		return s
	}
	plantedClaim := func() *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "data-my-database-0", UID: "planted-claim"}}
		retained(c)
		return c
	}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		// kind and child name the object the Database reports.
		kind, child string
	}{
		{"a Secret, no record", []runtime.Object{plantedSecret()}, "Secret", name + "-credentials"},
		{"a claim, no record", []runtime.Object{plantedClaim()}, "PersistentVolumeClaim", "data-my-database-0"},
		{"a Secret, the record holds another uid", []runtime.Object{plantedSecret(),
			releasedRecord(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials", UID: "released-secret"}})},
			"Secret", name + "-credentials"},
		{"a claim recorded as a Secret", []runtime.Object{plantedClaim(),
			releasedRecord(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "data-my-database-0", UID: "planted-claim"}})},
			"PersistentVolumeClaim", "data-my-database-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []runtime.Object
			for _, o := range tc.objects {
				before = append(before, o.DeepCopyObject())
			}
			f := newFixture(t, exampleDatabase(), tc.objects...)
			_, err := f.reconcile()
			require.NoError(t, err)
			db := f.database()
			require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
			require.Equal(t, "ChildConflict", condition(db, "Degraded").Reason)
			uid := "planted-secret"
			if tc.kind == "PersistentVolumeClaim" {
				uid = "planted-claim"
			}
			require.Equal(t, fmt.Sprintf("%s %s carries database.example.com/retained-from=production/my-database but is not adopted: this controller did not release it (its uid %s is not in the release record ConfigMap database-system/released.production.my-database), so it may have been planted; it is left untouched: delete or rename it, or give the Database another name (checked again every minute)",
				tc.kind, tc.child, uid), condition(db, "Degraded").Message)
			require.Contains(t, f.events(), fmt.Sprintf("Warning ChildConflict Not adopting %s %s: its uid %s is not one this controller released", tc.kind, tc.child, uid))
			for _, o := range before {
				m := o.(metav1.Object)
				got, err := f.kube.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: map[bool]string{true: "secrets", false: "persistentvolumeclaims"}[tc.kind == "Secret"]}, m.GetNamespace(), m.GetName())
				if _, isRecord := o.(*corev1.ConfigMap); isRecord {
					continue
				}
				require.NoError(t, err)
				require.Equal(t, o, got, "left untouched")
			}
			require.NotContains(t, f.actions, "create statefulsets my-database", "the planted data is never mounted")
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
				Finalizers: []string{database.ProtectFinalizer}, Labels: map[string]string{names.ManagedByLabel: "someone-else"}}}
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

// A Secret restored for another Database's uid (one deleted, or planted with a guess) is
// not adopted by a Database whose Secret is lost.
func TestASecretRestoredForAnotherUIDIsNotAdopted(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	old := f.secret().DeepCopy()
	require.NoError(t, f.kube.Tracker().Delete(secrets, namespace, old.Name))
	planted := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: old.Name,
		Annotations: map[string]string{database.RestoreForAnnotation: "another-uid"}}, Data: old.Data}
	require.NoError(t, f.kube.Tracker().Add(planted))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "ChildConflict", condition(f.database(), "Degraded").Reason)
	require.Nil(t, metav1.GetControllerOf(f.secret()), "not adopted")
}
