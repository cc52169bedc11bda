package postgresql_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakePgbackrest records its arguments in $CALLS_LOG and, unless $PGBACKREST_FAIL is set,
// makes its --pg1-path a data directory; when set, it writes part of the data and fails as
// pgBackRest does when the store holds no backup for the target.
// repo-ls and repo-get read the repository from the directory $REPO_DIR (repo-ls lists the
// directory's entries that match --filter); info prints the full backups of the index
// ($REPO_DIR/index, else every backup directory) as pgBackRest's text does.
const fakePgbackrest = `#!/bin/bash
set -o errexit -o nounset
echo "pgbackrest $*" >>"${CALLS_LOG}"
case $1 in
repo-ls)
	filter=${2#--filter=}
	ls "${REPO_DIR}/$3" 2>/dev/null | grep -E "${filter}" || true
	exit 0
	;;
repo-get)
	exec cat "${REPO_DIR}/$2"
	;;
esac
if [[ " $* " == *" info "* ]]; then
	# The index: $REPO_DIR/index when it exists, else every backup directory.
	if [[ -e ${REPO_DIR}/index ]]; then
		labels=$(<"${REPO_DIR}/index")
	else
		labels=$(ls "${REPO_DIR}/backup/${RESTORE_STANZA}" 2>/dev/null || true)
	fi
	printf 'stanza: %s\n    status: ok\n\n    db (current)\n' "${RESTORE_STANZA}"
	for l in ${labels}; do
		printf '\n        full backup: %s\n            timestamp start/stop: ...\n' "${l}"
	done
	exit 0
fi
for a in "$@"; do
	case ${a} in --pg1-path=*) dir=${a#--pg1-path=} ;; esac
done
echo partial >"${dir}/base"
if [[ -n ${PGBACKREST_FAIL:-} ]]; then
	echo "ERROR: [075]: no backup set found to restore" >&2
	exit 75
fi
echo 16 >"${dir}/PG_VERSION"
`

// fakePgCtl records its arguments in $CALLS_LOG; start writes the server's log and fails when
// $PGCTL_START is "fail"; status answers 0 while started, and 3 ("no server running") once
// $PGCTL_STOPS_AFTER status calls were made, writing the server's last words to its log;
// stop stops it.
const fakePgCtl = `#!/bin/bash
set -o errexit -o nounset
echo "pg_ctl $*" >>"${CALLS_LOG}"
for a in "$@"; do
	case ${a} in --log=*) log=${a#--log=} ;; esac
done
case " $* " in
*" start "*)
	echo "LOG:  starting PostgreSQL" >>"${log}"
	if [[ ${PGCTL_START:-} == fail ]]; then
		echo "FATAL:  could not locate a valid checkpoint record" >>"${log}"
		echo "pg_ctl: could not start server" >&2
		exit 1
	fi
	touch "${STATE_DIR}/running"
	;;
*" status "*)
	n=$(grep -c ' status' "${CALLS_LOG}")
	if [[ -e ${STATE_DIR}/running && ${n} -lt ${PGCTL_STOPS_AFTER:-1000000} ]]; then
		exit 0
	fi
	rm -f "${STATE_DIR}/running"
	echo "FATAL:  recovery ended before configured recovery target was reached" >>"${log}"
	exit 3
	;;
*" stop "*) rm -f "${STATE_DIR}/running" ;;
esac
`

// fakeRestorePsql records its arguments in $CALLS_LOG and what it reads on stdin in
// $STDIN_LOG; asked pg_is_in_recovery(), it answers $RECOVERY ("f", "t", or "fail": an
// error).
const fakeRestorePsql = `#!/bin/bash
set -o errexit -o nounset
echo "psql $*" >>"${CALLS_LOG}"
if [[ " $* " == *"--command=SELECT pg_is_in_recovery()"* ]]; then
	if [[ ${RECOVERY} == fail ]]; then
		echo "psql: error: connection to server failed" >&2
		exit 2
	fi
	echo "${RECOVERY}"
	exit 0
fi
cat >>"${STDIN_LOG}"
`

