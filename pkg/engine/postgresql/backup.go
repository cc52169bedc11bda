package postgresql

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// Backups are pgBackRest's (https://pgbackrest.org/user-guide.html), which Debian packages
// in the images: the server archives each WAL segment to the store as it is completed
// (archive_command "pgbackrest archive-push"), and a backup Job, pgBackRest's repository
// host, reads the data directory of the primary through pgBackRest's TLS server beside
// each server (pg-host-type=tls), then expires what the retention no longer keeps. Every
// Database is a stanza named after it in the namespace's repository
// (engine.BackupStore.Path), which stanza-create, run before each backup, makes once.

// BackupPort is the TCP port of pgBackRest's TLS server in each Pod (pgBackRest's
// tls-server-port default).
const BackupPort = 8432

// BackupContainerName is the container of pgBackRest's TLS server in each Pod, and the
// container of a backup Job.
const BackupContainerName = "backup"

// StanzaCreateContainerName is the backup Job's init container that makes the stanza.
const StanzaCreateContainerName = "stanza-create"

// socketPath is the image's socket directory, engine.BackupSocketVolumeName's mount in the
// database and backup containers: the TLS server's pgBackRest reaches the server through
// its Unix socket (pg-socket-path).
const socketPath = "/var/run/postgresql"

// pgdata is PGDATA (recipe.Environment).
const pgdata = "/var/lib/postgresql/data/pgdata"

// ArchiveTimeoutSeconds is archive_timeout: a WAL segment is archived at the latest this
// many seconds after its first change, so a quiet Database's last changes reach the store
// within a minute (https://www.postgresql.org/docs/current/runtime-config-wal.html).
const ArchiveTimeoutSeconds = 60

// archiveArgs are the server settings of continuous archiving: archive_mode (read at start,
// hence a restart), the command PostgreSQL runs for each completed segment (%p its path),
// and archive_timeout. A replica archives nothing (archive_mode on, not always); once
// promoted, it archives its new timeline.
var archiveArgs = []string{
	"-c", "archive_mode=on",
	"-c", "archive_command=pgbackrest archive-push %p",
	"-c", "archive_timeout=" + strconv.Itoa(ArchiveTimeoutSeconds),
}

// BackupPort is BackupPort.
func (Engine) BackupPort() int32 { return BackupPort }

// repositoryEnv is pgBackRest's configuration of the store as environment variables
// (PGBACKREST_<OPTION>, https://pgbackrest.org/command.html#introduction): the stanza, an S3
// repository with path-style requests, its keys from the store's Secret, its CA when the
// Secret has one, and no log file (pgBackRest logs to its standard error).
func repositoryEnv(db *examplev1.Database, store *engine.BackupStore) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "PGBACKREST_STANZA", Value: db.Name},
		{Name: "PGBACKREST_REPO1_TYPE", Value: "s3"},
		{Name: "PGBACKREST_REPO1_S3_ENDPOINT", Value: store.Host},
		{Name: "PGBACKREST_REPO1_STORAGE_PORT", Value: strconv.Itoa(int(store.Port))},
		{Name: "PGBACKREST_REPO1_S3_BUCKET", Value: store.Bucket},
		{Name: "PGBACKREST_REPO1_S3_REGION", Value: store.Region},
		{Name: "PGBACKREST_REPO1_S3_URI_STYLE", Value: "path"},
		{Name: "PGBACKREST_REPO1_PATH", Value: store.Path},
		engine.SecretEnv("PGBACKREST_REPO1_S3_KEY", store.SecretName, examplev1.BackupSecretKeyAccessKeyID),
		engine.SecretEnv("PGBACKREST_REPO1_S3_KEY_SECRET", store.SecretName, examplev1.BackupSecretKeySecretAccessKey),
	}
	if store.CA {
		env = append(env, corev1.EnvVar{Name: "PGBACKREST_REPO1_STORAGE_CA_FILE", Value: engine.BackupStoreCAFile})
	}
	return append(env, corev1.EnvVar{Name: "PGBACKREST_LOG_LEVEL_FILE", Value: "off"})
}

