package database

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// observeTimeout bounds the asking of every member of a Database, which runs in parallel:
// a Pod that does not answer in time is unreachable for this pass.
const observeTimeout = 5 * time.Second

// replication is what the replication step found, for status.
type replication struct {
	// primary is the Pod confirmed primary: status.primary.
	primary string
	members []examplev1.DatabaseMember
	// switchover, when not empty, says what a switchover under way waits for.
	switchover string
	// progress is the switchover under way, for status.switchoverProgress; nil when none
	// is. It is set with switchover (switchingOver).
	progress *examplev1.DatabaseSwitchoverProgress
	// notStreaming lists the replicas that are not streaming, with why.
	notStreaming []string
	// refused lists the members whose servers refuse the credentials Secret's superuser
	// username and password.
	refused []string
	// observed is false when the controller could not ask the servers at all.
	observed bool
	// fenced is true while the replication ConfigMap names another Pod than the confirmed
	// primary (steps 2 and 3 of a switchover), or a failover fenced it: the confirmed
	// primary takes no writes.
	fenced bool
	// lastWritable is status.primaryLastWritableTime: set while the confirmed primary, seen
	// writable before, does not take writes.
	lastWritable *metav1.Time
	// failover is status.failover, and failoverWhy what the failover waits for or why it is
	// refused, for the conditions.
	failover    *examplev1.DatabaseFailoverStatus
	failoverWhy string
	// fencedByFailover is true when this pass fenced the primary for a failover, refused or
	// not: it is not labelled primary again in the pass.
	fencedByFailover bool
	// lastFailoverTime is status.lastFailoverTime: when a failover last promoted a replica.
	lastFailoverTime *metav1.Time
	// watched is true when the confirmed primary took writes this pass and has replicas
	// that could replace it: the servers are asked every RequeueAfterPrimaryCheck, so
	// Ready turns False, and a switchover is refused, within that of it stopping, whether
	// it is failed over automatically or by hand.
	watched bool
	// requeueAfter, when positive, is when the failover delay runs out.
	requeueAfter time.Duration
	// diverged lists the replicas that have transactions the primary lacks
	// (engine.Failover.Diverged): no Service routes to them and nothing points them at the
	// primary.
	diverged []string
	// commitsWaiting, when not empty, says that the primary's commits have waited for
	// replicas' acknowledgements for CommitWaitLimit or longer (commitsWaiting).
	commitsWaiting string
	// archiving is what the primary said of its continuous archiving, for a Database with
	// spec.backup on an engine.Archiver; nil otherwise or when it did not answer.
	archiving *engine.Archiving
}

// confirmedPrimary is the Pod the controller last confirmed primary, status.primary; at
// creation (or when status.primary names none of the Database's Pods) the first Pod, which the
// setup script lets initialise while every other Pod clones it.
func confirmedPrimary(db *examplev1.Database) string {
	if _, ok := specs.PodOrdinal(db, db.Status.Primary); ok {
		return db.Status.Primary
	}
	return specs.PodName(db, 0)
}

// targetPrimary is the Pod that should be primary: spec.primary when set and asked since the
// last failover (examplev1.RequestedPrimary); else the confirmed primary while spec.replicas
// keeps it; else the first Pod (a scale-down never removes the primary: it is moved first).
func targetPrimary(db *examplev1.Database, replicas int32) string {
	if requested := examplev1.RequestedPrimary(db); requested != "" {
		return requested
	}
	confirmed := confirmedPrimary(db)
	if ordinal, ok := specs.PodOrdinal(db, confirmed); ok && ordinal < replicas {
		return confirmed
	}
	return specs.PodName(db, 0)
}

