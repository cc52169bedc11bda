// Package postgres is how the Database controller talks to the PostgreSQL servers of a
// replicating Database: it asks each server its part and WAL positions, asks the primary for
// its standbys and replication slots, creates the replication role and slots, writes a
// standby's password file, and promotes a standby. Each call opens one connection to one
// server (by Pod IP, as the Secret's superuser, without TLS: the servers have no
// certificates) and closes it. No statement carries a password in clear text but in a
// session that logs no statement (unlogged).
package pgclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"example.com/database-apiserver/pkg/engine"
)

// ConnectTimeout bounds a connection's TCP and authentication handshake: a Pod that does not
// answer within it counts as unreachable for this pass.
const ConnectTimeout = 2 * time.Second

// Server is one PostgreSQL server and the credentials to reach it.
type Server struct {
	// Host is the server's address (the Pod IP) and Port its TCP port.
	Host string
	Port int32
	// User, Password and Database are the superuser's and the database it connects to.
	User, Password, Database string
}

// State is what a server says of itself.
type State struct {
	// InRecovery is pg_is_in_recovery(): true on a standby.
	InRecovery bool
	// ReceivedLSN and ReplayedLSN are a standby's pg_last_wal_receive_lsn() and
	// pg_last_wal_replay_lsn() as byte positions (0 when unknown, and on a primary).
	ReceivedLSN, ReplayedLSN uint64
	// Standbys are a primary's connected WAL receivers (pg_stat_replication), by
	// application_name, which the standbys set to their Pod name.
	Standbys map[string]Standby
	// Slots are a primary's physical replication slots by name, true when one is in use.
	Slots map[string]bool
	// Roles are the roles among the ones Observe was asked about that exist.
	Roles []string
	// RolesWithoutRewind are the roles among Roles that may not call the functions
	// pg_rewind's source connection calls (RewindFunctions).
	RolesWithoutRewind []string
	// Timeline is the timeline the server's WAL is on: on a primary, the one it writes
	// (pg_walfile_name of pg_current_wal_lsn()); on a standby, the newest of the WAL
	// segment files in pg_wal (pg_ls_waldir(): a segment file is named after the timeline
	// whose WAL it holds, and a standby writes the WAL it receives under the timeline it
	// receives it on), and at least its last restartpoint's (pg_control_checkpoint()).
	Timeline uint32
	// CheckpointTimeline is the timeline of the server's last checkpoint or restartpoint
	// (pg_control_checkpoint()), which pg_rewind reads as a source's timeline: on a primary
	// promoted since, older than Timeline until its next checkpoint.
	CheckpointTimeline uint32
	// History is Timeline's history file (pg_wal/<timeline>.history, which a promotion
	// writes and a standby, a clone or pg_rewind fetches): the timelines it branched from,
	// oldest first, each with the WAL position where it ended. Empty on timeline 1, and
	// when the file is missing.
	History []TimelineSwitch
	// NotFollowing is true on a standby whose primary_conninfo is empty (StopFollowing):
	// its WAL receiver does not run.
	NotFollowing bool
	// SynchronousStandbyNames is a primary's synchronous_standby_names.
	SynchronousStandbyNames string
	// LastArchived, LastArchiveFailed and LastFailedWAL are a primary's pg_stat_archiver
	// last_archived_time, last_failed_time and last_failed_wal: when the archiver last
	// archived a WAL segment, when it last failed to, and which (zero and empty when
	// never since the statistics began;
	// https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-ARCHIVER-VIEW).
	LastArchived, LastArchiveFailed time.Time
	LastFailedWAL                   string
	// CommitsWaiting is how many of a primary's sessions wait for synchronous standbys to
	// confirm their commit (pg_stat_activity's wait_event SyncRep), and LongestCommitWait
	// how long the one waiting longest has waited for a standby that does not answer. The
	// server does not say when a wait began, so it is the shorter of the time since that
	// session's statement began (query_start: the COMMIT or, outside a transaction block,
	// the statement itself, which may have run long before it waited) and the time since a
	// synchronous candidate (pg_stat_replication's sync_state sync or quorum) last replied
	// (reply_time): a standby replies once it has flushed the WAL it was sent, so one that
	// replied since the wait began is not what it waits for. Either may exceed the wait;
	// the shorter is the closer.
	CommitsWaiting    int
	LongestCommitWait time.Duration
	// Statistics are the server's own figures (statisticsQuery); nil when it could not
	// give them, which does not make the server count as not answering.
	Statistics *engine.Statistics
}

