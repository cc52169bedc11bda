// Package mysql is how the Database controller talks to the MySQL servers (8.0.23 and later)
// of a replicating Database, which replicate by GTID auto-positioning: it asks each server
// whether it is read-only, its executed GTIDs, its replication channel, its semi-synchronous
// replication settings and root's accounts, creates the replication user on the primary and
// sets the hosts root may connect from, points a replica at its source, stops and starts its
// receiver, sets the primary's semi-synchronous replication, and promotes a replica.
// Each call opens one connection to one server (by Pod IP, as root with the Secret's
// superuser-password) and closes it. Statements are from
// https://dev.mysql.com/doc/refman/8.4/en/replication-gtids-howto.html and the CHANGE
// REPLICATION SOURCE TO, START REPLICA and RESET REPLICA references.
package myclient

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"example.com/database-apiserver/pkg/engine"
)

// ConnectTimeout bounds a connection's TCP and authentication handshake: a Pod that does not
// answer within it counts as unreachable for this pass.
const ConnectTimeout = 2 * time.Second

// IOTimeout bounds each read and write on a connection.
const IOTimeout = 10 * time.Second

// RootUser is the account the controller connects as: the image's entrypoint gives root the
// MYSQL_ROOT_PASSWORD, the Secret's password.
const RootUser = "root"

// Server is one MySQL server and the credentials to reach it.
type Server struct {
	// Host is the server's address (the Pod IP) and Port its TCP port.
	Host string
	Port int32
	// User and Password are the account's.
	User, Password string
}

// State is what a server says of itself.
type State struct {
	// ReadOnly is @@read_only or @@super_read_only: true on a replica, which takes no
	// writes.
	ReadOnly bool
	// StartsReadOnly is true when super_read_only is persisted ON in the data directory
	// (performance_schema.persisted_variables: SET PERSIST_ONLY, mysqld-auto.cnf), so the
	// server starts read-only whatever its option files say.
	StartsReadOnly bool
	// UUID is @@server_uuid, lower case: the source part of the GTIDs of the transactions
	// the server commits itself.
	UUID string
	// Executed is @@gtid_executed: every transaction the server has committed.
	Executed GTIDSet
	// SemiSync is the source side of semi-synchronous replication; nil when the server has
	// not loaded the semisync_source plugin.
	SemiSync *SemiSync
	// Source is the default replication channel's, nil when none is configured.
	Source *Source
	// Users are the users among the ones Observe was asked about whose accounts are as
	// SetReplicationUser leaves them for the host it was given (accountsAsSet).
	Users []string
	// SuperuserHosts are the hosts of root's accounts but localhost, sorted (slices.Sort).
	SuperuserHosts []string
	// CommitsWaiting is how many of the server's sessions wait for replicas to acknowledge
	// their commit (semi-synchronous replication: the thread state semiSyncWaitState), and
	// LongestCommitWait how long the one waiting longest has, in whole seconds
	// (performance_schema.processlist's TIME: seconds in its current state).
	CommitsWaiting    int
	LongestCommitWait time.Duration
	// Statistics are the server's own figures (statistics); nil when it could not give
	// them, which does not make the server count as not answering.
	Statistics *engine.Statistics
}

// statusQuery reads a server's status counters for engine.Statistics
// (https://dev.mysql.com/doc/refman/9.7/en/server-status-variables.html): Threads_connected,
// Handler_commit and Handler_rollback (the storage engines' commits and rollbacks, of
// autocommitted statements too) and Innodb_row_lock_current_waits; with max_connections,
// and the size on disk of the InnoDB tablespaces of every table outside the system schemas
// (information_schema.INNODB_TABLESPACES, read from the files, so never stale as
// information_schema.TABLES may be).
const statusQuery = `SELECT
	(SELECT COALESCE(SUM(IF(VARIABLE_NAME = 'Threads_connected', CAST(VARIABLE_VALUE AS UNSIGNED), 0)), 0) FROM performance_schema.global_status),
	@@global.max_connections,
	(SELECT COALESCE(SUM(IF(VARIABLE_NAME = 'Handler_commit', CAST(VARIABLE_VALUE AS UNSIGNED), 0)), 0) FROM performance_schema.global_status),
	(SELECT COALESCE(SUM(IF(VARIABLE_NAME = 'Handler_rollback', CAST(VARIABLE_VALUE AS UNSIGNED), 0)), 0) FROM performance_schema.global_status),
	(SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.INNODB_TABLESPACES
		WHERE SPACE_TYPE = 'Single' AND NAME NOT LIKE 'mysql/%' AND NAME NOT LIKE 'sys/%'),
	(SELECT COALESCE(SUM(IF(VARIABLE_NAME = 'Innodb_row_lock_current_waits', CAST(VARIABLE_VALUE AS UNSIGNED), 0)), 0) FROM performance_schema.global_status)`

