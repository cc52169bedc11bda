package mongoclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"example.com/database-apiserver/pkg/engine"
)

func host(i int) string { return Host(fmt.Sprintf("db-%d.db-headless.ns.svc", i), 27017) }

func raw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

var now = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

// serverConfig is a three-member configuration as replSetGetConfig returns it, with the
// fields the controller does not manage.
func serverConfig() bson.D {
	member := func(id int32, priority float64, zone string) bson.D {
		return bson.D{
			{Key: "_id", Value: id},
			{Key: "host", Value: host(int(id))},
			{Key: "arbiterOnly", Value: false},
			{Key: "buildIndexes", Value: true},
			{Key: "hidden", Value: false},
			{Key: "priority", Value: priority},
			{Key: "tags", Value: bson.D{{Key: "zone", Value: zone}}},
			{Key: "secondaryDelaySecs", Value: int64(0)},
			{Key: "votes", Value: int32(1)},
		}
	}
	return bson.D{
		{Key: "_id", Value: "rs0"},
		{Key: "version", Value: int32(4)},
		{Key: "term", Value: int64(3)},
		{Key: "members", Value: bson.A{member(0, 2, "a"), member(1, 1, "b"), member(2, 1, "c")}},
		{Key: "protocolVersion", Value: int64(1)},
		{Key: "writeConcernMajorityJournalDefault", Value: true},
		{Key: "settings", Value: bson.D{
			{Key: "chainingAllowed", Value: true},
			{Key: "heartbeatIntervalMillis", Value: int32(2000)},
			{Key: "electionTimeoutMillis", Value: int32(10000)},
			{Key: "getLastErrorModes", Value: bson.D{}},
			{Key: "replicaSetId", Value: bson.ObjectID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		}},
	}
}

// serverStatus is replSetGetStatus as member self of the three sees them: db-0 primary,
// db-1 a secondary 5.5 s behind, db-2 unreachable (optimeDate the epoch).
func serverStatus(self int) bson.D {
	member := func(id int, state int32, stateStr string, health float64, optime time.Time, msg string) bson.D {
		d := bson.D{
			{Key: "_id", Value: int32(id)},
			{Key: "name", Value: host(id)},
			{Key: "health", Value: health},
			{Key: "state", Value: state},
			{Key: "stateStr", Value: stateStr},
			{Key: "uptime", Value: int32(600)},
			{Key: "optime", Value: bson.D{{Key: "ts", Value: bson.Timestamp{T: uint32(optime.Unix()), I: 1}}, {Key: "t", Value: int64(3)}}},
			{Key: "optimeDate", Value: bson.NewDateTimeFromTime(optime)},
			{Key: "lastHeartbeatMessage", Value: msg},
			{Key: "syncSourceHost", Value: ""},
			{Key: "configVersion", Value: int32(4)},
			{Key: "configTerm", Value: int64(3)},
		}
		if id == self {
			d = append(d, bson.E{Key: "self", Value: true})
		}
		return d
	}
	return bson.D{
		{Key: "set", Value: "rs0"},
		{Key: "date", Value: bson.NewDateTimeFromTime(now)},
		{Key: "myState", Value: int32(1)},
		{Key: "term", Value: int64(3)},
		{Key: "heartbeatIntervalMillis", Value: int64(2000)},
		{Key: "members", Value: bson.A{
			member(0, 1, "PRIMARY", 1, now, ""),
			member(1, 2, "SECONDARY", 1, now.Add(-5500*time.Millisecond), ""),
			member(2, 8, "(not reachable/healthy)", 0, time.Unix(0, 0), "Error connecting to "+host(2)),
		}},
		{Key: "ok", Value: 1.0},
	}
}

func serverHello(self int) bson.D {
	return bson.D{
		{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.ObjectID{9}}, {Key: "counter", Value: int64(6)}}},
		{Key: "hosts", Value: bson.A{host(0), host(1), host(2)}},
		{Key: "setName", Value: "rs0"},
		{Key: "setVersion", Value: int32(4)},
		{Key: "isWritablePrimary", Value: self == 0},
		{Key: "secondary", Value: self != 0},
		{Key: "primary", Value: host(0)},
		{Key: "me", Value: host(self)},
		{Key: "maxWireVersion", Value: int32(25)},
		{Key: "ok", Value: 1.0},
	}
}