// statisticsQuery reads a server's engine.Statistics, primary or standby, from its
// statistics views (https://www.postgresql.org/docs/current/monitoring-stats.html): client
// backends in pg_stat_activity, max_connections, pg_stat_database's xact_commit and
// xact_rollback summed over every database, pg_database_size of every database that
// accepts connections, the WAL segment files in pg_wal (pg_ls_waldir: what a checkpoint,
// the archiver or a replication slot has not let go of yet), and the sessions waiting for
// a lock (pg_locks not granted).
const statisticsQuery = `SELECT
	(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::bigint,
	current_setting('max_connections')::bigint,
	(SELECT COALESCE(sum(xact_commit), 0) FROM pg_stat_database)::bigint,
	(SELECT COALESCE(sum(xact_rollback), 0) FROM pg_stat_database)::bigint,
	(SELECT COALESCE(sum(pg_database_size(oid)), 0) FROM pg_database WHERE datallowconn)::bigint,
	(SELECT COALESCE(sum(size), 0) FROM pg_ls_waldir())::bigint,
	(SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted)::bigint`

// TimelineSwitch is one line of a timeline history file
// (https://www.postgresql.org/docs/current/continuous-archiving.html#BACKUP-TIMELINES):
// Timeline ended at the WAL position End (a byte position), where the next one begins.
type TimelineSwitch struct {
	Timeline uint32
	End      uint64
}

// Standby is one row of a primary's pg_stat_replication.
type Standby struct {
	// State is the WAL sender's state: "startup", "catchup", "streaming", "backup" or
	// "stopping".
	State string
	// LagBytes is pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn): the WAL written on the
	// primary that the standby has not replayed yet; -1 when the standby reported no
	// position.
	LagBytes int64
	// ReplayLag is replay_lag in seconds: how long the standby took, for the WAL it last
	// confirmed, from the primary's flush to its own replay; -1 when NULL (no WAL measured
	// yet, or, once caught up with no WAL written for a while, no longer shown).
	// https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-REPLICATION-VIEW
	ReplayLag float64
}

// Client talks to PostgreSQL servers.
type Client struct{}

