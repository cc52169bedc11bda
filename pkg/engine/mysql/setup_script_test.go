package mysql_test

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

// The fake MySQL binaries of the MySQL setup script's tests. Each appends what it was asked
// to $FAKE/calls, one line per call; the scratch server runs while $FAKE/running exists.
const (
	// fakeMysqld initialises --datadir (a mysql directory) with --initialize-insecure, and
	// otherwise runs until mysqladmin shuts it down.
	fakeMysqld = `#!/bin/bash
set -o errexit -o nounset
echo "mysqld $*" >>"${FAKE}/calls"
for a in "$@"; do
	case ${a} in --datadir=*) dir=${a#--datadir=} ;; esac
done
if [[ " $* " == *" --initialize-insecure "* ]]; then
	mkdir -p "${dir}/mysql"
	exit 0
fi
touch "${FAKE}/running"
while [[ -e ${FAKE}/running ]]; do sleep 0.1; done
`
	// fakeMysqladmin answers ping while the server runs, and shutdown stops it.
	fakeMysqladmin = `#!/bin/bash
set -o errexit -o nounset
echo "mysqladmin $*" >>"${FAKE}/calls"
case " $* " in
*" ping "*) [[ -e ${FAKE}/running ]] ;;
*" shutdown "*) rm -f "${FAKE}/running" ;;
esac
`
	// fakeMysql records its input in $FAKE/sql; while $FAKE/refusals holds a number above
	// 0 it fails (and counts down), else it makes the clone's DATA DIRECTORY a data
	// directory (ibdata1, mysql/).
	fakeMysql = `#!/bin/bash
set -o errexit -o nounset
echo "mysql $*" >>"${FAKE}/calls"
sql=$(cat)
printf '%s\n' "${sql}" >>"${FAKE}/sql"
n=$(cat "${FAKE}/refusals" 2>/dev/null || echo 0)
if (( n > 0 )); then
	echo $((n - 1)) >"${FAKE}/refusals"
	echo "ERROR 2003 (HY000): Can't connect to MySQL server" >&2
	exit 1
fi
dir=$(sed -n "s/.*DATA DIRECTORY = '\([^']*\)'.*/\1/p" <<<"${sql}")
mkdir -p "${dir}/mysql"
echo cloned >"${dir}/ibdata1"
`
)

// mysqlSetupRun is one run of the MySQL setup script in a temporary directory: DATADIR is
// dir/data, MYSQL_CONFIG_DIR dir/conf.d, the primary's name is read from dir/primary, and
// mysqld, mysqladmin and mysql are the fakes.
type mysqlSetupRun struct {
	t                        *testing.T
	dir, datadir, conf, fake string
	hostname, primary        string
}

func newMySQLSetupRun(t *testing.T, hostname, primary string) *mysqlSetupRun {
	dir := t.TempDir()
	r := &mysqlSetupRun{t: t, dir: dir, datadir: filepath.Join(dir, "data"), conf: filepath.Join(dir, "conf.d"),
		fake: filepath.Join(dir, "fake"), hostname: hostname, primary: primary}
	for _, d := range []string{filepath.Join(dir, "bin"), r.datadir, r.conf, r.fake} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for name, script := range map[string]string{"mysqld": fakeMysqld, "mysqladmin": fakeMysqladmin, "mysql": fakeMysql} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", name), []byte(script), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "primary"), []byte(primary), 0o644))
	return r
}

func (r *mysqlSetupRun) run() string {
	r.t.Helper()
	script, err := os.ReadFile("scripts/mysql-setup.sh")
	require.NoError(r.t, err)
	require.Equal(r.t, 1, strings.Count(string(script), readPrimary), "the script reads the primary once")
	path := filepath.Join(r.dir, "mysql-setup.sh")
	script = []byte(strings.Replace(string(script), readPrimary, "primary=$(<"+filepath.Join(r.dir, "primary")+")", 1))
	require.NoError(r.t, os.WriteFile(path, script, 0o644))
	passwordFile := filepath.Join(r.dir, "replication-password")
	require.NoError(r.t, os.WriteFile(passwordFile, []byte(`s3'cr\et`), 0o400))
	cmd := exec.Command("bash", path)
	cmd.Env = []string{
		"PATH=" + filepath.Join(r.dir, "bin") + ":" + os.Getenv("PATH"),
		"DATADIR=" + r.datadir,
		"MYSQL_CONFIG_DIR=" + r.conf,
		"MYSQL_PORT=3306",
		"SERVER_ID_BASE=100",
		"PODS_DOMAIN=my-database-headless.production.svc.cluster.local",
		"REPLICATION_USER=replicator",
		"REPLICATION_PASSWORD_FILE=" + passwordFile,
		"HOSTNAME=" + r.hostname,
		"FAKE=" + r.fake,
	}
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "%s", out)
	return string(out)
}

func (r *mysqlSetupRun) file(path string) string {
	r.t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(r.t, err)
	return string(b)
}

