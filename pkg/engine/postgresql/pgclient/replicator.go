package pgclient

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

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
	WritePassfile(ctx context.Context, s Server, path, user, password string) error
}

// Replicator is PostgreSQL's engine.Replicator: streaming replication, a primary not in
// recovery, replicas streaming through a physical slot each.
type Replicator struct{ Instances Instances }

// NewReplicator is the Replicator reaching the servers through instances.
func NewReplicator(instances Instances) Replicator { return Replicator{instances} }

func server(e engine.Endpoint) Server {
	return Server{Host: e.Host, Port: e.Port, User: e.User, Password: e.Password, Database: e.Database}
}

// state is m's State; m answered.
func state(m *engine.Member) *State { return m.State.(*State) }

func (r Replicator) Observe(ctx context.Context, _ engine.Pass, e engine.Endpoint, users []string) (bool, any, error) {
	st, err := r.Instances.Observe(ctx, server(e), users)
	if err != nil {
		return false, nil, err
	}
	return !st.InRecovery, &st, nil
}

func (Replicator) Refused(err error) bool { return IsAuthenticationFailure(err) }

func (Replicator) HasUser(primary *engine.Member, user string) bool {
	return slices.Contains(state(primary).Roles, user)
}

func (r Replicator) SetUser(ctx context.Context, _ engine.Pass, e engine.Endpoint, user, password string) error {
	return r.Instances.SetReplicationRole(ctx, server(e), user, password)
}

// SetSource gives the replica the replication password as user from now on: it writes the
// password file (ReplicationPassfile) that the primary_conninfo of the setup script
// names, which the WAL receiver reads at its next connection to the primary.
func (r Replicator) SetSource(ctx context.Context, p engine.Pass, e engine.Endpoint, _, _, user, password string) error {
	return r.Instances.WritePassfile(ctx, server(e), postgresql.ReplicationPassfile(p.Desired()), user, password)
}

// SyncReplica does nothing: the setup script gives every replica its primary_conninfo when
// its Pod starts, through the client Service, which follows the primary.
func (Replicator) SyncReplica(context.Context, engine.Pass, engine.Endpoint, *engine.Member, string, string, string) error {
	return nil
}

// SyncPrimary gives the primary the application role (syncApplicationRole), keeps on it a
// slot for every other of the sts Pods, and drops the inactive slots of the Pods past them
// (up to the most replicas validation allows) whose data claims are gone.
func (r Replicator) SyncPrimary(ctx context.Context, p engine.Pass, e engine.Endpoint, primary *engine.Member, sts int32) error {
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
// its Pod name): streaming in state "streaming", and its lag in bytes when reported.
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
