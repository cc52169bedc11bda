package database

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// member is one database Pod of a replicating Database as a pass sees it; endpoint is its
// server.
type (
	member   = engine.Member
	endpoint = engine.Endpoint
)

// refusedBy reports whether o says err is a server refusing the credentials; false
// without an observer.
func refusedBy(o engine.Observer, err error) bool { return o != nil && err != nil && o.Refused(err) }

// observer is how the pass reaches the servers of its engine (Options.Observers), nil when
// the Reconciler has none for it (its servers are never asked).
func (p *pass) observer() engine.Observer {
	return p.r.options.Observers[p.desired.Recipe.Engine]
}

// replicator is the pass's engine's engine.Replicator, nil when the Reconciler has none.
func (p *pass) replicator() engine.Replicator {
	r, _ := p.observer().(engine.Replicator)
	return r
}

// replicaSet is the pass's engine's engine.ReplicaSet, nil when the Reconciler has none.
func (p *pass) replicaSet() engine.ReplicaSet {
	s, _ := p.observer().(engine.ReplicaSet)
	return s
}

// The pass is the engine.Pass its engine is given.
var _ engine.Pass = (*pass)(nil)

func (p *pass) Database() *examplev1.Database { return p.db }
func (p *pass) Desired() engine.Desired       { return p.desired }

func (p *pass) Event(ctx context.Context, eventType, reason, format string, args ...any) {
	p.r.event(ctx, p.db, eventType, reason, format, args...)
}

func (p *pass) HasDataClaim(ordinal int32) bool { return p.hasDataClaim(ordinal) }

func (p *pass) Secret() (*corev1.Secret, error) {
	return p.r.listers.Secrets.Secrets(p.db.Namespace).Get(names.SecretName(p.db))
}

func (p *pass) RecordedCredential(ctx context.Context, secret *corev1.Secret, key string) (string, bool, error) {
	return p.recordedCredential(ctx, secret, key)
}

func (p *pass) RecordCredential(ctx context.Context, secret *corev1.Secret, key, value string) error {
	return p.recordCredential(ctx, secret, key, value)
}

func (p *pass) RecordMembers(ctx context.Context, pods []string) error {
	return p.recordMembers(ctx, pods)
}

// syncPrimary gives primary, whose server the Pods reach by server, the replication user
// (syncReplicationUser) and what else the engine needs for the sts Pods, points every
// replica that answered, but those diverged or draining (a scale-down removes them: drain),
// at it (SyncReplica), then sets the replicas its commits wait for (engine.Synchronous: one
// of the other Pods but those draining with Synchronous durability, none otherwise), once
// those it can have are following it.
func (p *pass) syncPrimary(ctx context.Context, r engine.Replicator, primary *member, sts int32, members []*member, diverged, draining []string, server func(*member) endpoint) error {
	password, err := p.syncReplicationUser(ctx, r, primary, members, server)
	if err != nil {
		return err
	}
	if err := r.SyncPrimary(ctx, p, server(primary), primary, sts); err != nil {
		return err
	}
	for _, m := range members {
		if m.Name == primary.Name || !m.Replica() || slices.Contains(diverged, m.Name) || slices.Contains(draining, m.Name) {
			continue
		}
		if err := r.SyncReplica(ctx, p, server(m), m, primary, p.desired.Recipe.ReplicationUsername, password); err != nil {
			return fmt.Errorf("point replica %s at %s: %w", m.Name, primary.Name, err)
		}
	}
	if s, ok := r.(engine.Synchronous); ok {
		var k int32
		replicas := slices.DeleteFunc(replicaNames(members, primary.Name, sts), func(name string) bool { return slices.Contains(draining, name) })
		if synchronous(p.db) && len(replicas) > 0 {
			k = 1
		}
		if err := s.SetSynchronous(ctx, p, server(primary), primary, k, replicas); err != nil {
			return fmt.Errorf("set the synchronous replicas of %s: %w", primary.Name, err)
		}
	}
	return nil
}

// syncReplicationUser gives the primary the replication user with the Secret's replication
// password when it has no such user (a data directory initialised before replication was
// set up) or the password is not the one it was last given (the credentials record,
// CredentialsKeyReplication), then records it. When it changes the password of a user that
// existed, it first gives every replica that answers the new one (SetSource), which it uses
// from then on: without it a replica would keep the old one, and fail to reconnect after the
// primary restarts. A replica that does not answer gets the new password from its setup when
// its Pod starts again.
//
// It returns the replication password.
func (p *pass) syncReplicationUser(ctx context.Context, r engine.Replicator, primary *member, replicas []*member, server func(*member) endpoint) (string, error) {
	db, user := p.db, p.desired.Recipe.ReplicationUsername
	secret, err := p.Secret()
	if err != nil {
		return "", err
	}
	password := secret.Data[names.SecretKeyReplicationPassword]
	if len(password) == 0 {
		return "", fmt.Errorf("secret %q has no %q yet", secret.Name, names.SecretKeyReplicationPassword)
	}
	given := digest(password)
	exists := r.HasUser(primary, user)
	recorded, had, err := p.recordedCredential(ctx, secret, CredentialsKeyReplication)
	if err != nil {
		return "", err
	}
	if exists && had && recorded == given {
		return string(password), nil
	}
	if err := r.SetUser(ctx, p, server(primary), user, string(password)); err != nil {
		return "", err
	}
	if exists {
		for _, m := range replicas {
			if !m.Replica() {
				continue
			}
			if err := r.SetSource(ctx, p, server(m), m.Name, primary.Name, user, string(password)); err != nil {
				return "", fmt.Errorf("give standby %s the new replication password: %w", m.Name, err)
			}
			p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Gave standby %s the new replication password", m.Name)
		}
	}
	if err := p.recordCredential(ctx, secret, CredentialsKeyReplication, given); err != nil {
		return "", err
	}
	return string(password), nil
}

