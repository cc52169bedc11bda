package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine names a database engine.
// +enum
type Engine string

// The engines a Database may run: spec.engine is one of these.
const (
	// EngineMySQL runs the mysql image, port 3306.
	EngineMySQL Engine = "mysql"
	// EnginePostgreSQL runs the postgres image, port 5432.
	EnginePostgreSQL Engine = "postgresql"
	// EngineMongoDB runs the mongo image, port 27017.
	EngineMongoDB Engine = "mongodb"
)

// DeletionPolicy says what happens to a Database's data when it is deleted.
// +enum
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionPolicyDelete deletes the StatefulSet, Services, PersistentVolumeClaims and Secret.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain deletes the workload but keeps the PersistentVolumeClaims
	// and the credentials Secret, released from the Database's ownership.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDoNotTerminate makes the API server refuse to delete the
	// Database until the policy is changed.
	DeletionPolicyDoNotTerminate DeletionPolicy = "DoNotTerminate"
)

// DatabasePhase is the coarse state of a Database.
// +enum
type DatabasePhase string

// The phases a Database goes through.
const (
	// DatabasePhasePending: accepted, nothing created yet.
	DatabasePhasePending DatabasePhase = "Pending"
	// DatabasePhaseProvisioning: children created, not all replicas ready.
	DatabasePhaseProvisioning DatabasePhase = "Provisioning"
	// DatabasePhaseReady: every replica ready at the current generation.
	DatabasePhaseReady DatabasePhase = "Ready"
	// DatabasePhaseDegraded: was ready, some replicas are not.
	DatabasePhaseDegraded DatabasePhase = "Degraded"
	// DatabasePhaseFailed: a permanent error; see the Ready condition's message.
	DatabasePhaseFailed DatabasePhase = "Failed"
	// DatabasePhaseDeleting: deletion requested, cleanup under way.
	DatabasePhaseDeleting DatabasePhase = "Deleting"
)

// MemberRole is a database Pod's part in replication.
// +enum
type MemberRole string

// The roles of status.members[].role.
const (
	// MemberRolePrimary takes writes.
	MemberRolePrimary MemberRole = "Primary"
	// MemberRoleReplica follows the primary, read-only.
	MemberRoleReplica MemberRole = "Replica"
)

// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=GetConnection,verb=get,subresource=connection,result=DatabaseConnection
// +genclient:method=Restart,verb=create,subresource=restart,input=DatabaseRestart,result=Database
// +genclient:method=Switchover,verb=create,subresource=switchover,input=DatabaseSwitchover,result=Database
// +genclient:method=Backup,verb=create,subresource=backup,input=DatabaseBackupRequest,result=Database
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Database is a managed database: a StatefulSet of the chosen engine with its
// Services and credentials, run by the database controller.
type Database struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name must be a DNS-1035 label short enough
	// to name the StatefulSet's Pods and Services.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec is the desired database.
	// +optional
	Spec DatabaseSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`
	// Status is the state observed by the controller. Written through the
	// status subresource only.
	// +optional
	Status DatabaseStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// DatabaseSpec is the desired state of a Database.
type DatabaseSpec struct {
	// Engine is the database engine: mysql, postgresql or mongodb. Immutable.
	// +required
	Engine Engine `json:"engine" protobuf:"bytes,1,opt,name=engine,casttype=Engine"`
	// Version is the engine version, e.g. "14.5" for postgresql; it names the
	// container image tag and must be in the engine's version catalog.
	// +required
	// +k8s:validation:minLength=1
	Version string `json:"version" protobuf:"bytes,2,opt,name=version"`
	// Replicas is the number of database Pods, 1 to 10. Defaults to 1.
	// +optional
	// +k8s:validation:minimum=1
	// +k8s:validation:maximum=10
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,3,opt,name=replicas"`
	// Storage is the volume size of each replica, in whole gibibytes
	// ("100Gi"). Defaults to "10Gi". May grow, never shrink.
	// +optional
	// +k8s:validation:pattern="^[0-9]+Gi$"
	Storage string `json:"storage,omitempty" protobuf:"bytes,4,opt,name=storage"`
	// DeletionPolicy is what deleting the Database does to its data: Delete
	// (the default) removes the volumes and credentials with it, Retain keeps
	// them, DoNotTerminate refuses the deletion until the policy changes.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty" protobuf:"bytes,5,opt,name=deletionPolicy,casttype=DeletionPolicy"`
	// Primary is the Pod that should be the primary (takes writes):
	// "<metadata.name>-<ordinal>", the ordinal a decimal below spec.replicas.
	// Empty: the controller keeps the current primary (the first Pod,
	// "<name>-0", at creation) and, when a scale-down would remove it,
	// switches over to "<name>-0" first. Setting it to another Pod asks for
	// a planned switchover: the controller stops the old primary, waits
	// until the new one has every write of it, promotes it, and the old one
	// follows it as a replica. spec.replicas may not drop to or below the
	// ordinal of the Pod named here: move the primary first.
	// +optional
	Primary string `json:"primary,omitempty" protobuf:"bytes,6,opt,name=primary"`
	// NetworkPolicy, when set, has the controller keep a NetworkPolicy
	// (networking.k8s.io/v1) named "<metadata.name>" that isolates the
	// Database's Pods for ingress and admits, on the engine's port only, the
	// Pods named in networkPolicy.from, the Database's own Pods (replicas
	// reach the primary) and the controller's Pods. Unset: the controller
	// keeps no NetworkPolicy (it deletes the one it made), and only the
	// namespace's own policies apply. Enforced only by a network plugin that
	// implements NetworkPolicy.
	// +optional
	NetworkPolicy *DatabaseNetworkPolicy `json:"networkPolicy,omitempty" protobuf:"bytes,7,opt,name=networkPolicy"`
	// Failover is what the controller does when the primary stops taking
	// writes (it does not answer, its container or Pod is gone, its node is
	// NotReady) for failoverDelaySeconds: Automatic (empty: the default)
	// fences it (its replicas stop following it, its Pod loses the primary
	// label and is deleted), promotes the replica that holds every other
	// reachable replica's transactions, and the client Service follows;
	// Manual leaves the Database without a writable server until the
	// primary comes back (a switchover needs the primary to answer; setting
	// Automatic fails over at once once the delay has passed). Only for an
	// engine whose primary the controller picks (not MongoDB, whose replica
	// set elects its own).
	// +optional
	Failover FailoverPolicy `json:"failover,omitempty" protobuf:"bytes,8,opt,name=failover,casttype=FailoverPolicy"`
	// FailoverDelaySeconds is how long the primary must not take writes
	// before an automatic failover begins, 1 to 3600. Unset: 10. A primary
	// whose Pod was recreated has, besides, a minute for its server to start
	// before it counts as not taking writes.
	// +optional
	// +k8s:validation:minimum=1
	// +k8s:validation:maximum=3600
	FailoverDelaySeconds *int32 `json:"failoverDelaySeconds,omitempty" protobuf:"varint,9,opt,name=failoverDelaySeconds"`
	// Durability is when the primary acknowledges a commit: Asynchronous
	// (empty: the default) once it has it, so a failover may lose the
	// commits the promoted replica had not received yet; Synchronous once
	// at least one replica has it too, so a failover loses no acknowledged
	// commit, and commits wait while no replica is streaming. Synchronous
	// needs spec.replicas of 2 or more. Only for an engine whose primary the
	// controller picks (not MongoDB, where a write's durability is its write
	// concern).
	// +optional
	Durability Durability `json:"durability,omitempty" protobuf:"bytes,10,opt,name=durability,casttype=Durability"`
	// Backup, when set, has the controller archive the Database's changes
	// continuously to an S3-compatible object store and take backups there:
	// at once when set (the first full backup, which archiving needs), then
	// on backup.schedule. Unset: nothing is archived nor backed up, and the
	// controller removes the backup schedule it kept. Only for an engine
	// that takes backups (postgresql). Setting or removing it restarts the
	// Pods one at a time (PostgreSQL reads archive_mode at start).
	// +optional
	Backup *DatabaseBackupPolicy `json:"backup,omitempty" protobuf:"bytes,11,opt,name=backup"`
	// Restore, set at creation, fills the new Database's data from the
	// backups and archived changes of another Database of the namespace,
	// which may have been deleted, in the store of spec.backup (required
	// with it): the first Pod restores the latest backup before
	// pointInTime and replays the archive up to it, then the Database
	// starts as any other, its replicas cloned from it. Immutable. A restore
	// that fails (no backup that old, a missing or damaged object) leaves
	// the Database not Ready with the Restored condition False saying why.
	// Only for an engine that takes backups (postgresql).
	// +optional
	Restore *DatabaseRestore `json:"restore,omitempty" protobuf:"bytes,12,opt,name=restore"`
}

// DatabaseRestore is where a new Database's data comes from.
type DatabaseRestore struct {
	// Database is the name of the Database whose backups to restore: its
	// stanza in the repository of spec.backup.s3 ("<prefix>/<namespace>").
	// +required
	Database string `json:"database" protobuf:"bytes,1,opt,name=database"`
	// PointInTime is the moment to restore to, in RFC 3339 with a time zone
	// and, if wanted, fractions of a second ("2026-12-05T04:59:30Z",
	// "2026-12-05T05:59:30.25+01:00"): every transaction committed by then,
	// none after. Empty: the end of the archive, the last change archived.
	// +optional
	PointInTime string `json:"pointInTime,omitempty" protobuf:"bytes,2,opt,name=pointInTime"`
}

