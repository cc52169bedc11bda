package postgresql_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/postgresql"
)

// backupDesired is a Database of replicas Pods backed up to an S3 store on port 9000 whose
// Secret, "store-keys", holds a CA when ca.
func backupDesired(t *testing.T, replicas int32, ca bool) (*examplev1.Database, engine.Desired) {
	t.Helper()
	db := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"},
		Spec: examplev1.DatabaseSpec{
			Engine: examplev1.EnginePostgreSQL, Version: "16", Replicas: ptr.To(replicas),
			Backup: &examplev1.DatabaseBackupPolicy{
				RetentionFullBackups: ptr.To[int32](4),
				S3: examplev1.DatabaseBackupS3{Endpoint: "https://s3.example.com:9000", Bucket: "backups", Prefix: "/pg",
					Region: "eu-west-1", SecretName: "store-keys"},
			},
		},
	}
	store, ok := engine.ResolveBackupStore(db, ca)
	require.True(t, ok)
	return db, engine.Desired{Recipe: postgresql.Engine{}.Recipe(), Image: "postgres:16", Replicas: replicas,
		ClusterDomain: "cluster.local", Backup: store}
}

// podTemplate is the Pod template of db before BackupPod: the database container with what
// ReplicationPod adds (its settings as arguments, its volumes).
func podTemplate(db *examplev1.Database, d engine.Desired) *corev1.PodTemplateSpec {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{d.Recipe.Container(d.Image, "my-database-credentials")}}}
	postgresql.Engine{}.ReplicationPod(db, d, tmpl)
	return tmpl
}

func envByName(env []corev1.EnvVar) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range env {
		m[e.Name] = e
	}
	return m
}

func storeKeyRef(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "store-keys"}, Key: key}}
}

// repository is the store's configuration both the database container (archive-push) and a
// backup Job's containers have.
func requireRepository(t *testing.T, env map[string]corev1.EnvVar, ca bool) {
	t.Helper()
	for k, v := range map[string]string{
		"PGBACKREST_STANZA":             "my-database",
		"PGBACKREST_REPO1_TYPE":         "s3",
		"PGBACKREST_REPO1_S3_ENDPOINT":  "s3.example.com",
		"PGBACKREST_REPO1_STORAGE_PORT": "9000",
		"PGBACKREST_REPO1_S3_BUCKET":    "backups",
		"PGBACKREST_REPO1_S3_REGION":    "eu-west-1",
		"PGBACKREST_REPO1_S3_URI_STYLE": "path",
		"PGBACKREST_REPO1_PATH":         "/pg/production",
		"PGBACKREST_LOG_LEVEL_FILE":     "off",
	} {
		require.Equal(t, corev1.EnvVar{Name: k, Value: v}, env[k], k)
	}
	require.Equal(t, corev1.EnvVar{Name: "PGBACKREST_REPO1_S3_KEY", ValueFrom: storeKeyRef("accessKeyId")}, env["PGBACKREST_REPO1_S3_KEY"])
	require.Equal(t, corev1.EnvVar{Name: "PGBACKREST_REPO1_S3_KEY_SECRET", ValueFrom: storeKeyRef("secretAccessKey")}, env["PGBACKREST_REPO1_S3_KEY_SECRET"])
	caFile, hasCA := env["PGBACKREST_REPO1_STORAGE_CA_FILE"]
	require.Equal(t, ca, hasCA, "the store's CA file only when its Secret has ca.crt")
	if ca {
		require.Equal(t, "/etc/backup-store/ca.crt", caFile.Value)
	}
}

var storeCAVolume = corev1.Volume{Name: "backup-store-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
	SecretName: "store-keys", Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}, DefaultMode: ptr.To[int32](0o444)}}}

var storeCAMount = corev1.VolumeMount{Name: "backup-store-ca", MountPath: "/etc/backup-store", ReadOnly: true}

