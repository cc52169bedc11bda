// Package mysql is the MySQL engine: how its servers run in a StatefulSet (the official
// mysql image), GTID replication with auto-positioning, replicas cloned by the CLONE plugin,
// and switchover by promotion (https://dev.mysql.com/doc/refman/8.4/en/replication-gtids.html).
package mysql

import (
	_ "embed"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

func init() { engine.Register(Engine{}) }

// Engine is MySQL's engine.Engine.
type Engine struct{}

var recipe = engine.Recipe{
	Engine:   examplev1.EngineMySQL,
	PortName: "mysql",
	Port:     3306,
	DataPath: "/var/lib/mysql",
	// MYSQL_USER may not be root: the entrypoint refuses it. It creates that user with
	// ALL PRIVILEGES on MYSQL_DATABASE only.
	Username:              "admin",
	SuperuserUsername:     "root",
	ApplicationUserAtInit: true,
	HasDatabase:           true,
	// An account with REPLICATION SLAVE and BACKUP_ADMIN (the CLONE plugin's donor
	// privilege) and nothing else.
	ReplicationUsername: "replicator",
	User:                engine.ImageUser,
	Group:               engine.ImageUser,
	Requests:            engine.Requests("250m", "512Mi"),
	Environment: func(secret string) []corev1.EnvVar {
		return []corev1.EnvVar{
			engine.FileEnv("MYSQL_ROOT_PASSWORD_FILE", names.SecretKeySuperuserPassword),
			engine.SecretEnv("MYSQL_USER", secret, names.SecretKeyUsername),
			engine.FileEnv("MYSQL_PASSWORD_FILE", names.SecretKeyPassword),
			engine.SecretEnv("MYSQL_DATABASE", secret, names.SecretKeyDatabase),
		}
	},
	// mysqladmin ping exits 0 whenever the server answers, even "access denied"; over TCP on
	// 127.0.0.1, where the entrypoint's initialisation server (--skip-networking) does not
	// listen.
	ProbeExec: []string{"mysqladmin", "ping", "-h", "127.0.0.1", "-P", "3306", "--silent"},
	URIScheme: "mysql",
}

// Recipe is MySQL's recipe.
func (Engine) Recipe() engine.Recipe { return recipe }

const (
	// setupKey is the setup script's key in the replication ConfigMap.
	setupKey = "mysql-setup.sh"
	// configVolume is the emptyDir the setup script writes the server's replication
	// settings to, mounted at configPath in the server container: the official image's
	// /etc/my.cnf includes every .cnf file there.
	configVolume = "mysql-config"
	configPath   = "/etc/mysql/conf.d"
)

//go:embed scripts/mysql-setup.sh
var setupScript string

// ReplicationFiles is the setup script.
func (Engine) ReplicationFiles(*examplev1.Database, engine.Desired) map[string]string {
	return map[string]string{setupKey: setupScript}
}

// InitFiles is nil: the image creates the application user (MYSQL_USER) itself.
func (Engine) InitFiles(engine.Desired) map[string]string { return nil }

// ServerIDBase is added to a MySQL Pod's ordinal to make its server-id, unique among the
// Database's servers (replication requires it) and never 0, which refuses replication.
const ServerIDBase = 100

// ReplicationHost is the host part of the MySQL replication account: any Pod of the
// Database's namespace (names.NamespaceDomain), "%.<namespace>.svc.<domain>", a host name
// pattern the server matches against the client's name (reverse lookup, then forward
// confirmation: https://dev.mysql.com/doc/refman/8.4/en/host-cache.html), which the setup
// script's settings keep on (skip-name-resolve OFF) and never cache (host_cache_size 0: an
// address a Pod of the namespace had may be another's later).
func ReplicationHost(db *examplev1.Database, d engine.Desired) string {
	return "%." + names.NamespaceDomain(db, d.ClusterDomain)
}

// SuperuserHosts are the host parts of root's accounts besides root@localhost: one per
// range of d.SuperuserSources, an IPv4 address for a single one ("10.245.0.1"), else the
// address and netmask ("10.244.0.0/255.255.0.0"), an IPv6 address as it is (MySQL takes no
// netmask for IPv6; the controller's flag accepts no wider IPv6 range); "%" (any host)
// without sources. See https://dev.mysql.com/doc/refman/8.4/en/account-names.html.
func SuperuserHosts(d engine.Desired) []string {
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

// ReplicationPod adds to tmpl, the Pod template of a replicating MySQL Database, what
// replication needs: the setup init container (mysql-setup.sh) on the database image with
// the data volume, the replication user's credentials and the configVolume it writes
// the server's settings to (server-id from the ordinal, GTIDs, the binary log, the CLONE
// plugin, the semi-synchronous replication plugins with the replica side enabled,
// super-read-only on every Pod with data, the primary's too, host name resolution for the
// replication account's host, ReplicationHost), mounted at configPath in the server
// container, and the replication ConfigMap; with SuperuserSources, MYSQL_ROOT_HOST.
// The server is the image's entrypoint with its default command; SIGTERM is mysqld's normal
// shutdown.
func (Engine) ReplicationPod(db *examplev1.Database, d engine.Desired, tmpl *corev1.PodTemplateSpec) {
	pod := &tmpl.Spec
	c := &pod.Containers[0]
	secret := names.SecretName(db)
	config := corev1.VolumeMount{Name: configVolume, MountPath: configPath}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: configVolume, MountPath: configPath, ReadOnly: true})
	if len(d.SuperuserSources) > 0 {
		// The image's entrypoint makes root@<MYSQL_ROOT_HOST> when it initialises the data
		// directory ('%' without); the controller makes root's other accounts.
		c.Env = append(c.Env, corev1.EnvVar{Name: "MYSQL_ROOT_HOST", Value: SuperuserHosts(d)[0]})
	}
	pod.InitContainers = []corev1.Container{{
		Name:    engine.SetupContainerName,
		Image:   c.Image,
		Command: []string{"bash", engine.ReplicationMountPath + "/" + setupKey},
		Env: []corev1.EnvVar{
			{Name: "DATADIR", Value: d.Recipe.DataPath},
			{Name: "MYSQL_CONFIG_DIR", Value: configPath},
			{Name: "MYSQL_PORT", Value: strconv.Itoa(int(d.Recipe.Port))},
			{Name: "SERVER_ID_BASE", Value: strconv.Itoa(ServerIDBase)},
			{Name: "PODS_DOMAIN", Value: names.PodsDomain(db, d.ClusterDomain)},
			engine.SecretEnv("REPLICATION_USER", secret, names.SecretKeyReplicationUsername),
			{Name: "REPLICATION_PASSWORD_FILE", Value: engine.CredentialsFile(names.SecretKeyReplicationPassword)},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: engine.DataVolumeName, MountPath: d.Recipe.DataPath},
			engine.CredentialsMount(),
			engine.ReplicationMount(),
			config,
		},
		Resources:       c.Resources,
		SecurityContext: engine.ContainerSecurityContext(),
	}}
	pod.Volumes = []corev1.Volume{
		// The server container's password files (MYSQL_ROOT_PASSWORD_FILE and
		// MYSQL_PASSWORD_FILE), and the setup's REPLICATION_PASSWORD_FILE.
		engine.CredentialsVolume(secret, append(d.Recipe.PasswordKeys(), names.SecretKeyReplicationPassword)...),
		engine.ReplicationConfigMapVolume(db),
		{Name: configVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}
