package database

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// ClaimsByDatabaseIndex names the index of the claim cache (NewClaimInformer,
// Listers.PersistentVolumeClaims) that finds a Database's data claims by name, whatever their
// labels: its values are "<namespace>/<database name>" (ClaimsByDatabase).
const ClaimsByDatabaseIndex = "database"

// ClaimsByDatabase is the index function of ClaimsByDatabaseIndex. For a PersistentVolumeClaim
// named "data-<database>-<ordinal>", the name the StatefulSet controller gives the claims of a
// Database's StatefulSet, it returns the one value "<namespace>/<database>", where <database>
// is what lies between "data-" and the last "-<digits>" ("data-a-b-0" belongs to "a-b"). Other
// names are not indexed (no value). It fails only for an object without metadata.
func ClaimsByDatabase(obj any) ([]string, error) {
	claim, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", ClaimsByDatabaseIndex, err)
	}
	database, _, ok := parseDataClaimName(claim.GetName())
	if !ok {
		return nil, nil
	}
	return []string{claimIndexKey(claim.GetNamespace(), database)}, nil
}

// claimIndexKey is the ClaimsByDatabaseIndex value of the claims of the Database
// namespace/name.
func claimIndexKey(namespace, name string) string { return namespace + "/" + name }

// listDataClaims returns db's data claims, every claim named "data-<name>-<ordinal>" whatever
// its labels (a label edited by hand must not hide a claim), sorted by ordinal. Ownership is
// for the caller to check. The claims are read from the claim cache (ClaimsByDatabaseIndex),
// shared with it and not to be modified, except the ordinals in [liveFrom, liveTo), read from
// the API server by name (GET, a 404 meaning absent): with fresh, every one of them, the
// cached copy ignored, for a cache may lag behind a claim deleted and re-created by someone
// else under the same name; without fresh, only those the cache does not hold, for a cache
// may lag behind a claim created a moment ago. The caller sets that range to the claims that
// must not be missed: those a StatefulSet is about to mount (fresh), or those a deletion must
// clean up. Nothing is LISTed: a LIST per reconcile of every claim of the namespace made N
// Databases cost N² in claims read.
func (r *Reconciler) listDataClaims(ctx context.Context, db *examplev1.Database, liveFrom, liveTo int32, fresh bool) ([]*corev1.PersistentVolumeClaim, error) {
	objs, err := r.listers.PersistentVolumeClaims.ByIndex(ClaimsByDatabaseIndex, claimIndexKey(db.Namespace, statefulSetName(db)))
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumeClaims from the cache: %w", err)
	}
	liveFrom = max(liveFrom, 0)
	live := func(ordinal int32) bool { return fresh && liveFrom <= ordinal && ordinal < liveTo }
	type ordinalClaim struct {
		ordinal int32
		claim   *corev1.PersistentVolumeClaim
	}
	var found []ordinalClaim
	cached := make(map[int32]bool, len(objs))
	for _, obj := range objs {
		claim, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			continue
		}
		if ordinal, ok := claimOrdinal(db, claim.Name); ok && !live(ordinal) {
			found = append(found, ordinalClaim{ordinal, claim})
			cached[ordinal] = true
		}
	}
	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	for ordinal := liveFrom; ordinal < liveTo; ordinal++ {
		if cached[ordinal] {
			continue
		}
		claim, err := client.Get(ctx, dataClaimName(db, ordinal), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get PersistentVolumeClaim %q: %w", dataClaimName(db, ordinal), err)
		default:
			found = append(found, ordinalClaim{ordinal, claim})
		}
	}
	slices.SortFunc(found, func(a, b ordinalClaim) int { return cmp.Compare(a.ordinal, b.ordinal) })
	claims := make([]*corev1.PersistentVolumeClaim, len(found))
	for i, f := range found {
		claims[i] = f.claim
	}
	return claims, nil
}

// statefulSetReplicas is the spec.replicas of sts (the claims its Pods mount, ordinals 0 to
// replicas-1), and 0 for no StatefulSet.
func statefulSetReplicas(sts *appsv1.StatefulSet) int32 {
	if sts == nil {
		return 0
	}
	return ptr.Deref(sts.Spec.Replicas, 1)
}

// claimOwner is the controller reference of db's data claims, as the volumeClaimTemplate
// carries it (blockOwnerDeletion false).
func claimOwner(db *examplev1.Database) metav1.OwnerReference {
	ref := metav1.NewControllerRef(db, databaseGVK)
	ref.BlockOwnerDeletion = ptr.To(false)
	return *ref
}

// mountedReplicas is the number of claims the StatefulSet sts (as the lister returned it,
// with err) mounts: its spec.replicas, and 0 when there is none of db's.
func mountedReplicas(db *examplev1.Database, sts *appsv1.StatefulSet, err error) int32 {
	if err != nil || sts == nil || !isControlledBy(sts, db) {
		return 0
	}
	return statefulSetReplicas(sts)
}