// fakeServer answers commands by name, with a reply or an error, and records them.
type fakeServer struct {
	replies map[string]bson.Raw
	errs    map[string]error
	sent    []bson.D
}

func (f *fakeServer) run(cmd bson.D) (bson.Raw, error) {
	f.sent = append(f.sent, cmd)
	if err := f.errs[cmd[0].Key]; err != nil {
		return nil, err
	}
	if r, ok := f.replies[cmd[0].Key]; ok {
		return r, nil
	}
	return nil, mongo.CommandError{Code: 59, Name: "CommandNotFound"}
}

func (f *fakeServer) names() []string {
	var names []string
	for _, c := range f.sent {
		names = append(names, c[0].Key)
	}
	return names
}

// serverStatusReply is the part of serverStatus that statistics reads, with the number
// types a mongod sends.
func serverStatusReply() bson.D {
	return bson.D{
		{Key: "connections", Value: bson.D{{Key: "current", Value: int32(7)}, {Key: "available", Value: int32(838853)}, {Key: "totalCreated", Value: int32(90)}}},
		{Key: "transactions", Value: bson.D{{Key: "totalCommitted", Value: int64(42)}, {Key: "totalAborted", Value: int64(3)}}},
		{Key: "globalLock", Value: bson.D{{Key: "currentQueue", Value: bson.D{{Key: "total", Value: int32(1)}, {Key: "readers", Value: int32(1)}}}}},
		{Key: "ok", Value: 1.0},
	}
}

// listDatabasesReply lists admin, local (the oplog's) and an application database.
func listDatabasesReply() bson.D {
	db := func(name string, size int64) bson.D {
		return bson.D{{Key: "name", Value: name}, {Key: "sizeOnDisk", Value: size}, {Key: "empty", Value: false}}
	}
	return bson.D{
		{Key: "databases", Value: bson.A{db("admin", 40960), db("local", 1<<20), db("shop", 2<<20)}},
		{Key: "totalSize", Value: float64(40960 + 1<<20 + 2<<20)},
		{Key: "ok", Value: 1.0},
	}
}

func initiatedServer(t *testing.T, self int) *fakeServer {
	return &fakeServer{replies: map[string]bson.Raw{
		"hello":            raw(t, serverHello(self)),
		"serverStatus":     raw(t, serverStatusReply()),
		"listDatabases":    raw(t, listDatabasesReply()),
		"replSetGetStatus": raw(t, serverStatus(self)),
		"replSetGetConfig": raw(t, bson.D{{Key: "config", Value: serverConfig()}, {Key: "ok", Value: 1.0}}),
	}}
}

func notYetInitialized() error {
	return mongo.CommandError{Code: 94, Name: "NotYetInitialized", Message: "no replset config has been received"}
}

func TestObservePrimary(t *testing.T) {
	f := initiatedServer(t, 0)
	st, err := observe(f.run)
	require.NoError(t, err)
	require.Equal(t, []string{"hello", "serverStatus", "listDatabases", "replSetGetStatus", "replSetGetConfig"}, f.names())
	require.Equal(t, &engine.Statistics{Connections: 7, MaxConnections: 7 + 838853, Commits: 42, Rollbacks: 3,
		DataBytes: 40960 + 2<<20, LogBytes: 1 << 20, LockWaits: 1}, st.Statistics, "local, where the oplog is, counts as the log")

	require.True(t, st.Initiated)
	require.Equal(t, "rs0", st.SetName)
	require.True(t, st.Writable)
	require.False(t, st.Secondary)
	require.Equal(t, host(0), st.Me)
	require.Equal(t, int64(3), st.Term)
	require.Equal(t, []MemberStatus{
		{Name: host(0), StateStr: "PRIMARY", Health: 1, Self: true, OptimeDate: now},
		{Name: host(1), StateStr: "SECONDARY", Health: 1, OptimeDate: now.Add(-5500 * time.Millisecond)},
		{Name: host(2), StateStr: "(not reachable/healthy)", Health: 0, LastHeartbeatMessage: "Error connecting to " + host(2)},
	}, st.Members)
	require.Equal(t, host(0), st.Primary())

	require.NotNil(t, st.Config)
	require.Equal(t, "rs0", st.Config.Name)
	require.Equal(t, int64(4), st.Config.Version)
	var members []ConfigMember
	for _, m := range st.Config.Members {
		m.doc = nil
		members = append(members, m)
	}
	require.Equal(t, []ConfigMember{
		{ID: 0, Host: host(0), Priority: 2, Votes: 1},
		{ID: 1, Host: host(1), Priority: 1, Votes: 1},
		{ID: 2, Host: host(2), Priority: 1, Votes: 1},
	}, members)
}

