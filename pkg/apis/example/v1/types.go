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
}

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
	// Streaming is true for a replica whose WAL receiver the primary reports
	// as streaming (PostgreSQL's pg_stat_replication.state).
	// +optional
	Streaming bool `json:"streaming,omitempty" protobuf:"varint,4,opt,name=streaming"`
	// LagBytes is how many bytes of WAL the primary has written that this
	// replica has not replayed (PostgreSQL's pg_wal_lsn_diff of
	// pg_current_wal_lsn() and replay_lsn). Unset when unknown.
	// +optional
	LagBytes *int64 `json:"lagBytes,omitempty" protobuf:"varint,5,opt,name=lagBytes"`
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
