package pgclient

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/postgresql"
)

// recordingInstances is a FailoverInstances that records the failover calls, "<call> <host>
// <argument>", and fails none.
type recordingInstances struct {
	Client
	calls []string
}

func (ri *recordingInstances) StopFollowing(_ context.Context, s Server) error {
	ri.calls = append(ri.calls, "StopFollowing "+s.Host)
	return nil
}

func (ri *recordingInstances) Follow(_ context.Context, s Server, conninfo string) error {
	ri.calls = append(ri.calls, "Follow "+s.Host+" "+conninfo)
	return nil
}

func (ri *recordingInstances) SetSynchronousStandbyNames(_ context.Context, s Server, value string) error {
	ri.calls = append(ri.calls, "SetSynchronousStandbyNames "+s.Host+" "+value)
	return nil
}

// pass is the engine.Pass of a Database my-database in production; it records Events.
type pass struct {
	engine.Pass
	events []string
}

func (*pass) Database() *examplev1.Database {
	return &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"}}
}

func (*pass) Desired() engine.Desired {
	return engine.Desired{Recipe: postgresql.Engine{}.Recipe(), ClusterDomain: "cluster.local"}
}

func (p *pass) Event(_ context.Context, eventType, reason, format string, args ...any) {
	p.events = append(p.events, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
}

func member(name string, st State) *engine.Member {
	return &engine.Member{Name: name, Answered: true, Writable: !st.InRecovery, State: &st}
}

// standby is a standby's State on timeline tli with the history, received up to received
// and replayed up to replayed.
func standby(tli uint32, history []TimelineSwitch, received, replayed uint64) State {
	return State{InRecovery: true, Timeline: tli, History: history, ReceivedLSN: received, ReplayedLSN: replayed}
}

func TestReplicatorIsAFailoverAndSynchronous(t *testing.T) {
	var r engine.Replicator = NewReplicator(Client{})
	_, ok := r.(engine.Failover)
	require.True(t, ok)
	_, ok = r.(engine.Synchronous)
	require.True(t, ok)
	var _ Instances = Client{}
}

// Holds: on one timeline, the WAL position decides (the greater of received and replayed);
// across timelines, a replica on a later one holds one on an earlier one that stopped at or
// before the switch, and none holds a replica whose WAL went past a switch it did not take.
func TestHoldsComparesPositionsOnOneHistory(t *testing.T) {
	var r Replicator
	sw := []TimelineSwitch{{Timeline: 1, End: 1000}}
	for _, tc := range []struct {
		name string
		a, b State
		want bool
	}{
		{"same timeline, ahead by received", standby(1, nil, 500, 400), standby(1, nil, 450, 450), true},
		{"same timeline, ahead by replayed", standby(1, nil, 0, 500), standby(1, nil, 450, 300), true},
		{"same timeline, equal", standby(1, nil, 500, 500), standby(1, nil, 500, 400), true},
		{"same timeline, behind", standby(1, nil, 400, 400), standby(1, nil, 401, 0), false},
		{"later timeline, b stopped before the switch", standby(2, sw, 1500, 1500), standby(1, nil, 900, 900), true},
		{"later timeline, b stopped at the switch", standby(2, sw, 1500, 1500), standby(1, nil, 1000, 1000), true},
		{"later timeline, b went past the switch", standby(2, sw, 1500, 1500), standby(1, nil, 1001, 900), false},
		{"earlier timeline, ahead", standby(1, nil, 2000, 2000), standby(2, sw, 1500, 1500), false},
		{"earlier timeline, b at the switch with nothing after it", standby(1, nil, 1000, 1000), standby(2, sw, 1000, 1000), true},
		{"sibling timelines", standby(3, []TimelineSwitch{{1, 1000}}, 1500, 1500), standby(2, sw, 1200, 1200), false},
		{"sibling timelines, b before the fork", standby(3, []TimelineSwitch{{1, 1000}}, 1500, 1500), standby(1, nil, 800, 800), true},
		{"same timeline, switches at other points", standby(2, []TimelineSwitch{{1, 900}}, 1500, 1500), standby(2, sw, 1200, 1200), false},
		{"missing history on timeline 2", standby(2, nil, 1500, 1500), standby(1, nil, 100, 100), false},
	} {
		require.Equal(t, tc.want, r.Holds(member("a", tc.a), member("b", tc.b)), tc.name)
	}
	// The replica to promote holds every other's.
	a, b, c := member("a", standby(4, []TimelineSwitch{{1, 100}, {3, 900}}, 950, 940)),
		member("b", standby(4, []TimelineSwitch{{1, 100}, {3, 900}}, 990, 0)),
		member("c", standby(3, []TimelineSwitch{{1, 100}}, 880, 880))
	require.True(t, r.Holds(b, a))
	require.True(t, r.Holds(b, c))
	require.False(t, r.Holds(a, b))
	require.False(t, r.Holds(c, a))
}

// Diverged: a former primary on the timeline the primary branched from is diverged when its
// WAL goes past the branch point, received or replayed; one on the primary's timeline, or
// one the primary's history passes through up to where it stopped, is not; one on a newer
// timeline than the primary's is.
func TestDivergedReadsTheForkFromThePrimarysHistory(t *testing.T) {
	var r Replicator
	primary := member("db-1", State{Timeline: 3, History: []TimelineSwitch{{1, 0x3000158}, {2, 0x5000000}}})
	for _, tc := range []struct {
		name   string
		former State
		want   bool
	}{
		{"on the primary's timeline", standby(3, []TimelineSwitch{{1, 0x3000158}, {2, 0x5000000}}, 0x6000000, 0x6000000), false},
		{"on its parent, up to the switch", standby(2, []TimelineSwitch{{1, 0x3000158}}, 0x5000000, 0x4000000), false},
		{"on its parent, replayed past the switch", standby(2, []TimelineSwitch{{1, 0x3000158}}, 0, 0x5000001), true},
		{"on its parent, received past the switch", standby(2, []TimelineSwitch{{1, 0x3000158}}, 0x5000100, 0x4000000), true},
		{"on timeline 1, before its switch", standby(1, nil, 0x3000000, 0x3000000), false},
		{"on timeline 1, past its switch", standby(1, nil, 0x3000200, 0x3000200), true},
		{"on a sibling timeline of the same parent", standby(4, []TimelineSwitch{{1, 0x3000158}, {2, 0x4800000}}, 0x4900000, 0x4900000), true},
		{"on a newer timeline, no WAL past the primary's", standby(4, []TimelineSwitch{{1, 0x3000158}, {2, 0x5000000}, {3, 0x6000000}}, 0x6000000, 0x6000000), true},
	} {
		require.Equal(t, tc.want, r.Diverged(primary, member("db-0", tc.former)), tc.name)
	}
}

// A history file's lines, comments and blank lines skipped, positions as byte positions.
func TestParseHistory(t *testing.T) {
	h, err := parseHistory("1\t0/3000158\tno recovery target specified\n\n# a comment\n2\t1/A0000028\tbefore 2026-05-01\n")
	require.NoError(t, err)
	require.Equal(t, []TimelineSwitch{{1, 0x3000158}, {2, 0x1A0000028}}, h)
	for _, bad := range []string{"1\n", "x\t0/1\n", "1\t0-1\n", "1\tG/1\n"} {
		_, err := parseHistory(bad)
		require.Error(t, err, "%q", bad)
	}
	require.Equal(t, "pg_wal/0000000A.history", historyFile(10))
}

// SyncReplica resumes a replica that stopped following, with the setup script's
// primary_conninfo for it, and records an Event; a replica that follows costs no call.
func TestSyncReplicaResumesOnlyAStoppedReplica(t *testing.T) {
	ri := &recordingInstances{}
	r := NewReplicator(ri)
	p := &pass{}
	e := engine.Endpoint{Host: "10.0.0.2", Port: 5432}
	require.NoError(t, r.SyncReplica(t.Context(), p, e, member("my-database-1", standby(1, nil, 10, 10)), member("my-database-0", State{}), "replicator", "pw"))
	require.Empty(t, ri.calls)
	require.Empty(t, p.events)

	stopped := standby(1, nil, 10, 10)
	stopped.NotFollowing = true
	require.NoError(t, r.SyncReplica(t.Context(), p, e, member("my-database-1", stopped), member("my-database-0", State{}), "replicator", "pw"))
	require.Equal(t, []string{"Follow 10.0.0.2 host=my-database.production.svc.cluster.local port=5432 user=replicator " +
		"passfile=/var/lib/postgresql/data/replication.pgpass application_name=my-database-1 connect_timeout=5"}, ri.calls)
	require.Equal(t, []string{corev1.EventTypeNormal + " Updated my-database-1 streams from the primary again"}, p.events)
}

func TestStopFollowingReachesTheReplica(t *testing.T) {
	ri := &recordingInstances{}
	require.NoError(t, NewReplicator(ri).StopFollowing(t.Context(), &pass{}, engine.Endpoint{Host: "10.0.0.3"}))
	require.Equal(t, []string{"StopFollowing 10.0.0.3"}, ri.calls)
}

// SetSynchronous: ANY k of the replicas' names, sorted and quoted; empty for k 0; refused for
// a k no set of replicas can reach, before any call.
func TestSetSynchronousNamesAnyKOfTheReplicas(t *testing.T) {
	ri := &recordingInstances{}
	r := NewReplicator(ri)
	e := engine.Endpoint{Host: "10.0.0.1"}
	primary := func(names string) *engine.Member { return member("db-0", State{SynchronousStandbyNames: names}) }
	require.NoError(t, r.SetSynchronous(t.Context(), &pass{}, e, primary(""), 1, []string{"db-2", "db-1"}))
	require.NoError(t, r.SetSynchronous(t.Context(), &pass{}, e, primary(`ANY 1 ("db-1", "db-2")`), 0, []string{"db-2", "db-1"}))
	require.NoError(t, r.SetSynchronous(t.Context(), &pass{}, e, primary(""), 2, []string{"db-2", `we"ird`, "db-1"}))
	require.Equal(t, []string{
		`SetSynchronousStandbyNames 10.0.0.1 ANY 1 ("db-1", "db-2")`,
		`SetSynchronousStandbyNames 10.0.0.1 `,
		`SetSynchronousStandbyNames 10.0.0.1 ANY 2 ("db-1", "db-2", "we""ird")`,
	}, ri.calls)
	// The primary's answer has the setting already: nothing is written.
	require.NoError(t, r.SetSynchronous(t.Context(), &pass{}, e, primary(`ANY 1 ("db-1", "db-2")`), 1, []string{"db-1", "db-2"}))
	require.NoError(t, r.SetSynchronous(t.Context(), &pass{}, e, primary(""), 0, []string{"db-1", "db-2"}))
	for _, k := range []int32{-1, 3} {
		require.ErrorContains(t, r.SetSynchronous(t.Context(), &pass{}, e, primary(""), k, []string{"db-1", "db-2"}), "cannot acknowledge a commit", "k %d", k)
	}
	require.Len(t, ri.calls, 3)
}

// SetSynchronousStandbyNames and StopFollowing connect (and so can fail) before deciding
// anything: they compare with the server's own setting, read in the same session.
func TestFailoverCallsConnectFirst(t *testing.T) {
	s := Server{Host: "127.0.0.1", Port: 1, User: "postgres", Database: "postgres"}
	require.ErrorContains(t, Client{}.SetSynchronousStandbyNames(t.Context(), s, ""), "connect to 127.0.0.1:1")
	require.ErrorContains(t, Client{}.StopFollowing(t.Context(), s), "connect to 127.0.0.1:1")
	require.ErrorContains(t, Client{}.Follow(t.Context(), s, "host=x"), "connect to 127.0.0.1:1")
}

// HasUser: the replication role exists and may call pg_rewind's functions; one without them
// is given them by SetUser.
func TestHasUserRequiresTheRewindGrants(t *testing.T) {
	var r Replicator
	require.True(t, r.HasUser(member("db-0", State{Roles: []string{"replicator"}}), "replicator"))
	require.False(t, r.HasUser(member("db-0", State{Roles: []string{"replicator"}, RolesWithoutRewind: []string{"replicator"}}), "replicator"))
	require.False(t, r.HasUser(member("db-0", State{}), "replicator"))
}

// A replica's lag is the primary's pg_stat_replication row of it: bytes not replayed, and
// replay_lag in whole seconds, 0 once that is no longer shown for a replica that replayed
// everything, unknown while it is not shown for one that has not.
func TestFollowerLagIsThePrimarysViewOfTheReplica(t *testing.T) {
	primary := &engine.Member{Name: "db-0", State: &State{Standbys: map[string]Standby{
		"db-1": {State: "streaming", LagBytes: 8192, ReplayLag: 2.7},
		"db-2": {State: "streaming", LagBytes: 0, ReplayLag: -1},
		"db-3": {State: "catchup", LagBytes: 1 << 20, ReplayLag: -1},
	}}}
	follower := func(name string) engine.Follower {
		return Replicator{}.Follower(primary, &engine.Member{Name: name})
	}
	f := follower("db-1")
	require.True(t, f.Streaming)
	require.Equal(t, int64(8192), *f.LagBytes)
	require.Equal(t, int64(2), *f.LagSeconds)
	f = follower("db-2")
	require.Equal(t, int64(0), *f.LagSeconds)
	f = follower("db-3")
	require.False(t, f.Streaming)
	require.Equal(t, "catchup", f.Why)
	require.Nil(t, f.LagSeconds)
	f = follower("db-4")
	require.Equal(t, "not connected to db-0", f.Why)
	require.Nil(t, f.LagBytes)
}