// BackupPod adds to tmpl continuous archiving (archiveArgs, with the repository's
// configuration in the database container's environment, which archive_command inherits)
// and the container BackupContainerName: pgBackRest's TLS server on BackupPort, with the
// server certificate of names.BackupTLSSecretName, admitting the client certificate of
// engine.BackupClientCommonName to this Database's stanza only, reaching the server through
// the shared socket directory and reading the data volume.
func (Engine) BackupPod(db *examplev1.Database, d engine.Desired, tmpl *corev1.PodTemplateSpec) {
	store := d.Backup
	pod := &tmpl.Spec
	c := &pod.Containers[0]
	c.Args = append(append([]string(nil), c.Args...), archiveArgs...)
	c.Env = append(append(append([]corev1.EnvVar(nil), c.Env...), repositoryEnv(db, store)...),
		corev1.EnvVar{Name: "PGBACKREST_PG1_PATH", Value: pgdata})
	socket := corev1.VolumeMount{Name: engine.BackupSocketVolumeName, MountPath: socketPath}
	c.VolumeMounts = append(append(c.VolumeMounts, socket), engine.BackupStoreMounts(store)...)

	pod.Containers = append(pod.Containers, corev1.Container{
		Name:    BackupContainerName,
		Image:   c.Image,
		Command: []string{"pgbackrest", "server"},
		Ports:   []corev1.ContainerPort{{Name: "pgbackrest", ContainerPort: BackupPort, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{
			{Name: "PGBACKREST_TLS_SERVER_ADDRESS", Value: "0.0.0.0"},
			{Name: "PGBACKREST_TLS_SERVER_PORT", Value: strconv.Itoa(BackupPort)},
			{Name: "PGBACKREST_TLS_SERVER_CERT_FILE", Value: engine.BackupTLSFile(engine.BackupTLSKeyServerCert)},
			{Name: "PGBACKREST_TLS_SERVER_KEY_FILE", Value: engine.BackupTLSFile(engine.BackupTLSKeyServerKey)},
			{Name: "PGBACKREST_TLS_SERVER_CA_FILE", Value: engine.BackupTLSFile(engine.BackupTLSKeyCA)},
			{Name: "PGBACKREST_TLS_SERVER_AUTH", Value: engine.BackupClientCommonName + "=" + db.Name},
			{Name: "PGBACKREST_PG1_PATH", Value: pgdata},
			{Name: "PGBACKREST_PG1_SOCKET_PATH", Value: socketPath},
			{Name: "PGBACKREST_PG1_PORT", Value: strconv.Itoa(int(d.Recipe.Port))},
			{Name: "PGBACKREST_LOG_LEVEL_FILE", Value: "off"},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: engine.DataVolumeName, MountPath: d.Recipe.DataPath},
			socket,
			{Name: engine.BackupTLSVolumeName, MountPath: engine.BackupTLSPath, ReadOnly: true},
		},
		Resources:       corev1.ResourceRequirements{Requests: engine.Requests("10m", "32Mi")},
		SecurityContext: engine.ContainerSecurityContext(),
	})
	pod.Volumes = append(pod.Volumes,
		corev1.Volume{Name: engine.BackupSocketVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		engine.BackupTLSVolume(db, engine.BackupTLSKeyCA, engine.BackupTLSKeyServerCert, engine.BackupTLSKeyServerKey),
	)
	pod.Volumes = append(pod.Volumes, engine.BackupStoreVolumes(store)...)
}

// backupScript is the command of a backup Job's container BackupContainerName, bash's: a
// full backup (backup --type=full), then the Job's report (engine.BackupReport) from
// pgBackRest's info on the stanza: the end of the oldest backup the store keeps, once the
// backup expired those beyond the retention, is the first time a restore can reach. info
// lists a stanza's backups oldest first, and in its JSON a backup's one number named "stop"
// is its timestamp's, in seconds since the epoch (those of its archive and lsn are
// strings) (https://pgbackrest.org/command.html#command-info). It is cut to the second, so
// the window starts the second after it: a target at the cut second itself may come before
// the backup's consistent point, which recovery refuses. A report that cannot be read
// leaves the message empty; the backup still succeeded. No quote or tab in it: the policy
// that bounds the Jobs holds it as a CEL string.
const backupScript = "set -o errexit\n" +
	"pgbackrest backup --type=full\n" +
	"if [[ $(pgbackrest info --output=json) =~ .stop.:([0-9]+) ]]; then\n" +
	"  echo " + engine.BackupReportFirstRecoverableTime + "=$((BASH_REMATCH[1] + 1)) >/dev/termination-log\n" +
	"fi\n"

// BackupJob is a Pod that runs pgBackRest as the repository host: stanza-create (which
// does nothing once the stanza exists and matches the server), then a full backup
// (backup --type=full, start-fast: a checkpoint at once) of whichever of db's Pods is the
// primary, each Pod listed as pg<n>-host through its stable name and pgBackRest's TLS
// server, verified by the Database's CA and presenting the client certificate. pgBackRest
// expires, after the backup, the full backups beyond the retention and the WAL only they
// need. Every backup is full, so each expires on its own. The container's termination
// message is the Job's report (backupScript).
func (Engine) BackupJob(db *examplev1.Database, d engine.Desired) corev1.PodSpec {
	store := d.Backup
	env := append(repositoryEnv(db, store),
		corev1.EnvVar{Name: "PGBACKREST_REPO1_RETENTION_FULL", Value: strconv.Itoa(int(store.RetentionFullBackups))},
		corev1.EnvVar{Name: "PGBACKREST_START_FAST", Value: "y"},
		corev1.EnvVar{Name: "PGBACKREST_LOG_LEVEL_CONSOLE", Value: "info"},
	)
	for ordinal := int32(0); ordinal < d.Replicas; ordinal++ {
		pg := "PGBACKREST_PG" + strconv.Itoa(int(ordinal)+1) + "_"
		env = append(env,
			corev1.EnvVar{Name: pg + "HOST", Value: names.PodHost(db, d.ClusterDomain, engine.PodName(db, ordinal))},
			corev1.EnvVar{Name: pg + "HOST_TYPE", Value: "tls"},
			corev1.EnvVar{Name: pg + "HOST_PORT", Value: strconv.Itoa(BackupPort)},
			corev1.EnvVar{Name: pg + "HOST_CA_FILE", Value: engine.BackupTLSFile(engine.BackupTLSKeyCA)},
			corev1.EnvVar{Name: pg + "HOST_CERT_FILE", Value: engine.BackupTLSFile(engine.BackupTLSKeyClientCert)},
			corev1.EnvVar{Name: pg + "HOST_KEY_FILE", Value: engine.BackupTLSFile(engine.BackupTLSKeyClientKey)},
			corev1.EnvVar{Name: pg + "PATH", Value: pgdata},
			corev1.EnvVar{Name: pg + "SOCKET_PATH", Value: socketPath},
			corev1.EnvVar{Name: pg + "PORT", Value: strconv.Itoa(int(d.Recipe.Port))},
		)
	}
	mounts := append([]corev1.VolumeMount{{Name: engine.BackupTLSVolumeName, MountPath: engine.BackupTLSPath, ReadOnly: true}},
		engine.BackupStoreMounts(store)...)
	container := func(name string, command ...string) corev1.Container {
		return corev1.Container{
			Name:            name,
			Image:           d.Image,
			Command:         command,
			Env:             env,
			VolumeMounts:    mounts,
			Resources:       corev1.ResourceRequirements{Requests: engine.Requests("100m", "64Mi")},
			SecurityContext: engine.ContainerSecurityContext(),
		}
	}
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		InitContainers:               []corev1.Container{container(StanzaCreateContainerName, "pgbackrest", "stanza-create")},
		Containers:                   []corev1.Container{container(BackupContainerName, "bash", "-c", backupScript)},
		Volumes:                      append([]corev1.Volume{engine.BackupTLSVolume(db, engine.BackupTLSKeyCA, engine.BackupTLSKeyClientCert, engine.BackupTLSKeyClientKey)}, engine.BackupStoreVolumes(store)...),
		SecurityContext:              d.Recipe.PodSecurityContext(),
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
	}
}

// RestorePod adds to tmpl the init container engine.RestoreContainerName, first of the init
// containers: postgresql-restore.sh from the replication ConfigMap, which on the primary with
// an empty data directory restores the stanza of spec.restore.database from d.Backup's
// store up to spec.restore.pointInTime (the end of the archive when unset), recovers it, and
// gives it this Database's superuser password and database name. The API server validated
// pointInTime (RFC 3339). It runs with the database
// container's environment (credentials, PGDATA, the repository of BackupPod, which must come
// first) and mounts, and its failure's last log lines are its termination message, which
// the controller reports.
func (Engine) RestorePod(db *examplev1.Database, d engine.Desired, tmpl *corev1.PodTemplateSpec) {
	pod := &tmpl.Spec
	c := &pod.Containers[0]
	// pgBackRest's --target of --type=time is a timestamp PostgreSQL reads
	// (recovery_target_time): the time in UTC, to the microsecond it keeps.
	target := ""
	if t, err := time.Parse(time.RFC3339Nano, db.Spec.Restore.PointInTime); err == nil {
		target = t.UTC().Format("2006-01-02 15:04:05.999999") + "+00"
	}
	env := append(append([]corev1.EnvVar(nil), c.Env...),
		corev1.EnvVar{Name: "RESTORE_STANZA", Value: db.Spec.Restore.Database},
		corev1.EnvVar{Name: "RESTORE_DATABASE", Value: d.Recipe.DatabaseName(db.Spec.Restore.Database)},
		corev1.EnvVar{Name: "RESTORE_TARGET_TIME", Value: target},
	)
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.Name != engine.BackupSocketVolumeName {
			mounts = append(mounts, m)
		}
	}
	restore := corev1.Container{
		Name:                     engine.RestoreContainerName,
		Image:                    c.Image,
		Command:                  []string{"bash", engine.ReplicationMountPath + "/" + restoreKey},
		Env:                      env,
		VolumeMounts:             mounts,
		Resources:                c.Resources,
		SecurityContext:          engine.ContainerSecurityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	pod.InitContainers = append([]corev1.Container{restore}, pod.InitContainers...)
}