// DatabaseBackupPolicy is where and how often a Database is backed up.
type DatabaseBackupPolicy struct {
	// Schedule is when backups are taken, in the five fields of cron
	// ("minute hour day-of-month month day-of-week", as a CronJob's
	// schedule, in UTC), e.g. "0 3 * * *" for 03:00 every day. Empty: no
	// scheduled backups; changes are still archived from the first
	// backup on.
	// +optional
	Schedule string `json:"schedule,omitempty" protobuf:"bytes,1,opt,name=schedule"`
	// RetentionFullBackups is how many full backups the store keeps, 1 to
	// 100 (pgBackRest's repo1-retention-full): an older full backup, the
	// backups that depend on it and the archived changes only they need
	// are expired after each backup. Unset: 7.
	// +optional
	// +k8s:validation:minimum=1
	// +k8s:validation:maximum=100
	RetentionFullBackups *int32 `json:"retentionFullBackups,omitempty" protobuf:"varint,2,opt,name=retentionFullBackups"`
	// S3 is the object store.
	// +required
	S3 DatabaseBackupS3 `json:"s3" protobuf:"bytes,3,opt,name=s3"`
}

// DatabaseBackupS3 is an S3-compatible object store, reached over HTTPS
// with path-style requests. A Database's backups and archived changes are
// under "<prefix>/<namespace>" in the bucket, in pgBackRest's layout with
// the Database's name as its stanza ("backup/<name>/",
// "archive/<name>/").
type DatabaseBackupS3 struct {
	// Endpoint is the store's URL, "https://<host>[:<port>]", the host a
	// DNS name (the certificate is verified against it; an IP address is
	// refused).
	// +required
	Endpoint string `json:"endpoint" protobuf:"bytes,1,opt,name=endpoint"`
	// Bucket is the bucket, which must exist: 3 to 63 lower-case letters,
	// digits, dots and hyphens.
	// +required
	Bucket string `json:"bucket" protobuf:"bytes,2,opt,name=bucket"`
	// Prefix is the path in the bucket under which every Database's
	// backups are kept, "/" followed by path segments of letters, digits,
	// ".", "_" and "-". Unset: "/".
	// +optional
	Prefix string `json:"prefix,omitempty" protobuf:"bytes,3,opt,name=prefix"`
	// Region is the store's region. Unset: "us-east-1".
	// +optional
	Region string `json:"region,omitempty" protobuf:"bytes,4,opt,name=region"`
	// SecretName is a Secret of the Database's namespace holding the
	// store's access key ("accessKeyId"), secret key ("secretAccessKey")
	// and, optionally, the PEM certificates of the CAs to verify the store
	// by ("ca.crt"; without it, the system's). Its values are read by the
	// Database's Pods and backup Jobs only, never copied.
	// +required
	SecretName string `json:"secretName" protobuf:"bytes,5,opt,name=secretName"`
}

// DefaultRetentionFullBackups is spec.backup.retentionFullBackups when unset.
const DefaultRetentionFullBackups = 7

// Keys of the Secret spec.backup.s3.secretName names.
const (
	BackupSecretKeyAccessKeyID     = "accessKeyId"
	BackupSecretKeySecretAccessKey = "secretAccessKey"
	BackupSecretKeyCA              = "ca.crt"
)

// DefaultFailoverDelaySeconds is spec.failoverDelaySeconds when unset.
const DefaultFailoverDelaySeconds = 10

// FailoverPolicy is spec.failover.
// +enum
type FailoverPolicy string

const (
	// FailoverAutomatic: the controller fails over by itself.
	FailoverAutomatic FailoverPolicy = "Automatic"
	// FailoverManual: the controller waits for the primary to take writes
	// again.
	FailoverManual FailoverPolicy = "Manual"
)

// Durability is spec.durability.
// +enum
type Durability string

const (
	// DurabilityAsynchronous: a commit is acknowledged once the primary has it.
	DurabilityAsynchronous Durability = "Asynchronous"
	// DurabilitySynchronous: a commit is acknowledged once a replica has it too.
	DurabilitySynchronous Durability = "Synchronous"
)

// DatabaseNetworkPolicy names the clients admitted to a Database's Pods.
type DatabaseNetworkPolicy struct {
	// From are the Pods admitted to the engine's port, at most 16 peers,
	// each as a NetworkPolicy ingress rule's peer without ipBlock. An empty
	// list admits no client: only the Database's own Pods and the controller.
	// +optional
	// +listType=atomic
	From []DatabaseNetworkPolicyPeer `json:"from,omitempty" protobuf:"bytes,1,rep,name=from"`
}

