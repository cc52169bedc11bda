package database

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

// observer is how a pass reads the members of every engine that replicates. Each call
// reaches one server.
type observer interface {
	// observe asks the server e its state: whether it takes writes (a primary), and the
	// engine's own answer, which the other methods are given back as member.state. users
	// are the replication users a primary is asked about.
	observe(ctx context.Context, e endpoint, users []string) (writable bool, state any, err error)
	// refused reports whether err, from observe, is the server refusing the credentials.
	refused(err error) bool
	// follower is what the primary's and the replica's answers say of the replica's stream;
	// replica may not have answered.
	follower(primary, replica *member) follower
}

// replicator is the part of the replication step of an engine whose primary the controller
// picks (PostgreSQL, MySQL): how a pass reads a member's state and what it asks a primary
// and a replica to do. reconcileReplication takes the decisions (which Pod is primary, when
// a switchover may go on, what status says) the same way for each of them. Each call
// reaches one server.
type replicator interface {
	observer
	// hasUser reports whether the primary answered that the replication user exists.
	hasUser(primary *member, user string) bool
	// setUser makes user, on the primary e, the replication user with password: created,
	// or given the password when it exists.
	setUser(ctx context.Context, e endpoint, user, password string) error
	// setSource makes the replica e, the Pod named pod, stream from the primary, the Pod
	// named primary, as user with password from now on.
	setSource(ctx context.Context, p *pass, e endpoint, pod, primary, user, password string) error
	// syncReplica points the replica, which answered, at the primary when its own setup
	// does not (MySQL's replication channel), through setSource.
	syncReplica(ctx context.Context, p *pass, e endpoint, replica *member, primary, user, password string) error
	// syncPrimary does what else the primary needs for the sts Pods (PostgreSQL's slots).
	syncPrimary(ctx context.Context, p *pass, e endpoint, primary *member, sts int32) error
	// caughtUp reports whether next, a replica, holds every transaction of old, the former
	// primary now answering as a standby; lacks says what it lacks when it does not.
	caughtUp(next, old *member) bool
	lacks(next, old *member) string
	// promote makes the replica e take writes.
	promote(ctx context.Context, e endpoint) error
	// detached reports whether m, which answered as a standby, follows no primary at all.
	detached(m *member) bool
}

// follower is one replica's stream from the primary.
type follower struct {
	// streaming is true when the replica receives and applies the primary's changes.
	streaming bool
	// why says why it is not streaming ("" when it is).
	why string
	// lagBytes and lagSeconds are status.members[].lagBytes and lagSeconds: nil when the
	// engine does not report them.
	lagBytes, lagSeconds *int64
}

// endpoint is one member's server (its Pod IP and the engine port) and the credentials
// Secret's superuser.
type endpoint struct {
	host                     string
	port                     int32
	user, password, database string
}

// refusedBy reports whether o says err is a server refusing the credentials; false
// without an observer.
func refusedBy(o observer, err error) bool { return o != nil && err != nil && o.refused(err) }

// replicator is the replicator of the pass's engine, nil when the Reconciler has no client
// for it (its servers are never asked).
func (p *pass) replicator() replicator {
	r := p.r
	switch e := p.desired.Recipe.Engine; {
	case e == examplev1.EnginePostgreSQL && r.options.Instances != nil:
		return postgresReplicator{r.options.Instances}
	case e == examplev1.EngineMySQL && r.options.MySQL != nil:
		return mysqlReplicator{
			instances:       r.options.MySQL,
			replicationHost: specs.MySQLReplicationHost(p.db, p.desired),
			superuserHosts:  specs.MySQLSuperuserHosts(p.desired),
		}
	}
	return nil
}

// syncPrimary gives primary, whose server the Pods reach by server, the replication user
// (syncReplicationUser) and what else the engine needs for the sts Pods, then points every
// replica that answered at it (syncReplica).
func (p *pass) syncPrimary(ctx context.Context, r replicator, primary *member, sts int32, members []*member, server func(*member) endpoint) error {
	password, err := p.syncReplicationUser(ctx, r, primary, members, server)
	if err != nil {
		return err
	}
	if err := r.syncPrimary(ctx, p, server(primary), primary, sts); err != nil {
		return err
	}
	for _, m := range members {
		if m.name == primary.name || !m.standby() {
			continue
		}
		if err := r.syncReplica(ctx, p, server(m), m, primary.name, p.desired.Recipe.ReplicationUsername, password); err != nil {
			return fmt.Errorf("point replica %s at %s: %w", m.name, primary.name, err)
		}
	}
	return nil
}

// syncReplicationUser gives the primary the replication user with the Secret's replication
// password when it has no such user (a data directory initialised before replication was
// set up) or the password is not the one it was last given (the credentials record,
// CredentialsKeyReplication), then records it. When it changes the password of a user that existed, it first gives
// every standby that answers the new one (setSource), which it uses from then on: without it
// a standby would keep the old one, and fail to reconnect after the primary restarts. A
// standby that does not answer gets the new password from its setup when its Pod starts
// again.
//
// It returns the replication password.
func (p *pass) syncReplicationUser(ctx context.Context, r replicator, primary *member, standbys []*member, server func(*member) endpoint) (string, error) {
	db, user := p.db, p.desired.Recipe.ReplicationUsername
	secret, err := p.r.listers.Secrets.Secrets(db.Namespace).Get(names.SecretName(db))
	if err != nil {
		return "", err
	}
	password := secret.Data[names.SecretKeyReplicationPassword]
	if len(password) == 0 {
		return "", fmt.Errorf("secret %q has no %q yet", secret.Name, names.SecretKeyReplicationPassword)
	}
	given := digest(password)
	exists := r.hasUser(primary, user)
	recorded, had, err := p.recordedCredential(ctx, secret, CredentialsKeyReplication)
	if err != nil {
		return "", err
	}
	if exists && had && recorded == given {
		return string(password), nil
	}
	if err := r.setUser(ctx, server(primary), user, string(password)); err != nil {
		return "", err
	}
	if exists {
		for _, m := range standbys {
			if !m.standby() {
				continue
			}
			if err := r.setSource(ctx, p, server(m), m.name, primary.name, user, string(password)); err != nil {
				return "", fmt.Errorf("give standby %s the new replication password: %w", m.name, err)
			}
			p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Gave standby %s the new replication password", m.name)
		}
	}
	if err := p.recordCredential(ctx, secret, CredentialsKeyReplication, given); err != nil {
		return "", err
	}
	return string(password), nil
}
