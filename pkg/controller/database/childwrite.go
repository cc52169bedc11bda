package database

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
)

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
	// the pass's one Created Event.
	created func()
	// sync copies the fields the Reconciler owns into have, a copy; a halt stops ensureChild.
	sync func(have T) *halt
	// describe, if set, says what an update changed, for its Event.
	describe func(old, updated T) string
}

// ensureChild makes the child c of the pass's Database exist, controlled by it and with the
// fields the Reconciler owns, writing only when they differ. It returns the object as last
// read or written.
//
// A name taken by an object the Database does not control is never adopted nor written: it
// is a ChildConflict halt; the only exception is an object a Retain of a Database of the same
// name released and recorded, or a Secret restored for this Database by its UID
// (judgeAdoption), which is adopted. An object marked as released that the record does not
// hold is a ChildConflict halt naming it, with a Warning Event. When the cache misses an object that
// exists (it is not labelled as ours, or the informer lags), the create fails with
// AlreadyExists and ensureChild reads the object from the API server to decide the same way.
// A child of ours being deleted is waited for (a halt).
func ensureChild[T childObject](ctx context.Context, p *pass, c childOps[T]) (T, *halt, error) {
	var zero T
	have, err := c.cached(c.name)
	switch {
	case apierrors.IsNotFound(err):
		created, err := c.client.Create(ctx, c.build(), metav1.CreateOptions{})
		if err == nil {
			if c.created != nil {
				c.created()
			} else {
				p.created = append(p.created, c.kind+" "+c.name)
			}
			return created, nil, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			h, err := writeError(err, "create", c.kind, c.name)
			return zero, h, err
		}
		if have, err = c.client.Get(ctx, c.name, metav1.GetOptions{}); err != nil {
			return zero, nil, fmt.Errorf("get %s %q: %w", c.kind, c.name, err)
		}
	case err != nil:
		return zero, nil, err
	}

	adopting := false
	if !isControlledBy(have, p.db) {
		judged, err := p.judgeAdoption(ctx, c.kind, have)
		switch {
		case err != nil:
			return zero, nil, err
		case judged == unrecorded:
			p.r.event(ctx, p.db, corev1.EventTypeWarning, examplev1.ReasonChildConflict, "Not adopting %s %s: its uid %s is not one this controller released", c.kind, c.name, have.GetUID())
			return zero, p.unrecordedFailure(c.kind, have), nil
		case judged != adoptable:
			return zero, conflictFailure(c.kind, have), nil
		}
		adopting = true
	}
	if have.GetDeletionTimestamp() != nil {
		return zero, waitFor("%s %s is being deleted", c.kind, c.name), nil
	}
	update := have.DeepCopyObject().(T)
	if adopting {
		adopt(update, specs.OwnerReference(p.db))
	}
	if h := c.sync(update); h != nil {
		return zero, h, nil
	}
	if equality.Semantic.DeepEqual(have, update) {
		return have, nil, nil
	}
	updated, err := c.client.Update(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		h, err := writeError(err, "update", c.kind, c.name)
		return zero, h, err
	}
	if adopting {
		p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonAdopted, "Adopted retained %s %s", c.kind, c.name)
		return updated, nil, p.adopted(ctx, updated)
	}
	msg := fmt.Sprintf("Updated %s %s", c.kind, c.name)
	if c.describe != nil {
		msg += ": " + c.describe(have, updated)
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonUpdated, "%s", msg)
	return updated, nil, nil
}

// deleter is the part of a typed client deleteChild uses.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// deleteChild deletes have, a child of db of kind as read from a cache or the API server, if
// db controls it and it is not already being deleted, with a UID precondition (never a
// same-named successor) and background propagation. It reports whether it deleted; an object
// already gone is not an error.
func deleteChild(ctx context.Context, db *examplev1.Database, kind string, client deleter, have metav1.Object) (bool, error) {
	if !isControlledBy(have, db) || have.GetDeletionTimestamp() != nil {
		return false, nil
	}
	err := client.Delete(ctx, have.GetName(), metav1.DeleteOptions{
		Preconditions:     metav1.NewUIDPreconditions(string(have.GetUID())),
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete %s %q: %w", kind, have.GetName(), err)
	}
	return true, nil
}

// deleteCachedChild is deleteChild of the child name as cached reads it; nothing to delete
// when the cache has none.
func deleteCachedChild[T childObject](ctx context.Context, db *examplev1.Database, kind string, cached func(string) (T, error), client deleter, name string) (bool, error) {
	have, err := cached(name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return deleteChild(ctx, db, kind, client, have)
}

// deleteUnwanted deletes ours of the child named name (deleteCachedChild) that the Database no
// longer asks for, with a Normal Deleted Event "Deleted <kind> <name>: <why>".
func deleteUnwanted[T childObject](ctx context.Context, p *pass, kind, name string, cached func(string) (T, error), client deleter, why string) error {
	deleted, err := deleteCachedChild(ctx, p.db, kind, cached, client, name)
	if deleted {
		p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonDeleted, "Deleted %s %s: %s", kind, name, why)
	}
	return err
}