// BackupPod archives every completed WAL segment with pgBackRest (its settings after the
// server's, the store's configuration in the server's environment, which archive_command
// inherits) and runs pgBackRest's TLS server beside the server, sharing its socket directory
// and reading its data volume, with the server certificate of the Database's backup Secret.
func TestBackupPodArchivesAndServesTheDataToTheBackupJobs(t *testing.T) {
	for _, ca := range []bool{false, true} {
		t.Run(map[bool]string{false: "system CAs", true: "store CA"}[ca], func(t *testing.T) {
			db, d := backupDesired(t, 3, ca)
			tmpl := podTemplate(db, d)
			before := tmpl.DeepCopy()
			postgresql.Engine{}.BackupPod(db, d, tmpl)
			pod := tmpl.Spec

			// The database container: the archive settings after the existing ones, exactly.
			server := pod.Containers[0]
			require.Equal(t, "database", server.Name)
			require.Equal(t, append(append([]string(nil), before.Spec.Containers[0].Args...),
				"-c", "archive_mode=on", "-c", "archive_command=pgbackrest archive-push %p", "-c", "archive_timeout=60"), server.Args)
			require.Equal(t, before.Spec.Containers[0].Env, server.Env[:len(before.Spec.Containers[0].Env)], "the server's environment is kept, in front")
			env := envByName(server.Env)
			requireRepository(t, env, ca)
			require.Equal(t, "/var/lib/postgresql/data/pgdata", env["PGBACKREST_PG1_PATH"].Value)
			run := corev1.VolumeMount{Name: "run", MountPath: "/var/run/postgresql"}
			wantMounts := append(append([]corev1.VolumeMount(nil), before.Spec.Containers[0].VolumeMounts...), run)
			if ca {
				wantMounts = append(wantMounts, storeCAMount)
			}
			require.Equal(t, wantMounts, server.VolumeMounts)

			// The backup container: pgBackRest's TLS server on 8432.
			require.Len(t, pod.Containers, 2)
			backup := pod.Containers[1]
			require.Equal(t, "backup", backup.Name)
			require.Equal(t, server.Image, backup.Image)
			require.Equal(t, []string{"pgbackrest", "server"}, backup.Command)
			require.Empty(t, backup.Args)
			require.Equal(t, []corev1.ContainerPort{{Name: "pgbackrest", ContainerPort: 8432, Protocol: corev1.ProtocolTCP}}, backup.Ports)
			require.Equal(t, int32(8432), postgresql.Engine{}.BackupPort())
			require.Equal(t, map[string]corev1.EnvVar{
				"PGBACKREST_TLS_SERVER_ADDRESS":   {Name: "PGBACKREST_TLS_SERVER_ADDRESS", Value: "0.0.0.0"},
				"PGBACKREST_TLS_SERVER_PORT":      {Name: "PGBACKREST_TLS_SERVER_PORT", Value: "8432"},
				"PGBACKREST_TLS_SERVER_CERT_FILE": {Name: "PGBACKREST_TLS_SERVER_CERT_FILE", Value: "/etc/backup-tls/tls.crt"},
				"PGBACKREST_TLS_SERVER_KEY_FILE":  {Name: "PGBACKREST_TLS_SERVER_KEY_FILE", Value: "/etc/backup-tls/tls.key"},
				"PGBACKREST_TLS_SERVER_CA_FILE":   {Name: "PGBACKREST_TLS_SERVER_CA_FILE", Value: "/etc/backup-tls/ca.crt"},
				"PGBACKREST_TLS_SERVER_AUTH":      {Name: "PGBACKREST_TLS_SERVER_AUTH", Value: "backup=my-database"},
				"PGBACKREST_PG1_PATH":             {Name: "PGBACKREST_PG1_PATH", Value: "/var/lib/postgresql/data/pgdata"},
				"PGBACKREST_PG1_SOCKET_PATH":      {Name: "PGBACKREST_PG1_SOCKET_PATH", Value: "/var/run/postgresql"},
				"PGBACKREST_PG1_PORT":             {Name: "PGBACKREST_PG1_PORT", Value: "5432"},
				"PGBACKREST_LOG_LEVEL_FILE":       {Name: "PGBACKREST_LOG_LEVEL_FILE", Value: "off"},
			}, envByName(backup.Env))
			require.Len(t, backup.Env, 10, "no variable twice")
			require.Equal(t, []corev1.VolumeMount{
				{Name: "data", MountPath: "/var/lib/postgresql/data"},
				run,
				{Name: "backup-tls", MountPath: "/etc/backup-tls", ReadOnly: true},
			}, backup.VolumeMounts)
			require.Equal(t, engine.ContainerSecurityContext(), backup.SecurityContext)
			require.NotEmpty(t, backup.Resources.Requests)

			// The volumes: the server's, then the socket directory, the backup server's
			// certificate and key (not the client's), and the store's CA when it has one.
			want := append(append([]corev1.Volume(nil), before.Spec.Volumes...),
				corev1.Volume{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				corev1.Volume{Name: "backup-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "my-database-backup-tls", DefaultMode: ptr.To[int32](0o440),
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}, {Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}}}}},
			)
			if ca {
				want = append(want, storeCAVolume)
			}
			require.Equal(t, want, pod.Volumes)
			require.Equal(t, before.Spec.InitContainers, pod.InitContainers, "the setup is unchanged")
		})
	}
}

