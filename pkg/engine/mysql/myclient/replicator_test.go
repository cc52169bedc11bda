package myclient

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// fakeInstances records the calls that change a server, one line each, and answers
// SetSemiSync with semiSync's settings for k.
type fakeInstances struct {
	calls    []string
	semiSync SemiSync
	err      error
}

func (f *fakeInstances) Observe(context.Context, Server, string, []string) (State, error) {
	return State{}, f.err
}

func (f *fakeInstances) SetReplicationUser(_ context.Context, s Server, user, host, _ string) error {
	f.calls = append(f.calls, fmt.Sprintf("SetReplicationUser %s %s@%s", s.Host, user, host))
	return f.err
}

func (f *fakeInstances) SetSuperuserHosts(_ context.Context, s Server, hosts []string) error {
	f.calls = append(f.calls, fmt.Sprintf("SetSuperuserHosts %s %q", s.Host, hosts))
	return f.err
}

func (f *fakeInstances) SetSource(_ context.Context, s Server, host string, port int32, user, _ string) error {
	f.calls = append(f.calls, fmt.Sprintf("SetSource %s %s:%d %s", s.Host, host, port, user))
	return f.err
}

func (f *fakeInstances) StopFollowing(_ context.Context, s Server) error {
	f.calls = append(f.calls, "StopFollowing "+s.Host)
	return f.err
}

func (f *fakeInstances) StartReplica(_ context.Context, s Server) error {
	f.calls = append(f.calls, "StartReplica "+s.Host)
	return f.err
}

func (f *fakeInstances) SetSemiSync(_ context.Context, s Server, k int32) ([]Setting, error) {
	f.calls = append(f.calls, fmt.Sprintf("SetSemiSync %s %d", s.Host, k))
	if f.err != nil {
		return nil, f.err
	}
	return semiSyncSettings(f.semiSync, k), nil
}

func (f *fakeInstances) Promote(_ context.Context, s Server) error {
	f.calls = append(f.calls, "Promote "+s.Host)
	return f.err
}

func (f *fakeInstances) PersistReadOnly(_ context.Context, s Server) error {
	f.calls = append(f.calls, "PersistReadOnly "+s.Host)
	return f.err
}

// fakePass is the Pass of the Database production/my-database (cluster.local, port 3306)
// that records its Events; its other calls are not made here (the nil Pass panics).
type fakePass struct {
	engine.Pass
	events []string
}

var fakeDatabase = &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"}}

func (p *fakePass) Database() *examplev1.Database { return fakeDatabase }

func (p *fakePass) Desired() engine.Desired {
	return engine.Desired{Recipe: engine.Recipe{Engine: examplev1.EngineMySQL, Port: 3306}, ClusterDomain: "cluster.local"}
}

func (p *fakePass) Event(_ context.Context, eventType, reason, format string, args ...any) {
	p.events = append(p.events, eventType+" "+reason+" "+fmt.Sprintf(format, args...))
}

func gtids(t *testing.T, s string) GTIDSet {
	t.Helper()
	set, err := ParseGTIDSet(s)
	require.NoError(t, err, s)
	return set
}

// member is the answering Pod name whose server's State is st.
func member(name string, st State) *engine.Member {
	return &engine.Member{Name: name, Answered: true, Writable: !st.ReadOnly, State: &st}
}

func TestGTIDSetUnionSubtractString(t *testing.T) {
	a := gtids(t, uuidA+":1-5:9,"+uuidB+":1-3")
	b := gtids(t, uuidA+":4-7,"+uuidB+":blue:1-2")
	require.Equal(t, gtids(t, uuidA+":1-7:9,"+uuidB+":1-3,"+uuidB+":blue:1-2"), a.Union(b))
	require.Equal(t, a.Union(b), b.Union(a))
	require.Equal(t, gtids(t, uuidA+":1-5:9,"+uuidB+":1-3"), a, "the operands are unchanged")
	require.Equal(t, a, a.Union(GTIDSet{}))

	require.Equal(t, gtids(t, uuidA+":1-3:9,"+uuidB+":1-3"), a.Subtract(b))
	require.Equal(t, gtids(t, uuidA+":6-7,"+uuidB+":blue:1-2"), b.Subtract(a))
	require.Empty(t, a.Subtract(a.Union(b)))
	require.Equal(t, gtids(t, uuidA+":1:5-6:10"), gtids(t, uuidA+":1-10").Subtract(gtids(t, uuidA+":2-4:7-9")), "holes")
	require.Equal(t, a, a.Subtract(GTIDSet{}))

	require.Equal(t, uuidA+":1-5:9,"+uuidB+":1-3,"+uuidB+":blue:1-2", a.Union(GTIDSet{uuidB + ":blue": {{1, 2}}}).String())
	require.Equal(t, a, gtids(t, a.String()))
	require.Empty(t, GTIDSet{}.String())
}

