// Package mongodb is how the Database controller talks to the mongod servers of a
// replicating Database, which form a MongoDB replica set: it asks each server what it is
// (hello, replSetGetStatus, replSetGetConfig), initiates the set on its first server
// (replSetInitiate) and changes its members one step at a time on the primary
// (replSetReconfig, with the configuration NextConfig computes). Each call opens one
// connection to one server (by Pod IP, a direct connection, as the Secret's superuser, a
// root user of the admin database, without TLS: the servers have no certificates) and
// closes it. Commands and replies are from
// https://www.mongodb.com/docs/manual/reference/command/hello/ and the replSetGetStatus,
// replSetGetConfig, replSetInitiate and replSetReconfig references.
package mongoclient

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"example.com/database-apiserver/pkg/engine"
)

// ConnectTimeout bounds a connection's TCP and authentication handshake: a Pod that does not
// answer within it counts as unreachable for this pass.
const ConnectTimeout = 2 * time.Second

// ServerSelectionTimeout bounds the wait for the driver's first look at the server (its
// monitor's hello) before a command can be sent.
const ServerSelectionTimeout = 3 * time.Second

// CommandTimeout bounds each command, sent to the server as its maxTimeMS.
// replSetReconfig waits until a majority of the members have installed the new
// configuration; past this bound it fails, and the configuration may still be installed.
const CommandTimeout = 10 * time.Second

// AuthSource is the database that holds the superuser: the image's root user lives in
// admin.
const AuthSource = "admin"

// Error codes from https://www.mongodb.com/docs/manual/reference/error-codes/.
const (
	codeAuthenticationFailed    = 18
	codeAlreadyInitialized      = 23
	codeInvalidReplicaSetConfig = 93
	codeNotYetInitialized       = 94
	codeNoReplicationEnabled    = 76
)

// Server is one mongod and the credentials to reach it.
type Server struct {
	// Host is the server's address (the Pod IP) and Port its TCP port.
	Host string
	Port int32
	// User and Password are the Secret's superuser's, a root user of AuthSource.
	User, Password string
}

// Host is a member's "host:port" for a Pod's stable DNS name (or an IP) and port, e.g.
// Host("db-0.db-headless.ns.svc", 27017) = "db-0.db-headless.ns.svc:27017"; an IPv6
// address is bracketed.
func Host(name string, port int32) string {
	return net.JoinHostPort(name, strconv.Itoa(int(port)))
}

// Client talks to mongod servers.
type Client struct{}

// Observe returns s's State from hello, replSetGetStatus and replSetGetConfig. A server
// that has no replica set configuration yet (NotYetInitialized) has Initiated false; that
// is not an error. It fails when s cannot be reached, refuses the credentials (see
// IsAuthenticationFailure) or a command fails otherwise.
func (Client) Observe(ctx context.Context, s Server) (State, error) {
	var st State
	err := withServer(ctx, s, func(run runner) error {
		var err error
		st, err = observe(run)
		return err
	})
	if err != nil {
		return State{}, fmt.Errorf("observe %s: %w", s.Host, err)
	}
	return st, nil
}

// Initiate makes s, a server without a replica set configuration, the first member of the
// replica set setName, named host ("host:port", see Host):
// replSetInitiate {_id: setName, members: [{_id: 0, host: host}]}. A server that already
// has a configuration (AlreadyInitialized) is not an error.
func (Client) Initiate(ctx context.Context, s Server, setName, host string) error {
	err := withServer(ctx, s, func(run runner) error { return initiate(run, setName, host) })
	if err != nil {
		return fmt.Errorf("initiate replica set %q on %s: %w", setName, s.Host, err)
	}
	return nil
}

// Reconfig replaces the configuration of the replica set whose primary is s by cfg, as
// given (NextConfig sets its version): replSetReconfig, which returns once a majority of
// the members have installed it, within CommandTimeout.
func (Client) Reconfig(ctx context.Context, s Server, cfg Config) error {
	err := withServer(ctx, s, func(run runner) error { return reconfig(run, cfg) })
	if err != nil {
		return fmt.Errorf("reconfigure replica set on %s: %w", s.Host, err)
	}
	return nil
}

// IsAuthenticationFailure reports whether err is the server refusing the credentials:
// AuthenticationFailed, code 18, anywhere in err's chain; the driver's authentication
// error wraps the server's reply, so a refused handshake counts too, and a handshake
// broken by the network does not.
func IsAuthenticationFailure(err error) bool {
	return hasCode(err, codeAuthenticationFailed)
}

// hasCode reports whether err carries the server error code.
func hasCode(err error, code int) bool {
	return err != nil && slices.Contains(mongo.ErrorCodes(err), code)
}

// runner runs one command on the admin database of one server and returns its reply; a
// reply with ok: 0 is an error carrying the server's code.
type runner func(cmd bson.D) (bson.Raw, error)

// withServer connects to s (direct, authenticated against AuthSource, bounded by
// ConnectTimeout, ServerSelectionTimeout and CommandTimeout), calls f with a runner on it,
// and disconnects.
func withServer(ctx context.Context, s Server, f func(runner) error) error {
	client, err := mongo.Connect(options.Client().
		SetHosts([]string{Host(s.Host, s.Port)}).
		SetDirect(true).
		SetAuth(options.Credential{AuthSource: AuthSource, Username: s.User, Password: s.Password}).
		SetConnectTimeout(ConnectTimeout).
		SetServerSelectionTimeout(ServerSelectionTimeout).
		SetTimeout(CommandTimeout).
		SetMaxPoolSize(1))
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ConnectTimeout)
		defer cancel()
		_ = client.Disconnect(ctx)
	}()
	admin := client.Database("admin")
	return f(func(cmd bson.D) (bson.Raw, error) { return admin.RunCommand(ctx, cmd).Raw() })
}

