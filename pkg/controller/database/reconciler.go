// Package database is the Database controller. The Reconciler turns each example.com/v1
// Database into its credentials Secret, headless, client and read Services, replication
// ConfigMap, StatefulSet, PodDisruptionBudget and NetworkPolicy (built by package specs), runs
// the engine's replication through its engine.Engine (pkg/engine), cleans up by
// spec.deletionPolicy, and
// reports the state in the Database's status; the Controller (controller.go) feeds it keys
// from informers through a rate-limited workqueue.
//
// Reconcile (this file) runs one pass (pass.go: the Secret and Services; replication.go:
// the replication ConfigMap; claims.go: the data claims; workload.go: the StatefulSet,
// PodDisruptionBudget and NetworkPolicy; replication.go again, for an engine that replicates: the servers'
// roles, switchover and restarts, asked through the engine's engine.Replicator, or its
// engine.ReplicaSet: replicaset.go), then writes status (status.go); a Database being deleted goes to
// delete.go instead. The pieces they share have their own files: child writes
// (childwrite.go), ownership and adoption (ownership.go), the release records that adoption
// requires (released.go), errors (errors.go), Events (events.go), and the StatefulSet
// controller's refusals to create the Pods, read from its Events (refusal.go).
package database

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/generated/clientset/versioned"
	examplelisters "example.com/database-apiserver/pkg/generated/listers/example/v1"
	"example.com/database-apiserver/pkg/names"
)

// ManagedBySelector selects the objects the Reconciler manages:
// names.ManagedByLabel=names.ManagedByValue. The controller's informers for owned kinds see
// only objects it selects.
func ManagedBySelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{names.ManagedByLabel: names.ManagedByValue})
}

// RequeueAfterNotReady is how long the Reconciler waits before looking again at a Database
// whose replicas are not all ready; the StatefulSet informer usually wakes it sooner.
const RequeueAfterNotReady = 10 * time.Second

// RequeueAfterExternal is how long the Reconciler waits before looking again at a Database
// stopped or degraded by something its informers do not see: an object it does not own
// holding a child's name, a StorageClass refusing an expansion, a terminating namespace.
const RequeueAfterExternal = time.Minute

// RequeueAfterReplication is how often the Reconciler asks the servers of a replicated
// Database for their state (status.members, the Replicating condition), and
// RequeueAfterSwitchover how often while a switchover has stopped the old primary and waits
// on WAL positions, which change without an event the informers see.
const (
	RequeueAfterReplication = 30 * time.Second
	RequeueAfterSwitchover  = 2 * time.Second
)

// Result tells the caller when to look at the Database again. A zero Result means "only
// when something changes".
type Result struct {
	// RequeueAfter, when positive, asks for another Reconcile after this long.
	RequeueAfter time.Duration
}

// Listers the Reconciler reads from (filled from shared informers by the controller). The
// listers of owned kinds may be scoped by ManagedBySelector: objects the Reconciler does not
// find in them are created, and a name taken by an object it cannot see is found then.
type Listers struct {
	Databases            examplelisters.DatabaseLister
	StatefulSets         appslisters.StatefulSetLister
	Services             corelisters.ServiceLister
	Secrets              corelisters.SecretLister
	PodDisruptionBudgets policylisters.PodDisruptionBudgetLister
	NetworkPolicies      networkinglisters.NetworkPolicyLister
	ConfigMaps           corelisters.ConfigMapLister
	Pods                 corelisters.PodLister
	// Jobs holds the backup Jobs (spec.backup).
	Jobs batchlisters.JobLister
	// PersistentVolumeClaims is the claim cache, unlike the others not scoped by labels
	// (NewClaimInformer's indexer), with the index ClaimsByDatabaseIndex: the Reconciler finds
	// a Database's data claims in it by name, since the StatefulSet mounts a claim by name.
	PersistentVolumeClaims cache.Indexer
	// Events is the cache of the StatefulSet controller's Events on StatefulSets
	// (NewEventInformer's indexer, selected by fields, not labels), with the index
	// EventsByObjectUIDIndex: the Reconciler finds in it a StatefulSet's refused Pod
	// creations (podRefusal).
	Events cache.Indexer
}

