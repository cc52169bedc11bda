package database

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/engine"
)

// reconcileChildren creates or updates db's children in dependency order (Secret, Services,
// data volumes, StatefulSet, PodDisruptionBudget) and returns what status needs. It stops at
// the first error: a *failure or *waitError (with the StatefulSet as cached, for status), or a
// transient error.
func (r *Reconciler) reconcileChildren(ctx context.Context, db *examplev1.Database) (observation, error) {
	obs := observation{replicas: ptr.Deref(db.Spec.Replicas, fallbackReplicas)}
	var claimsDone bool
	sts, expansion, err := r.applyChildren(ctx, db, &claimsDone)
	obs.expansion = expansion
	var waiting *waitError
	var failed *failure
	if !claimsDone && !protected(db) && (errors.As(err, &waiting) || errors.As(err, &failed) && failed.reason == ReasonNamespaceTerminating) {
		// The pass stopped before the claims (a namespace deletion is under way): a policy
		// that no longer protects them must still release them.
		if uerr := r.unprotectClaims(ctx, db); uerr != nil {
			return observation{replicas: obs.replicas, statefulSet: r.cachedStatefulSet(db)}, uerr
		}
	}
	if err != nil {
		obs.statefulSet = r.cachedStatefulSet(db)
		return obs, err
	}
	obs.statefulSet = sts
	return obs, nil
}

// applyChildren reconciles every child; a refused volume expansion is returned as expansion
// and does not stop the rest (the StatefulSet then keeps its volumeClaimTemplates).
// claimsDone is set once the claims are reconciled.
func (r *Reconciler) applyChildren(ctx context.Context, db *examplev1.Database, claimsDone *bool) (sts *appsv1.StatefulSet, expansion *failure, err error) {
	d, err := resolve(db)
	if err != nil {
		return nil, nil, err
	}
	// One Created Event for the children this pass creates (a new Database has four or five),
	// rather than one each: every Event is a write kube-apiserver and etcd pay for.
	created := &createdChildren{}
	ctx = context.WithValue(ctx, createdChildrenKey{}, created)
	defer func() {
		if len(created.names) > 0 {
			r.event(ctx, db, corev1.EventTypeNormal, ReasonCreated, "Created %s", strings.Join(created.names, ", "))
		}
	}()
	if err := r.reconcileSecret(ctx, db, d); err != nil {
		return nil, nil, err
	}
	for _, want := range []*corev1.Service{newHeadlessService(db, d), newClientService(db, d)} {
		if err := r.reconcileService(ctx, db, want); err != nil {
			return nil, nil, err
		}
	}
	// One read of the StatefulSet from the cache for both steps: the claims about to be
	// mounted are those past its replicas, and it is that copy (its resourceVersion) that is
	// scaled, so a stale one fails with a conflict rather than scale past the claims checked.
	want := newStatefulSet(db, d)
	cached, cachedErr := r.listers.StatefulSets.StatefulSets(db.Namespace).Get(want.Name)
	if expansion, err = r.reconcileClaims(ctx, db, d, want, cached, cachedErr); err != nil {
		return nil, expansion, err
	}
	*claimsDone = true
	if sts, err = r.reconcileStatefulSet(ctx, db, d, want, cached, cachedErr, expansion == nil); err != nil {
		return nil, expansion, err
	}
	if err := r.reconcilePodDisruptionBudget(ctx, db, d); err != nil {
		return nil, expansion, err
	}
	return sts, expansion, nil
}

// cachedStatefulSet is db's StatefulSet from the lister, or nil when there is none of ours.
func (r *Reconciler) cachedStatefulSet(db *examplev1.Database) *appsv1.StatefulSet {
	sts, err := r.listers.StatefulSets.StatefulSets(db.Namespace).Get(statefulSetName(db))
	if err != nil || !isControlledBy(sts, db) {
		return nil
	}
	return sts
}

// createdChildren collects the children ("Service NAME") ensureChild creates during one pass
// of applyChildren, which records them in one Created Event. It travels in the pass's context
// (createdChildrenKey); a pass is sequential, so it needs no lock.
type createdChildren struct{ names []string }

// createdChildrenKey is the context key of a pass's *createdChildren.
type createdChildrenKey struct{}

// childObject is a Kubernetes object of a kind the Reconciler creates.
type childObject interface {
	metav1.Object
	runtime.Object
}

// writer is the part of a typed client ensureChild uses.
type writer[T childObject] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
}