// heldReplicas is the number of Pods the StatefulSet is to run: spec.replicas, or more while
// the confirmed or the designated primary (the replication ConfigMap's), or a member of a
// replica set's configuration (configured), has an ordinal past it, so a scale-down waits
// for the switchover that moves the primary off the Pods it removes, and for the
// reconfiguration that takes them out of the set; and every Pod running while the primary
// takes no writes (status.primaryLastWritableTime) or a failover is recorded
// (status.failover), since any replica may be the one holding every acknowledged commit.
// With Synchronous durability, every Pod running is also held until the Pods past
// spec.replicas are drained (pass.drain): one of them may be the only replica holding an
// acknowledged commit. It never holds more than running, the Pods the StatefulSet runs now: a
// Pod past them does not exist.
func heldReplicas(db *examplev1.Database, replicas, running int32, designated string, configured []string, drained bool) int32 {
	n := replicas
	if db.Status.PrimaryLastWritableTime != nil || db.Status.Failover != nil || (synchronous(db) && !drained) {
		n = max(n, running)
	}
	for _, pod := range append([]string{confirmedPrimary(db), designated}, configured...) {
		if ordinal, ok := specs.PodOrdinal(db, pod); ok && ordinal < running {
			n = max(n, ordinal+1)
		}
	}
	return n
}

// ensureReplicationConfigMap makes the replication ConfigMap exist with our scripts, naming
// the confirmed primary when it is new, and returns the primary it names. One that names
// another Pod than the confirmed primary, not by a switchover or failover the controller
// started (status.failover names the replica it promotes), or none
// of the Database's Pods, was edited by hand: it is set back, with a Warning Event; kept, it
// would have the primary stopped as for a switchover, without the checks that keep it safe,
// or every Pod start as a standby of no one. A switchover the controller started is one the
// Database's status.switchoverProgress, which only the controller writes (databases/status),
// says is under way from the confirmed primary to the Pod the ConfigMap names
// (switchoverUnderWay); nothing on the ConfigMap, which anyone who can edit it can write,
// counts.
//
// A replica set's ConfigMap (engine.Recipe.ReplicaSet) only reports the primary its members
// elected, which nothing acts on: it is taken as it is.
func (p *pass) ensureReplicationConfigMap(ctx context.Context) (string, *halt, error) {
	db := p.db
	want := specs.ReplicationConfigMap(db, p.desired, confirmedPrimary(db))
	cm, h, err := ensureChild(ctx, p, childOps[*corev1.ConfigMap]{
		kind:   "ConfigMap",
		name:   want.Name,
		client: p.r.kube.CoreV1().ConfigMaps(db.Namespace),
		cached: p.r.listers.ConfigMaps.ConfigMaps(db.Namespace).Get,
		build:  func() *corev1.ConfigMap { return want },
		sync:   func(have *corev1.ConfigMap) *halt { specs.SyncReplicationConfigMap(have, want); return nil },
	})
	if h != nil || err != nil {
		return "", h, err
	}
	named, confirmed := specs.ReplicationPrimary(cm), confirmedPrimary(db)
	if p.desired.Recipe.ReplicaSet {
		return named, nil, nil
	}
	pods := ptr.Deref(db.Spec.Replicas, 0)
	if ordinal, ok := specs.PodOrdinal(db, confirmed); ok {
		pods = max(pods, ordinal+1)
	}
	fo := failingOver(db, confirmed)
	if fo != nil {
		if ordinal, ok := specs.PodOrdinal(db, fo.To); ok {
			pods = max(pods, ordinal+1)
		}
	}
	ordinal, ok := specs.PodOrdinal(db, named)
	ours := named == confirmed || switchoverUnderWay(db, confirmed, named) || (fo != nil && fo.To == named)
	if !ok || ordinal >= pods || !ours {
		if err := p.designate(ctx, confirmed); err != nil {
			return "", nil, err
		}
		p.r.event(ctx, db, corev1.EventTypeWarning, examplev1.ReasonInvalidChild,
			"ConfigMap %s named %q the primary, which the controller did not ask for; set it back to %s (change spec.primary to move the primary)", cm.Name, named, confirmed)
		return confirmed, nil, nil
	}
	return named, nil, nil
}

