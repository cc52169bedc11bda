// Package engine holds what the database controller and the API server know about each
// engine: its port, data directory, credentials environment, probes, file-system group and
// resource requests. The facts come from the official images' entrypoints (docker-library
// postgres, mysql and mongo); the image itself comes from pkg/catalog.
package engine

import (
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// ContainerName is the name of the database container in every engine's Pod.
const ContainerName = "database"

// DataVolumeName is the name of the volumeClaimTemplate holding the data, hence of each
// replica's PersistentVolumeClaim "data-<statefulset>-<ordinal>".
const DataVolumeName = "data"

// Recipe is how one engine runs in a StatefulSet.
type Recipe struct {
	// Engine is the spec.engine this recipe is for.
	Engine examplev1.Engine
	// PortName names the container and Service port (an IANA service name).
	PortName string
	// Port is the TCP port the server listens on.
	Port int32
	// DataPath is where the data volume is mounted in the container.
	DataPath string
	// Username is the application user, names.SecretKeyUsername: the user clients connect as.
	Username string
	// SuperuserUsername is the engine's superuser, names.SecretKeySuperuserUsername.
	SuperuserUsername string
	// ApplicationUserAtInit says whether the application user is made when the image
	// initialises an empty data directory (MySQL's MYSQL_USER; MongoDB's by the controller's
	// initialisation script), with the password file of names.SecretKeyPassword. Otherwise the
	// controller creates it and keeps its password in step with the Secret's over SQL, as
	// the superuser (PostgreSQL).
	ApplicationUserAtInit bool
	// SuperuserWasUsername says whether, in a Secret written before the superuser keys,
	// names.SecretKeyUsername and names.SecretKeyPassword were the superuser's (PostgreSQL, MongoDB);
	// MySQL's were its application user's, with the same password as root.
	SuperuserWasUsername bool
	// HasDatabase says whether the Database has a named database (names.SecretKeyDatabase and the
	// URI's path), which the engine creates at initialisation (MongoDB on first write).
	HasDatabase bool
	// UsersPerDatabase says whether a user belongs to one database and authenticates
	// against it, named by the URI's authSource (MongoDB): the application user to the
	// Database's database, the superuser to admin. A URI for the superuser (a Secret written
	// before the application user, whose username is the superuser) names no database and
	// authSource=admin, as such Secrets always had it.
	UsersPerDatabase bool
	// User and Group are the uid and gid the image's server runs as (999:999 in all three
	// official images): the Pod runs as them (runAsUser, runAsGroup), never as root, and
	// Group is its fsGroup, so the server can write a freshly provisioned volume.
	User, Group int64
	// ReplicationUsername is the role replicas stream from the primary as; "" for an engine
	// whose replication the controller does not set up, whose replicas are independent
	// servers of which only the first is served.
	ReplicationUsername string
	// ReplicaSet says whether the replicas form a replica set the engine runs itself
	// (MongoDB): the members authenticate to each other with a shared key
	// (names.SecretKeyKeyFile), not a replication user, and elect their primary among them; the
	// controller initiates the set, keeps its members those of the StatefulSet, and gives
	// the Pod it wants primary the highest priority.
	ReplicaSet bool
	// Requests are the container's resource requests (no limits: an engine killed at a
	// memory limit loses in-flight transactions).
	Requests corev1.ResourceList
	// env returns the engine's environment; see Env.
	env func(secret string) []corev1.EnvVar
	// probe is the exec command shared by the startup, readiness and liveness probes;
	// readiness, when set, is the readiness probe's instead.
	probe, readiness []string
	// uriScheme is the connection URI's scheme.
	uriScheme string
}

// The variables the MongoDB initialisation script reads the application user from: its
// name, and the file holding its password (CredentialsFile of names.SecretKeyPassword).
const (
	MongoDBApplicationUsernameEnv     = "APPLICATION_USERNAME"
	MongoDBApplicationPasswordFileEnv = "APPLICATION_PASSWORD_FILE"
)

// mongoDBSuperuserDatabase is the database the official image's entrypoint creates its root
// user in.
const mongoDBSuperuserDatabase = "admin"

// Replicates reports whether the controller sets up replication for the engine: its
// replicas follow one primary, through a replication user (ReplicationUsername) or as a
// replica set (ReplicaSet).
func (r Recipe) Replicates() bool { return r.ReplicationUsername != "" || r.ReplicaSet }

// ValidKeyFile reports whether key is a keyfile mongod takes: 6 to 1024 characters of the
// base64 alphabet (A-Z, a-z, 0-9, +, /, =), whitespace aside
// (https://www.mongodb.com/docs/manual/core/security-internal-authentication/#keyfiles).
func ValidKeyFile(key []byte) bool {
	n := 0
	for _, c := range key {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/', c == '=':
			n++
		default:
			return false
		}
	}
	return 6 <= n && n <= 1024
}

