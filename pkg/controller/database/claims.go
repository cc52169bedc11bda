package database

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// listDataClaims lists db's data claims from the API server: every claim of the namespace
// named "data-<name>-<ordinal>", whatever its labels (a label edited by hand must not hide a
// claim), sorted by ordinal. Ownership is for the caller to check.
func (r *Reconciler) listDataClaims(ctx context.Context, db *examplev1.Database) ([]corev1.PersistentVolumeClaim, error) {
	list, err := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	var claims []corev1.PersistentVolumeClaim
	for _, c := range list.Items {
		if isDataClaim(db, &c) {
			claims = append(claims, c)
		}
	}
	slices.SortFunc(claims, func(a, b corev1.PersistentVolumeClaim) int {
		i, _ := claimOrdinal(db, a.Name)
		j, _ := claimOrdinal(db, b.Name)
		return int(i - j)
	})
	return claims, nil
}

// claimOwner is the controller reference of db's data claims, as the volumeClaimTemplate
// carries it (blockOwnerDeletion false).
func claimOwner(db *examplev1.Database) metav1.OwnerReference {
	ref := metav1.NewControllerRef(db, databaseGVK)
	ref.BlockOwnerDeletion = ptr.To(false)
	return *ref
}

// reconcileClaims brings db's data claims, as the API server has them, to what db needs,
// before the StatefulSet is created or scaled:
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
	claims, err := r.listDataClaims(ctx, db)
	if err != nil {
		return nil, err
	}
	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	for i := range claims {
		claim := &claims[i]
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

// unprotectClaims removes ProtectFinalizer from db's data claims that have it.
func (r *Reconciler) unprotectClaims(ctx context.Context, db *examplev1.Database) error {
	claims, err := r.listDataClaims(ctx, db)
	if err != nil {
		return err
	}
	for i := range claims {
		claim := claims[i].DeepCopy()
		if !isControlledBy(claim, db) || !setProtection(claim, false) {
			continue
		}
		if _, err := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("update PersistentVolumeClaim %q: %w", claim.Name, err)
		}
	}
	return nil
}