// Observe returns s's State; a primary's also holds its standbys, its physical slots and
// which of roles exist. It fails when s cannot be reached or a query fails.
func (Client) Observe(ctx context.Context, s Server, roles []string) (State, error) {
	conn, err := connect(ctx, s)
	if err != nil {
		return State{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var st State
	var received, replayed, checkpointTimeline int64
	var segmentTimeline, conninfo string
	// A WAL segment file's name is 24 hexadecimal digits, the first 8 its timeline
	// (https://www.postgresql.org/docs/current/wal-internals.html); CASE calls
	// pg_walfile_name, which fails during recovery, on a primary only.
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery(),
		COALESCE(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), '0/0'), 0)::bigint,
		COALESCE(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0'), 0)::bigint,
		CASE WHEN pg_is_in_recovery()
			THEN COALESCE((SELECT max(substr(name, 1, 8)) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'), '')
			ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END,
		(SELECT timeline_id FROM pg_control_checkpoint())::bigint,
		current_setting('primary_conninfo'),
		current_setting('synchronous_standby_names')`).Scan(&st.InRecovery, &received, &replayed,
		&segmentTimeline, &checkpointTimeline, &conninfo, &st.SynchronousStandbyNames)
	if err != nil {
		return State{}, fmt.Errorf("query the recovery state of %s: %w", s.Host, err)
	}
	st.ReceivedLSN, st.ReplayedLSN = uint64(received), uint64(replayed)
	st.NotFollowing = st.InRecovery && conninfo == ""
	st.Timeline = uint32(checkpointTimeline)
	st.CheckpointTimeline = st.Timeline
	if segmentTimeline != "" {
		tli, err := strconv.ParseUint(segmentTimeline, 16, 32)
		if err != nil {
			return State{}, fmt.Errorf("read the timeline of %s: %w", s.Host, err)
		}
		st.Timeline = max(st.Timeline, uint32(tli))
	}
	if st.Timeline > 1 {
		// pg_read_file(..., missing_ok): NULL when the file is missing.
		var history *string
		if err := conn.QueryRow(ctx, `SELECT pg_read_file($1, 0, 1048576, true)`, historyFile(st.Timeline)).Scan(&history); err != nil {
			return State{}, fmt.Errorf("read the timeline history of %s: %w", s.Host, err)
		}
		if history != nil {
			if st.History, err = parseHistory(*history); err != nil {
				return State{}, fmt.Errorf("read the timeline history of %s: %w", s.Host, err)
			}
		}
	}
	var stats engine.Statistics
	if err := conn.QueryRow(ctx, statisticsQuery).Scan(&stats.Connections, &stats.MaxConnections, &stats.Commits, &stats.Rollbacks,
		&stats.DataBytes, &stats.LogBytes, &stats.LockWaits); err == nil {
		st.Statistics = &stats
	} else if ctx.Err() != nil {
		return State{}, fmt.Errorf("query the statistics of %s: %w", s.Host, err)
	}
	if st.InRecovery {
		return st, nil
	}

	var longest float64
	// LEAST ignores a NULL: with no synchronous candidate, the time since query_start.
	if err := conn.QueryRow(ctx, `SELECT count(*), CASE WHEN count(*) = 0 THEN 0 ELSE LEAST(
			EXTRACT(EPOCH FROM clock_timestamp() - min(query_start)),
			(SELECT EXTRACT(EPOCH FROM clock_timestamp() - max(reply_time)) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))) END::float8
		FROM pg_stat_activity WHERE wait_event_type = 'IPC' AND wait_event = 'SyncRep'`).Scan(&st.CommitsWaiting, &longest); err != nil {
		return State{}, fmt.Errorf("query the commits waiting on %s: %w", s.Host, err)
	}
	st.LongestCommitWait = time.Duration(max(longest, 0) * float64(time.Second))

	var archived, failed *time.Time
	var failedWAL *string
	if err := conn.QueryRow(ctx, `SELECT last_archived_time, last_failed_time, last_failed_wal FROM pg_stat_archiver`).Scan(&archived, &failed, &failedWAL); err != nil {
		return State{}, fmt.Errorf("query pg_stat_archiver of %s: %w", s.Host, err)
	}
	if archived != nil {
		st.LastArchived = archived.UTC()
	}
	if failed != nil {
		st.LastArchiveFailed = failed.UTC()
	}
	if failedWAL != nil {
		st.LastFailedWAL = *failedWAL
	}

	rows, err := conn.Query(ctx, `SELECT application_name, COALESCE(state, ''),
		COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), -1)::bigint,
		COALESCE(EXTRACT(epoch FROM replay_lag), -1)::float8 FROM pg_stat_replication`)
	if err != nil {
		return State{}, fmt.Errorf("query pg_stat_replication of %s: %w", s.Host, err)
	}
	st.Standbys = map[string]Standby{}
	var name string
	var sb Standby
	if _, err := pgx.ForEachRow(rows, []any{&name, &sb.State, &sb.LagBytes, &sb.ReplayLag}, func() error {
		st.Standbys[name] = sb
		return nil
	}); err != nil {
		return State{}, fmt.Errorf("read pg_stat_replication of %s: %w", s.Host, err)
	}

	rows, err = conn.Query(ctx, `SELECT slot_name, active FROM pg_replication_slots WHERE slot_type = 'physical'`)
	if err != nil {
		return State{}, fmt.Errorf("query pg_replication_slots of %s: %w", s.Host, err)
	}
	st.Slots = map[string]bool{}
	var active bool
	if _, err := pgx.ForEachRow(rows, []any{&name, &active}, func() error {
		st.Slots[name] = active
		return nil
	}); err != nil {
		return State{}, fmt.Errorf("read pg_replication_slots of %s: %w", s.Host, err)
	}

	rows, err = conn.Query(ctx, `SELECT rolname, `+rewindPrivileges("rolname")+` FROM pg_roles WHERE rolname = ANY($1)`, roles)
	if err != nil {
		return State{}, fmt.Errorf("query pg_roles of %s: %w", s.Host, err)
	}
	var rewind bool
	if _, err := pgx.ForEachRow(rows, []any{&name, &rewind}, func() error {
		st.Roles = append(st.Roles, name)
		if !rewind {
			st.RolesWithoutRewind = append(st.RolesWithoutRewind, name)
		}
		return nil
	}); err != nil {
		return State{}, fmt.Errorf("read pg_roles of %s: %w", s.Host, err)
	}
	slices.Sort(st.Roles)
	slices.Sort(st.RolesWithoutRewind)
	return st, nil
}

// historyFile is the path, relative to the data directory, of timeline tli's history file:
// its number in 8 hexadecimal digits.
func historyFile(tli uint32) string { return fmt.Sprintf("pg_wal/%08X.history", tli) }

// parseHistory reads a timeline history file: one line per timeline the current one
// branched from, "<timeline>\t<end LSN>\t<reason>", oldest first; blank lines and lines
// starting with # are skipped (readTimeLineHistory, src/backend/access/transam/timeline.c).
func parseHistory(content string) ([]TimelineSwitch, error) {
	var out []TimelineSwitch
	for _, line := range strings.Split(content, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("history line %q has no end position", line)
		}
		tli, err := strconv.ParseUint(fields[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("history line %q: %w", line, err)
		}
		end, err := parseLSN(fields[1])
		if err != nil {
			return nil, fmt.Errorf("history line %q: %w", line, err)
		}
		out = append(out, TimelineSwitch{Timeline: uint32(tli), End: end})
	}
	return out, nil
}

// parseLSN reads a WAL position as PostgreSQL prints it, "<high>/<low>" in hexadecimal, as a
// byte position.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("WAL position %q is not <high>/<low>", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// RewindFunctions are the functions pg_rewind calls on its source server, which a role
// other than a superuser may call once granted EXECUTE on them
// (https://www.postgresql.org/docs/current/app-pgrewind.html).
var RewindFunctions = []string{
	"pg_catalog.pg_ls_dir(text, boolean, boolean)",
	"pg_catalog.pg_stat_file(text, boolean)",
	"pg_catalog.pg_read_binary_file(text)",
	"pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)",
}

// rewindPrivileges is an SQL expression true when the role named by the expression role
// may execute every one of RewindFunctions.
func rewindPrivileges(role string) string {
	var terms []string
	for _, f := range RewindFunctions {
		terms = append(terms, "has_function_privilege("+role+", "+quoteLiteral(f)+", 'EXECUTE')")
	}
	return "(" + strings.Join(terms, " AND ") + ")"
}

// SetReplicationRole makes role, on the primary s, a LOGIN REPLICATION role with password
// (sent as a SCRAM-SHA-256 verifier, setRole): it creates it, or, when it exists, sets its
// attributes and password.
//
// It also grants role EXECUTE on RewindFunctions (GRANT is idempotent), so that a former
// primary's pg_rewind can read this server's files as role.
func (Client) SetReplicationRole(ctx context.Context, s Server, role, password string) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := setRole(ctx, conn, s, role, "LOGIN REPLICATION", password); err != nil {
		return err
	}
	name := pgx.Identifier{role}.Sanitize()
	for _, f := range RewindFunctions {
		if _, err := conn.Exec(ctx, "GRANT EXECUTE ON FUNCTION "+f+" TO "+name); err != nil {
			return fmt.Errorf("grant role %q EXECUTE on %s on %s: %w", role, f, s.Host, err)
		}
	}
	return nil
}

// setRole creates role on s's server through conn WITH attributes and password, or, when
// pg_roles has it, sets them: the catalog decides between CREATE and ALTER ROLE, so neither
// fails on a role that exists. The password is sent as SCRAMVerifier(password), never in
// clear text, in a session that logs no statement (unlogged). CREATE and ALTER ROLE take no
// bind parameters: the name is quoted as an identifier and the verifier as a string literal.
func setRole(ctx context.Context, conn *pgx.Conn, s Server, role, attributes, password string) error {
	verifier, err := SCRAMVerifier(password)
	if err != nil {
		return fmt.Errorf("set role %q on %s: %w", role, s.Host, err)
	}
	if err := unlogged(ctx, conn); err != nil {
		return fmt.Errorf("set role %q on %s: %w", role, s.Host, err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return fmt.Errorf("query pg_roles of %s: %w", s.Host, err)
	}
	verb := "CREATE ROLE "
	if exists {
		verb = "ALTER ROLE "
	}
	if _, err := conn.Exec(ctx, verb+pgx.Identifier{role}.Sanitize()+" WITH "+attributes+" PASSWORD "+quoteLiteral(verifier)); err != nil {
		return fmt.Errorf("set role %q on %s: %w", role, s.Host, err)
	}
	return nil
}

// unloggedSettings keep the statements of a session out of the server's log and out of
// other sessions' sight, whatever postgresql.conf says: no statement logged for its kind
// (log_statement) or duration (log_min_duration_statement, log_min_duration_sample,
// log_transaction_sample_rate), none printed with the error it raises
// (log_min_error_statement: only a PANIC would), no parse tree printed (debug_print_*), no
// DEBUG message (log_min_messages; "parse <name>: <query>" is one), and the query text not
// reported to pg_stat_activity (track_activities), which other sessions with
// pg_read_all_stats and a crashed backend's "Failed process was running" log line read. All
// are superuser settings (PGC_SUSET), as the controller's connection is
// (https://www.postgresql.org/docs/current/runtime-config-logging.html,
// https://www.postgresql.org/docs/current/runtime-config-statistics.html).
const unloggedSettings = `SET log_statement = 'none';
SET log_min_duration_statement = -1;
SET log_min_duration_sample = -1;
SET log_transaction_sample_rate = 0;
SET log_min_error_statement = 'panic';
SET debug_print_parse = off;
SET debug_print_rewritten = off;
SET debug_print_plan = off;
SET log_min_messages = 'warning';
SET track_activities = off`

// unlogged applies unloggedSettings to conn's session: every statement sent after it on conn
// reaches no server log.
func unlogged(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, unloggedSettings); err != nil {
		return fmt.Errorf("turn statement logging off: %w", err)
	}
	return nil
}

// SetApplicationRole makes role, on the primary s, the application role of database s.Database:
// LOGIN with password and nothing else (NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION
// NOBYPASSRLS), the database's owner, so it may create schemas and, in the public schema
// (owned by pg_database_owner since PostgreSQL 15, granted to it explicitly before), tables.
// It creates the role, or, when it exists, sets its attributes and password. With takeOver it
// also gives role the schemas, tables, views, materialized views, sequences and foreign tables
// of that database that the connecting superuser owns outside the system schemas (a
// sequence owned by a table column, serial or identity, follows its table; a partition is
// given on its own, as ALTER TABLE ... OWNER TO does not recurse to partitions), so that the
// clients that used to connect as the superuser keep their objects. Only sequences are
// recognised as owned by their pg_depend row (auto or internal on a relation): a partition
// has an auto one on its parent, and a partitioned table internal ones of its partition key
// columns on itself.
func (Client) SetApplicationRole(ctx context.Context, s Server, role, password string, takeOver bool) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := setRole(ctx, conn, s, role, "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS", password); err != nil {
		return err
	}
	name := pgx.Identifier{role}.Sanitize()
	statements := []string{
		"ALTER DATABASE " + pgx.Identifier{s.Database}.Sanitize() + " OWNER TO " + name,
		"GRANT ALL ON SCHEMA public TO " + name,
	}
	if takeOver {
		statements = append(statements, `DO $$
DECLARE r record;
BEGIN
	FOR r IN SELECT n.nspname FROM pg_namespace n
		WHERE n.nspowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
		AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'public') AND n.nspname NOT LIKE 'pg\_%'
	LOOP
		EXECUTE format('ALTER SCHEMA %I OWNER TO %I', r.nspname, `+quoteLiteral(role)+`);
	END LOOP;
	FOR r IN SELECT c.oid::regclass AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
		AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
		AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
		AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
			AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
	LOOP
		EXECUTE format('ALTER TABLE %s OWNER TO %I', r.rel, `+quoteLiteral(role)+`);
	END LOOP;
