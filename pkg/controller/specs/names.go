// Package specs builds the objects the Database controller wants for a Database: the names
// of its children, their labels and owner references, the credentials Secret, the headless
// and client Services, the StatefulSet and its data claims, and the PodDisruptionBudget. The
// builders are pure: no client, no context, no clock; the same Database always gives the
// same objects (but for the password the caller passes in).
package specs

import (
	"maps"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
)

// ManagedByLabel and ManagedByValue mark every child of a Database (the Kubernetes
// recommended label app.kubernetes.io/managed-by).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "database-controller"
)

// The other Kubernetes recommended labels
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
// NameLabel holds the engine.
const (
	NameLabel      = "app.kubernetes.io/name"
	instanceLabel  = "app.kubernetes.io/instance"
	versionLabel   = "app.kubernetes.io/version"
	componentLabel = "app.kubernetes.io/component"
	partOfLabel    = "app.kubernetes.io/part-of"

	componentValue = "database"
	partOfValue    = "database-apiserver"
)

// DatabaseGVK is the group, version and kind the owner references of children name.
var DatabaseGVK = examplev1.SchemeGroupVersion.WithKind("Database")

// Child names, from the Database's name.

// SecretName is the credentials Secret's name: "<name>-credentials".
func SecretName(db *examplev1.Database) string { return db.Name + "-credentials" }

// HeadlessServiceName is the StatefulSet's governing Service's name: "<name>-headless".
func HeadlessServiceName(db *examplev1.Database) string { return db.Name + "-headless" }

// ClientServiceName is the client Service's name: "<name>".
func ClientServiceName(db *examplev1.Database) string { return db.Name }

// StatefulSetName is the StatefulSet's name: "<name>".
func StatefulSetName(db *examplev1.Database) string { return db.Name }

// PodDisruptionBudgetName is the PodDisruptionBudget's name: "<name>".
func PodDisruptionBudgetName(db *examplev1.Database) string { return db.Name }

// DataClaimName is the name of db's data claim of ordinal: "data-<name>-<ordinal>".
func DataClaimName(db *examplev1.Database, ordinal int32) string {
	return claimName(engine.DataVolumeName, StatefulSetName(db), ordinal)
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
	if !ok || database != StatefulSetName(db) {
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

// SelectorLabels select db's Pods: only labels that never change (the engine is immutable),
// and managed-by, so a chart using the same recommended name and instance labels never
// shares our Pods (nor our Services' endpoints).
func SelectorLabels(db *examplev1.Database) map[string]string {
	return map[string]string{NameLabel: string(db.Spec.Engine), instanceLabel: db.Name, ManagedByLabel: ManagedByValue}
}

// DatabaseOfPod is the name of the Database whose Pod pod is, by its instance and managed-by
// labels, and false for a Pod that has none.
func DatabaseOfPod(pod metav1.Object) (string, bool) {
	l := pod.GetLabels()
	name, ok := l[instanceLabel]
	return name, ok && name != "" && l[ManagedByLabel] == ManagedByValue
}

// ChildLabels are on every child: the selector labels, component, part-of and managed-by.
func ChildLabels(db *examplev1.Database) map[string]string {
	l := SelectorLabels(db)
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

// PodSelector is status.selector: the Pods' label selector in string form.
func PodSelector(db *examplev1.Database) string {
	return labels.SelectorFromSet(SelectorLabels(db)).String()
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

// NamespaceDomain is the DNS domain of the Services of db's namespace in a cluster whose DNS
// domain is domain: "<namespace>.svc.<domain>", which every Service name of the namespace,
// and every name a Pod's address resolves back to as an endpoint of one, ends with
// (https://github.com/kubernetes/dns/blob/master/docs/specification.md).
func NamespaceDomain(db *examplev1.Database, domain string) string {
	return db.Namespace + ".svc." + domain
}

// ServiceHost is the fully qualified DNS name of db's Service named service in a cluster
// whose DNS domain is domain: "<service>.<namespace>.svc.<domain>". A resolver tries a name
// with fewer dots than its ndots option (5 in a Pod) with each search domain appended
// first (resolv.conf(5)): "<service>.<namespace>.svc" would be asked as
// "<service>.<namespace>.svc.svc.<domain>", the Service "<namespace>" of a namespace named
// "svc", which whoever may create that namespace could answer. The fully qualified name's
// expansions have more labels under the domain than any name the cluster DNS gives a Service
// or an endpoint (https://github.com/kubernetes/dns/blob/master/docs/specification.md), so no
// object answers them.
func ServiceHost(db *examplev1.Database, domain, service string) string {
	return service + "." + NamespaceDomain(db, domain)
}

// PodsDomain is the domain of the stable names of db's Pods through the headless Service:
// "<name>-headless.<namespace>.svc.<domain>".
func PodsDomain(db *examplev1.Database, domain string) string {
	return ServiceHost(db, domain, HeadlessServiceName(db))
}

// PodHost is the stable DNS name of db's Pod named pod through the headless Service:
// "<pod>.<name>-headless.<namespace>.svc.<domain>", which resolves whether or not the Pod is
// Ready (the Service publishes not-ready addresses).
func PodHost(db *examplev1.Database, domain, pod string) string {
	return pod + "." + PodsDomain(db, domain)
}
