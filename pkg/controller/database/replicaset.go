package database

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
)

// legacyReplicaSetMembersAnnotation is where a controller that kept the members record on the
// replication ConfigMap wrote it (comma-separated Pod names).
const legacyReplicaSetMembersAnnotation = "database.example.com/replica-set-members"

// replicaSetMembers are the Pods db's status.replicaSetMembers names, the members of the
// replica set's configuration as the controller last read or wrote it, for the StatefulSet of
// db, which runs running Pods, to keep (heldReplicas): a member is taken out of the
// configuration before its Pod is removed, so the remaining members keep a majority. Nil
// without a record (the controller never reached the set's primary). A record that names
// anything but db's running Pods (stale) is no record: then every running Pod is kept, until
// the controller records the members again from the primary's configuration. Only the
// controller writes status; what the replication ConfigMap cm says, which users may edit,
// never names the members: while status has no record and cm carries
// legacyReplicaSetMembersAnnotation (a set an older controller reconfigured, perhaps half-way
// through a scale-down), every running Pod is kept, whatever the annotation says, until the
// controller records the members from the primary. An edit of the annotation can so only
// hold Pods, never have a member's Pod removed.
func replicaSetMembers(db *examplev1.Database, cm *corev1.ConfigMap, running int32) []string {
	pods := db.Status.ReplicaSetMembers
	if len(pods) == 0 {
		if cm != nil {
			if _, legacy := cm.Annotations[legacyReplicaSetMembersAnnotation]; legacy {
				return []string{specs.PodName(db, max(running-1, 0))}
			}
		}
		return nil
	}
	for _, pod := range pods {
		if ordinal, ok := specs.PodOrdinal(db, pod); !ok || ordinal >= running {
			return []string{specs.PodName(db, max(running-1, 0))}
		}
	}
	return slices.Clone(pods)
}

// reconcileReplicaSet is reconcileReplication for an engine whose members elect their primary
// (engine.ReplicaSet). It asks every server its part and:
//   - while no member has a configuration, initiates the set on the confirmed primary (the
//     first Pod of a new Database) with that member alone, once its server answers;
//   - takes the member that answers as the writable primary of the highest election term as
//     the primary (status.primary, the role label, the replication ConfigMap), so the client
//     Service follows an election;
//   - on that primary, keeps the configuration's members the Pods of ordinals below
//     spec.replicas that answer or are members already (and the primary itself), one
//     member added or removed per pass (engine.ReplicaSet.SyncMembers), with the Pod that should be primary
//     (spec.primary, else the primary while spec.replicas keeps it, else the first Pod) of
//     the highest priority: the set elects it once it has caught up, which is how a
//     switchover and a scale-down past the primary move it;
//   - labels the Pods' roles and restarts Pods for a new revision as reconcileReplication
//     does, replicas first; while the first Pod runs a standalone server and no member has a
//     configuration (a Database from before it was a replica set), the first Pod first,
//     since the set is initiated there.
//
// statefulSet is the StatefulSet as last read or written, designated the primary the
// replication ConfigMap names, replicas spec.replicas and sts the number of Pods the
// StatefulSet runs.
//
// Failover is the engine's: the set elects a new primary without the controller, which
// follows the election.
func (p *pass) reconcileReplicaSet(ctx context.Context, statefulSet *appsv1.StatefulSet, designated string, replicas, sts int32) (replication, error) {
	db := p.db
	rep := replication{primary: confirmedPrimary(db)}
	set := p.replicaSet()
	var o engine.Observer
	if set != nil {
		o = set
	}
	members, server, asked, err := p.members(ctx, sts, o)
	if err != nil {
		return rep, err
	}
	rep.observed = asked
	if !asked {
		o = nil
	}

	initiated, standalone, elected := false, false, (*member)(nil)
	for _, m := range members {
		if !m.Answered {
			continue
		}
		initiated = initiated || set.Initiated(m)
		standalone = standalone || m.Name == rep.primary && set.Standalone(m)
		if m.Writable && set.Initiated(m) && (elected == nil || set.Term(m) > set.Term(elected)) {
			elected = m
		}
	}
	switch {
	case !asked:
		// No client, or no Secret yet: the first Pod stays the primary it is taken for.
	case elected != nil:
		rep.primary = elected.Name
		// The set elects another primary without an event the informers see: the role
		// labels follow it at the next check.
		rep.watched = sts > 1
		target := preferredPrimary(db, elected.Name, replicas)
		if err := set.SyncMembers(ctx, p, server(elected), elected, members, replicas, target); err != nil {
			return rep, err
		}
		if target != rep.primary {
			rep.switchingOver(rep.primary, target, examplev1.SwitchoverStepElecting, fmt.Sprintf("the replica set elects %s, of the highest priority, once it has caught up", target))
		}
	case !initiated:
		if i := slices.IndexFunc(members, func(m *member) bool { return m.Name == rep.primary }); i >= 0 && members[i].Answered {
			if err := set.Initiate(ctx, p, server(members[i]), members[i]); err != nil {
				return rep, err
			}
		}
	}
	if asked && elected != nil && designated != rep.primary {
		if err := p.designate(ctx, rep.primary); err != nil {
			return rep, err
		}
	}

	if err := p.labelRoles(ctx, members, rep); err != nil {
		return rep, err
	}
	first := false
	if !initiated && standalone {
		if first, err = p.restartFirst(ctx, statefulSet, members, rep.primary); err != nil {
			return rep, err
		}
	}
	if !first && rep.switchover == "" {
		if err := p.rollPods(ctx, statefulSet, members, rep.primary); err != nil {
			return rep, err
		}
	}
	rep.members, rep.notStreaming = memberStatus(o, members, rep, sts)
	for _, m := range members {
		if !m.Answered && refusedBy(o, m.Err) {
			rep.refused = append(rep.refused, m.Name)
		}
	}
	return rep, nil
}