func TestHoldsCountsWhatAReplicaReceived(t *testing.T) {
	var r Replicator
	replica := func(executed, received string) *engine.Member {
		return member("r", State{ReadOnly: true, Executed: gtids(t, executed), Source: &Source{Received: gtids(t, received)}})
	}
	applied, behind := replica(uuidA+":1-10", uuidA+":1-10"), replica(uuidA+":1-6", uuidA+":1-10")
	require.True(t, r.Holds(applied, behind))
	require.True(t, r.Holds(behind, applied), "what it received counts, which Promote waits for it to apply")
	short := replica(uuidA+":1-6", uuidA+":1-9")
	require.True(t, r.Holds(behind, short))
	require.False(t, r.Holds(short, behind), "one transaction short")
	require.False(t, r.Holds(short, applied))
	require.True(t, r.Holds(short, short))
	// A replica's own errant transaction is one the others lack.
	errant := replica(uuidA+":1-6,"+uuidB+":1", uuidA+":1-6")
	require.False(t, r.Holds(behind, errant))
	require.False(t, r.Holds(errant, short), "it lacks uuidA:7-9")
	require.True(t, r.Holds(errant, replica(uuidA+":1-5", "")))
	// No channel: what it applied.
	detached := member("d", State{ReadOnly: true, Executed: gtids(t, uuidA+":1-10")})
	require.True(t, r.Holds(detached, behind))
	require.True(t, r.Holds(behind, detached))
}

func TestDivergedIsAnErrantTransaction(t *testing.T) {
	var r Replicator
	const uuidC = "5c3d8e0f-71ca-11e1-9e33-c80aa9429562"
	// The primary (uuidB) was promoted after uuidA's server, now the former primary, had
	// committed uuidA:1-10.
	primary := member("p", State{UUID: uuidB, Executed: gtids(t, uuidA+":1-10,"+uuidB+":1-4")})
	former := func(executed string) *engine.Member {
		return member("f", State{ReadOnly: true, UUID: uuidA, Executed: gtids(t, executed)})
	}
	require.False(t, r.Diverged(primary, former(uuidA+":1-10")))
	require.False(t, r.Diverged(primary, former(uuidA+":1-8")), "behind, not diverged")
	require.True(t, r.Diverged(primary, former(uuidA+":1-11")), "committed after the promotion")
	require.True(t, r.Diverged(primary, former(uuidA+":1-10,"+uuidC+":1")), "of another server the primary never had")
	require.True(t, r.Diverged(primary, former(uuidA+":1-10,"+uuidA+":blue:1")), "a tagged transaction")
	require.False(t, r.Diverged(primary, former(uuidA+":1-10,"+uuidB+":1-9")),
		"the primary's own, committed after it answered: it has every one of them")
	require.False(t, r.Diverged(primary, former(uuidA+":1-10,"+uuidB+":blue:1")))
}

