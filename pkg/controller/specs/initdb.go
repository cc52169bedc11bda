package specs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
)

// The initialisation ConfigMap "<name>-initdb" holds the scripts the image's entrypoint runs
// once, when it initialises an empty data directory (engine.Engine.InitFiles), from
// /docker-entrypoint-initdb.d, where the official images look for them.
const (
	initdbVolume    = "initdb"
	initdbMountPath = "/docker-entrypoint-initdb.d"
)

// InitConfigMapName is the initialisation ConfigMap's name: "<name>-initdb".
func InitConfigMapName(db *examplev1.Database) string { return db.Name + "-initdb" }

// HasInitConfigMap reports whether d's engine runs initialisation scripts of the controller
// (engine.Engine.InitFiles).
func HasInitConfigMap(d Desired) bool { return d.Engine().InitFiles(d) != nil }

// InitConfigMap is "<name>-initdb" with d's initialisation scripts, nil for an engine without
// any (HasInitConfigMap).
func InitConfigMap(db *examplev1.Database, d Desired) *corev1.ConfigMap {
	files := d.Engine().InitFiles(d)
	if files == nil {
		return nil
	}
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(db, InitConfigMapName(db), ChildLabels(db)),
		Data:       files,
	}
}

// SyncInitConfigMap copies our labels and the scripts from want into have.
func SyncInitConfigMap(have, want *corev1.ConfigMap) {
	have.Labels = MergeLabels(have.Labels, want.Labels)
	have.Data = map[string]string{}
	for k, v := range want.Data {
		have.Data[k] = v
	}
}

// initdbPod mounts the initialisation ConfigMap read-only (mode 0444: the server user reads
// it, no script needs to be executable) at the entrypoint's initialisation directory of the
// database container of pod.
func initdbPod(db *examplev1.Database, pod *corev1.PodSpec) {
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: initdbVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: InitConfigMapName(db)},
			DefaultMode:          ptr.To[int32](0o444),
		},
	}})
	for i := range pod.Containers {
		if pod.Containers[i].Name == engine.ContainerName {
			pod.Containers[i].VolumeMounts = append(pod.Containers[i].VolumeMounts,
				corev1.VolumeMount{Name: initdbVolume, MountPath: initdbMountPath, ReadOnly: true})
		}
	}
}
