package database

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
)

// An automatic failover replaces a primary that has stopped taking writes. A pass that finds
// the confirmed primary not writable for the Database's failover delay (failoverDeadline)
// decides on it (startFailover): it counts the replicas that answer, refuses when they are
// too few to be sure one holds every acknowledged commit, fences the primary (its role label
// is removed, so the client Service drops it; every answering replica stops following it,
// so it can have no commit acknowledged by one), asks the replicas again, picks the one that
// holds every other's transactions once none receives more, and records the failover in
// status.failover, phase Promoting. The passes after it (promoteFailover) name that replica
// the primary in the replication ConfigMap, delete the old primary's Pod (which restarts as a
// replica of the new one, or is kept out when it diverged), and promote the replica once the
// old primary no longer answers as writable and its kubelet has stopped it (a hung server
// that resumed would take writes again), or FencedStopWait after the deletion when its node
// does not say. The replica picked is never changed: it may
// have been promoted by a pass that stopped before it could say so, and a second pick would
// make two primaries. A controller that restarts in the middle finds the failover in
// status, which only it writes, and goes on from there.

// Reasons of the failover's conditions and Events.
const (
	// ReasonPrimaryNotWritable: the primary does not take writes, and the failover delay has
	// not run out (or failover is Manual).
	ReasonPrimaryNotWritable = "PrimaryNotWritable"
	// ReasonFailover: an automatic failover is under way, or done (its Event).
	ReasonFailover = "Failover"
	// ReasonFailoverRefused: no replica can be promoted safely.
	ReasonFailoverRefused = "FailoverRefused"
	// ReasonDiverged: a replica has transactions the primary lacks and is kept out.
	ReasonDiverged = "Diverged"
	// ReasonCommitsWaiting: the primary's commits have waited CommitWaitLimit or longer
	// for replicas' acknowledgements.
	ReasonCommitsWaiting = "CommitsWaiting"
)

// StartupAllowance is how long the server of a primary whose Pod was created after it was last
// seen writable (a restart, a roll, a Pod deleted by hand) has to start before the failover
// delay counts: a server starting is not a server that stopped.
const StartupAllowance = time.Minute

// RequeueAfterPrimaryCheck is how often the Reconciler asks the servers of a Database with
// automatic failover whether its primary takes writes: the failover delay counts from the
// last time it did.
const RequeueAfterPrimaryCheck = 5 * time.Second

// isDrained reports whether a scale-down of the Database uid down to replicas was found
// drained (pass.drain): the replica count recorded is at most replicas. A process that
// restarts knows of none, and the scale-down waits for its next drain.
func (r *Reconciler) isDrained(uid types.UID, replicas int32) bool {
	to, ok := r.drained.get(uid)
	return ok && to <= replicas
}

// automaticFailover reports whether db's spec.failover is Automatic (empty is).
func automaticFailover(db *examplev1.Database) bool {
	return db.Spec.Failover == "" || db.Spec.Failover == examplev1.FailoverAutomatic
}

// failoverDelay is spec.failoverDelaySeconds, or the default.
func failoverDelay(db *examplev1.Database) time.Duration {
	return time.Duration(ptr.Deref(db.Spec.FailoverDelaySeconds, examplev1.DefaultFailoverDelaySeconds)) * time.Second
}

// synchronous reports whether db's commits wait for a replica (spec.durability).
func synchronous(db *examplev1.Database) bool {
	return db.Spec.Durability == examplev1.DurabilitySynchronous
}

// failingOver is db's failover under way from the Pod from: status.failover in phase
// Promoting from it; nil when none is.
func failingOver(db *examplev1.Database, from string) *examplev1.DatabaseFailoverStatus {
	f := db.Status.Failover
	if f == nil || f.Phase != examplev1.FailoverPhasePromoting || f.From != from || f.To == "" {
		return nil
	}
	return f
}

// neededReplicas is the number of replicas that must answer before one can be promoted, of
// the replicas the primary had (the Pods of the StatefulSet but the primary): with
// Synchronous durability a commit is on at least one of them, so all must answer for one of
// them to surely have it (with ANY k of N, N-k+1); with Asynchronous one is enough, and the
// commits it lacks are lost.
func neededReplicas(db *examplev1.Database, replicas int32) int32 {
	if synchronous(db) {
		return replicas
	}
	return 1
}

// lastWritable is when the confirmed primary old was last seen taking writes, and whether it
// ever was: the later of status.primaryLastWritableTime and this process's memory;
// else, when the last status written saw it answer as the primary (status.members), now.
// A primary never seen writable (a Database whose servers the controller never reached) is
// not failed over: nothing says it ever ran.
func (p *pass) lastWritable(old string, now time.Time) (time.Time, bool) {
	db := p.db
	at, seen := p.r.writable.get(db.UID)
	if t := db.Status.PrimaryLastWritableTime; t != nil {
		// This process may have seen it writable since status was written.
		return later(t.Time, at), true
	}
	if seen {
		return at, true
	}
	for _, m := range db.Status.Members {
		if m.Name == old && m.Role == examplev1.MemberRolePrimary {
			return now, true
		}
	}
	return time.Time{}, false
}

