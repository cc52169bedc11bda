// Package specs builds the objects the Database controller wants for a Database: the names
// of its children that pkg/names does not hold, their labels and owner references, the
// credentials Secret, the headless and client Services, the StatefulSet and its data claims,
// and the PodDisruptionBudget. The builders are pure: no client, no context, no clock; the
// same Database always gives the same objects (but for the password the caller passes in).
package specs

import (
	"maps"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
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

// DataClaimName is the name of db's data claim of ordinal: "data-<name>-<ordinal>".
func DataClaimName(db *examplev1.Database, ordinal int32) string {
	return claimName(engine.DataVolumeName, names.StatefulSetName(db), ordinal)
}

// claimName is the name the StatefulSet controller gives the claim of ordinal made from the
// volumeClaimTemplate template of the StatefulSet statefulSet: "<template>-<statefulSet>-<ordinal>".
func claimName(template, statefulSet string, ordinal int32) string {
	return template + "-" + statefulSet + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// DataClaimOrdinal is the ordinal of the data claim named claimName of db, and false when
// the name is not "data-<name>-<ordinal>", as the StatefulSet controller names the claims of
// the volumeClaimTemplate engine.DataVolumeName.
func DataClaimOrdinal(db *examplev1.Database, claimName string) (int32, bool) {
	database, ordinal, ok := ParseDataClaimName(claimName)
	if !ok || database != names.StatefulSetName(db) {
		return 0, false
	}
	return ordinal, true
}

// ParseDataClaimName splits a data claim name "data-<database>-<ordinal>": the database is
// what lies between "data-" and the last "-", so "data-a-b-0" is ordinal 0 of "a-b" (an
// ordinal has no "-", so no other split is possible). ok is false for any other name, an
// empty database, or an ordinal that is not a decimal int32 written without leading zeros
// (the StatefulSet controller's form).
func ParseDataClaimName(claimName string) (database string, ordinal int32, ok bool) {
	rest, ok := strings.CutPrefix(claimName, engine.DataVolumeName+"-")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", 0, false
	}
	digits := rest[i+1:]
	n, err := strconv.ParseUint(digits, 10, 31)
	if err != nil || (digits != "0" && digits[0] == '0') {
		return "", 0, false
	}
	return rest[:i], int32(n), true
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
