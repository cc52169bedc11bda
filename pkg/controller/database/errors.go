package database

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
)

// failure is a permanent error: retrying cannot fix it, only a change to the Database or to
// the offending object can. Reconcile reports it as phase Failed and returns no error.
type failure struct {
	// reason is the CamelCase reason of the conditions and the Warning Event.
	reason string
	// message says what is wrong and what to do.
	message string
}

// external reports whether the failure comes from an object the informers do not watch (a
// name taken by an object we do not own, a refused expansion, a terminating namespace): it
// may go away without an event, so the Reconciler looks again after RequeueAfterExternal.
// Spec errors wait for a change of the Database.
func (f *failure) external() bool {
	switch f.reason {
	case examplev1.ReasonChildConflict, examplev1.ReasonStorageExpansionFailed, examplev1.ReasonNamespaceTerminating, examplev1.ReasonInvalidCredentials, examplev1.ReasonCredentialsLost,
		examplev1.ReasonRestoreFailed:
		return true
	}
	return false
}

// halt ends a pass before its last step without an error for the workqueue: a failure
// (phase Failed), or a child being deleted that must be gone before the pass goes on
// (waiting says which). Exactly one of the two is set.
type halt struct {
	failure *failure
	waiting string
}

// fail is the halt of a failure with reason and the message format and args make.
func fail(reason, format string, args ...any) *halt {
	return &halt{failure: &failure{reason: reason, message: fmt.Sprintf(format, args...)}}
}

// waitFor is the halt of a pass waiting for what the format and args say, e.g.
// "Secret my-database-credentials is being deleted".
func waitFor(format string, args ...any) *halt {
	return &halt{waiting: fmt.Sprintf(format, args...)}
}

// releasesClaims reports whether a pass halted by h before its claims step was done must
// still release the claims of a Database whose policy no longer protects them: h waits for
// a deletion, or the namespace is being deleted.
func (h *halt) releasesClaims() bool {
	return h.waiting != "" || h.failure.reason == examplev1.ReasonNamespaceTerminating
}

// specFailure is the failure of a spec specs.Resolve refused (err): UnsupportedVersion or
// InvalidSpec.
func specFailure(err error) *halt {
	reason := examplev1.ReasonInvalidSpec
	if errors.Is(err, specs.ErrUnsupportedVersion) {
		reason = examplev1.ReasonUnsupportedVersion
	}
	return fail(reason, "%s", err.Error())
}

// writeError sorts a failed write of a child: a halt when the API server refused the object
// itself (422: retrying sends the same object) or the namespace is being deleted, and
// otherwise a transient error.
func writeError(err error, verb, kind, name string) (*halt, error) {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return fail(examplev1.ReasonNamespaceTerminating, "cannot %s %s %q: the namespace is being deleted", verb, kind, name), nil
	}
	if apierrors.IsInvalid(err) {
		return fail(examplev1.ReasonInvalidChild, "cannot %s %s %q: %v", verb, kind, name, err), nil
	}
	return nil, fmt.Errorf("%s %s %q: %w", verb, kind, name, err)
}

// conflictFailure is the halt of a child name taken by obj, which the Database does not
// control.
func conflictFailure(kind string, obj metav1.Object) *halt {
	owner := "it has no controller"
	if ref := metav1.GetControllerOf(obj); ref != nil {
		owner = fmt.Sprintf("it is controlled by %s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
	}
	return fail(examplev1.ReasonChildConflict,
		"%s %s already exists and is not controlled by this Database (%s); it is left untouched: delete or rename it, or give the Database another name (checked again every minute)",
		kind, obj.GetName(), owner)
}

// The resources a replacedError names.
var (
	claimsResource  = corev1.Resource("persistentvolumeclaims")
	secretsResource = corev1.Resource("secrets")
)

// isUIDMismatch reports whether err is the API server's refusal of a patch whose metadata.uid
// is not the uid of the object of that name, an object replaced since it was read: uid is
// immutable, so the update the patch makes fails validation (422 Invalid, a cause on field
// metadata.uid; k8s.io/apiserver's patch handler sets no UID precondition of its own).
func isUIDMismatch(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// replacedError is a Conflict for a patch of obj refused because the object of that name is
// another one now (isUIDMismatch): like a stale resourceVersion, retried with a fresh copy.
func replacedError(resource schema.GroupResource, obj metav1.Object, err error) error {
	return apierrors.NewConflict(resource, obj.GetName(), fmt.Errorf(
		"the object was replaced since it was read (uid %s expected): %v", obj.GetUID(), err))
}
