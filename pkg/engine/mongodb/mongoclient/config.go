package mongoclient

import (
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mongodb"
)

// State is what a server says of itself.
type State struct {
	// Standalone is true for a server that does not run as a replica set member (started
	// without --replSet: replSetGetStatus answers NoReplicationEnabled, code 76). It is
	// writable (Writable), never Initiated.
	Standalone bool
	// Initiated is false while the server has no replica set configuration
	// (replSetGetStatus and replSetGetConfig answer NotYetInitialized, code 94).
	Initiated bool
	// SetName is hello.setName, "" before initiation.
	SetName string
	// Writable is hello.isWritablePrimary: the server is the primary and takes writes.
	Writable bool
	// Secondary is hello.secondary.
	Secondary bool
	// Me is hello.me: "host:port" as the configuration names this member; "" before
	// initiation.
	Me string
	// Term is replSetGetStatus.term, the election term; 0 before initiation.
	Term int64
	// Members is replSetGetStatus.members, as this server sees them; nil before initiation
	// and on a server that is not a member of the configuration it holds
	// (InvalidReplicaSetConfig, code 93, as a removed member answers).
	Members []MemberStatus
	// Config is replSetGetConfig.config; nil before initiation.
	Config *Config
	// Statistics are the server's own figures (statistics); nil when it could not give
	// them, which does not make the server count as not answering.
	Statistics *engine.Statistics
}

// MemberStatus is one element of replSetGetStatus.members
// (https://www.mongodb.com/docs/manual/reference/command/replSetGetStatus/).
type MemberStatus struct {
	// Name is the member's "host:port".
	Name string `bson:"name"`
	// StateStr is the member's state: PRIMARY, SECONDARY, STARTUP2, RECOVERING, ...
	StateStr string `bson:"stateStr"`
	// Health is 1 when the member is up, 0 when it is down.
	Health float64 `bson:"health"`
	// Self is true on the member that answered.
	Self bool `bson:"self"`
	// OptimeDate is the wall time of the last operation the member applied; zero when the
	// reply has none or has the epoch (as for a member this server cannot reach).
	OptimeDate time.Time `bson:"optimeDate"`
	// LastHeartbeatMessage is the last heartbeat's error, "" when none.
	LastHeartbeatMessage string `bson:"lastHeartbeatMessage"`
}

// Primary is the name ("host:port") of the member this server's replSetGetStatus reports
// PRIMARY, "" when none.
func (s State) Primary() string {
	for _, m := range s.Members {
		if m.StateStr == "PRIMARY" {
			return m.Name
		}
	}
	return ""
}

// LagSeconds is how far the member named host ("host:port") is behind the primary in this
// server's replSetGetStatus, in whole seconds: the primary's optimeDate minus the member's,
// truncated, and 0 when the member's is the later (the two come from different heartbeats).
// It is false when there is no primary, no member named host, or either has no optimeDate.
func (s State) LagSeconds(host string) (int64, bool) {
	primary, member := -1, -1
	for i, m := range s.Members {
		if m.StateStr == "PRIMARY" && primary < 0 {
			primary = i
		}
		if m.Name == host {
			member = i
		}
	}
	if primary < 0 || member < 0 || s.Members[primary].OptimeDate.IsZero() || s.Members[member].OptimeDate.IsZero() {
		return 0, false
	}
	lag := s.Members[primary].OptimeDate.Sub(s.Members[member].OptimeDate)
	return max(int64(lag/time.Second), 0), true
}

// Config is a replica set configuration
// (https://www.mongodb.com/docs/manual/reference/replica-configuration/). Fields the
// controller does not manage (settings, protocolVersion, term, members' tags, ...) are kept
// as read and written back unchanged by Reconfig.
type Config struct {
	// Name is the configuration's _id: the replica set name.
	Name string
	// Version increases by one with every reconfiguration.
	Version int64
	// Members are the configuration's members, in its order.
	Members []ConfigMember
	// doc is the document as read, nil for a configuration made here.
	doc bson.Raw
}

// ConfigMember is one element of a configuration's members.
type ConfigMember struct {
	// ID is the member's _id, unique in the configuration.
	ID int
	// Host is the member's "host:port".
	Host string
	// Priority is the member's eligibility to become primary: 0 never, otherwise the higher
	// the more preferred.
	Priority float64
	// Votes is 1 for a voting member, 0 for a non-voting one.
	Votes int
	// doc is the document as read, nil for a member added here.
	doc bson.Raw
}

