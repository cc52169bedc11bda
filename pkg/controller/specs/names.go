// Package specs builds the objects the Database controller wants for a Database: the names
// of its children that pkg/names does not hold, their labels and owner references, the
// credentials Secret, the headless and client Services, the StatefulSet and its data claims,
// and the PodDisruptionBudget. The builders are pure: no client, no context, no clock; the
// same Database always gives the same objects (but for the password the caller passes in).
package specs

import (
	"maps"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// The other Kubernetes recommended labels
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/), besides
// those that select the Pods (names.SelectorLabels).
const (
	versionLabel   = "app.kubernetes.io/version"
	componentLabel = "app.kubernetes.io/component"
	partOfLabel    = "app.kubernetes.io/part-of"

	componentValue = "database"
	partOfValue    = "database-apiserver"
)

// DatabaseGVK is the group, version and kind the owner references of children name.
var DatabaseGVK = examplev1.SchemeGroupVersion.WithKind("Database")

// Names of the children only the controller names, from the Database's name (the others are
// in pkg/names).

// PodDisruptionBudgetName is the PodDisruptionBudget's name: "<name>".
func PodDisruptionBudgetName(db *examplev1.Database) string { return db.Name }

// claimName is the name the StatefulSet controller gives the claim of ordinal made from the
// volumeClaimTemplate template of the StatefulSet statefulSet: "<template>-<statefulSet>-<ordinal>".
func claimName(template, statefulSet string, ordinal int32) string {
	return template + "-" + statefulSet + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// ChildLabels are on every child: the selector labels, component, part-of and managed-by.
func ChildLabels(db *examplev1.Database) map[string]string {
	l := names.SelectorLabels(db)
	l[componentLabel] = componentValue
	l[partOfLabel] = partOfValue
	return l
}

// workloadLabels are on the StatefulSet and its Pods: ChildLabels and the version they run.
// Only there, so a version change rewrites no other child.
func workloadLabels(db *examplev1.Database) map[string]string {
	l := ChildLabels(db)
	l[versionLabel] = db.Spec.Version
	return l
}

// MergeLabels returns have with every label of want set to want's value (have itself, or a
// new map when have is nil).
func MergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = make(map[string]string, len(want))
	}
	maps.Copy(have, want)
	return have
}

// OwnerReference is the controller reference of db's children: controller and
// blockOwnerDeletion true.
func OwnerReference(db *examplev1.Database) metav1.OwnerReference {
	return *metav1.NewControllerRef(db, DatabaseGVK)
}

// ClaimOwnerReference is the controller reference of db's data claims, as the
// volumeClaimTemplate carries it: blockOwnerDeletion false, because the StatefulSet
// controller, which may create a claim from the template, may not set it on an example.com
// owner where OwnerReferencesPermissionEnforcement is on.
func ClaimOwnerReference(db *examplev1.Database) metav1.OwnerReference {
	ref := OwnerReference(db)
	ref.BlockOwnerDeletion = ptr.To(false)
	return ref
}

// objectMeta is the metadata of a child named name: db's namespace, labels, and db as
// controller.
func objectMeta(db *examplev1.Database, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       db.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(db)},
	}
}