// For returns the recipe of engine, and false for an engine it does not know.
func For(engine examplev1.Engine) (Recipe, bool) {
	r, ok := recipes[engine]
	return r, ok
}

// Env returns the container environment: the engine's user and database variables read from
// the Secret named secret (names.SecretKeySuperuserUsername, names.SecretKeyUsername for MySQL's
// application user, names.SecretKeyDatabase), its password variables as <VAR>_FILE naming
// CredentialsFile of the password keys, plus what the engine needs besides (PGDATA for
// PostgreSQL; for MongoDB the application user's variables of its initialisation script and
// POD_IP for its probe).
func (r Recipe) Env(secret string) []corev1.EnvVar { return r.env(secret) }

// Container returns the database container running image with the credentials of the Secret
// named secret: the engine port, Env, the data volume mounted at DataPath and
// CredentialsMount (the Pod needs CredentialsVolume of secret with PasswordKeys),
// Requests, Probes, and ContainerSecurityContext.
func (r Recipe) Container(image, secret string) corev1.Container {
	startup, readiness, liveness := r.Probes()
	return corev1.Container{
		Name:            ContainerName,
		Image:           image,
		SecurityContext: ContainerSecurityContext(),
		Ports:           []corev1.ContainerPort{{Name: r.PortName, ContainerPort: r.Port, Protocol: corev1.ProtocolTCP}},
		Env:             r.Env(secret),
		VolumeMounts:    []corev1.VolumeMount{{Name: DataVolumeName, MountPath: r.DataPath}, CredentialsMount()},
		Resources:       corev1.ResourceRequirements{Requests: r.Requests.DeepCopy()},
		StartupProbe:    startup,
		ReadinessProbe:  readiness,
		LivenessProbe:   liveness,
	}
}

// PodSecurityContext is the Pod-level half of what the Pod Security Standards' "restricted"
// profile requires (https://kubernetes.io/docs/concepts/security/pod-security-standards/):
// runAsNonRoot, as the image's server user and group (User, Group), the RuntimeDefault
// seccomp profile; and Group as fsGroup, applied to a volume only when its root does not
// already carry it (fsGroupChangePolicy OnRootMismatch), so a large volume is not walked at
// every start.
func (r Recipe) PodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(r.User),
		RunAsGroup:          ptr.To(r.Group),
		FSGroup:             ptr.To(r.Group),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is the container-level half of the "restricted" profile, for every
// container of a database Pod: no privilege escalation and every capability dropped. The
// official images' entrypoints need neither once they start as the server user: they only
// switch to it (gosu, setpriv) when they start as root.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// Probe timings, in seconds. The startup probe allows StartupProbeFailureThreshold ×
// ProbePeriodSeconds (10 minutes) for the entrypoint's initialisation and crash recovery
// before liveness takes over, so a slow first start is not killed.
const (
	ProbePeriodSeconds           = 10
	ProbeTimeoutSeconds          = 5
	StartupProbeFailureThreshold = 60
	ReadinessFailureThreshold    = 3
	LivenessFailureThreshold     = 6
)

// Probes returns the startup, readiness and liveness probes, running ProbeCommand but for
// the readiness probe, which runs ReadinessCommand. Every field the API server would default
// is set, so a StatefulSet read back compares equal.
func (r Recipe) Probes() (startup, readiness, liveness *corev1.Probe) {
	probe := func(failureThreshold int32, command []string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: command}},
			PeriodSeconds:    ProbePeriodSeconds,
			TimeoutSeconds:   ProbeTimeoutSeconds,
			SuccessThreshold: 1,
			FailureThreshold: failureThreshold,
		}
	}
	return probe(StartupProbeFailureThreshold, r.ProbeCommand()), probe(ReadinessFailureThreshold, r.ReadinessCommand()),
		probe(LivenessFailureThreshold, r.ProbeCommand())
}

// ProbeCommand returns the exec command of the startup, readiness and liveness probes. None
// can pass while the image's entrypoint initialises the data directory, because each
// entrypoint runs its initialisation server where the probe does not look: PostgreSQL's
// listens on the Unix socket only (the probe uses TCP on 127.0.0.1), MySQL's runs with
// --skip-networking (the probe uses TCP on 127.0.0.1), and MongoDB's binds 127.0.0.1 only
// (the probe connects to the Pod IP).
func (r Recipe) ProbeCommand() []string { return append([]string(nil), r.probe...) }