// statistics reads s's engine.Statistics through db: statusQuery, and the binary log files
// it keeps (SHOW BINARY LOGS: what no purge has removed yet, binlog_expire_logs_seconds'
// or a replica's).
func statistics(ctx context.Context, db *sql.DB) (engine.Statistics, error) {
	var st engine.Statistics
	if err := db.QueryRowContext(ctx, statusQuery).Scan(&st.Connections, &st.MaxConnections, &st.Commits, &st.Rollbacks,
		&st.DataBytes, &st.LockWaits); err != nil {
		return st, err
	}
	rows, err := db.QueryContext(ctx, `SHOW BINARY LOGS`)
	if err != nil {
		return st, err
	}
	defer rows.Close()
	columns, err := rows.Columns()
	if err != nil {
		return st, err
	}
	for rows.Next() {
		// Log_name, File_size, Encrypted (the columns since MySQL 8.0.14).
		values := make([]any, len(columns))
		var size int64
		for i := range values {
			values[i] = new(sql.RawBytes)
			if columns[i] == "File_size" {
				values[i] = &size
			}
		}
		if err := rows.Scan(values...); err != nil {
			return st, err
		}
		st.LogBytes += size
	}
	return st, rows.Err()
}

// semiSyncWaitState is the state of a session whose commit waits for replicas'
// acknowledgements (the semisync_source plugin's stage "Waiting for semi-sync ACK from
// replica"; "slave" before MySQL 8.0.26), as a LIKE pattern.
const semiSyncWaitState = "Waiting for semi-sync ACK from %"

// Source is a replica's default channel, from performance_schema's
// replication_connection_configuration, replication_connection_status,
// replication_applier_status and replication_applier_status_by_worker.
type Source struct {
	// Host, Port and User are what CHANGE REPLICATION SOURCE TO set.
	Host string
	Port int32
	User string
	// Receiving is the receiver (I/O) thread's SERVICE_STATE: "ON", "OFF" or "CONNECTING".
	Receiving string
	// Applying is the applier (SQL) thread's SERVICE_STATE: "ON" or "OFF".
	Applying string
	// LastError is the receiver's last error message, "" when none.
	LastError string
	// Received is the transactions the receiver has written to the relay log
	// (RECEIVED_TRANSACTION_SET, Retrieved_Gtid_Set) but the one it is in the middle of
	// (QUEUEING_TRANSACTION), applied or not, since the channel was last set (CHANGE
	// REPLICATION SOURCE TO empties the relay log): with Executed, what the replica holds.
	Received GTIDSet
	// LagSeconds is the applier's lag in whole seconds: how long ago, by the replica's
	// clock, the primary committed the transactions it is applying (lagSeconds has the
	// rule); nil when unknown.
	LagSeconds *int64
}

// Streaming reports whether the channel receives from its source and applies.
func (s *Source) Streaming() bool { return s != nil && s.Receiving == "ON" && s.Applying == "ON" }

// SemiSync is the source side of semi-synchronous replication: the variables of the
// semisync_source plugin (rpl_semi_sync_source_*), as performance_schema.global_variables
// shows them
// (https://dev.mysql.com/doc/refman/9.7/en/replication-options-source.html).
type SemiSync struct {
	// Enabled is rpl_semi_sync_source_enabled: a commit waits for acknowledgements.
	Enabled bool
	// WaitForReplicaCount is rpl_semi_sync_source_wait_for_replica_count: how many
	// replicas' acknowledgements a commit waits for.
	WaitForReplicaCount int64
	// WaitPoint is rpl_semi_sync_source_wait_point: AFTER_SYNC (the commit waits before the
	// storage engine commits, so no client sees it before a replica has it) or AFTER_COMMIT.
	WaitPoint string
	// TimeoutMillis is rpl_semi_sync_source_timeout: the milliseconds a commit waits before
	// the source falls back to asynchronous replication.
	TimeoutMillis uint64
	// WaitNoReplica is rpl_semi_sync_source_wait_no_replica: ON, a commit waits out the
	// timeout even while fewer replicas than the count are connected; OFF, the source falls
	// back at once.
	WaitNoReplica bool
}

// Client talks to MySQL servers.
type Client struct{}

