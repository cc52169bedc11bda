// Package names holds the names the API server, the kubectl plugin, the local cluster and the
// controller all derive from a Database: the names of its children, the labels that select
// its Pods, the DNS names of its Services and Pods, and the keys of its credentials Secret.
// It imports nothing of theirs, so each of them may import it.
package names

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// ManagedByLabel and ManagedByValue mark every child of a Database (the Kubernetes
// recommended label app.kubernetes.io/managed-by).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "database-controller"
)

// The Kubernetes recommended labels that select a Database's Pods
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
// NameLabel holds the engine, InstanceLabel the Database's name.
const (
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
)

// Child names, from the Database's name.

// SecretName is the credentials Secret's name: "<name>-credentials".
func SecretName(db *examplev1.Database) string { return db.Name + "-credentials" }

// BackupTLSSecretName is the Secret "<name>-backup-tls": the certificates a Database's Pods
// and its backup Jobs authenticate each other with (spec.backup).
func BackupTLSSecretName(db *examplev1.Database) string { return db.Name + "-backup-tls" }

// DataVolumeName is the volumeClaimTemplate of a Database's StatefulSet that holds each
// server's data (and the volume its Pods mount).
const DataVolumeName = "data"

// DataClaimName is the name of db's data claim of ordinal: "data-<name>-<ordinal>", as the
// StatefulSet controller names the claims of the volumeClaimTemplate DataVolumeName.
func DataClaimName(db *examplev1.Database, ordinal int32) string {
	return DataVolumeName + "-" + StatefulSetName(db) + "-" + strconv.FormatInt(int64(ordinal), 10)
}

// DataClaimOrdinal is the ordinal of the data claim named claimName of db, and false when
// the name is not "data-<name>-<ordinal>" (DataClaimName).
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
	rest, ok := strings.CutPrefix(claimName, DataVolumeName+"-")
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

// HeadlessServiceName is the StatefulSet's governing Service's name: "<name>-headless".
func HeadlessServiceName(db *examplev1.Database) string { return db.Name + "-headless" }

// ClientServiceName is the client Service's name: "<name>".
func ClientServiceName(db *examplev1.Database) string { return db.Name }

// ReadServiceName is the read Service's name: "<name>-read".
func ReadServiceName(db *examplev1.Database) string { return db.Name + "-read" }

// StatefulSetName is the StatefulSet's name: "<name>".
func StatefulSetName(db *examplev1.Database) string { return db.Name }

// SelectorLabels select db's Pods: only labels that never change (the engine is immutable),
// and managed-by, so a chart using the same recommended name and instance labels never
// shares our Pods (nor our Services' endpoints).
func SelectorLabels(db *examplev1.Database) map[string]string {
	return map[string]string{NameLabel: string(db.Spec.Engine), InstanceLabel: db.Name, ManagedByLabel: ManagedByValue}
}

// DatabaseOfPod is the name of the Database whose Pod pod is, by its instance and managed-by
// labels, and false for a Pod that has none.
func DatabaseOfPod(pod metav1.Object) (string, bool) {
	l := pod.GetLabels()
	name, ok := l[InstanceLabel]
	return name, ok && name != "" && l[ManagedByLabel] == ManagedByValue
}

// PodSelector is status.selector: the Pods' label selector in string form.
func PodSelector(db *examplev1.Database) string {
	return labels.SelectorFromSet(SelectorLabels(db)).String()
}

// DefaultClusterDomain is the cluster's DNS domain unless the controller is told another:
// kubeadm's default (ClusterConfiguration networking.dnsDomain), the domain kubelets are
// given (--cluster-domain) and CoreDNS serves in most clusters.
const DefaultClusterDomain = "cluster.local"

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
