package database

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// Reasons of the controller's Events alone; those of conditions, which its Events of the
// same causes share, are the API's (examplev1.Reason...).
const (
	// ReasonRestartCompleted: a restart asked for through databases/restart is done (its
	// beginning is the StatefulSet's Updated Event).
	ReasonRestartCompleted = "RestartCompleted"
	ReasonCreated          = "Created"
	ReasonUpdated          = "Updated"
	ReasonDeleted          = "Deleted"
	ReasonReplacing        = "Replacing"
	ReasonResizing         = "Resizing"
	ReasonSecretGenerated  = "SecretGenerated"
	ReasonCleanupDone      = "CleanupDone"
	ReasonDoNotTerminate   = "DoNotTerminate"
	ReasonAdopted          = "Adopted"
)

// observation is what computeStatus needs from a Reconcile.
type observation struct {
	// statefulSet is db's StatefulSet as last read or written, nil if there is none.
	statefulSet *appsv1.StatefulSet
	// replicas is the number of replicas the spec asks for.
	replicas int32
	// failure is the permanent error that stopped the Reconcile, if any.
	failure *failure
	// waiting, if not empty, says which child's deletion the Reconcile waits for.
	waiting string
	// expansion, if set, is a volume expansion the API server refused: the Database runs on
	// with its volumes at their current size.
	expansion *failure
	// credentials, if set, is the credentials Secret being deleted, kept by
	// CredentialsFinalizer: the Database runs on with it, Degraded.
	credentials *failure
	// expanding names the mounted claims whose capacity has not reached spec.storage yet,
	// with their sizes: a volume expansion under way.
	expanding []string
	// replication is what the replication step found, nil for an engine that does not
	// replicate or a pass that stopped before it.
	replication *replication
	// statistics is true when a server gave the replication step its statistics, which the
	// metrics report while they are fresh (ReportMaxAge).
	statistics bool
	// refusal, if set, is the StatefulSet controller's refusal to create the Pods
	// (podRefusal): they are fewer than the StatefulSet asks for, and its latest attempt
	// failed; or, when it has none, the scheduler's refusal to place Pods (unschedulable).
	refusal *failure
	// unschedulableIn, when positive, is how long until a Pod the scheduler refuses now has
	// been refused for UnschedulableAfter, and so is a refusal.
	unschedulableIn time.Duration
	// username is the credentials Secret's username key as the pass wrote or found it;
	// empty when the pass stopped before the Secret.
	username string
	// backup is what the backup step found (status.backup, BackedUp); nil when the
	// Database has no spec.backup or the pass stopped before the step.
	backup *backups
	// restore is the Restored condition of a Database with spec.restore; nil otherwise or
	// when the pass stopped before it.
	restore *restored
}

// rolledOut reports whether the StatefulSet controller has observed sts's current generation
// and every Pod is at the update revision: only then do its ready replicas count as ready.
func rolledOut(sts *appsv1.StatefulSet) bool {
	return sts.Status.ObservedGeneration == sts.Generation && sts.Status.CurrentRevision == sts.Status.UpdateRevision
}

// readyReplicas is status.readyReplicas: the StatefulSet's ready replicas once rolledOut;
// while it rolls, at most the replicas already at the update revision
// (min(readyReplicas, updatedReplicas)), so Pods of the old revision are not counted.
func readyReplicas(sts *appsv1.StatefulSet) int32 {
	switch {
	case sts == nil:
		return 0
	case rolledOut(sts):
		return sts.Status.ReadyReplicas
	default:
		return min(sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas)
	}
}

