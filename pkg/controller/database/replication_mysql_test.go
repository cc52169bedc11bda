package database_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	driver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mysql/myclient"
)

// fakeMySQL plays the MySQL servers of a Database: Observe answers the State scripted for the
// server's host (a Pod IP), or an error for a host with none, its Users the users of the
// scripted "user@host" accounts of the host asked about; the other calls are recorded, in
// order, and change nothing, or fail as scripted (failOn).
type fakeMySQL struct {
	mu      sync.Mutex
	states  map[string]myclient.State
	refused map[string]bool
	// failures are the answers of the calls that fail, by "VERB HOST".
	failures map[string]error
	// calls are "set-user HOST USER@ACCOUNTHOST PASSWORD", "set-superuser-hosts HOST
	// ACCOUNTHOST...", "set-source HOST SOURCE PORT USER PASSWORD" and "promote HOST";
	// servers their Servers.
	calls   []string
	servers []myclient.Server
}

func newFakeMySQL() *fakeMySQL {
	return &fakeMySQL{states: map[string]myclient.State{}, refused: map[string]bool{}, failures: map[string]error{}}
}

// failOn makes the calls "VERB HOST" fail with err from now on (nil: they succeed again).
func (fm *fakeMySQL) failOn(verb, host string, err error) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if err == nil {
		delete(fm.failures, verb+" "+host)
		return
	}
	fm.failures[verb+" "+host] = err
}

// unset makes the Pod of ordinal not answer.
func (fm *fakeMySQL) unset(ordinal int) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	delete(fm.states, podIP(ordinal))
}

func (fm *fakeMySQL) set(ordinal int, st myclient.State) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.states[podIP(ordinal)] = st
}

func (fm *fakeMySQL) reset() {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.calls, fm.servers = nil, nil
}

func (fm *fakeMySQL) recorded() []string {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return slices.Clone(fm.calls)
}

// record records call, and answers the failure scripted for its first two words.
func (fm *fakeMySQL) record(s myclient.Server, call string) error {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	fm.calls = append(fm.calls, call)
	fm.servers = append(fm.servers, s)
	return fm.failures[verbHost(call)]
}

func (fm *fakeMySQL) Observe(_ context.Context, s myclient.Server, host string, users []string) (myclient.State, error) {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if fm.refused[s.Host] {
		return myclient.State{}, fmt.Errorf("connect to %s: %w", s.Host, &driver.MySQLError{Number: 1045, Message: "Access denied for user 'root'"})
	}
	st, ok := fm.states[s.Host]
	if !ok {
		return myclient.State{}, fmt.Errorf("connect to %s: connection refused", s.Host)
	}
	var have []string
	for _, u := range users {
		if slices.Contains(st.Users, u+"@"+host) {
			have = append(have, u)
		}
	}
	st.Users = have
	if st.Source != nil {
		src := *st.Source
		st.Source = &src
	}
	return st, nil
}

func (fm *fakeMySQL) SetReplicationUser(_ context.Context, s myclient.Server, user, host, password string) error {
	return fm.record(s, fmt.Sprintf("set-user %s %s@%s %s", s.Host, user, host, password))
}

func (fm *fakeMySQL) SetSuperuserHosts(_ context.Context, s myclient.Server, hosts []string) error {
	return fm.record(s, "set-superuser-hosts "+s.Host+" "+strings.Join(hosts, " "))
}

func (fm *fakeMySQL) SetSource(_ context.Context, s myclient.Server, host string, port int32, user, password string) error {
	return fm.record(s, fmt.Sprintf("set-source %s %s %d %s %s", s.Host, host, port, user, password))
}

func (fm *fakeMySQL) StopFollowing(_ context.Context, s myclient.Server) error {
	return fm.record(s, "stop-following "+s.Host)
}

func (fm *fakeMySQL) StartReplica(_ context.Context, s myclient.Server) error {
	return fm.record(s, "start-replica "+s.Host)
}