// restoreRun is one run of postgresql-restore.sh in a temporary directory, with pgbackrest,
// pg_ctl, psql and sleep fakes on PATH.
type restoreRun struct {
	t                 *testing.T
	dir, pgdata       string
	hostname, primary string
	password          string
	env               map[string]string
	// until, when set, ends the script once its output holds it (start then returns no
	// error): for a script that would run on.
	until string
}

// outputUntil collects a command's output and calls stop once it holds until ("": never).
type outputUntil struct {
	out   bytes.Buffer
	until string
	found bool
	stop  func()
}

func (o *outputUntil) Write(p []byte) (int, error) {
	n, err := o.out.Write(p)
	if o.until != "" && !o.found && strings.Contains(o.out.String(), o.until) {
		o.found = true
		o.stop()
	}
	return n, err
}

func newRestoreRun(t *testing.T) *restoreRun {
	dir := t.TempDir()
	r := &restoreRun{t: t, dir: dir, pgdata: filepath.Join(dir, "data", "pgdata"), hostname: "copy-0", primary: "copy-0",
		password: "s3cret", env: map[string]string{"RECOVERY": "f"}}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "state"), 0o755))
	for name, content := range map[string]string{"pgbackrest": fakePgbackrest, "pg_ctl": fakePgCtl, "psql": fakeRestorePsql, "sleep": fakeSleep} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bin", name), []byte(content), 0o755))
	}
	require.NoError(t, os.MkdirAll(r.pgdata, 0o700))
	return r
}

func (r *restoreRun) start(timeout time.Duration) (string, error) {
	r.t.Helper()
	script, err := os.ReadFile("scripts/postgresql-restore.sh")
	require.NoError(r.t, err)
	require.Equal(r.t, 1, strings.Count(string(script), readPrimary))
	primaryFile := filepath.Join(r.dir, "primary")
	require.NoError(r.t, os.WriteFile(primaryFile, []byte(r.primary), 0o644))
	path := filepath.Join(r.dir, "postgresql-restore.sh")
	require.NoError(r.t, os.WriteFile(path, []byte(strings.Replace(string(script), readPrimary, "primary=$(<"+primaryFile+")", 1)), 0o644))
	passwordFile := filepath.Join(r.dir, "superuser password")
	require.NoError(r.t, os.WriteFile(passwordFile, []byte(r.password), 0o400))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Env = []string{
		"PATH=" + filepath.Join(r.dir, "bin") + ":" + os.Getenv("PATH"),
		"PGDATA=" + r.pgdata,
		"POSTGRES_USER=postgres",
		"POSTGRES_PASSWORD_FILE=" + passwordFile,
		"POSTGRES_DB=copy",
		"RESTORE_STANZA=ledger",
		"RESTORE_DATABASE=ledger",
		"RESTORE_TARGET_TIME=2026-12-05 04:59:30+00",
		"HOSTNAME=" + r.hostname,
		"CALLS_LOG=" + filepath.Join(r.dir, "calls.log"),
		"STDIN_LOG=" + filepath.Join(r.dir, "stdin.log"),
		"STATE_DIR=" + filepath.Join(r.dir, "state"),
		"REPO_DIR=" + filepath.Join(r.dir, "repo"),
	}
	for k, v := range r.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// One writer for both: exec.Cmd then has one goroutine at a time write to it.
	out := &outputUntil{until: r.until, stop: cancel}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	switch {
	case out.found:
		return out.out.String(), nil
	case ctx.Err() != nil:
		return out.out.String(), ctx.Err()
	}
	return out.out.String(), err
}

func (r *restoreRun) read(name string) string {
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(r.t, err)
	return string(b)
}