// ReadinessCommand returns the exec command of the readiness probe: ProbeCommand, or for a
// replica set one that passes only on a member that is PRIMARY or SECONDARY, so a member
// still joining the set (initial sync, STARTUP2) or cut off from it (RECOVERING) is not
// served.
func (r Recipe) ReadinessCommand() []string {
	if r.readiness == nil {
		return r.ProbeCommand()
	}
	return append([]string(nil), r.readiness...)
}

// DatabaseName returns the database created for a Database named name: the name with
// dashes turned into underscores ("my-database" → "my_database"), a name both PostgreSQL
// and MySQL take unquoted, and MongoDB as it is. It returns "" for an engine without one (HasDatabase false).
func (r Recipe) DatabaseName(name string) string {
	if !r.HasDatabase {
		return ""
	}
	return strings.ReplaceAll(name, "-", "_")
}

// URI returns the connection URI for user and password at host on the engine port, with
// database as its path when not empty; user and password are escaped as userinfo. Where
// users belong to a database (UsersPerDatabase), authSource names database, or admin when
// database is "".
func (r Recipe) URI(user, password, host, database string) string {
	return r.uri(user, password, host, database, url.Values{})
}

// ReadURI is URI at host, the read Service's name: on a replica set (ReplicaSet) it also asks
// for reads from a secondary while one is available (readPreference=secondaryPreferred,
// https://www.mongodb.com/docs/manual/core/read-preference/), since a MongoDB driver finds
// every member of the set from any one of them and reads from the primary unless told.
func (r Recipe) ReadURI(user, password, host, database string) string {
	query := url.Values{}
	if r.ReplicaSet {
		query.Set("readPreference", "secondaryPreferred")
	}
	return r.uri(user, password, host, database, query)
}

func (r Recipe) uri(user, password, host, database string, query url.Values) string {
	u := url.URL{
		Scheme: r.uriScheme,
		User:   url.UserPassword(user, password),
		Host:   host + ":" + strconv.Itoa(int(r.Port)),
		Path:   "/" + database,
	}
	if r.UsersPerDatabase {
		source := database
		if source == "" {
			source = mongoDBSuperuserDatabase
		}
		query.Set("authSource", source)
	}
	u.RawQuery = query.Encode()
	return u.String()
}

// CredentialsVolumeName is the Pod volume of the credentials Secret's passwords, mounted
// read-only at CredentialsPath in every container of a database Pod: the images read a
// password from the file a <VAR>_FILE variable names (their documented alternative to the
// variable itself), so no password is in the containers' environment.
const (
	CredentialsVolumeName = "credentials"
	CredentialsPath       = "/etc/database-credentials"
)

// PasswordKeys are the Secret's password keys the database container reads as files: the
// superuser's and, for an engine whose image creates the application user
// (ApplicationUserAtInit), the application user's.
func (r Recipe) PasswordKeys() []string {
	if r.ApplicationUserAtInit {
		return []string{names.SecretKeySuperuserPassword, names.SecretKeyPassword}
	}
	return []string{names.SecretKeySuperuserPassword}
}

// CredentialsFile is the file, under CredentialsPath, holding the Secret's key.
func CredentialsFile(key string) string { return CredentialsPath + "/" + key }

// CredentialsVolume is the volume CredentialsVolumeName: the keys of the Secret named secret,
// each as the file of its name, mode 0440: owned by root and by the Pod's fsGroup, the
// server's group, which alone may read them.
func CredentialsVolume(secret string, keys ...string) corev1.Volume {
	items := make([]corev1.KeyToPath, len(keys))
	for i, k := range keys {
		items[i] = corev1.KeyToPath{Key: k, Path: k}
	}
	return corev1.Volume{Name: CredentialsVolumeName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items, DefaultMode: ptr.To[int32](0o440)},
	}}
}

// CredentialsMount mounts CredentialsVolumeName read-only at CredentialsPath.
func CredentialsMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: CredentialsVolumeName, MountPath: CredentialsPath, ReadOnly: true}
}

// fileEnv is the variable name set to CredentialsFile(key).
func fileEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, Value: CredentialsFile(key)}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key},
	}}
}

// requests builds a ResourceList of cpu and memory.
func requests(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
	}
}

// imageUser is the uid and gid of the server user in the official postgres, mysql and mongo
// images (their Dockerfiles create it with a fixed id so volumes keep their owner across
// versions).
const imageUser = 999

