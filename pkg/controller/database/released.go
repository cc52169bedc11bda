package database

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// DefaultControllerNamespace is the controller's own namespace when
// Options.ControllerNamespace is empty (artifacts/deploy/namespace.yaml).
const DefaultControllerNamespace = "database-system"

// ReleasedRecordPrefix begins the name of every release record.
const ReleasedRecordPrefix = "released."

// RestoreForAnnotation on a Secret a user creates to restore the lost credentials Secret of a
// live Database names that Database's UID: the Database adopts it. A UID exists only once the
// Database does, so no Secret planted before it can carry it.
const RestoreForAnnotation = "database.example.com/restore-for"

// ReleasedRecordName is the name of the ConfigMap, in the controller's namespace, that records the
// children a deletionPolicy Retain released from the Database namespace/name:
// "released.<namespace>.<name>" (both DNS labels, so the name is unambiguous). Its data maps
// each released object's UID to "<Kind> <name>".
func ReleasedRecordName(namespace, name string) string {
	return ReleasedRecordPrefix + namespace + "." + name
}

// controllerNamespace is the controller's own namespace, Options.ControllerNamespace or
// DefaultControllerNamespace: where the Reconciler keeps the release records, and where a
// Database's NetworkPolicy admits the controller's Pods from.
func (r *Reconciler) controllerNamespace() string {
	if r.options.ControllerNamespace != "" {
		return r.options.ControllerNamespace
	}
	return DefaultControllerNamespace
}

// clusterDomain is the cluster's DNS domain, Options.ClusterDomain or
// names.DefaultClusterDomain.
func (r *Reconciler) clusterDomain() string {
	if r.options.ClusterDomain != "" {
		return r.options.ClusterDomain
	}
	return names.DefaultClusterDomain
}

// recordEntry is the value a release record holds for an object of kind named name.
func recordEntry(kind, name string) string { return kind + " " + name }

// releasedObject is an object of kind about to be released.
type releasedObject struct {
	kind string
	obj  metav1.Object
}

// recordReleased adds objects to db's release record (creating the ConfigMap, labelled
// managed-by and annotated RetainedFromAnnotation) before their release: only an object
// recorded there is ever adopted. A conflict is retried on a fresh copy.
func (r *Reconciler) recordReleased(ctx context.Context, db *examplev1.Database, objects []releasedObject) error {
	client := r.kube.CoreV1().ConfigMaps(r.controllerNamespace())
	name := ReleasedRecordName(db.Namespace, db.Name)
	entries := map[string]string{}
	for _, o := range objects {
		if o.obj.GetUID() == "" {
			return fmt.Errorf("%s %q has no uid to record", o.kind, o.obj.GetName())
		}
		entries[string(o.obj.GetUID())] = recordEntry(o.kind, o.obj.GetName())
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Namespace:   r.controllerNamespace(),
					Labels:      map[string]string{names.ManagedByLabel: names.ManagedByValue},
					Annotations: map[string]string{RetainedFromAnnotation: retainedKey(db)},
				},
				Data: entries,
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		update := have.DeepCopy()
		if update.Data == nil {
			update.Data = map[string]string{}
		}
		for uid, entry := range entries {
			update.Data[uid] = entry
		}
		if equality.Semantic.DeepEqual(have.Data, update.Data) {
			return nil
		}
		_, err = client.Update(ctx, update, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("record the released objects in ConfigMap %s/%s: %w", r.controllerNamespace(), name, err)
	}
	return nil
}

// releasedRecord reads db's release record from the API server (a record written a moment
// ago must be seen): UID to entry, empty when there is none.
func (r *Reconciler) releasedRecord(ctx context.Context, db *examplev1.Database) (map[string]string, error) {
	cm, err := r.kube.CoreV1().ConfigMaps(r.controllerNamespace()).Get(ctx, ReleasedRecordName(db.Namespace, db.Name), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return map[string]string{}, nil
	case err != nil:
		return nil, fmt.Errorf("get the release record ConfigMap %s/%s: %w", r.controllerNamespace(), ReleasedRecordName(db.Namespace, db.Name), err)
	}
	if cm.Data == nil {
		return map[string]string{}, nil
	}
	return cm.Data, nil
}

