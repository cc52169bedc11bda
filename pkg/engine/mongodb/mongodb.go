// Package mongodb is the MongoDB engine: how its servers run in a StatefulSet (the official
// mongo image) and a replica set whose members elect their primary, which the controller
// initiates, keeps the members of and moves by priority
// (https://www.mongodb.com/docs/manual/replication/).
package mongodb

import (
	_ "embed"
	"errors"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

func init() { engine.Register(Engine{}) }

// Engine is MongoDB's engine.Engine.
type Engine struct{}

// The variables the initialisation script reads the application user from: its name, and
// the file holding its password (engine.CredentialsFile of names.SecretKeyPassword).
const (
	ApplicationUsernameEnv     = "APPLICATION_USERNAME"
	ApplicationPasswordFileEnv = "APPLICATION_PASSWORD_FILE"
)

var recipe = engine.Recipe{
	Engine:   examplev1.EngineMongoDB,
	PortName: "mongodb",
	Port:     27017,
	DataPath: "/data/db",
	// MONGO_INITDB_ROOT_USERNAME is the superuser, a root user of the admin database. The
	// application user is made at initialisation by the controller's script (InitFiles),
	// which the entrypoint runs once, on an empty data directory, as root against
	// MONGO_INITDB_DATABASE: a user of the Database's database with readWrite and dbAdmin
	// there only.
	Username:              "app",
	SuperuserUsername:     "admin",
	SuperuserWasUsername:  true,
	ApplicationUserAtInit: true,
	HasDatabase:           true,
	UsersPerDatabase:      true,
	// The database the official image's entrypoint creates its root user in.
	SuperuserDatabase: "admin",
	ReplicaSet:        true,
	User:              engine.ImageUser,
	Group:             engine.ImageUser,
	Requests:          engine.Requests("250m", "512Mi"),
	Environment: func(secret string) []corev1.EnvVar {
		return []corev1.EnvVar{
			engine.SecretEnv("MONGO_INITDB_ROOT_USERNAME", secret, names.SecretKeySuperuserUsername),
			engine.FileEnv("MONGO_INITDB_ROOT_PASSWORD_FILE", names.SecretKeySuperuserPassword),
			engine.SecretEnv("MONGO_INITDB_DATABASE", secret, names.SecretKeyDatabase),
			engine.SecretEnv(ApplicationUsernameEnv, secret, names.SecretKeyUsername),
			engine.FileEnv(ApplicationPasswordFileEnv, names.SecretKeyPassword),
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
			}},
		}
	},
	// The entrypoint's initialisation mongod binds 127.0.0.1:27017, so a probe on
	// localhost would pass during init; the Pod IP is only served by the final server.
	ProbeExec: []string{"sh", "-c", `exec mongosh --host "$POD_IP" --port 27017 --quiet --eval "db.adminCommand('ping')"`},
	// hello needs no authentication; isWritablePrimary and secondary are false in every
	// other member state (https://www.mongodb.com/docs/manual/reference/command/hello/).
	ReadinessExec: []string{"sh", "-c", `exec mongosh --host "$POD_IP" --port 27017 --quiet --eval "const h = db.hello(); if (!h.isWritablePrimary && !h.secondary) { quit(1) }"`},
	URIScheme:     "mongodb",
	CheckKeyFile:  checkKeyFile,
}

// Recipe is MongoDB's recipe.
func (Engine) Recipe() engine.Recipe { return recipe }

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

// checkKeyFile says a key that is not ValidKeyFile is not one mongod takes.
func checkKeyFile(key []byte) error {
	if !ValidKeyFile(key) {
		return errors.New("is not a key mongod takes: 6 to 1024 base64 characters")
	}
	return nil
}

const (
	// setupKey is the setup script's key in the replication ConfigMap.
	setupKey = "mongodb-setup.sh"
	// ApplicationUserKey is the initialisation script that creates the application user:
	// the official mongo image runs every *.js of /docker-entrypoint-initdb.d with mongosh,
	// as its root user, in file-name order.
	ApplicationUserKey = "application-user.js"
	// keyVolume is the emptyDir, in memory, the setup script copies the replica set's
	// keyfile to, mounted at keyPath in both containers.
	keyVolume = "mongodb-key"
	keyPath   = "/etc/mongodb-key"
	// KeyFile is the keyfile the server reads (mongod --keyFile).
	KeyFile = keyPath + "/keyfile"
)

var (
	//go:embed scripts/mongodb-setup.sh
	setupScript string
	//go:embed scripts/mongodb-application-user.js
	applicationUser string
)

// ReplicationFiles is the setup script.
func (Engine) ReplicationFiles(*examplev1.Database, engine.Desired) map[string]string {
	return map[string]string{setupKey: setupScript}
}

// InitFiles is the script that creates the application user (ApplicationUserKey).
func (Engine) InitFiles(engine.Desired) map[string]string {
	return map[string]string{ApplicationUserKey: applicationUser}
}

// ReplicaSetName is the name of a MongoDB Database's replica set (mongod --replSet, the
// configuration's _id): the Database's name.
func ReplicaSetName(db *examplev1.Database) string { return db.Name }

// ReplicationPod adds to tmpl, the Pod template of a MongoDB Database, what its replica set
// needs: the setup init container (mongodb-setup.sh) on the database image, which copies
// the credentials Secret's keyfile to KeyFile with the mode mongod requires, and the
// server's arguments: the image's entrypoint runs "mongod --replSet <name> --keyFile <file>"
// (it adds --bind_ip_all, and leaves both flags out of the server it initialises an empty
// data directory with, so the root user and the initialisation scripts are made on a
// standalone server first). The keyfile also turns authentication on, as --auth does.
// SIGTERM is mongod's clean shutdown, in which a primary first steps down
// (https://www.mongodb.com/docs/manual/reference/command/shutdown/).
func (Engine) ReplicationPod(db *examplev1.Database, d engine.Desired, tmpl *corev1.PodTemplateSpec) {
	pod := &tmpl.Spec
	c := &pod.Containers[0]
	secret := names.SecretName(db)
	c.Args = []string{"mongod", "--replSet", ReplicaSetName(db), "--keyFile", KeyFile}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: keyVolume, MountPath: keyPath, ReadOnly: true})
	pod.InitContainers = []corev1.Container{{
		Name:    engine.SetupContainerName,
		Image:   c.Image,
		Command: []string{"bash", engine.ReplicationMountPath + "/" + setupKey},
		Env: []corev1.EnvVar{
			{Name: "KEYFILE_SOURCE", Value: engine.CredentialsFile(names.SecretKeyKeyFile)},
			{Name: "KEYFILE", Value: KeyFile},
		},
		VolumeMounts: []corev1.VolumeMount{
			engine.CredentialsMount(),
			engine.ReplicationMount(),
			{Name: keyVolume, MountPath: keyPath},
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
		engine.ReplicationConfigMapVolume(db),
		corev1.Volume{Name: keyVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	)
}