// decodeConfig reads a configuration document as replSetGetConfig returns it in its config
// field. A member's priority and votes default to 1 when absent, as MongoDB's do.
func decodeConfig(doc bson.Raw) (Config, error) {
	var c Config
	var ok bool
	if c.Name, ok = doc.Lookup("_id").StringValueOK(); !ok {
		return Config{}, fmt.Errorf("replica set config has no string _id")
	}
	if c.Version, ok = doc.Lookup("version").AsInt64OK(); !ok {
		return Config{}, fmt.Errorf("replica set config %q has no numeric version", c.Name)
	}
	members, ok := doc.Lookup("members").ArrayOK()
	if !ok {
		return Config{}, fmt.Errorf("replica set config %q has no members array", c.Name)
	}
	values, err := members.Values()
	if err != nil {
		return Config{}, fmt.Errorf("replica set config %q: members: %w", c.Name, err)
	}
	for i, v := range values {
		md, ok := v.DocumentOK()
		if !ok {
			return Config{}, fmt.Errorf("replica set config %q: member %d is not a document", c.Name, i)
		}
		m := ConfigMember{Priority: 1, Votes: 1, doc: md}
		id, ok := md.Lookup("_id").AsInt64OK()
		if !ok {
			return Config{}, fmt.Errorf("replica set config %q: member %d has no numeric _id", c.Name, i)
		}
		m.ID = int(id)
		if m.Host, ok = md.Lookup("host").StringValueOK(); !ok {
			return Config{}, fmt.Errorf("replica set config %q: member %d has no host", c.Name, m.ID)
		}
		if v := md.Lookup("priority"); !v.IsZero() {
			if m.Priority, ok = v.AsFloat64OK(); !ok {
				return Config{}, fmt.Errorf("replica set config %q: member %d has a non-numeric priority", c.Name, m.ID)
			}
		}
		if v := md.Lookup("votes"); !v.IsZero() {
			votes, ok := v.AsInt64OK()
			if !ok {
				return Config{}, fmt.Errorf("replica set config %q: member %d has non-numeric votes", c.Name, m.ID)
			}
			m.Votes = int(votes)
		}
		c.Members = append(c.Members, m)
	}
	c.doc = doc
	return c, nil
}

// document is c as replSetReconfig takes it: the document as read, in its order, with _id,
// version and members set from c; a field c manages that the document lacks comes at the
// end. Numbers are written as MongoDB writes them: int32 (int64 for a version beyond
// int32), priority a double.
func (c Config) document() bson.D {
	members := make(bson.A, len(c.Members))
	for i, m := range c.Members {
		members[i] = m.document()
	}
	return merge(c.doc, bson.D{
		{Key: "_id", Value: c.Name},
		{Key: "version", Value: integer(c.Version)},
		{Key: "members", Value: members},
	})
}

func (m ConfigMember) document() bson.D {
	return merge(m.doc, bson.D{
		{Key: "_id", Value: integer(int64(m.ID))},
		{Key: "host", Value: m.Host},
		{Key: "priority", Value: m.Priority},
		{Key: "votes", Value: integer(int64(m.Votes))},
	})
}

// merge is doc's elements in order, each one whose key is in set replaced by set's value,
// then the elements of set doc lacks. Elements kept from doc are their raw values, written
// back byte for byte.
func merge(doc bson.Raw, set bson.D) bson.D {
	elements, _ := doc.Elements() // doc was validated when read.
	out := make(bson.D, 0, len(elements)+len(set))
	seen := make([]bool, len(set))
	for _, e := range elements {
		key := e.Key()
		i := slices.IndexFunc(set, func(s bson.E) bool { return s.Key == key })
		if i < 0 {
			out = append(out, bson.E{Key: key, Value: e.Value()})
			continue
		}
		out = append(out, set[i])
		seen[i] = true
	}
	for i, s := range set {
		if !seen[i] {
			out = append(out, s)
		}
	}
	return out
}