// Observe returns s's State, with the users among users whose accounts are as
// SetReplicationUser leaves them for host (an account name's host part); it fails when s
// cannot be reached or a query fails.
func (Client) Observe(ctx context.Context, s Server, host string, users []string) (State, error) {
	db, err := open(s)
	if err != nil {
		return State{}, err
	}
	defer db.Close()

	var st State
	var executed string
	if err := db.QueryRowContext(ctx, `SELECT @@global.read_only OR @@global.super_read_only, LOWER(@@global.server_uuid), @@global.gtid_executed`).Scan(&st.ReadOnly, &st.UUID, &executed); err != nil {
		return State{}, fmt.Errorf("query the state of %s: %w", s.Host, err)
	}
	if st.Executed, err = ParseGTIDSet(executed); err != nil {
		return State{}, fmt.Errorf("read gtid_executed of %s: %w", s.Host, err)
	}
	if st.SemiSync, err = semiSync(ctx, db); err != nil {
		return State{}, fmt.Errorf("query the semi-synchronous replication of %s: %w", s.Host, err)
	}
	var longest int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(TIME), 0) FROM performance_schema.processlist WHERE STATE LIKE ?`,
		semiSyncWaitState).Scan(&st.CommitsWaiting, &longest); err != nil {
		return State{}, fmt.Errorf("query the commits waiting on %s: %w", s.Host, err)
	}
	st.LongestCommitWait = time.Duration(longest) * time.Second
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) > 0 FROM performance_schema.persisted_variables
		WHERE VARIABLE_NAME = 'super_read_only' AND VARIABLE_VALUE = 'ON'`).Scan(&st.StartsReadOnly); err != nil {
		return State{}, fmt.Errorf("query the persisted settings of %s: %w", s.Host, err)
	}

	if stats, err := statistics(ctx, db); err == nil {
		st.Statistics = &stats
	} else if ctx.Err() != nil {
		return State{}, fmt.Errorf("query the statistics of %s: %w", s.Host, err)
	}

	var src Source
	var lastError, received sql.NullString
	var applying, applied sql.NullInt64
	var caughtUp sql.NullBool
	err = db.QueryRowContext(ctx, channelQuery).Scan(&src.Host, &src.Port, &src.User, &src.Receiving, &src.Applying, &lastError,
		&applying, &applied, &caughtUp, &received)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return State{}, fmt.Errorf("query the replication channel of %s: %w", s.Host, err)
	default:
		src.LastError = lastError.String
		src.LagSeconds = lagSeconds(&src, applying, applied, caughtUp.Valid && caughtUp.Bool)
		if src.Received, err = ParseGTIDSet(received.String); err != nil {
			return State{}, fmt.Errorf("read the received transactions of %s: %w", s.Host, err)
		}
		st.Source = &src
	}

	skipNames, err := skipsNameResolution(ctx, db)
	if err != nil {
		return State{}, fmt.Errorf("query the state of %s: %w", s.Host, err)
	}
	for _, u := range users {
		hosts, err := hostsOf(ctx, db, u, "")
		if err != nil {
			return State{}, fmt.Errorf("query mysql.user of %s: %w", s.Host, err)
		}
		if accountsAsSet(hosts, host, skipNames) {
			st.Users = append(st.Users, u)
		}
	}
	slices.Sort(st.Users)
	if st.SuperuserHosts, err = hostsOf(ctx, db, RootUser, "localhost"); err != nil {
		return State{}, fmt.Errorf("query mysql.user of %s: %w", s.Host, err)
	}
	slices.Sort(st.SuperuserHosts)
	return st, nil
}

// skipsNameResolution is the server's skip_name_resolve: ON, it matches accounts by the
// client's address only, never a host name pattern
// (https://dev.mysql.com/doc/refman/8.4/en/server-system-variables.html#sysvar_skip_name_resolve).
func skipsNameResolution(ctx context.Context, db *sql.DB) (bool, error) {
	var skip bool
	err := db.QueryRowContext(ctx, `SELECT @@global.skip_name_resolve`).Scan(&skip)
	return skip, err
}

// accountsAsSet reports whether a user's accounts of hosts are as SetReplicationUser leaves
// them for host: host's, and no other but '%' on a server that skips name resolution.
func accountsAsSet(hosts []string, host string, skipNames bool) bool {
	if !slices.Contains(hosts, host) {
		return false
	}
	for _, h := range hosts {
		if h != host && (h != "%" || !skipNames) {
			return false
		}
	}
	return true
}

