package database_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// testEngineName is the spec.engine of testEngine, an engine no package of the repository
// registers: the tests register it (registerTestEngine) to show that an engine is a package
// of its own and a catalog, which the controller reconciles without knowing it.
const testEngineName examplev1.Engine = "testdb"

// testEngine is an engine.Engine of the tests' own: a server "testdb" on port 7000, whose
// replicas stream from a primary the controller picks (testServers, its engine.Replicator).
type testEngine struct{}

func (testEngine) Catalog() catalog.Catalog {
	return catalog.Catalog{
		Engine:      testEngineName,
		Image:       "testdb",
		LineParts:   1,
		Form:        `MAJOR or MAJOR.MINOR (e.g. "1" or "1.0")`,
		Lines:       []catalog.Line{catalog.SingleLine("1", 1, catalog.Day(2100, time.January, 1))},
		Published:   map[string][]int{"1": {0}},
		AcrossLines: func(*catalog.Catalog, catalog.Line, catalog.Line, string) string { return "" },
	}
}

func (testEngine) Recipe() engine.Recipe {
	return engine.Recipe{
		Engine:              testEngineName,
		PortName:            "testdb",
		Port:                7000,
		DataPath:            "/var/lib/testdb",
		Username:            "app",
		SuperuserUsername:   "root",
		HasDatabase:         true,
		ReplicationUsername: "streamer",
		User:                1000,
		Group:               1000,
		Requests:            engine.Requests("100m", "64Mi"),
		Environment: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				engine.SecretEnv("TESTDB_ROOT", secret, names.SecretKeySuperuserUsername),
				engine.FileEnv("TESTDB_ROOT_PASSWORD_FILE", names.SecretKeySuperuserPassword),
			}
		},
		ProbeExec: []string{"testdb-ping"},
		URIScheme: "testdb",
	}
}

func (testEngine) ReplicationFiles(*examplev1.Database, engine.Desired) map[string]string {
	return map[string]string{"testdb-setup.sh": "exec testdb-setup\n"}
}

// ReplicationPod runs the setup script in an init container with the replication password,
// and the server with the ConfigMap mounted.
func (testEngine) ReplicationPod(db *examplev1.Database, d engine.Desired, tmpl *corev1.PodTemplateSpec) {
	c := &tmpl.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, engine.ReplicationMount())
	tmpl.Spec.InitContainers = []corev1.Container{{
		Name:            engine.SetupContainerName,
		Image:           c.Image,
		Command:         []string{"sh", engine.ReplicationMountPath + "/testdb-setup.sh"},
		VolumeMounts:    []corev1.VolumeMount{engine.CredentialsMount(), engine.ReplicationMount()},
		SecurityContext: engine.ContainerSecurityContext(),
	}}
	tmpl.Spec.Volumes = []corev1.Volume{
		engine.CredentialsVolume(names.SecretName(db), append(d.Recipe.PasswordKeys(), names.SecretKeyReplicationPassword)...),
		engine.ReplicationConfigMapVolume(db),
	}
}

func (testEngine) InitFiles(engine.Desired) map[string]string { return nil }

// registerTestEngine registers testEngine for the test.
func registerTestEngine(t *testing.T) {
	engine.Register(testEngine{})
	t.Cleanup(func() { engine.Unregister(testEngineName) })
}

// testServer is one testdb server: whether it takes writes, how far its log goes, the
// primary it streams from ("" for none) and its users.
type testServer struct {
	writable bool
	position int64
	source   string
	users    []string
	// commitsWaiting sessions wait for replicas' acknowledgements, the longest for
	// longestWait (engine.Synchronous).
	commitsWaiting int
	longestWait    time.Duration
}

// testServers plays the testdb servers of a Database by host (Pod IP); a host without a
// server does not answer. The calls that change a server are recorded.
type testServers struct {
	mu      sync.Mutex
	servers map[string]*testServer
	calls   []string
}

var _ engine.Replicator = (*testServers)(nil)

func (s *testServers) set(ordinal int, ts testServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers[podIP(ordinal)] = &ts
}

func (s *testServers) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *testServers) record(call string) { s.calls = append(s.calls, call) }

func (s *testServers) Observe(_ context.Context, _ engine.Pass, e engine.Endpoint, _ []string) (bool, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, ok := s.servers[e.Host]
	if !ok {
		return false, nil, fmt.Errorf("connect to %s: connection refused", e.Host)
	}
	answer := *ts
	answer.users = slices.Clone(ts.users)
	return ts.writable, &answer, nil
}

func (*testServers) Refused(error) bool { return false }

func testState(m *engine.Member) *testServer { return m.State.(*testServer) }

func (*testServers) Follower(primary, replica *engine.Member) engine.Follower {
	if !replica.Answered || testState(replica).source != primary.Name {
		return engine.Follower{Why: "not streaming from " + primary.Name}
	}
	lag := testState(primary).position - testState(replica).position
	return engine.Follower{Streaming: true, LagBytes: &lag}
}

func (*testServers) HasUser(primary *engine.Member, user string) bool {
	return slices.Contains(testState(primary).users, user)
}

func (s *testServers) SetUser(_ context.Context, _ engine.Pass, e engine.Endpoint, user, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("set-user " + e.Host + " " + user)
	s.servers[e.Host].users = append(s.servers[e.Host].users, user)
	return nil
}

func (s *testServers) SetSource(_ context.Context, _ engine.Pass, e engine.Endpoint, _, primary, _, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("set-source " + e.Host + " " + primary)
	s.servers[e.Host].source = primary
	return nil
}

func (s *testServers) SyncReplica(ctx context.Context, p engine.Pass, e engine.Endpoint, replica, primary *engine.Member, user, password string) error {
	if testState(replica).source == primary.Name {
		return nil
	}
	return s.SetSource(ctx, p, e, replica.Name, primary.Name, user, password)
}