func TestObserveSecondary(t *testing.T) {
	st, err := observe(initiatedServer(t, 1).run)
	require.NoError(t, err)
	require.True(t, st.Initiated)
	require.False(t, st.Writable)
	require.True(t, st.Secondary)
	require.Equal(t, host(1), st.Me)
	require.Equal(t, host(0), st.Primary())
	require.True(t, st.Members[1].Self)
	require.False(t, st.Members[0].Self)
}

func TestObserveNotYetInitialized(t *testing.T) {
	f := &fakeServer{
		replies: map[string]bson.Raw{"hello": raw(t, bson.D{
			{Key: "isWritablePrimary", Value: false},
			{Key: "secondary", Value: false},
			{Key: "isreplicaset", Value: true},
			{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: bson.ObjectID{7}}, {Key: "counter", Value: int64(0)}}},
			{Key: "maxWireVersion", Value: int32(25)},
			{Key: "ok", Value: 1.0},
		})},
		errs: map[string]error{"replSetGetStatus": notYetInitialized(), "replSetGetConfig": notYetInitialized()},
	}
	st, err := observe(f.run)
	require.NoError(t, err)
	require.Equal(t, State{}, st)
	require.Equal(t, "", st.Primary())
}

// A server started without --replSet answers hello as a writable standalone and
// replSetGetStatus with NoReplicationEnabled: it is Standalone, and asked nothing more.
// (This one refuses serverStatus: it has no statistics.)
func TestObserveStandalone(t *testing.T) {
	f := &fakeServer{
		replies: map[string]bson.Raw{"hello": raw(t, bson.D{
			{Key: "isWritablePrimary", Value: true},
			{Key: "maxWireVersion", Value: int32(25)},
			{Key: "ok", Value: 1.0},
		})},
		errs: map[string]error{"replSetGetStatus": mongo.CommandError{Code: 76, Name: "NoReplicationEnabled", Message: "not running with --replSet"}},
	}
	st, err := observe(f.run)
	require.NoError(t, err)
	require.Equal(t, State{Standalone: true, Writable: true}, st, "a server that gives no statistics still answers")
	require.Equal(t, []string{"hello", "serverStatus", "replSetGetStatus"}, f.names())
}

func TestObserveRemovedMember(t *testing.T) {
	f := initiatedServer(t, 2)
	f.errs = map[string]error{"replSetGetStatus": mongo.CommandError{Code: 93, Name: "InvalidReplicaSetConfig"}}
	st, err := observe(f.run)
	require.NoError(t, err)
	require.True(t, st.Initiated)
	require.Nil(t, st.Members)
	require.Equal(t, int64(4), st.Config.Version)
}

func TestObserveFails(t *testing.T) {
	for name, f := range map[string]*fakeServer{
		"hello":  {errs: map[string]error{"hello": errors.New("connection refused")}},
		"status": {replies: initiatedServer(t, 0).replies, errs: map[string]error{"replSetGetStatus": mongo.CommandError{Code: 13, Name: "Unauthorized"}}},
		"config": {replies: initiatedServer(t, 0).replies, errs: map[string]error{"replSetGetConfig": mongo.CommandError{Code: 13, Name: "Unauthorized"}}},
		"no config document": {replies: map[string]bson.Raw{
			"hello":            raw(t, serverHello(0)),
			"replSetGetStatus": raw(t, serverStatus(0)),
			"replSetGetConfig": raw(t, bson.D{{Key: "ok", Value: 1.0}}),
		}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := observe(f.run)
			require.Error(t, err)
		})
	}
}