// SetSemiSync plays a server whose semi-synchronous replication plugin is not loaded:
// waiting for none is what it does already.
func (fm *fakeMySQL) SetSemiSync(_ context.Context, s myclient.Server, k int32) ([]myclient.Setting, error) {
	if k == 0 {
		return nil, nil
	}
	return nil, fm.record(s, fmt.Sprintf("semi-sync %s %d", s.Host, k))
}

func (fm *fakeMySQL) Promote(_ context.Context, s myclient.Server) error {
	return fm.record(s, "promote "+s.Host)
}

// PersistReadOnly records the call and, when it succeeds, makes the server answer that it
// starts read-only from then on, as a real one does.
func (fm *fakeMySQL) PersistReadOnly(_ context.Context, s myclient.Server) error {
	if err := fm.record(s, "persist-read-only "+s.Host); err != nil {
		return err
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if st, ok := fm.states[s.Host]; ok {
		st.StartsReadOnly = true
		fm.states[s.Host] = st
	}
	return nil
}

const uuid0 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

// gtids parses a GTID set of the fake servers.
func gtids(t *testing.T, s string) myclient.GTIDSet {
	t.Helper()
	set, err := myclient.ParseGTIDSet(s)
	require.NoError(t, err)
	return set
}

// podHost is the stable name of the example Database's Pod of ordinal.
func podHost(ordinal int) string {
	return podName(ordinal) + ".my-database-headless.production.svc.cluster.local"
}

// replicationAccount is the example Database's replication account, as the fake scripts it.
const replicationAccount = "replicator@%.production.svc.cluster.local"

// mysqlPrimary is a writable server with the replication account, and root's account of any
// host, as the image makes it without MYSQL_ROOT_HOST, that an earlier pass made start
// read-only.
func mysqlPrimary(t *testing.T, executed string) myclient.State {
	return myclient.State{Executed: gtids(t, executed), Users: []string{replicationAccount}, SuperuserHosts: []string{"%"}, StartsReadOnly: true}
}

// mysqlReplica is a read-only server, which an earlier pass made start read-only, whose
// channel streams from the Pod of ordinal source (-1: no channel).
func mysqlReplica(t *testing.T, executed string, source int) myclient.State {
	st := myclient.State{ReadOnly: true, StartsReadOnly: true, Executed: gtids(t, executed)}
	if source >= 0 {
		st.Source = &myclient.Source{Host: podHost(source), Port: 3306, User: "replicator", Receiving: "ON", Applying: "ON"}
	}
	return st
}

// replicatingMySQL is the example Database on MySQL 8.4 with three replicas, its children
// made, its Pods running: pod 0 the primary, pods 1 and 2 replicas streaming from it, the
// replication user given the Secret's password by an earlier pass.
func replicatingMySQL(t *testing.T) (*fixture, *fakeMySQL) {
	t.Helper()
	return replicatingMySQLWith(t, database.Options{})
}

// replicatingMySQLWith is replicatingMySQL with the Reconciler's options but MySQL.
func replicatingMySQLWith(t *testing.T, options database.Options) (*fixture, *fakeMySQL) {
	t.Helper()
	fm := newFakeMySQL()
	db := exampleDatabase()
	db.Spec.Engine, db.Spec.Version, db.Spec.Replicas = examplev1.EngineMySQL, "8.4", ptr.To[int32](3)
	options.Observers = map[examplev1.Engine]engine.Observer{examplev1.EngineMySQL: myclient.NewReplicator(fm)}
	f := newFixtureWithOptions(t, options, db)
	f.gracefulPodDeletion()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(3)
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	f.addPods(3)
	fm.set(0, mysqlPrimary(t, uuid0+":1-10"))
	fm.set(1, mysqlReplica(t, uuid0+":1-10", 0))
	fm.set(2, mysqlReplica(t, uuid0+":1-10", 0))
	f.recordReplicationPassword()
	return f, fm
}

func TestMySQLBootstrapCreatesTheUserAndPointsANewReplicaAtThePrimary(t *testing.T) {
	f, fm := replicatingMySQL(t)
	// A primary without the replication user yet, a fresh clone without a channel.
	fm.set(0, myclient.State{Executed: gtids(t, uuid0+":1-10"), SuperuserHosts: []string{"%"}})
	fm.set(1, mysqlReplica(t, uuid0+":1-10", -1))

	_, err := f.reconcile()
	require.NoError(t, err)
	secret := f.secret()
	password := string(secret.Data["replication-password"])
	require.Equal(t, []string{
		"set-user 10.0.0.1 replicator@%.production.svc.cluster.local " + password,
		"persist-read-only 10.0.0.1",
		"set-source 10.0.0.2 " + podHost(0) + " 3306 replicator " + password,
	}, fm.recorded(), "the user on the primary, which is made to start read-only from then on, then the replica without a channel; the one streaming is left alone")
	require.Equal(t, myclient.Server{Host: "10.0.0.1", Port: 3306, User: "root", Password: string(secret.Data["superuser-password"])}, fm.servers[0],
		"as root, with the Secret's superuser password")
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))
	require.Contains(t, f.events(), "Normal Updated Pointed replica my-database-1 at my-database-0")

	db := f.database()
	require.Equal(t, "my-database-0", db.Status.Primary)
	require.Equal(t, []examplev1.DatabaseMember{
		{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "my-database-1", Role: examplev1.MemberRoleReplica, Ready: true},
		{Name: "my-database-2", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true},
	}, db.Status.Members)
	require.Equal(t, "not streaming from my-database-0: my-database-1 (no replication channel)", condition(db, "Replicating").Message)

	// The replica streams now: nothing more to do, Replicating True.
	fm.set(0, mysqlPrimary(t, uuid0+":1-10"))
	fm.set(1, mysqlReplica(t, uuid0+":1-10", 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
	require.Equal(t, metav1.ConditionTrue, condition(f.database(), "Replicating").Status)

	// A receiver that cannot connect is reported with its error.
	st := mysqlReplica(t, uuid0+":1-10", 0)
	st.Source.Receiving, st.Source.LastError = "CONNECTING", "error connecting to source"
	fm.set(2, st)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "not streaming from my-database-0: my-database-2 (receiver CONNECTING, applier ON: error connecting to source)",
		condition(f.database(), "Replicating").Message)
}

