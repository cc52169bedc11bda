package v1

// Condition types of a Database's status (status.conditions). `kubectl wait
// --for=condition=Ready db/NAME` waits on ConditionReady.
const (
	// ConditionReady is True when every replica is ready at the current generation.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a change is being rolled out: creation, scaling,
	// a rolling update, a StatefulSet replacement, a deletion.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when a Ready Database lost replicas, a volume expansion was
	// refused, its credentials Secret is being deleted, the creation of its Pods is refused,
	// the scheduler cannot place one of its Pods, or it failed.
	ConditionDegraded = "Degraded"
	// ConditionReplicating, on a Database of more than one replica whose engine replicates,
	// is True when every replica streams from the primary, False while one does not or a
	// switchover is under way, and Unknown when the controller cannot reach the servers.
	ConditionReplicating = "Replicating"
	// ConditionBackedUp, on a Database with spec.backup, is True when its last backup
	// succeeded (ReasonBackupSucceeded), False when it failed (ReasonBackupFailed), the
	// primary fails to archive its changes (ReasonArchiveFailing) or the store's Secret
	// cannot be used (ReasonBackupStoreInvalid), and Unknown until the first backup ends
	// (ReasonBackupPending).
	ConditionBackedUp = "BackedUp"
	// ConditionRestored, on a Database with spec.restore, is True once its data was
	// restored (ReasonRestored), False while the restore fails (ReasonRestoreFailed,
	// with what the engine's restore said), and Unknown while it runs
	// (ReasonRestoring).
	ConditionRestored = "Restored"
)

// Reasons of the conditions, which the controller also gives its Events of the same
// causes (CamelCase, as metav1.Condition requires).
const (
	// Ready, Progressing and Degraded.
	ReasonAllReplicasReady   = "AllReplicasReady"
	ReasonReplicasNotReady   = "ReplicasNotReady"
	ReasonProvisioning       = "Provisioning"
	ReasonPending            = "Pending"
	ReasonCreating           = "Creating"
	ReasonUpdating           = "Updating"
	ReasonRollingUpdate      = "RollingUpdate"
	ReasonScaling            = "Scaling"
	ReasonWaitingForReplicas = "WaitingForReplicas"
	ReasonWaitingForDeletion = "WaitingForDeletion"
	ReasonComplete           = "Complete"
	ReasonAsExpected         = "AsExpected"
	ReasonDeleting           = "Deleting"
	// ReasonStorageExpanding: the claims request spec.storage, their capacity is not there yet.
	ReasonStorageExpanding = "StorageExpanding"
	// Replicating, and Progressing during a switchover (also its Events).
	ReasonStreaming    = "Streaming"
	ReasonNotStreaming = "NotStreaming"
	ReasonNotObserved  = "NotObserved"
	ReasonSwitchover   = "Switchover"
	// ReasonRestarting: Progressing (and Ready, while a Pod is ready) while a restart asked
	// for through databases/restart rolls.
	ReasonRestarting = "Restarting"

	// Failures (phase Failed): conditions and Warning Events.
	ReasonChildConflict          = "ChildConflict"
	ReasonUnsupportedVersion     = "UnsupportedVersion"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonInvalidChild           = "InvalidChild"
	ReasonInvalidCredentials     = "InvalidCredentials"
	ReasonStorageExpansionFailed = "StorageExpansionFailed"
	ReasonCredentialsLost        = "CredentialsLost"
	// ReasonCredentialsRefused (Ready False, Degraded): the servers refuse the credentials
	// Secret's username and password (the Secret was edited; the data directory keeps the
	// password it was initialised with).
	ReasonCredentialsRefused = "CredentialsRefused"
	// ReasonCredentialsDeleting (Degraded, not Failed): the credentials Secret is being
	// deleted and kept by the controller's finalizer database.example.com/credentials.
	ReasonCredentialsDeleting  = "CredentialsDeleting"
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonFailedCreate: the StatefulSet controller cannot create the Pods (an admission
	// refusal), the reason and message of its Warning Event; Failed while no replica is
	// ready, Degraded while some are. The name is the one of the ReplicaFailure condition of
	// ReplicaSets and Deployments.
	ReasonFailedCreate = "FailedCreate"
	// ReasonUnschedulable: the scheduler cannot place a Pod (its PodScheduled condition False
	// with reason Unschedulable for the controller's UnschedulableAfter, 30s), with the Pods
	// and the scheduler's message; Failed while no replica is ready, Degraded while some are, as
	// FailedCreate, which comes first when both hold. The name is the reason of that Pod
	// condition.
	ReasonUnschedulable = "Unschedulable"
	// ReasonReconcileError is a transient error (Progressing False and a Warning Event),
	// retried with backoff.
	ReasonReconcileError = "ReconcileError"
	// Reasons of ConditionBackedUp.
	ReasonBackupSucceeded    = "BackupSucceeded"
	ReasonBackupFailed       = "BackupFailed"
	ReasonBackupPending      = "BackupPending"
	ReasonBackupStoreInvalid = "BackupStoreInvalid"
	ReasonArchiveFailing     = "ArchiveFailing"
	// Reasons of ConditionRestored.
	ReasonRestored      = "Restored"
	ReasonRestoring     = "Restoring"
	ReasonRestoreFailed = "RestoreFailed"
)
