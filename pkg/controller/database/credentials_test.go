package database_test

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
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
	require.Equal(t, pgclient.Server{Host: "10.0.0.1", Port: 5432, User: "postgres", Password: string(secret.Data["superuser-password"]),
		Database: "my_database"}, fi.applicationServers[0], "as the superuser, in the Database's database")
	require.NotEmpty(t, f.credentialsRecord()[database.CredentialsKeyApplication], "recorded in the controller's namespace")
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

// sha256Hex is the SHA-256 (hex) of value.
func sha256Hex(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

// What the servers were given is recorded in the controller's namespace, where tenants cannot
// write: annotations on the credentials Secret, which a user who may edit Secrets writes,
// added, changed or removed, change nothing the controller decides. Nothing is given again
// (no takeover of the superuser's objects either), and a password changed in the Secret is
// given whatever an annotation claims.
func TestCredentialsAnnotationsOnTheSecretChangeNothing(t *testing.T) {
	const (
		application = "database.example.com/application-password-sha256"
		replication = "database.example.com/replication-password-sha256"
	)
	for _, tc := range []struct {
		name string
		edit func(*corev1.Secret)
		// given are the application role and replication role writes the next pass makes.
		given []string
	}{
		{"added, naming other passwords", func(s *corev1.Secret) {
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, application, sha256Hex("app\nother"))
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, replication, sha256Hex("other"))
		}, nil},
		{"removed", func(s *corev1.Secret) {
			delete(s.Annotations, application)
			delete(s.Annotations, replication)
		}, nil},
		{"claiming new passwords were given", func(s *corev1.Secret) {
			s.Data["password"], s.Data["replication-password"] = []byte("A2"), []byte("R2")
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, application, sha256Hex("app\nA2"))
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, replication, sha256Hex("R2"))
		}, []string{"10.0.0.1 app A2 takeOver=false", "create-role 10.0.0.1 replicator R2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, fi := replicating(t, 3, nil)
			secret := f.secret().DeepCopy()
			// Annotations as a controller that kept the record on the Secret left them; the
			// record already holds the Secret, so they are never read.
			metav1.SetMetaDataAnnotation(&secret.ObjectMeta, application, sha256Hex("app\n"+string(secret.Data["password"])))
			metav1.SetMetaDataAnnotation(&secret.ObjectMeta, replication, sha256Hex(string(secret.Data["replication-password"])))
			require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Len(t, fi.applicationRoles, 1, "given once, by the first pass")
			record := f.credentialsRecord()
			require.Equal(t, sha256Hex("app\n"+string(secret.Data["password"])), record[database.CredentialsKeyApplication])

			edited := f.secret().DeepCopy()
			tc.edit(edited)
			require.NoError(t, f.kube.Tracker().Update(secrets, edited, namespace))
			fi.applicationRoles = nil
			fi.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			given := append(slices.Clone(fi.applicationRoles), filter(fi.recorded(), "create-role")...)
			require.Equal(t, tc.given, given)

			// A controller restarted with nothing in memory reads the record, not the annotations.
			f.restartController()
			fi.applicationRoles = nil
			fi.reset()
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Empty(t, fi.applicationRoles)
			require.Empty(t, filter(fi.recorded(), "create-role"))
		})
	}
}

// A Secret annotated by a controller that kept the record on it, and no record yet (an
// upgrade): the annotations are imported into the record, so nothing the servers hold is given
// again and the superuser's objects are not taken over a second time.
func TestLegacyCredentialsAnnotationsAreImportedOnce(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	require.NoError(t, f.kube.Tracker().Delete(configMaps, database.DefaultControllerNamespace, database.CredentialsRecordName(namespace, name)))
	f.restartController()
	secret := f.secret().DeepCopy()
	metav1.SetMetaDataAnnotation(&secret.ObjectMeta, "database.example.com/application-password-sha256", sha256Hex("app\n"+string(secret.Data["password"])))
	metav1.SetMetaDataAnnotation(&secret.ObjectMeta, "database.example.com/replication-password-sha256", sha256Hex(string(secret.Data["replication-password"])))
	require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))

	_, err := f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fi.applicationRoles, "not given again, nothing taken over")
	require.Empty(t, filter(fi.recorded(), "create-role"))
	require.Equal(t, map[string]string{
		database.CredentialsKeySecretUID:   string(secret.UID),
		database.CredentialsKeyApplication: sha256Hex("app\n" + string(secret.Data["password"])),
		database.CredentialsKeyReplication: sha256Hex(string(secret.Data["replication-password"])),
	}, f.credentialsRecord())
}

// A legacy annotation that is no SHA-256 in lowercase hex (edited by hand) is not imported,
// which the admission policy would refuse: the role is given as the first time.
func TestALegacyCredentialsAnnotationThatIsNoDigestIsNotImported(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	secret := f.secret().DeepCopy()
	metav1.SetMetaDataAnnotation(&secret.ObjectMeta, "database.example.com/application-password-sha256", "not a digest")
	require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
	require.NoError(t, f.kube.Tracker().Delete(configMaps, database.DefaultControllerNamespace, database.CredentialsRecordName(namespace, name)))
	f.restartController()

	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1 app " + string(secret.Data["password"]) + " takeOver=true"}, fi.applicationRoles)
	require.Equal(t, sha256Hex("app\n"+string(secret.Data["password"])), f.credentialsRecord()[database.CredentialsKeyApplication])
}

// A record of another Secret (one made again, or a Database of the same name before) holds
// nothing of the Secret there is now: the primary is given its credentials, as the first time.
func TestACredentialsRecordOfAnotherSecretHoldsNothing(t *testing.T) {
	f, fi := replicating(t, 3, nil)
	password := string(f.secret().Data["password"])
	f.recordCredential(database.CredentialsKeyApplication, sha256Hex("app\n"+password))
	cm, err := f.kube.Tracker().Get(configMaps, database.DefaultControllerNamespace, database.CredentialsRecordName(namespace, name))
	require.NoError(t, err)
	other := cm.(*corev1.ConfigMap).DeepCopy()
	other.Data[database.CredentialsKeySecretUID] = "0ther000-0000-4000-8000-000000000000"
	require.NoError(t, f.kube.Tracker().Update(configMaps, other, database.DefaultControllerNamespace))
	f.restartController()

	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1 app " + password + " takeOver=true"}, fi.applicationRoles)
	require.Equal(t, string(f.secret().UID), f.credentialsRecord()[database.CredentialsKeySecretUID])
}
