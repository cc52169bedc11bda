package specs_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mongodb"
	"example.com/database-apiserver/pkg/names"
)

func mongoDB(t *testing.T) (*examplev1.Database, specs.Desired) {
	db := database(1)
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMongoDB, "7.0"
	return db, resolve(t, db)
}

// A new MongoDB Database's Secret names the application user, who belongs to the Database's
// database and authenticates against it; the superuser has a key and password of its own.
func TestMongoDBSecretNamesTheApplicationUser(t *testing.T) {
	db, d := mongoDB(t)
	s := specs.Secret(db, d, specs.Passwords{Application: "apppw", Superuser: "rootpw", Replication: "KEYFILE"})
	require.Equal(t, map[string]string{
		"keyfile":            "KEYFILE",
		"username":           "app",
		"password":           "apppw",
		"superuser-username": "admin",
		"superuser-password": "rootpw",
		"database":           "my_database",
		"host":               "my-database.production.svc.cluster.local",
		"port":               "27017",
		"uri":                "mongodb://app:apppw@my-database.production.svc.cluster.local:27017/my_database?authSource=my_database",
	}, stringData(s.Data))
}

// A Secret from before the application user names the root user: its URI keeps naming no
// database and authSource=admin, and MigrateCredentials keeps the user, the one the data
// directory holds.
func TestOldMongoDBSecretKeepsRootsURI(t *testing.T) {
	db, d := mongoDB(t)
	data := map[string][]byte{"username": []byte("admin"), "password": []byte("old")}
	require.True(t, specs.MigrateCredentials(d, data, "new"))
	specs.FillCredentials(db, d, data)
	require.Equal(t, "admin", string(data["username"]))
	require.Equal(t, "old", string(data["password"]))
	require.Equal(t, "admin", string(data["superuser-username"]))
	require.Equal(t, "old", string(data["superuser-password"]))
	require.Equal(t, "mongodb://admin:old@my-database.production.svc.cluster.local:27017/?authSource=admin", string(data["uri"]))
}

func TestMongoDBInitConfigMap(t *testing.T) {
	db, d := mongoDB(t)
	require.True(t, specs.HasInitConfigMap(d))
	cm := specs.InitConfigMap(db, d)
	require.Equal(t, "my-database-initdb", cm.Name)
	require.Equal(t, []metav1.OwnerReference{specs.OwnerReference(db)}, cm.OwnerReferences)
	require.Equal(t, specs.ChildLabels(db), cm.Labels)
	require.Equal(t, []string{mongodb.ApplicationUserKey}, keys(cm.Data))
	require.True(t, strings.HasSuffix(mongodb.ApplicationUserKey, ".js"), "the entrypoint runs *.js with mongosh")

	// The script reads the variables the container sets, and the password from the file
	// of the Secret's password key, which the credentials volume mounts.
	script := cm.Data[mongodb.ApplicationUserKey]
	require.Contains(t, script, "process.env."+mongodb.ApplicationUsernameEnv)
	require.Contains(t, script, "process.env."+mongodb.ApplicationPasswordFileEnv)
	require.Contains(t, script, `require("fs").readFileSync(passwordFile, "utf8")`)
	require.Contains(t, script, `{ role: "readWrite", db: db.getName() }`)
	require.Contains(t, script, `{ role: "dbAdmin", db: db.getName() }`)
	require.NotContains(t, script, `"root"`, "no role beyond the Database's database")

	c := specs.StatefulSet(db, d).Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	require.Equal(t, engine.CredentialsFile(names.SecretKeyPassword), env[mongodb.ApplicationPasswordFileEnv].Value)
	require.Equal(t, names.SecretKeyUsername, env[mongodb.ApplicationUsernameEnv].ValueFrom.SecretKeyRef.Key)
	require.Equal(t, names.SecretKeyDatabase, env["MONGO_INITDB_DATABASE"].ValueFrom.SecretKeyRef.Key,
		"the entrypoint runs the scripts against the Database's database")
	require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "initdb", MountPath: "/docker-entrypoint-initdb.d", ReadOnly: true})
	require.Contains(t, d.Recipe.PasswordKeys(), names.SecretKeyPassword)

	have := cm.DeepCopy()
	have.Data = map[string]string{mongodb.ApplicationUserKey: "edited", "other.js": "x"}
	have.Labels = map[string]string{"team": "a"}
	specs.SyncInitConfigMap(have, cm)
	require.Equal(t, cm.Data, have.Data)
	require.Equal(t, "a", have.Labels["team"])

	for _, e := range []examplev1.Engine{examplev1.EnginePostgreSQL, examplev1.EngineMySQL} {
		other := database(1)
		other.Spec.Engine = e
		if e == examplev1.EngineMySQL {
			other.Spec.Version = "8.4"
		}
		od := resolve(t, other)
		require.False(t, specs.HasInitConfigMap(od), e)
		require.Nil(t, specs.InitConfigMap(other, od), e)
	}
}

func stringData(data map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range data {
		out[k] = string(v)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