// DatabaseNetworkPolicyPeer selects client Pods, with the meaning of
// networking.k8s.io/v1 NetworkPolicyPeer: podSelector alone selects Pods of
// the Database's namespace; namespaceSelector alone every Pod of the
// namespaces it selects; both, the Pods podSelector selects in those
// namespaces. At least one is set; an empty selector ({}) selects everything.
type DatabaseNetworkPolicyPeer struct {
	// PodSelector selects Pods by their labels.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty" protobuf:"bytes,1,opt,name=podSelector"`
	// NamespaceSelector selects namespaces by their labels
	// (kubernetes.io/metadata.name holds a namespace's name).
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty" protobuf:"bytes,2,opt,name=namespaceSelector"`
}

// DatabaseStatus is the observed state of a Database.
type DatabaseStatus struct {
	// Phase is the coarse state: Pending, Provisioning, Ready, Degraded, Failed or Deleting.
	// +optional
	Phase DatabasePhase `json:"phase,omitempty" protobuf:"bytes,1,opt,name=phase,casttype=DatabasePhase"`
	// ReadyReplicas is the number of database Pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty" protobuf:"varint,2,opt,name=readyReplicas"`
	// Conditions are the Ready, Progressing and Degraded conditions.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type" protobuf:"bytes,3,rep,name=conditions"`
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,4,opt,name=observedGeneration"`
	// Selector is the label selector of the database Pods, for the scale
	// subresource and HorizontalPodAutoscalers.
	// +optional
	Selector string `json:"selector,omitempty" protobuf:"bytes,5,opt,name=selector"`
	// Primary is the Pod that is primary now, as the controller last confirmed it.
	// +optional
	Primary string `json:"primary,omitempty" protobuf:"bytes,6,opt,name=primary"`
	// Members are the database Pods, one per ordinal, with their part in replication.
	// +optional
	// +listType=map
	// +listMapKey=name
	Members []DatabaseMember `json:"members,omitempty" protobuf:"bytes,7,rep,name=members"`
	// Restart is the last rolling restart asked for through the
	// databases/restart subresource: who asked, when, and when the controller
	// finished it. Only databases/restart sets the request; a write of the
	// Database or of its status keeps the stored one.
	// +optional
	Restart *DatabaseRestartStatus `json:"restart,omitempty" protobuf:"bytes,8,opt,name=restart"`
	// Switchover is the last request to move the primary: who asked, when,
	// and the Pod named, through the databases/switchover subresource or a
	// write of the Database that changes spec.primary to a Pod. The API
	// server sets it; a write of status keeps the stored one. A spec.primary
	// asked before the last automatic failover (lastFailoverTime) is not
	// acted on: the controller keeps the promoted replica.
	// +optional
	Switchover *DatabaseSwitchoverStatus `json:"switchover,omitempty" protobuf:"bytes,9,opt,name=switchover"`
	// SwitchoverProgress is the switchover the controller is carrying out,
	// from status.primary to another Pod, whether asked for through
	// databases/switchover, spec.primary or a scale-down past the primary;
	// unset when none is under way. Only the controller writes it, through
	// databases/status, which users may only read: it is the controller's
	// record of a switchover it started, kept across its restarts.
	// +optional
	SwitchoverProgress *DatabaseSwitchoverProgress `json:"switchoverProgress,omitempty" protobuf:"bytes,11,opt,name=switchoverProgress"`
	// ReplicaSetMembers are the Pods the replica set's configuration lists,
	// on an engine whose members elect their primary (MongoDB), as the
	// controller last read or wrote it; unset until it has reached the set's
	// primary. The StatefulSet keeps every Pod it names: a scale-down takes a
	// member out of the configuration before its Pod is removed, so the
	// others keep a majority. Only the controller writes it, through
	// databases/status.
	// +optional
	// +listType=set
	ReplicaSetMembers []string `json:"replicaSetMembers,omitempty" protobuf:"bytes,12,rep,name=replicaSetMembers"`
	// PrimaryLastWritableTime is, while the primary does not take writes,
	// the last time the controller saw it take them; unset while it does.
	// The failover delay counts from it. Only the controller writes it.
	// +optional
	PrimaryLastWritableTime *metav1.Time `json:"primaryLastWritableTime,omitempty" protobuf:"bytes,13,opt,name=primaryLastWritableTime"`
	// Failover is the automatic failover the controller is carrying out, or
	// the one it refuses and why; unset when none is due. Only the
	// controller writes it, through databases/status: it is its record of a
	// failover it started, kept across its restarts.
	// +optional
	Failover *DatabaseFailoverStatus `json:"failover,omitempty" protobuf:"bytes,14,opt,name=failover"`
	// LastFailoverTime is when the controller last promoted a replica in an
	// automatic failover; unset when it never did. A spec.primary asked
	// before it (status.switchover.requestedAt, or none recorded) is not
	// acted on, so the primary does not move back to the Pod that failed.
	// Only the controller writes it, through databases/status.
	// +optional
	LastFailoverTime *metav1.Time `json:"lastFailoverTime,omitempty" protobuf:"bytes,15,opt,name=lastFailoverTime"`
	// Username is the user clients connect as: the "username" key of the
	// credentials Secret as the controller last wrote it. It is the engine's
	// application user, except on a Database whose data was initialised
	// before the engine had one (a MongoDB Database of an earlier release
	// keeps its root user). databases/connection reports it. Empty until the
	// controller has written the Secret.
	// +optional
	Username string `json:"username,omitempty" protobuf:"bytes,10,opt,name=username"`
	// Backup is what the controller saw of the Database's backups: the one
	// under way, the last that succeeded and the last that failed. Unset
	// until spec.backup is set. Only the controller writes it, through
	// databases/status.
	// +optional
	Backup *DatabaseBackupStatus `json:"backup,omitempty" protobuf:"bytes,16,opt,name=backup"`
}

