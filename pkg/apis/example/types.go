package example

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine names a database engine. The set is closed: see SupportedEngines.
type Engine string

// The engines a Database may run: spec.engine is one of these.
const (
	EngineMySQL      Engine = "mysql"
	EnginePostgreSQL Engine = "postgresql"
	EngineMongoDB    Engine = "mongodb"
)

// SupportedEngines lists every Engine in the order error messages print them.
var SupportedEngines = []Engine{EngineMySQL, EnginePostgreSQL, EngineMongoDB}

// DatabasePhase is the coarse state of a Database, written by the controller.
type DatabasePhase string

// The phases a Database goes through.
const (
	DatabasePhasePending      DatabasePhase = "Pending"
	DatabasePhaseProvisioning DatabasePhase = "Provisioning"
	DatabasePhaseReady        DatabasePhase = "Ready"
	DatabasePhaseDegraded     DatabasePhase = "Degraded"
	DatabasePhaseFailed       DatabasePhase = "Failed"
	DatabasePhaseDeleting     DatabasePhase = "Deleting"
)

// SupportedPhases lists every DatabasePhase.
var SupportedPhases = []DatabasePhase{
	DatabasePhasePending, DatabasePhaseProvisioning, DatabasePhaseReady,
	DatabasePhaseDegraded, DatabasePhaseFailed, DatabasePhaseDeleting,
}

// DeletionPolicy says what happens to a Database's data when it is deleted.
type DeletionPolicy string

// The deletion policies; an empty spec.deletionPolicy means Delete.
const (
	// DeletionPolicyDelete deletes the StatefulSet, Services, PVCs and Secret.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain deletes the workload but keeps the PVCs and the
	// Secret, released from the Database's ownership.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDoNotTerminate makes the API server refuse to delete the
	// Database until the policy changes.
	DeletionPolicyDoNotTerminate DeletionPolicy = "DoNotTerminate"
)

// SupportedDeletionPolicies lists every DeletionPolicy.
var SupportedDeletionPolicies = []DeletionPolicy{DeletionPolicyDelete, DeletionPolicyRetain, DeletionPolicyDoNotTerminate}

// MemberRole is a database Pod's part in replication.
type MemberRole string

// The roles a member reports in status.members[].role; empty while unknown.
const (
	// MemberRolePrimary takes writes.
	MemberRolePrimary MemberRole = "Primary"
	// MemberRoleReplica follows the primary, read-only.
	MemberRoleReplica MemberRole = "Replica"
)

// SupportedMemberRoles lists every MemberRole.
var SupportedMemberRoles = []MemberRole{MemberRolePrimary, MemberRoleReplica}

// Bounds of spec.replicas: 1 to 10 Pods.
const (
	MinReplicas int32 = 1
	MaxReplicas int32 = 10
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Database is a managed database: the user's wish in Spec, the controller's
// report in Status.
type Database struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   DatabaseSpec
	Status DatabaseStatus
}