// switchoverUnderWay reports whether db's status says a switchover from the Pod from to the
// Pod to is under way: status.switchoverProgress, which a pass that completes the replication
// step writes (switchingOver) and every other pass keeps, names them. Only the controller
// writes status (the API server drops status from writes of the Database itself, and users
// may only read databases/status); condition messages, which are for people, are never read.
func switchoverUnderWay(db *examplev1.Database, from, to string) bool {
	sp := db.Status.SwitchoverProgress
	return sp != nil && sp.From == from && sp.To == to
}

// switchingOver records in rep a switchover from from to to at step, waiting for what:
// status.switchoverProgress, and the message of the conditions that report it.
func (rep *replication) switchingOver(from, to string, step examplev1.SwitchoverStep, what string) {
	rep.switchover = fmt.Sprintf("switching over from %s to %s: %s", from, to, what)
	rep.progress = &examplev1.DatabaseSwitchoverProgress{From: from, To: to, Step: step}
}

// reconcileReplication runs the replication of a Database whose engine replicates, once its
// StatefulSet is in place: it asks every server its part, moves the primary when the target
// differs (switchover), creates the replication role and one slot per replica on the primary,
// labels the Pods with their role (specs.RoleLabel) for the Services, and returns what status
// reports; out of a switchover, it restarts the Pods for a new revision (rollPods).
// statefulSet is the StatefulSet as last read or written, designated the primary the
// replication ConfigMap names, replicas spec.replicas and sts the number of Pods the
// StatefulSet runs (heldReplicas).
//
// A switchover from the confirmed primary O to the target T takes three passes, each
// repeatable, so a controller that restarts half-way finishes it:
//  1. once T answers as a standby and streams from O, and status says the switchover is under
//     way (status.switchoverProgress, switchoverUnderWay: a pass that waited, or found T
//     streaming, wrote it): the
//     ConfigMap names T, O loses its role label (clients are turned away: the write pause
//     begins) and O's Pod is deleted; its preStop hook shuts the server down fast, which
//     sends every WAL record to the standbys first;
//  2. O's Pod comes back; the setup script, reading that T is primary, starts it as a
//     standby (O is fenced: it takes no writes);
//  3. once O answers as a standby and T has received all of O's WAL (T's received or
//     replayed position at least O's replayed one, the end of its shutdown checkpoint): T is
//     promoted, confirmed (status.primary) and labelled primary, and O, T's standby, streams
//     from it through the client Service.
//
// There is no automatic failover: T is never promoted while O has not been seen to stop
// taking writes, which a controller cannot tell from a network partition.
func (p *pass) reconcileReplication(ctx context.Context, statefulSet *appsv1.StatefulSet, designated string, replicas, sts int32) (replication, error) {
	db := p.db
	rep := replication{primary: confirmedPrimary(db), lastFailoverTime: db.Status.LastFailoverTime}
	r := p.replicator()
	members, server, asked, err := p.members(ctx, sts, r)
	if err != nil {
		return rep, err
	}
	if !asked {
		r = nil
	}
	rep.observed = asked
	byName := map[string]*member{}
	for _, m := range members {
		byName[m.Name] = m
	}
	old, target := byName[rep.primary], targetPrimary(db, replicas)
	now := p.r.clock.Now()
	f, _ := r.(engine.Failover)
	if !asked {
		// Nothing was asked: what status says of a failover stands.
		rep.lastWritable, rep.failover = db.Status.PrimaryLastWritableTime, db.Status.Failover
	}
	fo := failingOver(db, rep.primary)
	if fo != nil && f != nil {
		// A failover under way goes on; no switchover moves the primary meanwhile.
		rep.lastWritable = db.Status.PrimaryLastWritableTime
		if designated, err = p.promoteFailover(ctx, f, fo, old, byName, members, &rep, server, sts); err != nil {
			return rep, err
		}
	}

	if fo == nil && designated == rep.primary && old != nil && old.Replica() && r.Detached(old) && !slices.ContainsFunc(members, (*member).Primary) {
		// The confirmed primary, out of any switchover, answers read-only with no primary
		// to follow (engine.Replicator.Detached: a server restarted inside its Pod that
		// came back read-only), and no other
		// server takes writes: it is made to take them again.
		if err := r.Promote(ctx, p, server(old)); err != nil {
			return rep, err
		}
		p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "%s, the primary, answered read-only with no primary to follow: it takes writes again", old.Name)
		old.Writable = true
	}

	if fo == nil && r != nil && designated == rep.primary && p.watchPrimary(old, &rep, sts, now) && f != nil {
		others := slices.DeleteFunc(slices.Clone(members), func(m *member) bool { return m.Name == rep.primary })
		if err := p.startFailover(ctx, f, old, others, &rep, sts, server, now); err != nil {
			return rep, err
		}
	}
	rep.watched = r != nil && old != nil && old.Primary() && sts > 1 && f != nil

	switch {
	case fo != nil || rep.failover != nil:
		// A failover decides where the primary goes.
	case designated != rep.primary:
		// Steps 2 and 3.
		next := byName[designated]
		switch {
		case next != nil && next.Primary():
			rep.primary = designated
		case old != nil && old.Primary():
			if err := p.fence(ctx, old); err != nil {
				return rep, err
			}
			rep.switchingOver(old.Name, designated, examplev1.SwitchoverStepStoppingPrimary, "stopping "+old.Name)
		case old == nil || !old.Replica():
			rep.switchingOver(rep.primary, designated, examplev1.SwitchoverStepStoppingPrimary, fmt.Sprintf("waiting for %s to restart as a standby", rep.primary))
		case next == nil || !next.Replica():
			rep.switchingOver(rep.primary, designated, examplev1.SwitchoverStepPromoting, fmt.Sprintf("waiting for %s to answer", designated))
		case !r.CaughtUp(next, old):
			rep.switchingOver(rep.primary, designated, examplev1.SwitchoverStepPromoting, r.Lacks(next, old))
		default:
			if err := r.Promote(ctx, p, server(next)); err != nil {
				return rep, err
			}
			p.r.event(ctx, db, corev1.EventTypeNormal, examplev1.ReasonSwitchover, "Promoted %s; %s follows it as a standby", designated, rep.primary)
			switchoversTotal.WithLabelValues(db.Namespace, db.Name).Inc()
			rep.primary = designated
			next.Writable = true
		}
	case target != rep.primary:
		// Step 1.
		next := byName[target]
		switch {
		case old == nil || !old.Primary():
			rep.switchingOver(rep.primary, target, examplev1.SwitchoverStepPreparing, fmt.Sprintf("waiting for %s to answer as the primary", rep.primary))
		case next == nil || !next.Replica() || !r.Follower(old, next).Streaming:
			// The primary's view of its standbys may list one the controller cannot reach
			// (step 3 must, to promote it) or that took writes of its own.
			rep.switchingOver(rep.primary, target, examplev1.SwitchoverStepPreparing, fmt.Sprintf("waiting for %s to stream from %s", target, rep.primary))
		case !switchoverUnderWay(db, rep.primary, target):
			// Status says a switchover is under way before the ConfigMap names T: a controller
			// that stops right after step 1's writes finds its ConfigMap by that record
			// (ensureReplicationConfigMap) instead of setting it back, which would leave O,
			// restarted as T's standby, and T without a primary.
			rep.switchingOver(rep.primary, target, examplev1.SwitchoverStepPreparing, fmt.Sprintf("%s streams from %s; stopping %s next", target, rep.primary, rep.primary))
		default:
			if err := p.designate(ctx, target); err != nil {
				return rep, err
			}
			designated = target
			if err := p.fence(ctx, old); err != nil {
				return rep, err
			}
			p.r.event(ctx, db, corev1.EventTypeNormal, examplev1.ReasonSwitchover, "Switching over from %s to %s: stopping %s", rep.primary, target, rep.primary)
			rep.switchingOver(rep.primary, target, examplev1.SwitchoverStepStoppingPrimary, "stopping "+rep.primary)
			old.Forget()
		}
	}

	rep.fenced = designated != rep.primary || rep.fencedByFailover || (rep.failover != nil && rep.failover.Phase == examplev1.FailoverPhasePromoting)
	primary := byName[rep.primary]
	if !rep.fenced && primary != nil && primary.Primary() {
		if f != nil {
			for _, m := range members {
				if m == primary || !m.Replica() || !f.Diverged(primary, m) {
					continue
				}
				rep.diverged = append(rep.diverged, m.Name)
				if f.Rewinds() {
					if err := p.deletePod(ctx, m.Pod, "to rewind it"); err != nil {
						return rep, err
					}
					p.r.event(ctx, db, corev1.EventTypeNormal, ReasonDiverged, "Restarting %s, which has transactions %s lacks, to rewind it", m.Name, primary.Name)
				}
			}
		}
		removed := draining(db, members, primary.Name, replicas, sts)
		if err := p.syncPrimary(ctx, r, primary, sts, members, rep.diverged, removed, server); err != nil {
			return rep, err
		}
		if f != nil && len(removed) > 0 {
			if err := p.drain(ctx, f, members, primary.Name, removed, rep.diverged, replicas, server); err != nil {
				return rep, err
			}
		} else {
			p.r.drained.forget(db.UID)
		}
		if s, ok := r.(engine.Synchronous); ok {
			rep.commitsWaiting = p.commitsWaiting(s, primary)
		}
		if a, ok := r.(engine.Archiver); ok && db.Spec.Backup != nil {
			archiving := a.Archiving(primary)
			rep.archiving = &archiving
		}
	}
	if err := p.labelRoles(ctx, members, rep); err != nil {
		return rep, err
	}
	if !rep.fenced && rep.switchover == "" {
		if err := p.rollPods(ctx, statefulSet, members, rep.primary); err != nil {
			return rep, err
		}
	}
	rep.members, rep.notStreaming = memberStatus(r, members, rep, sts)
	for i := range rep.members {
		if slices.Contains(p.deletedPods, rep.members[i].Name) {
			rep.members[i].Ready = false
		}
	}
	for _, m := range members {
		if !m.Answered && refusedBy(r, m.Err) {
			rep.refused = append(rep.refused, m.Name)
		}
	}
	return rep, nil
}

