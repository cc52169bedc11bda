package database

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"example.com/database-apiserver/pkg/controller/mysql"
	"example.com/database-apiserver/pkg/names"
)

// MySQLInstances is how the Reconciler talks to the MySQL servers of a replicating Database
// (mysql.Client); each call reaches one server.
type MySQLInstances interface {
	Observe(ctx context.Context, s mysql.Server, host string, users []string) (mysql.State, error)
	SetReplicationUser(ctx context.Context, s mysql.Server, user, host, password string) error
	SetSuperuserHosts(ctx context.Context, s mysql.Server, hosts []string) error
	SetSource(ctx context.Context, s mysql.Server, host string, port int32, user, password string) error
	Promote(ctx context.Context, s mysql.Server) error
}

// mysqlReplicator is MySQL's replicator: GTID replication, a primary that is not read-only,
// replicas (super_read_only, which their setup sets) whose default channel reads the
// primary's binary log through its stable name (names.PodHost) by auto-positioning. The
// replication user's account is of replicationHost (specs.MySQLReplicationHost), root's
// accounts but root@localhost those of superuserHosts (specs.MySQLSuperuserHosts).
type mysqlReplicator struct {
	instances       MySQLInstances
	replicationHost string
	superuserHosts  []string
}

// mysql is the endpoint as root, whose password is the Secret's (MYSQL_ROOT_PASSWORD_FILE).
func (e endpoint) mysql() mysql.Server {
	return mysql.Server{Host: e.host, Port: e.port, User: mysql.RootUser, Password: e.password}
}

// myState is m's mysql.State; m answered.
func myState(m *member) *mysql.State { return m.state.(*mysql.State) }

func (r mysqlReplicator) observe(ctx context.Context, e endpoint, users []string) (bool, any, error) {
	st, err := r.instances.Observe(ctx, e.mysql(), r.replicationHost, users)
	if err != nil {
		return false, nil, err
	}
	return !st.ReadOnly, &st, nil
}

func (mysqlReplicator) refused(err error) bool { return mysql.IsAuthenticationFailure(err) }

func (mysqlReplicator) hasUser(primary *member, user string) bool {
	return slices.Contains(myState(primary).Users, user)
}

func (r mysqlReplicator) setUser(ctx context.Context, e endpoint, user, password string) error {
	return r.instances.SetReplicationUser(ctx, e.mysql(), user, r.replicationHost, password)
}

// setSource points the replica's default channel at the primary's stable name.
func (r mysqlReplicator) setSource(ctx context.Context, p *pass, e endpoint, _, primary, user, password string) error {
	return r.instances.SetSource(ctx, e.mysql(), names.PodHost(p.db, p.desired.ClusterDomain, primary), p.desired.Recipe.Port, user, password)
}

// syncReplica points the replica at the primary when its channel is missing (a new clone, a
// former primary) or reads another server, as another user, or from another port.
func (r mysqlReplicator) syncReplica(ctx context.Context, p *pass, e endpoint, replica *member, primary, user, password string) error {
	src := myState(replica).Source
	if src != nil && src.Host == names.PodHost(p.db, p.desired.ClusterDomain, primary) && src.Port == p.desired.Recipe.Port && src.User == user {
		return nil
	}
	if err := r.setSource(ctx, p, e, replica.name, primary, user, password); err != nil {
		return err
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonUpdated, "Pointed replica %s at %s", replica.name, primary)
	return nil
}

// syncPrimary gives root the accounts of superuserHosts, and no others but root@localhost,
// when the primary has others (SetSuperuserHosts); the replicas get them through the binary
// log. The primary keeps its binary log for binlog_expire_logs_seconds (30 days by default),
// and a new replica clones it rather than reading it from the start: nothing else to do.
func (r mysqlReplicator) syncPrimary(ctx context.Context, p *pass, e endpoint, primary *member, _ int32) error {
	have := myState(primary).SuperuserHosts
	want := slices.Sorted(slices.Values(r.superuserHosts))
	if slices.Equal(have, want) {
		return nil
	}
	if err := r.instances.SetSuperuserHosts(ctx, e.mysql(), want); err != nil {
		return fmt.Errorf("give root the accounts of %q on %s: %w", want, primary.name, err)
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonUpdated, "Gave root the accounts of %s (it had %s) on %s",
		strings.Join(want, ", "), strings.Join(have, ", "), primary.name)
	return nil
}

// follower is what the replica says of its channel: streaming when it reads from the
// primary and applies, and its apply lag in seconds (mysql.Source.LagSeconds) while its
// channel reads the primary; MySQL reports no lag in bytes.
func (mysqlReplicator) follower(primary, replica *member) follower {
	if !replica.answered {
		return follower{why: "not answering"}
	}
	src := myState(replica).Source
	switch {
	case src == nil:
		return follower{why: "no replication channel"}
	case src.Host != "" && !hostOf(src.Host, primary.name):
		return follower{why: "replicating from " + src.Host + ", not " + primary.name}
	case src.Streaming():
		return follower{streaming: true, lagSeconds: src.LagSeconds}
	case src.LastError != "":
		return follower{why: fmt.Sprintf("receiver %s, applier %s: %s", src.Receiving, src.Applying, src.LastError), lagSeconds: src.LagSeconds}
	default:
		return follower{why: fmt.Sprintf("receiver %s, applier %s", src.Receiving, src.Applying), lagSeconds: src.LagSeconds}
	}
}

// hostOf reports whether host, a replica's SOURCE_HOST, is the stable name of the Pod
// named pod (names.PodHost: "<pod>.<headless Service>...").
func hostOf(host, pod string) bool {
	return strings.HasPrefix(host, pod+".")
}

// caughtUp: next has applied every transaction old committed (GTID_SUBSET(old's
// gtid_executed, next's)), so promoting it loses none.
func (mysqlReplicator) caughtUp(next, old *member) bool {
	return myState(next).Executed.Contains(myState(old).Executed)
}

func (mysqlReplicator) lacks(next, old *member) string {
	return fmt.Sprintf("%s has applied %d transactions, not every one of the %d of %s",
		next.name, myState(next).Executed.Count(), myState(old).Executed.Count(), old.name)
}

func (r mysqlReplicator) promote(ctx context.Context, e endpoint) error {
	return r.instances.Promote(ctx, e.mysql())
}

// detached: read-only without a replication channel. A promoted replica has none (RESET
// REPLICA ALL); when its server restarts inside its Pod, it reads the settings its setup
// wrote when the Pod started as a replica, super-read-only=ON among them.
func (mysqlReplicator) detached(m *member) bool { return myState(m).Source == nil }
