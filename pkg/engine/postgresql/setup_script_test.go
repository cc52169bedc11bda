package postgresql_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readPrimary is the setup script's read of the primary's name: the ConfigMap's key "primary"
// mounted at /etc/database.
const readPrimary = "primary=$(</etc/database/primary)"

// fakeBasebackup records its arguments and PGPASSWORD, one per line, in $BASEBACKUP_LOG and
// makes the --pgdata directory a data directory (PG_VERSION).
const fakeBasebackup = `#!/bin/bash
set -o errexit -o nounset
printf '%s\n' "PGPASSWORD=${PGPASSWORD}" "$@" >"${BASEBACKUP_LOG}"
for a in "$@"; do
	case ${a} in --pgdata=*) dir=${a#--pgdata=} ;; esac
done
mkdir -p "${dir}"
echo 16 >"${dir}/PG_VERSION"
echo 'restore_command = '"'"'true'"'"'' >"${dir}/postgresql.auto.conf"
`

// setupRun is one run of the setup script in a temporary directory: PGDATA is dir/data/pgdata,
// the primary's name is read from dir/primary instead of /etc/database/primary, and pg_basebackup is
// fakeBasebackup.
type setupRun struct {
	t                 *testing.T
	dir, pgdata, log  string
	hostname, primary string
	// password is the replication password's file content, "s3cret" unless set.
	password string
}

// passfile is the setup's REPLICATION_PASSFILE: beside PGDATA, on the data volume.
func (r *setupRun) passfile() string { return filepath.Join(r.dir, "data", "replication.pgpass") }

// requirePassfile requires the password file to hold line, mode 0600.
func (r *setupRun) requirePassfile(line string) {
	r.t.Helper()
	fi, err := os.Stat(r.passfile())
	require.NoError(r.t, err)
	require.Equal(r.t, os.FileMode(0o600), fi.Mode().Perm(), "libpq ignores a password file its group or others may read")
	b, err := os.ReadFile(r.passfile())
	require.NoError(r.t, err)
	require.Equal(r.t, line+"\n", string(b))
}

func newSetupRun(t *testing.T, hostname, primary string) *setupRun {
	dir := t.TempDir()
	r := &setupRun{t: t, dir: dir, pgdata: filepath.Join(dir, "data", "pgdata"), log: filepath.Join(dir, "basebackup.log"),
		hostname: hostname, primary: primary, password: "s3cret"}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", "pg_basebackup"), []byte(fakeBasebackup), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Dir(r.pgdata), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "primary"), []byte(primary), 0o644))
	return r
}

// run runs the script and returns its output; it fails the test when the script fails.
func (r *setupRun) run() string {
	r.t.Helper()
	out, err := r.start()
	require.NoError(r.t, err, "%s", out)
	return out
}

// start runs the script and returns its output and how it ended.
func (r *setupRun) start() (string, error) {
	r.t.Helper()
	script, err := os.ReadFile("scripts/postgresql-setup.sh")
	require.NoError(r.t, err)
	require.Equal(r.t, 1, strings.Count(string(script), readPrimary), "the script reads the primary once")
	path := filepath.Join(r.dir, "postgresql-setup.sh")
	script = []byte(strings.Replace(string(script), readPrimary, "primary=$(<"+filepath.Join(r.dir, "primary")+")", 1))
	require.NoError(r.t, os.WriteFile(path, script, 0o644))
	passwordFile := filepath.Join(r.dir, "replication-password")
	require.NoError(r.t, os.WriteFile(passwordFile, []byte(r.password), 0o400))
	cmd := exec.Command("bash", path)
	cmd.Env = []string{
		"PATH=" + filepath.Join(r.dir, "bin") + ":" + os.Getenv("PATH"),
		"PGDATA=" + r.pgdata,
		"PGPORT=5432",
		"PRIMARY_HOST=my-database.production.svc.cluster.local",
		"PRIMARY_CONNECT_TIMEOUT=5",
		"REPLICATION_USER=replicator",
		"REPLICATION_PASSWORD_FILE=" + passwordFile,
		"REPLICATION_PASSFILE=" + r.passfile(),
		"HOSTNAME=" + r.hostname,
		"BASEBACKUP_LOG=" + r.log,
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *setupRun) exists(name string) bool {
	_, err := os.Stat(filepath.Join(r.pgdata, name))
	return err == nil
}

func (r *setupRun) read(name string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.pgdata, name))
	require.NoError(r.t, err)
	return string(b)
}