// rollPods restarts, for the StatefulSet's update revision (its update strategy is
// OnDelete), one Pod that runs an older one: the replica of the highest ordinal first, the
// primary last, and only while every Pod runs Ready, so at most one server is down at a
// time. A primary restarted this way comes back as the primary (the ConfigMap names it); its
// clients wait out its restart. Nothing is done while the StatefulSet controller has not
// observed the StatefulSet's generation.
func (p *pass) rollPods(ctx context.Context, sts *appsv1.StatefulSet, members []*member, primary string) error {
	if !rolloutObserved(sts) {
		return nil
	}
	var next *member
	for _, m := range members {
		if m.Pod == nil || m.Pod.DeletionTimestamp != nil || !podReady(m.Pod) {
			return nil
		}
		if m.Pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision {
			continue
		}
		if next == nil || next.Name == primary || m.Name != primary {
			next = m // members are by ordinal: the last outdated replica, else the primary
		}
	}
	if next == nil {
		return nil
	}
	if err := p.deletePod(ctx, next.Pod, "to restart it for revision "+sts.Status.UpdateRevision); err != nil {
		return err
	}
	which := "a replica"
	if next.Name == primary {
		which = "the primary, last"
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, examplev1.ReasonRollingUpdate, "Restarting %s (%s) for revision %s", next.Name, which, sts.Status.UpdateRevision)
	return nil
}

