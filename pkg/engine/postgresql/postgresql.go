// Package postgresql is the PostgreSQL engine: how its servers run in a StatefulSet (the
// official postgres image), streaming replication through a physical slot per replica, and
// switchover by promotion (https://www.postgresql.org/docs/current/warm-standby.html).
package postgresql

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/netip"
	"strconv"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

func init() { engine.Register(Engine{}) }

// Engine is PostgreSQL's engine.Engine.
type Engine struct{}

var recipe = engine.Recipe{
	Engine:   examplev1.EnginePostgreSQL,
	PortName: "postgresql",
	Port:     5432,
	DataPath: "/var/lib/postgresql/data",
	// The image's POSTGRES_USER is the superuser; the controller creates the application
	// role, owner of the database (Replicator.SyncPrimary).
	Username:             "app",
	SuperuserUsername:    "postgres",
	SuperuserWasUsername: true,
	HasDatabase:          true,
	// A role with the REPLICATION attribute and nothing else
	// (https://www.postgresql.org/docs/current/warm-standby.html#STREAMING-REPLICATION-AUTHENTICATION).
	ReplicationUsername: "replicator",
	User:                engine.ImageUser,
	Group:               engine.ImageUser,
	Requests:            engine.Requests("250m", "256Mi"),
	Environment: func(secret string) []corev1.EnvVar {
		return []corev1.EnvVar{
			engine.SecretEnv("POSTGRES_USER", secret, names.SecretKeySuperuserUsername),
			engine.FileEnv("POSTGRES_PASSWORD_FILE", names.SecretKeySuperuserPassword),
			engine.SecretEnv("POSTGRES_DB", secret, names.SecretKeyDatabase),
			// A subdirectory: initdb refuses a mount point that holds lost+found. Set
			// explicitly, so every major uses the same path: the postgres 18 images
			// moved their default to /var/lib/postgresql/18/docker.
			{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
		}
	},
	// TCP on 127.0.0.1: the entrypoint's initialisation server listens on the Unix socket
	// only, so the probe cannot pass during initialisation. -U and -d name the initialised
	// user and database so the server logs no failed connection for each probe.
	ProbeExec: []string{"sh", "-c", `exec pg_isready -h 127.0.0.1 -p 5432 -U "$POSTGRES_USER" -d "$POSTGRES_DB"`},
	URIScheme: "postgresql",
}

// Recipe is PostgreSQL's recipe.
func (Engine) Recipe() engine.Recipe { return recipe }

// Replication ConfigMap keys.
const (
	setupKey   = "postgresql-setup.sh"
	restoreKey = "postgresql-restore.sh"
	hbaKey     = "pg_hba.conf"
)

var (
	//go:embed scripts/postgresql-setup.sh
	setupScript string
	//go:embed scripts/postgresql-restore.sh
	restoreScript string
	//go:embed scripts/pg_hba.conf
	hba         string
	hbaTemplate = template.Must(template.New(hbaKey).Parse(hba))
)

// ReplicationFiles are the setup script, the restore script (run by RestorePod's container)
// and pg_hba.conf (HBA).
func (Engine) ReplicationFiles(db *examplev1.Database, d engine.Desired) map[string]string {
	return map[string]string{setupKey: setupScript, restoreKey: restoreScript, hbaKey: HBA(db, d)}
}

// InitFiles is nil: the image initialises the superuser and the database itself.
func (Engine) InitFiles(engine.Desired) map[string]string { return nil }

// SlotName is the physical replication slot the primary keeps for the Pod named pod: the name
// with "-" turned into "_" (slot names take lower-case letters, digits and underscores:
// https://www.postgresql.org/docs/current/warm-standby.html#STREAMING-REPLICATION-SLOTS). The
// Pods' setup script derives the same name.
func SlotName(pod string) string { return strings.ReplaceAll(pod, "-", "_") }

// HBA is the pg_hba.conf of db's PostgreSQL Pods (scripts/pg_hba.conf): the Unix
// socket trusted; the superuser (d.Recipe.SuperuserUsername) refused but from
// d.SuperuserSources when there are any; the replication role (d.Recipe.ReplicationUsername)
// refused ordinary sessions but to RewindDatabase (pg_rewind's) from addresses whose DNS
// name (reverse lookup, then forward confirmation) ends with the namespace's Service domain
// (names.NamespaceDomain); everyone else by password (SCRAM-SHA-256) from anywhere; and
// replication connections for the replication role only, from the namespace's addresses.
//
// PostgreSQL matches a line's address before its database and user (check_hba,
// src/backend/libpq/hba.c), so every
// TCP connection that reaches the replication role's pg_rewind line, the clients' included,
// has its address looked up; the superuser's lines come first, so the controller's
// connections do not wait for it.
//
// The namespace, not the Database's own Services, bounds the replicas: the cluster DNS
// answers a Pod address's reverse lookup with one name per Service the Pod backs, in no set
// order (CoreDNS's kubernetes plugin), and the server reads one, so a suffix of the headless
// Service alone would refuse a replica at random once another Service selects the Pods.
// Whoever may run a Pod in the namespace may mount the credentials Secret anyway.
func HBA(db *examplev1.Database, d engine.Desired) string {
	var b strings.Builder
	err := hbaTemplate.Execute(&b, struct {
		ReplicationUser, RewindDatabase, Superuser, NamespaceDomain string
		SuperuserSources                                            []netip.Prefix
	}{d.Recipe.ReplicationUsername, RewindDatabase, d.Recipe.SuperuserUsername, names.NamespaceDomain(db, d.ClusterDomain), d.SuperuserSources})
	if err != nil {
		// The template is ours and its data plain strings and prefixes.
		panic("pg_hba.conf: " + err.Error())
	}
	return b.String()
}

// HBAAnnotation is on the Pod template of a PostgreSQL Database: the SHA-256 (hex) of its
// HBA. The server reads its hba_file when it starts, so rules that change (another
// --superuser-sources) make a new revision, which the controller rolls out.
const HBAAnnotation = "database.example.com/pg-hba-sha256"

// serverArgs are the server settings every PostgreSQL Pod runs with, primary or
// replica, on top of the image's defaults (wal_level replica, max_wal_senders 10,
// max_replication_slots 10, hot_standby on):
//   - hot_standby_feedback: a replica's queries hold back the primary's vacuum rather than be
//     cancelled by it;
//   - wal_log_hints: a primary that wrote past a replica's timeline can be rewound by
//     pg_rewind instead of cloned again;
//   - wal_keep_size: pg_wal keeps this much WAL past the last checkpoint, which pg_rewind
//     reads back on a former primary from the last checkpoint before the fork: the crash
//     recovery it runs first ends with a checkpoint that would otherwise remove the
//     segments it needs (measured: "could not find previous WAL record", then a full
//     clone); a former primary whose fork lies further back is cloned again;
//   - max_slot_wal_keep_size: a slot keeps at most this much WAL for a replica that is gone,
//     so a dead replica cannot fill the primary's volume; past it the replica must be cloned
//     again (delete its claim);
//   - hba_file: the ConfigMap's pg_hba.conf, the same on every Pod and on data directories
//     initialised before replication was set up.
//
// See https://www.postgresql.org/docs/current/runtime-config-replication.html.
//
// The settings but hba_file are also the setup script's SERVER_SETTINGS, for the crash
// recovery pg_rewind runs (postgres --single), which reads no command line of ours.
var serverArgs = func() []string {
	args := []string{"postgres"}
	for _, s := range serverSettings {
		args = append(args, "-c", s)
	}
	return append(args, "-c", "hba_file="+engine.ReplicationMountPath+"/"+hbaKey)
}()

// serverSettings are serverArgs' settings as name=value.
var serverSettings = []string{
	"hot_standby_feedback=on",
	"wal_log_hints=on",
	"wal_keep_size=512MB",
	"max_slot_wal_keep_size=1GB",
}

// PrimaryConnectTimeoutSeconds is the connect_timeout of a replica's primary_conninfo, in
// seconds: a connection to the primary that is not answered in time (the client Service
// without a ready endpoint during a switchover) is given up, and the WAL receiver tries
// again (every wal_retrieve_retry_interval, 5 s by default) instead of waiting for the
// kernel's SYN retries, about two minutes.
const PrimaryConnectTimeoutSeconds = 5

// RewindDatabase is the database pg_rewind's source connection, an ordinary session as the
// replication role, opens: the one pg_hba.conf admits that role to (HBA), which initdb
// creates in every cluster. The setup script names it too.
const RewindDatabase = "postgres"

// standbySource is how a standby of a Database reaches its primary: the client Service's
// fully qualified name (which routes to the Pod labelled primary), the engine port, the
// password file, and the connection timeout. The setup script's environment
// (ReplicationPod) and PrimaryConninfo are both made from it.
type standbySource struct {
	host, passfile string
	port           int32
	connectTimeout int
}

func sourceOf(db *examplev1.Database, d engine.Desired) standbySource {
	return standbySource{
		host:           engine.PrimaryHost(db, d.ClusterDomain),
		port:           d.Recipe.Port,
		passfile:       ReplicationPassfile(d),
		connectTimeout: PrimaryConnectTimeoutSeconds,
	}
}

// PrimaryConninfo is the primary_conninfo of db's standby pod streaming as user: the one the
// setup script writes (its follow), "host=<client Service> port=<port> user=<user>
// passfile=<ReplicationPassfile> application_name=<pod> connect_timeout=<seconds>", with no
// password (the password file holds it). The primary names the standby by its
// application_name in pg_stat_replication and synchronous_standby_names.
func PrimaryConninfo(db *examplev1.Database, d engine.Desired, user, pod string) string {
	src := sourceOf(db, d)
	return "host=" + src.host + " port=" + strconv.Itoa(int(src.port)) + " user=" + user + " passfile=" + src.passfile +
		" application_name=" + pod + " connect_timeout=" + strconv.Itoa(src.connectTimeout)
}

// ReplicationPassfile is where a PostgreSQL replica's WAL receiver reads the replication
// password: a libpq password file, named by primary_conninfo's passfile, on the data volume
// beside PGDATA (not in it: pg_basebackup does not copy it into a clone). The setup script
// writes it at each start of a replica and the controller when the password changes
// (Instances.WritePassfile).
func ReplicationPassfile(d engine.Desired) string { return d.Recipe.DataPath + "/replication.pgpass" }

// ReplicationPod adds to tmpl, the Pod template of a replicating Database, what replication
// needs: the setup init container (postgresql-setup.sh) on the database image with the data
// volume and the replication role's credentials, the replication ConfigMap mounted in both
// containers, the server settings, HBAAnnotation, and a preStop hook that asks the server
// for a fast shutdown (SIGINT to the postmaster, PID 1): it ends the sessions, and a
// primary's WAL senders send every record to the connected replicas before they exit, so a
// primary stopped for a switchover has given its replicas every committed transaction.
// (Kubernetes sends SIGTERM, a smart shutdown that waits for every client to disconnect.)
func (Engine) ReplicationPod(db *examplev1.Database, d engine.Desired, tmpl *corev1.PodTemplateSpec) {
	pod := &tmpl.Spec
	c := &pod.Containers[0]
	secret := names.SecretName(db)
	mount := engine.ReplicationMount()
	c.Args = append([]string(nil), serverArgs...)
	c.VolumeMounts = append(c.VolumeMounts, mount)
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "kill -INT 1"}},
	}}

	src := sourceOf(db, d)
	env := append([]corev1.EnvVar{}, c.Env...)
	env = append(env,
		engine.SecretEnv("REPLICATION_USER", secret, names.SecretKeyReplicationUsername),
		corev1.EnvVar{Name: "REPLICATION_PASSWORD_FILE", Value: engine.CredentialsFile(names.SecretKeyReplicationPassword)},
		corev1.EnvVar{Name: "PGPORT", Value: strconv.Itoa(int(src.port))},
		corev1.EnvVar{Name: "PRIMARY_HOST", Value: src.host},
		corev1.EnvVar{Name: "PODS_DOMAIN", Value: names.PodsDomain(db, d.ClusterDomain)},
		corev1.EnvVar{Name: "PRIMARY_CONNECT_TIMEOUT", Value: strconv.Itoa(src.connectTimeout)},
		corev1.EnvVar{Name: "REPLICATION_PASSFILE", Value: src.passfile},
		corev1.EnvVar{Name: "SERVER_SETTINGS", Value: strings.Join(serverSettings, " ")},
	)
	pod.InitContainers = []corev1.Container{{
		Name:    engine.SetupContainerName,
		Image:   c.Image,
		Command: []string{"bash", engine.ReplicationMountPath + "/" + setupKey},
		Env:     env,
		VolumeMounts: []corev1.VolumeMount{
			{Name: engine.DataVolumeName, MountPath: d.Recipe.DataPath},
			engine.CredentialsMount(),
			mount,
		},
		Resources:       c.Resources,
		SecurityContext: engine.ContainerSecurityContext(),
	}}
	pod.Volumes = []corev1.Volume{
		engine.CredentialsVolume(secret, append(d.Recipe.PasswordKeys(), names.SecretKeyReplicationPassword)...),
		engine.ReplicationConfigMapVolume(db),
	}
	sum := sha256.Sum256([]byte(HBA(db, d)))
	metav1.SetMetaDataAnnotation(&tmpl.ObjectMeta, HBAAnnotation, hex.EncodeToString(sum[:]))
}
