package engine

import (
	"bufio"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// BackupStore is spec.backup resolved: the S3-compatible store a Database's changes are
// archived to and its backups taken into.
type BackupStore struct {
	// Host is the endpoint's DNS name, Port its port (443 when the endpoint names none).
	Host string
	Port int32
	// Bucket and Region are spec.backup.s3's (Region defaulted).
	Bucket, Region string
	// Path is the repository's path in the bucket, "<prefix>/<namespace>": the Databases of
	// one namespace share it, each under its own name.
	Path string
	// SecretName is spec.backup.s3.secretName; CA says it holds examplev1.BackupSecretKeyCA,
	// the CAs to verify the store by (without it, the image's).
	SecretName string
	CA         bool
	// RetentionFullBackups is how many full backups the store keeps.
	RetentionFullBackups int32
	// Schedule is spec.backup.schedule; "" for none.
	Schedule string
}

// ResolveBackupStore is db's spec.backup as a BackupStore, with ca saying whether its
// Secret holds examplev1.BackupSecretKeyCA; false when spec.backup is unset. The API server
// validated the endpoint ("https://<host>[:<port>]").
func ResolveBackupStore(db *examplev1.Database, ca bool) (*BackupStore, bool) {
	b := db.Spec.Backup
	if b == nil {
		return nil, false
	}
	store := &BackupStore{
		Port:                 443,
		Bucket:               b.S3.Bucket,
		Region:               b.S3.Region,
		Path:                 path.Join("/", b.S3.Prefix, db.Namespace),
		SecretName:           b.S3.SecretName,
		CA:                   ca,
		RetentionFullBackups: ptr.Deref(b.RetentionFullBackups, examplev1.DefaultRetentionFullBackups),
		Schedule:             b.Schedule,
	}
	if store.Region == "" {
		store.Region = "us-east-1"
	}
	if u, err := url.Parse(b.S3.Endpoint); err == nil {
		store.Host = u.Hostname()
		if p, err := strconv.ParseInt(u.Port(), 10, 32); err == nil {
			store.Port = int32(p)
		}
	}
	return store, true
}

// Volumes and paths of a Database's backups, in its Pods and backup Jobs.
const (
	// BackupTLSVolumeName is the Secret names.BackupTLSSecretName, mounted read-only at
	// BackupTLSPath: the backup server's certificate in the Pods, the client's in the Jobs.
	BackupTLSVolumeName = "backup-tls"
	BackupTLSPath       = "/etc/backup-tls"
	// BackupStoreCAVolumeName is the key examplev1.BackupSecretKeyCA of the store's Secret,
	// mounted read-only at BackupStoreCAPath when the Secret has it (BackupStore.CA).
	BackupStoreCAVolumeName = "backup-store-ca"
	BackupStoreCAPath       = "/etc/backup-store"
	// BackupSocketVolumeName is an emptyDir an engine's BackupPod may share between the
	// server and the backup server, for the server's Unix socket.
	BackupSocketVolumeName = "run"
)

// Keys of the Secret names.BackupTLSSecretName: the CA both sides verify the other by, the
// server's certificate and key (for every Pod's stable names) and the client's (the Jobs').
const (
	BackupTLSKeyCA         = "ca.crt"
	BackupTLSKeyServerCert = "tls.crt"
	BackupTLSKeyServerKey  = "tls.key"
	BackupTLSKeyClientCert = "client.crt"
	BackupTLSKeyClientKey  = "client.key"
)

// BackupTLSFile is the file of key of the Secret names.BackupTLSSecretName.
func BackupTLSFile(key string) string { return BackupTLSPath + "/" + key }

// BackupStoreCAFile is the store's CA file where BackupStoreCAVolume mounts it.
const BackupStoreCAFile = BackupStoreCAPath + "/" + examplev1.BackupSecretKeyCA

// BackupClientCommonName is the common name of the backup Jobs' client certificate, which
// the backup server authorises.
const BackupClientCommonName = "backup"

// BackupTLSVolume is BackupTLSVolumeName with the keys given, mode 0440 (root and the Pod's
// fsGroup).
func BackupTLSVolume(db *examplev1.Database, keys ...string) corev1.Volume {
	items := make([]corev1.KeyToPath, len(keys))
	for i, k := range keys {
		items[i] = corev1.KeyToPath{Key: k, Path: k}
	}
	return corev1.Volume{Name: BackupTLSVolumeName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: names.BackupTLSSecretName(db), Items: items, DefaultMode: ptr.To[int32](0o440)},
	}}
}

// BackupStoreVolumes are the volumes the store needs: BackupStoreCAVolumeName when its
// Secret holds a CA, none otherwise.
func BackupStoreVolumes(store *BackupStore) []corev1.Volume {
	if !store.CA {
		return nil
	}
	return []corev1.Volume{{Name: BackupStoreCAVolumeName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{
			SecretName:  store.SecretName,
			Items:       []corev1.KeyToPath{{Key: examplev1.BackupSecretKeyCA, Path: examplev1.BackupSecretKeyCA}},
			DefaultMode: ptr.To[int32](0o444),
		},
	}}}
}

// BackupStoreMounts mount BackupStoreVolumes.
func BackupStoreMounts(store *BackupStore) []corev1.VolumeMount {
	if !store.CA {
		return nil
	}
	return []corev1.VolumeMount{{Name: BackupStoreCAVolumeName, MountPath: BackupStoreCAPath, ReadOnly: true}}
}

// A backup Job's report: the container of an engine's BackupJob that takes the backup ends,
// when it succeeded, with a termination message (the file /dev/termination-log, at most
// 4096 bytes, which the kubelet puts on the Pod's status) of "<key>=<value>" lines saying
// what the store holds once the backup and its expiry are done. The controller reads it
// into status.backup (ParseBackupReport).
const (
	// BackupReportFirstRecoverableTime is the first time a restore can reach, in whole
	// seconds since the Unix epoch: just after the end of the oldest backup the store
	// keeps.
	BackupReportFirstRecoverableTime = "firstRecoverableTime"
)

// BackupReport is a backup Job's report.
type BackupReport struct {
	// FirstRecoverableTime is BackupReportFirstRecoverableTime; zero when the report does
	// not say.
	FirstRecoverableTime time.Time
}

// maxReportSeconds is 9999-12-31T23:59:59Z: the last time RFC 3339, and so a
// metav1.Time in JSON, can write.
const maxReportSeconds = 253402300799

// ParseBackupReport reads a backup Job's termination message: unknown keys, lines without
// "=" and values that do not parse (a time must be after the epoch and at most
// maxReportSeconds) are skipped, so a message of anything else is an empty report.
func ParseBackupReport(message string) BackupReport {
	var r BackupReport
	lines := bufio.NewScanner(strings.NewReader(message))
	for lines.Scan() {
		key, value, ok := strings.Cut(strings.TrimSpace(lines.Text()), "=")
		if !ok || key != BackupReportFirstRecoverableTime {
			continue
		}
		if secs, err := strconv.ParseInt(value, 10, 64); err == nil && secs > 0 && secs <= maxReportSeconds {
			r.FirstRecoverableTime = time.Unix(secs, 0).UTC()
		}
	}
	return r
}