// DatabaseBackupStatus is what the controller saw of a Database's backups,
// each taken by a Job of its namespace.
type DatabaseBackupStatus struct {
	// Request is the last backup asked for through databases/backup: who
	// asked and when. The controller starts a backup Job for a request newer
	// than lastScheduleTime. Only databases/backup sets it; a write of status
	// keeps the stored one.
	// +optional
	Request *DatabaseBackupRequestStatus `json:"request,omitempty" protobuf:"bytes,7,opt,name=request"`
	// LastScheduleTime is when the controller last started a backup Job: at
	// once when spec.backup is set, then at each time of spec.backup.schedule
	// after it. Only the controller writes it.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty" protobuf:"bytes,6,opt,name=lastScheduleTime"`
	// ActiveJob is the Job taking a backup now; empty when none is.
	// +optional
	ActiveJob string `json:"activeJob,omitempty" protobuf:"bytes,1,opt,name=activeJob"`
	// LastSuccessfulTime is when the last backup that succeeded completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty" protobuf:"bytes,2,opt,name=lastSuccessfulTime"`
	// LastSuccessfulJob is the Job that took it.
	// +optional
	LastSuccessfulJob string `json:"lastSuccessfulJob,omitempty" protobuf:"bytes,3,opt,name=lastSuccessfulJob"`
	// LastFailureTime is when the last backup that failed gave up.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty" protobuf:"bytes,4,opt,name=lastFailureTime"`
	// LastFailedJob is the Job that failed; its Pods' logs say why.
	// +optional
	LastFailedJob string `json:"lastFailedJob,omitempty" protobuf:"bytes,5,opt,name=lastFailedJob"`
	// LastArchivedTime is when the primary last archived its changes to the
	// store (PostgreSQL's pg_stat_archiver.last_archived_time, of a WAL
	// segment), as the controller last read it: a restore reaches up to
	// about then. Unset before the first.
	// +optional
	LastArchivedTime *metav1.Time `json:"lastArchivedTime,omitempty" protobuf:"bytes,8,opt,name=lastArchivedTime"`
	// ArchiveFailureTime is, while the primary's last attempt to archive its
	// changes failed, when that was (the changes it could not archive pile
	// up on its volume until the store takes them); unset while archiving
	// works.
	// +optional
	ArchiveFailureTime *metav1.Time `json:"archiveFailureTime,omitempty" protobuf:"bytes,9,opt,name=archiveFailureTime"`
	// FirstRecoverableTime is the first time a restore of this Database can
	// reach (spec.restore.pointInTime): the second after the end of the
	// oldest backup the store kept once the last backup that succeeded
	// expired those beyond spec.backup.retentionFullBackups, as that
	// backup's Job reported it.
	// With lastArchivedTime it bounds the recoverability window. Unset
	// before the first backup's report.
	// +optional
	FirstRecoverableTime *metav1.Time `json:"firstRecoverableTime,omitempty" protobuf:"bytes,10,opt,name=firstRecoverableTime"`
}

// DatabaseRestartStatus is a rolling restart of a Database's Pods: the
// request databases/restart recorded and the controller's progress on it.
type DatabaseRestartStatus struct {
	// RequestedBy is the user name of whoever asked, as the API server
	// authenticated them.
	// +required
	RequestedBy string `json:"requestedBy" protobuf:"bytes,1,opt,name=requestedBy"`
	// RequestedAt is when the API server recorded the request, in
	// microseconds; the controller stamps it on the Pod template, so each
	// request rolls the Pods once.
	// +required
	RequestedAt metav1.MicroTime `json:"requestedAt" protobuf:"bytes,2,opt,name=requestedAt"`
	// Reason is the free text the request carried, if any.
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,3,opt,name=reason"`
	// CompletedAt is when the controller saw every database Pod recreated
	// since RequestedAt and Ready, in microseconds like RequestedAt, so it is
	// never earlier than RequestedAt even when a restart takes under a
	// second. Unset while the restart is under way.
	// +optional
	CompletedAt *metav1.MicroTime `json:"completedAt,omitempty" protobuf:"bytes,4,opt,name=completedAt"`
}

