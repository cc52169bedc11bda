package engine

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// Keys of the replication ConfigMap and where the Pods mount it.
const (
	// ConfigMapKeyPrimary holds the name of the Pod that is, or is being made, the primary.
	// The setup script reads it when a Pod starts: a Pod that is not named there starts as a
	// replica.
	ConfigMapKeyPrimary = "primary"
	// ConfigMapKeyRestored is present once a Database created with spec.restore was
	// restored: its restore init container restores nothing again, even onto an empty
	// data volume, which then starts as any new Database's.
	ConfigMapKeyRestored = "restored"
	// ReplicationVolumeName is the Pod volume of the replication ConfigMap, mounted
	// read-only at ReplicationMountPath (ReplicationMount).
	ReplicationVolumeName = "replication"
	ReplicationMountPath  = "/etc/database"

	// SetupContainerName is the init container that prepares a Pod's data directory.
	SetupContainerName = "setup"
	// RestoreContainerName is the init container of an engine's Backups.RestorePod, whose
	// state the controller reports in the Restored condition.
	RestoreContainerName = "restore"
)

// ReplicationConfigMapName is the ConfigMap "<name>-replication": the primary's Pod name
// (ConfigMapKeyPrimary) and the engine's ReplicationFiles.
func ReplicationConfigMapName(db *examplev1.Database) string { return db.Name + "-replication" }

// ReplicationMount mounts ReplicationVolumeName read-only at ReplicationMountPath.
func ReplicationMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: ReplicationVolumeName, MountPath: ReplicationMountPath, ReadOnly: true}
}

// ReplicationConfigMapVolume is the volume ReplicationVolumeName of the replication
// ConfigMap, its files mode 0444: the server user reads the scripts, which bash runs.
func ReplicationConfigMapVolume(db *examplev1.Database) corev1.Volume {
	return corev1.Volume{Name: ReplicationVolumeName, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ReplicationConfigMapName(db)},
			DefaultMode:          ptr.To[int32](0o444),
		},
	}}
}

// PodName is the name of db's Pod of ordinal: "<name>-<ordinal>", as the StatefulSet
// controller names them.
func PodName(db *examplev1.Database, ordinal int32) string {
	return example.PodName(names.StatefulSetName(db), ordinal)
}

// PodOrdinal is the ordinal of db's Pod named pod, and false for any other name: the rule
// the API server validates spec.primary and status.primary by.
func PodOrdinal(db *examplev1.Database, pod string) (int32, bool) {
	return example.PodOrdinal(names.StatefulSetName(db), pod)
}

// PrimaryHost is the name replicas reach the primary by: the client Service's DNS name
// (names.ServiceHost in domain), which routes to the Pod labelled primary, so a replica
// follows a switchover without being set up again.
func PrimaryHost(db *examplev1.Database, domain string) string {
	return names.ServiceHost(db, domain, names.ClientServiceName(db))
}