func TestDecodeConfigRejectsMalformed(t *testing.T) {
	for name, mutate := range map[string]func(bson.D) bson.D{
		"no _id":         func(d bson.D) bson.D { return d[1:] },
		"no version":     func(d bson.D) bson.D { return append(bson.D{d[0]}, d[2:]...) },
		"no members":     func(d bson.D) bson.D { return append(d[:3:3], d[4:]...) },
		"member no host": func(d bson.D) bson.D { d[3].Value = bson.A{bson.D{{Key: "_id", Value: int32(0)}}}; return d },
		"member no _id":  func(d bson.D) bson.D { d[3].Value = bson.A{bson.D{{Key: "host", Value: host(0)}}}; return d },
		"member string":  func(d bson.D) bson.D { d[3].Value = bson.A{"db-0"}; return d },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeConfig(raw(t, mutate(serverConfig())))
			require.Error(t, err)
		})
	}
}

func TestDecodeConfigDefaults(t *testing.T) {
	cfg, err := decodeConfig(raw(t, bson.D{
		{Key: "_id", Value: "rs0"},
		{Key: "version", Value: int64(1)},
		{Key: "members", Value: bson.A{bson.D{{Key: "_id", Value: int32(0)}, {Key: "host", Value: host(0)}}}},
	}))
	require.NoError(t, err)
	require.Equal(t, 1.0, cfg.Members[0].Priority)
	require.Equal(t, 1, cfg.Members[0].Votes)
}

func TestConfigRoundTripKeepsUnmanagedFields(t *testing.T) {
	original := raw(t, serverConfig())
	cfg, err := decodeConfig(original)
	require.NoError(t, err)

	// Unchanged, the document written is the one read, byte for byte.
	require.Equal(t, []byte(original), []byte(raw(t, cfg.document())))

	// Changed, every field the controller does not manage keeps its value.
	next, changed := NextConfig(cfg, []string{host(0), host(1), host(2), host(3)}, host(1))
	require.True(t, changed)
	written := raw(t, next.document())
	for _, key := range []string{"term", "protocolVersion", "writeConcernMajorityJournalDefault", "settings"} {
		require.True(t, original.Lookup(key).Equal(written.Lookup(key)), key)
	}
	require.Equal(t, int32(5), written.Lookup("version").Int32())
	require.Equal(t, "rs0", written.Lookup("_id").StringValue())
	members, err := written.Lookup("members").Array().Values()
	require.NoError(t, err)
	require.Len(t, members, 4)
	for i, zone := range []string{"a", "b", "c"} {
		m := members[i].Document()
		require.Equal(t, zone, m.Lookup("tags", "zone").StringValue())
		require.Equal(t, int64(0), m.Lookup("secondaryDelaySecs").Int64())
		require.Equal(t, host(i), m.Lookup("host").StringValue())
	}
	require.Equal(t, 1.0, members[0].Document().Lookup("priority").Double())
	require.Equal(t, 2.0, members[1].Document().Lookup("priority").Double())
	added := members[3].Document()
	keys, err := added.Elements()
	require.NoError(t, err)
	require.Len(t, keys, 4)
	require.Equal(t, int32(3), added.Lookup("_id").Int32())
	require.Equal(t, host(3), added.Lookup("host").StringValue())
	require.Equal(t, int32(1), added.Lookup("votes").Int32())
	require.Equal(t, 1.0, added.Lookup("priority").Double())

	// The kept fields come back in their place when the written document is read again.
	again, err := decodeConfig(written)
	require.NoError(t, err)
	require.Equal(t, []byte(written), []byte(raw(t, again.document())))
}

func TestInitiate(t *testing.T) {
	f := &fakeServer{replies: map[string]bson.Raw{"replSetInitiate": raw(t, bson.D{{Key: "ok", Value: 1.0}})}}
	require.NoError(t, initiate(f.run, "rs0", host(0)))
	require.Equal(t, []bson.D{{{Key: "replSetInitiate", Value: bson.D{
		{Key: "_id", Value: "rs0"},
		{Key: "members", Value: bson.A{bson.D{{Key: "_id", Value: int32(0)}, {Key: "host", Value: host(0)}}}},
	}}}}, f.sent)

	already := &fakeServer{errs: map[string]error{"replSetInitiate": mongo.CommandError{Code: 23, Name: "AlreadyInitialized"}}}
	require.NoError(t, initiate(already.run, "rs0", host(0)))

	refused := &fakeServer{errs: map[string]error{"replSetInitiate": mongo.CommandError{Code: 93, Name: "InvalidReplicaSetConfig"}}}
	require.Error(t, initiate(refused.run, "rs0", host(0)))
}