// rolloutObserved reports whether the StatefulSet controller has observed sts's generation
// and named its update revision: until then no Pod is restarted for a revision.
func rolloutObserved(sts *appsv1.StatefulSet) bool {
	return sts != nil && sts.Status.ObservedGeneration == sts.Generation && sts.Status.UpdateRevision != ""
}

// deletePod deletes pod, the one the pass saw (by UID), gracefully; a Pod already gone or
// made again meanwhile is left alone. why says what for, in the error.
func (p *pass) deletePod(ctx context.Context, pod *corev1.Pod, why string) error {
	return p.deletePodWithin(ctx, pod, nil, why)
}

// FencedPodGracePeriod is the grace period, in seconds, of the Pod of a primary a failover
// fences: its server is not asked to shut down cleanly (it does not answer; its WAL or
// binary log past the replicas' is what a rewind or a new clone discards), and its
// StatefulSet makes it again, as a replica of the new primary, as soon as it is gone. It is
// not 0, which would remove the Pod from the API before the kubelet has stopped its
// containers, and let the StatefulSet start another server on the same volume.
const FencedPodGracePeriod = 1

// deletePodWithin deletes pod as deletePod does, with the grace period grace (seconds; nil
// for the Pod's own).
func (p *pass) deletePodWithin(ctx context.Context, pod *corev1.Pod, grace *int64, why string) error {
	err := p.r.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: metav1.NewUIDPreconditions(string(pod.UID)), GracePeriodSeconds: grace,
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete Pod %q %s: %w", pod.Name, why, err)
	}
	p.deletedPods = append(p.deletedPods, pod.Name)
	return nil
}