END
$$`)
	}
	for _, stmt := range statements {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("give role %q database %q on %s: %w", role, s.Database, s.Host, err)
		}
	}
	return nil
}

// SyncSlots makes the primary s keep a physical replication slot of every name in want that
// have (its slots as Observe found them) lacks, reserving WAL from now on
// (pg_create_physical_replication_slot(name, true); one created since is not an error), and
// drops the inactive slots among drop. Slots in neither are left alone.
func (Client) SyncSlots(ctx context.Context, s Server, have map[string]bool, want, drop []string) error {
	var missing, stale []string
	for _, name := range want {
		if _, ok := have[name]; !ok {
			missing = append(missing, name)
		}
	}
	for _, name := range drop {
		if active, ok := have[name]; ok && !active {
			stale = append(stale, name)
		}
	}
	if len(missing) == 0 && len(stale) == 0 {
		return nil
	}
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, name := range missing {
		if _, err := conn.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true)`, name); err != nil && !isDuplicate(err) {
			return fmt.Errorf("create replication slot %q on %s: %w", name, s.Host, err)
		}
	}
	for _, name := range stale {
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, name); err != nil {
			return fmt.Errorf("drop replication slot %q on %s: %w", name, s.Host, err)
		}
	}
	return nil
}

// WritePassfile makes the standby s's WAL receiver authenticate to its primary as user with
// password from now on: it writes path, the libpq password file that the standby's
// primary_conninfo names (passfile) and the setup script made, mode 0600, at the Pod's start.
// libpq reads the file at each connection attempt, so the new password is used from the WAL
// receiver's next connection, with no configuration reload
// (https://www.postgresql.org/docs/current/libpq-pgpass.html).
//
// The password is not put in primary_conninfo itself: the postmaster logs every setting a
// reload changes with its new value ("parameter "primary_conninfo" changed to ..."), at LOG,
// whatever the session that asked for the reload sets (ProcessConfigFileInternal,
// src/backend/utils/misc/guc-file.l). The file is written by COPY TO on the
// server (COPY TO runs on a hot standby,
// https://www.postgresql.org/docs/current/hot-standby.html), from an unlogged session: the
// statement holds the password. COPY keeps the mode of a file that exists and gives a new one
// 0644, which libpq refuses to read; the setup script has made it.
func (Client) WritePassfile(ctx context.Context, s Server, path, user, password string) error {
	line, err := passfileLine(user, password)
	if err != nil {
		return fmt.Errorf("write the password file of %s: %w", s.Host, err)
	}
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := unlogged(ctx, conn); err != nil {
		return fmt.Errorf("write the password file of %s: %w", s.Host, err)
	}
	// COPY takes no bind parameters. CSV writes a value as it is unless it holds the
	// delimiter, the quote character or a line break (passfileLine refuses them), where
	// COPY's text format would escape every backslash.
	if _, err := conn.Exec(ctx, "COPY (SELECT "+quoteLiteral(line)+") TO "+quoteLiteral(path)+
		` WITH (FORMAT csv, DELIMITER E'\x1f', QUOTE E'\x1e')`); err != nil {
		return fmt.Errorf("write the password file of %s: %w", s.Host, err)
	}
	return nil
}