// childOps says how ensureChild reconciles one child object.
type childOps[T childObject] struct {
	// kind names the kind in Events and messages: "Service".
	kind   string
	name   string
	client writer[T]
	// cached reads the object from the lister.
	cached func(name string) (T, error)
	// build returns the object to create, called only when there is none.
	build func() T
	// created, if set, records the Events of a creation instead of the default: a place in
	// the pass's one Created Event (createdChildren).
	created func()
	// sync copies the fields the Reconciler owns into have, a copy; an error stops ensureChild.
	sync func(have T) error
	// describe, if set, says what an update changed, for its Event.
	describe func(old, updated T) string
}

// ensureChild makes the child c exist, controlled by db and with the fields the Reconciler owns,
// writing only when they differ. It returns the object as last read or written.
//
// A name taken by an object db does not control is never adopted nor written: ensureChild returns
// a ChildConflict failure; the only exception is an object a Retain released from a Database
// of the same name (isRetainedFor), which is adopted. When the cache misses an object that
// exists (it is not labelled as ours, or the informer lags), the create fails with
// AlreadyExists and ensureChild reads the object from the API server to decide the same way. A child of ours being deleted is waited
// for (*waitError).
func ensureChild[T childObject](ctx context.Context, r *Reconciler, db *examplev1.Database, c childOps[T]) (T, error) {
	var zero T
	have, err := c.cached(c.name)
	switch {
	case apierrors.IsNotFound(err):
		created, err := c.client.Create(ctx, c.build(), metav1.CreateOptions{})
		if err == nil {
			switch log, ok := ctx.Value(createdChildrenKey{}).(*createdChildren); {
			case c.created != nil:
				c.created()
			case ok:
				log.names = append(log.names, c.kind+" "+c.name)
			default:
				r.event(ctx, db, corev1.EventTypeNormal, ReasonCreated, "Created %s %s", c.kind, c.name)
			}
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return zero, writeError(err, "create", c.kind, c.name)
		}
		if have, err = c.client.Get(ctx, c.name, metav1.GetOptions{}); err != nil {
			return zero, fmt.Errorf("get %s %q: %w", c.kind, c.name, err)
		}
	case err != nil:
		return zero, err
	}

	adopting := false
	if !isControlledBy(have, db) {
		if !isRetainedFor(have, db) {
			return zero, conflictFailure(c.kind, have)
		}
		adopting = true
	}
	if have.GetDeletionTimestamp() != nil {
		return zero, &waitError{what: fmt.Sprintf("%s %s is being deleted", c.kind, c.name)}
	}
	update := have.DeepCopyObject().(T)
	if adopting {
		adopt(update, db, *metav1.NewControllerRef(db, databaseGVK))
	}
	if err := c.sync(update); err != nil {
		return zero, err
	}
	if equality.Semantic.DeepEqual(have, update) {
		return have, nil
	}
	updated, err := c.client.Update(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		return zero, writeError(err, "update", c.kind, c.name)
	}
	if adopting {
		r.event(ctx, db, corev1.EventTypeNormal, ReasonAdopted, "Adopted retained %s %s", c.kind, c.name)
		return updated, nil
	}
	msg := fmt.Sprintf("Updated %s %s", c.kind, c.name)
	if c.describe != nil {
		msg += ": " + c.describe(have, updated)
	}
	r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "%s", msg)
	return updated, nil
}

// conflictFailure is the failure of a child name taken by obj, which db does not control.
func conflictFailure(kind string, obj metav1.Object) error {
	owner := "it has no controller"
	if ref := metav1.GetControllerOf(obj); ref != nil {
		owner = fmt.Sprintf("it is controlled by %s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	return &failure{reason: ReasonChildConflict, message: fmt.Sprintf(
		"%s %s already exists and is not controlled by this Database (%s); it is left untouched: delete or rename it, or give the Database another name (checked again every minute)",
		kind, obj.GetName(), owner)}
}

// event records an Event on db and logs it.
func (r *Reconciler) event(ctx context.Context, db *examplev1.Database, eventType, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	klog.FromContext(ctx).V(2).Info(msg, "reason", reason)
	r.recorder.Event(db, eventType, reason, msg)
}