// draining is the names of the Pods a scale-down of a Synchronous Database removes, from
// ordinal replicas (spec.replicas) up to sts (the Pods the StatefulSet runs), but the
// primary; none for another durability.
func draining(db *examplev1.Database, members []*member, primary string, replicas, sts int32) []string {
	var names []string
	if !synchronous(db) {
		return nil
	}
	for _, m := range members[min(int(replicas), len(members)):min(int(sts), len(members))] {
		if m.Name != primary {
			names = append(names, m.Name)
		}
	}
	return names
}

// drain readies the Pods named draining for their removal: each replica among them stops
// following the primary (engine.Failover.StopFollowing), so it acknowledges no commit from
// then on, and the primary's commits no longer wait for it (syncPrimary). The replicas are
// then asked again; once, for each of them, a replica kept (an ordinal below replicas, not
// diverged) holds every transaction it holds, the scale-down may go on (Reconciler.drained), which
// heldReplicas otherwise holds: a Pod removed before that may take with it the one copy of
// a commit acknowledged to a client but the primary's. A Pod to remove that does not answer
// holds the scale-down until it does.
func (p *pass) drain(ctx context.Context, f engine.Failover, members []*member, primary string, draining, diverged []string, replicas int32, server func(*member) endpoint) error {
	var replicasOf []*member
	for _, m := range members {
		if m.Name == primary || !m.Replica() {
			continue
		}
		if slices.Contains(draining, m.Name) {
			if err := f.StopFollowing(ctx, p, server(m)); err != nil {
				return fmt.Errorf("stop %s, which a scale-down removes, following the primary: %w", m.Name, err)
			}
		}
		replicasOf = append(replicasOf, m)
	}
	p.observe(ctx, f, replicasOf, server)
	var kept []*member
	for _, m := range replicasOf {
		if ordinal, ok := specs.PodOrdinal(p.db, m.Name); ok && ordinal < replicas && m.Replica() && !slices.Contains(diverged, m.Name) {
			kept = append(kept, m)
		}
	}
	for _, name := range draining {
		i := slices.IndexFunc(replicasOf, func(m *member) bool { return m.Name == name })
		if i < 0 || !replicasOf[i].Replica() || !slices.ContainsFunc(kept, func(k *member) bool { return f.Holds(k, replicasOf[i]) }) {
			return nil
		}
	}
	if !p.r.isDrained(p.db.UID, replicas) {
		p.r.event(ctx, p.db, corev1.EventTypeNormal, ReasonUpdated, "Scaling down: every transaction of %s, stopped from following the primary, is on a replica kept",
			strings.Join(draining, ", "))
	}
	p.r.drained.set(p.db.UID, replicas)
	return nil
}

// CommitWaitLimit is how long a session of the primary may wait for replicas to
// acknowledge its commit before Ready says that writes wait: a commit waits for a round
// trip to a replica, milliseconds, and one that waits this long waits for replicas that do
// not acknowledge (none streams, or the primary does not send them its changes).
const CommitWaitLimit = 5 * time.Second

// commitsWaiting is what Ready says when sessions of primary, which answered as primary,
// have waited CommitWaitLimit or longer for replicas to acknowledge their commit, at this pass
// and the one before; "" otherwise. An engine may count a wait from before it began (a
// PostgreSQL session's statement start): a commit seen waiting at two passes, a
// RequeueAfterPrimaryCheck apart, has waited at least that.
func (p *pass) commitsWaiting(s engine.Synchronous, primary *member) string {
	n, longest := s.CommitsWaiting(primary)
	if n == 0 || longest < CommitWaitLimit {
		p.r.commitsWaited.forget(p.db.UID)
		return ""
	}
	if _, before := p.r.commitsWaited.get(p.db.UID); !before {
		p.r.commitsWaited.set(p.db.UID, struct{}{})
		return ""
	}
	sessions := "sessions of %s, the primary, wait for a replica to acknowledge their commit"
	if n == 1 {
		sessions = "session of %s, the primary, waits for a replica to acknowledge its commit"
	}
	return fmt.Sprintf("%d "+sessions+", one for %s: no write is acknowledged until a replica has it",
		n, primary.Name, longest.Round(time.Second))
}

// replicaNames is the names of the first sts of members (the Pods the StatefulSet runs) but
// primary's: the replicas a Synchronous primary's commits wait for.
func replicaNames(members []*member, primary string, sts int32) []string {
	var names []string
	for _, m := range members[:min(int(sts), len(members))] {
		if m.Name != primary {
			names = append(names, m.Name)
		}
	}
	return names
}
