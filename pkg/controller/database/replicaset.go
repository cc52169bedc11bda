package database

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/mongodb"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/names"
)

// MongoDBInstances is how the Reconciler talks to the mongod servers of a Database's replica
// set (mongodb.Client); each call reaches one server.
type MongoDBInstances interface {
	Observe(ctx context.Context, s mongodb.Server) (mongodb.State, error)
	Initiate(ctx context.Context, s mongodb.Server, setName, host string) error
	Reconfig(ctx context.Context, s mongodb.Server, cfg mongodb.Config) error
}

// mongoReplicaSet is the observer of a MongoDB replica set, whose members elect their primary
// themselves: the controller initiates the set, keeps its members those of the StatefulSet
// (syncMembers), and moves the primary by priority.
type mongoReplicaSet struct{ instances MongoDBInstances }

// mongodb is the endpoint as the Secret's superuser, a root user of admin.
func (e endpoint) mongodb() mongodb.Server {
	return mongodb.Server{Host: e.host, Port: e.port, User: e.user, Password: e.password}
}

// mgState is m's mongodb.State; m answered.
func mgState(m *member) *mongodb.State { return m.state.(*mongodb.State) }

func (r mongoReplicaSet) observe(ctx context.Context, e endpoint, _ []string) (bool, any, error) {
	st, err := r.instances.Observe(ctx, e.mongodb())
	if err != nil {
		return false, nil, err
	}
	return st.Writable, &st, nil
}

func (mongoReplicaSet) refused(err error) bool { return mongodb.IsAuthenticationFailure(err) }