// Reconciler turns a Database into its children (credentials Secret, headless and client
// Services, StatefulSet, PodDisruptionBudget) and reports their state in the Database's
// status. It reads only from Listers and writes through the clientsets; it keeps no state
// between calls, so any number of workers may share it (the workqueue never hands the same
// key to two of them).
type Reconciler struct {
	kube      kubernetes.Interface
	databases versioned.Interface
	listers   Listers
	recorder  record.EventRecorder
	clock     clock.PassiveClock
	options   Options
	// credentials are the credentials records this process read or wrote.
	credentials credentialsRecords
	// writable is when this process last saw each Database's primary take writes; status
	// keeps it (primaryLastWritableTime) once the primary stops, for a process that restarts.
	writable byUID[time.Time]
	// drained is, for each Synchronous Database being scaled down, the replica count down
	// to which this process last found the Pods to remove drained (drain).
	drained byUID[int32]
	// seen is the resourceVersion of each Database as this process last wrote it or read it
	// from the API server.
	seen byUID[string]
	// commitsWaited holds the Databases whose primary's commits had waited CommitWaitLimit
	// or longer at the last pass.
	commitsWaited byUID[struct{}]
}

// byUID is what this process remembers of each Database, by its UID, between passes:
// nothing a restart needs (what must survive one is in status).
type byUID[V any] struct {
	mu sync.Mutex
	m  map[types.UID]V
}

func (b *byUID[V]) set(uid types.UID, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[types.UID]V{}
	}
	b.m[uid] = v
}

func (b *byUID[V]) get(uid types.UID) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[uid]
	return v, ok
}

func (b *byUID[V]) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, uid)
}

// Options are the Reconciler's settings beyond its clients.
type Options struct {
	// Observers reach the servers of replicating Databases, by engine (engine.Engine.Observer):
	// the Reconciler asks them their state and has them replicate. Without one for an engine
	// it never does: the first Pod stays primary, and the Replicating condition is Unknown.
	Observers map[examplev1.Engine]engine.Observer
	// ImageRegistry, when set, is where the database images are pulled from instead of the
	// catalog's ("registry.example:5000/mirror": specs.ImageFrom), for a mirrored or
	// air-gapped cluster.
	ImageRegistry string
	// ClusterDomain is the cluster's DNS domain, which the names of the Secret's hosts, the
	// standbys' primary and the replica set members end with (names.ServiceHost). Empty is
	// names.DefaultClusterDomain.
	ClusterDomain string
	// SuperuserSources are the address ranges the Reconciler's connections to the servers
	// come from: the engines' superusers log in over the network from these only
	// (the engines' client authentication rules and accounts). None: from any address.
	SuperuserSources []netip.Prefix
	// ControllerNamespace is the controller's own namespace, which tenants cannot write:
	// it holds the release records (ReleasedRecordName), and a Database's NetworkPolicy
	// admits the Pods labelled specs.ControllerPodLabels there. Empty is
	// DefaultControllerNamespace.
	ControllerNamespace string
}

// NewReconciler returns a Reconciler writing children through kube, Databases through
// databases, Events through recorder, and condition times read from clock, with options.
func NewReconciler(kube kubernetes.Interface, databases versioned.Interface, listers Listers, recorder record.EventRecorder, clock clock.PassiveClock, options Options) *Reconciler {
	return &Reconciler{kube: kube, databases: databases, listers: listers, recorder: recorder, clock: clock, options: options}
}

// Reconcile brings the children of the Database named key to the desired state and writes
// status.
//
// It returns (Result{}, nil) for a Database that no longer exists, that is Ready, or that
// failed on its spec (phase Failed: a version the catalog does not know, an invalid spec;
// retried when the Database changes); Result{RequeueAfter: RequeueAfterExternal} for a
// failure or a degradation caused by an object its informers do not watch (a child name
// taken by an object it does not own, a refused volume expansion, a terminating namespace);
// Result{RequeueAfter: RequeueAfterNotReady} while replicas are not ready or a child is still
// being deleted, except while the StatefulSet controller is refused the Pods' creation
// (podRefusal), whose end its informers see; and transient API errors, including write
// conflicts the cache had not seen yet, as an error for the workqueue's backoff (reported,
// except conflicts, in a Warning Event and the Progressing condition).
//
// A Database deleted while it is reconciled (a write of it, its finalizer or its status,
// answers 404) is routine: (Result{}, nil), its deletion event having ended the matter.
func (r *Reconciler) Reconcile(ctx context.Context, key cache.ObjectName) (Result, error) {
	result, err := r.reconcile(ctx, key)
	if isDatabaseGone(err, key) {
		klog.FromContext(ctx).V(2).Info("Database deleted while reconciled", "err", err)
		return Result{}, nil
	}
	return result, err
}

// isDatabaseGone reports whether err, or any error it wraps or joins, is the API server's 404
// for the Database key itself (not for one of its children).
func isDatabaseGone(err error, key cache.ObjectName) bool {
	if status, ok := err.(apierrors.APIStatus); ok {
		s := status.Status()
		if s.Reason == metav1.StatusReasonNotFound && s.Details != nil && s.Details.Group == examplev1.GroupName &&
			s.Details.Kind == "databases" && s.Details.Name == key.Name {
			return true
		}
	}
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(e.Unwrap(), func(err error) bool { return isDatabaseGone(err, key) })
	case interface{ Unwrap() error }:
		return isDatabaseGone(e.Unwrap(), key)
	}
	return false
}