// hostsOf is the hosts of user's accounts on db but except, sorted.
func hostsOf(ctx context.Context, db *sql.DB, user, except string) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT host FROM mysql.user WHERE user = ? AND host <> ? ORDER BY host`, user, except)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hosts []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, rows.Err()
}

// channelQuery reads the default channel: its source, the receiver's and the applier's
// SERVICE_STATE, the receiver's last error, then what lagSeconds takes:
//   - the microseconds from the original commit of the oldest transaction an applier thread
//     is applying to NOW(6), NULL when none is;
//   - the microseconds from the original commit of the newest transaction an applier thread
//     has applied to NOW(6), NULL when none has since the applier started;
//   - whether every transaction the receiver has received is in gtid_executed;
//   - the transactions the receiver has received but the one it is in the middle of.
//
// replication_applier_status_by_worker holds the applier threads: the single one when
// replica_parallel_workers is 0, else one row per worker (the coordinator, in
// replication_applier_status_by_coordinator, only hands transactions to workers, so it is
// not read). A timestamp of a worker without such a transaction is the zero TIMESTAMP, whose
// UNIX_TIMESTAMP is 0
// (https://dev.mysql.com/doc/refman/8.4/en/performance-schema-replication-applier-status-by-worker-table.html).
// The differences are computed by the server in the session's time zone, UTC (config), so
// NOW(6), the server's clock, is the only clock read at observation and no daylight saving
// change falls between the two ends.
const channelQuery = `SELECT c.HOST, c.PORT, c.USER, s.SERVICE_STATE, a.SERVICE_STATE, s.LAST_ERROR_MESSAGE,
	(SELECT TIMESTAMPDIFF(MICROSECOND, MIN(w.APPLYING_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP), NOW(6))
		FROM performance_schema.replication_applier_status_by_worker w
		WHERE w.CHANNEL_NAME = c.CHANNEL_NAME AND UNIX_TIMESTAMP(w.APPLYING_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP) > 0),
	(SELECT TIMESTAMPDIFF(MICROSECOND, MAX(w.LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP), NOW(6))
		FROM performance_schema.replication_applier_status_by_worker w
		WHERE w.CHANNEL_NAME = c.CHANNEL_NAME AND UNIX_TIMESTAMP(w.LAST_APPLIED_TRANSACTION_ORIGINAL_COMMIT_TIMESTAMP) > 0),
	GTID_SUBSET(s.RECEIVED_TRANSACTION_SET, @@global.gtid_executed),
	GTID_SUBTRACT(s.RECEIVED_TRANSACTION_SET, COALESCE(s.QUEUEING_TRANSACTION, ''))
	FROM performance_schema.replication_connection_configuration c
	JOIN performance_schema.replication_connection_status s ON s.CHANNEL_NAME = c.CHANNEL_NAME
	JOIN performance_schema.replication_applier_status a ON a.CHANNEL_NAME = c.CHANNEL_NAME
	WHERE c.CHANNEL_NAME = ''`

// lagSeconds is the apply lag of the channel src in whole seconds (rounded down, 0 for a
// negative difference) from channelQuery's last columns: applying and applied in
// microseconds, caughtUp whether everything received has been applied. In order:
//   - an applier that is not ON: nil, as SHOW REPLICA STATUS's Seconds_Behind_Source is NULL
//     when the SQL thread does not run;
//   - a transaction being applied: NOW(6) minus its original commit timestamp (the oldest
//     one among the workers);
//   - nothing left to apply while the receiver is ON: 0; with the receiver not ON: nil, as
//     the replica cannot know what its source has committed since;
//   - else (a backlog between two transactions): NOW(6) minus the original commit timestamp
//     of the newest transaction applied, nil when none has been since the applier started.
//
// The original commit timestamp is the primary's clock and NOW(6) the replica's: two Pods'
// clocks, which agree only as closely as their nodes' time synchronisation keeps them.
// The lag counts from what the replica has received: a receiver behind its source is not
// seen here (Receiving says whether it is connected).
func lagSeconds(src *Source, applying, applied sql.NullInt64, caughtUp bool) *int64 {
	seconds := func(us int64) *int64 {
		s := max(us, 0) / 1_000_000
		return &s
	}
	switch {
	case src.Applying != "ON":
		return nil
	case applying.Valid:
		return seconds(applying.Int64)
	case caughtUp && src.Receiving == "ON":
		return seconds(0)
	case caughtUp:
		return nil
	case applied.Valid:
		return seconds(applied.Int64)
	default:
		return nil
	}
}

// ReplicationPrivileges are the replication user's: REPLICATION SLAVE to read the binary
// log, BACKUP_ADMIN for a new replica to clone the server (the CLONE plugin's donor
// privilege).
const ReplicationPrivileges = "REPLICATION SLAVE, BACKUP_ADMIN"

// SetReplicationUser makes user@host, on the primary s, an account with password and
// ReplicationPrivileges: created, or given the password when it exists; then drops user's
// accounts of other hosts, but user@'%' while s skips name resolution (a server started
// before its settings turned it on, which host's name pattern never matches; the next pass
// after its restart drops it). The statements are written to the binary log, so replicas
// get the same accounts.
//
// The password goes in clear text in IDENTIFIED BY, and reaches no log a Pod writes: the
// server writes a client's statement only to the general query log, the slow query log and
// the binary log (none of them the error log, the container's output), and rewrites the
// password of CREATE USER and ALTER USER ... IDENTIFIED BY in all three, the binary log
// getting the account's hash (IDENTIFIED WITH ... AS), which replicas apply and quote in
// their error messages
// (https://dev.mysql.com/doc/refman/8.4/en/password-logging.html). Neither statement fails
// on an account that exists, where an error message could quote it: CREATE USER IF NOT
// EXISTS only warns, and ALTER USER follows it.
func (Client) SetReplicationUser(ctx context.Context, s Server, user, host, password string) error {
	db, err := open(s)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range []string{
		`CREATE USER IF NOT EXISTS ?@? IDENTIFIED BY ?`,
		`ALTER USER ?@? IDENTIFIED BY ?`,
		`GRANT ` + ReplicationPrivileges + ` ON *.* TO ?@?`,
	} {
		args := []any{user, host, password}
		if stmt[0] == 'G' {
			args = args[:2]
		}
		if _, err := db.ExecContext(ctx, stmt, args...); err != nil {
			return fmt.Errorf("set user %q on %s: %w", user, s.Host, err)
		}
	}
	keep := []string{host}
	if skip, err := skipsNameResolution(ctx, db); err != nil {
		return fmt.Errorf("query the state of %s: %w", s.Host, err)
	} else if skip {
		keep = append(keep, "%")
	}
	return dropAccounts(ctx, db, s, user, keep...)
}

// dropAccounts drops user's accounts on db of any host but keep.
func dropAccounts(ctx context.Context, db *sql.DB, s Server, user string, keep ...string) error {
	hosts, err := hostsOf(ctx, db, user, "")
	if err != nil {
		return fmt.Errorf("query mysql.user of %s: %w", s.Host, err)
	}
	for _, h := range hosts {
		if slices.Contains(keep, h) {
			continue
		}
		if _, err := db.ExecContext(ctx, `DROP USER ?@?`, user, h); err != nil {
			return fmt.Errorf("drop %s@%s on %s: %w", user, h, s.Host, err)
		}
	}
	return nil
}

// SetSuperuserHosts makes root's accounts on the primary s, but root@localhost, exactly
// root@<each of hosts>, with the credentials of the account s authenticates as
// (CURRENT_USER(), a root account): each missing one is created with that account's
// authentication plugin and string (no password is sent) and every privilege with the grant
// option, as the image's entrypoint makes root@MYSQL_ROOT_HOST; then, once a new connection
// to s authenticates as one of them, the others are dropped. A new connection that does not
// (s is reached from outside hosts) fails with an error and drops nothing, so the controller
// never locks itself out. The statements are written to the binary log, so replicas get
// the same accounts.
func (Client) SetSuperuserHosts(ctx context.Context, s Server, hosts []string) error {
	db, err := open(s)
	if err != nil {
		return err
	}
	defer db.Close()
	var plugin, auth string
	if err := db.QueryRowContext(ctx, `SELECT plugin, authentication_string FROM mysql.user
		WHERE user = ? AND host = SUBSTRING_INDEX(CURRENT_USER(), '@', -1)`, RootUser).Scan(&plugin, &auth); err != nil {
		return fmt.Errorf("read root's credentials on %s: %w", s.Host, err)
	}
	if !pluginName.MatchString(plugin) {
		return fmt.Errorf("root's authentication plugin on %s is %q, not a plugin name", s.Host, plugin)
	}
	have, err := hostsOf(ctx, db, RootUser, "localhost")
	if err != nil {
		return fmt.Errorf("query mysql.user of %s: %w", s.Host, err)
	}
	for _, h := range hosts {
		if slices.Contains(have, h) {
			continue
		}
		for _, stmt := range []string{
			`CREATE USER ?@? IDENTIFIED WITH ` + plugin + ` AS ?`,
			`GRANT ALL ON *.* TO ?@? WITH GRANT OPTION`,
			`GRANT PROXY ON ''@'' TO ?@? WITH GRANT OPTION`,
		} {
			args := []any{RootUser, h, auth}
			if stmt[0] == 'G' {
				args = args[:2]
			}
			if _, err := db.ExecContext(ctx, stmt, args...); err != nil {
				return fmt.Errorf("make root@%s on %s: %w", h, s.Host, err)
			}
		}
	}
	check, err := open(s)
	if err != nil {
		return err
	}
	defer check.Close()
	var current string
	if err := check.QueryRowContext(ctx, `SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', -1)`).Scan(&current); err != nil {
		return fmt.Errorf("connect to %s again: %w", s.Host, err)
	}
	if !slices.Contains(hosts, current) {
		return fmt.Errorf("a new connection to %s authenticates as root@%s, not as root of %q: the controller connects from outside those; root's other accounts are kept", s.Host, current, hosts)
	}
	// Dropped through the account that stays.
	return dropAccounts(ctx, check, s, RootUser, slices.Concat(hosts, []string{"localhost"})...)
}