// members returns db's Pods of ordinals 0..sts-1, each asked its state in parallel through
// o, the engine's observer, when o is not nil and the Secret is in the cache (asked is false
// otherwise: nothing was asked), and how to reach a member's server as the Secret's
// superuser.
func (p *pass) members(ctx context.Context, sts int32, o engine.Observer) (members []*member, server func(*member) endpoint, asked bool, err error) {
	db := p.db
	// The Secret the pass made sure of; a new one the cache has not delivered yet means the
	// servers are not asked this pass (they cannot run before it exists anyway).
	secret, err := p.r.listers.Secrets.Secrets(db.Namespace).Get(names.SecretName(db))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, false, fmt.Errorf("get Secret %q from the cache: %w", names.SecretName(db), err)
	}
	asked = o != nil && secret != nil
	if secret == nil {
		secret = &corev1.Secret{}
	}
	user, password := p.superuser(secret)
	server = func(m *member) endpoint {
		return endpoint{
			Host: m.Pod.Status.PodIP, Port: p.desired.Recipe.Port,
			User: user, Password: password,
			Database: string(secret.Data[names.SecretKeyDatabase]),
		}
	}
	pods, err := p.r.listers.Pods.Pods(db.Namespace).List(labels.SelectorFromSet(names.SelectorLabels(db)))
	if err != nil {
		return nil, nil, false, err
	}
	members = make([]*member, sts)
	for i := range members {
		members[i] = &member{Name: specs.PodName(db, int32(i))}
		for _, pod := range pods {
			if pod.Name == members[i].Name && isPodOf(pod, db) {
				members[i].Pod = pod
			}
		}
	}
	if !asked {
		return members, server, false, nil
	}
	p.observe(ctx, o, members, server)
	p.statisticsReported = recordMembers(p.db, o, members, p.dataClaimCapacity, p.r.clock.Now())
	return members, server, true, nil
}