// computeStatus returns db's status for obs: a copy of db.Status with the phase, ready
// replicas, selector, observed generation, username (when the pass saw the Secret) and the
// three conditions set. Conditions go
// through meta.SetStatusCondition, so lastTransitionTime becomes now, to the second as the
// API server stores it, only when a condition's status changes; an unchanged status
// compares equal to db.Status and is not written.
//
// Phases: Failed on a failure; Pending without a StatefulSet; on a refusal of the Pods
// (podRefusal, else unschedulable), Failed while no replica is ready and Degraded while some
// are (Ready and Progressing False, Degraded True, each with reason FailedCreate or
// Unschedulable and the refusal's message);
// Ready when the StatefulSet is rolled out with every desired replica ready and every
// mounted claim's capacity at spec.storage (Provisioning, reason StorageExpanding, while a
// volume expansion runs); Ready too, with Ready True and reason Restarting, during a restart
// of a Database Ready at this generation while at least one Pod is ready; Degraded when a Database Ready at this generation has lost ready
// replicas without a rollout; Provisioning otherwise. A restart in status.restart is
// completed (completedAt now, to the microsecond like its requestedAt) once restartDone, and until then, unless a switchover or a
// failure is what Progressing reports, Progressing is True with reason Restarting.
func computeStatus(db *examplev1.Database, obs observation, now time.Time) examplev1.DatabaseStatus {
	transition := metav1.NewTime(now).Rfc3339Copy()
	status := *db.Status.DeepCopy()
	status.ObservedGeneration = db.Generation
	status.Selector = names.PodSelector(db)
	status.ReadyReplicas = readyReplicas(obs.statefulSet)
	if obs.username != "" {
		status.Username = obs.username
	}

	type cond struct {
		status          metav1.ConditionStatus
		reason, message string
	}
	var ready, progressing, degraded cond
	sts := obs.statefulSet
	wasReady := db.Status.ObservedGeneration == db.Generation &&
		(db.Status.Phase == examplev1.DatabasePhaseReady || db.Status.Phase == examplev1.DatabasePhaseDegraded)
	// A restart of a Database that was Ready at this generation: the Pods of the old and of
	// the new revision serve the same spec (the new template differs only by the restart
	// stamp), so every ready Pod counts, and the Database stays Ready while one does.
	restarting := wasReady && sts != nil && status.Restart != nil && status.Restart.CompletedAt == nil
	if restarting {
		status.ReadyReplicas = sts.Status.ReadyReplicas
	}
	if rep := obs.replication; rep != nil && rep.observed && len(rep.members) > 0 {
		// The StatefulSet's count lags the Pods: a Pod a failover just deleted still counts
		// there until the StatefulSet controller sees it go.
		var members int32
		for _, m := range rep.members {
			if m.Ready {
				members++
			}
		}
		status.ReadyReplicas = min(status.ReadyReplicas, members)
	}
	counts := fmt.Sprintf("%d/%d replicas ready", status.ReadyReplicas, obs.replicas)

	switch {
	case obs.failure != nil:
		status.Phase = examplev1.DatabasePhaseFailed
		f := cond{metav1.ConditionFalse, obs.failure.reason, obs.failure.message}
		ready, progressing = f, f
		degraded = cond{metav1.ConditionTrue, obs.failure.reason, obs.failure.message}

	case sts == nil:
		status.Phase = examplev1.DatabasePhasePending
		msg := "waiting to create the StatefulSet"
		progressing = cond{metav1.ConditionTrue, examplev1.ReasonCreating, msg}
		if obs.waiting != "" {
			msg = "waiting: " + obs.waiting
			progressing = cond{metav1.ConditionTrue, examplev1.ReasonWaitingForDeletion, msg}
		}
		ready = cond{metav1.ConditionFalse, examplev1.ReasonPending, msg}
		degraded = cond{metav1.ConditionFalse, examplev1.ReasonAsExpected, ""}

	case obs.refusal != nil:
		// The StatefulSet controller and the scheduler retry with backoff; once the Pods
		// exist and are placed, the cases below apply again.
		status.Phase = examplev1.DatabasePhaseFailed
		if status.ReadyReplicas > 0 {
			status.Phase = examplev1.DatabasePhaseDegraded
		}
		f := cond{metav1.ConditionFalse, obs.refusal.reason, obs.refusal.message}
		ready, progressing = f, f
		degraded = cond{metav1.ConditionTrue, obs.refusal.reason, obs.refusal.message}

	case obs.waiting == "" && rolledOut(sts) && ptr.Deref(sts.Spec.Replicas, 1) == obs.replicas &&
		sts.Status.Replicas == obs.replicas && status.ReadyReplicas == obs.replicas:
		status.Phase = examplev1.DatabasePhaseReady
		ready = cond{metav1.ConditionTrue, examplev1.ReasonAllReplicasReady, counts}
		progressing = cond{metav1.ConditionFalse, examplev1.ReasonComplete, "the spec is rolled out"}
		degraded = cond{metav1.ConditionFalse, examplev1.ReasonAsExpected, ""}

	case obs.waiting == "" && restarting && ptr.Deref(sts.Spec.Replicas, 1) == obs.replicas &&
		sts.Status.Replicas == obs.replicas && status.ReadyReplicas > 0:
		status.Phase = examplev1.DatabasePhaseReady
		ready = cond{metav1.ConditionTrue, examplev1.ReasonRestarting, counts + " during a rolling restart"}
		progressing = cond{metav1.ConditionTrue, examplev1.ReasonRestarting, "a rolling restart is under way"}
		degraded = cond{metav1.ConditionFalse, examplev1.ReasonAsExpected, ""}

	case obs.waiting == "" && wasReady && rolledOut(sts) && ptr.Deref(sts.Spec.Replicas, 1) == obs.replicas &&
		sts.Status.Replicas == obs.replicas:
		status.Phase = examplev1.DatabasePhaseDegraded
		ready = cond{metav1.ConditionFalse, examplev1.ReasonReplicasNotReady, counts}
		progressing = cond{metav1.ConditionFalse, examplev1.ReasonComplete, "the spec is rolled out"}
		degraded = cond{metav1.ConditionTrue, examplev1.ReasonReplicasNotReady, counts}

	default:
		status.Phase = examplev1.DatabasePhaseProvisioning
		switch {
		case obs.waiting != "":
			progressing = cond{metav1.ConditionTrue, examplev1.ReasonWaitingForDeletion, "waiting: " + obs.waiting}
		case sts.Status.ObservedGeneration != sts.Generation:
			progressing = cond{metav1.ConditionTrue, examplev1.ReasonUpdating, fmt.Sprintf(
				"waiting for the StatefulSet controller to observe generation %d", sts.Generation)}
		case !rolledOut(sts):
			progressing = cond{metav1.ConditionTrue, examplev1.ReasonRollingUpdate, fmt.Sprintf(
				"rolling out revision %s: %d/%d replicas updated", sts.Status.UpdateRevision, sts.Status.UpdatedReplicas, obs.replicas)}
		case sts.Status.Replicas != obs.replicas:
			progressing = cond{metav1.ConditionTrue, examplev1.ReasonScaling, fmt.Sprintf("scaling from %d to %d replicas", sts.Status.Replicas, obs.replicas)}
		default:
			progressing = cond{metav1.ConditionTrue, examplev1.ReasonWaitingForReplicas, counts}
		}
		ready = cond{metav1.ConditionFalse, examplev1.ReasonProvisioning, counts}
		degraded = cond{metav1.ConditionFalse, examplev1.ReasonAsExpected, ""}
	}

	if len(obs.expanding) > 0 && obs.expansion == nil && status.Phase == examplev1.DatabasePhaseReady {
		// Everything else is rolled out; the volumes are still growing to the spec's storage.
		status.Phase = examplev1.DatabasePhaseProvisioning
		msg := "expanding volumes: " + strings.Join(obs.expanding, ", ")
		ready = cond{metav1.ConditionFalse, examplev1.ReasonStorageExpanding, msg}
		progressing = cond{metav1.ConditionTrue, examplev1.ReasonStorageExpanding, msg}
	}
	// A failure or a refusal of the Pods is what the conditions report, before any of these.
	stopped := obs.failure != nil || obs.refusal != nil
	if obs.expansion != nil && !stopped {
		// Everything else is rolled out; the spec's storage is not.
		progressing = cond{metav1.ConditionFalse, obs.expansion.reason, obs.expansion.message}
		degraded = cond{metav1.ConditionTrue, obs.expansion.reason, obs.expansion.message}
		if status.Phase == examplev1.DatabasePhaseReady {
			status.Phase = examplev1.DatabasePhaseDegraded
		}
	}

	if obs.credentials != nil && !stopped {
		degraded = cond{metav1.ConditionTrue, obs.credentials.reason, obs.credentials.message}
		if status.Phase == examplev1.DatabasePhaseReady {
			status.Phase = examplev1.DatabasePhaseDegraded
		}
	}

	conditions := []struct {
		typ string
		cond
	}{{examplev1.ConditionReady, ready}, {examplev1.ConditionProgressing, progressing}, {examplev1.ConditionDegraded, degraded}}
	if recipe, _ := engine.For(db.Spec.Engine); !recipe.Replicates() {
		// The controller does not replicate this engine: nothing of replication is this
		// Database's.
		status.Primary, status.Members, status.SwitchoverProgress, status.ReplicaSetMembers = "", nil, nil, nil
		status.PrimaryLastWritableTime, status.Failover, status.LastFailoverTime = nil, nil, nil
		meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionReplicating)
	}
	// notReady makes Ready False and Degraded True for reason, and a Ready phase Degraded:
	// something keeps the Database from taking or acknowledging writes.
	notReady := func(reason, message string) {
		conditions[0].cond = cond{metav1.ConditionFalse, reason, message}
		conditions[2].cond = cond{metav1.ConditionTrue, reason, message}
		if status.Phase == examplev1.DatabasePhaseReady {
			status.Phase = examplev1.DatabasePhaseDegraded
		}
	}
	if rep := obs.replication; rep != nil {
		status.Primary, status.Members, status.SwitchoverProgress = rep.primary, rep.members, rep.progress
		status.PrimaryLastWritableTime, status.Failover, status.LastFailoverTime = rep.lastWritable, rep.failover, rep.lastFailoverTime
		if rep.switchover != "" && !stopped {
			conditions[1].cond = cond{metav1.ConditionTrue, examplev1.ReasonSwitchover, rep.switchover}
		}
		if rep.fenced && !stopped {
			// The old primary is stopped and the new one not promoted yet: no server takes
			// writes, and the client Service has no endpoint.
			notReady(examplev1.ReasonSwitchover, rep.switchover)
		}
		if rep.lastWritable != nil && !stopped {
			// No server takes writes (a failover promotes one).
			notReady(notWritable(db, *rep, now))
		}
		if rep.commitsWaiting != "" && !stopped {
			// The primary takes writes but acknowledges none until a replica has them.
			notReady(ReasonCommitsWaiting, rep.commitsWaiting)
		}
		if len(rep.refused) > 0 && !stopped {
			notReady(examplev1.ReasonCredentialsRefused, fmt.Sprintf("%s refuse the username and password of Secret %s, which clients are given: "+
				"the database keeps the password its data was initialised with; set the Secret's back to it",
				strings.Join(rep.refused, ", "), names.SecretName(db)))
		}
		if obs.replicas > 1 || rep.switchover != "" {
			s, reason, message := replicatingCondition(*rep)
			conditions = append(conditions, struct {
				typ string
				cond
			}{examplev1.ConditionReplicating, cond{s, reason, message}})
		} else {
			meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionReplicating)
		}
	}
	if r := status.Restart; r != nil && r.CompletedAt == nil && !stopped {
		if restartDone(db, obs) {
			r.CompletedAt = ptr.To(metav1.NewMicroTime(now.Truncate(time.Microsecond)))
		} else if conditions[1].reason != examplev1.ReasonSwitchover {
			msg := fmt.Sprintf("rolling restart requested by %s at %s", r.RequestedBy, r.RequestedAt.UTC().Format(time.RFC3339))
			if sts != nil {
				msg += fmt.Sprintf(": %d/%d replicas restarted", min(sts.Status.UpdatedReplicas, obs.replicas), obs.replicas)
			}
			conditions[1].cond = cond{metav1.ConditionTrue, examplev1.ReasonRestarting, msg}
		}
	}
	switch {
	case obs.backup != nil:
		status.Backup = obs.backup.status.DeepCopy()
		conditions = append(conditions, struct {
			typ string
			cond
		}{examplev1.ConditionBackedUp, cond{obs.backup.condition, obs.backup.reason, obs.backup.message}})
	case db.Spec.Backup == nil:
		// status.backup stays: the last backups taken, which the store may still hold.
		meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionBackedUp)
	}
	if r := obs.restore; r != nil {
		conditions = append(conditions, struct {
			typ string
			cond
		}{examplev1.ConditionRestored, cond{r.condition, r.reason, r.message}})
		if r.condition == metav1.ConditionFalse && !stopped {
			notReady(r.reason, r.message)
		}
	}
	for _, c := range conditions {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: c.typ, Status: c.status, Reason: c.reason, Message: c.message,
			ObservedGeneration: db.Generation, LastTransitionTime: transition,
		})
	}
	return status
}

