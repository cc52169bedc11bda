package myclient

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mysql"
	"example.com/database-apiserver/pkg/names"
)

// Instances is how the controller talks to the MySQL servers of a replicating Database
// (Client); each call reaches one server.
type Instances interface {
	Observe(ctx context.Context, s Server, host string, users []string) (State, error)
	SetReplicationUser(ctx context.Context, s Server, user, host, password string) error
	SetSuperuserHosts(ctx context.Context, s Server, hosts []string) error
	SetSource(ctx context.Context, s Server, host string, port int32, user, password string) error
	StopFollowing(ctx context.Context, s Server) error
	StartReplica(ctx context.Context, s Server) error
	SetSemiSync(ctx context.Context, s Server, k int32) ([]Setting, error)
	Promote(ctx context.Context, s Server) error
	PersistReadOnly(ctx context.Context, s Server) error
}

// Replicator is MySQL's engine.Replicator: GTID replication, a primary that takes writes
// (every server with data starts super_read_only, and Promote turns it off), replicas whose
// default channel reads the primary's binary log through its stable name (names.PodHost)
// by auto-positioning. The replication user's account is of ReplicationHost, root's
// accounts but root@localhost those of SuperuserHosts. It is an engine.Failover, the way
// MOCO fails a MySQL primary over with no agent in the Pod: the replicas' receivers are
// stopped, so the former primary, which may still run, gets no acknowledgement of a
// semi-synchronous commit, the replica holding every other's received transactions is
// promoted once it has applied them, and a former primary with transactions the new one
// lacks (errant GTIDs) is never pointed at it. It is an engine.Synchronous through
// semi-synchronous replication, whose plugins every server loads (the setup's settings),
// the replica side enabled: a replica acknowledges when its source asks
// (https://dev.mysql.com/doc/refman/9.7/en/replication-semisync.html).
type Replicator struct{ Instances Instances }

var (
	_ engine.Failover     = Replicator{}
	_ engine.Synchronous  = Replicator{}
	_ engine.Statistician = Replicator{}
)

// NewReplicator is the Replicator reaching the servers through instances.
func NewReplicator(instances Instances) Replicator { return Replicator{instances} }

// server is the endpoint as root, whose password is the Secret's (MYSQL_ROOT_PASSWORD_FILE).
func server(e engine.Endpoint) Server {
	return Server{Host: e.Host, Port: e.Port, User: RootUser, Password: e.Password}
}

// state is m's State; m answered.
func state(m *engine.Member) *State { return m.State.(*State) }

func (r Replicator) Observe(ctx context.Context, p engine.Pass, e engine.Endpoint, users []string) (bool, any, error) {
	st, err := r.Instances.Observe(ctx, server(e), mysql.ReplicationHost(p.Database(), p.Desired()), users)
	if err != nil {
		return false, nil, err
	}
	return !st.ReadOnly, &st, nil
}

func (Replicator) Refused(err error) bool { return IsAuthenticationFailure(err) }

func (Replicator) Statistics(m *engine.Member) (engine.Statistics, bool) {
	if !m.Answered || state(m).Statistics == nil {
		return engine.Statistics{}, false
	}
	return *state(m).Statistics, true
}

func (Replicator) HasUser(primary *engine.Member, user string) bool {
	return slices.Contains(state(primary).Users, user)
}

func (r Replicator) SetUser(ctx context.Context, p engine.Pass, e engine.Endpoint, user, password string) error {
	return r.Instances.SetReplicationUser(ctx, server(e), user, mysql.ReplicationHost(p.Database(), p.Desired()), password)
}

// SetSource points the replica's default channel at the primary's stable name.
func (r Replicator) SetSource(ctx context.Context, p engine.Pass, e engine.Endpoint, _, primary, user, password string) error {
	d := p.Desired()
	return r.Instances.SetSource(ctx, server(e), names.PodHost(p.Database(), d.ClusterDomain, primary), d.Recipe.Port, user, password)
}

