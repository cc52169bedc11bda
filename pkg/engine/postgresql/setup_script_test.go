package postgresql_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/postgresql"
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

// fakeControldata prints the control file's state line as pg_controldata does, the state
// $CLUSTER_STATE.
const fakeControldata = `#!/bin/bash
printf 'pg_control version number:            1300\nDatabase cluster state:               %s\npg_control last modified:             now\n' "${CLUSTER_STATE}"
`

// fakePsql records its arguments in $CALLS_LOG ("psql <args>") and answers as the line of
// $PSQL_ANSWERS of its call's number (the last line once past them): "f" or "t" printed,
// "fail" an error.
const fakePsql = `#!/bin/bash
set -o errexit -o nounset
echo "psql $*" >>"${CALLS_LOG}"
n=$(grep -c '^psql ' "${CALLS_LOG}")
answer=$(sed -n "${n}p" "${PSQL_ANSWERS}")
[[ -n ${answer} ]] || answer=$(tail -n 1 "${PSQL_ANSWERS}")
if [[ ${answer} == fail ]]; then
	echo "psql: error: connection to server failed" >&2
	exit 2
fi
echo "${answer}"
`

// fakeRewind records its arguments in $CALLS_LOG ("pg_rewind <args>") and exits with
// $REWIND_STATUS, after marking the data directory rewound when 0; as the real one's crash
// recovery does, it fails while the data directory holds a postmaster.pid.
const fakeRewind = `#!/bin/bash
set -o errexit -o nounset
echo "pg_rewind $*" >>"${CALLS_LOG}"
if [[ -e ${PGDATA}/postmaster.pid ]]; then
	echo 'FATAL:  lock file "postmaster.pid" already exists' >&2
	exit 1
fi
if [[ ${REWIND_STATUS} != 0 ]]; then
	echo "pg_rewind: error: could not find common ancestor" >&2
	exit "${REWIND_STATUS}"
fi
echo rewound >"${PGDATA}/rewound"
`

// primaryRoleQuery is what the script asks the primary: t in recovery, c while its last
// checkpoint is on an older timeline than the one it writes, else f.
const primaryRoleQuery = `SELECT CASE WHEN pg_is_in_recovery() THEN 't' WHEN (SELECT timeline_id FROM pg_control_checkpoint()) <> ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int THEN 'c' ELSE 'f' END`

// fakeSleep records its argument in $CALLS_LOG ("sleep <seconds>") and returns at once.
const fakeSleep = `#!/bin/bash
echo "sleep $*" >>"${CALLS_LOG}"
`

// setupRun is one run of the setup script in a temporary directory: PGDATA is dir/data/pgdata,
// the primary's name is read from dir/primary instead of /etc/database/primary, and
// pg_basebackup, pg_controldata, psql, pg_rewind and sleep are fakes.
type setupRun struct {
	t                 *testing.T
	dir, pgdata, log  string
	hostname, primary string
	// password is the replication password's file content, "s3cret" unless set.
	password string
	// state is the control file's cluster state, "shut down" unless set.
	state string
	// psqlAnswers are the answers of psql's calls in turn (fakePsql), ["fail"] unless set.
	psqlAnswers []string
	// rewindStatus is pg_rewind's exit status.
	rewindStatus int
	// env overrides the environment's variables of these names.
	env map[string]string
}

