package database

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// FinalizerName is the finalizer the Reconciler puts on every Database before creating its
// children, and removes once the deletion policy's cleanup is done.
const FinalizerName = "database.example.com/finalizer"

// ProtectFinalizer is on db's data claims and credentials Secret while spec.deletionPolicy
// is DoNotTerminate, so that nothing (a namespace deletion, a kubectl delete) removes them
// until the policy changes.
const ProtectFinalizer = "database.example.com/protect"

// CredentialsFinalizer is on the credentials Secret while its Database exists, whatever the
// deletion policy: the engine keeps the password in its data directory from the first start,
// so a Secret deleted under a live Database would leave no credentials the database accepts.
// A Secret being deleted is kept until its Database goes, whose cleanup removes the finalizer
// (deleting or releasing the Secret per the deletion policy).
const CredentialsFinalizer = "database.example.com/credentials"

// RetainedFromAnnotation marks a claim or Secret that deletionPolicy Retain released from a
// Database, with its "<namespace>/<name>", for people to read: a new Database of that name
// adopts it only when its UID is in the release record too (judgeAdoption), since anyone who
// may create Secrets or claims can set an annotation.
const RetainedFromAnnotation = "database.example.com/retained-from"

// setFinalizer adds FinalizerName to db (present) or removes it, with an Update; on a
// conflict it reads the Database again from the API server and retries
// (retry.RetryOnConflict). It returns the Database as written, or db when nothing was to do.
// A Database already gone when removing is not an error.
func (r *Reconciler) setFinalizer(ctx context.Context, db *examplev1.Database, present bool) (*examplev1.Database, error) {
	client := r.databases.ExampleV1().Databases(db.Namespace)
	current, out := db, db
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		update := current.DeepCopy()
		has := slices.Contains(update.Finalizers, FinalizerName)
		switch {
		case present == has:
			out = current
			return nil
		case present && update.DeletionTimestamp != nil:
			return fmt.Errorf("database %s/%s is being deleted", db.Namespace, db.Name)
		case present:
			update.Finalizers = append(update.Finalizers, FinalizerName)
		default:
			update.Finalizers = slices.DeleteFunc(update.Finalizers, func(f string) bool { return f == FinalizerName })
		}
		written, err := client.Update(ctx, update, metav1.UpdateOptions{})
		switch {
		case err == nil:
			out = written
			r.seen.set(written.UID, written.ResourceVersion)
			return nil
		case apierrors.IsNotFound(err) && !present:
			return nil
		case apierrors.IsConflict(err):
			fresh, getErr := client.Get(ctx, db.Name, metav1.GetOptions{})
			if getErr != nil {
				if apierrors.IsNotFound(getErr) && !present {
					return nil
				}
				return getErr
			}
			current = fresh
		}
		return err
	})
	return out, err
}

// isControlledBy reports whether obj's controller reference is db (by UID).
func isControlledBy(obj metav1.Object, db *examplev1.Database) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == db.UID
}

// retainedKey is the value of RetainedFromAnnotation for db's children.
func retainedKey(db *examplev1.Database) string { return db.Namespace + "/" + db.Name }

// isRetainedFor reports whether obj is marked as released by a Retain of a Database named as
// db, of the same engine (its data would not start another), and nothing controls it since:
// db adopts it if the release record holds it (judgeAdoption).
func isRetainedFor(obj metav1.Object, db *examplev1.Database) bool {
	engine, labelled := obj.GetLabels()[names.NameLabel]
	return metav1.GetControllerOf(obj) == nil && obj.GetAnnotations()[RetainedFromAnnotation] == retainedKey(db) &&
		(!labelled || engine == string(db.Spec.Engine))
}

// adopt makes db the controller of obj, a child it may adopt (judgeAdoption), with the
// owner reference ref, and removes the marks (RetainedFromAnnotation, RestoreForAnnotation).
func adopt(obj metav1.Object, ref metav1.OwnerReference) {
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), ref))
	annotations := obj.GetAnnotations()
	delete(annotations, RetainedFromAnnotation)
	delete(annotations, RestoreForAnnotation)
	obj.SetAnnotations(annotations)
}

// protected reports whether db's data must carry ProtectFinalizer.
func protected(db *examplev1.Database) bool {
	return db.Spec.DeletionPolicy == examplev1.DeletionPolicyDoNotTerminate
}

// setProtection adds ProtectFinalizer to obj or removes it, and reports whether it changed.
func setProtection(obj metav1.Object, present bool) bool {
	finalizers := obj.GetFinalizers()
	if slices.Contains(finalizers, ProtectFinalizer) == present {
		return false
	}
	if present {
		obj.SetFinalizers(append(finalizers, ProtectFinalizer))
	} else {
		obj.SetFinalizers(slices.DeleteFunc(slices.Clone(finalizers), func(f string) bool { return f == ProtectFinalizer }))
	}
	return true
}

// setCredentialsFinalizer adds CredentialsFinalizer to secret, and reports whether it changed.
func setCredentialsFinalizer(secret metav1.Object) bool {
	if slices.Contains(secret.GetFinalizers(), CredentialsFinalizer) {
		return false
	}
	secret.SetFinalizers(append(secret.GetFinalizers(), CredentialsFinalizer))
	return true
}

// ourFinalizers are the finalizers the Reconciler puts on a Database's data claims and
// Secret, which its cleanup removes.
var ourFinalizers = []string{ProtectFinalizer, CredentialsFinalizer}

// hasOurFinalizer reports whether obj carries one of ourFinalizers.
func hasOurFinalizer(obj metav1.Object) bool {
	return slices.ContainsFunc(obj.GetFinalizers(), func(f string) bool { return slices.Contains(ourFinalizers, f) })
}

// unprotectPatch is the strategic merge patch that removes ourFinalizers from the object of
// uid (another object of the same name makes it fail: isUIDMismatch).
func unprotectPatch(uid types.UID) []byte {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":                                 uid,
		"$deleteFromPrimitiveList/finalizers": ourFinalizers,
	}})
	return patch
}

// releasePatch is the strategic merge patch that releases a child from db: it deletes db's
// owner reference (by uid, the list's merge key), the managed-by label and ourFinalizers
// (whether or not a possibly stale copy shows them; deleting an absent one is a no-op), so
// neither the garbage collector nor the Reconciler touches the object again; and it marks the
// object RetainedFromAnnotation, so a new Database of the same name adopts it (with the data
// and the password the engine keeps), once recordReleased has recorded its UID. It applies only to the object of uid: another object of
// the same name makes it fail (isUIDMismatch), so a foreign one is never marked.
func releasePatch(db *examplev1.Database, uid types.UID) []byte {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":                                 uid,
		"labels":                              map[string]any{names.ManagedByLabel: nil},
		"annotations":                         map[string]any{RetainedFromAnnotation: retainedKey(db)},
		"ownerReferences":                     []map[string]any{{"$patch": "delete", "uid": db.UID}},
		"$deleteFromPrimitiveList/finalizers": ourFinalizers,
	}})
	return patch
}
