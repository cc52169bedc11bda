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
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
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
	database, _, ok := names.ParseDataClaimName(claim.GetName())
	if !ok {
		return nil, nil
	}
	return []string{claimIndexKey(claim.GetNamespace(), database)}, nil
}

// claimIndexKey is the ClaimsByDatabaseIndex value of the claims of the Database
// namespace/name.
func claimIndexKey(namespace, name string) string { return namespace + "/" + name }

// reconcileClaims brings the data claims to what the pass's Database needs, before its
// StatefulSet is created or scaled. The ordinals from the cached StatefulSet's spec.replicas
// (mountedReplicas, 0 for none) to the Database's are exactly those the StatefulSet is about
// to mount, since the next step creates or scales that very copy (its resourceVersion makes
// a stale one fail). The steps:
//
//   - readClaims reads and judges the claims, those ordinals from the API server;
//   - createClaims creates the missing ones of those ordinals, so that the StatefulSet
//     controller, which mounts any claim of the right name whoever made it, finds ours and
//     never creates one itself;
//   - keepClaims keeps up each claim: its metadata, adopting retained ones (syncClaim), then
//     its size, requesting spec.storage from a bound claim that is smaller (expandClaim), and
//     noting the mounted claims whose capacity has not reached it yet (noteExpanding).
//
// A refused expansion does not halt the pass: it is returned as expansion, and the volumes
// keep their size. A claim of ours being deleted among those about to be mounted halts it
// (a wait), after the others are done: the StatefulSet controller would create its
// successor itself.
func (p *pass) reconcileClaims(ctx context.Context) (expansion *failure, h *halt, err error) {
	work, h, err := p.readClaims(ctx)
	if h == nil && err == nil {
		work, h, err = p.createClaims(ctx, work)
	}
	if h != nil || err != nil {
		return nil, h, err
	}
	return p.keepClaims(ctx, work)
}

// mountedReplicas is the number of claims the cached StatefulSet mounts: its spec.replicas,
// and 0 when there is none of the Database's.
func (p *pass) mountedReplicas() int32 {
	if p.statefulSet == nil || !isControlledBy(p.statefulSet, p.db) {
		return 0
	}
	return statefulSetReplicas(p.statefulSet)
}

// aboutToMount reports whether the StatefulSet is about to mount the claim of ordinal: it is
// past the cached StatefulSet's replicas and below the Database's.
func (p *pass) aboutToMount(ordinal int32) bool {
	return p.mountedReplicas() <= ordinal && ordinal < p.desired.Replicas
}

// claimWork is a data claim the pass keeps up: one of ours, or one to adopt.
type claimWork struct {
	claim    *corev1.PersistentVolumeClaim
	ordinal  int32
	adopting bool
}

// readClaims reads the Database's data claims and judges each (judgeClaim), before anything
// is written. The ordinals about to be mounted are read from the API server, whatever the
// cache holds (listDataClaims fresh): a mount cannot be undone, and the cache may still show
// a claim of ours that was deleted and replaced by a foreign one of the same name. The other
// ordinals come from the cache alone, so that a steady Database costs no call; changes to
// claims of ours enqueue it.
func (p *pass) readClaims(ctx context.Context) ([]claimWork, *halt, error) {
	claims, err := p.r.listDataClaims(ctx, p.db, p.mountedReplicas(), p.desired.Replicas, true)
	if err != nil {
		return nil, nil, err
	}
	var work []claimWork
	for _, claim := range claims {
		ordinal, _ := names.DataClaimOrdinal(p.db, claim.Name)
		w, h, err := p.judgeClaim(ctx, claim, ordinal)
		if h != nil || err != nil {
			return nil, h, err
		}
		if w != nil {
			work = append(work, *w)
		}
	}
	return work, nil, nil
}

// judgeClaim decides what the pass does with claim, of ordinal: keep it up (a claim of ours,
// or one a Retain of a Database of the same name released and recorded, to adopt:
// judgeAdoption), or nothing (nil: a foreign claim the StatefulSet does not mount). A foreign
// claim it would mount is a ChildConflict halt, left untouched (one marked as released but
// not recorded says so, with a Warning Event), and one being deleted is waited for.
func (p *pass) judgeClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, ordinal int32) (*claimWork, *halt, error) {
	w := &claimWork{claim: claim, ordinal: ordinal}
	if isControlledBy(claim, p.db) {
		return w, nil, nil
	}
	judged, err := p.judgeAdoption(ctx, "PersistentVolumeClaim", claim)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case judged == adoptable && claim.DeletionTimestamp == nil:
		w.adopting = true
		return w, nil, nil
	case ordinal >= p.desired.Replicas:
		return nil, nil, nil
	case claim.DeletionTimestamp != nil:
		return nil, waitFor("PersistentVolumeClaim %s is being deleted", claim.Name), nil
	case judged == unrecorded:
		p.r.event(ctx, p.db, corev1.EventTypeWarning, examplev1.ReasonChildConflict, "Not adopting PersistentVolumeClaim %s: its uid %s is not one this controller released", claim.Name, claim.UID)
		return nil, p.unrecordedFailure("PersistentVolumeClaim", claim), nil
	default:
		return nil, conflictFailure("PersistentVolumeClaim", claim), nil
	}
}