// BackupPod appends the archive settings to a copy of the server's arguments: an array the
// template shares (spare capacity of its arguments) is not written into.
func TestBackupPodDoesNotWriteIntoTheServersArguments(t *testing.T) {
	db, d := backupDesired(t, 1, false)
	tmpl := podTemplate(db, d)
	n := len(tmpl.Spec.Containers[0].Args)
	args := append(make([]string, 0, n+10), tmpl.Spec.Containers[0].Args...)
	tmpl.Spec.Containers[0].Args = args
	postgresql.Engine{}.BackupPod(db, d, tmpl)
	require.Len(t, tmpl.Spec.Containers[0].Args, n+6)
	require.Equal(t, make([]string, 10), args[n:cap(args)], "the spare capacity is untouched")
}

// A backup Job's Pod is pgBackRest as the repository host: stanza-create, then a full backup
// of whichever Pod is the primary, each Pod a pg<n> host reached by its stable name through
// pgBackRest's TLS server, with the client certificate; restricted, no API token.
func TestBackupJobBacksUpThePrimaryThroughEachPodsTLSServer(t *testing.T) {
	for _, ca := range []bool{false, true} {
		t.Run(map[bool]string{false: "system CAs", true: "store CA"}[ca], func(t *testing.T) {
			db, d := backupDesired(t, 3, ca)
			pod := postgresql.Engine{}.BackupJob(db, d)

			require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
			require.Equal(t, ptr.To(false), pod.AutomountServiceAccountToken)
			require.Equal(t, ptr.To(false), pod.EnableServiceLinks)
			require.Equal(t, d.Recipe.PodSecurityContext(), pod.SecurityContext)
			require.True(t, *pod.SecurityContext.RunAsNonRoot)
			require.Len(t, pod.InitContainers, 1)
			require.Len(t, pod.Containers, 1)
			stanza, backup := pod.InitContainers[0], pod.Containers[0]
			require.Equal(t, "stanza-create", stanza.Name)
			require.Equal(t, []string{"pgbackrest", "stanza-create"}, stanza.Command)
			require.Equal(t, "backup", backup.Name)
			require.Equal(t, []string{"bash", "-c"}, backup.Command[:2], "the backup, then its report (TestBackupJobReportsTheFirstRecoverableTime)")

			mounts := []corev1.VolumeMount{{Name: "backup-tls", MountPath: "/etc/backup-tls", ReadOnly: true}}
			if ca {
				mounts = append(mounts, storeCAMount)
			}
			for _, c := range []corev1.Container{stanza, backup} {
				require.Equal(t, "postgres:16", c.Image, c.Name)
				require.Empty(t, c.Args, c.Name)
				require.Equal(t, engine.ContainerSecurityContext(), c.SecurityContext, c.Name)
				require.Equal(t, mounts, c.VolumeMounts, c.Name)
				require.Equal(t, backup.Env, c.Env, "both containers are configured alike")
			}

			env := envByName(backup.Env)
			requireRepository(t, env, ca)
			require.Equal(t, "4", env["PGBACKREST_REPO1_RETENTION_FULL"].Value, "spec.backup.retentionFullBackups")
			require.Equal(t, "y", env["PGBACKREST_START_FAST"].Value)
			for i, pod := range []string{"my-database-0", "my-database-1", "my-database-2"} {
				pg := "PGBACKREST_PG" + string(rune('1'+i)) + "_"
				for k, v := range map[string]string{
					"HOST":           pod + ".my-database-headless.production.svc.cluster.local",
					"HOST_TYPE":      "tls",
					"HOST_PORT":      "8432",
					"HOST_CA_FILE":   "/etc/backup-tls/ca.crt",
					"HOST_CERT_FILE": "/etc/backup-tls/client.crt",
					"HOST_KEY_FILE":  "/etc/backup-tls/client.key",
					"PATH":           "/var/lib/postgresql/data/pgdata",
					"SOCKET_PATH":    "/var/run/postgresql",
					"PORT":           "5432",
				} {
					require.Equal(t, v, env[pg+k].Value, pg+k)
				}
			}
			require.NotContains(t, env, "PGBACKREST_PG4_HOST", "one group per replica")
			require.Len(t, backup.Env, len(env), "no variable twice")

			// The client's certificate and key, not the server's.
			want := []corev1.Volume{{Name: "backup-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "my-database-backup-tls", DefaultMode: ptr.To[int32](0o440),
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}, {Key: "client.crt", Path: "client.crt"}, {Key: "client.key", Path: "client.key"}}}}}}
			if ca {
				want = append(want, storeCAVolume)
			}
			require.Equal(t, want, pod.Volumes)
		})
	}
}

