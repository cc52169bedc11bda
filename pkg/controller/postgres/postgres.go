// Package postgres is how the Database controller talks to the PostgreSQL servers of a
// replicating Database: it asks each server its part and WAL positions, asks the primary for
// its standbys and replication slots, creates the replication role and slots, and promotes a
// standby. Each call opens one connection to one server (by Pod IP, as the Secret's
// superuser, without TLS: the servers have no certificates) and closes it.
package postgres

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
	var received, replayed int64
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery(),
		COALESCE(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), '0/0'), 0)::bigint,
		COALESCE(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0'), 0)::bigint`).Scan(&st.InRecovery, &received, &replayed)
	if err != nil {
		return State{}, fmt.Errorf("query the recovery state of %s: %w", s.Host, err)
	}
	st.ReceivedLSN, st.ReplayedLSN = uint64(received), uint64(replayed)
	if st.InRecovery {
		return st, nil
	}

	rows, err := conn.Query(ctx, `SELECT application_name, COALESCE(state, ''),
		COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), -1)::bigint FROM pg_stat_replication`)
	if err != nil {
		return State{}, fmt.Errorf("query pg_stat_replication of %s: %w", s.Host, err)
	}
	st.Standbys = map[string]Standby{}
	var name string
	var sb Standby
	if _, err := pgx.ForEachRow(rows, []any{&name, &sb.State, &sb.LagBytes}, func() error {
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

	rows, err = conn.Query(ctx, `SELECT rolname FROM pg_roles WHERE rolname = ANY($1)`, roles)
	if err != nil {
		return State{}, fmt.Errorf("query pg_roles of %s: %w", s.Host, err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&name}, func() error {
		st.Roles = append(st.Roles, name)
		return nil
	}); err != nil {
		return State{}, fmt.Errorf("read pg_roles of %s: %w", s.Host, err)
	}
	slices.Sort(st.Roles)
	return st, nil
}

// SetReplicationRole makes role, on the primary s, a LOGIN REPLICATION role with password
// (stored as SCRAM-SHA-256, the server's default password_encryption): it creates it, or,
// when it exists, sets its attributes and password.
func (Client) SetReplicationRole(ctx context.Context, s Server, role, password string) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return setRole(ctx, conn, s, role, "LOGIN REPLICATION", password)
}

// setRole creates role on s's server through conn WITH attributes and password, or, when it
// exists, sets them. CREATE and ALTER ROLE take no bind parameters: the name is quoted as an
// identifier and the password as a string literal.
func setRole(ctx context.Context, conn *pgx.Conn, s Server, role, attributes, password string) error {
	options := " WITH " + attributes + " PASSWORD " + quoteLiteral(password)
	name := pgx.Identifier{role}.Sanitize()
	_, err := conn.Exec(ctx, "CREATE ROLE "+name+options)
	if isDuplicate(err) {
		_, err = conn.Exec(ctx, "ALTER ROLE "+name+options)
	}
	if err != nil {
		return fmt.Errorf("set role %q on %s: %w", role, s.Host, err)
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
// sequence owned by a table column follows its table), so that the clients that used to
// connect as the superuser keep their objects.
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
		AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
			AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
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

// SetPrimaryConnInfo makes the standby s connect to its primary with conninfo (a libpq
// connection string, ConnInfo) from now on: ALTER SYSTEM SET primary_conninfo, then
// pg_reload_conf(). Since PostgreSQL 13 a reload restarts the WAL receiver with the new
// setting (https://www.postgresql.org/docs/current/runtime-config-replication.html#GUC-PRIMARY-CONNINFO);
// the setting is kept in postgresql.auto.conf across restarts.
func (Client) SetPrimaryConnInfo(ctx context.Context, s Server, conninfo string) error {
	conn, err := connect(ctx, s)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// ALTER SYSTEM takes no bind parameters.
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = "+quoteLiteral(conninfo)); err != nil {
		return fmt.Errorf("set primary_conninfo on %s: %w", s.Host, err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload the configuration of %s: %w", s.Host, err)
	}
	return nil
}

// ConnInfo is a libpq connection string of keyword = 'value' pairs, in the order given
// (keyword, value, keyword, value, ...), each value quoted with ' and \ escaped
// (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNSTRING-KEYWORD-VALUE).
// It panics on an odd number of arguments.
func ConnInfo(pairs ...string) string {
	if len(pairs)%2 != 0 {
		panic("ConnInfo: a keyword without a value")
	}
	var b strings.Builder
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(pairs[i])
		b.WriteString("='")
		b.WriteString(strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pairs[i+1]))
		b.WriteByte('\'')
	}
	return b.String()
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

// isDuplicate reports whether err is PostgreSQL's duplicate_object (SQLSTATE 42710): a role or
// replication slot of that name exists.
// IsAuthenticationFailure reports whether err is the server refusing the credentials: an
// error of SQLSTATE class 28, invalid authorization specification (28P01
// invalid_password, 28000 invalid_authorization_specification;
// https://www.postgresql.org/docs/current/errcodes-appendix.html).
func IsAuthenticationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28")
}

func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42710"
}

func connect(ctx context.Context, s Server) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port = s.Host, uint16(s.Port)
	cfg.User, cfg.Password, cfg.Database = s.User, s.Password, s.Database
	cfg.ConnectTimeout = ConnectTimeout
	cfg.RuntimeParams["application_name"] = "database-controller"
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