func (r *mysqlSetupRun) exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// config is the server settings the script wrote.
func (r *mysqlSetupRun) config() string { return r.file(filepath.Join(r.conf, "replication.cnf")) }

func mysqlConfig(serverID, pod string, readOnly bool) string {
	s := "[mysqld]\nserver-id=" + serverID + "\nlog-bin=binlog\ngtid-mode=ON\nenforce-gtid-consistency=ON\n" +
		"plugin-load-add=mysql_clone.so\nreport-host=" + pod + ".my-database-headless.production.svc.cluster.local\n" +
		"skip-name-resolve=OFF\nhost-cache-size=0\nlog-error-suppression-list=MY-010055\n" +
		"plugin-load-add=semisync_source.so\nplugin-load-add=semisync_replica.so\nloose-rpl-semi-sync-replica-enabled=ON\nskip-replica-start=ON\n"
	if readOnly {
		s += "super-read-only=ON\n"
	}
	return s
}

func TestMySQLSetupScript(t *testing.T) {
	t.Run("the primary with an empty data directory: its settings, the rest left to the entrypoint", func(t *testing.T) {
		r := newMySQLSetupRun(t, "my-database-0", "my-database-0")
		r.run()
		require.Equal(t, mysqlConfig("100", "my-database-0", false), r.config())
		require.False(t, r.exists(filepath.Join(r.fake, "calls")), "no server run, no clone")
		entries, err := os.ReadDir(r.datadir)
		require.NoError(t, err)
		require.Empty(t, entries, "the entrypoint initialises it")
	})

	t.Run("another Pod with an empty data directory: a clone of the primary, read-only", func(t *testing.T) {
		r := newMySQLSetupRun(t, "my-database-2", "my-database-0")
		require.NoError(t, os.WriteFile(filepath.Join(r.datadir, "leftover"), []byte("a clone cut short"), 0o600))
		require.NoError(t, os.MkdirAll(filepath.Join(r.datadir, "lost+found"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(r.fake, "refusals"), []byte("1"), 0o600))
		r.run()
		require.Equal(t, mysqlConfig("102", "my-database-2", true), r.config())
		require.Equal(t, "cloned\n", r.file(filepath.Join(r.datadir, "ibdata1")), "the clone is the data directory")
		require.True(t, r.exists(filepath.Join(r.datadir, "mysql")), "what tells the entrypoint not to initialise")
		require.True(t, r.exists(filepath.Join(r.datadir, "lost+found")))
		for _, gone := range []string{"leftover", ".clone", "setup-server"} {
			require.False(t, r.exists(filepath.Join(r.datadir, gone)), gone)
		}
		clone := "SET GLOBAL clone_valid_donor_list = 'my-database-0.my-database-headless.production.svc.cluster.local:3306';\n" +
			"CLONE INSTANCE FROM 'replicator'@'my-database-0.my-database-headless.production.svc.cluster.local':3306 IDENTIFIED BY 's3''cr\\\\et' " +
			"DATA DIRECTORY = '" + filepath.Join(r.datadir, ".clone") + "' REQUIRE SSL;\n"
		require.Equal(t, clone+clone, r.file(filepath.Join(r.fake, "sql")), "retried once refused, the password a quoted literal")
		calls := r.file(filepath.Join(r.fake, "calls"))
		// Not a hidden directory: InnoDB does not start on one.
		require.Contains(t, calls, "mysqld --no-defaults --initialize-insecure --datadir="+filepath.Join(r.datadir, "setup-server")+"\n")
		require.Contains(t, calls, "--bind-address=127.0.0.1")
		require.Contains(t, calls, "--plugin-load-add=mysql_clone.so")
		require.Contains(t, calls, "mysqladmin --no-defaults --socket=/tmp/mysql-setup.sock --user=root shutdown")
		require.False(t, r.exists(filepath.Join(r.fake, "running")), "the scratch server is stopped")
	})

	t.Run("a former primary with data: kept, read-only", func(t *testing.T) {
		r := newMySQLSetupRun(t, "my-database-0", "my-database-1")
		require.NoError(t, os.MkdirAll(filepath.Join(r.datadir, "mysql"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(r.conf, "replication.cnf"), []byte("[mysqld]\nserver-id=1\n"), 0o644))
		r.run()
		require.Equal(t, mysqlConfig("100", "my-database-0", true), r.config(), "replaced")
		require.False(t, r.exists(filepath.Join(r.fake, "calls")), "no clone")
	})

	t.Run("the primary with data: read-only until the controller promotes it", func(t *testing.T) {
		r := newMySQLSetupRun(t, "my-database-1", "my-database-1")
		require.NoError(t, os.MkdirAll(filepath.Join(r.datadir, "mysql"), 0o700))
		r.run()
		require.Equal(t, mysqlConfig("101", "my-database-1", true), r.config())
		info, err := os.Stat(filepath.Join(r.conf, "replication.cnf"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), info.Mode().Perm(), "the server ignores a world-writable option file")
	})
}
