//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mysql/myclient"
	"example.com/database-apiserver/pkg/engine/postgresql"
	"example.com/database-apiserver/pkg/engine/postgresql/pgclient"
	"example.com/database-apiserver/pkg/names"
)

// TestRealSQLClients calls every exported call of the controller's SQL clients
// (pkg/engine/postgresql/pgclient and pkg/engine/mysql/myclient) from the test process against the real
// servers of a replicated PostgreSQL and a replicated MySQL (replicas: 2) on the real node,
// by Pod IP as the Secret's superuser, as the controller does, and checks each effect with a
// query of its own through the same driver (pgx, database/sql). The calls that break
// replication on purpose come last: a promotion ends each engine's part, which then deletes
// its Database. Before them, the statistics the controller reports of each primary are
// checked against what its server says (testMemberStatistics).
func TestRealSQLClients(t *testing.T) {
	// The releases the real node's images hold, as the replication tests ask for them.
	pgImage, myImage := realNodeImage(t, examplev1.EnginePostgreSQL), realNodeImage(t, examplev1.EngineMySQL)
	pgNS := restrictedNamespace(t, "e2e-sqlclients-postgres")
	myNS := restrictedNamespace(t, "e2e-sqlclients-mysql")
	const pgDB, myDB = "pgclients", "myclients"
	// Both are created before either is waited for: they start side by side.
	for _, d := range []struct {
		ns, name string
		engine   examplev1.Engine
		version  string
	}{
		{pgNS, pgDB, examplev1.EnginePostgreSQL, pgImage.Release},
		{myNS, myDB, examplev1.EngineMySQL, myImage.Line},
	} {
		kubectlIn(t, fmt.Sprintf(`apiVersion: example.com/v1
kind: Database
metadata:
  name: %s
  namespace: %s
spec:
  engine: %s
  version: %q
  replicas: 2
  storage: 1Gi
`, d.name, d.ns, d.engine, d.version), "apply", "-f", "-")
	}
	created := time.Now()
	waitReplicating(t, pgNS, pgDB, pgDB+"-0", 2)
	waitReplicating(t, myNS, myDB, myDB+"-0", 2)
	t.Logf("measured: both Databases replicating %v after creation", time.Since(created).Round(time.Second))

	// The controller's statistics of each primary first: each engine's part ends by deleting
	// its Database.
	t.Run("statistics", func(t *testing.T) {
		t.Run("postgresql", func(t *testing.T) {
			t.Parallel()
			testMemberStatistics(t, examplev1.EnginePostgreSQL, pgNS, pgDB)
		})
		t.Run("mysql", func(t *testing.T) {
			t.Parallel()
			testMemberStatistics(t, examplev1.EngineMySQL, myNS, myDB)
		})
	})
	t.Run("postgresql", func(t *testing.T) { testPostgresClient(t, pgNS, pgDB) })
	t.Run("mysql", func(t *testing.T) { testMySQLClient(t, myNS, myDB) })
}

// waitOneCommitWaiting waits until observe (a client's Observe of a primary) says one
// session waits for replicas to acknowledge its commit, for 2 s or more, and requires the
// commit whose result done delivers to be still waiting.
func waitOneCommitWaiting(t *testing.T, done <-chan error, observe func() (sessions int, longest time.Duration, err error)) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		n, longest, err := observe()
		if err == nil && (n != 1 || longest < 2*time.Second) {
			err = fmt.Errorf("observed %d commits waiting, the longest for %v", n, longest)
		}
		return err
	})
	select {
	case err := <-done:
		t.Fatalf("the commit returned (%v) while no replica acknowledges it", err)
	default:
	}
}

// credentials returns the Database's credentials Secret's data as strings.
func credentials(t *testing.T, ns, db string) map[string]string {
	t.Helper()
	s, err := kube(t).CoreV1().Secrets(ns).Get(context.Background(), db+"-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// podIP returns the Pod's IP, which the test process reaches as the controller does.
func podIP(t *testing.T, ns, name string) string {
	t.Helper()
	p, err := kube(t).CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, p.Status.PodIP, "pod %s has no IP", name)
	return p.Status.PodIP
}

// engineLogCount is how many times s occurs in the log of the Pod's database container.
func engineLogCount(ctx context.Context, t *testing.T, ns, pod, s string) (int, error) {
	b, err := kube(t).CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: engine.ContainerName}).DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), s), nil
}

// pgDial connects to s's server as s's user on s's database, without TLS, as the client
// under test does.
func pgDial(ctx context.Context, s pgclient.Server) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable connect_timeout=10")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port = s.Host, uint16(s.Port)
	cfg.User, cfg.Password, cfg.Database = s.User, s.Password, s.Database
	return pgx.ConnectConfig(ctx, cfg)
}

// pgExec runs sql (one or more statements, no parameters) on s's server.
func pgExec(t *testing.T, s pgclient.Server, sql string) {
	t.Helper()
	conn, err := pgDial(t.Context(), s)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql)
	require.NoError(t, err, sql)
}

// pgRow scans the one row sql returns on s's server into dest.
func pgRow(t *testing.T, s pgclient.Server, sql string, args []any, dest ...any) {
	t.Helper()
	conn, err := pgDial(t.Context(), s)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(dest...), sql)
}

// pgLogin connects to s's server as user with password and returns current_user.
func pgLogin(ctx context.Context, s pgclient.Server, user, password string) (string, error) {
	s.User, s.Password = user, password
	conn, err := pgDial(ctx, s)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var who string
	err = conn.QueryRow(ctx, "SELECT current_user").Scan(&who)
	return who, err
}

// requirePgRefused requires err to be the server refusing a password (SQLSTATE 28P01,
// invalid_password).
func requirePgRefused(t *testing.T, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "28P01", pgErr.Code, "%v", err)
}

// pgRoleAttributes is a role's pg_roles row: "login replication super createdb createrole
// bypassrls" with each attribute the role lacks left out.
func pgRoleAttributes(t *testing.T, s pgclient.Server, role string) string {
	t.Helper()
	var login, replication, super, createdb, createrole, bypassrls bool
	pgRow(t, s, `SELECT rolcanlogin, rolreplication, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls
		FROM pg_roles WHERE rolname = $1`, []any{role}, &login, &replication, &super, &createdb, &createrole, &bypassrls)
	var attrs []string
	for _, a := range []struct {
		name string
		has  bool
	}{{"login", login}, {"replication", replication}, {"super", super}, {"createdb", createdb}, {"createrole", createrole}, {"bypassrls", bypassrls}} {
		if a.has {
			attrs = append(attrs, a.name)
		}
	}
	return strings.Join(attrs, " ")
}

// pgVerifier requires role's stored password to be a SCRAM-SHA-256 verifier of
// pgclient.SCRAMIterations, not a password in clear text or MD5.
func pgVerifier(t *testing.T, s pgclient.Server, role string) {
	t.Helper()
	var stored string
	pgRow(t, s, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, []any{role}, &stored)
	require.True(t, strings.HasPrefix(stored, "SCRAM-SHA-256$"+strconv.Itoa(pgclient.SCRAMIterations)+":"), "role %s's password is stored as %.20q...", role, stored)
}