// SyncReplica makes the replica, which answered, start read-only (startReadOnly) and follow
// primary, which answered as the primary:
//   - a replica with the source side of semi-synchronous replication enabled (a former
//     primary, SetSemiSync persists it) has it disabled first: its applier's commits would
//     wait for acknowledgements no replica sends;
//   - a channel that reads primary (its stable name, port and user) with its receiver not
//     stopped is left as it is;
//   - else the replica must hold no transaction primary lacks (errant), or it is not
//     touched and SyncReplica fails: following, it would keep changes the primary never
//     had, served to clients as the primary's and handed on to the others were it promoted
//     (only a new clone of the primary mends it);
//   - a channel that reads primary with its receiver stopped (StopFollowing) is started
//     again (START REPLICA);
//   - any other (missing: a new clone, a former primary; another server, user or port) is
//     pointed at primary (SetSource).
func (r Replicator) SyncReplica(ctx context.Context, p engine.Pass, e engine.Endpoint, replica, primaryMember *engine.Member, user, password string) error {
	primary, primarySt := primaryMember.Name, state(primaryMember)
	d := p.Desired()
	r.startReadOnly(ctx, p, e, replica)
	st := state(replica)
	if st.SemiSync != nil && st.SemiSync.Enabled {
		set, err := r.Instances.SetSemiSync(ctx, server(e), 0)
		if err != nil {
			return fmt.Errorf("turn the source side of semi-synchronous replication off on replica %s: %w", replica.Name, err)
		}
		p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Set %s on replica %s", settings(set), replica.Name)
	}
	src := st.Source
	reads := src != nil && src.Host == names.PodHost(p.Database(), d.ClusterDomain, primary) && src.Port == d.Recipe.Port && src.User == user
	if reads && src.Receiving != "OFF" {
		return nil
	}
	if extra := errant(primarySt, st); len(extra) > 0 {
		return fmt.Errorf("replica %s has %d transactions %s lacks (errant GTIDs %s): it is not pointed at %s", replica.Name, extra.Count(), primary, extra, primary)
	}
	if reads {
		if err := r.Instances.StartReplica(ctx, server(e)); err != nil {
			return err
		}
		p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Started the receiver of replica %s again, which follows %s", replica.Name, primary)
		return nil
	}
	if err := r.SetSource(ctx, p, e, replica.Name, primary, user, password); err != nil {
		return err
	}
	p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Pointed replica %s at %s", replica.Name, primary)
	return nil
}

// errant is the transactions replica holds that primary lacks, but those of primary's own
// server UUID: a primary has every transaction it committed itself, and those the replica
// holds beyond primary's State were committed after primary answered (each server is
// asked at its own moment).
func errant(primary, replica *State) GTIDSet {
	extra := replica.Executed.Subtract(primary.Executed)
	for key := range extra {
		if sourceUUID(key) == primary.UUID {
			delete(extra, key)
		}
	}
	return extra
}

// settings is set as "a = 1, b = ON".
func settings(set []Setting) string {
	s := make([]string, len(set))
	for i, v := range set {
		s[i] = v.String()
	}
	return strings.Join(s, ", ")
}

// startReadOnly makes the server of m, which answered, start read-only from now on
// (PersistReadOnly) when it does not yet. Every server of a Database then starts read-only,
// whatever its Pod's setup wrote when the Pod was created (a primary that initialises its
// data directory starts writable: the image's entrypoint writes its accounts), and only a
// promotion (Promote) makes one take writes, until it stops: a former primary whose
// container restarts in place, or a Pod that read a stale primary name, never takes writes
// beside the one the controller promoted. The primary the controller confirms comes back
// read-only after a restart and is promoted again (the reconciler's Detached rule).
//
// It is done as well as it can be: a server that cannot persist it (its data directory's
// file system full or read-only) gets a Warning Event, and the pass goes on, so one
// member's disk never keeps the others from being pointed at the primary or the primary
// from its label. Its option files still start it read-only unless it initialised its
// data directory as the primary; the next pass tries again.
func (r Replicator) startReadOnly(ctx context.Context, p engine.Pass, e engine.Endpoint, m *engine.Member) {
	if state(m).StartsReadOnly {
		return
	}
	if err := r.Instances.PersistReadOnly(ctx, server(e)); err != nil {
		p.Event(ctx, corev1.EventTypeWarning, engine.ReasonUpdateFailed, "Could not make %s start read-only (SET PERSIST_ONLY super_read_only = ON): %v", m.Name, err)
		return
	}
	state(m).StartsReadOnly = true
}

// SyncPrimary makes the primary start read-only at its next start (startReadOnly) and gives
// root the accounts of SuperuserHosts, and no others but root@localhost, when the primary
// has others (SetSuperuserHosts); the replicas get them through the binary log. The primary
// keeps its binary log for binlog_expire_logs_seconds (30 days by default), and a new
// replica clones it rather than reading it from the start: nothing else to do.
func (r Replicator) SyncPrimary(ctx context.Context, p engine.Pass, e engine.Endpoint, primary *engine.Member, _ int32) error {
	r.startReadOnly(ctx, p, e, primary)
	have := state(primary).SuperuserHosts
	want := slices.Sorted(slices.Values(mysql.SuperuserHosts(p.Desired())))
	if slices.Equal(have, want) {
		return nil
	}
	if err := r.Instances.SetSuperuserHosts(ctx, server(e), want); err != nil {
		return fmt.Errorf("give root the accounts of %q on %s: %w", want, primary.Name, err)
	}
	p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Gave root the accounts of %s (it had %s) on %s",
		strings.Join(want, ", "), strings.Join(have, ", "), primary.Name)
	return nil
}

