package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// MaxReplicas is the most spec.replicas the API server's validation allows.
const MaxReplicas = 10

// Reasons of the Events an engine records through Pass.Event besides examplev1's.
const (
	ReasonCreated = "Created"
	ReasonUpdated = "Updated"
	// ReasonUpdateFailed: a setting the engine keeps on a server could not be made; the
	// pass goes on and the next tries again.
	ReasonUpdateFailed = "UpdateFailed"
)

// Keys of the credentials record (the controller's record, in its own namespace, of the
// credentials the servers were given), each the SHA-256 (hex, Digest) of what was given.
const (
	// CredentialsKeyApplication: "<username>\n<password>" of the application user, where
	// the controller creates it over SQL.
	CredentialsKeyApplication = "application-password-sha256"
	// CredentialsKeyReplication: the replication password the primary's replication user
	// was given.
	CredentialsKeyReplication = "replication-password-sha256"
)

// Digest is the SHA-256 (hex) of value.
func Digest(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:])
}

// Member is one database Pod of a replicating Database as a pass sees it.
type Member struct {
	Name string
	// Pod is nil when the Pod does not exist.
	Pod *corev1.Pod
	// Answered is true when the server answered: it was asked (a Pod IP, not being deleted,
	// a replicator for the engine) and did not fail (Err).
	Answered bool
	// Writable is true when the server answered that it takes writes: a primary.
	Writable bool
	// State is the engine's own answer (Observer.Observe), which only its engine reads.
	State any
	Err   error
}

// Primary reports whether m answered as a primary (it takes writes).
func (m *Member) Primary() bool { return m.Answered && m.Writable }

// Replica reports whether m answered as a replica (it takes no writes).
func (m *Member) Replica() bool { return m.Answered && !m.Writable }

// Forget makes m count as not answering for the rest of the pass.
func (m *Member) Forget() { m.Answered, m.Writable, m.State = false, false, nil }

// Endpoint is one member's server (its Pod IP and the engine port) and the credentials
// Secret's superuser.
type Endpoint struct {
	Host                     string
	Port                     int32
	User, Password, Database string
}

// Follower is one replica's stream from the primary.
type Follower struct {
	// Streaming is true when the replica receives and applies the primary's changes.
	Streaming bool
	// Why says why it is not streaming ("" when it is).
	Why string
	// LagBytes and LagSeconds are status.members[].lagBytes and lagSeconds: nil when the
	// engine does not report them.
	LagBytes, LagSeconds *int64
}

// Statistics are one server's own figures, as it reported them when the controller last
// asked it (Observer.Observe), for the controller's metrics.
type Statistics struct {
	// Connections are the client sessions open, the controller's own among them, and
	// MaxConnections the most the server accepts.
	Connections, MaxConnections int64
	// Commits and Rollbacks are the transactions the server committed and rolled back since
	// it started: counters that begin again at 0 when it restarts.
	Commits, Rollbacks int64
	// DataBytes is the size on disk of the data of its databases, in bytes.
	DataBytes int64
	// LogBytes is the size on disk, in bytes, of the log of changes it keeps: what a
	// checkpoint, the archiving or a replica has not released yet.
	LogBytes int64
	// LockWaits are the sessions waiting for a lock another session holds.
	LockWaits int64
}

// Statistician is the Observer of an engine whose servers report their Statistics when
// asked their state: Statistics reads them from the answer of m, false when it has none.
type Statistician interface {
	Statistics(m *Member) (Statistics, bool)
}

// Pass is what an engine is given of the controller's pass over one Database: the Database,
// what its spec resolves to, and the controller's records and Events.
type Pass interface {
	Database() *examplev1.Database
	Desired() Desired
	// Event records an Event on the Database.
	Event(ctx context.Context, eventType, reason, format string, args ...any)
	// HasDataClaim reports whether the data claim of ordinal exists.
	HasDataClaim(ordinal int32) bool
	// Secret is the credentials Secret as the controller's cache has it.
	Secret() (*corev1.Secret, error)
	// RecordedCredential is the credentials record's key for secret, and whether it holds
	// one; RecordCredential sets it.
	RecordedCredential(ctx context.Context, secret *corev1.Secret, key string) (string, bool, error)
	RecordCredential(ctx context.Context, secret *corev1.Secret, key, value string) error
	// RecordMembers records the members of a replica set's configuration (Pod names) in
	// status.replicaSetMembers at once.
	RecordMembers(ctx context.Context, pods []string) error
}

