package myclient

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
	Promote(ctx context.Context, s Server) error
}

// Replicator is MySQL's engine.Replicator: GTID replication, a primary that is not
// read-only, replicas (super_read_only, which their setup sets) whose default channel reads
// the primary's binary log through its stable name (names.PodHost) by auto-positioning. The
// replication user's account is of ReplicationHost, root's accounts but root@localhost
// those of SuperuserHosts.
type Replicator struct{ Instances Instances }

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

// SyncReplica points the replica at the primary when its channel is missing (a new clone, a
// former primary) or reads another server, as another user, or from another port.
func (r Replicator) SyncReplica(ctx context.Context, p engine.Pass, e engine.Endpoint, replica *engine.Member, primary, user, password string) error {
	d := p.Desired()
	src := state(replica).Source
	if src != nil && src.Host == names.PodHost(p.Database(), d.ClusterDomain, primary) && src.Port == d.Recipe.Port && src.User == user {
		return nil
	}
	if err := r.SetSource(ctx, p, e, replica.Name, primary, user, password); err != nil {
		return err
	}
	p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Pointed replica %s at %s", replica.Name, primary)
	return nil
}

// SyncPrimary gives root the accounts of SuperuserHosts, and no others but root@localhost,
// when the primary has others (SetSuperuserHosts); the replicas get them through the binary
// log. The primary keeps its binary log for binlog_expire_logs_seconds (30 days by default),
// and a new replica clones it rather than reading it from the start: nothing else to do.
func (r Replicator) SyncPrimary(ctx context.Context, p engine.Pass, e engine.Endpoint, primary *engine.Member, _ int32) error {
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

func (r Replicator) Promote(ctx context.Context, _ engine.Pass, e engine.Endpoint) error {
	return r.Instances.Promote(ctx, server(e))
}

// Detached: read-only without a replication channel. A promoted replica has none (RESET
// REPLICA ALL); when its server restarts inside its Pod, it reads the settings its setup
// wrote when the Pod started as a replica, super-read-only=ON among them.
func (Replicator) Detached(m *engine.Member) bool { return state(m).Source == nil }

func init() { engine.RegisterObserver(examplev1.EngineMySQL, NewReplicator(Client{})) }