// Follower is what the replica says of its channel: streaming when it reads from the
// primary and applies, and its apply lag in seconds (Source.LagSeconds) while its
// channel reads the primary; MySQL reports no lag in bytes.
func (Replicator) Follower(primary, replica *engine.Member) engine.Follower {
	if !replica.Answered {
		return engine.Follower{Why: "not answering"}
	}
	src := state(replica).Source
	switch {
	case src == nil:
		return engine.Follower{Why: "no replication channel"}
	case src.Host != "" && !hostOf(src.Host, primary.Name):
		return engine.Follower{Why: "replicating from " + src.Host + ", not " + primary.Name}
	case src.Streaming():
		return engine.Follower{Streaming: true, LagSeconds: src.LagSeconds}
	case src.LastError != "":
		return engine.Follower{Why: fmt.Sprintf("receiver %s, applier %s: %s", src.Receiving, src.Applying, src.LastError), LagSeconds: src.LagSeconds}
	default:
		return engine.Follower{Why: fmt.Sprintf("receiver %s, applier %s", src.Receiving, src.Applying), LagSeconds: src.LagSeconds}
	}
}

// hostOf reports whether host, a replica's SOURCE_HOST, is the stable name of the Pod
// named pod (names.PodHost: "<pod>.<headless Service>...").
func hostOf(host, pod string) bool {
	return strings.HasPrefix(host, pod+".")
}

// CaughtUp: next has applied every transaction old committed (GTID_SUBSET(old's
// gtid_executed, next's)), so promoting it loses none.
func (Replicator) CaughtUp(next, old *engine.Member) bool {
	return state(next).Executed.Contains(state(old).Executed)
}

func (Replicator) Lacks(next, old *engine.Member) string {
	return fmt.Sprintf("%s has applied %d transactions, not every one of the %d of %s",
		next.Name, state(next).Executed.Count(), state(old).Executed.Count(), old.Name)
}

// Promote makes the replica e take writes once it has applied every transaction it
// received (Client.Promote), and fails without promoting when it has not within ApplyWait.
func (r Replicator) Promote(ctx context.Context, _ engine.Pass, e engine.Endpoint) error {
	return r.Instances.Promote(ctx, server(e))
}

// StopFollowing stops the replica e's receiver (STOP REPLICA IO_THREAD): it acknowledges no
// more semi-synchronous commits, and its applier goes on applying what it received.
// SyncReplicaOf starts it again.
func (r Replicator) StopFollowing(ctx context.Context, _ engine.Pass, e engine.Endpoint) error {
	return r.Instances.StopFollowing(ctx, server(e))
}

// Holds: the transactions a has applied or received (the relay log's, which Promote waits
// for it to apply) include those b has applied or received.
func (Replicator) Holds(a, b *engine.Member) bool { return held(state(a)).Contains(held(state(b))) }

// held is the transactions st's server has applied or received.
func held(st *State) GTIDSet {
	if st.Source == nil {
		return st.Executed
	}
	return st.Executed.Union(st.Source.Received)
}

// Diverged: former has applied transactions primary lacks (errant GTIDs), but those of
// primary's own server UUID (errant).
func (Replicator) Diverged(primary, former *engine.Member) bool {
	return len(errant(state(primary), state(former))) > 0
}

// SetSynchronous makes the primary e wait, before acknowledging a commit, for k replicas
// to acknowledge that they have written it to their relay log; k 0 makes it not wait
// (Client.SetSemiSync, which writes only the settings that differ). Semi-synchronous
// replication names no replica: the acknowledgements of any k of the replicas connected
// count, and replicas only names them in the Event. With fewer than k replicas connected,
// commits wait (no timeout) until enough are. The settings are persisted, so a restarted
// primary has them; the controller sets them again at its next pass where they differ.
func (r Replicator) SetSynchronous(ctx context.Context, p engine.Pass, e engine.Endpoint, primary *engine.Member, k int32, replicas []string) error {
	if have := state(primary).SemiSync; (have == nil && k <= 0) || (have != nil && len(semiSyncSettings(*have, k)) == 0) {
		return nil
	}
	set, err := r.Instances.SetSemiSync(ctx, server(e), k)
	if err != nil {
		return err
	}
	switch {
	case len(set) == 0:
	case k > 0:
		p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Made the primary wait for %d of the replicas %s to acknowledge each commit: %s",
			k, strings.Join(replicas, ", "), settings(set))
	default:
		p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Made the primary acknowledge commits without waiting for replicas: %s", settings(set))
	}
	return nil
}

// CommitsWaiting: the primary's sessions waiting for semi-synchronous acknowledgements
// (State.CommitsWaiting).
func (Replicator) CommitsWaiting(primary *engine.Member) (int, time.Duration) {
	st := state(primary)
	return st.CommitsWaiting, st.LongestCommitWait
}

// Rewinds is false: MySQL cannot take back a transaction that was committed; a replica with
// errant GTIDs is cloned anew (its Pod and data claim deleted).
func (Replicator) Rewinds() bool { return false }

// Detached: read-only without a replication channel. A promoted replica has none (RESET
// REPLICA ALL); when its server restarts inside its Pod, it reads the settings its setup
// wrote when the Pod started as a replica, super-read-only=ON among them.
func (Replicator) Detached(m *engine.Member) bool { return state(m).Source == nil }

func init() { engine.RegisterObserver(examplev1.EngineMySQL, NewReplicator(Client{})) }