// forgetReleased removes uid from db's release record once db adopted it, and deletes the
// record when nothing is left in it (a delete conditional on the copy read, so an entry
// recorded meanwhile is kept).
func (r *Reconciler) forgetReleased(ctx context.Context, db *examplev1.Database, uid types.UID) error {
	client := r.kube.CoreV1().ConfigMaps(r.controllerNamespace())
	name := ReleasedRecordName(db.Namespace, db.Name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, ok := have.Data[string(uid)]; !ok {
			return nil
		}
		if len(have.Data) == 1 {
			err = client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
				UID: &have.UID, ResourceVersion: &have.ResourceVersion,
			}})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		update := have.DeepCopy()
		delete(update.Data, string(uid))
		_, err = client.Update(ctx, update, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove uid %s from the release record ConfigMap %s/%s: %w", uid, r.controllerNamespace(), name, err)
	}
	return nil
}

// adoption is how a pass judges an object of db's child name that db does not control.
type adoption int

const (
	// notRetained: neither marked for db nor restored for it; a foreign object.
	notRetained adoption = iota
	// adoptable: released from a Database of db's name and recorded so, or a Secret restored
	// for db by its UID (RestoreForAnnotation).
	adoptable
	// unrecorded: marked RetainedFromAnnotation for db, but this controller did not release
	// it (its UID is not in the record): a look-alike, never adopted.
	unrecorded
)

// judgeAdoption says whether db may adopt obj, of kind, which it does not control: a Secret
// carrying RestoreForAnnotation with db's UID, or an object marked for db (isRetainedFor)
// whose UID db's release record holds for that kind and name. The record is read once per
// pass.
func (p *pass) judgeAdoption(ctx context.Context, kind string, obj metav1.Object) (adoption, error) {
	if metav1.GetControllerOf(obj) != nil {
		return notRetained, nil
	}
	if kind == "Secret" && p.db.UID != "" && obj.GetAnnotations()[RestoreForAnnotation] == string(p.db.UID) {
		return adoptable, nil
	}
	if !isRetainedFor(obj, p.db) {
		return notRetained, nil
	}
	if p.released == nil {
		record, err := p.r.releasedRecord(ctx, p.db)
		if err != nil {
			return notRetained, err
		}
		p.released = record
	}
	if uid := string(obj.GetUID()); uid != "" && p.released[uid] == recordEntry(kind, obj.GetName()) {
		return adoptable, nil
	}
	return unrecorded, nil
}

// unrecordedFailure is the ChildConflict halt for obj, of kind, marked RetainedFromAnnotation
// for the pass's Database although this controller did not release it.
func (p *pass) unrecordedFailure(kind string, obj metav1.Object) *halt {
	return fail(examplev1.ReasonChildConflict,
		"%s %s carries %s=%s but is not adopted: this controller did not release it (its uid %s is not in the release record ConfigMap %s/%s), so it may have been planted; it is left untouched: delete or rename it, or give the Database another name (checked again every minute)",
		kind, obj.GetName(), RetainedFromAnnotation, retainedKey(p.db), obj.GetUID(), p.r.controllerNamespace(), ReleasedRecordName(p.db.Namespace, p.db.Name))
}

// adopted removes obj, just adopted, from the release record, if it was there.
func (p *pass) adopted(ctx context.Context, obj metav1.Object) error {
	if _, recorded := p.released[string(obj.GetUID())]; !recorded {
		return nil
	}
	delete(p.released, string(obj.GetUID()))
	return p.r.forgetReleased(ctx, p.db, obj.GetUID())
}