// A primary whose replication user is of any host (an account made before the host was
// narrowed) gets the account of the namespace's Service domain, whatever the password
// annotation says; SetReplicationUser drops the other.
func TestMySQLNarrowsTheReplicationAccountToTheNamespace(t *testing.T) {
	f, fm := replicatingMySQL(t)
	st := mysqlPrimary(t, uuid0+":1-10")
	st.Users = []string{"replicator@%"}
	fm.set(0, st)
	_, err := f.reconcile()
	require.NoError(t, err)
	password := string(f.secret().Data["replication-password"])
	require.Equal(t, []string{"set-user 10.0.0.1 " + replicationAccount + " " + password}, fm.recorded())
}

// With superuser sources, root's accounts on the primary become those of the sources (the
// replicas follow through the binary log), and stay so; without, root keeps its account of
// any host.
func TestMySQLGivesRootTheSuperuserSourcesOnThePrimary(t *testing.T) {
	f, fm := replicatingMySQL(t)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded(), "no sources: root@%% is what the options ask for")

	f, fm = replicatingMySQLWith(t, database.Options{SuperuserSources: []netip.Prefix{
		netip.MustParsePrefix("10.245.0.1/32"), netip.MustParsePrefix("10.96.0.0/12")}})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"set-superuser-hosts 10.0.0.1 10.245.0.1 10.96.0.0/255.240.0.0"}, fm.recorded())
	require.Contains(t, f.events(), "Normal Updated Gave root the accounts of 10.245.0.1, 10.96.0.0/255.240.0.0 (it had %) on my-database-0")
	env := map[string]string{}
	for _, e := range f.statefulSet().Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, "10.245.0.1", env["MYSQL_ROOT_HOST"], "a new data directory's root account")

	st := mysqlPrimary(t, uuid0+":1-10")
	st.SuperuserHosts = []string{"10.245.0.1", "10.96.0.0/255.240.0.0"}
	fm.set(0, st)
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded())
}

