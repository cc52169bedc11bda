package specs

import (
	_ "embed"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
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
// (ConfigMapKeyPrimary) and the engine's replication scripts.
func ReplicationConfigMapName(db *examplev1.Database) string { return db.Name + "-replication" }

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

// SlotName is the physical replication slot the primary keeps for the Pod named pod: the name
// with "-" turned into "_" (slot names take lower-case letters, digits and underscores:
// https://www.postgresql.org/docs/current/warm-standby.html#STREAMING-REPLICATION-SLOTS). The
// Pods' setup script derives the same name.
func SlotName(pod string) string { return strings.ReplaceAll(pod, "-", "_") }

// Keys of the replication ConfigMap and where the Pods mount it.
const (
	// ConfigMapKeyPrimary holds the name of the Pod that is, or is being made, the primary.
	// The setup script reads it when a Pod starts: a Pod that is not named there starts as a
	// standby.
	ConfigMapKeyPrimary = "primary"
	// replicationMountPath is where both containers mount the ConfigMap.
	replicationMountPath = "/etc/database"

	postgresqlSetupKey = "postgresql-setup.sh"
	postgresqlHBAKey   = "pg_hba.conf"
	mysqlSetupKey      = "mysql-setup.sh"
	mongodbSetupKey    = "mongodb-setup.sh"

	replicationVolume = "replication"
	// mysqlConfigVolume is the emptyDir the MySQL setup script writes the server's
	// replication settings to, mounted at mysqlConfigPath in the server container: the
	// official image's /etc/my.cnf includes every .cnf file there.
	mysqlConfigVolume = "mysql-config"
	mysqlConfigPath   = "/etc/mysql/conf.d"
	// mongodbKeyVolume is the emptyDir, in memory, the MongoDB setup script copies the
	// replica set's keyfile to, mounted at mongodbKeyPath in both containers.
	mongodbKeyVolume = "mongodb-key"
	mongodbKeyPath   = "/etc/mongodb-key"
	// MongoDBKeyFile is the keyfile the server reads (mongod --keyFile).
	MongoDBKeyFile = mongodbKeyPath + "/keyfile"

	// SetupContainerName is the init container that prepares a Pod's data directory.
	SetupContainerName = "setup"
)

var (
	//go:embed scripts/postgresql-setup.sh
	postgresqlSetup string
	//go:embed scripts/pg_hba.conf
	postgresqlHBA         string
	postgresqlHBATemplate = template.Must(template.New(postgresqlHBAKey).Parse(postgresqlHBA))
	//go:embed scripts/mysql-setup.sh
	mysqlSetup string
	//go:embed scripts/mongodb-setup.sh
	mongodbSetup string
)

// MySQLServerIDBase is added to a MySQL Pod's ordinal to make its server-id, unique among the
// Database's servers (replication requires it) and never 0, which refuses replication.
const MySQLServerIDBase = 100

// ReplicationConfigMap is "<name>-replication" naming primary (a Pod name) the primary, with
// the engine's files: the init container's setup script, and PostgreSQL's pg_hba.conf
// (PostgreSQLHBA).
func ReplicationConfigMap(db *examplev1.Database, d Desired, primary string) *corev1.ConfigMap {
	data := map[string]string{ConfigMapKeyPrimary: primary}
	switch db.Spec.Engine {
	case examplev1.EngineMySQL:
		data[mysqlSetupKey] = mysqlSetup
	case examplev1.EngineMongoDB:
		data[mongodbSetupKey] = mongodbSetup
	default:
		data[postgresqlSetupKey] = postgresqlSetup
		data[postgresqlHBAKey] = PostgreSQLHBA(db, d)
	}
	return &corev1.ConfigMap{
		ObjectMeta: objectMeta(db, ReplicationConfigMapName(db), ChildLabels(db)),
		Data:       data,
	}
}

// PostgreSQLHBA is the pg_hba.conf of db's PostgreSQL Pods (scripts/pg_hba.conf): the Unix
// socket trusted; the replication role (d.Recipe.ReplicationUsername) refused ordinary
// sessions; the superuser (d.Recipe.SuperuserUsername) refused but from d.SuperuserSources
// when there are any; everyone else by password (SCRAM-SHA-256) from anywhere; and
// replication connections for the replication role only, from addresses whose DNS name
// (reverse lookup, then forward confirmation) ends with the namespace's Service domain
// (names.NamespaceDomain).
//
// The namespace, not the Database's own Services, bounds the standbys: the cluster DNS
// answers a Pod address's reverse lookup with one name per Service the Pod backs, in no set
// order (CoreDNS's kubernetes plugin), and the server reads one, so a suffix of the headless
// Service alone would refuse a standby at random once another Service selects the Pods.
// Whoever may run a Pod in the namespace may mount the credentials Secret anyway.
func PostgreSQLHBA(db *examplev1.Database, d Desired) string {
	var b strings.Builder
	err := postgresqlHBATemplate.Execute(&b, struct {
		ReplicationUser, Superuser, NamespaceDomain string
		SuperuserSources                            []netip.Prefix
	}{d.Recipe.ReplicationUsername, d.Recipe.SuperuserUsername, names.NamespaceDomain(db, d.ClusterDomain), d.SuperuserSources})
	if err != nil {
		// The template is ours and its data plain strings and prefixes.
		panic("pg_hba.conf: " + err.Error())
	}
	return b.String()
}

// PostgreSQLHBAAnnotation is on the Pod template of a PostgreSQL Database: the SHA-256 (hex)
// of its PostgreSQLHBA. The server reads its hba_file when it starts, so rules that change
// (another --superuser-sources) make a new revision, which the controller rolls out.
const PostgreSQLHBAAnnotation = "database.example.com/pg-hba-sha256"

// MySQLReplicationHost is the host part of the MySQL replication account, by the rule of
// PostgreSQLHBA's replication line: "%.<namespace>.svc.<domain>", a host name pattern the
// server matches against the client's name (reverse lookup, then forward confirmation:
// https://dev.mysql.com/doc/refman/8.4/en/host-cache.html), which the setup script's
// settings keep on (skip-name-resolve OFF) and never cache (host_cache_size 0: an address
// a Pod of the namespace had may be another's later).
func MySQLReplicationHost(db *examplev1.Database, d Desired) string {
	return "%." + names.NamespaceDomain(db, d.ClusterDomain)
}

// MySQLSuperuserHosts are the host parts of root's accounts besides root@localhost: one per
// range of d.SuperuserSources, an IPv4 address for a single one ("10.245.0.1"), else the
// address and netmask ("10.244.0.0/255.255.0.0"), an IPv6 address as it is (MySQL takes no
// netmask for IPv6; the controller's flag accepts no wider IPv6 range); "%" (any host)
// without sources. See https://dev.mysql.com/doc/refman/8.4/en/account-names.html.
func MySQLSuperuserHosts(d Desired) []string {
	if len(d.SuperuserSources) == 0 {
		return []string{"%"}
	}
	var hosts []string
	for _, p := range d.SuperuserSources {
		addr := p.Masked().Addr()
		if !addr.Is4() || p.Bits() == 32 {
			hosts = append(hosts, addr.String())
			continue
		}
		hosts = append(hosts, addr.String()+"/"+net.IP(net.CIDRMask(p.Bits(), 32)).String())
	}
	return hosts
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

// postgresqlServerArgs are the server settings every PostgreSQL Pod runs with, primary or
// standby, on top of the image's defaults (wal_level replica, max_wal_senders 10,
// max_replication_slots 10, hot_standby on):
//   - hot_standby_feedback: a standby's queries hold back the primary's vacuum rather than be
//     cancelled by it;
//   - wal_log_hints: a primary that wrote past a standby's timeline can be rewound by
//     pg_rewind instead of cloned again;
//   - max_slot_wal_keep_size: a slot keeps at most this much WAL for a standby that is gone,
//     so a dead replica cannot fill the primary's volume; past it the standby must be cloned
//     again (delete its claim);
//   - hba_file: the ConfigMap's pg_hba.conf, the same on every Pod and on data directories
//     initialised before replication was set up.
//
// See https://www.postgresql.org/docs/current/runtime-config-replication.html.
var postgresqlServerArgs = []string{
	"postgres",
	"-c", "hot_standby_feedback=on",
	"-c", "wal_log_hints=on",
	"-c", "max_slot_wal_keep_size=1GB",
	"-c", "hba_file=" + replicationMountPath + "/" + postgresqlHBAKey,
}

// PrimaryHost is the name standbys reach the primary by: the client Service's DNS name
// (names.ServiceHost in domain), which routes to the Pod labelled primary, so a standby follows a
// switchover without being set up again.
func PrimaryHost(db *examplev1.Database, domain string) string {
	return names.ServiceHost(db, domain, names.ClientServiceName(db))
}

// PrimaryConnectTimeoutSeconds is the connect_timeout of a standby's primary_conninfo, in
// seconds: a connection to the primary that is not answered in time (the client Service
// without a ready endpoint during a switchover) is given up, and the WAL receiver tries
// again (every wal_retrieve_retry_interval, 5 s by default) instead of waiting for the
// kernel's SYN retries, about two minutes.
const PrimaryConnectTimeoutSeconds = 5

// ReplicationPassfile is where a PostgreSQL standby's WAL receiver reads the replication
// password: a libpq password file, named by primary_conninfo's passfile, on the data volume
// beside PGDATA (not in it: pg_basebackup does not copy it into a clone). The setup script
// writes it at each start of a standby and the controller when the password changes
// (postgres.Client.WritePassfile).
func ReplicationPassfile(d Desired) string { return d.Recipe.DataPath + "/replication.pgpass" }

// replicationPod adds to pod, the Pod template of a replicating Database, what replication
// needs: the setup init container (postgresql-setup.sh) on the database image with the data
// volume and the replication role's credentials, the replication ConfigMap mounted in both
// containers, the server settings, and a preStop hook that asks the server for a fast
// shutdown (SIGINT to the postmaster, PID 1): it ends the sessions, and a primary's WAL
// senders send every record to the connected standbys before they exit, so a primary stopped
// for a switchover has given its standbys every committed transaction. (Kubernetes sends
// SIGTERM, a smart shutdown that waits for every client to disconnect.)
func replicationPod(db *examplev1.Database, d Desired, pod *corev1.PodSpec) {
	switch d.Recipe.Engine {
	case examplev1.EngineMySQL:
		mysqlReplicationPod(db, d, pod)
		return
	case examplev1.EngineMongoDB:
		mongodbReplicationPod(db, d, pod)
		return
	}
	c := &pod.Containers[0]
	secret := names.SecretName(db)
	mount := corev1.VolumeMount{Name: replicationVolume, MountPath: replicationMountPath, ReadOnly: true}
	c.Args = append([]string(nil), postgresqlServerArgs...)
	c.VolumeMounts = append(c.VolumeMounts, mount)
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
		Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "kill -INT 1"}},
	}}

	env := append([]corev1.EnvVar{}, c.Env...)
	env = append(env,
		secretEnv("REPLICATION_USER", secret, names.SecretKeyReplicationUsername),
		corev1.EnvVar{Name: "REPLICATION_PASSWORD_FILE", Value: engine.CredentialsFile(names.SecretKeyReplicationPassword)},
		corev1.EnvVar{Name: "PGPORT", Value: strconv.Itoa(int(d.Recipe.Port))},
		corev1.EnvVar{Name: "PRIMARY_HOST", Value: PrimaryHost(db, d.ClusterDomain)},
		corev1.EnvVar{Name: "PRIMARY_CONNECT_TIMEOUT", Value: strconv.Itoa(PrimaryConnectTimeoutSeconds)},
		corev1.EnvVar{Name: "REPLICATION_PASSFILE", Value: ReplicationPassfile(d)},
	)
	pod.InitContainers = []corev1.Container{{
		Name:    SetupContainerName,
		Image:   c.Image,
		Command: []string{"bash", replicationMountPath + "/" + postgresqlSetupKey},
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
		replicationConfigMapVolume(db),
	}
}

