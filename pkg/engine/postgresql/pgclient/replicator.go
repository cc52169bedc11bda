package pgclient

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/postgresql"
	"example.com/database-apiserver/pkg/names"
)

// Instances is how the controller talks to the PostgreSQL servers of a replicating Database
// (Client); each call reaches one server.
type Instances interface {
	Observe(ctx context.Context, s Server, roles []string) (State, error)
	SetReplicationRole(ctx context.Context, s Server, role, password string) error
	SetApplicationRole(ctx context.Context, s Server, role, password string, takeOver bool) error
	SyncSlots(ctx context.Context, s Server, have map[string]bool, want, drop []string) error
	Promote(ctx context.Context, s Server) error
	Checkpoint(ctx context.Context, s Server) error
	WritePassfile(ctx context.Context, s Server, path, user, password string) error
	StopFollowing(ctx context.Context, s Server) error
	Follow(ctx context.Context, s Server, conninfo string) error
	SetSynchronousStandbyNames(ctx context.Context, s Server, value string) error
}

// Replicator is PostgreSQL's engine.Replicator: streaming replication, a primary not in
// recovery, replicas streaming through a physical slot each. It is also an engine.Failover
// and an engine.Synchronous.
type Replicator struct{ Instances Instances }

var (
	_ engine.Replicator   = Replicator{}
	_ engine.Failover     = Replicator{}
	_ engine.Synchronous  = Replicator{}
	_ engine.Archiver     = Replicator{}
	_ engine.Statistician = Replicator{}
)

// NewReplicator is the Replicator reaching the servers through instances.
func NewReplicator(instances Instances) Replicator { return Replicator{instances} }

func server(e engine.Endpoint) Server {
	return Server{Host: e.Host, Port: e.Port, User: e.User, Password: e.Password, Database: e.Database}
}

// rewindServer is e's server in postgresql.RewindDatabase, where pg_rewind's source
// connection opens its session. EXECUTE on a function is granted in one database (each has
// its own pg_proc), so the replication role is given pg_rewind's functions, and asked
// whether it has them, there.
func rewindServer(e engine.Endpoint) Server {
	s := server(e)
	s.Database = postgresql.RewindDatabase
	return s
}

// state is m's State; m answered.
func state(m *engine.Member) *State { return m.State.(*State) }

func (r Replicator) Observe(ctx context.Context, _ engine.Pass, e engine.Endpoint, users []string) (bool, any, error) {
	st, err := r.Instances.Observe(ctx, rewindServer(e), users)
	if err != nil {
		return false, nil, err
	}
	return !st.InRecovery, &st, nil
}

func (Replicator) Refused(err error) bool { return IsAuthenticationFailure(err) }

func (Replicator) Statistics(m *engine.Member) (engine.Statistics, bool) {
	if !m.Answered || state(m).Statistics == nil {
		return engine.Statistics{}, false
	}
	return *state(m).Statistics, true
}

// HasUser: the role exists and may call pg_rewind's functions (RewindFunctions) in
// postgresql.RewindDatabase (Observe asks there); a role without them there (made before
// they were granted, or granted them in another database) is given them by SetUser.
func (Replicator) HasUser(primary *engine.Member, user string) bool {
	st := state(primary)
	return slices.Contains(st.Roles, user) && !slices.Contains(st.RolesWithoutRewind, user)
}

func (r Replicator) SetUser(ctx context.Context, _ engine.Pass, e engine.Endpoint, user, password string) error {
	return r.Instances.SetReplicationRole(ctx, rewindServer(e), user, password)
}

// SetSource gives the replica the replication password as user from now on: it writes the
// password file (ReplicationPassfile) that the primary_conninfo of the setup script
// names, which the WAL receiver reads at its next connection to the primary.
func (r Replicator) SetSource(ctx context.Context, p engine.Pass, e engine.Endpoint, _, _, user, password string) error {
	return r.Instances.WritePassfile(ctx, server(e), postgresql.ReplicationPassfile(p.Desired()), user, password)
}