// testPostgresClient calls pgclient.Client's calls against the Database db's primary
// (db-0) and standby (db-1).
func testPostgresClient(t *testing.T, ns, db string) {
	secret := credentials(t, ns, db)
	port, err := strconv.Atoi(secret[names.SecretKeyPort])
	require.NoError(t, err)
	superuser := pgclient.Server{
		Port:     int32(port),
		User:     secret[names.SecretKeySuperuserUsername],
		Password: secret[names.SecretKeySuperuserPassword],
		Database: secret[names.SecretKeyDatabase],
	}
	primary, standby := superuser, superuser
	primary.Host, standby.Host = podIP(t, ns, db+"-0"), podIP(t, ns, db+"-1")
	standbyName := db + "-1"
	appUser := secret[names.SecretKeyUsername]
	replUser, replPassword := secret[names.SecretKeyReplicationUsername], secret[names.SecretKeyReplicationPassword]
	var c pgclient.Client

	t.Run("Observe", func(t *testing.T) {
		ctx := t.Context()
		// The controller grants pg_rewind's functions in the database pg_rewind's session
		// opens: EXECUTE is granted in one database, and in the application's the role has
		// none of them.
		inApplicationDatabase, err := c.Observe(ctx, primary, []string{replUser})
		require.NoError(t, err)
		require.Equal(t, []string{replUser}, inApplicationDatabase.RolesWithoutRewind)
		rewindDB := primary
		rewindDB.Database = postgresql.RewindDatabase
		st, err := c.Observe(ctx, rewindDB, []string{replUser, "e2e_absent", appUser})
		require.NoError(t, err)
		require.False(t, st.InRecovery)
		require.Zero(t, st.ReceivedLSN, "a primary that never was a standby has received no WAL")
		require.Zero(t, st.ReplayedLSN)
		want := []string{appUser, replUser}
		slices.Sort(want)
		require.Equal(t, want, st.Roles, "the asked roles that exist, sorted")
		require.Equal(t, []string{appUser}, st.RolesWithoutRewind, "the replication role was made with pg_rewind's functions")
		require.Equal(t, uint32(1), st.Timeline, "a primary never replaced")
		require.Empty(t, st.History)
		require.False(t, st.NotFollowing)
		require.Empty(t, st.SynchronousStandbyNames)
		require.Equal(t, map[string]bool{postgresql.SlotName(standbyName): true}, st.Slots, "the standby's slot, in use")
		require.Len(t, st.Standbys, 1, "%+v", st.Standbys)
		sb, ok := st.Standbys[standbyName]
		require.True(t, ok, "%+v", st.Standbys)
		require.Equal(t, "streaming", sb.State)
		require.GreaterOrEqual(t, sb.LagBytes, int64(0))
		var state string
		pgRow(t, primary, `SELECT state FROM pg_stat_replication WHERE application_name = $1`, []any{standbyName}, &state)
		require.Equal(t, "streaming", state)

		// The standby reports the WAL it has received and replayed as byte positions: up
		// to the primary's position after a commit, once it has replayed it.
		pgExec(t, primary, `CREATE TABLE e2e_observe (id int); INSERT INTO e2e_observe VALUES (1)`)
		var written int64
		pgRow(t, primary, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`, nil, &written)
		eventually(t, time.Minute, func() error {
			if st, err = c.Observe(ctx, standby, []string{replUser}); err != nil {
				return err
			}
			if st.ReplayedLSN < uint64(written) {
				return fmt.Errorf("the standby has replayed up to %d, the primary wrote up to %d", st.ReplayedLSN, written)
			}
			return nil
		})
		require.True(t, st.InRecovery)
		require.GreaterOrEqual(t, st.ReceivedLSN, uint64(written))
		require.Equal(t, uint32(1), st.Timeline)
		require.False(t, st.NotFollowing, "it streams")
		require.Nil(t, st.Standbys, "a standby's State holds its recovery only")
		require.Nil(t, st.Slots)
		require.Nil(t, st.Roles)
		var rows int
		var replayed int64
		pgRow(t, standby, `SELECT count(*), pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint FROM e2e_observe`, nil, &rows, &replayed)
		require.Equal(t, 1, rows)
		require.GreaterOrEqual(t, replayed, int64(st.ReplayedLSN))
	})

	t.Run("IsAuthenticationFailure", func(t *testing.T) {
		ctx := t.Context()
		wrong := primary
		wrong.Password += "-wrong"
		_, err := c.Observe(ctx, wrong, nil)
		require.Error(t, err)
		requirePgRefused(t, err)
		require.True(t, pgclient.IsAuthenticationFailure(err), "%v", err)

		closed := primary
		closed.Port = 1
		_, err = c.Observe(ctx, closed, nil)
		require.Error(t, err)
		require.False(t, pgclient.IsAuthenticationFailure(err), "a refused TCP connection: %v", err)

		conn, err := pgDial(ctx, primary)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, `SELECT * FROM e2e_absent`)
		require.Error(t, err)
		require.False(t, pgclient.IsAuthenticationFailure(err), "an undefined table: %v", err)
		require.False(t, pgclient.IsAuthenticationFailure(nil))
	})

	t.Run("SCRAMVerifier", func(t *testing.T) {
		ctx := t.Context()
		// A verifier given as the password is stored as it is, and the password it was
		// computed from logs in.
		const role, password = "e2e_scram", "e2e-scram-π-1"
		verifier, err := pgclient.SCRAMVerifier(password)
		require.NoError(t, err)
		pgExec(t, primary, `CREATE ROLE `+role+` LOGIN PASSWORD '`+verifier+`'`)
		var stored string
		pgRow(t, primary, `SELECT rolpassword FROM pg_authid WHERE rolname = $1`, []any{role}, &stored)
		require.Equal(t, verifier, stored)
		who, err := pgLogin(ctx, primary, role, password)
		require.NoError(t, err)
		require.Equal(t, role, who)
		_, err = pgLogin(ctx, primary, role, password+"-wrong")
		requirePgRefused(t, err)
	})

	t.Run("SetReplicationRole", func(t *testing.T) {
		ctx := t.Context()
		const role = "e2e_replicator"
		// A quote, a double quote, a backslash and a colon: the literal's and the
		// verifier's escapes.
		first, second := `e2e'first"\:1`, "e2e-second-2"
		require.NoError(t, c.SetReplicationRole(ctx, primary, role, first))
		require.Equal(t, "login replication", pgRoleAttributes(t, primary, role))
		pgVerifier(t, primary, role)
		// pg_rewind's functions, granted.
		st, err := c.Observe(ctx, primary, []string{role})
		require.NoError(t, err)
		require.Equal(t, []string{role}, st.Roles)
		require.Empty(t, st.RolesWithoutRewind)
		for _, f := range pgclient.RewindFunctions {
			var may bool
			pgRow(t, primary, `SELECT has_function_privilege($1, $2, 'EXECUTE')`, []any{role, f}, &may)
			require.True(t, may, f)
		}
		who, err := pgLogin(ctx, primary, role, first)
		require.NoError(t, err)
		require.Equal(t, role, who)

		// An existing role gets the attributes back and the new password.
		pgExec(t, primary, `ALTER ROLE `+role+` NOLOGIN NOREPLICATION PASSWORD NULL`)
		require.Equal(t, "", pgRoleAttributes(t, primary, role))
		require.NoError(t, c.SetReplicationRole(ctx, primary, role, second))
		require.Equal(t, "login replication", pgRoleAttributes(t, primary, role))
		pgVerifier(t, primary, role)
		_, err = pgLogin(ctx, primary, role, second)
		require.NoError(t, err)
		_, err = pgLogin(ctx, primary, role, first)
		requirePgRefused(t, err)

		// The Database's replication role, given the Secret's password again: pg_hba.conf
		// admits its replication connections only from the namespace's Pods, so this test,
		// on the node's address, is refused one, and the standby, its walsender ended,
		// streams again as it.
		require.NoError(t, c.SetReplicationRole(ctx, primary, replUser, replPassword))
		require.Equal(t, "login replication", pgRoleAttributes(t, primary, replUser))
		cfg, err := pgconn.ParseConfig("sslmode=disable connect_timeout=10 replication=true")
		require.NoError(t, err)
		cfg.Host, cfg.Port, cfg.User, cfg.Password = primary.Host, uint16(primary.Port), replUser, replPassword
		_, err = pgconn.ConnectConfig(ctx, cfg)
		require.ErrorContains(t, err, "no pg_hba.conf entry for replication connection")
		var ended int
		pgRow(t, primary, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE usename = $1`, []any{replUser}, &ended)
		require.Equal(t, 1, ended, "the standby's walsender")
		eventually(t, time.Minute, func() error {
			var streaming int
			pgRow(t, primary, `SELECT count(*) FROM pg_stat_replication WHERE usename = $1 AND state = 'streaming'`, []any{replUser}, &streaming)
			if streaming != 1 {
				return fmt.Errorf("%d standbys stream as %s", streaming, replUser)
			}
			return nil
		})
	})

	t.Run("SetApplicationRole", func(t *testing.T) {
		ctx := t.Context()
		const database, role = "e2e_takeover", "e2e_owner"
		first, second := `e2e'owner"\:1`, "e2e-owner-2"
		pgExec(t, primary, `CREATE DATABASE `+database)
		target := primary
		target.Database = database
		// What clients connecting as the superuser made: a schema, tables (one with a
		// serial column, one with an identity column, a partitioned one and its partition),
		// a sequence, a view, a materialized view and a foreign table.
		pgExec(t, target, `CREATE SCHEMA inventory;
CREATE TABLE inventory.items (id serial PRIMARY KEY, name text);
CREATE TABLE inventory.tags (id int GENERATED ALWAYS AS IDENTITY, tag text);
CREATE TABLE inventory.events (at date NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE inventory.events_2026 PARTITION OF inventory.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE SEQUENCE public.tickets;
CREATE VIEW public.item_names AS SELECT name FROM inventory.items;
CREATE MATERIALIZED VIEW inventory.item_count AS SELECT count(*) FROM inventory.items;
CREATE EXTENSION postgres_fdw;
CREATE SERVER e2e_remote FOREIGN DATA WRAPPER postgres_fdw;
CREATE FOREIGN TABLE inventory.remote_items (id int) SERVER e2e_remote`)

		require.NoError(t, c.SetApplicationRole(ctx, target, role, first, true))
		require.Equal(t, "login", pgRoleAttributes(t, target, role))
		pgVerifier(t, target, role)
		owners := func() map[string]string {
			t.Helper()
			conn, err := pgDial(ctx, target)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			rows, err := conn.Query(ctx, `SELECT n.nspname || '.' || c.relname, pg_get_userbyid(c.relowner)
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname IN ('inventory', 'public') AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')`)
			require.NoError(t, err)
			out := map[string]string{}
			var name, owner string
			_, err = pgx.ForEachRow(rows, []any{&name, &owner}, func() error {
				out[name] = owner
				return nil
			})
			require.NoError(t, err)
			return out
		}
		byRole := map[string]string{}
		for _, rel := range []string{"inventory.items", "inventory.items_id_seq", "inventory.tags", "inventory.tags_id_seq",
			"inventory.events", "inventory.events_2026", "public.tickets", "public.item_names", "inventory.item_count",
			"inventory.remote_items"} {
			byRole[rel] = role
		}
		require.Equal(t, byRole, owners(), "every relation the superuser made, taken over")
		var schemaOwner, publicOwner, databaseOwner string
		var catalogOwned int
		var publicCreate bool
		pgRow(t, target, `SELECT
			(SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'inventory'),
			(SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'),
			(SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()),
			(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE pg_get_userbyid(c.relowner) = $1
				AND n.nspname IN ('pg_catalog', 'information_schema')),
			has_schema_privilege($1, 'public', 'CREATE')`, []any{role},
			&schemaOwner, &publicOwner, &databaseOwner, &catalogOwned, &publicCreate)
		require.Equal(t, role, schemaOwner)
		require.Equal(t, "pg_database_owner", publicOwner, "the public schema is left to the database's owner")
		require.Equal(t, role, databaseOwner)
		// (The TOAST tables in pg_toast follow their tables.)
		require.Zero(t, catalogOwned, "no system catalog relation given away")
		require.True(t, publicCreate)

		// The role uses them as their owner.
		asRole := target
		asRole.User, asRole.Password = role, first
		pgExec(t, asRole, `INSERT INTO inventory.items (name) VALUES ('bolt');
INSERT INTO inventory.tags (tag) VALUES ('metal');
INSERT INTO inventory.events VALUES ('2026-05-01');
SELECT count(*) FROM inventory.events_2026;
SELECT nextval('public.tickets');
SELECT * FROM public.item_names;
REFRESH MATERIALIZED VIEW inventory.item_count;
CREATE TABLE public.mine (id int);
CREATE SCHEMA own`)

		// A role that exists gets the new password; without takeOver what the superuser
		// made since stays its own, with it it is taken too.
		pgExec(t, target, `CREATE TABLE public.later (id int)`)
		require.NoError(t, c.SetApplicationRole(ctx, target, role, second, false))
		require.Equal(t, superuser.User, owners()["public.later"])
		_, err := pgLogin(ctx, target, role, second)
		require.NoError(t, err)
		_, err = pgLogin(ctx, target, role, first)
		requirePgRefused(t, err)
		require.NoError(t, c.SetApplicationRole(ctx, target, role, second, true))
		require.Equal(t, role, owners()["public.later"])
	})

	t.Run("SyncSlots", func(t *testing.T) {
		ctx := t.Context()
		standbySlot := postgresql.SlotName(standbyName)
		pgExec(t, primary, `SELECT pg_create_physical_replication_slot('e2e_stale')`)
		st, err := c.Observe(ctx, primary, nil)
		require.NoError(t, err)
		require.Equal(t, map[string]bool{standbySlot: true, "e2e_stale": false}, st.Slots)

		// The missing slot is made, the stale inactive one dropped; the one in use and the
		// one that does not exist are left alone.
		require.NoError(t, c.SyncSlots(ctx, primary, st.Slots, []string{standbySlot, "e2e_new"}, []string{"e2e_stale", standbySlot, "e2e_absent"}))
		slots := func() map[string]string {
			t.Helper()
			conn, err := pgDial(ctx, primary)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			rows, err := conn.Query(ctx, `SELECT slot_name, slot_type || ' ' || active::text || ' ' || (restart_lsn IS NOT NULL)::text FROM pg_replication_slots`)
			require.NoError(t, err)
			out := map[string]string{}
			var name, desc string
			_, err = pgx.ForEachRow(rows, []any{&name, &desc}, func() error {
				out[name] = desc
				return nil
			})
			require.NoError(t, err)
			return out
		}
		// "physical <active> <WAL reserved>": the new slot reserves WAL from its creation.
		require.Equal(t, map[string]string{standbySlot: "physical true true", "e2e_new": "physical false true"}, slots())

		// Called again with what it was given (the new slot missing from it): the slot
		// made since is no error.
		require.NoError(t, c.SyncSlots(ctx, primary, st.Slots, []string{"e2e_new"}, nil))
		st, err = c.Observe(ctx, primary, nil)
		require.NoError(t, err)
		require.NoError(t, c.SyncSlots(ctx, primary, st.Slots, nil, []string{"e2e_new"}))
		require.Equal(t, map[string]string{standbySlot: "physical true true"}, slots())
	})

	t.Run("WritePassfile", func(t *testing.T) {
		ctx := t.Context()
		// The path the standby's primary_conninfo names.
		var conninfo string
		pgRow(t, standby, `SELECT current_setting('primary_conninfo')`, nil, &conninfo)
		m := regexp.MustCompile(`(?:^|\s)passfile=(\S+)`).FindStringSubmatch(conninfo)
		require.NotNil(t, m, "primary_conninfo %q names no passfile", conninfo)
		path := m[1]
		readPassfile := func() string {
			t.Helper()
			var content string
			pgRow(t, standby, `SELECT pg_read_file($1)`, []any{path}, &content)
			return content
		}
		streaming := func() error {
			var state string
			err := func() error {
				conn, err := pgDial(ctx, primary)
				if err != nil {
					return err
				}
				defer conn.Close(context.Background())
				return conn.QueryRow(ctx, `SELECT state FROM pg_stat_replication WHERE application_name = $1`, standbyName).Scan(&state)
			}()
			if err != nil || state != "streaming" {
				return fmt.Errorf("%s is not streaming from the primary: %q %v", standbyName, state, err)
			}
			return nil
		}

		// A wrong password, with a colon and a backslash, which the file escapes: once the
		// standby's connection to the primary is ended, it cannot connect again.
		const wrong = `e2e:wrong\pass`
		require.NoError(t, c.WritePassfile(ctx, standby, path, replUser, wrong))
		require.Equal(t, "*:*:*:"+replUser+`:e2e\:wrong\\pass`+"\n", readPassfile())
		const refused = `password authentication failed for user "`
		before, err := engineLogCount(ctx, t, ns, standbyName, refused+replUser+`"`)
		require.NoError(t, err)
		var ended int
		pgRow(t, primary, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name = $1`, []any{standbyName}, &ended)
		require.Equal(t, 1, ended, "the standby's WAL sender ended")
		eventually(t, time.Minute, func() error {
			n, err := engineLogCount(ctx, t, ns, standbyName, refused+replUser+`"`)
			if err != nil {
				return err
			}
			if n <= before {
				return fmt.Errorf("%s logged no refused connection to the primary yet", standbyName)
			}
			return nil
		})
		var connected int
		pgRow(t, primary, `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1`, []any{standbyName}, &connected)
		require.Zero(t, connected, "the standby connected with the wrong password")

		// The right password: its next attempt connects, without a reload, and it streams
		// what the primary commits.
		require.NoError(t, c.WritePassfile(ctx, standby, path, replUser, replPassword))
		escape := strings.NewReplacer(`\`, `\\`, `:`, `\:`)
		require.Equal(t, "*:*:*:"+escape.Replace(replUser)+":"+escape.Replace(replPassword)+"\n", readPassfile())
		eventually(t, time.Minute, streaming)
		pgExec(t, primary, `INSERT INTO e2e_observe VALUES (2)`)
		eventually(t, time.Minute, func() error {
			var rows int
			conn, err := pgDial(ctx, standby)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM e2e_observe`).Scan(&rows); err != nil {
				return err
			}
			if rows != 2 {
				return fmt.Errorf("the standby has %d rows", rows)
			}
			return nil
		})
	})

	// The calls below stop and resume the standby's streaming and set the primary's
	// synchronous standbys behind the controller's back: the controller, which would set
	// both back at its next pass (and reload the configuration doing so), is stopped until
	// this part ends.
	require.NoError(t, cluster.StopComponent(localcluster.ControllerName))
	t.Cleanup(func() { require.NoError(t, cluster.StartController(context.Background())) })

	t.Run("StopFollowing", func(t *testing.T) {
		ctx := t.Context()
		receivers := func() int {
			t.Helper()
			var n int
			pgRow(t, standby, `SELECT count(*) FROM pg_stat_wal_receiver`, nil, &n)
			return n
		}
		senders := func() (int, error) {
			conn, err := pgDial(ctx, primary)
			if err != nil {
				return 0, err
			}
			defer conn.Close(context.Background())
			var n int
			err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1`, standbyName).Scan(&n)
			return n, err
		}
		// What the setup script wrote is what SyncReplica writes back.
		var conninfo string
		pgRow(t, standby, `SELECT current_setting('primary_conninfo')`, nil, &conninfo)
		d := engine.Desired{Recipe: postgresql.Engine{}.Recipe(), ClusterDomain: names.DefaultClusterDomain}
		want := postgresql.PrimaryConninfo(&examplev1.Database{ObjectMeta: metav1.ObjectMeta{Name: db, Namespace: ns}}, d, replUser, standbyName)
		require.Equal(t, want, conninfo)
		before, err := c.Observe(ctx, standby, nil)
		require.NoError(t, err)
		require.Equal(t, 1, receivers())

		// Stopped: no WAL receiver once it returns, the primary's WAL sender gone, and
		// Observe says so. (A running controller resumes it at a later pass: SyncReplica.)
		require.NoError(t, c.StopFollowing(ctx, standby))
		require.Zero(t, receivers())
		stopped, err := c.Observe(ctx, standby, nil)
		require.NoError(t, err)
		require.True(t, stopped.NotFollowing)
		eventually(t, time.Minute, func() error {
			n, err := senders()
			if err == nil && n != 0 {
				err = fmt.Errorf("the primary still has %d WAL senders to %s", n, standbyName)
			}
			return err
		})
		// Again, and on the primary: nothing to stop.
		require.NoError(t, c.StopFollowing(ctx, standby))
		require.NoError(t, c.StopFollowing(ctx, primary))
		var primaryConninfo string
		pgRow(t, primary, `SELECT current_setting('primary_conninfo')`, nil, &primaryConninfo)
		require.Empty(t, primaryConninfo, "the primary was never a standby")

		// Resumed with the setup script's conninfo: it streams what the primary commits.
		pgExec(t, primary, `INSERT INTO e2e_observe VALUES (4)`)
		require.NoError(t, c.Follow(ctx, standby, want))
		var after pgclient.State
		eventually(t, time.Minute, func() error {
			n, err := senders()
			if err != nil {
				return err
			}
			var rows int
			pgRow(t, standby, `SELECT count(*) FROM e2e_observe WHERE id = 4`, nil, &rows)
			if n != 1 || rows != 1 {
				return fmt.Errorf("%d WAL senders to %s, %d rows of the insert on it", n, standbyName, rows)
			}
			after, err = c.Observe(ctx, standby, nil)
			return err
		})
		require.False(t, after.NotFollowing)
		pgRow(t, standby, `SELECT current_setting('primary_conninfo')`, nil, &conninfo)
		require.Equal(t, want, conninfo)

		// Holds and Diverged on these States: the later holds the earlier, not the other
		// way round; one timeline, nothing diverged.
		var r pgclient.Replicator
		m := func(st pgclient.State) *engine.Member {
			return &engine.Member{Name: standbyName, Answered: true, State: &st}
		}
		require.Greater(t, max(after.ReceivedLSN, after.ReplayedLSN), max(before.ReceivedLSN, before.ReplayedLSN))
		require.True(t, r.Holds(m(after), m(before)))
		require.False(t, r.Holds(m(before), m(after)))
		require.True(t, r.Holds(m(stopped), m(before)))
		p, err := c.Observe(ctx, primary, nil)
		require.NoError(t, err)
		require.False(t, r.Diverged(&engine.Member{Name: db + "-0", Answered: true, Writable: true, State: &p}, m(after)))
	})

	t.Run("SetSynchronousStandbyNames", func(t *testing.T) {
		ctx := t.Context()
		value, err := pgclient.SynchronousStandbyNames(1, []string{standbyName})
		require.NoError(t, err)
		require.Equal(t, `ANY 1 ("`+standbyName+`")`, value)
		require.NoError(t, c.SetSynchronousStandbyNames(ctx, primary, value))
		eventually(t, time.Minute, func() error {
			st, err := c.Observe(ctx, primary, nil)
			if err != nil {
				return err
			}
			var syncState string
			pgRow(t, primary, `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1`, []any{standbyName}, &syncState)
			if st.SynchronousStandbyNames != value || syncState != "quorum" {
				return fmt.Errorf("synchronous_standby_names %q, %s's sync_state %q", st.SynchronousStandbyNames, standbyName, syncState)
			}
			return nil
		})
		var commit string
		pgRow(t, primary, `SELECT current_setting('synchronous_commit')`, nil, &commit)
		require.Equal(t, "on", commit)
		// A commit is acknowledged once the streaming standby has flushed it.
		commitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		conn, err := pgDial(commitCtx, primary)
		require.NoError(t, err)
		_, err = conn.Exec(commitCtx, `INSERT INTO e2e_observe VALUES (5)`)
		conn.Close(context.Background())
		require.NoError(t, err, "a commit with the standby streaming")

		// The same value again: nothing written, no reload.
		var loaded, reloaded time.Time
		pgRow(t, primary, `SELECT pg_conf_load_time()`, nil, &loaded)
		require.NoError(t, c.SetSynchronousStandbyNames(ctx, primary, value))
		pgRow(t, primary, `SELECT pg_conf_load_time()`, nil, &reloaded)
		require.Equal(t, loaded, reloaded)

		// A standby that is not there: a commit waits, and Observe says how many wait and for
		// how long.
		st, err := c.Observe(ctx, primary, nil)
		require.NoError(t, err)
		require.Zero(t, st.CommitsWaiting)
		require.NoError(t, c.SetSynchronousStandbyNames(ctx, primary, `ANY 1 ("e2e-absent")`))
		conn, err = pgDial(commitCtx, primary)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(commitCtx, `INSERT INTO e2e_observe VALUES (6)`)
			done <- err
		}()
		waitOneCommitWaiting(t, done, func() (int, time.Duration, error) {
			st, err := c.Observe(ctx, primary, nil)
			return st.CommitsWaiting, st.LongestCommitWait, err
		})

		// Back to none, for what follows: the waiting commit is acknowledged.
		require.NoError(t, c.SetSynchronousStandbyNames(ctx, primary, ""))
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("the commit did not return within a minute of synchronous_standby_names emptied")
		}
		eventually(t, time.Minute, func() error {
			st, err := c.Observe(ctx, primary, nil)
			if err == nil && st.SynchronousStandbyNames != "" {
				err = fmt.Errorf("synchronous_standby_names %q", st.SynchronousStandbyNames)
			}
			return err
		})
	})

	t.Run("Promote", func(t *testing.T) {
		ctx := t.Context()
		err := c.Promote(ctx, primary)
		require.Error(t, err, "a primary is not promoted")
		require.Contains(t, err.Error(), "recovery is not in progress")
		require.False(t, pgclient.IsAuthenticationFailure(err))

		require.NoError(t, c.Promote(ctx, standby))
		var inRecovery bool
		pgRow(t, standby, `SELECT pg_is_in_recovery()`, nil, &inRecovery)
		require.False(t, inRecovery)
		pgExec(t, standby, `INSERT INTO e2e_observe VALUES (3)`)
		var rows int
		pgRow(t, standby, `SELECT count(*) FROM e2e_observe`, nil, &rows)
		require.Equal(t, 6, rows, "the promoted standby takes a write")
		// Checkpointed, its control file names the timeline it writes, which pg_rewind reads.
		require.NoError(t, c.Checkpoint(ctx, standby))
		st, err := c.Observe(ctx, standby, nil)
		require.NoError(t, err)
		require.Equal(t, uint32(2), st.Timeline, "promoted once")
		require.Equal(t, st.Timeline, st.CheckpointTimeline)
	})
	// Two primaries now: the Database goes.
	kubectl(t, "delete", "database", db, "-n", ns, "--wait=false")
}

// myOpen is a database/sql handle on s's server as s's user on database ("" for none), over
// TLS when the server offers it, as the client under test connects.
func myOpen(t *testing.T, s myclient.Server, database string) *sql.DB {
	t.Helper()
	cfg := driver.NewConfig()
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port)))
	cfg.User, cfg.Passwd, cfg.DBName = s.User, s.Password, database
	cfg.TLSConfig = "preferred"
	cfg.Timeout = 10 * time.Second
	connector, err := driver.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(connector)
	t.Cleanup(func() { db.Close() })
	return db
}

// myLogin connects to s's server as user with password and returns CURRENT_USER().
func myLogin(ctx context.Context, t *testing.T, s myclient.Server, user, password string) (string, error) {
	s.User, s.Password = user, password
	db := myOpen(t, s, "")
	defer db.Close()
	var who string
	err := db.QueryRowContext(ctx, `SELECT CURRENT_USER()`).Scan(&who)
	return who, err
}

// requireMyRefused requires err to be the server refusing a password (ER_ACCESS_DENIED_ERROR).
func requireMyRefused(t *testing.T, err error) {
	t.Helper()
	var myErr *driver.MySQLError
	require.ErrorAs(t, err, &myErr)
	require.Equal(t, uint16(1045), myErr.Number, "%v", err)
}

// testMySQLClient calls myclient.Client's calls against the Database db's primary (db-0) and
// replica (db-1).
func testMySQLClient(t *testing.T, ns, db string) {
	secret := credentials(t, ns, db)
	port, err := strconv.Atoi(secret[names.SecretKeyPort])
	require.NoError(t, err)
	root := myclient.Server{Port: int32(port), User: secret[names.SecretKeySuperuserUsername], Password: secret[names.SecretKeySuperuserPassword]}
	require.Equal(t, myclient.RootUser, root.User)
	primary, replica := root, root
	primary.Host, replica.Host = podIP(t, ns, db+"-0"), podIP(t, ns, db+"-1")
	database := secret[names.SecretKeyDatabase]
	replUser, replPassword := secret[names.SecretKeyReplicationUsername], secret[names.SecretKeyReplicationPassword]
	d, err := getDatabase(t, ns, db)
	require.NoError(t, err)
	primaryHost := names.PodHost(d, names.DefaultClusterDomain, db+"-0")
	// replHost is the replication account's host part: the namespace's Service domain.
	replHost := "%." + names.NamespaceDomain(d, names.DefaultClusterDomain)
	onPrimary, onReplica := myOpen(t, primary, database), myOpen(t, replica, database)
	var c myclient.Client
	// gtidExecuted is the server's @@global.gtid_executed, as text and parsed.
	gtidExecuted := func(t *testing.T, on *sql.DB) (string, myclient.GTIDSet) {
		t.Helper()
		var s string
		require.NoError(t, on.QueryRowContext(t.Context(), `SELECT @@global.gtid_executed`).Scan(&s))
		set, err := myclient.ParseGTIDSet(s)
		require.NoError(t, err, s)
		return s, set
	}
	// gtidSubset is the server's GTID_SUBSET(a, b): every transaction of a is in b.
	gtidSubset := func(t *testing.T, a, b string) bool {
		t.Helper()
		var in bool
		require.NoError(t, onPrimary.QueryRowContext(t.Context(), `SELECT GTID_SUBSET(?, ?)`, a, b).Scan(&in))
		return in
	}
	// channel is the replica's default channel from performance_schema: its configuration
	// and the receiver's and applier's states and last error.
	type channel struct {
		host, user, ssl, receiving, applying, lastError string
		port, autoPosition, retryInterval               int
		retryCount, lastErrorNumber                     int64
	}
	readChannel := func(ctx context.Context) (channel, error) {
		var ch channel
		err := onReplica.QueryRowContext(ctx, `SELECT c.HOST, c.PORT, c.USER, c.AUTO_POSITION, c.SSL_ALLOWED,
			c.CONNECTION_RETRY_INTERVAL, c.CONNECTION_RETRY_COUNT, s.SERVICE_STATE, a.SERVICE_STATE, s.LAST_ERROR_NUMBER, s.LAST_ERROR_MESSAGE
			FROM performance_schema.replication_connection_configuration c
			JOIN performance_schema.replication_connection_status s ON s.CHANNEL_NAME = c.CHANNEL_NAME
			JOIN performance_schema.replication_applier_status a ON a.CHANNEL_NAME = c.CHANNEL_NAME
			WHERE c.CHANNEL_NAME = ''`).Scan(&ch.host, &ch.port, &ch.user, &ch.autoPosition, &ch.ssl,
			&ch.retryInterval, &ch.retryCount, &ch.receiving, &ch.applying, &ch.lastErrorNumber, &ch.lastError)
		return ch, err
	}
	// waitReplicaRows waits until the replica's e2e_observe has n rows.
	waitReplicaRows := func(t *testing.T, n int) {
		t.Helper()
		eventually(t, time.Minute, func() error {
			var rows int
			if err := onReplica.QueryRowContext(t.Context(), `SELECT count(*) FROM e2e_observe`).Scan(&rows); err != nil {
				return err
			}
			if rows != n {
				return fmt.Errorf("the replica has %d rows, not %d", rows, n)
			}
			return nil
		})
	}

	t.Run("Observe", func(t *testing.T) {
		ctx := t.Context()
		_, before := gtidExecuted(t, onPrimary)
		st, err := c.Observe(ctx, primary, replHost, []string{replUser, "e2e_absent"})
		require.NoError(t, err)
		_, after := gtidExecuted(t, onPrimary)
		require.False(t, st.ReadOnly)
		require.True(t, st.StartsReadOnly, "the controller persisted super_read_only: the primary takes writes until it stops, and starts read-only")
		require.Nil(t, st.Source, "a primary has no replication channel")
		require.Equal(t, []string{replUser}, st.Users)
		require.True(t, st.Executed.Contains(before) && after.Contains(st.Executed), "gtid_executed %v, between %v and %v", st.Executed, before, after)
		require.NotZero(t, st.Executed.Count())

		// Two transactions on the primary: its set grows by two, and the replica's, once it
		// has applied them, holds the primary's.
		beforeText, beforeSet := gtidExecuted(t, onPrimary)
		for _, stmt := range []string{`CREATE TABLE e2e_observe (id int PRIMARY KEY)`, `INSERT INTO e2e_observe VALUES (1)`} {
			_, err := onPrimary.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
		writtenText, written := gtidExecuted(t, onPrimary)
		require.Equal(t, beforeSet.Count()+2, written.Count(), "%s → %s", beforeText, writtenText)
		require.True(t, gtidSubset(t, beforeText, writtenText))
		require.True(t, written.Contains(beforeSet))
		require.False(t, gtidSubset(t, writtenText, beforeText))
		require.False(t, beforeSet.Contains(written))

		eventually(t, time.Minute, func() error {
			if st, err = c.Observe(ctx, replica, replHost, []string{replUser}); err != nil {
				return err
			}
			if !st.Executed.Contains(written) {
				return fmt.Errorf("the replica has applied %v, not every one of %v", st.Executed, written)
			}
			return nil
		})
		require.True(t, st.ReadOnly)
		require.True(t, st.StartsReadOnly, "persisted on a server already super_read_only")
		require.Equal(t, []string{replUser}, st.Users, "the account replicated")
		require.NotNil(t, st.Source)
		require.Equal(t, primaryHost, st.Source.Host)
		require.Equal(t, int32(port), st.Source.Port)
		require.Equal(t, replUser, st.Source.User)
		require.True(t, st.Source.Streaming(), "%+v", st.Source)
		require.Empty(t, st.Source.LastError)
		require.NotNil(t, st.Source.LagSeconds, "a replica that receives and applies has a lag")
		ch, err := readChannel(ctx)
		require.NoError(t, err)
		require.Equal(t, "ON ON", ch.receiving+" "+ch.applying)
		waitReplicaRows(t, 1)
	})

	t.Run("IsAuthenticationFailure", func(t *testing.T) {
		ctx := t.Context()
		wrong := primary
		wrong.Password += "-wrong"
		_, err := c.Observe(ctx, wrong, replHost, nil)
		require.Error(t, err)
		requireMyRefused(t, err)
		require.True(t, myclient.IsAuthenticationFailure(err), "%v", err)

		closed := primary
		closed.Port = 1
		_, err = c.Observe(ctx, closed, replHost, nil)
		require.Error(t, err)
		require.False(t, myclient.IsAuthenticationFailure(err), "a refused TCP connection: %v", err)

		_, err = onPrimary.ExecContext(ctx, `SELECT * FROM e2e_absent`)
		require.Error(t, err)
		require.False(t, myclient.IsAuthenticationFailure(err), "an unknown table: %v", err)
		require.False(t, myclient.IsAuthenticationFailure(nil))
	})

	t.Run("SetReplicationUser", func(t *testing.T) {
		ctx := t.Context()
		const user = "e2e_replicator"
		first, second := `e2e'first"\:1`, "e2e-second-2"
		// An account of any host first, which this test, on the node's address, logs in to.
		require.NoError(t, c.SetReplicationUser(ctx, primary, user, "%", first))
		// mysql.user's REPLICATION SLAVE column, the dynamic BACKUP_ADMIN in
		// mysql.global_grants, and no static privilege besides, of user's one account.
		privileges := func(on *sql.DB, host string) string {
			t.Helper()
			var hosts, repl, sel, super, backup string
			require.NoError(t, on.QueryRowContext(ctx, `SELECT (SELECT GROUP_CONCAT(Host) FROM mysql.user WHERE User = u.User),
				Repl_slave_priv, Select_priv, Super_priv,
				(SELECT GROUP_CONCAT(PRIV ORDER BY PRIV) FROM mysql.global_grants WHERE USER = u.User AND HOST = u.Host)
				FROM mysql.user u WHERE User = ? AND Host = ?`, user, host).Scan(&hosts, &repl, &sel, &super, &backup))
			return strings.Join([]string{hosts, repl, sel, super, backup}, " ")
		}
		require.Equal(t, "% Y N N BACKUP_ADMIN", privileges(onPrimary, "%"))
		who, err := myLogin(ctx, t, primary, user, first)
		require.NoError(t, err)
		require.Equal(t, user+"@%", who)

		// An account that exists gets the new password, on the replica too (the binary log).
		require.NoError(t, c.SetReplicationUser(ctx, primary, user, "%", second))
		require.Equal(t, "% Y N N BACKUP_ADMIN", privileges(onPrimary, "%"))
		_, err = myLogin(ctx, t, primary, user, second)
		require.NoError(t, err)
		_, err = myLogin(ctx, t, primary, user, first)
		requireMyRefused(t, err)
		eventually(t, time.Minute, func() error {
			_, err := myLogin(ctx, t, replica, user, second)
			return err
		})
		require.Equal(t, "% Y N N BACKUP_ADMIN", privileges(onReplica, "%"))

		// Another host: the account of that host is made and the other dropped, on the
		// replica too, and the node's address, no name of the namespace, is refused.
		require.NoError(t, c.SetReplicationUser(ctx, primary, user, replHost, second))
		require.Equal(t, replHost+" Y N N BACKUP_ADMIN", privileges(onPrimary, replHost))
		_, err = myLogin(ctx, t, primary, user, second)
		requireMyRefused(t, err)
		eventually(t, time.Minute, func() error {
			var hosts string
			if err := onReplica.QueryRowContext(ctx, `SELECT GROUP_CONCAT(Host) FROM mysql.user WHERE User = ?`, user).Scan(&hosts); err != nil {
				return err
			}
			if hosts != replHost {
				return fmt.Errorf("the replica has %s@%s", user, hosts)
			}
			return nil
		})
	})

	t.Run("SetSuperuserHosts", func(t *testing.T) {
		ctx := t.Context()
		// The address this test connects from, as the server sees it.
		var from string
		require.NoError(t, onPrimary.QueryRowContext(ctx, `SELECT SUBSTRING_INDEX(USER(), '@', -1)`).Scan(&from))
		rootHosts := func() string {
			t.Helper()
			var hosts string
			require.NoError(t, onPrimary.QueryRowContext(ctx, `SELECT GROUP_CONCAT(Host ORDER BY Host) FROM mysql.user WHERE User = ?`, myclient.RootUser).Scan(&hosts))
			return hosts
		}
		// Hosts the connection does not come from: refused, and root keeps the account it
		// logs in through.
		const elsewhere = "192.0.2.1"
		err := c.SetSuperuserHosts(ctx, primary, []string{elsewhere})
		require.ErrorContains(t, err, "authenticates as root@"+from)
		require.Contains(t, rootHosts(), from)
		who, err := myLogin(ctx, t, primary, myclient.RootUser, primary.Password)
		require.NoError(t, err)
		require.Equal(t, myclient.RootUser+"@"+from, who)
		// Its own address: root's accounts are that one and localhost's.
		require.NoError(t, c.SetSuperuserHosts(ctx, primary, []string{from}))
		require.Equal(t, strings.Join(slices.Sorted(slices.Values([]string{from, "localhost"})), ","), rootHosts())
	})

	t.Run("SetSource", func(t *testing.T) {
		ctx := t.Context()
		// Settings the controller does not look at, changed behind it.
		for _, stmt := range []string{`STOP REPLICA`, `CHANGE REPLICATION SOURCE TO SOURCE_CONNECT_RETRY = 61, SOURCE_RETRY_COUNT = 7`, `START REPLICA`} {
			_, err := onReplica.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
		ch, err := readChannel(ctx)
		require.NoError(t, err)
		require.Equal(t, 61, ch.retryInterval)
		require.Equal(t, int64(7), ch.retryCount)

		// A wrong password: the receiver is refused by the primary, and Observe says so.
		require.NoError(t, c.SetSource(ctx, replica, primaryHost, int32(port), replUser, "e2e-wrong"))
		eventually(t, time.Minute, func() error {
			ch, err := readChannel(ctx)
			if err != nil {
				return err
			}
			if !strings.Contains(ch.lastError, "Access denied") {
				return fmt.Errorf("the receiver is %s, last error %d %q", ch.receiving, ch.lastErrorNumber, ch.lastError)
			}
			return nil
		})
		st, err := c.Observe(ctx, replica, replHost, nil)
		require.NoError(t, err)
		require.False(t, st.Source.Streaming(), "%+v", st.Source)
		require.Contains(t, st.Source.LastError, "Access denied")
		t.Logf("measured: a receiver with a wrong password: %s, %q", st.Source.Receiving, st.Source.LastError)

		// The right one: the channel as SetSource sets it, receiving and applying a new
		// row of the primary.
		require.NoError(t, c.SetSource(ctx, replica, primaryHost, int32(port), replUser, replPassword))
		eventually(t, time.Minute, func() error {
			ch, err := readChannel(ctx)
			if err != nil {
				return err
			}
			if ch.receiving != "ON" || ch.applying != "ON" {
				return fmt.Errorf("the receiver is %s, the applier %s: %q", ch.receiving, ch.applying, ch.lastError)
			}
			return nil
		})
		ch, err = readChannel(ctx)
		require.NoError(t, err)
		require.Equal(t, channel{host: primaryHost, port: port, user: replUser, autoPosition: 1, ssl: "YES",
			retryInterval: 5, retryCount: 86400, receiving: "ON", applying: "ON"},
			channel{host: ch.host, port: ch.port, user: ch.user, autoPosition: ch.autoPosition, ssl: ch.ssl,
				retryInterval: ch.retryInterval, retryCount: ch.retryCount, receiving: ch.receiving, applying: ch.applying})
		_, err = onPrimary.ExecContext(ctx, `INSERT INTO e2e_observe VALUES (2)`)
		require.NoError(t, err)
		waitReplicaRows(t, 2)
	})

	// The calls below stop, start and fence the replica behind the controller's back: the
	// controller, which would start a stopped receiver again at its next pass, is stopped
	// until this part ends.
	require.NoError(t, cluster.StopComponent(localcluster.ControllerName))
	t.Cleanup(func() { require.NoError(t, cluster.StartController(context.Background())) })
	r := myclient.NewReplicator(c)
	// globalStatus is the server's status variable name.
	globalStatus := func(t *testing.T, on *sql.DB, name string) string {
		t.Helper()
		var v string
		require.NoError(t, on.QueryRowContext(t.Context(), `SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = ?`, name).Scan(&v), name)
		return v
	}
	// counter is the server's status variable name, a count.
	counter := func(t *testing.T, on *sql.DB, name string) int64 {
		t.Helper()
		n, err := strconv.ParseInt(globalStatus(t, on, name), 10, 64)
		require.NoError(t, err, name)
		return n
	}
	// observe is the Member of the Pod name whose server is s, as a pass sees it.
	observe := func(t *testing.T, s myclient.Server, name string) *engine.Member {
		t.Helper()
		st, err := c.Observe(t.Context(), s, replHost, nil)
		require.NoError(t, err)
		return &engine.Member{Name: name, Answered: true, Writable: !st.ReadOnly, State: &st}
	}
	// persisted is the server's persisted rpl_semi_sync_source_* settings (mysqld-auto.cnf).
	persisted := func(t *testing.T, on *sql.DB) map[string]string {
		t.Helper()
		rows, err := on.QueryContext(t.Context(), `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.persisted_variables
			WHERE VARIABLE_NAME LIKE 'rpl\_semi\_sync\_source\_%'`)
		require.NoError(t, err)
		defer rows.Close()
		vars := map[string]string{}
		for rows.Next() {
			var name, value string
			require.NoError(t, rows.Scan(&name, &value))
			vars[name] = value
		}
		require.NoError(t, rows.Err())
		return vars
	}
	insert := func(t *testing.T, on *sql.DB, id int) {
		t.Helper()
		_, err := on.ExecContext(t.Context(), `INSERT INTO e2e_observe VALUES (?)`, id)
		require.NoError(t, err, "insert %d", id)
	}
	maxTimeout := strconv.FormatUint(myclient.SemiSyncTimeoutMillis, 10)

	t.Run("SetSemiSync", func(t *testing.T) {
		ctx := t.Context()
		// The setup's settings: both plugins loaded, the replica side enabled, the source
		// side not (the plugin's defaults).
		st, err := c.Observe(ctx, primary, replHost, nil)
		require.NoError(t, err)
		require.Equal(t, &myclient.SemiSync{WaitForReplicaCount: 1, WaitPoint: "AFTER_SYNC", TimeoutMillis: 10000, WaitNoReplica: true}, st.SemiSync)
		var uuid string
		require.NoError(t, onPrimary.QueryRowContext(ctx, `SELECT @@global.server_uuid`).Scan(&uuid))
		require.Equal(t, strings.ToLower(uuid), st.UUID)
		eventually(t, time.Minute, func() error {
			if v := globalStatus(t, onReplica, "Rpl_semi_sync_replica_status"); v != "ON" {
				return fmt.Errorf("the replica's Rpl_semi_sync_replica_status is %s", v)
			}
			if n := counter(t, onPrimary, "Rpl_semi_sync_source_clients"); n != 1 {
				return fmt.Errorf("the primary has %d semi-synchronous replicas", n)
			}
			return nil
		})

		set, err := c.SetSemiSync(ctx, primary, 1)
		require.NoError(t, err)
		require.Equal(t, []myclient.Setting{{Variable: "rpl_semi_sync_source_timeout", Value: maxTimeout}, {Variable: "rpl_semi_sync_source_enabled", Value: "ON"}}, set,
			"what differs from the plugin's defaults")
		set, err = c.SetSemiSync(ctx, primary, 1)
		require.NoError(t, err)
		require.Empty(t, set, "nothing differs")
		st, err = c.Observe(ctx, primary, replHost, nil)
		require.NoError(t, err)
		require.Equal(t, &myclient.SemiSync{Enabled: true, WaitForReplicaCount: 1, WaitPoint: "AFTER_SYNC", TimeoutMillis: myclient.SemiSyncTimeoutMillis, WaitNoReplica: true}, st.SemiSync)
		require.Equal(t, map[string]string{"rpl_semi_sync_source_timeout": maxTimeout, "rpl_semi_sync_source_enabled": "ON"}, persisted(t, onPrimary))

		// A commit returns once the replica has acknowledged it.
		yes := counter(t, onPrimary, "Rpl_semi_sync_source_yes_tx")
		insert(t, onPrimary, 10)
		require.Greater(t, counter(t, onPrimary, "Rpl_semi_sync_source_yes_tx"), yes)
		require.Equal(t, "ON", globalStatus(t, onPrimary, "Rpl_semi_sync_source_status"), "semi-synchronous, not fallen back")
		waitReplicaRows(t, 3)
	})

	t.Run("StopFollowing", func(t *testing.T) {
		ctx := t.Context()
		require.NoError(t, c.StopFollowing(ctx, replica))
		require.NoError(t, c.StopFollowing(ctx, replica), "a stopped receiver")
		ch, err := readChannel(ctx)
		require.NoError(t, err)
		require.Equal(t, "OFF ON", ch.receiving+" "+ch.applying, "the applier goes on")
		st, err := c.Observe(ctx, replica, replHost, nil)
		require.NoError(t, err)
		require.Equal(t, "OFF", st.Source.Receiving)
		require.False(t, st.Source.Streaming())

		// A commit on the primary waits: its only replica acknowledges nothing.
		done := make(chan error, 1)
		go func() {
			_, err := onPrimary.ExecContext(ctx, `INSERT INTO e2e_observe VALUES (11)`)
			done <- err
		}()
		eventually(t, time.Minute, func() error {
			if n := counter(t, onPrimary, "Rpl_semi_sync_source_wait_sessions"); n != 1 {
				return fmt.Errorf("%d sessions wait for an acknowledgement", n)
			}
			return nil
		})
		// Observe says how many wait and for how long, in the server's whole seconds.
		waitOneCommitWaiting(t, done, func() (int, time.Duration, error) {
			st, err := c.Observe(ctx, primary, replHost, nil)
			return st.CommitsWaiting, st.LongestCommitWait, err
		})

		// The receiver started again, as SyncReplica does to a stopped one that reads the
		// primary: the replica receives the commit and acknowledges it.
		yes := counter(t, onPrimary, "Rpl_semi_sync_source_yes_tx")
		require.NoError(t, c.StartReplica(ctx, replica))
		require.NoError(t, c.StartReplica(ctx, replica), "a running receiver")
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("the commit did not return within a minute of the replica following again")
		}
		require.Greater(t, counter(t, onPrimary, "Rpl_semi_sync_source_yes_tx"), yes)
		waitReplicaRows(t, 4)
		ch, err = readChannel(ctx)
		require.NoError(t, err)
		require.Equal(t, "ON ON", ch.receiving+" "+ch.applying)
	})

	t.Run("SetSemiSync off", func(t *testing.T) {
		ctx := t.Context()
		set, err := c.SetSemiSync(ctx, primary, 0)
		require.NoError(t, err)
		require.Equal(t, []myclient.Setting{{Variable: "rpl_semi_sync_source_enabled", Value: "OFF"}}, set)
		set, err = c.SetSemiSync(ctx, primary, 0)
		require.NoError(t, err)
		require.Empty(t, set)
		st, err := c.Observe(ctx, primary, replHost, nil)
		require.NoError(t, err)
		require.False(t, st.SemiSync.Enabled)
		require.Equal(t, map[string]string{"rpl_semi_sync_source_timeout": maxTimeout, "rpl_semi_sync_source_enabled": "OFF"}, persisted(t, onPrimary))
		// Not waiting: the replica's receiver stopped, a commit returns.
		require.NoError(t, c.StopFollowing(ctx, replica))
		no := counter(t, onPrimary, "Rpl_semi_sync_source_no_tx")
		insert(t, onPrimary, 12)
		require.Equal(t, "OFF", globalStatus(t, onPrimary, "Rpl_semi_sync_source_status"))
		require.Equal(t, no, counter(t, onPrimary, "Rpl_semi_sync_source_no_tx"), "disabled, not fallen back")
		require.NoError(t, c.StartReplica(ctx, replica))
		waitReplicaRows(t, 5)
	})

	t.Run("Promote starts the applier and waits for it", func(t *testing.T) {
		ctx := t.Context()
		// The replica receives a transaction its stopped applier does not apply, as a server
		// started with skip-replica-start has it.
		_, err := onReplica.ExecContext(ctx, `STOP REPLICA SQL_THREAD`)
		require.NoError(t, err)
		_, before := gtidExecuted(t, onPrimary)
		insert(t, onPrimary, 13)
		_, written := gtidExecuted(t, onPrimary)
		// The relay log's set starts where the channel was last set (SetSource).
		inserted := written.Subtract(before)
		require.Equal(t, uint64(1), inserted.Count(), "%v", inserted)
		var rm *engine.Member
		eventually(t, time.Minute, func() error {
			rm = observe(t, replica, db+"-1")
			if received := rm.State.(*myclient.State).Source.Received; !received.Contains(inserted) {
				return fmt.Errorf("the replica has received %v, not %v", received, inserted)
			}
			return nil
		})
		pm := observe(t, primary, db+"-0")
		require.False(t, rm.State.(*myclient.State).Executed.Contains(inserted))
		require.True(t, r.Holds(rm, pm), "received counts")
		require.False(t, r.CaughtUp(rm, pm), "not applied")

		// A session holding the table's read lock keeps the applier Promote starts from
		// applying the insert (it waits for the table's metadata lock).
		lock, err := onReplica.Conn(ctx)
		require.NoError(t, err)
		defer lock.Close()
		_, err = lock.ExecContext(ctx, `LOCK TABLES e2e_observe READ`)
		require.NoError(t, err)
		err = c.Promote(ctx, replica)
		require.ErrorContains(t, err, "did not apply every transaction it received within "+myclient.ApplyWait.String())
		st, err := c.Observe(ctx, replica, replHost, nil)
		require.NoError(t, err)
		require.True(t, st.ReadOnly, "not promoted")
		require.NotNil(t, st.Source, "its channel kept")
		require.Equal(t, "OFF ON", st.Source.Receiving+" "+st.Source.Applying, "the receiver stopped, the applier started")
		_, err = lock.ExecContext(ctx, `UNLOCK TABLES`)
		require.NoError(t, err)

		require.NoError(t, c.StartReplica(ctx, replica))
		waitReplicaRows(t, 6)
	})

	t.Run("Holds and Diverged", func(t *testing.T) {
		ctx := t.Context()
		var pm, rm *engine.Member
		eventually(t, time.Minute, func() error {
			pm, rm = observe(t, primary, db+"-0"), observe(t, replica, db+"-1")
			if !r.Holds(rm, pm) {
				return fmt.Errorf("the replica holds %v, not every one of %v", rm.State.(*myclient.State).Executed, pm.State.(*myclient.State).Executed)
			}
			return nil
		})
		require.True(t, r.Holds(pm, rm))
		require.False(t, r.Diverged(pm, rm))

		// Behind: its receiver stopped, a commit on the primary.
		require.NoError(t, c.StopFollowing(ctx, replica))
		insert(t, onPrimary, 14)
		pm, rm = observe(t, primary, db+"-0"), observe(t, replica, db+"-1")
		require.False(t, r.Holds(rm, pm))
		require.True(t, r.Holds(pm, rm))
		require.False(t, r.Diverged(pm, rm), "behind, not diverged")

		// Errant: a transaction of its own, written with super_read_only off for it. Left
		// in place: the promotion below ends this part.
		conn, err := onReplica.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		for _, stmt := range []string{`SET GLOBAL super_read_only = OFF`, `INSERT INTO e2e_observe VALUES (1000)`, `SET GLOBAL super_read_only = ON`} {
			_, err := conn.ExecContext(ctx, stmt)
			require.NoError(t, err, stmt)
		}
		rm = observe(t, replica, db+"-1")
		rs, ps := rm.State.(*myclient.State), pm.State.(*myclient.State)
		require.True(t, r.Diverged(pm, rm), "%v against %v", rs.Executed, ps.Executed)
		require.False(t, r.Holds(pm, rm))
		extra := rs.Executed.Subtract(ps.Executed)
		require.Equal(t, uint64(1), extra.Count(), "the errant transaction: %v", extra)
		require.True(t, strings.HasPrefix(extra.String(), rs.UUID+":"), "%v is the replica's own, %s", extra, rs.UUID)
		require.False(t, gtidSubset(t, rs.Executed.String(), ps.Executed.String()), "the server agrees")
	})

	t.Run("Promote", func(t *testing.T) {
		ctx := t.Context()
		require.NoError(t, c.Promote(ctx, replica))
		var readOnly, superReadOnly, channels int
		require.NoError(t, onReplica.QueryRowContext(ctx, `SELECT @@global.read_only, @@global.super_read_only,
			(SELECT count(*) FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = '')`).Scan(&readOnly, &superReadOnly, &channels))
		require.Equal(t, [3]int{0, 0, 0}, [3]int{readOnly, superReadOnly, channels}, "read_only, super_read_only, channels")
		st, err := c.Observe(ctx, replica, replHost, nil)
		require.NoError(t, err)
		require.False(t, st.ReadOnly)
		require.True(t, st.StartsReadOnly, "a promotion lasts until the server stops: it starts read-only again")
		require.Nil(t, st.Source)
		// The application user, without SUPER, writes.
		app := replica
		app.User, app.Password = secret[names.SecretKeyUsername], secret[names.SecretKeyPassword]
		_, err = myOpen(t, app, database).ExecContext(ctx, `INSERT INTO e2e_observe VALUES (3)`)
		require.NoError(t, err, "the promoted replica takes the application user's write")
	})
	// Two writable servers now: the Database goes.
	kubectl(t, "delete", "database", db, "-n", ns, "--wait=false")
}