// notWritable is the reason and message of Ready while no server takes writes: the
// failover under way or refused, or the primary not writable since rep.lastWritable, with
// when a failover begins (or that it is Manual).
func notWritable(db *examplev1.Database, rep replication, now time.Time) (string, string) {
	since := rep.lastWritable.UTC().Format(time.RFC3339)
	switch f := rep.failover; {
	case f != nil && f.Phase == examplev1.FailoverPhaseRefused:
		return ReasonFailoverRefused, rep.failoverWhy
	case f != nil && rep.failoverWhy != "":
		return ReasonFailover, rep.failoverWhy
	case f != nil:
		return ReasonFailover, fmt.Sprintf("failing over from %s, which has taken no writes since %s, to %s", f.From, since, f.To)
	case !automaticFailover(db):
		return ReasonPrimaryNotWritable, fmt.Sprintf("%s, the primary, has taken no writes since %s; spec.failover is Manual: "+
			"no server takes writes until it does (set spec.failover to Automatic to fail over)", rep.primary, since)
	case len(rep.members) < 2:
		return ReasonPrimaryNotWritable, fmt.Sprintf("%s, the primary, has taken no writes since %s; there is no replica to fail over to", rep.primary, since)
	default:
		return ReasonPrimaryNotWritable, fmt.Sprintf("%s, the primary, has taken no writes since %s; failing over %s after that unless it answers",
			rep.primary, since, failoverDelay(db))
	}
}