// One pg<n> group per replica: a Database of one Pod lists only it.
func TestBackupJobOfOneReplicaListsOnePod(t *testing.T) {
	db, d := backupDesired(t, 1, false)
	env := envByName(postgresql.Engine{}.BackupJob(db, d).Containers[0].Env)
	require.Equal(t, "my-database-0.my-database-headless.production.svc.cluster.local", env["PGBACKREST_PG1_HOST"].Value)
	require.NotContains(t, env, "PGBACKREST_PG2_HOST")
}

// RestorePod puts the restore script first among the init containers, with the database
// container's environment and mounts (the socket's excepted) and the source, its database
// and the target time in UTC, fractions kept; its failure's last log lines are its
// termination message. The script comes with the replication ConfigMap.
func TestRestorePod(t *testing.T) {
	db, d := backupDesired(t, 2, true)
	db.Spec.Restore = &examplev1.DatabaseRestore{Database: "old-ledger", PointInTime: "2026-12-05T05:59:30.25+01:00"}
	tmpl := podTemplate(db, d)
	postgresql.Engine{}.BackupPod(db, d, tmpl)
	postgresql.Engine{}.RestorePod(db, d, tmpl)

	init := tmpl.Spec.InitContainers
	require.Len(t, init, 2)
	restore, server := init[0], tmpl.Spec.Containers[0]
	require.Equal(t, "restore", restore.Name)
	require.Equal(t, "setup", init[1].Name)
	require.Equal(t, []string{"bash", "/etc/database/postgresql-restore.sh"}, restore.Command)
	require.Equal(t, server.Image, restore.Image)
	require.Equal(t, corev1.TerminationMessageFallbackToLogsOnError, restore.TerminationMessagePolicy)
	require.Equal(t, engine.ContainerSecurityContext(), restore.SecurityContext)
	env := envByName(restore.Env)
	require.Equal(t, "old-ledger", env["RESTORE_STANZA"].Value)
	require.Equal(t, "old_ledger", env["RESTORE_DATABASE"].Value)
	require.Equal(t, "2026-12-05 04:59:30.25+00", env["RESTORE_TARGET_TIME"].Value)
	for _, e := range server.Env {
		require.Equal(t, e, env[e.Name], "the server's %s", e.Name)
	}
	requireRepository(t, env, true)
	var mounts []string
	for _, m := range restore.VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	require.Equal(t, []string{"data", "credentials", "replication", "backup-store-ca"}, mounts)

	// Without a time: the end of the archive.
	db.Spec.Restore.PointInTime = ""
	tmpl = podTemplate(db, d)
	postgresql.Engine{}.BackupPod(db, d, tmpl)
	postgresql.Engine{}.RestorePod(db, d, tmpl)
	require.Equal(t, "", envByName(tmpl.Spec.InitContainers[0].Env)["RESTORE_TARGET_TIME"].Value)

	files := postgresql.Engine{}.ReplicationFiles(db, d)
	require.Contains(t, files["postgresql-restore.sh"], "pgbackrest --stanza=\"${RESTORE_STANZA}\"")
}