func (r *restoreRun) pgdataEntries() []string {
	entries, err := os.ReadDir(r.pgdata)
	require.NoError(r.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestBreakerRestoreScriptDoesNothingOnDataOrAReplica(t *testing.T) {
	r := newRestoreRun(t)
	require.NoError(t, os.WriteFile(filepath.Join(r.pgdata, "PG_VERSION"), []byte("16\n"), 0o600))
	out, err := r.start(10 * time.Second)
	require.NoError(t, err, out)
	require.Empty(t, r.read("calls.log"))

	r = newRestoreRun(t)
	r.hostname = "copy-1"
	out, err = r.start(10 * time.Second)
	require.NoError(t, err, out)
	require.Empty(t, r.read("calls.log"))
	require.Empty(t, r.pgdataEntries())
}

// The passwords and names go to psql as psql variables, never in the SQL text nor its
// arguments, however they are quoted.
func TestBreakerRestoreScriptPassesNamesAndPasswordsSafely(t *testing.T) {
	r := newRestoreRun(t)
	r.password = `pa'ss "w\ord:'x' ; DROP ROLE postgres; --`
	r.env["RESTORE_DATABASE"] = `led"ger'; --`
	r.env["POSTGRES_DB"] = `co:'py\`
	out, err := r.start(10 * time.Second)
	require.NoError(t, err, out)
	require.Equal(t, []string{"PG_VERSION", "base"}, r.pgdataEntries())
	_, err = os.Stat(r.pgdata + ".restore")
	require.True(t, os.IsNotExist(err), "the restore directory was moved into place")
	stdin := r.read("stdin.log")
	calls := r.read("calls.log")
	for _, secret := range []string{r.password, "DROP ROLE", `led"ger`, `co:'py`} {
		require.NotContains(t, stdin, secret)
		require.NotContains(t, calls, secret)
	}
	require.Contains(t, stdin, `ALTER ROLE :"user" PASSWORD :'password';`)
	require.Contains(t, stdin, `ALTER DATABASE :"source" RENAME TO :"target";`)
	require.Contains(t, calls, "pgbackrest --stanza=ledger --pg1-path="+r.pgdata+".restore restore --type=time --target=2026-12-05 04:59:30+00 --target-action=promote")
}

// The backup restored is the latest whose manifest the store holds that ended before the
// target (the latest of all without one), named to pgBackRest; a backup the index may still
// name but whose manifest is gone is passed over, and with none found pgBackRest chooses.
func TestRestoreScriptChoosesABackupTheStoreHolds(t *testing.T) {
	// Ends, Unix seconds: the target 2026-12-05 04:59:30+00 is 1796446770.
	backups := map[string]string{
		"20261203-030041F": "1796266841", // 2026-12-03 03:00:41
		"20261205-030041F": "1796439641", // 2026-12-05 03:00:41, the last before the target
		"20261205-045929F": "1796446770", // ends at the target itself: not before it
		"20261205-060000F": "1796450400", // after the target
		"20261205-010000F": "",           // manifest gone: removed from the store
	}
	write := func(r *restoreRun, only ...string) {
		for label, stop := range backups {
			if len(only) > 0 && !slices.Contains(only, label) {
				continue
			}
			dir := filepath.Join(r.dir, "repo", "backup", "ledger", label)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			if stop != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "backup.manifest"),
					[]byte("[backup]\nbackup-label=\""+label+"\"\nbackup-timestamp-stop="+stop+"\n"), 0o644))
			}
		}
		// Not a full backup's directory.
		require.NoError(t, os.MkdirAll(filepath.Join(r.dir, "repo", "backup", "ledger", "backup.history"), 0o755))
	}
	for _, tc := range []struct {
		name   string
		target string
		only   []string
		index  string // the index's labels; "": every backup directory
		want   string // the --set named; "" for none
	}{
		{name: "as of a time", target: "2026-12-05 04:59:30+00", want: "--set=20261205-030041F"},
		{name: "a fraction past the end", target: "2026-12-05 04:59:30.5+00", want: "--set=20261205-030041F"},
		{name: "the archive's end", target: "", want: "--set=20261205-060000F"},
		{name: "the newer one's manifest gone", target: "2026-12-05 04:59:30+00", only: []string{"20261203-030041F", "20261205-010000F"}, want: "--set=20261203-030041F"},
		{name: "none before the target", target: "2026-12-05 04:59:30+00", only: []string{"20261205-060000F"}},
		{name: "an empty repository", target: ""},
		// A manifest of a backup the index does not name (one that ended before pgBackRest
		// recorded it) is passed over.
		{name: "not in the index", target: "2026-12-05 04:59:30+00", index: "20261203-030041F\n", want: "--set=20261203-030041F"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRestoreRun(t)
			r.env["RESTORE_TARGET_TIME"] = tc.target
			if tc.name != "an empty repository" {
				write(r, tc.only...)
			}
			if tc.index != "" {
				require.NoError(t, os.WriteFile(filepath.Join(r.dir, "repo", "index"), []byte(tc.index), 0o644))
			}
			out, err := r.start(10 * time.Second)
			require.NoError(t, err, out)
			var restore string
			for _, line := range strings.Split(r.read("calls.log"), "\n") {
				if strings.Contains(line, " restore") {
					restore = line
				}
			}
			require.NotEmpty(t, restore, r.read("calls.log"))
			if tc.want == "" {
				require.NotContains(t, restore, "--set", restore)
				return
			}
			require.True(t, strings.HasSuffix(restore, " "+tc.want), restore)
			require.Contains(t, out, "from backup "+strings.TrimPrefix(tc.want, "--set="))
		})
	}
}