// DatabaseSpec is what the user asks for.
type DatabaseSpec struct {
	// Engine is one of SupportedEngines. Immutable after creation.
	Engine Engine
	// Version is the engine version, e.g. "14.5"; it must be in the engine's catalog.
	Version string
	// Replicas is the number of database Pods, MinReplicas..MaxReplicas.
	// Nil means "not set": the DatabaseDefaults admission plugin fills it in.
	Replicas *int32
	// Storage is the volume size of each replica in whole gibibytes, e.g. "100Gi".
	// Empty means "not set": the DatabaseDefaults admission plugin fills it in.
	Storage string
	// DeletionPolicy is what deleting the Database does to its data.
	// Empty means "not set": the DatabaseDefaults admission plugin fills it in,
	// and the controller treats it as DeletionPolicyDelete.
	DeletionPolicy DeletionPolicy
	// Primary is the Pod that should be the primary (takes writes),
	// "<metadata.name>-<ordinal>" with the ordinal below Replicas. Empty: the
	// controller keeps the current primary (the first Pod, "<name>-0", at
	// creation) and, when a scale-down would remove it, switches over to
	// "<name>-0" first. Another Pod asks for a planned switchover: the
	// controller stops the old primary, waits until the new one has every
	// write of it, promotes it, and the old one follows it as a replica.
	Primary string
	// NetworkPolicy, when set, has the controller keep a NetworkPolicy
	// "<name>" that admits to the engine's port only the Pods it names, the
	// Database's own Pods and the controller's. Nil: no NetworkPolicy.
	NetworkPolicy *DatabaseNetworkPolicy
	// Failover is Automatic or Manual; empty means Automatic, on an engine
	// whose primary the controller picks (EngineRules.Failover).
	Failover FailoverPolicy
	// FailoverDelaySeconds is how long the primary must not take writes
	// before an automatic failover, MinFailoverDelaySeconds to
	// MaxFailoverDelaySeconds; nil means DefaultFailoverDelaySeconds.
	FailoverDelaySeconds *int32
	// Durability is Asynchronous or Synchronous; empty means Asynchronous.
	Durability Durability
	// Backup, when set, has the controller archive changes and take
	// backups to an S3-compatible store; nil: none.
	Backup *DatabaseBackupPolicy
	// Restore, set at creation, fills the data from another Database's
	// backups in spec.backup's store; immutable.
	Restore *DatabaseRestore
}

// DatabaseRestore is where a new Database's data comes from: the backups of
// the Database named Database, up to PointInTime (RFC 3339; empty: the end of the archive).
type DatabaseRestore struct {
	Database    string
	PointInTime string
}

// DatabaseBackupPolicy is where and how often a Database is backed up.
type DatabaseBackupPolicy struct {
	// Schedule is a cron schedule of five fields, in UTC; empty: none.
	Schedule string
	// RetentionFullBackups is how many full backups are kept,
	// MinRetentionFullBackups to MaxRetentionFullBackups; nil means
	// DefaultRetentionFullBackups.
	RetentionFullBackups *int32
	// S3 is the object store.
	S3 DatabaseBackupS3
}

// DatabaseBackupS3 is an S3-compatible object store reached over HTTPS.
type DatabaseBackupS3 struct {
	// Endpoint is "https://<DNS name>[:<port>]".
	Endpoint string
	// Bucket is an existing bucket's name.
	Bucket string
	// Prefix is the path in the bucket, "/" or "/seg[/seg...]"; empty means "/".
	Prefix string
	// Region is the store's region; empty means DefaultBackupRegion.
	Region string
	// SecretName is the Secret of the store's keys and CA, in the Database's namespace.
	SecretName string
}

// The bounds and defaults of spec.backup.
const (
	MinRetentionFullBackups     = 1
	MaxRetentionFullBackups     = 100
	DefaultRetentionFullBackups = 7
	DefaultBackupRegion         = "us-east-1"
)

// FailoverPolicy is spec.failover.
type FailoverPolicy string

const (
	FailoverAutomatic FailoverPolicy = "Automatic"
	FailoverManual    FailoverPolicy = "Manual"
)

// SupportedFailoverPolicies are the values of spec.failover.
var SupportedFailoverPolicies = []FailoverPolicy{FailoverAutomatic, FailoverManual}

// The bounds and default of spec.failoverDelaySeconds.
const (
	MinFailoverDelaySeconds     = 1
	MaxFailoverDelaySeconds     = 3600
	DefaultFailoverDelaySeconds = 10
)

// Durability is spec.durability.
type Durability string

const (
	DurabilityAsynchronous Durability = "Asynchronous"
	DurabilitySynchronous  Durability = "Synchronous"
)

// SupportedDurabilities are the values of spec.durability.
var SupportedDurabilities = []Durability{DurabilityAsynchronous, DurabilitySynchronous}