// DatabaseSwitchoverStatus is a switchover asked for through
// databases/switchover; the controller carries it out from spec.primary,
// which the request set.
type DatabaseSwitchoverStatus struct {
	// RequestedBy is the user name of whoever asked, as the API server
	// authenticated them.
	// +required
	RequestedBy string `json:"requestedBy" protobuf:"bytes,1,opt,name=requestedBy"`
	// RequestedAt is when the API server recorded the request.
	// +required
	RequestedAt metav1.Time `json:"requestedAt" protobuf:"bytes,2,opt,name=requestedAt"`
	// Target is the Pod asked to become the primary.
	// +required
	Target string `json:"target" protobuf:"bytes,3,opt,name=target"`
}

// DatabaseSwitchoverProgress is a switchover the controller is carrying
// out: which Pods it moves the primary between, and its step.
type DatabaseSwitchoverProgress struct {
	// From is the primary the switchover moves away from: status.primary.
	// +required
	From string `json:"from" protobuf:"bytes,1,opt,name=from"`
	// To is the Pod that becomes the primary.
	// +required
	To string `json:"to" protobuf:"bytes,2,opt,name=to"`
	// Step is what the switchover is at: Preparing (nothing is stopped; the
	// primary must answer as one and the target stream from it),
	// StoppingPrimary (the old primary is stopped and restarts as a standby
	// of the target; no server takes writes), Promoting (the target is
	// promoted once it has received all of the old primary's WAL), or, for a
	// replica set whose members elect their primary (MongoDB), Electing.
	// +required
	Step SwitchoverStep `json:"step" protobuf:"bytes,3,opt,name=step,casttype=SwitchoverStep"`
}

// DatabaseFailoverStatus is an automatic failover: the primary it replaces,
// the replica it promotes, and the arithmetic that allows or refuses it.
type DatabaseFailoverStatus struct {
	// From is the primary that stopped taking writes: status.primary.
	// +required
	From string `json:"from" protobuf:"bytes,1,opt,name=from"`
	// To is the replica being promoted; empty while the failover is refused.
	// +optional
	To string `json:"to,omitempty" protobuf:"bytes,2,opt,name=to"`
	// Phase is Promoting (From is fenced; To is promoted once it answers
	// and From no longer takes writes) or Refused (the reachable replicas
	// are too few to be sure one holds every acknowledged commit, or none
	// holds every other's transactions; the controller tries again at each
	// pass).
	// +required
	Phase FailoverPhase `json:"phase" protobuf:"bytes,3,opt,name=phase,casttype=FailoverPhase"`
	// ReachableReplicas is the number of replicas that answered.
	// +optional
	ReachableReplicas int32 `json:"reachableReplicas" protobuf:"varint,4,opt,name=reachableReplicas"`
	// NeededReplicas is the number of replicas that must answer: 1 with
	// Asynchronous durability; with Synchronous, where a commit is on at
	// least 1 of the N replicas, N (so one of those answering has it).
	// +optional
	NeededReplicas int32 `json:"neededReplicas" protobuf:"varint,5,opt,name=neededReplicas"`
	// StartTime is when the controller decided on the failover.
	// +required
	StartTime metav1.Time `json:"startTime" protobuf:"bytes,6,opt,name=startTime"`
}

// FailoverPhase is the phase of an automatic failover.
// +enum
type FailoverPhase string

const (
	// FailoverPhasePromoting: the old primary is fenced; the replica is
	// promoted next.
	FailoverPhasePromoting FailoverPhase = "Promoting"
	// FailoverPhaseRefused: no replica can be promoted safely.
	FailoverPhaseRefused FailoverPhase = "Refused"
)

// SwitchoverStep is the step a switchover is at.
// +enum
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