// passfileLine is the password file's line, without its newline, for user and password on
// every host, port and database: "*:*:*:<user>:<password>", each \ and : in user and password
// escaped by \. It fails for a value holding a line break, which the file cannot hold, or
// the control characters U+001E and U+001F, WritePassfile's CSV quote and delimiter.
func passfileLine(user, password string) (string, error) {
	escape := strings.NewReplacer(`\`, `\\`, `:`, `\:`)
	for _, v := range []string{user, password} {
		if strings.ContainsAny(v, "\n\r\x1e\x1f") {
			return "", errors.New("the replication user or password holds a line break or a U+001E or U+001F control character, which the password file cannot hold")
		}
	}
	return "*:*:*:" + escape.Replace(user) + ":" + escape.Replace(password), nil
}

// Promote ends recovery on the standby s and waits up to a minute for it to take writes
// (pg_promote(true, 60)). It fails when s is not a standby or does not finish in time.
func (Client) Promote(ctx context.Context, s Server) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var done bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 60)`).Scan(&done); err != nil {
		return fmt.Errorf("promote %s: %w", s.Host, err)
	}
	if !done {
		return fmt.Errorf("promote %s: not done within 60s", s.Host)
	}
	return nil
}

// Checkpoint runs an immediate checkpoint on the primary s (CHECKPOINT), which records the
// timeline it writes in its control file; it does not wait for synchronous standbys.
func (Client) Checkpoint(ctx context.Context, s Server) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.Host, err)
	}
	return nil
}

