package mongoclient

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mongodb"
	"example.com/database-apiserver/pkg/names"
)

// Instances is how the controller talks to the mongod servers of a Database's replica set
// (Client); each call reaches one server.
type Instances interface {
	Observe(ctx context.Context, s Server) (State, error)
	Initiate(ctx context.Context, s Server, setName, host string) error
	Reconfig(ctx context.Context, s Server, cfg Config) error
}

// ReplicaSet is MongoDB's engine.ReplicaSet: its members elect their primary themselves;
// the controller initiates the set, keeps its members those of the StatefulSet
// (SyncMembers), and moves the primary by priority.
type ReplicaSet struct{ Instances Instances }

var _ engine.Statistician = ReplicaSet{}

// NewReplicaSet is the ReplicaSet reaching the servers through instances.
func NewReplicaSet(instances Instances) ReplicaSet { return ReplicaSet{instances} }

// server is the endpoint as the Secret's superuser, a root user of admin.
func server(e engine.Endpoint) Server {
	return Server{Host: e.Host, Port: e.Port, User: e.User, Password: e.Password}
}

// state is m's State; m answered.
func state(m *engine.Member) *State { return m.State.(*State) }

func (r ReplicaSet) Observe(ctx context.Context, _ engine.Pass, e engine.Endpoint, _ []string) (bool, any, error) {
	st, err := r.Instances.Observe(ctx, server(e))
	if err != nil {
		return false, nil, err
	}
	return st.Writable, &st, nil
}

func (ReplicaSet) Refused(err error) bool { return IsAuthenticationFailure(err) }

func (ReplicaSet) Statistics(m *engine.Member) (engine.Statistics, bool) {
	if !m.Answered || state(m).Statistics == nil {
		return engine.Statistics{}, false
	}
	return *state(m).Statistics, true
}

func (ReplicaSet) Initiated(m *engine.Member) bool  { return state(m).Initiated }
func (ReplicaSet) Standalone(m *engine.Member) bool { return state(m).Standalone }
func (ReplicaSet) Term(m *engine.Member) int64      { return state(m).Term }

// Follower is the primary's replSetGetStatus entry of the replica (by the name the replica
// answers to, hello's me): streaming while SECONDARY, and its lag in seconds.
func (ReplicaSet) Follower(primary, replica *engine.Member) engine.Follower {
	me := state(replica).Me
	if me == "" {
		return engine.Follower{Why: "not a member of the replica set yet"}
	}
	ps := state(primary)
	for _, ms := range ps.Members {
		if ms.Name != me {
			continue
		}
		f := engine.Follower{Streaming: ms.StateStr == "SECONDARY"}
		if !f.Streaming {
			f.Why = ms.StateStr
			if ms.LastHeartbeatMessage != "" {
				f.Why += ": " + ms.LastHeartbeatMessage
			}
		}
		if lag, ok := ps.LagSeconds(me); ok {
			f.LagSeconds = &lag
		}
		return f
	}
	return engine.Follower{Why: "not in " + primary.Name + "'s replica set configuration"}
}

// memberHost is the member name of the Pod named pod: its stable name (names.PodHost) and port.
func memberHost(p engine.Pass, pod string) string {
	d := p.Desired()
	return Host(names.PodHost(p.Database(), d.ClusterDomain, pod), d.Recipe.Port)
}

// Initiate runs replSetInitiate on m, with itself the only member by its stable name, once
// its server answers as one that runs with --replSet and has no configuration. A server
// that refuses (one still running as a standalone server from before the Database was a
// replica set) is reported in an Event and asked again next pass.
func (r ReplicaSet) Initiate(ctx context.Context, p engine.Pass, e engine.Endpoint, m *engine.Member) error {
	if !m.Answered || state(m).Standalone {
		// Not answering yet, or a standalone server, which the controller restarts with
		// --replSet first.
		return nil
	}
	db := p.Database()
	h := memberHost(p, m.Name)
	if err := r.Instances.Initiate(ctx, server(e), mongodb.ReplicaSetName(db), h); err != nil {
		p.Event(ctx, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "Initiating replica set %s on %s failed: %v", mongodb.ReplicaSetName(db), m.Name, err)
		return nil
	}
	p.Event(ctx, corev1.EventTypeNormal, engine.ReasonCreated, "Initiated replica set %s with %s", mongodb.ReplicaSetName(db), h)
	return p.RecordMembers(ctx, []string{m.Name})
}