func TestReconfig(t *testing.T) {
	cfg := Config{Name: "rs0", Version: 2, Members: []ConfigMember{{ID: 0, Host: host(0), Priority: 2, Votes: 1}, {ID: 1, Host: host(1), Votes: 0}}}
	f := &fakeServer{replies: map[string]bson.Raw{"replSetReconfig": raw(t, bson.D{{Key: "ok", Value: 1.0}})}}
	require.NoError(t, reconfig(f.run, cfg))
	require.Equal(t, []bson.D{{{Key: "replSetReconfig", Value: bson.D{
		{Key: "_id", Value: "rs0"},
		{Key: "version", Value: int32(2)},
		{Key: "members", Value: bson.A{
			bson.D{{Key: "_id", Value: int32(0)}, {Key: "host", Value: host(0)}, {Key: "priority", Value: 2.0}, {Key: "votes", Value: int32(1)}},
			bson.D{{Key: "_id", Value: int32(1)}, {Key: "host", Value: host(1)}, {Key: "priority", Value: 0.0}, {Key: "votes", Value: int32(0)}},
		}},
	}}}}, f.sent)

	failing := &fakeServer{errs: map[string]error{"replSetReconfig": mongo.CommandError{Code: 109, Name: "ConfigurationInProgress"}}}
	require.Error(t, reconfig(failing.run, cfg))
}

// requireOneStep fails unless next is one legal step from prev: version +1, at most one
// member added or removed, the voters changed by at most one, at most MaxVotingMembers
// voters, non-voters with priority 0, kept members with their _id, _ids unique.
func requireOneStep(t *testing.T, prev, next Config) {
	t.Helper()
	require.Equal(t, prev.Version+1, next.Version)
	before, after := map[string]ConfigMember{}, map[string]ConfigMember{}
	for _, m := range prev.Members {
		before[m.Host] = m
	}
	ids := map[int]bool{}
	voters := 0
	for _, m := range next.Members {
		after[m.Host] = m
		require.False(t, ids[m.ID], "duplicate _id %d", m.ID)
		ids[m.ID] = true
		if m.Votes > 0 {
			voters++
		} else {
			require.Zero(t, m.Priority, m.Host)
		}
		if old, ok := before[m.Host]; ok {
			require.Equal(t, old.ID, m.ID, m.Host)
		}
	}
	require.LessOrEqual(t, voters, MaxVotingMembers)
	require.GreaterOrEqual(t, voters, 1)
	membership, voting := 0, 0
	for h, m := range before {
		if n, ok := after[h]; !ok {
			membership++
			voting += m.Votes
		} else if n.Votes != m.Votes {
			voting++
		}
	}
	for h, m := range after {
		if _, ok := before[h]; !ok {
			membership++
			voting += m.Votes
		}
	}
	require.LessOrEqual(t, membership, 1, "members added or removed")
	require.LessOrEqual(t, voting, 1, "voting members changed")
}

// converge applies NextConfig until it reports no change, checking every step, and
// returns the steps.
func converge(t *testing.T, cfg Config, hosts []string, preferred string) []Config {
	t.Helper()
	var steps []Config
	for range 40 {
		next, changed := NextConfig(cfg, hosts, preferred)
		if !changed {
			require.Equal(t, cfg, next)
			return steps
		}
		requireOneStep(t, cfg, next)
		steps = append(steps, next)
		cfg = next
	}
	require.FailNow(t, "NextConfig did not converge")
	return nil
}

func initiated() Config {
	return Config{Name: "rs0", Version: 1, Members: []ConfigMember{{ID: 0, Host: host(0), Priority: 1, Votes: 1}}}
}

func hostsUpTo(n int) []string {
	var hosts []string
	for i := range n {
		hosts = append(hosts, host(i))
	}
	return hosts
}