func TestSemiSyncSettingsWriteWhatDiffers(t *testing.T) {
	off := SemiSync{WaitForReplicaCount: 1, WaitPoint: "AFTER_SYNC", TimeoutMillis: 10000, WaitNoReplica: true}
	max := fmt.Sprint(uint64(math.MaxUint64))
	require.Equal(t, []Setting{
		{"rpl_semi_sync_source_timeout", max},
		{"rpl_semi_sync_source_wait_for_replica_count", "2"},
		{"rpl_semi_sync_source_enabled", "ON"},
	}, semiSyncSettings(off, 2), "the plugin's defaults")
	require.Equal(t, []Setting{
		{"rpl_semi_sync_source_wait_point", "AFTER_SYNC"},
		{"rpl_semi_sync_source_wait_no_replica", "ON"},
		{"rpl_semi_sync_source_timeout", max},
		{"rpl_semi_sync_source_enabled", "ON"},
	}, semiSyncSettings(SemiSync{WaitForReplicaCount: 1, WaitPoint: "AFTER_COMMIT", TimeoutMillis: 5}, 1), "enabled last")

	on := SemiSync{Enabled: true, WaitForReplicaCount: 2, WaitPoint: "AFTER_SYNC", TimeoutMillis: math.MaxUint64, WaitNoReplica: true}
	require.Empty(t, semiSyncSettings(on, 2))
	require.Equal(t, []Setting{{"rpl_semi_sync_source_wait_for_replica_count", "1"}}, semiSyncSettings(on, 1))
	require.Equal(t, []Setting{{"rpl_semi_sync_source_enabled", "OFF"}}, semiSyncSettings(on, 0), "the rest left as it is")
	require.Empty(t, semiSyncSettings(off, 0))
	require.Equal(t, "rpl_semi_sync_source_enabled = OFF", Setting{"rpl_semi_sync_source_enabled", "OFF"}.String())
}

func TestParseSemiSync(t *testing.T) {
	none, err := parseSemiSync(map[string]string{})
	require.NoError(t, err)
	require.Nil(t, none, "the plugin is not loaded")

	values := map[string]string{
		"rpl_semi_sync_source_enabled":                "ON",
		"rpl_semi_sync_source_wait_for_replica_count": "2",
		"rpl_semi_sync_source_wait_point":             "AFTER_SYNC",
		"rpl_semi_sync_source_timeout":                "18446744073709551615",
		"rpl_semi_sync_source_wait_no_replica":        "OFF",
		"rpl_semi_sync_source_trace_level":            "32",
	}
	ss, err := parseSemiSync(values)
	require.NoError(t, err)
	require.Equal(t, &SemiSync{Enabled: true, WaitForReplicaCount: 2, WaitPoint: "AFTER_SYNC", TimeoutMillis: math.MaxUint64}, ss)

	delete(values, "rpl_semi_sync_source_wait_point")
	_, err = parseSemiSync(values)
	require.ErrorContains(t, err, "rpl_semi_sync_source_wait_point is missing")
	values["rpl_semi_sync_source_wait_point"] = "AFTER_SYNC"
	values["rpl_semi_sync_source_timeout"] = "-1"
	_, err = parseSemiSync(values)
	require.ErrorContains(t, err, "rpl_semi_sync_source_timeout")
}

func TestSetSynchronousRecordsWhatItChanged(t *testing.T) {
	ctx := context.Background()
	e := engine.Endpoint{Host: "10.0.0.1", Port: 3306, User: "root", Password: "pw"}
	f := &fakeInstances{semiSync: SemiSync{WaitForReplicaCount: 1, WaitPoint: "AFTER_SYNC", TimeoutMillis: 10000, WaitNoReplica: true}}
	p := &fakePass{}
	r := NewReplicator(f)
	// primary is the primary as it answered: the settings it had then.
	primary := func() *engine.Member {
		ss := f.semiSync
		return &engine.Member{Name: "my-database-0", Answered: true, Writable: true, State: &State{SemiSync: &ss}}
	}
	require.NoError(t, r.SetSynchronous(ctx, p, e, primary(), 1, []string{"my-database-1", "my-database-2"}))
	require.Equal(t, []string{"SetSemiSync 10.0.0.1 1"}, f.calls)
	require.Equal(t, []string{"Normal Updated Made the primary wait for 1 of the replicas my-database-1, my-database-2 to acknowledge each commit: " +
		"rpl_semi_sync_source_timeout = 18446744073709551615, rpl_semi_sync_source_enabled = ON"}, p.events)

	// Nothing to change: no Event, and the server is not asked.
	f.semiSync = SemiSync{Enabled: true, WaitForReplicaCount: 1, WaitPoint: "AFTER_SYNC", TimeoutMillis: math.MaxUint64, WaitNoReplica: true}
	p.events, f.calls = nil, nil
	require.NoError(t, r.SetSynchronous(ctx, p, e, primary(), 1, []string{"my-database-1"}))
	require.Empty(t, p.events)
	require.Empty(t, f.calls)

	require.NoError(t, r.SetSynchronous(ctx, p, e, primary(), 0, nil))
	require.Equal(t, []string{"Normal Updated Made the primary acknowledge commits without waiting for replicas: rpl_semi_sync_source_enabled = OFF"}, p.events)

	f.err = fmt.Errorf("has not loaded the semisync_source plugin")
	require.ErrorIs(t, r.SetSynchronous(ctx, p, e, &engine.Member{Name: "my-database-0", State: &State{}}, 1, nil), f.err)
}