// SyncMembers makes the configuration of the primary (reached at e) one step closer
// (NextConfig) to the members it should have: the Pods of ordinals below
// replicas that answered or are members already, and the primary, with preferred of the
// highest priority. A configuration that names a Pod by another name of its headless
// Service (one not fully qualified, or of another cluster domain) is first renamed, in a
// step of its own (RenameMembers). It records the members of the configuration
// it leaves in place (Pass.RecordMembers).
func (r ReplicaSet) SyncMembers(ctx context.Context, p engine.Pass, e engine.Endpoint, primary *engine.Member, members []*engine.Member, replicas int32, preferred string) error {
	db := p.Database()
	cfg := state(primary).Config
	if cfg == nil {
		return nil
	}
	if renamed, changed := RenameMembers(*cfg, func(h string) string {
		// A member of another name for one of the Pods (a name not fully qualified, or of
		// another cluster domain) gets the Pod's name.
		if pod, _, _ := strings.Cut(h, "."); strings.HasPrefix(h, pod+"."+names.HeadlessServiceName(db)+"."+db.Namespace+".svc") {
			if _, ok := engine.PodOrdinal(db, pod); ok {
				return memberHost(p, pod)
			}
		}
		return h
	}); changed {
		if err := r.Instances.Reconfig(ctx, server(e), renamed); err != nil {
			p.Event(ctx, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "Renaming the members of replica set %s on %s (version %d: %s) failed: %v",
				mongodb.ReplicaSetName(db), primary.Name, renamed.Version, describeMembers(renamed), err)
			return p.RecordMembers(ctx, podsOf(*cfg))
		}
		p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Renamed the members of replica set %s to their fully qualified names (version %d): %s",
			mongodb.ReplicaSetName(db), renamed.Version, describeMembers(renamed))
		return p.RecordMembers(ctx, podsOf(renamed))
	}
	configured := map[string]bool{}
	for _, m := range cfg.Members {
		configured[m.Host] = true
	}
	var hosts []string
	for i, m := range members {
		if m.Name != primary.Name && (int32(i) >= replicas || !configured[memberHost(p, m.Name)] && !m.Answered) {
			continue
		}
		hosts = append(hosts, memberHost(p, m.Name))
	}
	next, changed := NextConfig(*cfg, hosts, memberHost(p, preferred))
	if changed {
		if err := r.Instances.Reconfig(ctx, server(e), next); err != nil {
			// Refused while the last reconfiguration is not committed to a majority, or
			// a new member is not reachable yet: asked again next pass.
			p.Event(ctx, corev1.EventTypeWarning, examplev1.ReasonReconcileError, "Reconfiguring replica set %s on %s (version %d: %s) failed: %v",
				mongodb.ReplicaSetName(db), primary.Name, next.Version, describeMembers(next), err)
			return p.RecordMembers(ctx, podsOf(*cfg))
		}
		p.Event(ctx, corev1.EventTypeNormal, engine.ReasonUpdated, "Reconfigured replica set %s (version %d): %s", mongodb.ReplicaSetName(db), next.Version, describeMembers(next))
		cfg = &next
	}
	return p.RecordMembers(ctx, podsOf(*cfg))
}

// podsOf is the Pod names of cfg's members, the first label of each stable name.
func podsOf(cfg Config) []string {
	var pods []string
	for _, m := range cfg.Members {
		pod, _, _ := strings.Cut(m.Host, ".")
		pods = append(pods, pod)
	}
	return pods
}

// describeMembers is cfg's members for an Event: "db-0.…:27017 (priority 2), …".
func describeMembers(cfg Config) string {
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

func init() { engine.RegisterObserver(examplev1.EngineMongoDB, NewReplicaSet(Client{})) }