// calls are the fakes' calls (psql, pg_rewind and sleep), in order.
func (r *setupRun) calls() []string {
	b, err := os.ReadFile(filepath.Join(r.dir, "calls.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(r.t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// rewindConfig is pg_rewind's --config-file of a run: beside PGDATA.
func (r *setupRun) rewindConfig() string {
	return filepath.Join(filepath.Dir(r.pgdata), "pg_rewind.conf")
}

// rewindSource is pg_rewind's --source-server of a run.
func (r *setupRun) rewindSource() string {
	return "host=my-database-0.my-database-headless.production.svc.cluster.local port=5432 user=replicator passfile=" + r.passfile() + " dbname=postgres connect_timeout=5"
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
		hostname: hostname, primary: primary, password: "s3cret", state: "shut down", psqlAnswers: []string{"fail"}}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	for name, content := range map[string]string{"pg_basebackup": fakeBasebackup, "pg_controldata": fakeControldata,
		"psql": fakePsql, "pg_rewind": fakeRewind, "sleep": fakeSleep} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", name), []byte(content), 0o755))
	}
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
	answers := filepath.Join(r.dir, "psql-answers")
	require.NoError(r.t, os.WriteFile(answers, []byte(strings.Join(r.psqlAnswers, "\n")+"\n"), 0o644))
	cmd := exec.Command("bash", path)
	cmd.Env = []string{
		"PATH=" + filepath.Join(r.dir, "bin") + ":" + os.Getenv("PATH"),
		"PGDATA=" + r.pgdata,
		"PGPORT=5432",
		"PRIMARY_HOST=my-database.production.svc.cluster.local",
		"PODS_DOMAIN=my-database-headless.production.svc.cluster.local",
		"PRIMARY_CONNECT_TIMEOUT=5",
		"REPLICATION_USER=replicator",
		"REPLICATION_PASSWORD_FILE=" + passwordFile,
		"REPLICATION_PASSFILE=" + r.passfile(),
		"HOSTNAME=" + r.hostname,
		"BASEBACKUP_LOG=" + r.log,
		"CLUSTER_STATE=" + r.state,
		"CALLS_LOG=" + filepath.Join(r.dir, "calls.log"),
		"PSQL_ANSWERS=" + answers,
		"REWIND_STATUS=" + strconv.Itoa(r.rewindStatus),
		"SERVER_SETTINGS=wal_log_hints=on wal_keep_size=512MB",
	}
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
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

	t.Run("a former primary shut down cleanly, the primary answering: rewound, then following", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.psqlAnswers = []string{"f"}
		out := r.run()
		require.Equal(t, []string{
			"psql " + r.rewindSource() + " --no-psqlrc --tuples-only --no-align --command=" + primaryRoleQuery,
			"pg_rewind --target-pgdata=" + r.pgdata + " --source-server=" + r.rewindSource() + " --config-file=" + r.rewindConfig(),
		}, r.calls())
		// Its crash recovery runs with the data directory's settings and the server's
		// command line's.
		config, err := os.ReadFile(r.rewindConfig())
		require.NoError(t, err)
		require.Equal(t, "include_if_exists '"+r.pgdata+"/postgresql.conf'\nwal_log_hints = 'on'\nwal_keep_size = '512MB'\n", string(config))
		require.True(t, r.exists("rewound"))
		require.False(t, r.cloned())
		require.True(t, r.exists("standby.signal"))
		require.Equal(t, standbyConf(r), r.read("postgresql.auto.conf"))
		r.requirePassfile("*:*:*:replicator:s3cret")
		require.NotContains(t, out, "cloning")
	})

	t.Run("a former primary stopped uncleanly: its stale postmaster.pid removed, rewound", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.write("postmaster.pid", "1\n/var/lib/postgresql/data\n")
		r.psqlAnswers = []string{"f"}
		out := r.run()
		require.True(t, r.exists("rewound"), out)
		require.False(t, r.cloned())
		require.False(t, r.exists("postmaster.pid"))
		require.NotContains(t, out, "cloning")
	})

	t.Run("pg_rewind failing: the primary cloned again, said on stderr", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "15\n")
		r.write("diverged", "")
		r.psqlAnswers = []string{"f"}
		r.rewindStatus = 1
		out := r.run()
		require.Len(t, r.calls(), 2, "asked once, rewound once")
		require.Contains(t, out, "pg_rewind could not rewind my-database-1 to my-database-0's timeline: cloning my-database-0 again")
		require.True(t, r.cloned())
		require.Equal(t, "16\n", r.read("PG_VERSION"), "the clone is the data directory")
		require.False(t, r.exists("diverged"))
		require.True(t, r.exists("standby.signal"))
		require.Equal(t, "restore_command = 'true'\n"+standbyConf(r), r.read("postgresql.auto.conf"))
	})

	for _, state := range []string{"in production", "shut down"} {
		t.Run("a former primary, "+state+", the primary asked every 5s until it answers, then rewound", func(t *testing.T) {
			r := newSetupRun(t, "my-database-1", "my-database-0")
			r.write("PG_VERSION", "16\n")
			r.state = state
			// Unreachable (or refusing a Pod whose address has no DNS name yet) twice, then the
			// primary.
			r.psqlAnswers = []string{"fail", "fail", "f"}
			r.run()
			calls := r.calls()
			require.Len(t, calls, 6, "%q", calls)
			for i, c := range calls[:4] {
				want := "sleep 5"
				if i%2 == 0 {
					want = "psql "
				}
				require.True(t, strings.HasPrefix(c, want), "call %d: %q", i, c)
			}
			require.True(t, strings.HasPrefix(calls[4], "psql "), calls[4])
			require.True(t, strings.HasPrefix(calls[5], "pg_rewind "), calls[5])
			require.True(t, r.exists("rewound"))
			require.True(t, r.exists("standby.signal"))
		})
	}

	t.Run("a former primary, the primary not checkpointed on its timeline: asked every 5s until it is, then rewound", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.psqlAnswers = []string{"c", "c", "f"}
		out := r.run()
		calls := r.calls()
		require.Equal(t, 3, countPrefix(calls, "psql "), "%q", calls)
		require.Equal(t, 2, countPrefix(calls, "sleep 5"), "%q", calls)
		require.True(t, strings.HasPrefix(calls[len(calls)-1], "pg_rewind "), "%q", calls)
		require.Contains(t, out, "my-database-0 has not checkpointed on its timeline yet; retrying in 5s")
		require.True(t, r.exists("rewound"))
		require.False(t, r.cloned())
	})

	t.Run("a former primary, the primary never checkpointed on its timeline: cloned after two minutes, not rewound", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.psqlAnswers = []string{"c"}
		out := r.run()
		calls := r.calls()
		require.Equal(t, 24, countPrefix(calls, "psql "), "%q", calls)
		require.Zero(t, countPrefix(calls, "pg_rewind "))
		require.Contains(t, out, "my-database-0 has not checkpointed on its timeline: cloning my-database-0 again")
		require.True(t, r.cloned())
		require.True(t, r.exists("standby.signal"))
	})

	t.Run("a former primary, the primary never answering: following after two minutes, not rewound", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.state = "in production"
		out := r.run()
		calls := r.calls()
		require.Equal(t, 24, countPrefix(calls, "psql "), "%q", calls)
		require.Equal(t, 23, countPrefix(calls, "sleep 5"), "%q", calls)
		require.Zero(t, countPrefix(calls, "pg_rewind "))
		require.Contains(t, out, "my-database-0 does not answer at my-database-0.my-database-headless.production.svc.cluster.local: my-database-1 follows it without pg_rewind")
		require.False(t, r.cloned())
		require.True(t, r.exists("standby.signal"))
	})

	t.Run("a former primary, the named primary in recovery (a switchover's target): following at once, not rewound", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.psqlAnswers = []string{"t"}
		out := r.run()
		require.Len(t, r.calls(), 1, "asked once, no sleep")
		require.Contains(t, out, "my-database-0 is not promoted yet: my-database-1 follows it, nothing to rewind")
		require.False(t, r.exists("rewound"))
		require.True(t, r.exists("standby.signal"))
	})

	t.Run("a standby shut down cleanly: rewound when the primary answers", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.write("standby.signal", "")
		r.state = "shut down in recovery"
		r.psqlAnswers = []string{"f"}
		r.run()
		require.Len(t, r.calls(), 2)
		require.True(t, r.exists("rewound"))
		require.Equal(t, standbyConf(r), r.read("postgresql.auto.conf"))
	})

	t.Run("a standby not shut down cleanly: following, not rewound", func(t *testing.T) {
		r := newSetupRun(t, "my-database-1", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.write("standby.signal", "")
		r.state = "in archive recovery"
		r.psqlAnswers = []string{"f"}
		r.run()
		require.Empty(t, r.calls(), "pg_rewind's crash recovery runs no standby")
		require.Equal(t, standbyConf(r), r.read("postgresql.auto.conf"))
	})

	t.Run("the primary with data: left alone", func(t *testing.T) {
		r := newSetupRun(t, "my-database-0", "my-database-0")
		r.write("PG_VERSION", "16\n")
		r.run()
		require.False(t, r.cloned())
		require.False(t, r.exists("standby.signal"))
		require.False(t, r.exists("postgresql.auto.conf"))
		require.Empty(t, r.calls())
	})
}