func TestStopFollowingStopsTheReceiver(t *testing.T) {
	f := &fakeInstances{}
	require.NoError(t, NewReplicator(f).StopFollowing(context.Background(), &fakePass{}, engine.Endpoint{Host: "10.0.0.2", Port: 3306}))
	require.Equal(t, []string{"StopFollowing 10.0.0.2"}, f.calls)
}

func TestSyncReplica(t *testing.T) {
	ctx := context.Background()
	e := engine.Endpoint{Host: "10.0.0.2", Port: 3306, User: "root", Password: "pw"}
	primaryHost := names.PodHost(fakeDatabase, "cluster.local", "my-database-0")
	// The primary, my-database-0 (uuidA), and a replica reading it whose receiver is in
	// state receiving, holding executed.
	primary := member("my-database-0", State{UUID: uuidA, Executed: gtids(t, uuidA+":1-10")})
	replica := func(host, receiving, executed string, semiSync *SemiSync) *engine.Member {
		st := State{ReadOnly: true, StartsReadOnly: true, UUID: uuidB, Executed: gtids(t, executed), SemiSync: semiSync}
		if host != "" {
			st.Source = &Source{Host: host, Port: 3306, User: "replicator", Receiving: receiving, Applying: "ON"}
		}
		return member("my-database-1", st)
	}
	onlySource := &SemiSync{Enabled: true, WaitForReplicaCount: 1, WaitPoint: "AFTER_SYNC", TimeoutMillis: math.MaxUint64, WaitNoReplica: true}
	for _, c := range []struct {
		name    string
		replica *engine.Member
		calls   []string
		events  []string
		err     string
	}{
		{name: "streaming from the primary", replica: replica(primaryHost, "ON", uuidA+":1-10", nil)},
		{name: "connecting to the primary", replica: replica(primaryHost, "CONNECTING", uuidA+":1-10", nil)},
		{name: "streaming, beyond what the primary answered", replica: replica(primaryHost, "ON", uuidA+":1-12", nil)},
		{
			name: "receiver stopped", replica: replica(primaryHost, "OFF", uuidA+":1-7", nil),
			calls:  []string{"StartReplica 10.0.0.2"},
			events: []string{"Normal Updated Started the receiver of replica my-database-1 again, which follows my-database-0"},
		},
		{
			name: "no channel", replica: replica("", "", uuidA+":1-10", nil),
			calls:  []string{"SetSource 10.0.0.2 " + primaryHost + ":3306 replicator"},
			events: []string{"Normal Updated Pointed replica my-database-1 at my-database-0"},
		},
		{
			name: "reading another server", replica: replica(names.PodHost(fakeDatabase, "cluster.local", "my-database-2"), "ON", uuidA+":1-3", nil),
			calls:  []string{"SetSource 10.0.0.2 " + primaryHost + ":3306 replicator"},
			events: []string{"Normal Updated Pointed replica my-database-1 at my-database-0"},
		},
		{
			name: "a former primary with errant transactions", replica: replica("", "", uuidA+":1-10,"+uuidB+":1-2", nil),
			err: "replica my-database-1 has 2 transactions my-database-0 lacks (errant GTIDs " + uuidB + ":1-2): it is not pointed at my-database-0",
		},
		{
			name: "errant, receiver stopped", replica: replica(primaryHost, "OFF", uuidA+":1-10,"+uuidB+":1", nil),
			err: "replica my-database-1 has 1 transactions my-database-0 lacks",
		},
		{
			name: "the primary's own transactions beyond what it answered", replica: replica("", "", uuidA+":1-15", nil),
			calls:  []string{"SetSource 10.0.0.2 " + primaryHost + ":3306 replicator"},
			events: []string{"Normal Updated Pointed replica my-database-1 at my-database-0"},
		},
		{
			name: "a former primary with the source side enabled", replica: replica("", "", uuidA+":1-10", onlySource),
			calls: []string{"SetSemiSync 10.0.0.2 0", "SetSource 10.0.0.2 " + primaryHost + ":3306 replicator"},
			events: []string{
				"Normal Updated Set rpl_semi_sync_source_enabled = OFF on replica my-database-1",
				"Normal Updated Pointed replica my-database-1 at my-database-0",
			},
		},
		{
			name: "streaming, not yet made to start read-only (a clone: the setup made it read-only)",
			replica: func() *engine.Member {
				m := replica(primaryHost, "ON", uuidA+":1-10", nil)
				state(m).StartsReadOnly = false
				return m
			}(),
			calls: []string{"PersistReadOnly 10.0.0.2"},
		},
		{
			name: "streaming with the source side enabled", replica: replica(primaryHost, "ON", uuidA+":1-10", onlySource),
			calls:  []string{"SetSemiSync 10.0.0.2 0"},
			events: []string{"Normal Updated Set rpl_semi_sync_source_enabled = OFF on replica my-database-1"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, p := &fakeInstances{}, &fakePass{}
			if st := state(c.replica); st.SemiSync != nil {
				f.semiSync = *st.SemiSync
			}
			err := NewReplicator(f).SyncReplica(ctx, p, e, c.replica, primary, "replicator", "pw")
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, c.calls, f.calls)
			require.Equal(t, c.events, p.events)
		})
	}
}