// preferredPrimary is the Pod a replica set whose primary is elected should elect:
// spec.primary when set; else elected while spec.replicas keeps it; else the first Pod.
func preferredPrimary(db *examplev1.Database, elected string, replicas int32) string {
	if db.Spec.Primary != "" {
		return db.Spec.Primary
	}
	if ordinal, ok := specs.PodOrdinal(db, elected); ok && ordinal < replicas {
		return elected
	}
	return specs.PodName(db, 0)
}

// recordMembers sets db's status.replicaSetMembers to pods when it differs, at once (a merge
// patch of databases/status, with the Database's UID, so one made again meanwhile is not
// written): the record must hold a member added to the configuration before any later write
// of the pass, or the end of the pass, can fail, since the next pass sizes the StatefulSet by
// it. The pass goes on from the Database as patched, whose status the pass's own status write
// keeps.
func (p *pass) recordMembers(ctx context.Context, pods []string) error {
	db := p.db
	if slices.Equal(db.Status.ReplicaSetMembers, pods) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": db.UID},
		"status":   map[string]any{"replicaSetMembers": pods},
	})
	if err != nil {
		return err
	}
	out, err := p.r.databases.ExampleV1().Databases(db.Namespace).Patch(ctx, db.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("record the replica set's members in status: %w", err)
	}
	db.ResourceVersion, db.Status.ReplicaSetMembers = out.ResourceVersion, out.Status.ReplicaSetMembers
	p.r.seen.set(out.UID, out.ResourceVersion)
	return nil
}

// restartFirst restarts, for the StatefulSet's update revision, the Pod named first (the
// confirmed primary, which answered as a standalone server) when it runs an older one: the
// Pods of a Database that ran standalone servers come back with --replSet, and the set can
// only be initiated, and its other members join it, once the first has. It reports whether
// the first Pod runs an older revision (it is restarted now, or being deleted): rollPods
// restarts the others, by its rules, once it does not.
func (p *pass) restartFirst(ctx context.Context, sts *appsv1.StatefulSet, members []*member, first string) (bool, error) {
	if !rolloutObserved(sts) {
		return false, nil
	}
	i := slices.IndexFunc(members, func(m *member) bool { return m.Name == first })
	if i < 0 || members[i].Pod == nil {
		return false, nil
	}
	pod := members[i].Pod
	switch {
	case pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision:
		return false, nil
	case pod.DeletionTimestamp != nil:
		return true, nil
	}
	if err := p.deletePod(ctx, pod, "to restart it as the replica set's first member"); err != nil {
		return true, err
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, examplev1.ReasonRollingUpdate, "Restarting %s first, to initiate replica set %s on it (revision %s)", pod.Name, p.db.Name, sts.Status.UpdateRevision)
	return true, nil
}