// pluginName is what an authentication plugin's name in mysql.user looks like
// (caching_sha2_password, sha256_password, ...): it is written into CREATE USER as is.
var pluginName = regexp.MustCompile(`^[a-z0-9_]+$`)

// SetSource makes the replica s replicate from host:port as user with password, by GTID
// auto-positioning over TLS (the servers' self-signed certificates, which MySQL generates at
// initialisation: encrypted, not verified), retrying a lost connection every 5 seconds up to
// 86400 times (5 days: a primary restarted for an update or a switchover is waited for, where
// 8.4's default of 10 tries would stop the receiver after 50 s): STOP REPLICA, CHANGE
// REPLICATION SOURCE TO, START REPLICA. The channel is kept in the server's
// replication tables across restarts. CHANGE REPLICATION SOURCE TO, whose SOURCE_PASSWORD
// is in clear text, is not written to the binary log, and, as for SetReplicationUser, the
// error log records no client statement; the receiver's connection errors there name the
// user, not the password.
func (Client) SetSource(ctx context.Context, s Server, host string, port int32, user, password string) error {
	db, err := open(s)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.Host, err)
	}
	defer conn.Close()
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`STOP REPLICA`, nil},
		{`CHANGE REPLICATION SOURCE TO SOURCE_HOST = ?, SOURCE_PORT = ?, SOURCE_USER = ?, SOURCE_PASSWORD = ?,
			SOURCE_AUTO_POSITION = 1, SOURCE_SSL = 1, SOURCE_CONNECT_RETRY = 5, SOURCE_RETRY_COUNT = 86400`, []any{host, port, user, password}},
		{`START REPLICA`, nil},
	} {
		if _, err := conn.ExecContext(ctx, stmt.sql, stmt.args...); err != nil {
			return fmt.Errorf("point %s at %s: %w", s.Host, host, err)
		}
	}
	return nil
}