// reconcileSecret creates the credentials Secret with a new random password (crypto/rand)
// when there is none, and otherwise only adds the keys that follow from the ones present: the
// username and password are never regenerated while the Secret exists, since the engine keeps
// them in its data directory. A Secret of ours without them is a failure.
func (r *Reconciler) reconcileSecret(ctx context.Context, db *examplev1.Database, d desiredState) error {
	if err := r.unprotectDeletedSecret(ctx, db); err != nil {
		return err
	}
	_, err := ensureChild(ctx, r, db, childOps[*corev1.Secret]{
		kind:   "Secret",
		name:   secretName(db),
		client: r.kube.CoreV1().Secrets(db.Namespace),
		cached: r.listers.Secrets.Secrets(db.Namespace).Get,
		build: func() *corev1.Secret {
			s := newSecret(db, newCredentials(db, d, rand.Text()))
			setProtection(s, protected(db))
			return s
		},
		created: func() {
			r.event(ctx, db, corev1.EventTypeNormal, ReasonSecretGenerated, "Generated credentials in Secret %s", secretName(db))
			if r.cachedStatefulSet(db) != nil {
				r.event(ctx, db, corev1.EventTypeWarning, ReasonCredentialsRegenerated,
					"Secret %s was deleted and has been generated again; an initialised data directory keeps the old credentials", secretName(db))
			}
		},
		sync: func(have *corev1.Secret) error {
			for _, key := range []string{engine.SecretKeyUsername, engine.SecretKeyPassword} {
				if len(have.Data[key]) == 0 {
					return &failure{reason: ReasonInvalidCredentials, message: fmt.Sprintf(
						"Secret %s has no %q; restore it, or delete the Secret to generate new credentials (an initialised data directory keeps the old ones)",
						have.Name, key)}
				}
			}
			have.Labels = mergeLabels(have.Labels, childLabels(db))
			setProtection(have, protected(db))
			fillCredentials(db, d, have.Data)
			return nil
		},
		describe: func(old, updated *corev1.Secret) string {
			var changed []string
			for k, v := range updated.Data {
				if o, ok := old.Data[k]; !ok || string(o) != string(v) {
					changed = append(changed, k)
				}
			}
			slices.Sort(changed)
			if slices.Contains(updated.Finalizers, ProtectFinalizer) != slices.Contains(old.Finalizers, ProtectFinalizer) {
				changed = append(changed, "finalizer "+ProtectFinalizer)
			}
			if len(changed) == 0 {
				return "labels"
			}
			return "set " + strings.Join(changed, ", ")
		},
	})
	return err
}

// unprotectDeletedSecret removes ProtectFinalizer from db's credentials Secret when it is
// being deleted (a namespace deletion) and the deletion policy no longer asks for
// protection: ensureChild only waits for a child being deleted.
func (r *Reconciler) unprotectDeletedSecret(ctx context.Context, db *examplev1.Database) error {
	have, err := r.listers.Secrets.Secrets(db.Namespace).Get(secretName(db))
	if err != nil || !isControlledBy(have, db) || have.DeletionTimestamp == nil || protected(db) {
		return nil
	}
	update := have.DeepCopy()
	if !setProtection(update, false) {
		return nil
	}
	if _, err := r.kube.CoreV1().Secrets(db.Namespace).Update(ctx, update, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update Secret %q: %w", have.Name, err)
	}
	return nil
}

// reconcileService makes the Service want exist with the fields we own.
func (r *Reconciler) reconcileService(ctx context.Context, db *examplev1.Database, want *corev1.Service) error {
	_, err := ensureChild(ctx, r, db, childOps[*corev1.Service]{
		kind:   "Service",
		name:   want.Name,
		client: r.kube.CoreV1().Services(db.Namespace),
		cached: r.listers.Services.Services(db.Namespace).Get,
		build:  func() *corev1.Service { return want },
		sync:   func(have *corev1.Service) error { syncService(have, want); return nil },
	})
	return err
}

// reconcilePodDisruptionBudget keeps a PodDisruptionBudget while replicas > 1 and deletes
// ours when replicas is 1 (a budget of one unavailable Pod out of one would block every
// voluntary eviction's drain check for no benefit).
func (r *Reconciler) reconcilePodDisruptionBudget(ctx context.Context, db *examplev1.Database, d desiredState) error {
	client := r.kube.PolicyV1().PodDisruptionBudgets(db.Namespace)
	cached := r.listers.PodDisruptionBudgets.PodDisruptionBudgets(db.Namespace).Get
	if d.replicas > 1 {
		want := newPodDisruptionBudget(db)
		_, err := ensureChild(ctx, r, db, childOps[*policyv1.PodDisruptionBudget]{
			kind:   "PodDisruptionBudget",
			name:   want.Name,
			client: client,
			cached: cached,
			build:  func() *policyv1.PodDisruptionBudget { return want },
			sync:   func(have *policyv1.PodDisruptionBudget) error { syncPodDisruptionBudget(have, want); return nil },
		})
		return err
	}
	deleted, err := deleteChild(ctx, db, "PodDisruptionBudget", cached, client, pdbName(db))
	if deleted {
		r.event(ctx, db, corev1.EventTypeNormal, ReasonDeleted, "Deleted PodDisruptionBudget %s: replicas is 1", pdbName(db))
	}
	return err
}