func countPrefix(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// The primary_conninfo the setup script writes from the environment ReplicationPod gives it
// is PrimaryConninfo's, which SyncReplica sets back after StopFollowing; pg_rewind's source
// connection names the database pg_hba.conf admits the replication role to.
func TestSetupScriptWritesPrimaryConninfo(t *testing.T) {
	db := &examplev1.Database{ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production"}}
	d := engine.Desired{Recipe: postgresql.Engine{}.Recipe(), ClusterDomain: "corp.example.test"}
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: engine.ContainerName}}}}
	postgresql.Engine{}.ReplicationPod(db, d, tmpl)
	r := newSetupRun(t, "my-database-2", "my-database-0")
	r.env = map[string]string{}
	for _, e := range tmpl.Spec.InitContainers[0].Env {
		switch e.Name {
		case "PRIMARY_HOST", "PODS_DOMAIN", "PGPORT", "PRIMARY_CONNECT_TIMEOUT":
			r.env[e.Name] = e.Value
		case "REPLICATION_PASSFILE":
			require.Equal(t, postgresql.ReplicationPassfile(d), e.Value)
		}
	}
	require.Len(t, r.env, 4)
	r.write("PG_VERSION", "16\n")
	r.psqlAnswers = []string{"f"}
	r.run()

	want := strings.Replace(postgresql.PrimaryConninfo(db, d, "replicator", "my-database-2"),
		"passfile="+postgresql.ReplicationPassfile(d), "passfile="+r.passfile(), 1)
	require.Equal(t, "host=my-database.production.svc.corp.example.test port=5432 user=replicator passfile="+r.passfile()+
		" application_name=my-database-2 connect_timeout=5", want)
	require.Equal(t, "primary_conninfo = '"+want+"'\nprimary_slot_name = 'my_database_2'\n", r.read("postgresql.auto.conf"))
	require.Contains(t, r.calls()[1], "dbname="+postgresql.RewindDatabase+" ")
}