// DatabaseMember is one database Pod's part in replication, as the controller observed it.
type DatabaseMember struct {
	// Name is the Pod name, "<metadata.name>-<ordinal>".
	// +required
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// Role is Primary (takes writes) or Replica (follows the primary,
	// read-only); empty while unknown (the Pod is not running or not answering).
	// +optional
	Role MemberRole `json:"role,omitempty" protobuf:"bytes,2,opt,name=role,casttype=MemberRole"`
	// Ready is the Pod's Ready condition.
	Ready bool `json:"ready" protobuf:"varint,3,opt,name=ready"`
	// Streaming is true for a replica that receives and applies the
	// primary's changes as the primary or the replica reports it
	// (PostgreSQL's pg_stat_replication.state, MySQL's replication channel,
	// a MongoDB SECONDARY).
	// +optional
	Streaming bool `json:"streaming,omitempty" protobuf:"varint,4,opt,name=streaming"`
	// LagBytes is how many bytes of WAL the primary has written that this
	// replica has not replayed (PostgreSQL's pg_wal_lsn_diff of
	// pg_current_wal_lsn() and replay_lsn). Unset when unknown.
	// +optional
	LagBytes *int64 `json:"lagBytes,omitempty" protobuf:"varint,5,opt,name=lagBytes"`
	// LagSeconds is how many seconds this replica's applying is behind the
	// primary's commits (MongoDB's replSetGetStatus optimeDate of the primary
	// minus the replica's; MySQL's original commit timestamp of the
	// transaction the replica applies, against its clock; PostgreSQL's
	// replay_lag, the time from the primary's flush of the WAL the replica
	// last confirmed to its replay, or 0 for a replica that replayed it
	// all). Unset when unknown.
	// +optional
	LagSeconds *int64 `json:"lagSeconds,omitempty" protobuf:"varint,6,opt,name=lagSeconds"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseList is a list of Databases.
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items are the Databases.
	Items []Database `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseConnection is how a client connects to a Database, served by GET
// databases/{name}/connection. The API server computes it on each read from
// the Database and its status, as the controller writes the credentials
// Secret; it is never stored and holds no password: the password and the
// URIs are in the Secret it names, which a reader of this object may not be
// allowed to read.
type DatabaseConnection struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata: the name and namespace of the Database.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Engine is the Database's spec.engine.
	// +required
	Engine Engine `json:"engine" protobuf:"bytes,2,opt,name=engine,casttype=Engine"`
	// Host is the client Service's fully qualified DNS name,
	// "<name>.<namespace>.svc.<cluster domain>": it reaches the primary.
	// +required
	Host string `json:"host" protobuf:"bytes,3,opt,name=host"`
	// Port is the engine's TCP port, e.g. 5432.
	// +required
	Port int32 `json:"port" protobuf:"varint,4,opt,name=port"`
	// ReadHost is the read Service's fully qualified DNS name,
	// "<name>-read.<namespace>.svc.<cluster domain>", which spreads connections
	// over the replicas: set while the engine replicates and spec.replicas is
	// above 1.
	// +optional
	ReadHost string `json:"readHost,omitempty" protobuf:"bytes,5,opt,name=readHost"`
	// Database is the database the engine created at initialisation; empty
	// for an engine that creates databases on first write (MongoDB).
	// +optional
	Database string `json:"database,omitempty" protobuf:"bytes,6,opt,name=database"`
	// Username is the user applications connect as.
	// +required
	Username string `json:"username" protobuf:"bytes,7,opt,name=username"`
	// SecretName is the credentials Secret, in the Database's namespace.
	// +required
	SecretName string `json:"secretName" protobuf:"bytes,8,opt,name=secretName"`
	// PasswordKey is the key of SecretName that holds Username's password.
	// +required
	PasswordKey string `json:"passwordKey" protobuf:"bytes,9,opt,name=passwordKey"`
	// URIKey is the key of SecretName that holds a connection URI to Host,
	// credentials included.
	// +required
	URIKey string `json:"uriKey" protobuf:"bytes,10,opt,name=uriKey"`
	// ReadURIKey is the key of SecretName that holds a connection URI to
	// ReadHost; set when ReadHost is.
	// +optional
	ReadURIKey string `json:"readURIKey,omitempty" protobuf:"bytes,11,opt,name=readURIKey"`
	// Primary is the Pod that is primary now (status.primary); empty until
	// the controller has confirmed one.
	// +optional
	Primary string `json:"primary,omitempty" protobuf:"bytes,12,opt,name=primary"`
	// Ready is true when the Database takes connections: its Ready
	// condition is True.
	Ready bool `json:"ready" protobuf:"varint,13,opt,name=ready"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseRestart asks for a rolling restart of a Database's Pods: the body
// of POST databases/{name}/restart (the create verb on the subresource, as
// pods/eviction). The API server records the request in status.restart and
// answers with the Database; the controller recreates the Pods one at a
// time, replicas before the primary. A restart asked for while one is under
// way, or of a Database being deleted, is a 409 Conflict.
type DatabaseRestart struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. metadata.name, when set, must be the
	// Database's name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Reason is free text recorded with the request, e.g. "pick up the new
	// kernel parameters": at most 32768 bytes of printable UTF-8, without
	// control characters (newlines, tabs, terminal escape sequences).
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,2,opt,name=reason"`
}