func TestMySQLSwitchoverPromotesOnlyOnceTheNewPrimaryHasEveryTransaction(t *testing.T) {
	f, fm := replicatingMySQL(t)
	_, err := f.reconcile()
	require.NoError(t, err)

	// A target that does not stream from the primary: the switchover waits.
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	st := mysqlReplica(t, uuid0+":1-10", 0)
	st.Source.Receiving = "CONNECTING"
	fm.set(1, st)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.podDeletions())
	require.Equal(t, "switching over from my-database-0 to my-database-1: waiting for my-database-1 to stream from my-database-0",
		condition(f.database(), "Progressing").Message)

	// It streams: step 1 names it in the ConfigMap and stops my-database-0.
	fm.set(1, mysqlReplica(t, uuid0+":1-10", 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary())
	require.Equal(t, []string{"my-database-0 uid=my-database-0-uid"}, f.podDeletions())
	require.Empty(t, fm.recorded())

	// my-database-0 is back read-only (its setup reads the ConfigMap) having committed
	// 1-12; my-database-1 has applied 1-11 only: no promotion.
	f.restartPod(0, "my-database-0-uid-2")
	fm.set(0, mysqlReplica(t, uuid0+":1-12", -1))
	fm.set(1, mysqlReplica(t, uuid0+":1-11", 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, fm.recorded(), "no promotion while my-database-1 lacks a transaction")
	require.Equal(t, "switching over from my-database-0 to my-database-1: my-database-1 has applied 11 transactions, not every one of the 12 of my-database-0",
		condition(f.database(), "Progressing").Message)
	require.Equal(t, "my-database-0", f.database().Status.Primary)

	// It has them all: promoted, then every other replica is pointed at it.
	fm.set(1, mysqlReplica(t, uuid0+":1-12", 0))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	password := string(f.secret().Data["replication-password"])
	calls := fm.recorded()
	require.NotEmpty(t, calls)
	require.Equal(t, "promote 10.0.0.2", calls[0])
	require.Equal(t, []string{
		"set-source 10.0.0.1 " + podHost(1) + " 3306 replicator " + password,
		"set-source 10.0.0.3 " + podHost(1) + " 3306 replicator " + password,
	}, filter(calls, "set-source"), "the former primary and the other replica follow the new one")
	db := f.database()
	require.Equal(t, "my-database-1", db.Status.Primary)
	require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3))
	require.Contains(t, f.events(), "Normal Switchover Promoted my-database-1; my-database-0 follows it as a standby")
}

// A primary whose server restarted inside its Pod after its promotion reads the setup's
// settings of a replica, super-read-only among them: read-only with no channel, while nothing
// else takes writes, it is made to take writes again. A read-only server that follows
// another is not.
func TestMySQLPrimaryRestartedReadOnlyInItsPodTakesWritesAgain(t *testing.T) {
	f, fm := replicatingMySQL(t)
	fm.set(0, mysqlReplica(t, uuid0+":1-10", -1))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"promote 10.0.0.1"}, filter(fm.recorded(), "promote"))
	require.Contains(t, f.events(), "Normal Updated my-database-0, the primary, answered read-only with no primary to follow: it takes writes again")
	require.Equal(t, []string{"primary", "replica", "replica"}, f.roles(3))

	fm.set(0, mysqlReplica(t, uuid0+":1-10", 1))
	fm.reset()
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, filter(fm.recorded(), "promote"), "it follows a server: not promoted behind the controller's back")
	require.Equal(t, "", f.pod(0).Labels[specs.RoleLabel], "nor served as the primary")
}