// SyncReplica undoes StopFollowing: the setup script gives every replica its
// primary_conninfo when its Pod starts, through the client Service, which follows the
// primary; a replica that answered with an empty one (State.NotFollowing) is given it back
// (PrimaryConninfo, as user) and streams again, from whichever Pod the client Service routes
// to. A replica that follows is left alone: nothing is written at each pass.
func (r Replicator) SyncReplica(ctx context.Context, p engine.Pass, e engine.Endpoint, replica, _ *engine.Member, user, _ string) error {
	if !state(replica).NotFollowing {
		return nil
	}
	if err := r.Instances.Follow(ctx, server(e), postgresql.PrimaryConninfo(p.Database(), p.Desired(), user, replica.Name)); err != nil {
		return err
	}
	p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "%s streams from the primary again", replica.Name)
	return nil
}

// StopFollowing: Client.StopFollowing, which returns once the replica's WAL receiver has
// exited. Observe reports it (State.NotFollowing) until SyncReplica resumes it or the Pod
// restarts (the setup script writes primary_conninfo again).
func (r Replicator) StopFollowing(ctx context.Context, _ engine.Pass, e engine.Endpoint) error {
	return r.Instances.StopFollowing(ctx, server(e))
}

// Holds: b's WAL is a prefix of a's: a's position is at least b's, and b's position is not
// past the point where their timeline histories part (forkPoint). Positions are the greater
// of received and replayed (a standby replays all it has received, WAL it fetched on
// its own timeline included); States must be observed after StopFollowing returned, so that
// neither receives more.
func (Replicator) Holds(a, b *engine.Member) bool {
	sa, sb := state(a), state(b)
	return sa.position() >= sb.position() && sb.position() <= forkPoint(sa, sb)
}

// Rewinds: the setup script runs pg_rewind against the primary when the Pod starts.
func (Replicator) Rewinds() bool { return true }

// Diverged: former has WAL primary's history does not: its position is past the point where
// their timeline histories part (forkPoint), or its timeline is newer than primary's (a WAL
// receiver does not follow a primary whose timeline is older than its own). It is
// PostgreSQL's own rule for a standby that finds a newer timeline ("new timeline forked off
// current database system timeline before current recovery point", rescanLatestTimeLine,
// src/backend/access/transam/xlogrecovery.c), applied to the received position as well as
// the replayed one: a standby replays what it has received on its own timeline before it
// looks for a newer one. Such a server follows primary only once rewound (pg_rewind, which
// the setup script runs when its Pod starts and the primary answers) or cloned again.
//
// Two timelines of one number (two servers promoted from the same point) cannot be told apart
// by number and position; the controller promotes one server per failover.
func (Replicator) Diverged(primary, former *engine.Member) bool {
	sp, sf := state(primary), state(former)
	return sf.Timeline > sp.Timeline || sf.position() > forkPoint(sp, sf)
}

// SetSynchronous: synchronous_standby_names 'ANY k ("<pod>", ...)' on the primary e
// (SynchronousStandbyNames), empty for k 0; written and reloaded only when it differs from
// primary's answer.
func (r Replicator) SetSynchronous(ctx context.Context, _ engine.Pass, e engine.Endpoint, primary *engine.Member, k int32, replicas []string) error {
	value, err := SynchronousStandbyNames(k, replicas)
	if err != nil || value == state(primary).SynchronousStandbyNames {
		return err
	}
	return r.Instances.SetSynchronousStandbyNames(ctx, server(e), value)
}

// CommitsWaiting: the primary's sessions waiting on SyncRep (State.CommitsWaiting).
func (Replicator) CommitsWaiting(primary *engine.Member) (int, time.Duration) {
	st := state(primary)
	return st.CommitsWaiting, st.LongestCommitWait
}

// Archiving is what primary's pg_stat_archiver says (State.LastArchived,
// LastArchiveFailed, LastFailedWAL).
func (Replicator) Archiving(primary *engine.Member) engine.Archiving {
	st := state(primary)
	return engine.Archiving{Last: st.LastArchived, Failed: st.LastArchiveFailed, FailedWhat: st.LastFailedWAL}
}

