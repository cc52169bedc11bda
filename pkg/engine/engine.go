// Package engine is the boundary between the generic database controller and the engines:
// the Engine interface every engine package implements (pkg/engine/<engine>), the registry they register themselves in, keyed by spec.engine, and what an
// engine's Recipe says of how it runs in a StatefulSet: its port, data directory,
// credentials environment, probes, file-system group and resource requests. The API server
// reads the recipes too (the connection subresource); the image comes from pkg/catalog.
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
// replica's PersistentVolumeClaim "data-<statefulset>-<ordinal>" (names.DataClaimName).
const DataVolumeName = names.DataVolumeName

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
	// initialises an empty data directory (by the image's own variables, or by the engine's
	// InitFiles), with the password file of names.SecretKeyPassword. Otherwise the
	// controller creates it and keeps its password in step with the Secret's, as the
	// superuser, through the engine's Replicator.
	ApplicationUserAtInit bool
	// SuperuserWasUsername says whether, in a Secret written before the superuser keys,
	// names.SecretKeyUsername and names.SecretKeyPassword were the superuser's; otherwise they
	// were the application user's, with the same password as the superuser.
	SuperuserWasUsername bool
	// HasDatabase says whether the Database has a named database (names.SecretKeyDatabase and the
	// URI's path), which the engine creates at initialisation or on first write.
	HasDatabase bool
	// UsersPerDatabase says whether a user belongs to one database and authenticates
	// against it, named by the URI's authSource: the application user to the Database's
	// database, the superuser to SuperuserDatabase. A URI for the superuser (a Secret written
	// before the application user, whose username is the superuser) names no database and
	// SuperuserDatabase as its authSource, as such Secrets always had it.
	UsersPerDatabase bool
	// User and Group are the uid and gid the image's server runs as (ImageUser in the
	// official images): the Pod runs as them (runAsUser, runAsGroup), never as root, and
	// Group is its fsGroup, so the server can write a freshly provisioned volume.
	User, Group int64
	// ReplicationUsername is the role replicas stream from the primary as; "" for an engine
	// whose replication the controller does not set up, whose replicas are independent
	// servers of which only the first is served.
	ReplicationUsername string
	// ReplicaSet says whether the replicas form a replica set the engine runs itself
	// (its Observer is a ReplicaSet): the members authenticate to each other with a shared key
	// (names.SecretKeyKeyFile), not a replication user, and elect their primary among them; the
	// controller initiates the set, keeps its members those of the StatefulSet, and gives
	// the Pod it wants primary the highest priority.
	ReplicaSet bool
	// Requests are the container's resource requests (no limits: an engine killed at a
	// memory limit loses in-flight transactions).
	Requests corev1.ResourceList
	// Environment returns the engine's environment; see Env.
	Environment func(secret string) []corev1.EnvVar
	// ProbeExec is the exec command shared by the startup, readiness and liveness probes;
	// ReadinessExec, when set, is the readiness probe's instead.
	ProbeExec, ReadinessExec []string
	// URIScheme is the connection URI's scheme.
	URIScheme string
	// SuperuserDatabase is the database the superuser authenticates against where users
	// belong to a database (UsersPerDatabase): a URI naming no database names it as its
	// authSource.
	SuperuserDatabase string
	// CheckKeyFile, for a replica set (ReplicaSet), says what is wrong with a Secret's
	// names.SecretKeyKeyFile for the members to take it ("is not ..."); nil when nothing is.
	CheckKeyFile func(key []byte) error
}

// Replicates reports whether the controller sets up replication for the engine: its
// replicas follow one primary, through a replication user (ReplicationUsername) or as a
// replica set (ReplicaSet).
func (r Recipe) Replicates() bool { return r.ReplicationUsername != "" || r.ReplicaSet }

// Env returns the container environment (Environment): the engine's user and database
// variables read from the Secret named secret (names.SecretKeySuperuserUsername,
// names.SecretKeyUsername where the image makes the application user,
// names.SecretKeyDatabase), its password variables as <VAR>_FILE naming CredentialsFile of
// the password keys, plus what else the engine's image, scripts and probes read.
func (r Recipe) Env(secret string) []corev1.EnvVar { return r.Environment(secret) }

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

// ProbeCommand returns the exec command of the startup, readiness and liveness probes
// (ProbeExec). None may pass while the image's entrypoint initialises the data directory: an
// engine's probe reaches the server where the entrypoint's initialisation server does not
// listen (its recipe says where).
func (r Recipe) ProbeCommand() []string { return append([]string(nil), r.ProbeExec...) }

// ReadinessCommand returns the exec command of the readiness probe: ProbeCommand, or for a
// replica set one that passes only on a member that is PRIMARY or SECONDARY, so a member
// still joining the set (initial sync, STARTUP2) or cut off from it (RECOVERING) is not
// served.
func (r Recipe) ReadinessCommand() []string {
	if r.ReadinessExec == nil {
		return r.ProbeCommand()
	}
	return append([]string(nil), r.ReadinessExec...)
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
// users belong to a database (UsersPerDatabase), authSource names database, or
// SuperuserDatabase when database is "".
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
		Scheme: r.URIScheme,
		User:   url.UserPassword(user, password),
		Host:   host + ":" + strconv.Itoa(int(r.Port)),
		Path:   "/" + database,
	}
	if r.UsersPerDatabase {
		source := database
		if source == "" {
			source = r.SuperuserDatabase
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

// FileEnv is the variable name set to CredentialsFile(key).
func FileEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, Value: CredentialsFile(key)}
}

// SecretEnv is the variable name read from key of the Secret named secret.
func SecretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key},
	}}
}

// Requests builds a ResourceList of cpu and memory.
func Requests(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
	}
}

// ImageUser is the uid and gid of the server user in the official postgres, mysql and mongo
// images (their Dockerfiles create it with a fixed id so volumes keep their owner across
// versions).
const ImageUser = 999
