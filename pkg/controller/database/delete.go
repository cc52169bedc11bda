package database

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// reconcileDelete runs the cleanup of spec.deletionPolicy for a Database being deleted, then
// removes FinalizerName (issue #4, section 4). It first reports phase Deleting.
//
//   - Delete ("" too): the StatefulSet, both Services, the PodDisruptionBudget, the data
//     PersistentVolumeClaims and the Secret are deleted.
//   - Retain: the workload is deleted; the claims and the Secret are kept and released: our
//     owner reference and managed-by label are removed, so the garbage collector keeps them.
//   - DoNotTerminate: the API server refuses such a DELETE, so this is a Database deleted
//     before its policy was set, or around the API server; it is treated as Retain (data is
//     never lost) and a Warning Event says so.
//
// Only children db controls are touched, and children already gone are fine, so a Database
// never hangs in Terminating on them. Claims and the Secret are read from the API server, not
// the cache: one the cache has not seen yet must not be left to the garbage collector under
// Retain. Any error is returned (the finalizer stays) after trying every other child.
func (r *Reconciler) reconcileDelete(ctx context.Context, db *examplev1.Database) (Result, error) {
	if !slices.Contains(db.Finalizers, FinalizerName) {
		return Result{}, nil
	}
	policy := db.Spec.DeletionPolicy
	if policy == "" {
		policy = examplev1.DeletionPolicyDelete
	}
	db, err := r.writeStatus(ctx, db, deletingStatus(db, policy, r.now()))
	if err != nil {
		return Result{}, err
	}
	keep := policy != examplev1.DeletionPolicyDelete
	if policy == examplev1.DeletionPolicyDoNotTerminate {
		r.event(ctx, db, corev1.EventTypeWarning, ReasonDoNotTerminate,
			"Database is being deleted despite deletionPolicy DoNotTerminate; keeping its PersistentVolumeClaims and Secret as with Retain")
	}

	ns := db.Namespace
	var errs []error
	collect := func(_ bool, err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	collect(deleteChild(ctx, db, "StatefulSet", r.listers.StatefulSets.StatefulSets(ns).Get, r.kube.AppsV1().StatefulSets(ns), statefulSetName(db)))
	for _, name := range []string{headlessServiceName(db), clientServiceName(db)} {
		collect(deleteChild(ctx, db, "Service", r.listers.Services.Services(ns).Get, r.kube.CoreV1().Services(ns), name))
	}
	collect(deleteChild(ctx, db, "PodDisruptionBudget", r.listers.PodDisruptionBudgets.PodDisruptionBudgets(ns).Get, r.kube.PolicyV1().PodDisruptionBudgets(ns), pdbName(db)))

	kept, err := r.cleanupData(ctx, db, keep)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Result{}, fmt.Errorf("cleanup with deletionPolicy %s: %w", policy, err)
	}

	if _, err := r.setFinalizer(ctx, db, false); err != nil {
		return Result{}, fmt.Errorf("removing finalizer %s: %w", FinalizerName, err)
	}
	if keep {
		what := "nothing to keep"
		if len(kept) > 0 {
			what = "kept " + strings.Join(kept, ", ") + ", released from the Database"
		}
		r.event(ctx, db, corev1.EventTypeNormal, ReasonCleanupDone, "Cleanup done with deletionPolicy %s: deleted the workload; %s", policy, what)
	} else {
		r.event(ctx, db, corev1.EventTypeNormal, ReasonCleanupDone, "Cleanup done with deletionPolicy %s: deleted the workload, volumes and credentials", policy)
	}
	return Result{}, nil
}

// cleanupData deletes (keep false) or releases (keep true) db's data claims and credentials
// Secret, those it controls, as the API server has them. It returns what it kept, as
// "PersistentVolumeClaim NAME" and "Secret NAME".
func (r *Reconciler) cleanupData(ctx context.Context, db *examplev1.Database, keep bool) ([]string, error) {
	claims := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	secrets := r.kube.CoreV1().Secrets(db.Namespace)

	list, err := claims.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selectorLabels(db)).String()})
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	var kept []string
	var errs []error
	done := func(kind, name string, err error) {
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: %w", kind, name, err))
		case keep:
			kept = append(kept, kind+" "+name)
		}
	}
	for i := range list.Items {
		if claim := &list.Items[i]; isDataClaim(db, claim) && isControlledBy(claim, db) {
			done("PersistentVolumeClaim", claim.Name, deleteOrRelease(ctx, claims, db, keep, claim))
		}
	}
	secret, err := secrets.Get(ctx, secretName(db), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		errs = append(errs, fmt.Errorf("get Secret %q: %w", secretName(db), err))
	case isControlledBy(secret, db):
		done("Secret", secret.Name, deleteOrRelease(ctx, secrets, db, keep, secret))
	}
	return kept, errors.Join(errs...)
}

// deleterPatcher is the part of a typed client deleteOrRelease uses.
type deleterPatcher[T any] interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// deleteOrRelease deletes obj (with a UID precondition) or, when keep, applies releasePatch
// to it. An object already gone is not an error.
func deleteOrRelease[T any](ctx context.Context, client deleterPatcher[T], db *examplev1.Database, keep bool, obj metav1.Object) error {
	var err error
	if keep {
		_, err = client.Patch(ctx, obj.GetName(), types.StrategicMergePatchType, releasePatch(db), metav1.PatchOptions{})
	} else {
		err = client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(obj.GetUID()))})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// releasePatch is the strategic merge patch that releases a child from db: it deletes db's
// owner reference (by uid, the list's merge key) and the managed-by label, so neither the
// garbage collector nor the Reconciler touches the object again.
func releasePatch(db *examplev1.Database) []byte {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":          map[string]any{ManagedByLabel: nil},
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": db.UID}},
	}})
	return patch
}