// DatabaseNetworkPolicy names the clients admitted to a Database's Pods.
type DatabaseNetworkPolicy struct {
	// From are the admitted client Pods, at most MaxNetworkPolicyPeers; empty
	// admits none.
	From []DatabaseNetworkPolicyPeer
}

// DatabaseNetworkPolicyPeer selects client Pods as a networking.k8s.io/v1
// NetworkPolicyPeer without ipBlock does; at least one selector is set.
type DatabaseNetworkPolicyPeer struct {
	// PodSelector selects Pods, in the Database's namespace unless
	// NamespaceSelector is set too.
	PodSelector *metav1.LabelSelector
	// NamespaceSelector selects namespaces, all of whose Pods are admitted
	// unless PodSelector is set too.
	NamespaceSelector *metav1.LabelSelector
}

// DatabaseStatus is what the controller observed.
type DatabaseStatus struct {
	// Phase is the coarse state; empty until the controller first reports.
	Phase DatabasePhase
	// ReadyReplicas is the number of ready database Pods.
	ReadyReplicas int32
	// Conditions are the Ready, Progressing and Degraded conditions, keyed by type.
	Conditions []metav1.Condition
	// ObservedGeneration is the metadata.generation the status describes.
	ObservedGeneration int64
	// Selector is the label selector of the database Pods, in string form, for the scale subresource.
	Selector string
	// Primary is the Pod that is primary now, as the controller last confirmed it.
	Primary string
	// Members are the database Pods by ordinal, one each, keyed by name.
	Members []DatabaseMember
	// Restart is the last rolling restart asked for through databases/restart;
	// nil when none was. Only that subresource sets the request fields.
	Restart *DatabaseRestartStatus
	// Switchover is the last request to move the primary, through
	// databases/switchover or a write of spec.primary; nil when none was.
	// Only the API server sets it.
	Switchover *DatabaseSwitchoverStatus
	// SwitchoverProgress is the switchover the controller is carrying out,
	// from status.primary to another Pod; nil when none is under way. Only
	// the controller writes it, through databases/status.
	SwitchoverProgress *DatabaseSwitchoverProgress
	// ReplicaSetMembers are the Pods the replica set's configuration lists
	// (MongoDB), as the controller last read or wrote it; empty until it has
	// reached the set's primary. Only the controller writes it.
	ReplicaSetMembers []string
	// PrimaryLastWritableTime is, while the primary does not take writes,
	// the last time the controller saw it take them; nil while it does.
	PrimaryLastWritableTime *metav1.Time
	// Failover is the automatic failover under way or refused; nil when
	// none is due. Only the controller writes it.
	Failover *DatabaseFailoverStatus
	// LastFailoverTime is when the controller last promoted a replica in an
	// automatic failover; nil when it never did (RequestedPrimary).
	LastFailoverTime *metav1.Time
	// Username is the user the credentials Secret gives clients, as the
	// controller last wrote it; empty until then.
	Username string
	// Backup is what the controller saw of the backups; nil until
	// spec.backup is set. Only the controller writes it.
	Backup *DatabaseBackupStatus
}

// DatabaseBackupStatus is what the controller saw of a Database's backup
// Jobs: the one running, the last that succeeded, the last that failed.
type DatabaseBackupStatus struct {
	// Request is the last backup asked for through databases/backup; only
	// that subresource sets it.
	Request            *DatabaseBackupRequestStatus
	LastScheduleTime   *metav1.Time
	ActiveJob          string
	LastSuccessfulTime *metav1.Time
	LastSuccessfulJob  string
	LastFailureTime    *metav1.Time
	LastFailedJob      string
	// LastArchivedTime is when the primary last archived its changes;
	// ArchiveFailureTime, while its last attempt failed, when that was.
	LastArchivedTime   *metav1.Time
	ArchiveFailureTime *metav1.Time
	// FirstRecoverableTime is the first time a restore can reach: the
	// second after the end of the oldest backup the store kept after the
	// last backup.
	FirstRecoverableTime *metav1.Time
}

