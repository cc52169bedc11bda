package database

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

// reconcileDelete runs the cleanup of spec.deletionPolicy for a Database being deleted, then
// removes FinalizerName, and reports phase Deleting.
//
//   - Delete ("" too): the StatefulSet, the Services, the replication ConfigMap, the
//     PodDisruptionBudget, the data PersistentVolumeClaims and the Secret are deleted
//     (ourFinalizers removed first), and, once the rest is done, the credentials record
//     (CredentialsRecordName).
//   - Retain: the workload is deleted; the claims and the Secret are kept and released: our
//     owner reference, managed-by label and ourFinalizers are removed, so the garbage
//     collector keeps them, RetainedFromAnnotation marks them, and their UIDs are recorded
//     (recordReleased) for a new Database of the same name to adopt.
//   - DoNotTerminate: the API server refuses such a DELETE, so this is a Database deleted
//     before its policy was set, or around the API server; it is treated as Retain (data is
//     never lost) and a Warning Event says so.
//
// Under every policy the NetworkPolicy is left to the garbage collector, which deletes it with
// the Database once the finalizer is gone, so the Pods stay covered while they terminate.
//
// The StatefulSet is read from the API server when the cache misses it. Pods of the
// Database left without a controller (a StatefulSet deleted with propagationPolicy Orphan
// to be replaced, whose re-creation never came) are deleted, and the finalizer stays until
// they are gone, as it does while a StatefulSet is still being deleted (it may orphan its
// Pods): the cleanup never reports done while such children remain.
//
// Only children db controls are touched, and children already gone are fine, so a Database
// never hangs in Terminating on them. Claims are found by name whatever their labels, in the
// claim cache and, for every ordinal a StatefulSet of db may have mounted that the cache
// misses, on the API server; the Secret is read from the API server: one the cache has not
// seen must not be left to the garbage collector under Retain. Any error is returned (the
// finalizer stays) after trying every other child, with a Warning Event and in status.
func (r *Reconciler) reconcileDelete(ctx context.Context, db *examplev1.Database) (Result, error) {
	// A Database being deleted is not failed over: its primary is not watched.
	r.writable.forget(db.UID)
	r.drained.forget(db.UID)
	r.commitsWaited.forget(db.UID)
	if !slices.Contains(db.Finalizers, FinalizerName) {
		r.seen.forget(db.UID)
		return Result{}, nil
	}
	policy := db.Spec.DeletionPolicy
	if policy == "" {
		policy = examplev1.DeletionPolicyDelete
	}
	keep := policy != examplev1.DeletionPolicyDelete
	if policy == examplev1.DeletionPolicyDoNotTerminate {
		r.event(ctx, db, corev1.EventTypeWarning, ReasonDoNotTerminate,
			"Database is being deleted despite deletionPolicy DoNotTerminate; keeping its PersistentVolumeClaims and Secret as with Retain")
	}

	ns := db.Namespace
	var errs []error
	var pending []string
	collect := func(_ bool, err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	sts, err := r.liveStatefulSet(ctx, db)
	if err != nil {
		errs = append(errs, err)
	}
	switch {
	case sts == nil:
	case sts.DeletionTimestamp != nil:
		// Being deleted, possibly orphaning its Pods (a replacement): once it is gone, its
		// Pods are ours to delete.
		pending = append(pending, fmt.Sprintf("StatefulSet %s is being deleted", sts.Name))
	default:
		collect(deleteChild(ctx, db, "StatefulSet", r.kube.AppsV1().StatefulSets(ns), sts))
	}
	for _, name := range []string{names.HeadlessServiceName(db), names.ClientServiceName(db), names.ReadServiceName(db)} {
		collect(deleteCachedChild(ctx, db, "Service", r.listers.Services.Services(ns).Get, r.kube.CoreV1().Services(ns), name))
	}
	for _, name := range []string{specs.ReplicationConfigMapName(db), specs.InitConfigMapName(db)} {
		collect(deleteCachedChild(ctx, db, "ConfigMap", r.listers.ConfigMaps.ConfigMaps(ns).Get, r.kube.CoreV1().ConfigMaps(ns), name))
	}
	collect(deleteCachedChild(ctx, db, "PodDisruptionBudget", r.listers.PodDisruptionBudgets.PodDisruptionBudgets(ns).Get,
		r.kube.PolicyV1().PodDisruptionBudgets(ns), specs.PodDisruptionBudgetName(db)))
	if sts == nil || sts.DeletionTimestamp == nil {
		orphans, err := r.deleteOrphanPods(ctx, db)
		if err != nil {
			errs = append(errs, err)
		}
		if len(orphans) > 0 {
			pending = append(pending, "Pods left without their StatefulSet are being deleted: "+strings.Join(orphans, ", "))
		}
	}

	// The claims any StatefulSet of db may have made: those of spec.replicas and of the
	// StatefulSet's own count (it may lag behind a change of spec.replicas, either way).
	mounted := max(ptr.Deref(db.Spec.Replicas, 0), statefulSetReplicas(sts))
	kept, err := r.cleanupData(ctx, db, keep, mounted)
	if err != nil {
		errs = append(errs, err)
	}
	err = errors.Join(errs...)
	if err != nil {
		err = fmt.Errorf("cleanup with deletionPolicy %s: %w", policy, err)
		r.event(ctx, db, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "%v", err)
	}
	db, werr := r.writeStatus(ctx, db, deletingStatus(db, policy, readyReplicas(sts), strings.Join(pending, "; "), err, r.now()))
	if werr != nil {
		return Result{}, errors.Join(err, werr)
	}
	if err != nil {
		return Result{}, err
	}
	if len(pending) > 0 {
		return Result{RequeueAfter: RequeueAfterNotReady}, nil
	}
	if !keep {
		// The Secret went with the Database, and what its servers were given with it.
		if err := r.forgetCredentials(ctx, db); err != nil {
			return Result{}, err
		}
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

// liveStatefulSet is db's StatefulSet from the lister or, when the lister has none (its
// labels were edited, the informer lags), from the API server; nil when there is none of
// ours.
func (r *Reconciler) liveStatefulSet(ctx context.Context, db *examplev1.Database) (*appsv1.StatefulSet, error) {
	sts, err := r.listers.StatefulSets.StatefulSets(db.Namespace).Get(names.StatefulSetName(db))
	if apierrors.IsNotFound(err) {
		sts, err = r.kube.AppsV1().StatefulSets(db.Namespace).Get(ctx, names.StatefulSetName(db), metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get StatefulSet %q: %w", names.StatefulSetName(db), err)
	case !isControlledBy(sts, db):
		return nil, nil
	}
	return sts, nil
}

// deleteOrphanPods deletes db's Pods (by our selector labels and the StatefulSet's Pod names,
// read from the API server) that no controller owns any more, as a StatefulSet deleted with
// propagationPolicy Orphan for a replacement leaves them. It returns the names of those still
// there (their deletion requested), which the cleanup waits for.
func (r *Reconciler) deleteOrphanPods(ctx context.Context, db *examplev1.Database) ([]string, error) {
	client := r.kube.CoreV1().Pods(db.Namespace)
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(names.SelectorLabels(db)).String()})
	if err != nil {
		return nil, fmt.Errorf("list Pods: %w", err)
	}
	var orphans []string
	var errs []error
	for _, pod := range list.Items {
		ordinal, ok := strings.CutPrefix(pod.Name, names.StatefulSetName(db)+"-")
		if !ok || strings.Trim(ordinal, "0123456789") != "" || ordinal == "" || metav1.GetControllerOf(&pod) != nil {
			continue
		}
		orphans = append(orphans, pod.Name)
		if pod.DeletionTimestamp != nil {
			continue
		}
		err := client.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete Pod %q: %w", pod.Name, err))
		}
	}
	slices.Sort(orphans)
	return orphans, errors.Join(errs...)
}

// cleanupData deletes (keep false) or releases (keep true: recordReleased first, so the
// release record holds every object released) db's data claims and credentials Secret, those
// it controls: claims by name whatever their labels (listDataClaims), those of
// ordinals 0 to mounted-1 checked on the API server when the cache misses them, and the Secret
// as the API server has it. It returns what it kept, as "PersistentVolumeClaim NAME" and
// "Secret NAME".
func (r *Reconciler) cleanupData(ctx context.Context, db *examplev1.Database, keep bool, mounted int32) ([]string, error) {
	claims := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	secrets := r.kube.CoreV1().Secrets(db.Namespace)

	list, err := r.listDataClaims(ctx, db, 0, mounted, false)
	if err != nil {
		return nil, err
	}
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
	var ours []*corev1.PersistentVolumeClaim
	var released []releasedObject
	for _, claim := range list {
		if isControlledBy(claim, db) {
			ours = append(ours, claim)
			released = append(released, releasedObject{"PersistentVolumeClaim", claim})
		}
	}
	secret, err := secrets.Get(ctx, names.SecretName(db), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		errs = append(errs, fmt.Errorf("get Secret %q: %w", names.SecretName(db), err))
		secret = nil
	case !isControlledBy(secret, db):
		secret = nil
	default:
		released = append(released, releasedObject{"Secret", secret})
	}
	if keep && len(released) > 0 {
		if err := r.recordReleased(ctx, db, released); err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
	}
	for _, claim := range ours {
		done("PersistentVolumeClaim", claim.Name, deleteOrRelease(ctx, claims, claimsResource, db, keep, claim))
	}
	if secret != nil {
		done("Secret", secret.Name, deleteOrRelease(ctx, secrets, secretsResource, db, keep, secret))
	}
	return kept, errors.Join(errs...)
}

// deleterPatcher is the part of a typed client deleteOrRelease uses.
type deleterPatcher[T any] interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// deleteOrRelease deletes obj or, when keep, applies releasePatch to it. ourFinalizers are
// removed first from an object to delete (CredentialsFinalizer of a Secret; ProtectFinalizer
// when the policy changed from DoNotTerminate just before the deletion). obj may come from a cache, so the delete is conditional on its UID (never a
// same-named successor) and resourceVersion: a copy that predates a ProtectFinalizer would
// leave the object Terminating for good, so a stale one fails with a conflict and the cleanup
// is retried on a fresh one. The patches carry obj's UID for the same reason: the API server
// refuses one for a successor (replacedError, a conflict), which is then neither released
// nor modified. An object already gone is not an error. resource names obj's kind in errors.
func deleteOrRelease[T any](ctx context.Context, client deleterPatcher[T], resource schema.GroupResource, db *examplev1.Database, keep bool, obj metav1.Object) error {
	var err error
	protectedNow := hasOurFinalizer(obj)
	switch {
	case keep:
		_, err = client.Patch(ctx, obj.GetName(), types.StrategicMergePatchType, releasePatch(db, obj.GetUID()), metav1.PatchOptions{})
	case protectedNow:
		_, err = client.Patch(ctx, obj.GetName(), types.StrategicMergePatchType, unprotectPatch(obj.GetUID()), metav1.PatchOptions{})
		if err == nil && obj.GetDeletionTimestamp() == nil {
			err = client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(obj.GetUID()))})
		}
	case obj.GetDeletionTimestamp() == nil:
		preconditions := metav1.NewUIDPreconditions(string(obj.GetUID()))
		if rv := obj.GetResourceVersion(); rv != "" {
			preconditions.ResourceVersion = &rv
		}
		err = client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: preconditions})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if isUIDMismatch(err) {
		return replacedError(resource, obj, err)
	}
	return err
}