func (*testServers) SyncPrimary(context.Context, engine.Pass, engine.Endpoint, *engine.Member, int32) error {
	return nil
}

func (*testServers) CaughtUp(next, old *engine.Member) bool {
	return testState(next).position >= testState(old).position
}

func (*testServers) Lacks(next, old *engine.Member) string {
	return fmt.Sprintf("%s is at %d, %s at %d", next.Name, testState(next).position, old.Name, testState(old).position)
}

func (s *testServers) Promote(_ context.Context, _ engine.Pass, e engine.Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("promote " + e.Host)
	s.servers[e.Host].writable, s.servers[e.Host].source = true, ""
	return nil
}

func (*testServers) Detached(*engine.Member) bool { return false }

// An engine of the tests' own, registered only here, is reconciled through the whole
// controller: its children (Services on its port, a StatefulSet of its image and Pod
// recipe, its replication files, a Secret with its URI), its replication (the replication
// user, the replicas pointed at the primary, role labels, status) and a switchover (the
// primary fenced, the target promoted once it holds the former primary's log), with no
// change to the controller.
func TestAnEngineOfTheTestsOwnIsReconciledThroughTheWholeController(t *testing.T) {
	registerTestEngine(t)
	servers := &testServers{servers: map[string]*testServer{}}
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version = testEngineName, "1"
	f := newFixtureWithOptions(t, database.Options{Observers: map[examplev1.Engine]engine.Observer{testEngineName: servers}}, db)
	f.gracefulPodDeletion()

	_, err := f.reconcile()
	require.NoError(t, err)
	port := []corev1.ServicePort{{Name: "testdb", Port: 7000, TargetPort: intstr.FromString("testdb"), Protocol: corev1.ProtocolTCP}}
	for _, svc := range []string{name, name + "-headless", name + "-read"} {
		require.Equal(t, port, f.service(svc).Spec.Ports, svc)
	}
	require.Equal(t, "replica", f.service(name + "-read").Spec.Selector["database.example.com/role"])
	sts := f.statefulSet()
	require.Equal(t, "testdb:1", sts.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, []string{"testdb-ping"}, sts.Spec.Template.Spec.Containers[0].ReadinessProbe.Exec.Command)
	require.Equal(t, []string{"sh", "/etc/database/testdb-setup.sh"}, sts.Spec.Template.Spec.InitContainers[0].Command)
	obj, err := f.kube.Tracker().Get(configMaps, namespace, name+"-replication")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"primary": "my-database-0", "testdb-setup.sh": "exec testdb-setup\n"}, obj.(*corev1.ConfigMap).Data)
	secret := f.secret()
	require.Equal(t, "streamer", string(secret.Data[names.SecretKeyReplicationUsername]))
	require.True(t, strings.HasPrefix(string(secret.Data[names.SecretKeyURI]), "testdb://app:"), string(secret.Data[names.SecretKeyURI]))
	require.True(t, strings.HasSuffix(string(secret.Data[names.SecretKeyURI]), "@my-database.production.svc.cluster.local:7000/my_database"))

	// The Pods run: my-database-0, the primary, without the replication user yet; the
	// replicas stream from nothing.
	f.createClaims(3)
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	f.addPods(3)
	servers.set(0, testServer{writable: true, position: 100})
	servers.set(1, testServer{position: 100})
	servers.set(2, testServer{position: 100})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"set-user 10.0.0.1 streamer", "set-source 10.0.0.2 my-database-0", "set-source 10.0.0.3 my-database-0"}, servers.recorded())
	_, err = f.reconcile()
	require.NoError(t, err)
	got := f.database()
	require.Equal(t, "my-database-0", got.Status.Primary)
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	require.Equal(t, metav1.ConditionTrue, condition(got, "Replicating").Status)
	require.Equal(t, "every replica streams from my-database-0", condition(got, "Replicating").Message)
	require.Equal(t, []examplev1.DatabaseMember{
		{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "my-database-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)},
		{Name: "my-database-2", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)},
	}, got.Status.Members)

	// A switchover to my-database-1: recorded, then my-database-0 fenced (its Pod stopped,
	// the ConfigMap naming my-database-1), then my-database-1 promoted once it holds
	// my-database-0's log.
	switchovers := counted(t, "database_switchovers_total", f.database())
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.SwitchoverStepPreparing, f.database().Status.SwitchoverProgress.Step)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.NotNil(t, f.pod(0).DeletionTimestamp, "my-database-0 is stopped")
	require.Equal(t, examplev1.SwitchoverStepStoppingPrimary, f.database().Status.SwitchoverProgress.Step)

	f.restartPod(0, "my-database-0-uid-2")
	servers.set(0, testServer{position: 120, source: "my-database-1"})
	servers.set(1, testServer{position: 110, source: "my-database-0"})
	_, err = f.reconcile()
	require.NoError(t, err)
	requireSwitchover(t, f.database(), "switching over from my-database-0 to my-database-1: my-database-1 is at 110, my-database-0 at 120")
	require.NotContains(t, servers.recorded(), "promote 10.0.0.2")

	servers.set(1, testServer{position: 120, source: "my-database-0", users: []string{"streamer"}})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Contains(t, servers.recorded(), "promote 10.0.0.2")
	got = f.database()
	require.Equal(t, "my-database-1", got.Status.Primary)
	require.Nil(t, got.Status.SwitchoverProgress)
	require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
	require.Contains(t, f.events(), "Normal Switchover Promoted my-database-1; my-database-0 follows it as a standby")
	require.Equal(t, switchovers+1, counted(t, "database_switchovers_total", got), "the switchover is counted once")
}
