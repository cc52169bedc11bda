package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// envSource flattens an environment into NAME → "secret:KEY", "field:PATH" or the value.
func envSource(env []corev1.EnvVar) map[string]string {
	out := map[string]string{}
	for _, e := range env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			out[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		default:
			out[e.Name] = e.Value
		}
	}
	return out
}

func TestContainerFollowsTheEngineRecipe(t *testing.T) {
	for _, tc := range []struct {
		engine   examplev1.Engine
		port     int32
		dataPath string
		env      map[string]string
		probe    []string
		// readiness is the readiness probe's command when it is not probe's.
		readiness []string
		uri       string
		database  string
		memoryReq string
	}{{
		engine:   examplev1.EnginePostgreSQL,
		port:     5432,
		dataPath: "/var/lib/postgresql/data",
		env: map[string]string{
			"POSTGRES_USER":          "secret:db-credentials/superuser-username",
			"POSTGRES_PASSWORD_FILE": "/etc/database-credentials/superuser-password",
			"POSTGRES_DB":            "secret:db-credentials/database",
			"PGDATA":                 "/var/lib/postgresql/data/pgdata",
		},
		probe:     []string{"sh", "-c", `exec pg_isready -h 127.0.0.1 -p 5432 -U "$POSTGRES_USER" -d "$POSTGRES_DB"`},
		uri:       "postgresql://app:pw@db.ns.svc:5432/my_db",
		database:  "my_db",
		memoryReq: "256Mi",
	}, {
		engine:   examplev1.EngineMySQL,
		port:     3306,
		dataPath: "/var/lib/mysql",
		env: map[string]string{
			"MYSQL_ROOT_PASSWORD_FILE": "/etc/database-credentials/superuser-password",
			"MYSQL_USER":               "secret:db-credentials/username",
			"MYSQL_PASSWORD_FILE":      "/etc/database-credentials/password",
			"MYSQL_DATABASE":           "secret:db-credentials/database",
		},
		probe:     []string{"mysqladmin", "ping", "-h", "127.0.0.1", "-P", "3306", "--silent"},
		uri:       "mysql://admin:pw@db.ns.svc:3306/my_db",
		database:  "my_db",
		memoryReq: "512Mi",
	}, {
		engine:   examplev1.EngineMongoDB,
		port:     27017,
		dataPath: "/data/db",
		env: map[string]string{
			"MONGO_INITDB_ROOT_USERNAME":      "secret:db-credentials/superuser-username",
			"MONGO_INITDB_ROOT_PASSWORD_FILE": "/etc/database-credentials/superuser-password",
			"MONGO_INITDB_DATABASE":           "secret:db-credentials/database",
			"APPLICATION_USERNAME":            "secret:db-credentials/username",
			"APPLICATION_PASSWORD_FILE":       "/etc/database-credentials/password",
			"POD_IP":                          "field:status.podIP",
		},
		probe:     []string{"sh", "-c", `exec mongosh --host "$POD_IP" --port 27017 --quiet --eval "db.adminCommand('ping')"`},
		readiness: []string{"sh", "-c", `exec mongosh --host "$POD_IP" --port 27017 --quiet --eval "const h = db.hello(); if (!h.isWritablePrimary && !h.secondary) { quit(1) }"`},
		uri:       "mongodb://app:pw@db.ns.svc:27017/my_db?authSource=my_db",
		database:  "my_db",
		memoryReq: "512Mi",
	}} {
		t.Run(string(tc.engine), func(t *testing.T) {
			r, ok := engine.For(tc.engine)
			require.True(t, ok)
			c := r.Container("img:1", "db-credentials")

			require.Equal(t, engine.ContainerName, c.Name)
			require.Equal(t, "img:1", c.Image)
			require.Equal(t, []corev1.ContainerPort{{Name: r.PortName, ContainerPort: tc.port, Protocol: corev1.ProtocolTCP}}, c.Ports)
			require.Equal(t, tc.env, envSource(c.Env))
			require.Equal(t, []corev1.VolumeMount{{Name: engine.DataVolumeName, MountPath: tc.dataPath}, {Name: engine.CredentialsVolumeName, MountPath: engine.CredentialsPath, ReadOnly: true}}, c.VolumeMounts)
			require.Equal(t, int64(999), r.User)
			require.Equal(t, int64(999), r.Group)
			require.Equal(t, engine.ContainerSecurityContext(), c.SecurityContext)
			require.Nil(t, c.Resources.Limits)
			require.True(t, c.Resources.Requests.Memory().Equal(resource.MustParse(tc.memoryReq)))

			for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				require.NotNil(t, p, name)
				want := tc.probe
				if name == "readiness" && tc.readiness != nil {
					want = tc.readiness
				}
				require.Equal(t, want, p.Exec.Command, name)
				require.Equal(t, int32(engine.ProbePeriodSeconds), p.PeriodSeconds, name)
				require.Equal(t, int32(engine.ProbeTimeoutSeconds), p.TimeoutSeconds, name)
				require.Equal(t, int32(1), p.SuccessThreshold, name)
			}
			require.Equal(t, int32(engine.StartupProbeFailureThreshold), c.StartupProbe.FailureThreshold)
			require.Equal(t, int32(engine.ReadinessFailureThreshold), c.ReadinessProbe.FailureThreshold)
			require.Equal(t, int32(engine.LivenessFailureThreshold), c.LivenessProbe.FailureThreshold)

			require.Equal(t, tc.database, r.DatabaseName("my-db"))
			require.Equal(t, tc.uri, r.URI(r.Username, "pw", "db.ns.svc", r.DatabaseName("my-db")))
		})
	}
}

func TestProbeCommandIsACopy(t *testing.T) {
	r, _ := engine.For(examplev1.EngineMySQL)
	cmd := r.ProbeCommand()
	cmd[0] = "changed"
	require.Equal(t, "mysqladmin", r.ProbeCommand()[0])
}

func TestUnknownEngineHasNoRecipe(t *testing.T) {
	_, ok := engine.For("oracle")
	require.False(t, ok)
}

func TestURIEscapesCredentials(t *testing.T) {
	r, _ := engine.For(examplev1.EnginePostgreSQL)
	require.Equal(t, "postgresql://u%40x:p%2Fw%3A@h:5432/d", r.URI("u@x", "p/w:", "h", "d"))
}

// A MongoDB user authenticates against the database it belongs to: the application user's,
// or admin, the superuser's, for a URI that names no database.
func TestMongoDBURINamesTheUsersDatabase(t *testing.T) {
	r, _ := engine.For(examplev1.EngineMongoDB)
	require.Equal(t, "mongodb://app:pw@h:27017/d?authSource=d", r.URI("app", "pw", "h", "d"))
	require.Equal(t, "mongodb://admin:pw@h:27017/?authSource=admin", r.URI("admin", "pw", "h", ""))
	p, _ := engine.For(examplev1.EnginePostgreSQL)
	require.NotContains(t, p.URI("app", "pw", "h", "d"), "authSource")
}