// infoJSON is what pgBackRest 2.45's info --output=json prints for a stanza with two full
// backups, the oldest ending at 1764892805 (2025-12-05T00:00:05Z).
const infoJSON = `[{"archive":[{"database":{"id":1,"repo-key":1},"id":"15-1","max":"000000010000000000000009","min":"000000010000000000000003"}],` +
	`"backup":[{"archive":{"start":"000000010000000000000003","stop":"000000010000000000000003"},"backrest":{"format":5,"version":"2.45"},` +
	`"database":{"id":1,"repo-key":1},"error":false,"info":{"delta":23488000,"repository":{"delta":3011000,"size":3011000},"size":23488000},` +
	`"label":"20251205-000000F","link":null,"lsn":{"start":"0/3000028","stop":"0/3000100"},"prior":null,"reference":null,` +
	`"timestamp":{"start":1764892800,"stop":1764892805},"type":"full"},` +
	`{"archive":{"start":"000000010000000000000008","stop":"000000010000000000000008"},"backrest":{"format":5,"version":"2.45"},` +
	`"database":{"id":1,"repo-key":1},"error":false,"info":{"delta":23490000,"repository":{"delta":3012000,"size":3012000},"size":23490000},` +
	`"label":"20251206-000000F","link":null,"lsn":{"start":"0/8000028","stop":"0/8000100"},"prior":null,"reference":null,` +
	`"timestamp":{"start":1764979200,"stop":1764979206},"type":"full"}],` +
	`"cipher":"none","db":[{"id":1,"repo-key":1,"system-id":7580000000000000001,"version":"15"}],"name":"my-database",` +
	`"repo":[{"cipher":"none","key":1,"status":{"code":0,"message":"ok"}}],"status":{"code":0,"lock":{"backup":{"held":false}},"message":"ok"}}]`

// TestBackupJobReportsTheFirstRecoverableTime runs the backup container's script with a
// fake pgbackrest on PATH, its termination message written to a file of the test's: after
// the backup, the second after the end of the oldest backup info lists, as
// engine.ParseBackupReport reads it; nothing when the backup fails (and the script fails) or info lists none.
func TestBackupJobReportsTheFirstRecoverableTime(t *testing.T) {
	db, d := backupDesired(t, 1, false)
	command := postgresql.Engine{}.BackupJob(db, d).Containers[0].Command
	require.Len(t, command, 3)
	for name, tc := range map[string]struct {
		fail, info string
		report     string
	}{
		"two backups":          {info: infoJSON, report: "firstRecoverableTime=1764892806\n"},
		"the backup fails":     {fail: "1", info: infoJSON},
		"info lists no backup": {info: `[{"archive":[],"backup":[],"cipher":"none","db":[],"name":"my-database","status":{"code":2,"message":"no valid backups"}}]`},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			fake := `#!/bin/bash
echo "pgbackrest $*" >>"${CALLS_LOG}"
case $1 in
backup) [[ -z ${BACKUP_FAIL} ]] ;;
info) printf '%s\n' "${INFO}" ;;
esac
`
			require.NoError(t, os.WriteFile(filepath.Join(dir, "pgbackrest"), []byte(fake), 0o755))
			message := filepath.Join(dir, "termination-log")
			script := strings.ReplaceAll(command[2], "/dev/termination-log", message)
			require.NotEqual(t, command[2], script, "the script writes the termination message")
			cmd := exec.Command(command[0], command[1], script)
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "CALLS_LOG="+filepath.Join(dir, "calls"),
				"BACKUP_FAIL="+tc.fail, "INFO="+tc.info)
			out, err := cmd.CombinedOutput()
			calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
			got, _ := os.ReadFile(message)
			if tc.fail != "" {
				require.Error(t, err, "%s", out)
				require.Equal(t, "pgbackrest backup --type=full\n", string(calls), "no report of a backup that failed")
				require.Empty(t, got)
				return
			}
			require.NoError(t, err, "%s", out)
			require.Equal(t, "pgbackrest backup --type=full\npgbackrest info --output=json\n", string(calls))
			require.Equal(t, tc.report, string(got))
			if tc.report != "" {
				require.Equal(t, int64(1764892806), engine.ParseBackupReport(string(got)).FirstRecoverableTime.Unix(), "the second after the oldest backup's end")
			}
		})
	}
}