// SynchronousStandbyNames is the synchronous_standby_names that makes a primary acknowledge a
// commit once any k of the standbys named replicas (their application_name, the Pod name)
// have flushed it: 'ANY k ("<name>", ...)', the names sorted and each in double quotes (" in
// a name doubled), or the empty string for k 0 (no wait)
// (https://www.postgresql.org/docs/current/runtime-config-replication.html#GUC-SYNCHRONOUS-STANDBY-NAMES).
// It fails for k below 0 or above the number of replicas: such a primary would never
// acknowledge a commit.
func SynchronousStandbyNames(k int32, replicas []string) (string, error) {
	if k == 0 {
		return "", nil
	}
	if k < 0 || int(k) > len(replicas) {
		return "", fmt.Errorf("synchronous standbys: %d of %d replicas cannot acknowledge a commit", k, len(replicas))
	}
	names := slices.Clone(replicas)
	slices.Sort(names)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = `"` + strings.ReplaceAll(n, `"`, `""`) + `"`
	}
	return fmt.Sprintf("ANY %d (%s)", k, strings.Join(quoted, ", ")), nil
}

// position is the end of the WAL s holds: the greater of received and replayed.
func (s *State) position() uint64 { return max(s.ReceivedLSN, s.ReplayedLSN) }

// timelineSpan is one stretch of a server's WAL history: timeline, up to the position end
// (exclusive; the next span starts there).
type timelineSpan struct {
	timeline uint32
	end      uint64
}

// spans is s's WAL history: History's timelines, then Timeline up to no end. A server on a
// timeline above 1 whose history file is missing counts as on Timeline from the start, so
// that it parts from every other history at once.
func (s *State) spans() []timelineSpan {
	out := make([]timelineSpan, 0, len(s.History)+1)
	for _, h := range s.History {
		out = append(out, timelineSpan{h.Timeline, h.End})
	}
	return append(out, timelineSpan{s.Timeline, math.MaxUint64})
}

// forkPoint is the first WAL position at which a's and b's histories are on different
// timelines: the WAL before it is the same on both.
func forkPoint(a, b *State) uint64 {
	sa, sb := a.spans(), b.spans()
	var agreed uint64
	for i := 0; i < len(sa) && i < len(sb); i++ {
		if sa[i].timeline != sb[i].timeline {
			return agreed
		}
		if sa[i].end != sb[i].end {
			return min(sa[i].end, sb[i].end)
		}
		agreed = sa[i].end
	}
	return agreed
}

// SyncPrimary gives the primary the application role (syncApplicationRole), keeps on it a
// slot for every other of the sts Pods, and drops the inactive slots of the Pods past them
// (up to the most replicas validation allows) whose data claims are gone. A primary whose
// last checkpoint is on an older timeline than the one it writes (promoted since) is
// checkpointed: pg_rewind takes a source's timeline from its control file, and the setup
// script of a former primary waits for it before rewinding from this one.
func (r Replicator) SyncPrimary(ctx context.Context, p engine.Pass, e engine.Endpoint, primary *engine.Member, sts int32) error {
	if st := state(primary); st.CheckpointTimeline < st.Timeline {
		if err := r.Instances.Checkpoint(ctx, server(e)); err != nil {
			return err
		}
	}
	if err := r.syncApplicationRole(ctx, p, server(e)); err != nil {
		return err
	}
	db := p.Database()
	var want, drop []string
	for i := range int32(engine.MaxReplicas) {
		pod := engine.PodName(db, i)
		switch {
		case pod == primary.Name:
		case i < sts:
			want = append(want, postgresql.SlotName(pod))
		case p.HasDataClaim(i):
			// A scaled-down replica's claim is kept: its slot too, so that a scale-up finds
			// the WAL it needs (up to max_slot_wal_keep_size).
		default:
			drop = append(drop, postgresql.SlotName(pod))
		}
	}
	return r.Instances.SyncSlots(ctx, server(e), state(primary).Slots, want, drop)
}