// observe runs hello, replSetGetStatus and replSetGetConfig and decodes their replies.
// NoReplicationEnabled from replSetGetStatus means a standalone server (State.Standalone),
// which is asked nothing more; NotYetInitialized from replSetGetConfig means no
// configuration; NotYetInitialized or InvalidReplicaSetConfig (a server not in its own
// configuration, as a removed member) from replSetGetStatus means no members' status.
func observe(run runner) (State, error) {
	hello, err := run(bson.D{{Key: "hello", Value: 1}})
	if err != nil {
		return State{}, fmt.Errorf("hello: %w", err)
	}
	stats := statistics(run)
	status, err := run(bson.D{{Key: "replSetGetStatus", Value: 1}})
	switch {
	case hasCode(err, codeNoReplicationEnabled):
		st, err := decodeState(hello, nil, nil)
		st.Standalone, st.Statistics = true, stats
		return st, err
	case hasCode(err, codeNotYetInitialized), hasCode(err, codeInvalidReplicaSetConfig):
		status = nil
	case err != nil:
		return State{}, fmt.Errorf("replSetGetStatus: %w", err)
	}
	var config bson.Raw
	reply, err := run(bson.D{{Key: "replSetGetConfig", Value: 1}})
	switch {
	case hasCode(err, codeNotYetInitialized):
	case err != nil:
		return State{}, fmt.Errorf("replSetGetConfig: %w", err)
	default:
		var ok bool
		if config, ok = reply.Lookup("config").DocumentOK(); !ok {
			return State{}, fmt.Errorf("replSetGetConfig: reply has no config document")
		}
	}
	st, err := decodeState(hello, status, config)
	st.Statistics = stats
	return st, err
}

// statistics reads a server's engine.Statistics from serverStatus
// (https://www.mongodb.com/docs/manual/reference/command/serverStatus/): connections.current,
// and current plus available for the most it accepts; transactions.totalCommitted and
// totalAborted (multi-document transactions; a single-document write is not one);
// globalLock.currentQueue.total, the operations queued for a lock; and from listDatabases'
// sizeOnDisk, the data of every database but local, and local itself for the log: the
// oplog lives there. It is nil when either command fails.
func statistics(run runner) *engine.Statistics {
	status, err := run(bson.D{{Key: "serverStatus", Value: 1}})
	if err != nil {
		return nil
	}
	list, err := run(bson.D{{Key: "listDatabases", Value: 1}, {Key: "nameOnly", Value: false}})
	if err != nil {
		return nil
	}
	number := func(doc bson.Raw, path ...string) int64 {
		n, _ := doc.Lookup(path...).AsInt64OK()
		return n
	}
	st := &engine.Statistics{
		Connections: number(status, "connections", "current"),
		Commits:     number(status, "transactions", "totalCommitted"),
		Rollbacks:   number(status, "transactions", "totalAborted"),
		LockWaits:   number(status, "globalLock", "currentQueue", "total"),
	}
	st.MaxConnections = st.Connections + number(status, "connections", "available")
	databases, _ := list.Lookup("databases").ArrayOK()
	values, _ := databases.Values()
	for _, v := range values {
		db, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if name, _ := db.Lookup("name").StringValueOK(); name == "local" {
			st.LogBytes += number(db, "sizeOnDisk")
		} else {
			st.DataBytes += number(db, "sizeOnDisk")
		}
	}
	return st
}

// decodeState is the State of a server from its hello reply, its replSetGetStatus reply
// (nil when it has none) and the config document of its replSetGetConfig reply (nil when it
// has no configuration).
func decodeState(hello, status, config bson.Raw) (State, error) {
	var h struct {
		SetName           string `bson:"setName"`
		IsWritablePrimary bool   `bson:"isWritablePrimary"`
		Secondary         bool   `bson:"secondary"`
		Me                string `bson:"me"`
	}
	if err := bson.Unmarshal(hello, &h); err != nil {
		return State{}, fmt.Errorf("decode hello reply: %w", err)
	}
	st := State{SetName: h.SetName, Writable: h.IsWritablePrimary, Secondary: h.Secondary, Me: h.Me}
	if status != nil {
		var rs struct {
			Term    int64          `bson:"term"`
			Members []MemberStatus `bson:"members"`
		}
		if err := bson.Unmarshal(status, &rs); err != nil {
			return State{}, fmt.Errorf("decode replSetGetStatus reply: %w", err)
		}
		for i := range rs.Members {
			if rs.Members[i].OptimeDate.UnixMilli() == 0 {
				rs.Members[i].OptimeDate = time.Time{}
			}
		}
		st.Term, st.Members = rs.Term, rs.Members
	}
	if config != nil {
		cfg, err := decodeConfig(config)
		if err != nil {
			return State{}, err
		}
		st.Initiated, st.Config = true, &cfg
	}
	return st, nil
}

// initiate runs replSetInitiate for the one-member replica set setName whose member is
// host; AlreadyInitialized is not an error.
func initiate(run runner, setName, host string) error {
	_, err := run(initiateCommand(setName, host))
	if hasCode(err, codeAlreadyInitialized) {
		return nil
	}
	return err
}

func initiateCommand(setName, host string) bson.D {
	return bson.D{{Key: "replSetInitiate", Value: bson.D{
		{Key: "_id", Value: setName},
		{Key: "members", Value: bson.A{bson.D{{Key: "_id", Value: int32(0)}, {Key: "host", Value: host}}}},
	}}}
}

// reconfig runs replSetReconfig with cfg.
func reconfig(run runner, cfg Config) error {
	_, err := run(bson.D{{Key: "replSetReconfig", Value: cfg.document()}})
	return err
}