func (r *Reconciler) reconcile(ctx context.Context, key cache.ObjectName) (Result, error) {
	cached, err := r.listers.Databases.Databases(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// Gone: its counters end with it, as its gauges do.
		forgetMetrics(key.Namespace, key.Name)
		return Result{}, nil
	}
	if err != nil {
		return Result{}, err
	}
	db := cached.DeepCopy()
	if rv, ok := r.seen.get(db.UID); ok && rv != db.ResourceVersion {
		// The cache may not have this process's last write yet (a status that records a
		// failover, say): a pass from an older copy would undo what one acted on. The API
		// server's copy is the newest.
		if db, err = r.databases.ExampleV1().Databases(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return Result{}, nil
			}
			return Result{}, err
		}
		r.seen.set(db.UID, db.ResourceVersion)
	}
	if db.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, db)
	}

	if db, err = r.setFinalizer(ctx, db, true); err != nil {
		return Result{}, fmt.Errorf("adding finalizer %s: %w", FinalizerName, err)
	}
	obs, err := r.sync(ctx, db)
	if err != nil {
		return Result{}, r.reportError(ctx, db, computeStatus(db, obs, r.clock.Now()), err)
	}
	return r.report(ctx, db, obs)
}

// report writes the status obs gives db and says when to look again. A failure, a refused
// volume expansion or a credentials Secret being deleted is also a Warning Event, once per transition rather than on every
// resync of an unchanged one; a refusal of the Pods, once when it begins, after the status
// that reports it is written (a write that fails is retried without repeating the Event; the
// StatefulSet controller's own Events count its retries, the scheduler's FailedScheduling
// Events on the Pod its attempts).
func (r *Reconciler) report(ctx context.Context, db *examplev1.Database, obs observation) (Result, error) {
	status := computeStatus(db, obs, r.clock.Now())
	refusalBegins := obs.refusal != nil && !refusalReported(db.Status, obs.refusal.reason)
	if !equality.Semantic.DeepEqual(db.Status, status) {
		switch {
		case obs.failure != nil:
			r.event(ctx, db, corev1.EventTypeWarning, obs.failure.reason, "%s", obs.failure.message)
		case obs.refusal != nil:
			// What the conditions report, recorded below.
		case obs.expansion != nil && !sameCondition(db.Status, status, examplev1.ConditionProgressing):
			r.event(ctx, db, corev1.EventTypeWarning, obs.expansion.reason, "%s", obs.expansion.message)
		case obs.credentials != nil && !sameCondition(db.Status, status, examplev1.ConditionDegraded):
			r.event(ctx, db, corev1.EventTypeWarning, obs.credentials.reason, "%s", obs.credentials.message)
		}
	}
	if _, err := r.writeStatus(ctx, db, status); err != nil {
		return Result{}, err
	}
	if old, r2 := db.Status.Restart, status.Restart; old != nil && old.CompletedAt == nil && r2 != nil && r2.CompletedAt != nil {
		r.event(ctx, db, corev1.EventTypeNormal, ReasonRestartCompleted, "Rolling restart requested by %s at %s completed: every Pod was recreated and is Ready",
			r2.RequestedBy, r2.RequestedAt.UTC().Format(time.RFC3339))
	}
	if refusalBegins {
		r.event(ctx, db, corev1.EventTypeWarning, obs.refusal.reason, "%s", obs.refusal.message)
	}
	if rs := obs.restore; rs != nil && rs.condition == metav1.ConditionFalse && !sameCondition(db.Status, status, examplev1.ConditionRestored) {
		r.event(ctx, db, corev1.EventTypeWarning, rs.reason, "%s", rs.message)
	}
	result := requeue(obs, status)
	if wait := obs.unschedulableIn; wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
		// No event marks the end of UnschedulableAfter.
		result.RequeueAfter = wait
	}
	if b := obs.backup; b != nil {
		// No event marks a scheduled backup's time, nor a store's Secret fixed (the
		// controller caches only Secrets it manages).
		// Nor the primary's archiving, which it is asked for at least every
		// RequeueAfterExternal once it answered.
		wait := b.next
		if (b.reason == examplev1.ReasonBackupStoreInvalid || b.archiving) && (wait == 0 || wait > RequeueAfterExternal) {
			wait = RequeueAfterExternal
		}
		if wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
			result.RequeueAfter = wait
		}
	}
	return result, nil
}

