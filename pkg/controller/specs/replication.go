package specs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// RoleLabel is on every Pod of a replicating Database once the controller knows its part:
// RolePrimary on the one that takes writes, RoleReplica on those that follow it. The client
// Service selects the primary by it, the read Service the replicas; a Pod the controller has
// not labelled (new, or the old primary during a switchover) is in neither.
const (
	RoleLabel   = "database.example.com/role"
	RolePrimary = "primary"
	RoleReplica = "replica"
)

// ReplicationConfigMapName is the ConfigMap "<name>-replication": the primary's Pod name
// (ConfigMapKeyPrimary) and the engine's replication files (engine.Engine.ReplicationFiles).
func ReplicationConfigMapName(db *examplev1.Database) string {
	return engine.ReplicationConfigMapName(db)
}

// PodName is the name of db's Pod of ordinal: "<name>-<ordinal>", as the StatefulSet
// controller names them.
func PodName(db *examplev1.Database, ordinal int32) string { return engine.PodName(db, ordinal) }

// PodOrdinal is the ordinal of db's Pod named pod, and false for any other name: the rule
// the API server validates spec.primary and status.primary by.
func PodOrdinal(db *examplev1.Database, pod string) (int32, bool) { return engine.PodOrdinal(db, pod) }

const (
	// ConfigMapKeyPrimary is the replication ConfigMap's key naming the Pod that is, or is
	// being made, the primary (engine.ConfigMapKeyPrimary).
	ConfigMapKeyPrimary = engine.ConfigMapKeyPrimary
	// SetupContainerName is the init container that prepares a Pod's data directory.
	SetupContainerName = engine.SetupContainerName
)

// ReplicationConfigMap is "<name>-replication" naming primary (a Pod name) the primary, with
// the engine's files (engine.Engine.ReplicationFiles), and, once a Database created with
// spec.restore has been restored (its Restored condition True), engine.ConfigMapKeyRestored.
func ReplicationConfigMap(db *examplev1.Database, d Desired, primary string) *corev1.ConfigMap {
	data := map[string]string{}
	for k, v := range d.Engine().ReplicationFiles(db, d) {
		data[k] = v
	}
	data[ConfigMapKeyPrimary] = primary
	if db.Spec.Restore != nil && meta.IsStatusConditionTrue(db.Status.Conditions, examplev1.ConditionRestored) {
		data[engine.ConfigMapKeyRestored] = "true"
	}
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(db, ReplicationConfigMapName(db), ChildLabels(db)),
		Data:       data,
	}
}

// ReplicationPrimary is the Pod cm names primary, "" when it names none.
func ReplicationPrimary(cm *corev1.ConfigMap) string { return cm.Data[ConfigMapKeyPrimary] }

// SyncReplicationConfigMap copies our labels and the scripts from want into have; the primary
// it names is the controller's to change, through a switchover, and is kept.
func SyncReplicationConfigMap(have, want *corev1.ConfigMap) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	primary := ReplicationPrimary(have)
	if primary == "" {
		primary = ReplicationPrimary(want)
	}
	have.Data = map[string]string{}
	for k, v := range want.Data {
		have.Data[k] = v
	}
	have.Data[ConfigMapKeyPrimary] = primary
}

// ReadService is "<name>-read", the ClusterIP Service that routes to the ready replicas
// (RoleLabel RoleReplica): reads that may lag the primary by the replication lag. It exists
// while replicas > 1 on an engine that replicates.
func ReadService(db *examplev1.Database, d Desired) *corev1.Service {
	selector := names.SelectorLabels(db)
	selector[RoleLabel] = RoleReplica
	return clusterIPService(db, d, names.ReadServiceName(db), selector)
}