// createClaims creates the claims about to be mounted that work lacks (createDataClaim) and
// returns work with them, sorted by ordinal. Our claims carry the StatefulSet's claim names,
// so none is made while a foreign StatefulSet holds that name: it would mount them.
func (p *pass) createClaims(ctx context.Context, work []claimWork) ([]claimWork, *halt, error) {
	present := make(map[int32]bool, len(work))
	for _, w := range work {
		present[w.ordinal] = true
	}
	checked := false
	for ordinal := p.mountedReplicas(); ordinal < p.desired.Replicas; ordinal++ {
		if present[ordinal] {
			continue
		}
		if !checked {
			if h, err := p.statefulSetNameFree(ctx); h != nil || err != nil {
				return nil, h, err
			}
			checked = true
		}
		w, h, err := p.createDataClaim(ctx, ordinal)
		if h != nil || err != nil {
			return nil, h, err
		}
		work = append(work, w)
	}
	slices.SortFunc(work, func(a, b claimWork) int { return cmp.Compare(a.ordinal, b.ordinal) })
	return work, nil, nil
}

// statefulSetNameFree halts with a ChildConflict when the StatefulSet's name is taken by one
// the Database does not control, as the cache has it or, when the cache has none (it sees
// only labelled ones), as the API server has it.
func (p *pass) statefulSetNameFree(ctx context.Context) (*halt, error) {
	sts := p.statefulSet
	if sts == nil {
		var err error
		sts, err = p.r.kube.AppsV1().StatefulSets(p.db.Namespace).Get(ctx, names.StatefulSetName(p.db), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get StatefulSet %q: %w", names.StatefulSetName(p.db), err)
		}
	}
	if !isControlledBy(sts, p.db) {
		return conflictFailure("StatefulSet", sts), nil
	}
	return nil, nil
}

// createDataClaim creates the data claim of ordinal from the desired StatefulSet's template
// (specs.DataClaim), as the StatefulSet controller would, with ProtectFinalizer per the
// deletion policy. When the name was taken since it was read (AlreadyExists), the claim is
// read again and judged (judgeClaim): a foreign one halts the pass before the StatefulSet is
// created or scaled.
func (p *pass) createDataClaim(ctx context.Context, ordinal int32) (claimWork, *halt, error) {
	client := p.r.kube.CoreV1().PersistentVolumeClaims(p.db.Namespace)
	claim := specs.DataClaim(p.wantStatefulSet, ordinal)
	setProtection(claim, protected(p.db))
	created, err := client.Create(ctx, claim, metav1.CreateOptions{})
	if err == nil {
		return claimWork{claim: created, ordinal: ordinal}, nil, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		h, err := writeError(err, "create", "PersistentVolumeClaim", claim.Name)
		return claimWork{}, h, err
	}
	live, err := client.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		// Gone again (NotFound): the next pass creates it.
		return claimWork{}, nil, fmt.Errorf("get PersistentVolumeClaim %q: %w", claim.Name, err)
	}
	w, h, err := p.judgeClaim(ctx, live, ordinal)
	if h != nil || err != nil {
		return claimWork{}, h, err
	}
	return *w, nil, nil // ordinal < replicas: judgeClaim never returns nil without a halt
}

// keepClaims keeps up each claim of work, in order of ordinal: its metadata (syncClaim), then
// its size (expandClaim). It returns the first refused expansion, and a wait halt for the
// first claim about to be mounted that is being deleted, after the others are done.
func (p *pass) keepClaims(ctx context.Context, work []claimWork) (expansion *failure, h *halt, err error) {
	var waiting *halt
	for _, w := range work {
		claim, h, err := p.syncClaim(ctx, w)
		switch {
		case h != nil || err != nil:
			return nil, h, err
		case claim == nil:
			continue
		case claim.DeletionTimestamp != nil:
			if p.aboutToMount(w.ordinal) && waiting == nil {
				waiting = waitFor("PersistentVolumeClaim %s is being deleted", claim.Name)
			}
			continue
		case claim.Status.Phase != corev1.ClaimBound:
			continue
		}
		refused, err := p.expandClaim(ctx, claim)
		if err != nil {
			return nil, nil, err
		}
		if expansion == nil {
			expansion = refused
		}
		if refused == nil && w.ordinal < p.desired.Replicas {
			p.noteExpanding(claim)
		}
	}
	return expansion, waiting, nil
}