// reconcileClaims brings db's data claims to what db needs, before the StatefulSet want
// (newStatefulSet) is created or scaled. sts and stsErr are the cache's answer for it: the
// caller creates or scales that very copy (its resourceVersion makes a stale one fail), so
// the ordinals from its spec.replicas (mountedReplicas, 0 for none) to db's are exactly
// those the StatefulSet is about to mount.
//
//   - Those ordinals are read from the API server, whatever the cache holds (listDataClaims
//     fresh): a mount cannot be undone, and the cache may still show a claim of ours that was
//     deleted and replaced by a foreign one of the same name. The other ordinals come from
//     the cache alone, so that a steady Database costs no call; changes to claims of ours
//     enqueue it.
//   - A claim released by a Retain of a Database of the same name is adopted (an Event says
//     so); any other claim the StatefulSet would mount (ordinal < replicas) that db does not
//     control is a ChildConflict, left untouched; one being deleted is waited for. All claims
//     are judged before anything is written.
//   - The claims of those ordinals that do not exist are created here (newDataClaim, as the
//     StatefulSet controller would, with ProtectFinalizer per the policy), so that the
//     StatefulSet controller, which mounts any claim of the right name whoever made it, finds
//     ours and never creates one itself: a foreign claim can no longer slip in between our
//     check and its create. A create that finds the name taken (AlreadyExists) reads the
//     claim and judges it by the same rules, so a foreign one stops the pass before the
//     StatefulSet is created or scaled.
//   - On claims of ours: our labels restored, ProtectFinalizer per the deletion policy (also
//     on a claim being deleted, so a policy change releases it), and spec.storage requested
//     from each bound claim that is smaller. A claim of ours being deleted among those about to
//     be mounted is waited for (*waitError), after the others are done: the StatefulSet
//     controller would create its successor itself.
//
// A refused expansion does not stop the Reconciler: it is returned as expansion, and the
// volumes keep their size.
func (r *Reconciler) reconcileClaims(ctx context.Context, db *examplev1.Database, d desiredState, want, sts *appsv1.StatefulSet, stsErr error) (expansion *failure, err error) {
	from, to := mountedReplicas(db, sts, stsErr), d.replicas
	stsChecked := false
	claims, err := r.listDataClaims(ctx, db, from, to, true)
	if err != nil {
		return nil, err
	}
	var work []claimWork
	present := make(map[int32]bool, len(claims))
	for _, claim := range claims {
		ordinal, _ := claimOrdinal(db, claim.Name)
		present[ordinal] = true
		w, err := judgeClaim(db, d, claim, ordinal)
		if err != nil {
			return nil, err
		}
		if w != nil {
			work = append(work, *w)
		}
	}
	for ordinal := from; ordinal < to; ordinal++ {
		if present[ordinal] {
			continue
		}
		if !stsChecked {
			// Our claims carry the StatefulSet's claim names: never made for a foreign
			// StatefulSet of that name, which would mount them.
			if err := r.statefulSetNameFree(ctx, db, sts, stsErr); err != nil {
				return nil, err
			}
			stsChecked = true
		}
		w, err := r.createDataClaim(ctx, db, d, want, ordinal)
		if err != nil {
			return nil, err
		}
		work = append(work, w)
	}
	slices.SortFunc(work, func(a, b claimWork) int { return cmp.Compare(a.ordinal, b.ordinal) })

	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	var waiting error
	for _, w := range work {
		claim := w.claim
		update := claim.DeepCopy()
		if w.adopting {
			adopt(update, db, claimOwner(db))
		}
		update.Labels = mergeLabels(update.Labels, childLabels(db))
		setProtection(update, protected(db))
		if !equality.Semantic.DeepEqual(claim.ObjectMeta, update.ObjectMeta) {
			updated, err := client.Update(ctx, update, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				if from <= w.ordinal && w.ordinal < to {
					// Deleted meanwhile: it must be created again before it is mounted.
					return nil, fmt.Errorf("PersistentVolumeClaim %q was deleted meanwhile: %w", claim.Name, err)
				}
				continue
			}
			if err != nil {
				return nil, writeError(err, "update", "PersistentVolumeClaim", claim.Name)
			}
			if w.adopting {
				r.event(ctx, db, corev1.EventTypeNormal, ReasonAdopted, "Adopted retained PersistentVolumeClaim %s", claim.Name)
			}
			claim = updated
		}

		if claim.DeletionTimestamp != nil {
			if from <= w.ordinal && w.ordinal < to && waiting == nil {
				waiting = &waitError{what: fmt.Sprintf("PersistentVolumeClaim %s is being deleted", claim.Name)}
			}
			continue
		}
		if claim.Status.Phase != corev1.ClaimBound {
			continue
		}
		size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.Cmp(d.storage) >= 0 {
			continue
		}
		// metadata.uid: a claim of the cache replaced by another of the same name is refused.
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": claim.UID},
			"spec": map[string]any{"resources": map[string]any{
				"requests": map[string]string{string(corev1.ResourceStorage): d.storage.String()},
			}},
		})
		if err != nil {
			return nil, err
		}
		_, err = client.Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case isUIDMismatch(err):
			return nil, replacedError(claimsResource, claim, err)
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
			if expansion == nil {
				expansion = &failure{reason: ReasonStorageExpansionFailed, message: fmt.Sprintf(
					"cannot grow PersistentVolumeClaim %s from %s to %s (its StorageClass must allow volume expansion; retried every minute), the volumes keep their size: %v",
					claim.Name, size.String(), d.storage.String(), err)}
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("patch PersistentVolumeClaim %q: %w", claim.Name, err)
		}
		r.event(ctx, db, corev1.EventTypeNormal, ReasonResizing,
			"Requested %s for PersistentVolumeClaim %s (was %s)", d.storage.String(), claim.Name, size.String())
	}
	return expansion, waiting
}