func TestNextConfigAddsOneMemberPerStep(t *testing.T) {
	steps := converge(t, initiated(), hostsUpTo(4), host(0))
	require.Len(t, steps, 3)
	for i, s := range steps {
		require.Equal(t, int64(2+i), s.Version)
		require.Len(t, s.Members, 2+i)
	}
	require.Equal(t, []ConfigMember{
		{ID: 0, Host: host(0), Priority: 2, Votes: 1},
		{ID: 1, Host: host(1), Priority: 1, Votes: 1},
		{ID: 2, Host: host(2), Priority: 1, Votes: 1},
		{ID: 3, Host: host(3), Priority: 1, Votes: 1},
	}, steps[2].Members)
}

func TestNextConfigRemovesOneMember(t *testing.T) {
	three := Config{Name: "rs0", Version: 7, Members: []ConfigMember{
		{ID: 0, Host: host(0), Priority: 2, Votes: 1},
		{ID: 1, Host: host(1), Priority: 1, Votes: 1},
		{ID: 2, Host: host(2), Priority: 1, Votes: 1},
	}}
	steps := converge(t, three, hostsUpTo(2), host(0))
	require.Len(t, steps, 1)
	require.Equal(t, int64(8), steps[0].Version)
	require.Equal(t, three.Members[:2], steps[0].Members)
	require.Len(t, three.Members, 3, "current is not modified")
}

func TestNextConfigNoChange(t *testing.T) {
	cfg := Config{Name: "rs0", Version: 3, Members: []ConfigMember{
		{ID: 0, Host: host(0), Priority: 1, Votes: 1},
		{ID: 1, Host: host(1), Priority: 2, Votes: 1},
	}}
	next, changed := NextConfig(cfg, hostsUpTo(2), host(1))
	require.False(t, changed)
	require.Equal(t, cfg, next)
}

func TestNextConfigNineHosts(t *testing.T) {
	steps := converge(t, initiated(), hostsUpTo(9), host(3))
	require.Len(t, steps, 8)
	final := steps[len(steps)-1]
	require.Len(t, final.Members, 9)
	for i, m := range final.Members {
		require.Equal(t, i, m.ID)
		require.Equal(t, host(i), m.Host)
		switch {
		case i >= MaxVotingMembers:
			require.Equal(t, 0, m.Votes, m.Host)
			require.Equal(t, 0.0, m.Priority, m.Host)
		case i == 3:
			require.Equal(t, 1, m.Votes)
			require.Equal(t, 2.0, m.Priority)
		default:
			require.Equal(t, 1, m.Votes, m.Host)
			require.Equal(t, 1.0, m.Priority, m.Host)
		}
	}
}

func TestNextConfigMovesVotesOneAtATime(t *testing.T) {
	// Eight members with seven voters, but db-7 votes where db-6 should: a vote is taken
	// from db-7 before db-6 gets one, so no step has eight voters.
	var cfg Config
	cfg.Name, cfg.Version = "rs0", 10
	for i := range 8 {
		m := ConfigMember{ID: i, Host: host(i), Priority: 1, Votes: 1}
		if i == 6 {
			m.Priority, m.Votes = 0, 0
		}
		cfg.Members = append(cfg.Members, m)
	}
	steps := converge(t, cfg, hostsUpTo(8), "")
	require.Len(t, steps, 2)
	require.Equal(t, 0, steps[0].Members[7].Votes)
	require.Equal(t, 0, steps[0].Members[6].Votes)
	require.Equal(t, 1, steps[1].Members[6].Votes)
	require.Equal(t, 1.0, steps[1].Members[6].Priority)
}

func TestNextConfigAddsANonVoterWhenSevenVote(t *testing.T) {
	// Seven voters, db-6 missing and db-7 voting in its place: db-6 joins without a vote,
	// then db-7 gives its vote up, then db-6 gets one.
	var cfg Config
	cfg.Name, cfg.Version = "rs0", 10
	for _, i := range []int{0, 1, 2, 3, 4, 5, 7} {
		cfg.Members = append(cfg.Members, ConfigMember{ID: i, Host: host(i), Priority: 1, Votes: 1})
	}
	steps := converge(t, cfg, hostsUpTo(8), "")
	require.Len(t, steps, 3)
	require.Equal(t, ConfigMember{ID: 6, Host: host(6), Priority: 0, Votes: 0}, steps[0].Members[7])
	require.Equal(t, 0, steps[1].Members[6].Votes)
	require.Equal(t, ConfigMember{ID: 6, Host: host(6), Priority: 1, Votes: 1}, steps[2].Members[7])
}