// DatabaseBackupRequestStatus is a backup asked for through databases/backup.
type DatabaseBackupRequestStatus struct {
	// RequestedBy is the user name of whoever asked, as the API server
	// authenticated them.
	// +required
	RequestedBy string `json:"requestedBy" protobuf:"bytes,1,opt,name=requestedBy"`
	// RequestedAt is when the API server recorded the request.
	// +required
	RequestedAt metav1.Time `json:"requestedAt" protobuf:"bytes,2,opt,name=requestedAt"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseBackupRequest asks for a backup of a Database now: the body of
// POST databases/{name}/backup. The API server records the request in
// status.backup.request and answers with the Database; the controller
// starts a backup Job at once (or, while the Database is not Ready, once it
// is). A Database without spec.backup is a 409 Conflict, and so is a
// request while a backup runs or one asked for is not started yet, or of a
// Database being deleted.
type DatabaseBackupRequest struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. metadata.name, when set, must be the
	// Database's name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseSwitchover asks for another Pod to become a Database's primary: the
// body of POST databases/{name}/switchover. The API server checks that the
// target is a replica that streams from the primary and has replayed all it
// was sent (status.members), sets spec.primary to it, records the request in
// status.switchover and answers with the Database; the controller carries
// out the planned switchover spec.primary describes. A target that is not one
// of the Database's Pods is a 422; one that is not a caught-up replica, or an
// engine whose replication the controller does not run, a 409 Conflict.
type DatabaseSwitchover struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. metadata.name, when set, must be the
	// Database's name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Target is the Pod to become the primary, "<metadata.name>-<ordinal>",
	// e.g. "shop-1".
	// +required
	Target string `json:"target" protobuf:"bytes,2,opt,name=target"`
}

// +genclient
// +genclient:onlyVerbs=get,list,delete
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseBackup is one backup of a Database, as the backup store holds it:
// the API server reads it from the store (the one spec.backup names, of each
// Database of the namespace) on every get and list, and deleting it removes
// it from the store. It is never kept in etcd, so a backup expired by the
// retention or removed from the store by hand is not listed, and every
// backup listed is in the store. It has no spec: nothing of it can be
// written, and it cannot be watched.
type DatabaseBackup struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is "<database>.<backup id>" (the
	// id lower-cased, e.g. "ledger.20261205-030041f"); the labels hold
	// app.kubernetes.io/instance, the Database's name.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Database is the name of the Database the backup was taken of, which
	// may have been deleted since: its backups stay in the store.
	// +required
	Database string `json:"database" protobuf:"bytes,2,opt,name=database"`
	// ID is the backup's name in the store, unique among the Database's
	// backups: pgBackRest's label, e.g. "20261205-030041F".
	// +required
	ID string `json:"id" protobuf:"bytes,13,opt,name=id"`
	// Engine is that Database's engine.
	// +required
	Engine Engine `json:"engine" protobuf:"bytes,3,opt,name=engine,casttype=Engine"`
	// Method is how the backup was taken: "pgBackRest full" (a full
	// physical backup by pgBackRest).
	// +required
	Method string `json:"method" protobuf:"bytes,4,opt,name=method"`
	// StartTime is when the backup started.
	// +required
	StartTime metav1.Time `json:"startTime" protobuf:"bytes,5,opt,name=startTime"`
	// EndTime is when it ended: the data is as of then.
	// +required
	EndTime metav1.Time `json:"endTime" protobuf:"bytes,6,opt,name=endTime"`
	// DataBytes is the size of the data the backup restores, in bytes.
	// +required
	DataBytes int64 `json:"dataBytes" protobuf:"varint,7,opt,name=dataBytes"`
	// StoredBytes is what the backup takes in the store, in bytes
	// (compressed).
	// +required
	StoredBytes int64 `json:"storedBytes" protobuf:"varint,8,opt,name=storedBytes"`
	// LogStart and LogEnd are the first and last archived log files the
	// backup needs to be consistent (PostgreSQL: WAL segment names); a
	// restore to a later time needs every archived log file after them.
	// +optional
	LogStart string `json:"logStart,omitempty" protobuf:"bytes,9,opt,name=logStart"`
	// +optional
	LogEnd string `json:"logEnd,omitempty" protobuf:"bytes,10,opt,name=logEnd"`
	// RecoverableFrom is the first time a point-in-time restore from this
	// backup reaches: the second after EndTime.
	// +required
	RecoverableFrom metav1.Time `json:"recoverableFrom" protobuf:"bytes,11,opt,name=recoverableFrom"`
	// RecoverableUntil is the last time a restore starts from this backup
	// rather than a later one: the next backup's end; for the newest, the
	// Database's status.backup.lastArchivedTime (unset when the Database is
	// gone or has archived nothing).
	// +optional
	RecoverableUntil *metav1.Time `json:"recoverableUntil,omitempty" protobuf:"bytes,12,opt,name=recoverableUntil"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatabaseBackupList is a list of DatabaseBackups.
type DatabaseBackupList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items are the DatabaseBackups.
	Items []DatabaseBackup `json:"items" protobuf:"bytes,2,rep,name=items"`
}