func integer(n int64) any {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// RenameMembers returns current with each member's host replaced by rename(host), with
// Version current.Version+1, and true; or current and false when no host changes. Members
// keep their _id, votes and priority: replSetReconfig's one-voter-at-a-time rule counts
// voting members by _id, so a configuration that only renames members is one step
// (https://www.mongodb.com/docs/manual/tutorial/change-hostnames-in-a-replica-set/).
func RenameMembers(current Config, rename func(host string) string) (Config, bool) {
	next := current
	next.Members = slices.Clone(current.Members)
	changed := false
	for i := range next.Members {
		if h := rename(next.Members[i].Host); h != next.Members[i].Host {
			next.Members[i].Host, changed = h, true
		}
	}
	if !changed {
		return current, false
	}
	next.Version = current.Version + 1
	return next, true
}

// MaxVotingMembers is the most voting members a replica set may have
// (mongodb.MaxVotingMembers): the members past it are made non-voting, with priority 0.
const MaxVotingMembers = mongodb.MaxVotingMembers

// NextConfig returns the configuration one step from current toward members exactly hosts
// (their "host:port", in the order given: the Pods' ordinals), with Version
// current.Version+1, and true; or current and false when there is nothing to change.
//
// The goal: the first MaxVotingMembers hosts vote (votes 1), the others do not (votes 0,
// priority 0); among voters, preferred (a host, or "") has priority 2 and the others 1, so
// that MongoDB's priority takeover moves the primary to preferred once it has caught up
// (https://www.mongodb.com/docs/manual/core/replica-set-elections/#member-priority).
// Members keep their _id; a new member gets the smallest _id not in use, so _ids stay
// small (older MongoDB releases take 0 to 255 only) and follow the ordinals in the common
// case.
//
// A step changes the set of voting members by at most one, as replSetReconfig requires
// (https://www.mongodb.com/docs/manual/reference/command/replSetReconfig/: adding a
// voting member, removing one, or changing one member's votes): it removes one member not
// in hosts (a non-voting one first); else it adds the first host that is not a member
// (voting when its place and the voters' count allow); else it changes one member's votes
// (gaining a vote before losing one while there are fewer than MaxVotingMembers voters).
// A step that removes or adds a voter changes no other member's votes. Priorities follow
// the votes in every step. The only voter is never removed: a member is added or given a
// vote first, so with no hosts the configuration keeps its last voter.
func NextConfig(current Config, hosts []string, preferred string) (Config, bool) {
	position := make(map[string]int, len(hosts))
	var wanted []string
	for _, h := range hosts {
		if _, dup := position[h]; !dup {
			position[h] = len(wanted)
			wanted = append(wanted, h)
		}
	}
	shouldVote := func(host string) bool {
		i, ok := position[host]
		return ok && i < MaxVotingMembers
	}

	next := current
	next.Members = slices.Clone(current.Members)
	voters := 0
	for _, m := range next.Members {
		if m.Votes > 0 {
			voters++
		}
	}

	if !removeOne(&next, position, voters) && !addOne(&next, wanted, shouldVote, voters) {
		changeVotes(&next, wanted, shouldVote, voters)
	}
	for i := range next.Members {
		m := &next.Members[i]
		switch {
		case m.Votes == 0:
			m.Priority = 0
		case preferred != "" && m.Host == preferred:
			m.Priority = 2
		default:
			m.Priority = 1
		}
	}

	if sameMembers(current.Members, next.Members) {
		return current, false
	}
	next.Version = current.Version + 1
	return next, true
}

// removeOne removes from c one member whose host has no position, a non-voting one
// first, never the only voter; it reports whether it removed one.
func removeOne(c *Config, position map[string]int, voters int) bool {
	victim := -1
	for i, m := range c.Members {
		if _, ok := position[m.Host]; ok {
			continue
		}
		if m.Votes == 0 {
			victim = i
			break
		}
		if victim < 0 && voters > 1 {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	c.Members = slices.Delete(c.Members, victim, victim+1)
	return true
}

// addOne adds to c the first of wanted that is not a member, with the smallest unused _id,
// voting when shouldVote says so and c has fewer than MaxVotingMembers voters; it reports
// whether it added one.
func addOne(c *Config, wanted []string, shouldVote func(string) bool, voters int) bool {
	for _, h := range wanted {
		if slices.ContainsFunc(c.Members, func(m ConfigMember) bool { return m.Host == h }) {
			continue
		}
		id := 0
		for slices.ContainsFunc(c.Members, func(m ConfigMember) bool { return m.ID == id }) {
			id++
		}
		m := ConfigMember{ID: id, Host: h}
		if shouldVote(h) && voters < MaxVotingMembers {
			m.Votes = 1
		}
		c.Members = append(c.Members, m)
		return true
	}
	return false
}

// changeVotes changes the votes of at most one member of c that is among wanted: the first,
// in wanted's order, that should vote and does not while c has fewer than
// MaxVotingMembers voters; else the first that votes and should not, unless it is the only
// voter.
func changeVotes(c *Config, wanted []string, shouldVote func(string) bool, voters int) {
	index := func(h string) int {
		return slices.IndexFunc(c.Members, func(m ConfigMember) bool { return m.Host == h })
	}
	if voters < MaxVotingMembers {
		for _, h := range wanted {
			if i := index(h); i >= 0 && shouldVote(h) && c.Members[i].Votes == 0 {
				c.Members[i].Votes = 1
				return
			}
		}
	}
	if voters > 1 {
		for _, h := range wanted {
			if i := index(h); i >= 0 && !shouldVote(h) && c.Members[i].Votes > 0 {
				c.Members[i].Votes = 0
				return
			}
		}
	}
}

// sameMembers reports whether a and b have the same members, in order, with the same
// managed fields.
func sameMembers(a, b []ConfigMember) bool {
	return slices.EqualFunc(a, b, func(x, y ConfigMember) bool {
		return x.ID == y.ID && x.Host == y.Host && x.Priority == y.Priority && x.Votes == y.Votes
	})
}
