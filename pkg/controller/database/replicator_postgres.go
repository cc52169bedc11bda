package database

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"example.com/database-apiserver/pkg/controller/postgres"
	"example.com/database-apiserver/pkg/controller/specs"
)

// Instances is how the Reconciler talks to the PostgreSQL servers of a replicating Database
// (postgres.Client); each call reaches one server.
type Instances interface {
	Observe(ctx context.Context, s postgres.Server, roles []string) (postgres.State, error)
	SetReplicationRole(ctx context.Context, s postgres.Server, role, password string) error
	SetApplicationRole(ctx context.Context, s postgres.Server, role, password string, takeOver bool) error
	SyncSlots(ctx context.Context, s postgres.Server, have map[string]bool, want, drop []string) error
	Promote(ctx context.Context, s postgres.Server) error
	SetPrimaryConnInfo(ctx context.Context, s postgres.Server, conninfo string) error
}

// postgresReplicator is PostgreSQL's replicator: streaming replication, a primary not in
// recovery, standbys streaming through a physical slot each.
type postgresReplicator struct{ instances Instances }

func (e endpoint) postgres() postgres.Server {
	return postgres.Server{Host: e.host, Port: e.port, User: e.user, Password: e.password, Database: e.database}
}

// pgState is m's postgres.State; m answered.
func pgState(m *member) *postgres.State { return m.state.(*postgres.State) }

func (r postgresReplicator) observe(ctx context.Context, e endpoint, users []string) (bool, any, error) {
	st, err := r.instances.Observe(ctx, e.postgres(), users)
	if err != nil {
		return false, nil, err
	}
	return !st.InRecovery, &st, nil
}

func (postgresReplicator) refused(err error) bool { return postgres.IsAuthenticationFailure(err) }

func (postgresReplicator) hasUser(primary *member, user string) bool {
	return slices.Contains(pgState(primary).Roles, user)
}

func (r postgresReplicator) setUser(ctx context.Context, e endpoint, user, password string) error {
	return r.instances.SetReplicationRole(ctx, e.postgres(), user, password)
}

// setSource gives the standby the primary_conninfo the setup script writes: the primary
// through specs.PrimaryHost as user with password, the Pod's name as application_name
// (pg_stat_replication's), and specs.PrimaryConnectTimeoutSeconds.
func (r postgresReplicator) setSource(ctx context.Context, p *pass, e endpoint, pod, _, user, password string) error {
	conninfo := postgres.ConnInfo(
		"host", specs.PrimaryHost(p.db, p.desired.ClusterDomain),
		"port", strconv.Itoa(int(p.desired.Recipe.Port)),
		"user", user,
		"password", password,
		"application_name", pod,
		"connect_timeout", strconv.Itoa(specs.PrimaryConnectTimeoutSeconds),
	)
	return r.instances.SetPrimaryConnInfo(ctx, e.postgres(), conninfo)
}

// syncReplica does nothing: the setup script gives every standby its primary_conninfo when
// its Pod starts, through the client Service, which follows the primary.
func (postgresReplicator) syncReplica(context.Context, *pass, endpoint, *member, string, string, string) error {
	return nil
}

// syncPrimary gives the primary the application role (syncApplicationRole), keeps on it a
// slot for every other of the sts Pods, and drops the inactive slots of the Pods past them
// (up to the most replicas validation allows) whose data claims are gone.
func (r postgresReplicator) syncPrimary(ctx context.Context, p *pass, e endpoint, primary *member, sts int32) error {
	if err := p.syncApplicationRole(ctx, e.postgres()); err != nil {
		return err
	}
	var want, drop []string
	for i := range int32(maxReplicas) {
		pod := specs.PodName(p.db, i)
		switch {
		case pod == primary.name:
		case i < sts:
			want = append(want, specs.SlotName(pod))
		case p.hasDataClaim(i):
			// A scaled-down replica's claim is kept: its slot too, so that a scale-up finds
			// the WAL it needs (up to max_slot_wal_keep_size).
		default:
			drop = append(drop, specs.SlotName(pod))
		}
	}
	return r.instances.SyncSlots(ctx, e.postgres(), pgState(primary).Slots, want, drop)
}

// follower is the primary's pg_stat_replication row of the replica (application_name is
// its Pod name): streaming in state "streaming", and its lag in bytes when reported.
func (postgresReplicator) follower(primary, replica *member) follower {
	sb, ok := pgState(primary).Standbys[replica.name]
	if !ok {
		return follower{why: "not connected to " + primary.name}
	}
	f := follower{streaming: sb.State == "streaming"}
	if !f.streaming {
		f.why = sb.State
	}
	if sb.LagBytes >= 0 {
		f.lagBytes = &sb.LagBytes
	}
	return f
}

// caughtUp: next has received (or replayed) WAL up to where old's replay ends, the end of
// its shutdown checkpoint.
func (postgresReplicator) caughtUp(next, old *member) bool {
	n := pgState(next)
	return max(n.ReceivedLSN, n.ReplayedLSN) >= pgState(old).ReplayedLSN
}

func (postgresReplicator) lacks(next, old *member) string {
	n := pgState(next)
	return fmt.Sprintf("%s has WAL up to %d, %s's ends at %d", next.name, max(n.ReceivedLSN, n.ReplayedLSN), old.name, pgState(old).ReplayedLSN)
}

func (r postgresReplicator) promote(ctx context.Context, e endpoint) error {
	return r.instances.Promote(ctx, e.postgres())
}

// detached is never true: a promoted standby leaves recovery for good (promotion removes
// standby.signal), so a restarted primary does not come back in recovery.
func (postgresReplicator) detached(*member) bool { return false }