// IsAuthenticationFailure reports whether err is the server refusing the credentials: an
// error of SQLSTATE class 28, invalid authorization specification (28P01
// invalid_password, 28000 invalid_authorization_specification;
// https://www.postgresql.org/docs/current/errcodes-appendix.html).
func IsAuthenticationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28")
}

// isDuplicate reports whether err is PostgreSQL's duplicate_object (SQLSTATE 42710): a
// replication slot of that name exists.
func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42710"
}

// sessionSettings are the controller's session's settings, sent at connection start, where
// they take precedence over the ones the database's owner may set with ALTER DATABASE ... SET
// (https://www.postgresql.org/docs/current/config-setting.html#CONFIG-SETTING-SQL): the
// controller connects as the superuser to the application's database, which the application
// role owns. search_path names pg_catalog first and pg_temp last, so no function or table the
// owner creates in another schema (a public.pg_is_in_recovery(), say) is called or read in
// place of the system's (the rule for code that runs with raised privileges,
// https://www.postgresql.org/docs/current/sql-createfunction.html#SQL-CREATEFUNCTION-SECURITY);
// standard_conforming_strings on, which quoteLiteral and the password file's COPY rely on;
// default_transaction_read_only off, so the controller's writes are not refused; and
// synchronous_commit local, so the controller's own writes (roles, slots) never wait for a
// synchronous standby: on a primary whose standbys a failover stopped, or that has none
// streaming, they would wait until the controller itself makes one stream again
// (https://www.postgresql.org/docs/current/runtime-config-wal.html#GUC-SYNCHRONOUS-COMMIT).
var sessionSettings = map[string]string{
	"application_name":              "database-controller",
	"search_path":                   "pg_catalog, pg_temp",
	"standard_conforming_strings":   "on",
	"default_transaction_read_only": "off",
	"synchronous_commit":            "local",
}

// connConfig is the connection configuration for s: no TLS, ConnectTimeout, sessionSettings,
// and SCRAM-SHA-256 as the only authentication (require_auth,
// https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-REQUIRE-AUTH): the
// method of the servers' pg_hba.conf, and one that sends no password, so a server that asks
// for it in clear text or as MD5 (whoever answers at the Pod's address) gets none.
func connConfig(s Server) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable require_auth=scram-sha-256")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port = s.Host, uint16(s.Port)
	cfg.User, cfg.Password, cfg.Database = s.User, s.Password, s.Database
	cfg.ConnectTimeout = ConnectTimeout
	for k, v := range sessionSettings {
		cfg.RuntimeParams[k] = v
	}
	return cfg, nil
}

func connect(ctx context.Context, s Server) (*pgx.Conn, error) {
	cfg, err := connConfig(s)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))), err)
	}
	return conn, nil
}

// quoteLiteral quotes s as a standard-conforming SQL string literal: ' doubled.
func quoteLiteral(s string) string {
	b := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}
