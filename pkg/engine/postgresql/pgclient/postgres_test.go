package pgclient

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/require"
)

func TestQuoteLiteralDoublesQuotesOnly(t *testing.T) {
	for in, want := range map[string]string{
		"":              "''",
		"plain":         "'plain'",
		"it's":          "'it''s'",
		"''":            "''''''",
		`back\slash`:    `'back\slash'`, // standard_conforming_strings: a backslash is literal
		"x'; DROP ROLE": "'x''; DROP ROLE'",
	} {
		require.Equal(t, want, quoteLiteral(in), in)
	}
}

// SyncSlots connects only when a slot of want is missing or an inactive slot of drop exists:
// a primary whose slots are in place costs no connection each pass.
func TestSyncSlotsConnectsOnlyWhenThereIsWork(t *testing.T) {
	// Nothing listens on port 1: a connection attempt fails at once.
	s := Server{Host: "127.0.0.1", Port: 1, User: "postgres", Database: "postgres"}
	have := map[string]bool{"db_1": true, "db_2": false, "db_3": true}
	require.NoError(t, Client{}.SyncSlots(t.Context(), s, have, []string{"db_1", "db_2"}, []string{"db_3", "db_4"}),
		"all wanted slots exist; db_3 is in use and db_4 does not exist")

	for _, tc := range []struct {
		name       string
		want, drop []string
	}{
		{"a missing slot", []string{"db_1", "db_5"}, nil},
		{"an inactive slot to drop", nil, []string{"db_2"}},
	} {
		err := Client{}.SyncSlots(t.Context(), s, have, tc.want, tc.drop)
		require.ErrorContains(t, err, "connect to 127.0.0.1:1", tc.name)
	}
}

// The password file's line matches every host, port and database, with \ and : escaped
// (https://www.postgresql.org/docs/current/libpq-pgpass.html); a line break, or COPY's CSV
// delimiter or quote, is refused rather than written wrong.
func TestPassfileLineEscapesBackslashAndColon(t *testing.T) {
	line, err := passfileLine("replicator", `a\b:c'd "e`)
	require.NoError(t, err)
	require.Equal(t, `*:*:*:replicator:a\\b\:c'd "e`, line)
	for _, bad := range []string{"a\nb", "a\rb", "a\x1eb", "a\x1fb"} {
		_, err := passfileLine("replicator", bad)
		require.Error(t, err, "%q", bad)
		_, err = passfileLine(bad, "password")
		require.Error(t, err, "%q", bad)
	}
}

// TestConnectionSettingsOverrideTheDatabaseOwners pins the settings the controller's session
// starts with, which a database owner's ALTER DATABASE ... SET cannot override: pg_catalog
// first on the search path, standard-conforming strings, writable transactions.
func TestConnectionSettingsOverrideTheDatabaseOwners(t *testing.T) {
	cfg, err := connConfig(Server{Host: "10.0.0.1", Port: 5432, User: "postgres", Password: "p", Database: "app"})
	require.NoError(t, err)
	require.Equal(t, "pg_catalog, pg_temp", cfg.RuntimeParams["search_path"])
	require.Equal(t, "on", cfg.RuntimeParams["standard_conforming_strings"])
	require.Equal(t, "off", cfg.RuntimeParams["default_transaction_read_only"])
	require.Equal(t, "database-controller", cfg.RuntimeParams["application_name"])
	require.Equal(t, "app", cfg.Database)
}

// A server that asks for the password in clear text (AuthenticationCleartextPassword) or as
// MD5 gets no password message: the controller authenticates by SCRAM-SHA-256 only, the
// method of the servers' pg_hba.conf, so whoever answers at a Pod's address (a Service of
// another namespace whose externalIPs hold it) learns nothing from the superuser's login.
func TestConnectRefusesToSendThePasswordButBySCRAM(t *testing.T) {
	for _, auth := range []struct {
		name, method string
		msg          pgproto3.BackendMessage
	}{
		{"cleartext", "password", &pgproto3.AuthenticationCleartextPassword{}},
		{"md5", "md5", &pgproto3.AuthenticationMD5Password{Salt: [4]byte{1, 2, 3, 4}}},
	} {
		t.Run(auth.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer l.Close()
			got := make(chan pgproto3.FrontendMessage, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				backend := pgproto3.NewBackend(c, c)
				if _, err := backend.ReceiveStartupMessage(); err != nil {
					return
				}
				backend.Send(auth.msg)
				if err := backend.Flush(); err != nil {
					return
				}
				backend.SetAuthType(pgproto3.AuthTypeCleartextPassword)
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				if m, err := backend.Receive(); err == nil {
					got <- m
				}
				close(got)
			}()
			port := l.Addr().(*net.TCPAddr).Port
			_, err = connect(t.Context(), Server{Host: "127.0.0.1", Port: int32(port), User: "postgres", Password: "the-superuser-password", Database: "postgres"})
			require.ErrorContains(t, err, "server requested "+auth.method+" authentication")
			m, ok := <-got
			require.False(t, ok, "the client answered %T %+v", m, m)
		})
	}
}