// PersistReadOnly makes s start read-only at every later start: SET PERSIST_ONLY
// super_read_only = ON, which the server writes to mysqld-auto.cnf in its data directory
// and reads after every option file (https://dev.mysql.com/doc/refman/9.7/en/persisted-system-variables.html).
// The running server is left as it is: a primary keeps taking writes until it stops; only
// Promote turns super_read_only off, and only until the server stops.
func (Client) PersistReadOnly(ctx context.Context, s Server) error {
	db, err := open(s)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `SET PERSIST_ONLY super_read_only = ON`); err != nil {
		return fmt.Errorf("make %s start read-only: %w", s.Host, err)
	}
	return nil
}

// ApplyWait bounds how long Promote waits for the replica to apply what it has received:
// below IOTimeout, the driver's bound on reading the answer.
const ApplyWait = 8 * time.Second

// Promote makes the replica s take writes: STOP REPLICA IO_THREAD (it receives nothing
// more), START REPLICA SQL_THREAD (a server started with skip-replica-start has its applier
// stopped too; a running one is only noted), then it waits until the applier has applied
// every transaction received
// (WAIT_FOR_EXECUTED_GTID_SET of the received set, which gtid_executed already holds the
// rest of), for at most ApplyWait or what is left of ctx (applyWait), and fails without
// promoting when it has not; then STOP REPLICA, RESET REPLICA ALL (the channel is
// forgotten, so it does not start again at a restart), and super_read_only and read_only
// off. The caller makes sure s holds every transaction of the former primary first (it
// has received them: CaughtUp, Holds). A server with no channel (one promoted before: a
// second Promote, or a primary that came back read-only from a restart) only has
// super_read_only and read_only turned off: the channel statements would make it
// initialise a channel's metadata, which a read-only server refuses (ER_REPLICA_MI_INIT_REPOSITORY,
// 1871, measured on MySQL 9.7).
func (Client) Promote(ctx context.Context, s Server) error {
	db, err := open(s)
	if err != nil {
		return err
	}
	defer db.Close()
	var channels int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = ''`).Scan(&channels); err != nil {
		return fmt.Errorf("promote %s: read its replication channel: %w", s.Host, err)
	}
	if channels == 0 {
		return writable(ctx, db, s)
	}
	if _, err := db.ExecContext(ctx, `STOP REPLICA IO_THREAD`); err != nil {
		return fmt.Errorf("promote %s: stop its receiver: %w", s.Host, err)
	}
	if _, err := db.ExecContext(ctx, `START REPLICA SQL_THREAD`); err != nil && !noChannel(err) {
		return fmt.Errorf("promote %s: start its applier: %w", s.Host, err)
	}
	var received sql.NullString
	err = db.QueryRowContext(ctx, `SELECT GTID_SUBTRACT(RECEIVED_TRANSACTION_SET, COALESCE(QUEUEING_TRANSACTION, ''))
		FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''`).Scan(&received)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("promote %s: read what it received: %w", s.Host, err)
	}
	wait := applyWait(ctx, ApplyWait)
	if wait <= 0 {
		return fmt.Errorf("promote %s: no time left to wait for its applier: %w", s.Host, context.DeadlineExceeded)
	}
	var timedOut sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)`, received.String, wait.Seconds()).Scan(&timedOut); err != nil {
		return fmt.Errorf("promote %s: wait for its applier: %w", s.Host, err)
	}
	if err := applied(timedOut, wait); err != nil {
		return fmt.Errorf("promote %s: %w", s.Host, err)
	}
	for _, stmt := range []string{`STOP REPLICA`, `RESET REPLICA ALL`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("promote %s: %s: %w", s.Host, stmt, err)
		}
	}
	return writable(ctx, db, s)
}

// writable turns super_read_only and read_only off on s, through db: it takes writes until
// it stops (the setting is not persisted; every server starts read-only).
func writable(ctx context.Context, db *sql.DB, s Server) error {
	for _, stmt := range []string{`SET GLOBAL super_read_only = OFF`, `SET GLOBAL read_only = OFF`} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("promote %s: %s: %w", s.Host, stmt, err)
		}
	}
	return nil
}