// DatabaseRestartStatus is a rolling restart: the request databases/restart
// recorded (RequestedBy, RequestedAt, Reason) and the controller's
// completion (CompletedAt).
type DatabaseRestartStatus struct {
	// RequestedBy is the authenticated user name of whoever asked.
	RequestedBy string
	// RequestedAt is when the request was recorded, to the microsecond; it
	// identifies the request.
	RequestedAt metav1.MicroTime
	// Reason is the request's free text.
	Reason string
	// CompletedAt is when every Pod was recreated and Ready, to the
	// microsecond; nil while under way.
	CompletedAt *metav1.MicroTime
}

// DatabaseBackupRequestStatus is a backup asked for through databases/backup.
type DatabaseBackupRequestStatus struct {
	// RequestedBy is the authenticated user name of whoever asked.
	RequestedBy string
	// RequestedAt is when the request was recorded.
	RequestedAt metav1.Time
}

// DatabaseSwitchoverStatus is a switchover asked for through databases/switchover.
type DatabaseSwitchoverStatus struct {
	// RequestedBy is the authenticated user name of whoever asked.
	RequestedBy string
	// RequestedAt is when the request was recorded.
	RequestedAt metav1.Time
	// Target is the Pod asked to become the primary.
	Target string
}

// DatabaseSwitchoverProgress is a switchover the controller is carrying out.
type DatabaseSwitchoverProgress struct {
	// From is the primary the switchover moves away from, status.primary.
	From string
	// To is the Pod that becomes the primary.
	To string
	// Step is what the switchover is at.
	Step SwitchoverStep
}

// DatabaseFailoverStatus is an automatic failover: From, the primary it
// replaces; To, the replica it promotes (empty while Refused); the replicas
// that answered and the number needed; when it was decided.
type DatabaseFailoverStatus struct {
	From, To          string
	Phase             FailoverPhase
	ReachableReplicas int32
	NeededReplicas    int32
	StartTime         metav1.Time
}

// FailoverPhase is the phase of an automatic failover.
type FailoverPhase string

const (
	FailoverPhasePromoting FailoverPhase = "Promoting"
	FailoverPhaseRefused   FailoverPhase = "Refused"
)

// SwitchoverStep is the step a switchover is at.
type SwitchoverStep string

// The steps of a switchover, in order; a replica set whose members elect
// their primary has one, SwitchoverStepElecting.
const (
	// SwitchoverStepPreparing: nothing is stopped; the switchover waits for
	// the primary to answer as one and the target to stream from it.
	SwitchoverStepPreparing SwitchoverStep = "Preparing"
	// SwitchoverStepStoppingPrimary: the old primary is stopped and restarts
	// as a standby of the target; no server takes writes.
	SwitchoverStepStoppingPrimary SwitchoverStep = "StoppingPrimary"
	// SwitchoverStepPromoting: the old primary is a standby; the target is
	// promoted once it has received all of the old primary's WAL.
	SwitchoverStepPromoting SwitchoverStep = "Promoting"
	// SwitchoverStepElecting: the replica set elects the target, given the
	// highest priority, once it has caught up.
	SwitchoverStepElecting SwitchoverStep = "Electing"
)

// SupportedSwitchoverSteps lists every SwitchoverStep.
var SupportedSwitchoverSteps = []SwitchoverStep{
	SwitchoverStepPreparing, SwitchoverStepStoppingPrimary, SwitchoverStepPromoting, SwitchoverStepElecting,
}