// reconcileStatefulSet makes the StatefulSet match db. When spec.storage grew past the size of
// its volumeClaimTemplate, which is immutable, it replaces the StatefulSet: it deletes it with
// propagationPolicy Orphan, so the Pods keep running, and creates it again; the new one adopts
// the Pods, which match its selector. Until the old one is gone (the garbage collector
// orphans its Pods first), the create reports AlreadyExists and the Reconciler waits.
//
// want is newStatefulSet(db, d); have and haveErr are the lister's answer for it, read once
// by the caller (reconcileClaims checked the claims against that copy's replicas).
//
// grow is false when a volume expansion was refused: the StatefulSet is then kept with its
// volumeClaimTemplates (and every other change still applied).
func (r *Reconciler) reconcileStatefulSet(ctx context.Context, db *examplev1.Database, d desiredState, want, have *appsv1.StatefulSet, haveErr error, grow bool) (*appsv1.StatefulSet, error) {
	client := r.kube.AppsV1().StatefulSets(db.Namespace)
	cached := func(string) (*appsv1.StatefulSet, error) { return have, haveErr }

	if haveErr == nil && isControlledBy(have, db) && have.DeletionTimestamp == nil && grow {
		if size, ok := claimTemplateStorage(have); ok && size.Cmp(d.storage) < 0 {
			return r.replaceStatefulSet(ctx, db, have, want, size, d.storage)
		}
	}
	return ensureChild(ctx, r, db, childOps[*appsv1.StatefulSet]{
		kind:   "StatefulSet",
		name:   want.Name,
		client: client,
		cached: cached,
		build:  func() *appsv1.StatefulSet { return want },
		sync:   func(have *appsv1.StatefulSet) error { syncStatefulSet(have, want); return nil },
		describe: func(old, updated *appsv1.StatefulSet) string {
			var changes []string
			if o, n := ptr.Deref(old.Spec.Replicas, 1), ptr.Deref(updated.Spec.Replicas, 1); o != n {
				changes = append(changes, fmt.Sprintf("replicas %d → %d", o, n))
			}
			if o, n := containerImage(old), containerImage(updated); o != n {
				changes = append(changes, fmt.Sprintf("image %s → %s", o, n))
			}
			if len(changes) == 0 {
				return "pod template"
			}
			return strings.Join(changes, ", ")
		},
	})
}

func (r *Reconciler) replaceStatefulSet(ctx context.Context, db *examplev1.Database, have, want *appsv1.StatefulSet, from, to resource.Quantity) (*appsv1.StatefulSet, error) {
	client := r.kube.AppsV1().StatefulSets(db.Namespace)
	err := client.Delete(ctx, have.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan),
		Preconditions:     metav1.NewUIDPreconditions(string(have.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("delete StatefulSet %q to replace it: %w", have.Name, err)
	}
	r.event(ctx, db, corev1.EventTypeNormal, ReasonReplacing,
		"Deleted StatefulSet %s, keeping its Pods, to grow its volumeClaimTemplates from %s to %s", have.Name, from.String(), to.String())
	created, err := client.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, &waitError{what: fmt.Sprintf("StatefulSet %s is being replaced", have.Name)}
	}
	if err != nil {
		return nil, writeError(err, "create", "StatefulSet", want.Name)
	}
	r.event(ctx, db, corev1.EventTypeNormal, ReasonCreated, "Created StatefulSet %s", want.Name)
	return created, nil
}

// deleter is the part of a typed client deleteChild uses.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// deleteChild deletes the cached child name if db controls it and it is not already being
// deleted, with a UID precondition (never a same-named successor) and background propagation.
// It reports whether it deleted; an object already gone is not an error.
func deleteChild[T childObject](ctx context.Context, db *examplev1.Database, kind string, cached func(string) (T, error), client deleter, name string) (bool, error) {
	have, err := cached(name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !isControlledBy(have, db) || have.GetDeletionTimestamp() != nil {
		return false, nil
	}
	err = client.Delete(ctx, name, metav1.DeleteOptions{
		Preconditions:     metav1.NewUIDPreconditions(string(have.GetUID())),
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete %s %q: %w", kind, name, err)
	}
	return true, nil
}