func TestNextConfigPreferredAloneIsOneStep(t *testing.T) {
	cfg := Config{Name: "rs0", Version: 5, Members: []ConfigMember{
		{ID: 0, Host: host(0), Priority: 2, Votes: 1},
		{ID: 1, Host: host(1), Priority: 1, Votes: 1},
		{ID: 2, Host: host(2), Priority: 1, Votes: 1},
	}}
	steps := converge(t, cfg, hostsUpTo(3), host(2))
	require.Len(t, steps, 1)
	require.Equal(t, int64(6), steps[0].Version)
	require.Equal(t, []float64{1, 1, 2}, []float64{steps[0].Members[0].Priority, steps[0].Members[1].Priority, steps[0].Members[2].Priority})

	// No preferred: every voter has priority 1.
	steps = converge(t, steps[0], hostsUpTo(3), "")
	require.Len(t, steps, 1)
	for _, m := range steps[0].Members {
		require.Equal(t, 1.0, m.Priority)
	}
}

func TestNextConfigNeverRemovesTheLastVoter(t *testing.T) {
	lone := Config{Name: "rs0", Version: 2, Members: []ConfigMember{{ID: 4, Host: "old:27017", Priority: 1, Votes: 1}}}

	next, changed := NextConfig(lone, nil, "")
	require.False(t, changed)
	require.Equal(t, lone, next)

	// The replacement is added, voting, before the last voter goes.
	steps := converge(t, lone, hostsUpTo(1), "")
	require.Len(t, steps, 2)
	require.Equal(t, []ConfigMember{
		{ID: 4, Host: "old:27017", Priority: 1, Votes: 1},
		{ID: 0, Host: host(0), Priority: 1, Votes: 1},
	}, steps[0].Members)
	require.Equal(t, []ConfigMember{{ID: 0, Host: host(0), Priority: 1, Votes: 1}}, steps[1].Members)

	// The only voter not wanted and a non-voting member wanted: the vote moves first.
	withNonVoter := Config{Name: "rs0", Version: 2, Members: []ConfigMember{
		{ID: 0, Host: "old:27017", Priority: 1, Votes: 1},
		{ID: 1, Host: host(0), Priority: 0, Votes: 0},
	}}
	steps = converge(t, withNonVoter, hostsUpTo(1), "")
	require.Len(t, steps, 2)
	require.Equal(t, 1, steps[0].Members[1].Votes)
	require.Len(t, steps[0].Members, 2)
	require.Equal(t, []ConfigMember{{ID: 1, Host: host(0), Priority: 1, Votes: 1}}, steps[1].Members)
}

func TestNextConfigRemovesBeforeAdding(t *testing.T) {
	cfg := Config{Name: "rs0", Version: 3, Members: []ConfigMember{
		{ID: 0, Host: host(0), Priority: 1, Votes: 1},
		{ID: 1, Host: "old:27017", Priority: 1, Votes: 1},
	}}
	next, changed := NextConfig(cfg, hostsUpTo(3), "")
	require.True(t, changed)
	require.Equal(t, []ConfigMember{{ID: 0, Host: host(0), Priority: 1, Votes: 1}}, next.Members)

	steps := converge(t, cfg, hostsUpTo(3), "")
	require.Len(t, steps, 3)
	// The freed _id 1 is the smallest unused one, and goes to db-1.
	require.Equal(t, []ConfigMember{
		{ID: 0, Host: host(0), Priority: 1, Votes: 1},
		{ID: 1, Host: host(1), Priority: 1, Votes: 1},
		{ID: 2, Host: host(2), Priority: 1, Votes: 1},
	}, steps[2].Members)
}

func TestNextConfigRemovesNonVotersFirst(t *testing.T) {
	cfg := Config{Name: "rs0", Version: 3, Members: []ConfigMember{
		{ID: 0, Host: host(0), Priority: 1, Votes: 1},
		{ID: 1, Host: "voter:27017", Priority: 1, Votes: 1},
		{ID: 2, Host: "nonvoter:27017", Priority: 0, Votes: 0},
	}}
	next, changed := NextConfig(cfg, hostsUpTo(1), "")
	require.True(t, changed)
	require.Equal(t, cfg.Members[:2], next.Members)
}

