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
// shared with it and not to be modified; the ordinals in [liveFrom, liveTo) that the cache
// does not hold are read from the API server by name (GET, a 404 meaning absent), for a cache
// may lag behind a claim created a moment ago. The caller sets that range to the claims that
// must not be missed: those a StatefulSet is about to mount, or those a deletion must clean
// up. Nothing is LISTed: a LIST per reconcile of every claim of the namespace made N
// Databases cost N² in claims read.
func (r *Reconciler) listDataClaims(ctx context.Context, db *examplev1.Database, liveFrom, liveTo int32) ([]*corev1.PersistentVolumeClaim, error) {
	objs, err := r.listers.PersistentVolumeClaims.ByIndex(ClaimsByDatabaseIndex, claimIndexKey(db.Namespace, statefulSetName(db)))
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumeClaims from the cache: %w", err)
	}
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
		if ordinal, ok := claimOrdinal(db, claim.Name); ok {
			found = append(found, ordinalClaim{ordinal, claim})
			cached[ordinal] = true
		}
	}
	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	for ordinal := max(liveFrom, 0); ordinal < liveTo; ordinal++ {
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

// reconcileClaims brings db's data claims (listDataClaims: from the cache, and from the API
// server for the ordinals about to be mounted) to what db needs, before the StatefulSet is
// created or scaled:
//
//   - a claim released by a Retain of a Database of the same name is adopted (an Event says
//     so); any other claim the StatefulSet would mount (ordinal < replicas) that db does not
//     control is a ChildConflict, left untouched; one being deleted is waited for;
//   - on claims of ours: our labels restored, ProtectFinalizer per the deletion policy (also
//     on a claim being deleted, so a policy change releases it), and spec.storage requested
//     from each bound claim that is smaller.
//
// A refused expansion does not stop the Reconciler: it is returned as expansion, and the
// volumes keep their size.
func (r *Reconciler) reconcileClaims(ctx context.Context, db *examplev1.Database, d desiredState) (expansion *failure, err error) {
	// The claims of the ordinals the StatefulSet is about to mount (it does not exist yet, or
	// scales up) are read from the API server when the cache misses them: a foreign claim
	// created a moment ago must be a conflict before it is mounted, which cannot be undone,
	// and a retained one adopted. The ordinals mounted already come from the cache alone, so
	// that a steady Database costs no call; changes to claims of ours enqueue it.
	claims, err := r.listDataClaims(ctx, db, statefulSetReplicas(r.cachedStatefulSet(db)), d.replicas)
	if err != nil {
		return nil, err
	}
	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	for _, claim := range claims {
		ordinal, _ := claimOrdinal(db, claim.Name)
		adopting := false
		if !isControlledBy(claim, db) {
			switch {
			case isRetainedFor(claim, db) && claim.DeletionTimestamp == nil:
				adopting = true
			case ordinal >= d.replicas:
				continue
			case claim.DeletionTimestamp != nil:
				return nil, &waitError{what: fmt.Sprintf("PersistentVolumeClaim %s is being deleted", claim.Name)}
			default:
				return nil, conflictFailure("PersistentVolumeClaim", claim)
			}
		}

		update := claim.DeepCopy()
		if adopting {
			adopt(update, db, claimOwner(db))
		}
		update.Labels = mergeLabels(update.Labels, childLabels(db))
		setProtection(update, protected(db))
		if !equality.Semantic.DeepEqual(claim.ObjectMeta, update.ObjectMeta) {
			updated, err := client.Update(ctx, update, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, writeError(err, "update", "PersistentVolumeClaim", claim.Name)
			}
			if adopting {
				r.event(ctx, db, corev1.EventTypeNormal, ReasonAdopted, "Adopted retained PersistentVolumeClaim %s", claim.Name)
			}
			claim = updated
		}

		if claim.DeletionTimestamp != nil || claim.Status.Phase != corev1.ClaimBound {
			continue
		}
		size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if size.Cmp(d.storage) >= 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{
			"requests": map[string]string{string(corev1.ResourceStorage): d.storage.String()},
		}}})
		if err != nil {
			return nil, err
		}
		_, err = client.Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
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
	return expansion, nil
}

// unprotectClaims removes ProtectFinalizer from db's data claims that have it, as the cache
// has them: a claim of ours the cache has not seen yet enqueues db when it arrives.
func (r *Reconciler) unprotectClaims(ctx context.Context, db *examplev1.Database) error {
	claims, err := r.listDataClaims(ctx, db, 0, 0)
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