// noteExpanding records in the pass a mounted claim whose status.capacity is still below
// spec.storage: its volume is being expanded (the resizer and then the kubelet grow it; the
// capacity follows only once the file system has grown), so the Database is not Ready yet.
// Claims past the replicas are not counted: no Pod mounts them, and a file system grows only
// when mounted.
func (p *pass) noteExpanding(claim *corev1.PersistentVolumeClaim) {
	capacity := claim.Status.Capacity[corev1.ResourceStorage]
	if capacity.Cmp(p.desired.Storage) < 0 {
		p.expanding = append(p.expanding, fmt.Sprintf("%s %s of %s", claim.Name, capacity.String(), p.desired.Storage.String()))
	}
}

// syncClaim keeps up the metadata of the claim of w: adopts a retained one (an Event says
// so), restores our labels and sets ProtectFinalizer per the deletion policy (also on a
// claim being deleted, so a policy change releases it). It returns the claim as written, or
// nil for one gone meanwhile that the StatefulSet does not mount; one about to be mounted
// that is gone is an error (it must be created again first), and a refused write a halt.
func (p *pass) syncClaim(ctx context.Context, w claimWork) (*corev1.PersistentVolumeClaim, *halt, error) {
	claim := w.claim
	update := claim.DeepCopy()
	if w.adopting {
		adopt(update, specs.ClaimOwnerReference(p.db))
	}
	update.Labels = specs.MergeLabels(update.Labels, specs.ChildLabels(p.db))
	setProtection(update, protected(p.db))
	if equality.Semantic.DeepEqual(claim.ObjectMeta, update.ObjectMeta) {
		return claim, nil, nil
	}
	updated, err := p.r.kube.CoreV1().PersistentVolumeClaims(p.db.Namespace).Update(ctx, update, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		if p.aboutToMount(w.ordinal) {
			return nil, nil, fmt.Errorf("PersistentVolumeClaim %q was deleted meanwhile: %w", claim.Name, err)
		}
		return nil, nil, nil
	}
	if err != nil {
		h, err := writeError(err, "update", "PersistentVolumeClaim", claim.Name)
		return nil, h, err
	}
	if w.adopting {
		p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonAdopted, "Adopted retained PersistentVolumeClaim %s", claim.Name)
		return updated, nil, p.adopted(ctx, updated)
	}
	return updated, nil, nil
}

// expandClaim requests spec.storage, with a merge patch, from claim, a bound claim, when it
// is smaller. The patch carries the claim's uid, so a claim replaced by another of the same
// name since it was read is refused (a conflict error). An expansion the API server refuses
// (its StorageClass does not allow volume expansion) is returned as refused, and the pass
// goes on with the volume at its size.
func (p *pass) expandClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (refused *failure, err error) {
	want := p.desired.Storage
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.Cmp(want) >= 0 {
		return nil, nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": claim.UID},
		"spec": map[string]any{"resources": map[string]any{
			"requests": map[string]string{string(corev1.ResourceStorage): want.String()},
		}},
	})
	if err != nil {
		return nil, err
	}
	_, err = p.r.kube.CoreV1().PersistentVolumeClaims(p.db.Namespace).Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case isUIDMismatch(err):
		return nil, replacedError(claimsResource, claim, err)
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		return &failure{reason: examplev1.ReasonStorageExpansionFailed, message: fmt.Sprintf(
			"cannot grow PersistentVolumeClaim %s from %s to %s (its StorageClass must allow volume expansion; retried every minute), the volumes keep their size: %v",
			claim.Name, size.String(), want.String(), err)}, nil
	case err != nil:
		return nil, fmt.Errorf("patch PersistentVolumeClaim %q: %w", claim.Name, err)
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonResizing,
		"Requested %s for PersistentVolumeClaim %s (was %s)", want.String(), claim.Name, size.String())
	return nil, nil
}

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
	objs, err := r.listers.PersistentVolumeClaims.ByIndex(ClaimsByDatabaseIndex, claimIndexKey(db.Namespace, names.StatefulSetName(db)))
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
		if ordinal, ok := names.DataClaimOrdinal(db, claim.Name); ok && !live(ordinal) {
			found = append(found, ordinalClaim{ordinal, claim})
			cached[ordinal] = true
		}
	}
	client := r.kube.CoreV1().PersistentVolumeClaims(db.Namespace)
	for ordinal := liveFrom; ordinal < liveTo; ordinal++ {
		if cached[ordinal] {
			continue
		}
		claim, err := client.Get(ctx, names.DataClaimName(db, ordinal), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get PersistentVolumeClaim %q: %w", names.DataClaimName(db, ordinal), err)
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