// A failing pgbackrest leaves PGDATA as it was (empty), fails, and its error is in the output.
func TestBreakerRestoreScriptFailingPgbackrest(t *testing.T) {
	r := newRestoreRun(t)
	r.env["PGBACKREST_FAIL"] = "1"
	out, err := r.start(10 * time.Second)
	require.Error(t, err, out)
	require.Contains(t, out, "no backup set found to restore")
	require.Empty(t, r.pgdataEntries())
	require.NotContains(t, r.read("calls.log"), "pg_ctl")
}

// A server that does not start, or stops during recovery, fails the restore with the
// server's log tail, PGDATA untouched.
func TestBreakerRestoreScriptServerFailures(t *testing.T) {
	r := newRestoreRun(t)
	r.env["PGCTL_START"] = "fail"
	out, err := r.start(10 * time.Second)
	require.Error(t, err, out)
	require.Contains(t, out, "postgresql-restore: the restored data does not start; the server said:")
	require.Contains(t, out, "could not locate a valid checkpoint record")
	require.Empty(t, r.pgdataEntries())

	r = newRestoreRun(t)
	r.env["RECOVERY"] = "fail"
	r.env["PGCTL_STOPS_AFTER"] = "3"
	out, err = r.start(10 * time.Second)
	require.Error(t, err, out)
	require.Contains(t, out, "postgresql-restore: recovery stopped before it took writes; the server said:")
	require.Contains(t, out, "recovery ended before configured recovery target was reached")
	require.Empty(t, r.pgdataEntries())
}

// A server that runs but never answers psql fails the restore after its 120 tries (2 minutes
// of the script's sleeps, none here); one that answers it is still in recovery is logged every
// 30 tries with how far it replayed, and fails only once its replay stalled for 1800.
func TestRestoreScriptSaysWhatItWaitsFor(t *testing.T) {
	r := newRestoreRun(t)
	r.env["RECOVERY"] = "fail"
	// 120 tries take a second or two; the bound is for a loaded machine.
	out, err := r.start(time.Minute)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "still looping after a minute (%d psql calls), output: %q", strings.Count(r.read("calls.log"), "psql "), out)
	require.Error(t, err)
	require.Contains(t, out, "postgresql-restore: the restored server runs but has not answered for 2 minutes; the server said:")
	require.Empty(t, r.pgdataEntries())

	r = newRestoreRun(t)
	r.env["RECOVERY"] = "t"
	r.until = "postgresql-restore: recovering: replayed up to "
	out, err = r.start(time.Minute)
	require.NoError(t, err, "no progress said after a minute (%d psql calls), output: %q", strings.Count(r.read("calls.log"), "psql "), out)
	require.Contains(t, out, "postgresql-restore: recovering: replayed up to ")
}