// restartDone reports whether the restart db.Status.Restart asks for is carried out: the
// StatefulSet's Pod template has its stamp (specs.RestartStamp), and the StatefulSet
// controller has observed that template and reports every one of the desired replicas at
// its update revision and Ready.
func restartDone(db *examplev1.Database, obs observation) bool {
	sts := obs.statefulSet
	return sts != nil && sts.Spec.Template.Annotations[specs.RestartedAtAnnotation] == specs.RestartStamp(db) &&
		rolledOut(sts) && ptr.Deref(sts.Spec.Replicas, 1) == obs.replicas &&
		sts.Status.Replicas == obs.replicas && sts.Status.UpdatedReplicas == obs.replicas && sts.Status.ReadyReplicas == obs.replicas
}

// deletingStatus is db's status while its deletion policy's cleanup runs: phase Deleting,
// the ready replicas of the StatefulSet as it is now, Ready False, Degraded False, and
// Progressing True with reason Deleting (and what the cleanup waits for), or False with
// reason ReconcileError when the cleanup hit err.
func deletingStatus(db *examplev1.Database, policy examplev1.DeletionPolicy, ready int32, waiting string, err error, now metav1.Time) examplev1.DatabaseStatus {
	status := *db.Status.DeepCopy()
	status.Phase = examplev1.DatabasePhaseDeleting
	status.ObservedGeneration = db.Generation
	status.ReadyReplicas = ready
	msg := fmt.Sprintf("cleaning up with deletionPolicy %s", policy)
	progressing := metav1.Condition{Type: examplev1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: examplev1.ReasonDeleting, Message: msg}
	switch {
	case err != nil:
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionFalse, examplev1.ReasonReconcileError, err.Error()
	case waiting != "":
		progressing.Message = msg + ": waiting: " + waiting
	}
	for _, c := range []metav1.Condition{
		{Type: examplev1.ConditionReady, Status: metav1.ConditionFalse, Reason: examplev1.ReasonDeleting, Message: msg},
		progressing,
		{Type: examplev1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: examplev1.ReasonDeleting, Message: msg},
	} {
		c.ObservedGeneration, c.LastTransitionTime = db.Generation, now
		meta.SetStatusCondition(&status.Conditions, c)
	}
	return status
}