// follower is the primary's replSetGetStatus entry of the replica (by the name the replica
// answers to, hello's me): streaming while SECONDARY, and its lag in seconds.
func (mongoReplicaSet) follower(primary, replica *member) follower {
	me := mgState(replica).Me
	if me == "" {
		return follower{why: "not a member of the replica set yet"}
	}
	ps := mgState(primary)
	for _, ms := range ps.Members {
		if ms.Name != me {
			continue
		}
		f := follower{streaming: ms.StateStr == "SECONDARY"}
		if !f.streaming {
			f.why = ms.StateStr
			if ms.LastHeartbeatMessage != "" {
				f.why += ": " + ms.LastHeartbeatMessage
			}
		}
		if lag, ok := ps.LagSeconds(me); ok {
			f.lagSeconds = &lag
		}
		return f
	}
	return follower{why: "not in " + primary.name + "'s replica set configuration"}
}

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
// (MongoDB). It asks every server its part and:
//   - while no member has a configuration, initiates the set on the confirmed primary (the
//     first Pod of a new Database) with that member alone, once its server answers;
//   - takes the member that answers as the writable primary of the highest election term as
//     the primary (status.primary, the role label, the replication ConfigMap), so the client
//     Service follows an election;
//   - on that primary, keeps the configuration's members the Pods of ordinals below
//     spec.replicas that answer or are members already (and the primary itself), one
//     member added or removed per pass (syncMembers), with the Pod that should be primary
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
// MongoDB elects a primary by majority and a new term, so a primary cut off from the
// majority steps down and cannot commit a majority write: failover is the engine's, and
// writes acknowledged with w: "majority" (the drivers' default) survive it
// (https://www.mongodb.com/docs/manual/core/replica-set-elections/).
func (p *pass) reconcileReplicaSet(ctx context.Context, statefulSet *appsv1.StatefulSet, designated string, replicas, sts int32) (replication, error) {
	db := p.db
	rep := replication{primary: confirmedPrimary(db)}
	var set *mongoReplicaSet
	var o observer
	if p.r.options.MongoDB != nil {
		set = &mongoReplicaSet{p.r.options.MongoDB}
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
		if !m.answered {
			continue
		}
		st := mgState(m)
		initiated = initiated || st.Initiated
		standalone = standalone || m.name == rep.primary && st.Standalone
		if m.writable && st.Initiated && (elected == nil || st.Term > mgState(elected).Term) {
			elected = m
		}
	}
	switch {
	case !asked:
		// No client, or no Secret yet: the first Pod stays the primary it is taken for.
	case elected != nil:
		rep.primary = elected.name
		target := preferredPrimary(db, elected.name, replicas)
		if err := p.syncMembers(ctx, set, server(elected), elected, members, replicas, target); err != nil {
			return rep, err
		}
		if target != rep.primary {
			rep.switchingOver(rep.primary, target, examplev1.SwitchoverStepElecting, fmt.Sprintf("the replica set elects %s, of the highest priority, once it has caught up", target))
		}
	case !initiated:
		if err := p.initiate(ctx, set, members, rep.primary, server); err != nil {
			return rep, err
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
		if !m.answered && refusedBy(o, m.err) {
			rep.refused = append(rep.refused, m.name)
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

// initiate runs replSetInitiate on the member named first, with itself the only member by
// its stable name (names.PodHost), once its server answers as one that runs with --replSet
// and has no configuration. A server that refuses (one still running as a standalone server
// from before the Database was a replica set) is reported in an Event and asked again next
// pass.
func (p *pass) initiate(ctx context.Context, set *mongoReplicaSet, members []*member, first string, server func(*member) endpoint) error {
	i := slices.IndexFunc(members, func(m *member) bool { return m.name == first })
	if i < 0 || !members[i].answered || mgState(members[i]).Standalone {
		// Not answering yet, or a standalone server, which restartFirst restarts with
		// --replSet.
		return nil
	}
	db, m := p.db, members[i]
	host := mongodb.Host(names.PodHost(db, p.desired.ClusterDomain, m.name), p.desired.Recipe.Port)
	if err := set.instances.Initiate(ctx, server(m).mongodb(), specs.ReplicaSetName(db), host); err != nil {
		p.r.event(ctx, db, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "Initiating replica set %s on %s failed: %v", specs.ReplicaSetName(db), m.name, err)
		return nil
	}
	p.r.event(ctx, db, corev1.EventTypeNormal, ReasonCreated, "Initiated replica set %s with %s", specs.ReplicaSetName(db), host)
	return p.recordMembers(ctx, []string{m.name})
}

// syncMembers makes the configuration of the primary (reached at e) one step closer
// (mongodb.NextConfig) to the members it should have: the Pods of ordinals below replicas
// that answered or are members already, and the primary, with preferred of the highest
// priority. A configuration that names a Pod by another name of its headless Service (one
// not fully qualified, or of another cluster domain) is first renamed, in a step of its own
// (mongodb.RenameMembers). It records the members of the configuration it leaves in place
// (recordMembers).
func (p *pass) syncMembers(ctx context.Context, set *mongoReplicaSet, e endpoint, primary *member, members []*member, replicas int32, preferred string) error {
	db, port := p.db, p.desired.Recipe.Port
	cfg := mgState(primary).Config
	if cfg == nil {
		return nil
	}
	host := func(pod string) string { return mongodb.Host(names.PodHost(db, p.desired.ClusterDomain, pod), port) }
	if renamed, changed := mongodb.RenameMembers(*cfg, func(h string) string {
		// A member of another name for one of the Pods (a name not fully qualified, or of
		// another cluster domain) gets the Pod's name.
		if pod, _, _ := strings.Cut(h, "."); strings.HasPrefix(h, pod+"."+names.HeadlessServiceName(db)+"."+db.Namespace+".svc") {
			if _, ok := specs.PodOrdinal(db, pod); ok {
				return host(pod)
			}
		}
		return h
	}); changed {
		if err := set.instances.Reconfig(ctx, e.mongodb(), renamed); err != nil {
			p.r.event(ctx, db, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "Renaming the members of replica set %s on %s (version %d: %s) failed: %v",
				specs.ReplicaSetName(db), primary.name, renamed.Version, describeMembers(renamed), err)
			return p.recordMembers(ctx, podsOf(*cfg))
		}
		p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Renamed the members of replica set %s to their fully qualified names (version %d): %s",
			specs.ReplicaSetName(db), renamed.Version, describeMembers(renamed))
		return p.recordMembers(ctx, podsOf(renamed))
	}
	configured := map[string]bool{}
	for _, m := range cfg.Members {
		configured[m.Host] = true
	}
	var hosts []string
	for i, m := range members {
		if m.name != primary.name && (int32(i) >= replicas || !configured[host(m.name)] && !m.answered) {
			continue
		}
		hosts = append(hosts, host(m.name))
	}
	next, changed := mongodb.NextConfig(*cfg, hosts, host(preferred))
	if changed {
		if err := set.instances.Reconfig(ctx, e.mongodb(), next); err != nil {
			// Refused while the last reconfiguration is not committed to a majority, or
			// a new member is not reachable yet: asked again next pass.
			p.r.event(ctx, db, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "Reconfiguring replica set %s on %s (version %d: %s) failed: %v",
				specs.ReplicaSetName(db), primary.name, next.Version, describeMembers(next), err)
			return p.recordMembers(ctx, podsOf(*cfg))
		}
		p.r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Reconfigured replica set %s (version %d): %s", specs.ReplicaSetName(db), next.Version, describeMembers(next))
		cfg = &next
	}
	return p.recordMembers(ctx, podsOf(*cfg))
}

// podsOf is the Pod names of cfg's members, the first label of each stable name.
func podsOf(cfg mongodb.Config) []string {
	var pods []string
	for _, m := range cfg.Members {
		pod, _, _ := strings.Cut(m.Host, ".")
		pods = append(pods, pod)
	}
	return pods
}

// describeMembers is cfg's members for an Event: "db-0.…:27017 (priority 2), …".
func describeMembers(cfg mongodb.Config) string {
	var out []string
	for _, m := range cfg.Members {
		s := fmt.Sprintf("%s (priority %g", m.Host, m.Priority)
		if m.Votes == 0 {
			s += ", no vote"
		}
		out = append(out, s+")")
	}
	return strings.Join(out, ", ")
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
	i := slices.IndexFunc(members, func(m *member) bool { return m.name == first })
	if i < 0 || members[i].pod == nil {
		return false, nil
	}
	pod := members[i].pod
	switch {
	case pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision:
		return false, nil
	case pod.DeletionTimestamp != nil:
		return true, nil
	}
	if err := p.deletePod(ctx, pod, "to restart it as the replica set's first member"); err != nil {
		return true, err
	}
	p.r.event(ctx, p.db, corev1.EventTypeNormal, examplev1.ReasonRollingUpdate, "Restarting %s first, to initiate replica set %s on it (revision %s)", pod.Name, specs.ReplicaSetName(p.db), sts.Status.UpdateRevision)
	return true, nil
}