func (r *setupRun) write(name, content string) {
	r.t.Helper()
	require.NoError(r.t, os.MkdirAll(r.pgdata, 0o700))
	require.NoError(r.t, os.WriteFile(filepath.Join(r.pgdata, name), []byte(content), 0o600))
}

func (r *setupRun) cloned() bool {
	_, err := os.Stat(r.log)
	return err == nil
}

// standbyConf is a standby's postgresql.auto.conf lines for a run in dir: the password is in
// the password file, not in primary_conninfo.
func standbyConf(r *setupRun) string {
	return `primary_conninfo = 'host=my-database.production.svc.cluster.local port=5432 user=replicator passfile=` + r.passfile() + ` application_name=my-database-1 connect_timeout=5'
primary_slot_name = 'my_database_1'
`
}

func TestSetupScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("the setup script runs on bash: %v", err)
	}

	t.Run("the primary with an empty data directory: left to the entrypoint", func(t *testing.T) {
		r := newSetupRun(t, "my-database-0", "my-database-0")
		r.run()
		require.False(t, r.cloned())
		_, err := os.Stat(r.pgdata)
		require.True(t, os.IsNotExist(err), "initdb makes it")
	})

	t.Run("another Pod with an empty data directory: a clone through its slot, following the primary", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("leftover", "no PG_VERSION: not a data directory")
		r.run()
		require.True(t, r.cloned())
		args, err := os.ReadFile(r.log)
		require.NoError(t, err)
		require.Subset(t, strings.Split(strings.TrimSpace(string(args)), "\n"), []string{
			"PGPASSWORD=s3cret",
			"--pgdata=" + r.pgdata + ".clone",
			"--host=my-database.production.svc.cluster.local",
			"--port=5432",
			"--username=replicator",
			"--slot=my_database_1",
			"--wal-method=stream",
		})
		require.Equal(t, "16\n", r.read("PG_VERSION"), "the clone is the data directory")
		_, err = os.Stat(r.pgdata + ".clone")
		require.True(t, os.IsNotExist(err), "renamed")
		require.False(t, r.exists("leftover"), "replaced by the clone")
		require.True(t, r.exists("standby.signal"))
		require.Equal(t, "restore_command = 'true'\n"+standbyConf(r), r.read("postgresql.auto.conf"), "the clone's settings kept")
		r.requirePassfile("*:*:*:replicator:s3cret")
	})

	t.Run("a former primary: set up to follow, earlier settings replaced", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.write("postgresql.auto.conf", "work_mem = '8MB'\nprimary_conninfo = 'host=old'\nprimary_slot_name='old'\nprimary_conninfo_extra = 'kept'\n")
		r.run()
		require.False(t, r.cloned(), "its data is kept")
		require.True(t, r.exists("standby.signal"))
		require.Equal(t, "work_mem = '8MB'\nprimary_conninfo_extra = 'kept'\n"+standbyConf(r), r.read("postgresql.auto.conf"))

		// Its next start: a standby already, left alone.
		r.run()
		require.Equal(t, "work_mem = '8MB'\nprimary_conninfo_extra = 'kept'\n"+standbyConf(r), r.read("postgresql.auto.conf"), "not duplicated")
	})

	t.Run("a standby: its connection written again, with the current password", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.write("standby.signal", "")
		r.write("postgresql.auto.conf", "primary_conninfo = 'host=elsewhere password=old'\n")
		require.NoError(t, os.WriteFile(r.passfile(), []byte("*:*:*:replicator:old\n"), 0o644))
		// A backslash and a colon: the password file's escapes.
		r.password = `new\pass:word`
		r.run()
		require.False(t, r.cloned())
		require.True(t, r.exists("standby.signal"))
		require.Equal(t, standbyConf(r), r.read("postgresql.auto.conf"))
		r.requirePassfile(`*:*:*:replicator:new\\pass\:word`)
	})

	t.Run("a password with a line break: refused, no password file written", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.password = "two\nlines"
		out, err := r.start()
		require.Error(t, err)
		require.Contains(t, out, "holds a line break")
		require.NotContains(t, out, "lines", "the password is not printed")
		_, err = os.Stat(r.passfile())
		require.True(t, os.IsNotExist(err))
	})

	t.Run("the primary with data: left alone", func(t *testing.T) {
		r := newSetupRun(t, "my-database-0", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.run()
		require.False(t, r.cloned())
		require.False(t, r.exists("standby.signal"))
		require.False(t, r.exists("postgresql.auto.conf"))
	})
}