// statefulSetNameFree returns a ChildConflict when the StatefulSet's name is taken by one db
// does not control, as the cache has it (sts, stsErr) or, when the cache has none (it sees only
// labelled ones), as the API server has it.
func (r *Reconciler) statefulSetNameFree(ctx context.Context, db *examplev1.Database, sts *appsv1.StatefulSet, stsErr error) error {
	if apierrors.IsNotFound(stsErr) {
		sts, stsErr = r.kube.AppsV1().StatefulSets(db.Namespace).Get(ctx, statefulSetName(db), metav1.GetOptions{})
		if apierrors.IsNotFound(stsErr) {
			return nil
		}
	}
	if stsErr != nil {
		return fmt.Errorf("get StatefulSet %q: %w", statefulSetName(db), stsErr)
	}
	if !isControlledBy(sts, db) {
		return conflictFailure("StatefulSet", sts)
	}
	return nil
}

// claimWork is a data claim reconcileClaims keeps up: one of ours, or one to adopt.
type claimWork struct {
	claim    *corev1.PersistentVolumeClaim
	ordinal  int32
	adopting bool
}

// judgeClaim decides what reconcileClaims does with claim, of ordinal: keep it up (a claim
// of ours, or a retained one to adopt), or nothing (nil: a foreign claim the StatefulSet does
// not mount); a foreign claim it would mount is a ChildConflict, and one being deleted is
// waited for.
func judgeClaim(db *examplev1.Database, d desiredState, claim *corev1.PersistentVolumeClaim, ordinal int32) (*claimWork, error) {
	w := &claimWork{claim: claim, ordinal: ordinal}
	if isControlledBy(claim, db) {
		return w, nil
	}
	switch {
	case isRetainedFor(claim, db) && claim.DeletionTimestamp == nil:
		w.adopting = true
		return w, nil
	case ordinal >= d.replicas:
		return nil, nil
	case claim.DeletionTimestamp != nil:
		return nil, &waitError{what: fmt.Sprintf("PersistentVolumeClaim %s is being deleted", claim.Name)}
	default:
		return nil, conflictFailure("PersistentVolumeClaim", claim)
	}
}

// createDataClaim creates db's data claim of ordinal from the StatefulSet want
// (newDataClaim), with ProtectFinalizer per the deletion policy. When the name was taken since
// it was read (AlreadyExists), the claim is read again and judged (judgeClaim): a foreign
// one is a ChildConflict, and the StatefulSet is not created or scaled in this pass.
func (r *Reconciler) createDataClaim(ctx context.Context, db *examplev1.Database, d desiredState, want *appsv1.StatefulSet, ordinal int32) (claimWork, error) {
	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	claim := newDataClaim(want, ordinal)
	setProtection(claim, protected(db))
	created, err := client.Create(ctx, claim, metav1.CreateOptions{})
	if err == nil {
		return claimWork{claim: created, ordinal: ordinal}, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return claimWork{}, writeError(err, "create", "PersistentVolumeClaim", claim.Name)
	}
	live, err := client.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		// Gone again (NotFound): the next pass creates it.
		return claimWork{}, fmt.Errorf("get PersistentVolumeClaim %q: %w", claim.Name, err)
	}
	w, err := judgeClaim(db, d, live, ordinal)
	if err != nil {
		return claimWork{}, err
	}
	return *w, nil // ordinal < d.replicas: judgeClaim never returns nil without an error
}

// unprotectClaims removes ProtectFinalizer from db's data claims that have it, as the cache
// has them: a claim of ours the cache has not seen yet enqueues db when it arrives.
func (r *Reconciler) unprotectClaims(ctx context.Context, db *examplev1.Database) error {
	claims, err := r.listDataClaims(ctx, db, 0, 0, false)
	if err != nil {
		return err
	}
	for _, cached := range claims {
		claim := cached.DeepCopy()
		if !isControlledBy(claim, db) || !setProtection(claim, false) {
			continue
		}
		if _, err := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("update PersistentVolumeClaim %q: %w", claim.Name, err)
		}
	}
	return nil
}