// observe asks the server of each of members with a running Pod its state through o, in
// parallel, within observeTimeout, and records the answer on the member (or the error, the
// member then not answering); what a member answered before is forgotten.
func (p *pass) observe(ctx context.Context, o engine.Observer, members []*member, server func(*member) endpoint) {
	ctx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	users := []string{p.desired.Recipe.ReplicationUsername}
	var wg sync.WaitGroup
	for _, m := range members {
		m.Forget()
		m.Err = nil
		if m.Pod == nil || m.Pod.Status.PodIP == "" || m.Pod.DeletionTimestamp != nil || m.Pod.Status.Phase != corev1.PodRunning {
			continue
		}
		wg.Go(func() {
			writable, st, err := o.Observe(ctx, p, server(m), users)
			if err != nil {
				m.Err = err
				return
			}
			m.Answered, m.Writable, m.State = true, writable, st
		})
	}
	wg.Wait()
}

// isPodOf reports whether pod belongs to db's StatefulSet (its controller is a StatefulSet of
// db's name): a Pod that only carries db's labels is not asked anything.
func isPodOf(pod *corev1.Pod, db *examplev1.Database) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "StatefulSet" && ref.Name == names.StatefulSetName(db)
}

// designate makes the replication ConfigMap name pod the primary.
func (p *pass) designate(ctx context.Context, pod string) error {
	db := p.db
	patch, err := json.Marshal(map[string]any{"data": map[string]string{specs.ConfigMapKeyPrimary: pod}})
	if err != nil {
		return err
	}
	_, err = p.r.kube.CoreV1().ConfigMaps(db.Namespace).Patch(ctx, specs.ReplicationConfigMapName(db), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("name %s the primary in ConfigMap %q: %w", pod, specs.ReplicationConfigMapName(db), err)
	}
	return nil
}

// fence turns clients away from m, the primary being switched from, and deletes its Pod (the
// one asked, by UID), whose server then shuts down fast; a Pod already being deleted is left
// to finish.
func (p *pass) fence(ctx context.Context, m *member) error {
	pod, err := p.setRole(ctx, m.Pod, "")
	if err != nil {
		return err
	}
	m.Pod = pod
	if m.Pod.DeletionTimestamp != nil {
		return nil
	}
	return p.deletePod(ctx, m.Pod, "to stop the old primary")
}

// dataClaimCapacity is the capacity in bytes (status.capacity) of m's data claim as the claim
// cache holds it; 0 when it holds none or the claim is not bound.
func (p *pass) dataClaimCapacity(m *member) int64 {
	ordinal, ok := specs.PodOrdinal(p.db, m.Name)
	if !ok {
		return 0
	}
	claim, ok := p.dataClaim(ordinal)
	if !ok {
		return 0
	}
	q, ok := claim.Status.Capacity[corev1.ResourceStorage]
	if !ok {
		return 0
	}
	return q.Value()
}

// hasDataClaim reports whether the claim cache holds the data claim of ordinal.
func (p *pass) hasDataClaim(ordinal int32) bool {
	_, ok := p.dataClaim(ordinal)
	return ok
}

// dataClaim is the data claim of ordinal as the claim cache holds it, and whether it does.
func (p *pass) dataClaim(ordinal int32) (*corev1.PersistentVolumeClaim, bool) {
	obj, exists, err := p.r.listers.PersistentVolumeClaims.GetByKey(p.db.Namespace + "/" + names.DataClaimName(p.db, ordinal))
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	return claim, err == nil && exists && ok
}

// maxReplicas is the most spec.replicas the API server's validation allows.
const maxReplicas = 10

// labelRoles sets specs.RoleLabel on every member's Pod: RolePrimary on the confirmed primary
// unless it is fenced (the ConfigMap names another Pod) or answered as a standby, RoleReplica
// on every other Pod that did not answer as a primary (a server with data of its own, which
// no Service may route to) nor has transactions the primary lacks (rep.diverged; one that
// does not answer at all is still a standby by its setup, and the read Service routes to it
// only while it is Ready), and no role otherwise.
func (p *pass) labelRoles(ctx context.Context, members []*member, rep replication) error {
	for _, m := range members {
		if m.Pod == nil {
			continue
		}
		role := ""
		switch {
		case m.Name == rep.primary:
			if !rep.fenced && !m.Replica() {
				role = specs.RolePrimary
			}
		case !m.Primary() && !slices.Contains(rep.diverged, m.Name):
			role = specs.RoleReplica
		}
		if _, err := p.setRole(ctx, m.Pod, role); err != nil {
			return err
		}
	}
	return nil
}