func TestMySQLReplicasReportTheirApplyLagInSeconds(t *testing.T) {
	f, fm := replicatingMySQL(t)
	behind := mysqlReplica(t, uuid0+":1-10", 0)
	behind.Source.LagSeconds = ptr.To[int64](4)
	fm.set(1, behind)
	stopped := mysqlReplica(t, uuid0+":1-10", 0)
	stopped.Source.Receiving, stopped.Source.LagSeconds = "CONNECTING", ptr.To[int64](0)
	fm.set(2, stopped)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []examplev1.DatabaseMember{
		{Name: "my-database-0", Role: examplev1.MemberRolePrimary, Ready: true},
		{Name: "my-database-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagSeconds: ptr.To[int64](4)},
		{Name: "my-database-2", Role: examplev1.MemberRoleReplica, Ready: true, LagSeconds: ptr.To[int64](0)},
	}, f.database().Status.Members, "the lag of a replica that does not stream is reported too")

	// A replica whose channel reads another server: its lag is not behind this primary.
	elsewhere := mysqlReplica(t, uuid0+":1-10", 2)
	elsewhere.Source.LagSeconds = ptr.To[int64](9)
	fm.set(1, elsewhere)
	fm.set(2, mysqlReplica(t, uuid0+":1-10", 0))
	_, err = f.reconcile()
	require.NoError(t, err)
	members := f.database().Status.Members
	require.Nil(t, members[1].LagSeconds)
	require.Nil(t, members[2].LagSeconds, "unknown stays unset")
}

func TestMySQLMembersThatRefuseTheSecretsPasswordAreReported(t *testing.T) {
	f, fm := replicatingMySQL(t)
	fm.refused[podIP(2)] = true
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Contains(t, condition(f.database(), "Replicating").Message, "my-database-2 (refuses the Secret's password)")
	require.Equal(t, specs.RoleReplica, f.pod(2).Labels[specs.RoleLabel], "still a replica by its setup")
}

// filter is the calls that start with prefix.
func filter(calls []string, prefix string) []string {
	var out []string
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// A server that cannot be made to start read-only (SET PERSIST_ONLY fails: its disk is full;
// a new clone, whose data directory the CLONE plugin copies without mysqld-auto.cnf) gets a
// Warning Event and keeps nothing else from happening: through a switchover, every replica
// is pointed at the new primary and the promoted server is labelled primary, pass after
// pass, while that one replica's disk stays full.
func TestMySQLAReplicaThatCannotStartReadOnlyStopsNoSwitchover(t *testing.T) {
	f, fm := replicatingMySQL(t)
	_, err := f.reconcile()
	require.NoError(t, err)

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Primary = "my-database-1" })
	_, err = f.reconcile()
	require.NoError(t, err)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "my-database-1", f.configMapPrimary())

	f.restartPod(0, "my-database-0-uid-2")
	fm.set(0, mysqlReplica(t, uuid0+":1-10", -1))
	full := mysqlReplica(t, uuid0+":1-10", 0)
	full.StartsReadOnly = false
	fm.set(2, full)
	diskFull := errors.New("Error 1 (HY000): Can't create/write to file './mysqld-auto.cnf' (OS errno 28 - No space left on device)")
	fm.failOn("persist-read-only", "10.0.0.3", diskFull)
	for range 3 {
		_, err = f.reconcile()
		require.NoError(t, err)
		fm.set(1, mysqlPrimary(t, uuid0+":1-10")) // promoted
	}
	require.Equal(t, []string{"replica", "primary", "replica"}, f.roles(3), "the promoted primary serves writes")
	require.Contains(t, fm.recorded(), "set-source 10.0.0.3 "+podHost(1)+" 3306 replicator "+string(f.secret().Data["replication-password"]))
	require.Contains(t, f.events(), "Warning UpdateFailed Could not make my-database-2 start read-only (SET PERSIST_ONLY super_read_only = ON): "+diskFull.Error())
}