// applyWait is limit, or what is left until ctx's deadline when that is sooner (0 or less:
// none is).
func applyWait(ctx context.Context, limit time.Duration) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return min(limit, time.Until(deadline))
	}
	return limit
}

// applied is WAIT_FOR_EXECUTED_GTID_SET's answer after waiting at most wait: 0 when every
// transaction of the set was applied, 1 when the wait timed out; NULL (an argument it
// cannot read) or any other value is an error too
// (https://dev.mysql.com/doc/refman/9.7/en/gtid-functions.html).
func applied(result sql.NullInt64, wait time.Duration) error {
	switch {
	case !result.Valid:
		return errors.New("WAIT_FOR_EXECUTED_GTID_SET answered NULL")
	case result.Int64 == 0:
		return nil
	case result.Int64 == 1:
		return fmt.Errorf("its applier did not apply every transaction it received within %v", wait)
	default:
		return fmt.Errorf("WAIT_FOR_EXECUTED_GTID_SET answered %d", result.Int64)
	}
}

// StopFollowing stops the replica s's receiver: STOP REPLICA IO_THREAD. Its applier goes
// on applying what was received. A stopped receiver, or no channel, is left as it is (the
// server only notes it).
func (Client) StopFollowing(ctx context.Context, s Server) error {
	return exec(ctx, s, "stop the receiver of", `STOP REPLICA IO_THREAD`)
}

// StartReplica starts the replica s's receiver and applier where they are stopped: START
// REPLICA (a running one is only noted). It fails on a server without a channel.
func (Client) StartReplica(ctx context.Context, s Server) error {
	return exec(ctx, s, "start the replication of", `START REPLICA`)
}

// exec runs stmt on s.
func exec(ctx context.Context, s Server, what, stmt string) error {
	db, err := open(s)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s %s: %w", what, s.Host, err)
	}
	return nil
}

// The source side's settings that SetSemiSync writes for a wait count above 0.
const (
	// SemiSyncWaitPoint: a commit waits for the acknowledgements after it is written to the
	// binary log and before the storage engine commits it, so no client sees a transaction
	// that no replica has (loss-less semi-synchronous replication).
	SemiSyncWaitPoint = "AFTER_SYNC"
	// SemiSyncTimeoutMillis is rpl_semi_sync_source_timeout's maximum (MAX_VALUE in
	// performance_schema.variables_info on 9.7): a commit waits for its acknowledgements
	// rather than fall back to asynchronous replication.
	SemiSyncTimeoutMillis uint64 = math.MaxUint64
)

// Setting is one system variable and the value, a literal, it is to have.
type Setting struct{ Variable, Value string }

func (s Setting) String() string { return s.Variable + " = " + s.Value }

// semiSyncVariables are the semisync_source plugin's variables Observe reads.
var semiSyncVariables = []string{
	"rpl_semi_sync_source_enabled",
	"rpl_semi_sync_source_wait_for_replica_count",
	"rpl_semi_sync_source_wait_point",
	"rpl_semi_sync_source_timeout",
	"rpl_semi_sync_source_wait_no_replica",
}

// semiSync reads the semisync_source plugin's variables on db; nil when the plugin is not
// loaded (performance_schema.global_variables has no such variables).
func semiSync(ctx context.Context, db *sql.DB) (*SemiSync, error) {
	rows, err := db.QueryContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.global_variables
		WHERE VARIABLE_NAME LIKE 'rpl\_semi\_sync\_source\_%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	values := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		values[name] = value
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return parseSemiSync(values)
}

// parseSemiSync is the SemiSync of the variables values (name to value as
// performance_schema.global_variables shows it); nil when none of them is there.
func parseSemiSync(values map[string]string) (*SemiSync, error) {
	if len(values) == 0 {
		return nil, nil
	}
	for _, name := range semiSyncVariables {
		if _, ok := values[name]; !ok {
			return nil, fmt.Errorf("%s is missing", name)
		}
	}
	ss := &SemiSync{
		Enabled:       values["rpl_semi_sync_source_enabled"] == "ON",
		WaitPoint:     values["rpl_semi_sync_source_wait_point"],
		WaitNoReplica: values["rpl_semi_sync_source_wait_no_replica"] == "ON",
	}
	var err error
	if ss.WaitForReplicaCount, err = strconv.ParseInt(values["rpl_semi_sync_source_wait_for_replica_count"], 10, 64); err != nil {
		return nil, fmt.Errorf("rpl_semi_sync_source_wait_for_replica_count: %w", err)
	}
	if ss.TimeoutMillis, err = strconv.ParseUint(values["rpl_semi_sync_source_timeout"], 10, 64); err != nil {
		return nil, fmt.Errorf("rpl_semi_sync_source_timeout: %w", err)
	}
	return ss, nil
}

