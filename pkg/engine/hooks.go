package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// The optional interfaces below are what an engine implements besides Engine and its
// Observer for failover, backup and restore, users and TLS; the controller asks an engine
// for them with a type assertion and does without where the engine has none.

// Failover is a Replicator whose primary can be replaced while it does not answer: its
// replicas stop following it (fencing), the replica holding every other's transactions is
// promoted, and the former primary, when it comes back, follows the new one or is kept out.
type Failover interface {
	Replicator
	// StopFollowing makes the replica e stop following its primary, so a primary cut off
	// from the controller can have no commit acknowledged by it.
	StopFollowing(ctx context.Context, p Pass, e Endpoint) error
	// Holds reports whether a, a replica, holds every transaction b holds (its WAL
	// position or GTID set at least b's): the replica to promote holds every other's.
	Holds(a, b *Member) bool
	// Diverged reports whether former, a former primary answering as a replica, has
	// transactions primary lacks (a forked timeline, errant GTIDs): it follows primary only
	// once rewound or cloned again.
	Diverged(primary, former *Member) bool
	// Rewinds reports whether a diverged replica follows the primary once its Pod starts
	// again, its setup having rewound it (pg_rewind): the controller then restarts it;
	// otherwise it stays out of the Services until it is cloned anew.
	Rewinds() bool
}

// Synchronous is a Replicator whose primary can wait, before acknowledging a commit, for
// replicas to have it.
type Synchronous interface {
	Replicator
	// SetSynchronous makes the primary e, which answered as primary, acknowledge a commit
	// once any k of replicas (Pod names) have it; k 0 makes it acknowledge without waiting.
	// Nothing is written when primary's answer has that setting already.
	SetSynchronous(ctx context.Context, p Pass, e Endpoint, primary *Member, k int32, replicas []string) error
	// CommitsWaiting is what primary, which answered as primary, said of its sessions
	// waiting for replicas to acknowledge their commit: how many, and how long the one
	// waiting longest has waited (to the second where the engine counts in seconds).
	CommitsWaiting(primary *Member) (sessions int, longest time.Duration)
}

// Backups is an engine that archives its primary's changes to an object store and takes
// backups there, from a Job of the Database's namespace (BackupJob) that reads the data
// through a server in each Pod (BackupPod): no Pod is exec'ed into, and the Job holds no
// right on the API.
type Backups interface {
	// BackupPod adds to tmpl, the Pod template of a Database with d.Backup set, the
	// continuous archiving of changes (WAL, binary log, oplog) to d.Backup's store, and
	// the server a backup Job reads the data through: on BackupPort, with the certificates
	// of the Secret names.BackupTLSSecretName, authenticating the Job by its client
	// certificate.
	BackupPod(db *examplev1.Database, d Desired, tmpl *corev1.PodTemplateSpec)
	// BackupJob is the Pod of a Job that takes a backup of db's primary, whichever Pod it
	// is, into d.Backup's store, and expires what the store's retention no longer keeps.
	BackupJob(db *examplev1.Database, d Desired) corev1.PodSpec
	// BackupPort is the TCP port of BackupPod's server.
	BackupPort() int32
	// RestorePod adds to tmpl, the Pod template of a Database created with spec.restore
	// (and d.Backup set), what fills the primary's empty data volume from the source's
	// backups in d.Backup's store before its server first starts: an init container that
	// ends once the data is restored and recovered, or fails saying why.
	RestorePod(db *examplev1.Database, d Desired, tmpl *corev1.PodTemplateSpec)
	// StoredBackups reads from store the backups of the repository at path (BackupStore's
	// Path): the Database database's, or with database "" every Database's whose backups it
	// holds, deleted ones too; each Database's oldest first. A backup is listed only while
	// the store holds what restoring it reads first; one being taken is not listed until it
	// ended. It returns the backups of the Databases it could read and an error naming each
	// it could not (nil when it read them all).
	StoredBackups(ctx context.Context, store ObjectStore, path, database string) ([]StoredBackup, error)
	// DeleteStoredBackup removes the backup id of the Database database from the repository
	// at path of store; it is ErrBackupNotFound when the store does not hold it.
	DeleteStoredBackup(ctx context.Context, store ObjectStore, path, database, id string) error
}

// Archiver is a Replicator whose primary reports its continuous archiving (Backups'
// BackupPod): the observer's side of an engine that takes backups.
type Archiver interface {
	Replicator
	// Archiving is what primary, which answered as primary, said of its archiving.
	Archiving(primary *Member) Archiving
}

// Archiving is a primary's account of its continuous archiving.
type Archiving struct {
	// Last is when it last archived a change (a WAL segment, a binary log); zero when it
	// did not since its statistics began.
	Last time.Time
	// Failed is when its last attempt that failed was, and FailedWhat what it tried to
	// archive then; zero and empty when none failed.
	Failed     time.Time
	FailedWhat string
}

// Failing reports whether the last attempt failed: archiving is stuck until it succeeds,
// and the changes it could not archive pile up on the primary's volume.
func (a Archiving) Failing() bool { return !a.Failed.IsZero() && a.Failed.After(a.Last) }

// Access is what a user may do on a logical database.
type Access string

const (
	AccessReadOnly  Access = "ReadOnly"
	AccessReadWrite Access = "ReadWrite"
	AccessOwner     Access = "Owner"
)

// User is one user of a Database as the primary is to have it.
type User struct {
	Name, Password string
	// Database is the logical database Access is on; it is created when missing.
	Database string
	Access   Access
	// ConnectionLimit is the most connections the user may hold; nil for the engine's
	// default.
	ConnectionLimit *int32
}

// Users is an engine whose primary keeps users other than the application user.
type Users interface {
	// CheckUsername says why name cannot be a user's ("" when it can): reserved by the
	// engine or the controller, too long, or of characters the engine refuses.
	CheckUsername(name string) string
	// SyncUser makes u true on the primary e: created, given its password and access, set
	// back when changed by hand.
	SyncUser(ctx context.Context, p Pass, e Endpoint, u User) error
	// DropUser removes the user name from the primary e, its objects reassigned where the
	// engine needs it.
	DropUser(ctx context.Context, p Pass, e Endpoint, name string) error
}

// TLS is an engine whose servers serve TLS with a certificate the controller gives them.
type TLS interface {
	// TLSPod adds to tmpl the server's TLS: the certificate, key and CA of the Secret named
	// secret, mounted, and the settings that serve them; with required, the settings that
	// refuse clear-text connections.
	TLSPod(db *examplev1.Database, d Desired, tmpl *corev1.PodTemplateSpec, secret string, required bool)
	// ReloadTLS makes the server e read its certificate and key again without a restart,
	// and reports false when the engine cannot (the Pods are then restarted).
	ReloadTLS(ctx context.Context, p Pass, e Endpoint) (bool, error)
}