// TestSyncPrimaryMakesThePrimaryStartReadOnly: a primary that would start writable is made
// to start read-only (only a promotion makes a server take writes), once; one that cannot be
// gets a Warning Event, and the rest of the pass goes on (the next tries again).
func TestSyncPrimaryMakesThePrimaryStartReadOnly(t *testing.T) {
	ctx := context.Background()
	e := engine.Endpoint{Host: "10.0.0.1", Port: 3306, User: "root", Password: "pw"}
	primary := member("my-database-0", State{UUID: uuidA, Executed: gtids(t, uuidA+":1-10"), SuperuserHosts: []string{"%"}})
	f := &fakeInstances{}
	require.NoError(t, NewReplicator(f).SyncPrimary(ctx, &fakePass{}, e, primary, 3))
	require.Equal(t, []string{"PersistReadOnly 10.0.0.1"}, f.calls)
	require.True(t, state(primary).StartsReadOnly)
	f.calls = nil
	require.NoError(t, NewReplicator(f).SyncPrimary(ctx, &fakePass{}, e, primary, 3))
	require.Empty(t, f.calls, "it starts read-only already")

	state(primary).StartsReadOnly = false
	f.err = errors.New("Error 1 (HY000): Can't create/write to file './mysqld-auto.cnf' (OS errno 28 - No space left on device)")
	p := &fakePass{}
	require.NoError(t, NewReplicator(f).SyncPrimary(ctx, p, e, primary, 3))
	require.Equal(t, []string{"PersistReadOnly 10.0.0.1"}, f.calls)
	require.Equal(t, []string{"Warning UpdateFailed Could not make my-database-0 start read-only (SET PERSIST_ONLY super_read_only = ON): " + f.err.Error()}, p.events)
	require.False(t, state(primary).StartsReadOnly, "tried again at the next pass")
}

func TestPromoteWaitsForTheApplierWithinItsBound(t *testing.T) {
	require.Equal(t, ApplyWait, applyWait(context.Background(), ApplyWait))
	require.Less(t, ApplyWait, IOTimeout, "the driver would give up reading the answer first")
	soon, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w := applyWait(soon, ApplyWait)
	require.True(t, w > 0 && w <= time.Second, "%v: the context's deadline is sooner", w)
	later, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	require.Equal(t, ApplyWait, applyWait(later, ApplyWait))
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	require.LessOrEqual(t, applyWait(past, ApplyWait), time.Duration(0))

	require.NoError(t, applied(sql.NullInt64{Int64: 0, Valid: true}, ApplyWait))
	err := applied(sql.NullInt64{Int64: 1, Valid: true}, ApplyWait)
	require.ErrorContains(t, err, "did not apply every transaction it received within 8s")
	require.Error(t, applied(sql.NullInt64{}, ApplyWait))
	require.Error(t, applied(sql.NullInt64{Int64: 2, Valid: true}, ApplyWait))

	f := &fakeInstances{}
	require.NoError(t, NewReplicator(f).Promote(context.Background(), &fakePass{}, engine.Endpoint{Host: "10.0.0.3", Port: 3306}))
	require.Equal(t, []string{"Promote 10.0.0.3"}, f.calls)
}