// DatabaseMember is one database Pod's part in replication, as the controller observed it.
type DatabaseMember struct {
	// Name is the Pod name, "<metadata.name>-<ordinal>".
	Name string
	// Role is Primary or Replica; empty while unknown (the Pod is not running or not answering).
	Role MemberRole
	// Ready is the Pod's Ready condition.
	Ready bool
	// Streaming is true for a replica that receives and applies the
	// primary's changes (PostgreSQL's pg_stat_replication.state, MySQL's
	// replication channel, a MongoDB SECONDARY).
	Streaming bool
	// LagBytes is how many bytes of WAL the primary has written that the
	// replica has not replayed (PostgreSQL's pg_wal_lsn_diff of
	// pg_current_wal_lsn() and replay_lsn); nil when unknown.
	LagBytes *int64
	// LagSeconds is how many seconds the replica's applying is behind the
	// primary's commits (MongoDB's optimeDate difference, MySQL's original
	// commit timestamps, PostgreSQL's replay_lag); nil when unknown.
	LagSeconds *int64
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseList is a list of Databases.
type DatabaseList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []Database
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseConnection is how a client connects to a Database (GET
// databases/{name}/connection): computed on read, never stored, no password.
type DatabaseConnection struct {
	metav1.TypeMeta
	// ObjectMeta carries the Database's name and namespace.
	metav1.ObjectMeta

	// Engine is the Database's spec.engine.
	Engine Engine
	// Host is the client Service's fully qualified DNS name,
	// "<name>.<namespace>.svc.<cluster domain>".
	Host string
	// Port is the engine's TCP port.
	Port int32
	// ReadHost is the read Service's fully qualified DNS name,
	// "<name>-read.<namespace>.svc.<cluster domain>", while the engine
	// replicates and spec.replicas is above 1; else empty.
	ReadHost string
	// Database is the database created at initialisation; empty for MongoDB.
	Database string
	// Username is the user applications connect as.
	Username string
	// SecretName is the credentials Secret.
	SecretName string
	// PasswordKey, URIKey and ReadURIKey are the keys of SecretName holding the
	// password, the URI to Host and the URI to ReadHost (empty when ReadHost is).
	PasswordKey string
	URIKey      string
	ReadURIKey  string
	// Primary is status.primary.
	Primary string
	// Ready is true when the Database's Ready condition is True.
	Ready bool
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseBackupRequest is the body of POST databases/{name}/backup.
type DatabaseBackupRequest struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseRestart is the body of POST databases/{name}/restart.
type DatabaseRestart struct {
	metav1.TypeMeta
	// ObjectMeta.Name, when set, must be the Database's name.
	metav1.ObjectMeta

	// Reason is free text recorded with the request.
	Reason string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseSwitchover is the body of POST databases/{name}/switchover.
type DatabaseSwitchover struct {
	metav1.TypeMeta
	// ObjectMeta.Name, when set, must be the Database's name.
	metav1.ObjectMeta

	// Target is the Pod to become the primary, "<name>-<ordinal>".
	Target string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseBackup is a backup as the store holds it, read from the store on
// each request; never stored in etcd.
type DatabaseBackup struct {
	metav1.TypeMeta
	// ObjectMeta carries "<database>.<backup id>" and the namespace.
	metav1.ObjectMeta

	// Database is the name of the Database the backup was taken of, which
	// may have been deleted since.
	Database string
	// ID is the backup's name in the store.
	ID string
	// Engine is the Database's engine.
	Engine Engine
	// Method is how the backup was taken, e.g. "pgBackRest full".
	Method string
	// StartTime and EndTime bound the backup.
	StartTime metav1.Time
	EndTime   metav1.Time
	// DataBytes is the size of the data the backup restores; StoredBytes
	// what it takes in the store.
	DataBytes   int64
	StoredBytes int64
	// LogStart and LogEnd are the first and last log files the backup needs.
	LogStart string
	LogEnd   string
	// RecoverableFrom is the first time a restore from this backup reaches;
	// RecoverableUntil the last, when known.
	RecoverableFrom  metav1.Time
	RecoverableUntil *metav1.Time
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseBackupList is a list of DatabaseBackups.
type DatabaseBackupList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []DatabaseBackup
}