// setRole patches pod's specs.RoleLabel to role ("" removes it) when it differs, and returns
// the Pod as written (pod itself when nothing was, or it is gone).
func (p *pass) setRole(ctx context.Context, pod *corev1.Pod, role string) (*corev1.Pod, error) {
	if pod.Labels[specs.RoleLabel] == role {
		return pod, nil
	}
	var value any
	if role != "" {
		value = role
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":    pod.UID,
		"labels": map[string]any{specs.RoleLabel: value},
	}})
	if err != nil {
		return nil, err
	}
	patched, err := p.r.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		return patched, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return pod, nil
	default:
		return nil, fmt.Errorf("label Pod %q %s=%q: %w", pod.Name, specs.RoleLabel, role, err)
	}
}

// memberStatus is status.members for the first n Pods (those the StatefulSet runs: more than
// spec.replicas while a scale-down waits for a switchover), and the replicas among them that
// are not streaming, with why; o is nil when the servers were not asked.
func memberStatus(o engine.Observer, members []*member, rep replication, n int32) ([]examplev1.DatabaseMember, []string) {
	var primary *member
	for _, m := range members {
		if m.Name == rep.primary && m.Primary() {
			primary = m
		}
	}
	var out []examplev1.DatabaseMember
	var notStreaming []string
	for _, m := range members[:min(int(n), len(members))] {
		s := examplev1.DatabaseMember{Name: m.Name, Ready: m.Pod != nil && m.Pod.DeletionTimestamp == nil && podReady(m.Pod)}
		switch {
		case m.Primary():
			s.Role = examplev1.MemberRolePrimary
		case m.Replica():
			s.Role = examplev1.MemberRoleReplica
		}
		if m.Name == rep.primary {
			out = append(out, s)
			continue
		}
		why := ""
		switch {
		case m.Pod == nil:
			why = "no Pod"
		case !m.Answered && refusedBy(o, m.Err):
			why = "refuses the Secret's password"
		case !m.Answered && m.Err != nil:
			why = "not answering"
		case !m.Answered:
			why = "not running"
		case m.Primary():
			why = "a primary of its own, not a replica of " + rep.primary
		case slices.Contains(rep.diverged, m.Name):
			why = "has transactions " + rep.primary + " lacks: kept out of the Services; delete its data claim and Pod to clone it again"
		case primary == nil:
			why = "the primary is not answering"
		default:
			f := o.Follower(primary, m)
			s.Streaming, why, s.LagBytes, s.LagSeconds = f.Streaming, f.Why, f.LagBytes, f.LagSeconds
		}
		if why != "" {
			notStreaming = append(notStreaming, m.Name+" ("+why+")")
		}
		out = append(out, s)
	}
	return out, notStreaming
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// replicatingCondition is the examplev1.ConditionReplicating of rep, for a Database of replicas: True
// when every replica streams from the primary; False naming those that do not, or a
// switchover under way; Unknown when the servers could not be asked.
func replicatingCondition(rep replication) (metav1.ConditionStatus, string, string) {
	switch {
	case rep.switchover != "":
		return metav1.ConditionFalse, examplev1.ReasonSwitchover, rep.switchover
	case !rep.observed:
		return metav1.ConditionUnknown, examplev1.ReasonNotObserved, "the controller does not reach the servers"
	case len(rep.notStreaming) > 0:
		return metav1.ConditionFalse, examplev1.ReasonNotStreaming, "not streaming from " + rep.primary + ": " + strings.Join(rep.notStreaming, ", ")
	default:
		return metav1.ConditionTrue, examplev1.ReasonStreaming, "every replica streams from " + rep.primary
	}
}