// Observer reads the members of a replicating Database; every engine that replicates has
// one. Each call reaches one server.
type Observer interface {
	// Observe asks the server e its state: whether it takes writes (a primary), and the
	// engine's own answer, which the other methods are given back as Member.State. users
	// are the replication users a primary is asked about.
	Observe(ctx context.Context, p Pass, e Endpoint, users []string) (writable bool, state any, err error)
	// Refused reports whether err, from Observe, is the server refusing the credentials.
	Refused(err error) bool
	// Follower is what the primary's and the replica's answers say of the replica's
	// stream; replica may not have answered.
	Follower(primary, replica *Member) Follower
}

// Replicator is the Observer of an engine whose primary the controller picks: replicas
// stream from it as a replication user, and a switchover fences the primary (the controller
// deletes its Pod, which restarts as a replica), waits for the target to hold every
// transaction of the former primary, and promotes it. Each call reaches one server.
type Replicator interface {
	Observer
	// HasUser reports whether the primary answered that the replication user exists.
	HasUser(primary *Member, user string) bool
	// SetUser makes user, on the primary e, the replication user with password: created,
	// or given the password when it exists.
	SetUser(ctx context.Context, p Pass, e Endpoint, user, password string) error
	// SetSource makes the replica e, the Pod named replica, stream from the primary, the Pod
	// named primary, as user with password from now on.
	SetSource(ctx context.Context, p Pass, e Endpoint, replica, primary, user, password string) error
	// SyncReplica points the replica, which answered, at primary, which answered as the
	// primary, when its own setup does not (MySQL's replication channel), through SetSource,
	// and makes a replica that StopFollowing stopped follow it again.
	SyncReplica(ctx context.Context, p Pass, e Endpoint, replica, primary *Member, user, password string) error
	// SyncPrimary does what else the primary needs for the sts Pods (PostgreSQL's slots and
	// application role, MySQL's superuser accounts).
	SyncPrimary(ctx context.Context, p Pass, e Endpoint, primary *Member, sts int32) error
	// CaughtUp reports whether next, a replica, holds every transaction of old, the former
	// primary now answering as a replica; Lacks says what it lacks when it does not.
	CaughtUp(next, old *Member) bool
	Lacks(next, old *Member) string
	// Promote makes the replica e take writes.
	Promote(ctx context.Context, p Pass, e Endpoint) error
	// Detached reports whether m, which answered as a replica, follows no primary at all.
	Detached(m *Member) bool
}

// ReplicaSet is the Observer of an engine whose members elect their primary among them
// (MongoDB): the controller initiates the set, keeps its members those of the StatefulSet,
// and moves the primary by asking the set to elect another.
type ReplicaSet interface {
	Observer
	// Initiated reports whether m, which answered, has a replica set configuration;
	// Standalone whether it runs without replication (a data directory from before the
	// Database replicated).
	Initiated(m *Member) bool
	Standalone(m *Member) bool
	// Term is the election term m answered with, which orders the primaries.
	Term(m *Member) int64
	// Initiate creates the set on the member e, m, with itself its only member.
	Initiate(ctx context.Context, p Pass, e Endpoint, m *Member) error
	// SyncMembers makes the configuration of the primary e one step closer to the members
	// it should have (the Pods of ordinals below replicas that answered or are members
	// already, and the primary), with preferred the one the set should elect, and records
	// the members it leaves in place (Pass.RecordMembers).
	SyncMembers(ctx context.Context, p Pass, e Endpoint, primary *Member, members []*Member, replicas int32, preferred string) error
}