// syncApplicationRole gives the primary s the application role of the Secret's username and
// password (Instances.SetApplicationRole: LOGIN, no superuser rights, owner of the
// Database's database) when they are not the ones it was last given (the credentials record,
// engine.CredentialsKeyApplication), then records them. The first time (nothing recorded
// yet: a new Database, or a Secret whose username was the superuser) the role also takes
// over the superuser's objects in the database, which the clients made while they connected
// as the superuser.
func (r Replicator) syncApplicationRole(ctx context.Context, p engine.Pass, s Server) error {
	secret, err := p.Secret()
	if err != nil {
		return err
	}
	user, password := secret.Data[names.SecretKeyUsername], secret.Data[names.SecretKeyPassword]
	if len(user) == 0 || len(password) == 0 || len(secret.Data[names.SecretKeySuperuserPassword]) == 0 {
		// Not migrated yet as the cache has it (the pass's Secret step just did): the next pass.
		return nil
	}
	if string(user) == string(secret.Data[names.SecretKeySuperuserUsername]) {
		// Edited by hand to name the superuser: its password is the superuser's own.
		return nil
	}
	digest := ApplicationDigest(user, password)
	recorded, had, err := p.RecordedCredential(ctx, secret, engine.CredentialsKeyApplication)
	if err != nil {
		return err
	}
	if had && recorded == digest {
		return nil
	}
	if err := r.Instances.SetApplicationRole(ctx, s, string(user), string(password), !had); err != nil {
		return err
	}
	p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Gave the primary the application role %s with the Secret's password", user)
	return p.RecordCredential(ctx, secret, engine.CredentialsKeyApplication, digest)
}

// ApplicationDigest is the credentials record's engine.CredentialsKeyApplication for user
// and password.
func ApplicationDigest(user, password []byte) string {
	return engine.Digest([]byte(string(user) + "\n" + string(password)))
}

// Follower is the primary's pg_stat_replication row of the replica (application_name is
// its Pod name): streaming in state "streaming", its lag in bytes when reported, and in
// whole seconds its replay_lag, or 0 when that is no longer shown because the replica has
// replayed everything (no lag in bytes).
func (Replicator) Follower(primary, replica *engine.Member) engine.Follower {
	sb, ok := state(primary).Standbys[replica.Name]
	if !ok {
		return engine.Follower{Why: "not connected to " + primary.Name}
	}
	f := engine.Follower{Streaming: sb.State == "streaming"}
	if !f.Streaming {
		f.Why = sb.State
	}
	if sb.LagBytes >= 0 {
		f.LagBytes = &sb.LagBytes
	}
	switch {
	case sb.ReplayLag >= 0:
		f.LagSeconds = ptr.To(int64(sb.ReplayLag))
	case sb.LagBytes == 0:
		f.LagSeconds = ptr.To[int64](0)
	}
	return f
}

// CaughtUp: next has received (or replayed) WAL up to where old's replay ends, the end of
// its shutdown checkpoint.
func (Replicator) CaughtUp(next, old *engine.Member) bool {
	n := state(next)
	return max(n.ReceivedLSN, n.ReplayedLSN) >= state(old).ReplayedLSN
}

func (Replicator) Lacks(next, old *engine.Member) string {
	n := state(next)
	return fmt.Sprintf("%s has WAL up to %d, %s's ends at %d", next.Name, max(n.ReceivedLSN, n.ReplayedLSN), old.Name, state(old).ReplayedLSN)
}

func (r Replicator) Promote(ctx context.Context, _ engine.Pass, e engine.Endpoint) error {
	return r.Instances.Promote(ctx, server(e))
}

// Detached is never true: a promoted replica leaves recovery for good (promotion removes
// standby.signal), so a restarted primary does not come back in recovery.
func (Replicator) Detached(*engine.Member) bool { return false }

func init() { engine.RegisterObserver(examplev1.EnginePostgreSQL, NewReplicator(Client{})) }