// failoverDeadline is when an automatic failover of the primary old, last seen writable at
// last, begins: the failover delay after last; for a Pod being deleted, gone, or created
// since (it restarts: a roll, a restart, a deletion by hand; the StatefulSet makes it again),
// StartupAllowance plus the delay after its deletion, last, or its creation. A primary's
// Pod on a node that stopped answering is neither gone nor new: the delay alone counts.
func failoverDeadline(db *examplev1.Database, old *member, last time.Time) time.Time {
	deadline := last.Add(failoverDelay(db))
	if old == nil || old.Pod == nil {
		return later(deadline, last.Add(StartupAllowance+failoverDelay(db)))
	}
	if created := old.Pod.CreationTimestamp; created.After(last) {
		deadline = later(deadline, created.Add(StartupAllowance+failoverDelay(db)))
	}
	if deleted := old.Pod.DeletionTimestamp; deleted != nil {
		deadline = later(deadline, deleted.Add(StartupAllowance+failoverDelay(db)))
	}
	return deadline
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// watchPrimary records in rep whether the confirmed primary old takes writes, and decides on
// a failover when it has not for the delay: it returns true when the pass is to start one
// (rep.failover is then what it starts). sts is the number of Pods the StatefulSet runs.
func (p *pass) watchPrimary(old *member, rep *replication, sts int32, now time.Time) bool {
	db := p.db
	if old != nil && old.Primary() {
		p.r.writable.set(db.UID, now)
		return false
	}
	last, known := p.lastWritable(rep.primary, now)
	if !known {
		return false
	}
	rep.lastWritable = &metav1.Time{Time: last.Truncate(time.Second)}
	if !automaticFailover(db) || sts < 2 {
		return false
	}
	deadline := failoverDeadline(db, old, last)
	if wait := deadline.Sub(now); wait > 0 {
		rep.requeueAfter = wait
		return false
	}
	return true
}

// startFailover decides on the failover of the primary old (fencing it and recording
// status.failover Promoting) or refuses it (status.failover Refused), with an Event at each
// decision. replicas are the other members; sts the Pods the StatefulSet runs.
//
// The replica to promote is picked from what the replicas answer once fenced: a transaction
// the primary sent one of them while the others were asked is counted, and none arrives
// after. A failover refused after fencing leaves the primary fenced (rep.fenced) for the
// pass: its replicas follow it again at the next pass that finds it writable.
func (p *pass) startFailover(ctx context.Context, f engine.Failover, old *member, replicas []*member, rep *replication, sts int32, server func(*member) endpoint, now time.Time) error {
	db := p.db
	status := &examplev1.DatabaseFailoverStatus{
		From: rep.primary, StartTime: metav1.NewTime(now).Rfc3339Copy(),
		NeededReplicas: neededReplicas(db, sts-1),
	}
	if prev := db.Status.Failover; prev != nil && prev.From == rep.primary {
		status.StartTime = prev.StartTime
	}
	reachable := answering(replicas)
	status.ReachableReplicas = int32(len(reachable))
	if why := refusal(status, reachable); why != "" {
		p.refuseFailover(ctx, status, rep, why)
		return nil
	}
	// Fencing: clients and replicas leave the old primary before anything is promoted.
	if old != nil && old.Pod != nil {
		pod, err := p.setRole(ctx, old.Pod, "")
		if err != nil {
			return err
		}
		old.Pod = pod
	}
	for _, m := range reachable {
		if err := f.StopFollowing(ctx, p, server(m)); err != nil {
			return fmt.Errorf("fence %s: stop replica %s following it: %w", rep.primary, m.Name, err)
		}
	}
	rep.fencedByFailover = true
	p.observe(ctx, f, reachable, server)
	reachable = answering(reachable)
	status.ReachableReplicas = int32(len(reachable))
	next := holder(f, reachable)
	why := refusal(status, reachable)
	if why == "" && next == nil {
		var names []string
		for _, m := range reachable {
			names = append(names, m.Name)
		}
		why = fmt.Sprintf("not failing over from %s: no replica holds every other's transactions (%s)", status.From, strings.Join(names, ", "))
	}
	if why != "" {
		p.refuseFailover(ctx, status, rep, why)
		return nil
	}
	status.Phase, status.To = examplev1.FailoverPhasePromoting, next.Name
	rep.failover = status
	p.r.event(ctx, db, corev1.EventTypeWarning, ReasonFailover,
		"%s has taken no writes since %s: fenced it (%d of %d replicas answered, %d needed); promoting %s, which holds every answering replica's transactions",
		rep.primary, rep.lastWritable.UTC().Format(time.RFC3339), status.ReachableReplicas, sts-1, status.NeededReplicas, next.Name)
	return nil
}

// refuseFailover records in rep the failover status refused for why, with a Warning Event
// when the last status did not say so already.
func (p *pass) refuseFailover(ctx context.Context, status *examplev1.DatabaseFailoverStatus, rep *replication, why string) {
	status.Phase = examplev1.FailoverPhaseRefused
	rep.failover, rep.failoverWhy = status, why
	if prev := p.db.Status.Failover; prev == nil || prev.Phase != examplev1.FailoverPhaseRefused || prev.ReachableReplicas != status.ReachableReplicas {
		p.r.event(ctx, p.db, corev1.EventTypeWarning, ReasonFailoverRefused, "%s", why)
	}
}

// answering is the members of ms that answered as replicas.
func answering(ms []*member) []*member {
	var replicas []*member
	for _, m := range ms {
		if m.Replica() {
			replicas = append(replicas, m)
		}
	}
	return replicas
}

// holder is the replica of reachable that holds every other's transactions (Failover.Holds),
// nil when none does (or reachable is empty).
func holder(f engine.Failover, reachable []*member) *member {
	for _, m := range reachable {
		all := true
		for _, o := range reachable {
			if o != m && !f.Holds(m, o) {
				all = false
				break
			}
		}
		if all {
			return m
		}
	}
	return nil
}

// refusal says why the failover status describes cannot go on with the replicas reachable
// ("" when it can): too few answer.
func refusal(status *examplev1.DatabaseFailoverStatus, reachable []*member) string {
	if status.ReachableReplicas < status.NeededReplicas || len(reachable) == 0 {
		return fmt.Sprintf("not failing over from %s: %d replicas answer, %d needed to be sure one has every acknowledged commit",
			status.From, status.ReachableReplicas, status.NeededReplicas)
	}
	return ""
}

// lacking, with Synchronous durability, names a replica of members answering, other than
// from and to, that holds transactions to lacks ("" when none does): to is then not
// promoted, nor taken for promoted, since a commit acknowledged by that replica alone would
// be lost. The replica picked held every answering replica's transactions when it was
// fenced; one that lacks some since is a server that lost its data (a data claim deleted,
// a server initialised anew), or was not asked then. With Asynchronous durability the
// commits a promoted replica lacks are the ones that setting may lose.
func lacking(db *examplev1.Database, f engine.Failover, to *member, members []*member, from string) string {
	if !synchronous(db) {
		return ""
	}
	for _, m := range members {
		if m.Name != from && m.Name != to.Name && m.Answered && !f.Holds(to, m) {
			return m.Name
		}
	}
	return ""
}

// promoteFailover carries out the failover fo from the confirmed primary old: it names the
// replica picked (fo.To) the primary, deletes the old primary's Pod, and promotes the replica
// once the old primary no longer answers as writable and its kubelet has stopped its server
// (or FencedStopWait has passed: fencedServerRunning); with Synchronous durability it then
// makes the new primary's commits wait for a replica before its role label routes clients
// to it. It returns the Pod the ConfigMap names.
func (p *pass) promoteFailover(ctx context.Context, f engine.Failover, fo *examplev1.DatabaseFailoverStatus, old *member, byName map[string]*member, members []*member, rep *replication, server func(*member) endpoint, sts int32) (string, error) {
	db := p.db
	status := fo.DeepCopy()
	rep.failover = status
	next := byName[status.To]
	other := ""
	if next != nil {
		other = lacking(db, f, next, members, rep.primary)
	}
	if next != nil && next.Primary() && other == "" {
		// Promoted by a pass that stopped before it could say so.
		failoversTotal.WithLabelValues(db.Namespace, db.Name).Inc()
		rep.primary, rep.lastFailoverTime = status.To, p.failedOverAt()
		return status.To, nil
	}
	if err := p.designate(ctx, status.To); err != nil {
		return rep.primary, err
	}
	if old != nil && old.Pod != nil && old.Pod.DeletionTimestamp == nil {
		if err := p.deletePodWithin(ctx, old.Pod, ptr.To[int64](FencedPodGracePeriod), "to stop the fenced primary"); err != nil {
			return status.To, err
		}
	}
	switch {
	case other != "":
		rep.failoverWhy = fmt.Sprintf("failing over from %s to %s: %s holds transactions %s lacks, so %s is not promoted: a commit acknowledged by %s alone would be lost",
			rep.primary, status.To, other, status.To, status.To, other)
		return status.To, nil
	case old != nil && old.Primary():
		rep.failoverWhy = fmt.Sprintf("failing over from %s to %s: waiting for %s, deleted, to stop taking writes", rep.primary, status.To, rep.primary)
		return status.To, nil
	}
	if wait := fencedServerRunning(old, status.StartTime.Time, p.r.clock.Now()); wait > 0 {
		rep.failoverWhy = fmt.Sprintf("failing over from %s to %s: waiting up to %v for the kubelet to stop %s, deleted, whose server does not answer",
			rep.primary, status.To, wait.Round(time.Second), rep.primary)
		rep.requeueAfter = wait
		return status.To, nil
	}
	switch {
	case next == nil || !next.Replica():
		rep.failoverWhy = fmt.Sprintf("failing over from %s to %s: waiting for %s to answer", rep.primary, status.To, status.To)
		return status.To, nil
	}
	if err := f.Promote(ctx, p, server(next)); err != nil {
		return status.To, err
	}
	if s, ok := f.(engine.Synchronous); ok && synchronous(db) {
		// Before clients reach it: a commit it acknowledged alone would be lost with it. The
		// setting waits for none of the replicas to follow it yet: the commits wait until one
		// does, which this pass makes them do.
		if err := s.SetSynchronous(ctx, p, server(next), next, 1, replicaNames(members, status.To, sts)); err != nil {
			return status.To, fmt.Errorf("set the synchronous replicas of %s: %w", status.To, err)
		}
	}
	// The client Service routes to it at once: the replicas resumed in this pass reach it
	// through that Service.
	pod, err := p.setRole(ctx, next.Pod, specs.RolePrimary)
	if err != nil {
		return status.To, err
	}
	next.Pod = pod
	since := "it was fenced"
	if t := db.Status.PrimaryLastWritableTime; t != nil {
		since = t.UTC().Format(time.RFC3339)
	}
	p.r.event(ctx, db, corev1.EventTypeNormal, ReasonFailover, "Promoted %s in place of %s, which had taken no writes since %s", status.To, rep.primary, since)
	failoversTotal.WithLabelValues(db.Namespace, db.Name).Inc()
	next.Writable = true
	rep.primary, rep.lastFailoverTime = status.To, p.failedOverAt()
	rep.failover, rep.lastWritable = nil, nil
	p.r.writable.forget(db.UID)
	return status.To, nil
}

// FencedStopWait is how long a failover waits, from the deletion of the fenced primary's
// Pod, for its kubelet to report its server stopped before it promotes a replica anyway: a
// server that does not answer may be hung rather than gone, and one that resumes takes
// writes until it is stopped, so the replica is promoted once the kubelet has stopped it
// (it stops a frozen process too: SIGKILL); a node that does not answer never reports it.
const FencedStopWait = 10 * time.Second

// fencedServerRunning is how long, at most, the failover that began at start still waits
// for the server of the fenced primary old to stop (FencedStopWait from its Pod's deletion;
// a deletion this pass asked for is not in the cache yet: now), and 0 once it is known
// stopped: its Pod gone or made since the failover began (the StatefulSet's new one), or
// its kubelet reports the database container not running.
func fencedServerRunning(old *member, start, now time.Time) time.Duration {
	if old == nil || old.Pod == nil || !old.Pod.CreationTimestamp.Time.Before(start) || !containerRunning(old.Pod, engine.ContainerName) {
		return 0
	}
	deleted := now
	if d := old.Pod.DeletionTimestamp; d != nil {
		deleted = d.Add(-time.Duration(ptr.Deref(old.Pod.DeletionGracePeriodSeconds, 0)) * time.Second)
	}
	return max(FencedStopWait-now.Sub(deleted), 0)
}

// containerRunning reports whether pod's kubelet reports its container name running.
func containerRunning(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == name {
			return c.State.Running != nil
		}
	}
	return false
}

// failedOverAt is what status.lastFailoverTime records for a failover this pass completes:
// now (to the second, as the API serialises a time), or one second after the last request to
// move the primary this pass read (status.switchover.requestedAt) when that is later, so the
// request counts as asked before the failover whatever the controller's and the API server's
// clocks say (examplev1.RequestedPrimary). A request written since the pass read the
// Database makes its status write conflict; the next pass, promoted already, records the
// failover after it: a request accepted before a failover is recorded is superseded by it.
func (p *pass) failedOverAt() *metav1.Time {
	t := metav1.NewTime(p.r.clock.Now()).Rfc3339Copy()
	if s := p.db.Status.Switchover; s != nil {
		if after := metav1.NewTime(s.RequestedAt.Add(time.Second)).Rfc3339Copy(); t.Before(&after) {
			t = after
		}
	}
	return &t
}
