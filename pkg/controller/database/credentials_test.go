package database_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/postgres"
)

// The primary is given the application role of the Secret's username and password, as the
// superuser, once; a password changed in the Secret is given again, and only the first time
// does the role take over the superuser's objects.
func TestTheApplicationRoleIsCreatedAndFollowsTheSecret(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	_, err := f.reconcile()
	require.NoError(t, err)
	secret := f.secret()
	require.Equal(t, "app", string(secret.Data["username"]))
	require.Equal(t, []string{"10.0.0.1 app " + string(secret.Data["password"]) + " takeOver=true"}, fi.applicationRoles,
		"on the primary only")
	require.Equal(t, postgres.Server{Host: "10.0.0.1", Port: 5432, User: "postgres", Password: string(secret.Data["superuser-password"]),
		Database: "my_database"}, fi.applicationServers[0], "as the superuser, in the Database's database")
	require.NotEmpty(t, secret.Annotations[database.ApplicationPasswordAnnotation], "recorded")
	require.Contains(t, f.events(), "Normal Updated Gave the primary the application role app with the Secret's password")

	fi.applicationRoles = nil
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fi.applicationRoles, "given once")

	edited := f.secret().DeepCopy()
	edited.Data["password"] = []byte("rotated")
	require.NoError(t, f.kube.Tracker().Update(secrets, edited, namespace))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1 app rotated takeOver=false"}, fi.applicationRoles)
	require.Contains(t, string(f.secret().Data["uri"]), "postgresql://app:rotated@")
	fi.applicationRoles = nil
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fi.applicationRoles)
}

// A PostgreSQL Secret written before the superuser keys (username postgres, the superuser):
// the superuser moves to superuser-username and superuser-password, username and password
// become the application role's, with a new password, which the primary is given, taking
// over the superuser's objects.
func TestAnOldPostgreSQLSecretGetsAnApplicationRole(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	old := f.secret().DeepCopy()
	superuserPassword := string(old.Data["superuser-password"])
	delete(old.Data, "superuser-username")
	delete(old.Data, "superuser-password")
	old.Data["username"], old.Data["password"] = []byte("postgres"), []byte(superuserPassword)
	require.NoError(t, f.kube.Tracker().Update(secrets, old, namespace))

	_, err := f.reconcile()
	require.NoError(t, err)
	migrated := f.secret()
	require.Equal(t, "postgres", string(migrated.Data["superuser-username"]))
	require.Equal(t, superuserPassword, string(migrated.Data["superuser-password"]), "the password the data directory holds")
	require.Equal(t, "app", string(migrated.Data["username"]))
	password := string(migrated.Data["password"])
	require.GreaterOrEqual(t, len(password), 24)
	require.NotEqual(t, superuserPassword, password)
	require.Equal(t, "postgresql://app:"+password+"@my-database.production.svc.cluster.local:5432/my_database", string(migrated.Data["uri"]))
	require.Contains(t, f.events(), "Normal Updated Secret my-database-credentials: the superuser's credentials moved to superuser-username and superuser-password; username is the application user app")
	for _, s := range fi.servers {
		require.Equal(t, "postgres", s.User, "the servers are asked as the superuser meanwhile")
		require.Equal(t, superuserPassword, s.Password)
	}

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1 app " + password + " takeOver=true"}, fi.applicationRoles)
}

// MySQL's and MongoDB's old Secrets keep their user: the image made them once, on the empty
// data directory. MySQL's root had the application user's password; MongoDB's user was its
// root user, of the admin database, which its URI keeps authenticating against. The status
// names the user the Secret gives clients (status.username, which databases/connection reports).
func TestOldMySQLAndMongoDBSecretsKeepTheirUser(t *testing.T) {
	for _, tc := range []struct {
		engine             examplev1.Engine
		version, user, uri string
		superuser          string
	}{
		{examplev1.EngineMySQL, "8.4", "admin", "mysql://admin:old@my-database.production.svc.cluster.local:3306/my_database", "root"},
		{examplev1.EngineMongoDB, "7.0", "admin", "mongodb://admin:old@my-database.production.svc.cluster.local:27017/?authSource=admin", "admin"},
	} {
		t.Run(string(tc.engine), func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.Engine, db.Spec.Version = tc.engine, tc.version
			f := newFixture(t, db)
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, string(f.secret().Data["username"]), f.database().Status.Username, "status.username is the Secret's")
			old := f.secret().DeepCopy()
			delete(old.Data, "superuser-username")
			delete(old.Data, "superuser-password")
			delete(old.Data, "database")
			old.Data["username"] = []byte(tc.user)
			old.Data["password"] = []byte("old")
			require.NoError(t, f.kube.Tracker().Update(secrets, old, namespace))

			_, err = f.reconcile()
			require.NoError(t, err)
			migrated := f.secret()
			require.Equal(t, tc.user, string(migrated.Data["username"]))
			require.Equal(t, "old", string(migrated.Data["password"]))
			require.Equal(t, tc.superuser, string(migrated.Data["superuser-username"]))
			require.Equal(t, "old", string(migrated.Data["superuser-password"]), "the password the data directory holds")
			require.Equal(t, tc.uri, string(migrated.Data["uri"]))
			require.Equal(t, tc.user, f.database().Status.Username, "databases/connection names the user clients are given")
		})
	}
}

// A current Secret that lost one of its superuser keys (edited by hand) is not taken for one
// written before them: nothing is moved or generated, and the Database says which key to
// restore.
func TestASecretMissingOneSuperuserKeyIsReportedNotMigrated(t *testing.T) {
	for _, engineVersion := range [][2]string{{"postgresql", "16"}, {"mysql", "8.4"}, {"mongodb", "7.0"}} {
		for _, key := range []string{"superuser-password", "superuser-username"} {
			t.Run(engineVersion[0]+"/"+key, func(t *testing.T) {
				db := exampleDatabase()
				db.Spec.Engine, db.Spec.Version = examplev1.Engine(engineVersion[0]), engineVersion[1]
				f := newFixture(t, db)
				_, err := f.reconcile()
				require.NoError(t, err)
				edited := f.secret().DeepCopy()
				delete(edited.Data, key)
				require.NoError(t, f.kube.Tracker().Update(secrets, edited, namespace))

				_, err = f.reconcile()
				require.NoError(t, err)
				require.Equal(t, edited.Data, f.secret().Data, "nothing moved or generated")
				got := f.database()
				require.Equal(t, examplev1.DatabasePhaseFailed, got.Status.Phase)
				require.Equal(t, "InvalidCredentials", condition(got, "Ready").Reason)
				require.Contains(t, condition(got, "Ready").Message, "but no \""+key+"\"")
			})
		}
	}
}