func TestLagSecondsAndPrimary(t *testing.T) {
	st, err := observe(initiatedServer(t, 1).run)
	require.NoError(t, err)
	require.Equal(t, host(0), st.Primary())

	lag, ok := st.LagSeconds(host(1))
	require.True(t, ok)
	require.Equal(t, int64(5), lag)

	lag, ok = st.LagSeconds(host(0))
	require.True(t, ok)
	require.Equal(t, int64(0), lag)

	_, ok = st.LagSeconds(host(2)) // unreachable: no optimeDate
	require.False(t, ok)
	_, ok = st.LagSeconds("absent:27017")
	require.False(t, ok)

	// A member whose optime this server heard after the primary's is not behind.
	ahead := State{Members: []MemberStatus{
		{Name: host(0), StateStr: "PRIMARY", OptimeDate: now},
		{Name: host(1), StateStr: "SECONDARY", OptimeDate: now.Add(2 * time.Second)},
	}}
	lag, ok = ahead.LagSeconds(host(1))
	require.True(t, ok)
	require.Equal(t, int64(0), lag)

	noPrimary := State{Members: []MemberStatus{
		{Name: host(0), StateStr: "SECONDARY", OptimeDate: now},
		{Name: host(1), StateStr: "SECONDARY", OptimeDate: now},
	}}
	require.Equal(t, "", noPrimary.Primary())
	_, ok = noPrimary.LagSeconds(host(1))
	require.False(t, ok)
}

func TestIsAuthenticationFailure(t *testing.T) {
	require.True(t, IsAuthenticationFailure(mongo.CommandError{Code: 18, Name: "AuthenticationFailed"}))
	require.True(t, IsAuthenticationFailure(fmt.Errorf("observe 10.0.0.1: %w", mongo.CommandError{Code: 18})))
	// The driver's handshake error: a connection error wrapping the server's reply.
	handshake := topology.ConnectionError{ConnectionID: "db-0:27017[-1]", Wrapped: driver.Error{Code: 18, Message: "Authentication failed."}}
	require.True(t, IsAuthenticationFailure(fmt.Errorf("observe 10.0.0.1: %w", handshake)))

	require.False(t, IsAuthenticationFailure(nil))
	require.False(t, IsAuthenticationFailure(errors.New("connection refused")))
	require.False(t, IsAuthenticationFailure(mongo.CommandError{Code: 13, Name: "Unauthorized"}))
	require.False(t, IsAuthenticationFailure(topology.ConnectionError{Wrapped: errors.New("connection reset by peer")}))
}

func TestHost(t *testing.T) {
	require.Equal(t, "db-0.db-headless.ns.svc:27017", Host("db-0.db-headless.ns.svc", 27017))
	require.Equal(t, "10.244.0.7:27018", Host("10.244.0.7", 27018))
	require.Equal(t, "[fd00::7]:27017", Host("fd00::7", 27017))
}

// RenameMembers changes hosts only, one version up; without a change it answers the
// configuration as it is.
func TestRenameMembersKeepsIDsVotesAndPriorities(t *testing.T) {
	current := Config{Name: "db", Version: 7, Members: []ConfigMember{
		{ID: 0, Host: "db-0.db-headless.ns.svc:27017", Priority: 2, Votes: 1},
		{ID: 3, Host: "db-1.db-headless.ns.svc:27017", Priority: 0, Votes: 0},
	}}
	fqdn := func(h string) string { return strings.Replace(h, ".svc:", ".svc.cluster.local:", 1) }
	next, changed := RenameMembers(current, fqdn)
	require.True(t, changed)
	require.Equal(t, Config{Name: "db", Version: 8, Members: []ConfigMember{
		{ID: 0, Host: "db-0.db-headless.ns.svc.cluster.local:27017", Priority: 2, Votes: 1},
		{ID: 3, Host: "db-1.db-headless.ns.svc.cluster.local:27017", Priority: 0, Votes: 0},
	}}, next)
	require.Equal(t, "db-0.db-headless.ns.svc:27017", current.Members[0].Host, "current is left as it is")

	same, changed := RenameMembers(next, fqdn)
	require.False(t, changed)
	require.Equal(t, next, same)
}
