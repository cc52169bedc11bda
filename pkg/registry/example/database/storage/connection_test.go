package storage

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

// TestConnectionMatchesTheSecret pins that the connection facts are the
// Secret's, for every engine with one replica and with three: the same host,
// port, database and user, and keys that the Secret has (the read URI's only
// when the Secret has a read host).
func TestConnectionMatchesTheSecret(t *testing.T) {
	for _, e := range []examplev1.Engine{examplev1.EngineMySQL, examplev1.EnginePostgreSQL, examplev1.EngineMongoDB} {
		for _, replicas := range []int32{1, 3} {
			t.Run(string(e)+"/"+strconv.Itoa(int(replicas)), func(t *testing.T) {
				db := v1Database(replicas)
				db.Spec.Engine, db.Spec.Version = e, catalog.Lines(e)[0]
				d, err := specs.Resolve(db)
				require.NoError(t, err)
				secret := specs.Secret(db, d, specs.Passwords{Application: "pw", Superuser: "spw", Replication: "rpw"})

				c := Connection(db, d.Recipe, d.Replicas, d.ClusterDomain)
				require.Equal(t, db.Name, c.Name)
				require.Equal(t, db.Namespace, c.Namespace)
				require.Equal(t, e, c.Engine)
				require.Equal(t, secret.Name, c.SecretName)
				require.Equal(t, string(secret.Data[names.SecretKeyHost]), c.Host)
				require.Equal(t, string(secret.Data[names.SecretKeyPort]), strconv.Itoa(int(c.Port)))
				require.Equal(t, string(secret.Data[names.SecretKeyDatabase]), c.Database)
				require.Equal(t, string(secret.Data[names.SecretKeyUsername]), c.Username)
				require.Equal(t, "pw", string(secret.Data[c.PasswordKey]))
				require.Contains(t, secret.Data, c.URIKey)
				require.Equal(t, string(secret.Data[names.SecretKeyReadHost]), c.ReadHost)
				if c.ReadHost == "" {
					require.Empty(t, c.ReadURIKey)
				} else {
					require.Contains(t, secret.Data, c.ReadURIKey)
				}
				require.False(t, c.Ready)
			})
		}
	}
}

// TestConnectionReadHostAndReadiness pins the read host of a replicated
// PostgreSQL Database of three, and that ready and primary come from status.
func TestConnectionReadHostAndReadiness(t *testing.T) {
	db := v1Database(3)
	db.Status.Primary = "my-database-1"
	db.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	c := Connection(db, d.Recipe, d.Replicas, d.ClusterDomain)
	require.Equal(t, "my-database.production.svc.cluster.local", c.Host)
	require.Equal(t, "my-database-read.production.svc.cluster.local", c.ReadHost)
	require.Equal(t, int32(5432), c.Port)
	require.Equal(t, "my_database", c.Database)
	require.Equal(t, "my-database-1", c.Primary)
	require.True(t, c.Ready)

	db.Spec.Replicas = ptr.To[int32](1)
	db.Status.Conditions[0].Status = metav1.ConditionFalse
	c = Connection(db, d.Recipe, d.Replicas, d.ClusterDomain)
	require.False(t, c.Ready)
	d.Replicas = 1
	require.Empty(t, Connection(db, d.Recipe, d.Replicas, d.ClusterDomain).ReadHost)
}

// The user is the one the controller wrote into the Secret (status.username): a MongoDB
// Database initialised before its application user keeps its root user. Before the
// controller's first write, the engine's application user.
func TestConnectionUserIsTheSecretsAsTheStatusSaysIt(t *testing.T) {
	db := v1Database(1)
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMongoDB, "7.0"
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	require.Equal(t, d.Recipe.Username, Connection(db, d.Recipe, d.Replicas, d.ClusterDomain).Username)
	db.Status.Username = "root"
	require.Equal(t, "root", Connection(db, d.Recipe, d.Replicas, d.ClusterDomain).Username)
}

// v1Database is the production/my-database PostgreSQL 14.5 Database of replicas, 100Gi.
func v1Database(replicas int32) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "production", Name: "my-database", UID: "db-uid"},
		Spec: examplev1.DatabaseSpec{
			Engine: examplev1.EnginePostgreSQL, Version: "14.5", Replicas: ptr.To(replicas), Storage: "100Gi",
		},
	}
}