// semiSyncSettings are the settings that make have what a wait count of k asks, in the
// order they are to be written (enabled last, once the rest is in place): for k above 0,
// AFTER_SYNC, waiting with fewer replicas connected, the longest timeout, a wait count of k
// and enabled; for k 0, disabled (the rest is then unused and left as it is). None when
// have is so already.
func semiSyncSettings(have SemiSync, k int32) []Setting {
	var set []Setting
	if k <= 0 {
		if have.Enabled {
			set = append(set, Setting{"rpl_semi_sync_source_enabled", "OFF"})
		}
		return set
	}
	if have.WaitPoint != SemiSyncWaitPoint {
		set = append(set, Setting{"rpl_semi_sync_source_wait_point", SemiSyncWaitPoint})
	}
	if !have.WaitNoReplica {
		set = append(set, Setting{"rpl_semi_sync_source_wait_no_replica", "ON"})
	}
	if have.TimeoutMillis != SemiSyncTimeoutMillis {
		set = append(set, Setting{"rpl_semi_sync_source_timeout", strconv.FormatUint(SemiSyncTimeoutMillis, 10)})
	}
	if have.WaitForReplicaCount != int64(k) {
		set = append(set, Setting{"rpl_semi_sync_source_wait_for_replica_count", strconv.Itoa(int(k))})
	}
	if !have.Enabled {
		set = append(set, Setting{"rpl_semi_sync_source_enabled", "ON"})
	}
	return set
}

// SetSemiSync makes the server s's source side of semi-synchronous replication wait for k
// replicas' acknowledgements of each commit (semiSyncSettings; k 0: not wait), and returns
// the settings it wrote, none when s had them already. It reads the settings and writes
// those that differ in one connection, each with SET PERSIST: the server has them at once
// and, from mysqld-auto.cnf in its data directory, when it restarts, so a primary whose
// container restarts waits for acknowledgements from its first commit on, before the
// controller's next pass (SET GLOBAL would leave it acknowledging commits no replica has
// until then). A server with the source side enabled that is not the primary, a former
// primary, is given k 0 (Replicator.SyncReplica): its applier's commits would wait for
// acknowledgements no replica sends. The CLONE plugin copies no persisted settings
// (https://dev.mysql.com/doc/refman/9.7/en/clone-plugin-limitations.html). It fails when
// s has not loaded the semisync_source plugin and k is above 0.
func (Client) SetSemiSync(ctx context.Context, s Server, k int32) ([]Setting, error) {
	db, err := open(s)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	have, err := semiSync(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("query the semi-synchronous replication of %s: %w", s.Host, err)
	}
	if have == nil {
		if k <= 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%s has not loaded the semisync_source plugin: its settings load it when its Pod restarts", s.Host)
	}
	set := semiSyncSettings(*have, k)
	for i, v := range set {
		if !literal.MatchString(v.Variable) || !literal.MatchString(v.Value) {
			return set[:i], fmt.Errorf("set %s on %s: not a variable name and a literal", v, s.Host)
		}
		if _, err := db.ExecContext(ctx, `SET PERSIST `+v.Variable+` = `+v.Value); err != nil {
			return set[:i], fmt.Errorf("set %s on %s: %w", v, s.Host, err)
		}
	}
	return set, nil
}

// literal is what a Setting's variable and value look like: each is written into SET
// PERSIST as is (a quoted number is refused for an integer variable).
var literal = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// noChannel reports whether err is the server saying it has no replication channel to
// start: ER_REPLICA_CONFIGURATION (1200) or ER_REPLICA_CHANNEL_DOES_NOT_EXIST (3074), as a
// promoted server (RESET REPLICA ALL) answers
// (https://dev.mysql.com/doc/mysql-errors/8.4/en/server-error-reference.html).
func noChannel(err error) bool {
	var myErr *driver.MySQLError
	return errors.As(err, &myErr) && (myErr.Number == 1200 || myErr.Number == 3074)
}

// IsAuthenticationFailure reports whether err is the server refusing the credentials:
// ER_ACCESS_DENIED_ERROR, 1045
// (https://dev.mysql.com/doc/mysql-errors/8.4/en/server-error-reference.html).
func IsAuthenticationFailure(err error) bool {
	var myErr *driver.MySQLError
	return errors.As(err, &myErr) && myErr.Number == 1045
}

// config is the driver configuration for s: TCP, TLS when the server offers it (MySQL
// generates self-signed certificates at initialisation: encrypted, not verified; without it
// caching_sha2_password, MySQL 8's default, encrypts the password with the server's RSA
// key), ConnectTimeout and IOTimeout, client-side interpolation of ? (the account and
// CHANGE REPLICATION SOURCE statements take no server-side parameters), and the session time
// zone UTC (SET time_zone = '+00:00' at connection), in which TIMESTAMP values and NOW() have
// no daylight saving jumps.
func config(s Server) *driver.Config {
	cfg := driver.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port)))
	cfg.User, cfg.Passwd = s.User, s.Password
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = ConnectTimeout, IOTimeout, IOTimeout
	cfg.TLSConfig = "preferred"
	cfg.InterpolateParams = true
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg
}

func open(s Server) (*sql.DB, error) {
	connector, err := driver.NewConnector(config(s))
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	return db, nil
}