// replicationConfigMapVolume is the volume replicationVolume of the replication ConfigMap, its
// files mode 0444: the server user reads the scripts, which bash runs.
func replicationConfigMapVolume(db *examplev1.Database) corev1.Volume {
	return corev1.Volume{Name: replicationVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ReplicationConfigMapName(db)},
			DefaultMode:          ptr.To[int32](0o444),
		},
	}}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key},
	}}
}

// mysqlReplicationPod adds to pod, the Pod template of a replicating MySQL Database, what
// replication needs: the setup init container (mysql-setup.sh) on the database image with
// the data volume, the replication user's credentials and the mysqlConfigVolume it writes
// the server's settings to (server-id from the ordinal, GTIDs, the binary log, the CLONE
// plugin, super-read-only on every Pod but the primary, host name resolution for the
// replication account's host, MySQLReplicationHost), mounted at mysqlConfigPath in the
// server container, and the replication ConfigMap; with SuperuserSources, MYSQL_ROOT_HOST.
// The server is the image's entrypoint with its default command; SIGTERM is mysqld's normal
// shutdown.
func mysqlReplicationPod(db *examplev1.Database, d Desired, pod *corev1.PodSpec) {
	c := &pod.Containers[0]
	secret := names.SecretName(db)
	mount := corev1.VolumeMount{Name: replicationVolume, MountPath: replicationMountPath, ReadOnly: true}
	config := corev1.VolumeMount{Name: mysqlConfigVolume, MountPath: mysqlConfigPath}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: mysqlConfigVolume, MountPath: mysqlConfigPath, ReadOnly: true})
	if len(d.SuperuserSources) > 0 {
		// The image's entrypoint makes root@<MYSQL_ROOT_HOST> when it initialises the data
		// directory ('%' without); the controller makes root's other accounts.
		c.Env = append(c.Env, corev1.EnvVar{Name: "MYSQL_ROOT_HOST", Value: MySQLSuperuserHosts(d)[0]})
	}
	pod.InitContainers = []corev1.Container{{
		Name:    SetupContainerName,
		Image:   c.Image,
		Command: []string{"bash", replicationMountPath + "/" + mysqlSetupKey},
		Env: []corev1.EnvVar{
			{Name: "DATADIR", Value: d.Recipe.DataPath},
			{Name: "MYSQL_CONFIG_DIR", Value: mysqlConfigPath},
			{Name: "MYSQL_PORT", Value: strconv.Itoa(int(d.Recipe.Port))},
			{Name: "SERVER_ID_BASE", Value: strconv.Itoa(MySQLServerIDBase)},
			{Name: "PODS_DOMAIN", Value: names.PodsDomain(db, d.ClusterDomain)},
			secretEnv("REPLICATION_USER", secret, names.SecretKeyReplicationUsername),
			{Name: "REPLICATION_PASSWORD_FILE", Value: engine.CredentialsFile(names.SecretKeyReplicationPassword)},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: engine.DataVolumeName, MountPath: d.Recipe.DataPath},
			engine.CredentialsMount(),
			mount,
			config,
		},
		Resources:       c.Resources,
		SecurityContext: engine.ContainerSecurityContext(),
	}}
	pod.Volumes = []corev1.Volume{
		// The server container's password files (MYSQL_ROOT_PASSWORD_FILE and
		// MYSQL_PASSWORD_FILE), and the setup's REPLICATION_PASSWORD_FILE.
		engine.CredentialsVolume(secret, append(d.Recipe.PasswordKeys(), names.SecretKeyReplicationPassword)...),
		replicationConfigMapVolume(db),
		{Name: mysqlConfigVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}

// ReplicaSetName is the name of a MongoDB Database's replica set (mongod --replSet, the
// configuration's _id): the Database's name.
func ReplicaSetName(db *examplev1.Database) string { return db.Name }

// mongodbReplicationPod adds to pod, the Pod template of a MongoDB Database, what its replica
// set needs: the setup init container (mongodb-setup.sh) on the database image, which copies
// the credentials Secret's keyfile to MongoDBKeyFile with the mode mongod requires, and the
// server's arguments: the image's entrypoint runs "mongod --replSet <name> --keyFile <file>"
// (it adds --bind_ip_all, and leaves both flags out of the server it initialises an empty
// data directory with, so the root user and the initialisation scripts are made on a
// standalone server first). The keyfile also turns authentication on, as --auth does.
// SIGTERM is mongod's clean shutdown, in which a primary first steps down
// (https://www.mongodb.com/docs/manual/reference/command/shutdown/).
func mongodbReplicationPod(db *examplev1.Database, d Desired, pod *corev1.PodSpec) {
	c := &pod.Containers[0]
	secret := names.SecretName(db)
	mount := corev1.VolumeMount{Name: replicationVolume, MountPath: replicationMountPath, ReadOnly: true}
	c.Args = []string{"mongod", "--replSet", ReplicaSetName(db), "--keyFile", MongoDBKeyFile}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: mongodbKeyVolume, MountPath: mongodbKeyPath, ReadOnly: true})
	pod.InitContainers = []corev1.Container{{
		Name:    SetupContainerName,
		Image:   c.Image,
		Command: []string{"bash", replicationMountPath + "/" + mongodbSetupKey},
		Env: []corev1.EnvVar{
			{Name: "KEYFILE_SOURCE", Value: engine.CredentialsFile(names.SecretKeyKeyFile)},
			{Name: "KEYFILE", Value: MongoDBKeyFile},
		},
		VolumeMounts: []corev1.VolumeMount{
			engine.CredentialsMount(),
			mount,
			{Name: mongodbKeyVolume, MountPath: mongodbKeyPath},
		},
		Resources:       c.Resources,
		SecurityContext: engine.ContainerSecurityContext(),
	}}
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == engine.CredentialsVolumeName {
			// The server container's password files, and the setup's keyfile.
			pod.Volumes[i] = engine.CredentialsVolume(secret, append(d.Recipe.PasswordKeys(), names.SecretKeyKeyFile)...)
		}
	}
	pod.Volumes = append(pod.Volumes,
		replicationConfigMapVolume(db),
		corev1.Volume{Name: mongodbKeyVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	)
}