var recipes = map[examplev1.Engine]Recipe{
	examplev1.EnginePostgreSQL: {
		Engine:   examplev1.EnginePostgreSQL,
		PortName: "postgresql",
		Port:     5432,
		DataPath: "/var/lib/postgresql/data",
		// The image's POSTGRES_USER is the superuser; the controller creates the application
		// role, owner of the database (replication.go's primary connection).
		Username:             "app",
		SuperuserUsername:    "postgres",
		SuperuserWasUsername: true,
		HasDatabase:          true,
		// A role with the REPLICATION attribute and nothing else
		// (https://www.postgresql.org/docs/current/warm-standby.html#STREAMING-REPLICATION-AUTHENTICATION).
		ReplicationUsername: "replicator",
		User:                imageUser,
		Group:               imageUser,
		Requests:            requests("250m", "256Mi"),
		env: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				secretEnv("POSTGRES_USER", secret, names.SecretKeySuperuserUsername),
				fileEnv("POSTGRES_PASSWORD_FILE", names.SecretKeySuperuserPassword),
				secretEnv("POSTGRES_DB", secret, names.SecretKeyDatabase),
				// A subdirectory: initdb refuses a mount point that holds lost+found. Set
				// explicitly, so every major uses the same path: the postgres 18 images
				// moved their default to /var/lib/postgresql/18/docker.
				{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
			}
		},
		// -U and -d name the initialised user and database so the server logs no
		// failed connection for each probe.
		probe:     []string{"sh", "-c", `exec pg_isready -h 127.0.0.1 -p 5432 -U "$POSTGRES_USER" -d "$POSTGRES_DB"`},
		uriScheme: "postgresql",
	},
	examplev1.EngineMySQL: {
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
		User:                imageUser,
		Group:               imageUser,
		Requests:            requests("250m", "512Mi"),
		env: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				fileEnv("MYSQL_ROOT_PASSWORD_FILE", names.SecretKeySuperuserPassword),
				secretEnv("MYSQL_USER", secret, names.SecretKeyUsername),
				fileEnv("MYSQL_PASSWORD_FILE", names.SecretKeyPassword),
				secretEnv("MYSQL_DATABASE", secret, names.SecretKeyDatabase),
			}
		},
		// mysqladmin ping exits 0 whenever the server answers, even "access denied".
		probe:     []string{"mysqladmin", "ping", "-h", "127.0.0.1", "-P", "3306", "--silent"},
		uriScheme: "mysql",
	},
	examplev1.EngineMongoDB: {
		Engine:   examplev1.EngineMongoDB,
		PortName: "mongodb",
		Port:     27017,
		DataPath: "/data/db",
		// MONGO_INITDB_ROOT_USERNAME is the superuser, a root user of the admin database. The
		// application user is made at initialisation by the controller's script (the
		// specs package's initialisation ConfigMap), which the entrypoint runs once, on an
		// empty data directory, as root against MONGO_INITDB_DATABASE: a user of the
		// Database's database with readWrite and dbAdmin there only.
		Username:              "app",
		SuperuserUsername:     "admin",
		SuperuserWasUsername:  true,
		ApplicationUserAtInit: true,
		HasDatabase:           true,
		UsersPerDatabase:      true,
		ReplicaSet:            true,
		User:                  imageUser,
		Group:                 imageUser,
		Requests:              requests("250m", "512Mi"),
		env: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				secretEnv("MONGO_INITDB_ROOT_USERNAME", secret, names.SecretKeySuperuserUsername),
				fileEnv("MONGO_INITDB_ROOT_PASSWORD_FILE", names.SecretKeySuperuserPassword),
				secretEnv("MONGO_INITDB_DATABASE", secret, names.SecretKeyDatabase),
				secretEnv(MongoDBApplicationUsernameEnv, secret, names.SecretKeyUsername),
				fileEnv(MongoDBApplicationPasswordFileEnv, names.SecretKeyPassword),
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
				}},
			}
		},
		// The entrypoint's initialisation mongod binds 127.0.0.1:27017, so a probe on
		// localhost would pass during init; the Pod IP is only served by the final server.
		probe: []string{"sh", "-c", `exec mongosh --host "$POD_IP" --port 27017 --quiet --eval "db.adminCommand('ping')"`},
		// hello needs no authentication; isWritablePrimary and secondary are false in every
		// other member state (https://www.mongodb.com/docs/manual/reference/command/hello/).
		readiness: []string{"sh", "-c", `exec mongosh --host "$POD_IP" --port 27017 --quiet --eval "const h = db.hello(); if (!h.isWritablePrimary && !h.secondary) { quit(1) }"`},
		uriScheme: "mongodb",
	},
}