// requeue says when to look again at a Database whose status is status for obs.
func requeue(obs observation, status examplev1.DatabaseStatus) Result {
	switch rep := obs.replication; {
	case obs.failure != nil && obs.failure.external():
		return Result{RequeueAfter: RequeueAfterExternal}
	case rep != nil && rep.fenced && rep.observed:
		return Result{RequeueAfter: RequeueAfterSwitchover}
	case rep != nil && rep.requeueAfter > 0:
		// The failover delay runs out then, unless the primary answers first.
		return Result{RequeueAfter: min(rep.requeueAfter, RequeueAfterPrimaryCheck)}
	case rep != nil && rep.lastWritable != nil && rep.observed:
		// No server takes writes: a failover refused may be possible once a replica answers.
		return Result{RequeueAfter: RequeueAfterPrimaryCheck}
	case rep != nil && rep.watched && rep.switchover == "":
		return Result{RequeueAfter: RequeueAfterPrimaryCheck}
	case rep != nil && rep.switchover != "":
		// Waiting for the target to stream or the primary to answer: no WAL position to watch.
		return Result{RequeueAfter: RequeueAfterNotReady}
	case rep != nil && obs.replicas > 1 && rep.observed && status.Phase == examplev1.DatabasePhaseReady:
		return Result{RequeueAfter: RequeueAfterReplication}
	case obs.refusal != nil && rep != nil && obs.replicas > 1 && rep.observed:
		// The servers still running are asked for their state as those of a Ready Database.
		return Result{RequeueAfter: RequeueAfterReplication}
	case obs.refusal != nil:
		// Whatever ends the refusal reaches an informer: the StatefulSet controller's next
		// attempt is an Event (a new one, or its count and lastTimestamp changing), the
		// Pods it creates change the StatefulSet's status, and a Pod the scheduler places
		// (or a new message of its) or that goes away is a Pod event, so nothing is polled.
		return Result{}
	case status.Phase == examplev1.DatabasePhaseFailed:
		return Result{}
	case status.Phase == examplev1.DatabasePhaseProvisioning || status.Phase == examplev1.DatabasePhasePending:
		return Result{RequeueAfter: RequeueAfterNotReady}
	case obs.expansion != nil:
		return Result{RequeueAfter: RequeueAfterExternal}
	case obs.statistics:
		// Its servers give their statistics, which change without an event: the metrics
		// report them for ReportMaxAge after a check.
		return Result{RequeueAfter: RequeueAfterReplication}
	case status.Phase == examplev1.DatabasePhaseReady:
		return Result{}
	default:
		return Result{RequeueAfter: RequeueAfterNotReady}
	}
}

// sameCondition reports whether the condition typ is the same (status, reason, message) in
// both statuses.
func sameCondition(a, b examplev1.DatabaseStatus, typ string) bool {
	ca, cb := meta.FindStatusCondition(a.Conditions, typ), meta.FindStatusCondition(b.Conditions, typ)
	if ca == nil || cb == nil {
		return ca == cb
	}
	return ca.Status == cb.Status && ca.Reason == cb.Reason && ca.Message == cb.Message
}

// reportError makes a transient error visible and returns it for the workqueue's backoff: a
// Warning Event (the recorder aggregates repeats) and, in status, the Progressing condition
// False with reason ReconcileError and the error, written only when it differs from the
// stored status (an unchanged error writes nothing). Conflicts, routine with a cache, are
// only returned.
func (r *Reconciler) reportError(ctx context.Context, db *examplev1.Database, status examplev1.DatabaseStatus, err error) error {
	if apierrors.IsConflict(err) {
		return err
	}
	r.event(ctx, db, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "%v", err)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: examplev1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: examplev1.ReasonReconcileError, Message: err.Error(),
		ObservedGeneration: db.Generation, LastTransitionTime: r.now(),
	})
	if _, werr := r.writeStatus(ctx, db, status); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// writeStatus writes status through databases/status when it differs from db's, and returns
// the Database as written (db itself when nothing changed).
func (r *Reconciler) writeStatus(ctx context.Context, db *examplev1.Database, status examplev1.DatabaseStatus) (*examplev1.Database, error) {
	if equality.Semantic.DeepEqual(db.Status, status) {
		return db, nil
	}
	update := db.DeepCopy()
	update.Status = status
	out, err := r.databases.ExampleV1().Databases(db.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		// A conflict means our cached Database is stale; its update event requeues it.
		return nil, fmt.Errorf("updating status: %w", err)
	}
	r.seen.set(out.UID, out.ResourceVersion)
	klog.FromContext(ctx).V(2).Info("Updated status", "phase", status.Phase, "readyReplicas", status.ReadyReplicas)
	return out, nil
}

// now is the time conditions transition at, to the second as the API server stores it.
func (r *Reconciler) now() metav1.Time {
	return metav1.NewTime(r.clock.Now()).Rfc3339Copy()
}
