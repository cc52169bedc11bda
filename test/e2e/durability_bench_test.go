//go:build e2e && bench

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// The durability benchmark's load: durabilityClients connections, each running one
// transaction after the other with no pause, for durabilityWarmup seconds that are not
// counted, then the measured seconds, then durabilityTail seconds more so that the window's
// last transactions have ended when the load stops.
const (
	durabilityClients = 4
	durabilityWarmup  = 5
	durabilityTail    = 2
	// durabilityAccounts is pgbench's accounts at scale 1 (pgbench_accounts holds
	// 100,000 rows per unit of scale).
	durabilityAccounts = 100000
)

// durabilitySetting is one of the three Databases an engine is measured on.
type durabilitySetting struct {
	// name is the Database's name, label the table's.
	name, label string
	replicas    int
	durability  examplev1.Durability
}

var durabilitySettings = []durabilitySetting{
	{name: "single", label: "single server (replicas: 1)", replicas: 1},
	{name: "async", label: "replicas: 2, Asynchronous", replicas: 2, durability: examplev1.DurabilityAsynchronous},
	{name: "sync", label: "replicas: 2, Synchronous", replicas: 2, durability: examplev1.DurabilitySynchronous},
}

// durabilityEngine is what the benchmark needs of one engine.
type durabilityEngine struct {
	engine  examplev1.Engine
	version string
	// load says what the load is, for the table.
	load string
	// initialise creates and fills the load's tables in db through host.
	initialise func(t *testing.T, ns, db, host string)
	// loadPod is the manifest of a Pod that runs the load against host for seconds and
	// prints its transactions.
	loadPod func(ns, name, db, host string, seconds int) string
	// parse returns the transactions a load Pod's log reports, and how many failed.
	parse func(t *testing.T, log string) ([]transaction, int)
	// check returns an error unless the primary of the Database runs the setting's
	// durability; after is false before the first load, true after the last, with the
	// transactions counted.
	check func(t *testing.T, ns, primary string, s durabilitySetting, after bool, counted int) error
}

// transaction is one transaction of a load: when it ended (Unix seconds) and its latency
// (milliseconds; NaN when the log does not say).
type transaction struct {
	end, latency float64
}

// TestDurabilityCost measures what durability costs, on the real node, for PostgreSQL (the
// node's release) and MySQL (its line): three Databases of each engine side by side, a single
// server, two replicas Asynchronous and two replicas Synchronous, each loaded in turn by
// durabilityClients connections from a client Pod through its client Service for a fixed
// time. PostgreSQL runs pgbench's simple-update transaction (-N); MySQL runs the same
// transaction on the same tables through the mysql client. The three settings of an engine
// are measured back to back, in rounds whose order alternates (single, Asynchronous,
// Synchronous, then the reverse), so that each sees the machine as the others do; the
// engines one after the other, the first one's Databases deleted before the second starts.
//
// It logs TPS, the average and 95th percentile latency of each setting and the ratios
// Synchronous/Asynchronous and Asynchronous/single: speed is measured, never asserted. It
// fails only when a setting is not what it says (Synchronous without a synchronous standby
// or semi-synchronous acknowledgements, Asynchronous with them), when a transaction fails, or
// when a load ends before its window. DURABILITY_SECONDS (default 20) is each load's measured
// time, DURABILITY_ROUNDS (default 4) the rounds.
//
// Build tag bench: not part of make test; make bench-durability runs it.
func TestDurabilityCost(t *testing.T) {
	seconds, rounds := envPositive(t, "DURABILITY_SECONDS", 20), envPositive(t, "DURABILITY_ROUNDS", 4)
	pg, my := realNodeImage(t, examplev1.EnginePostgreSQL), realNodeImage(t, examplev1.EngineMySQL)
	load := fmt.Sprintf("%d connections, %d s measured after %d s of warm-up, %d rounds", durabilityClients, seconds, durabilityWarmup, rounds)
	engines := []durabilityEngine{{
		engine: examplev1.EnginePostgreSQL, version: pg.Release,
		load:       fmt.Sprintf("PostgreSQL %s, pgbench -i -s 1, then pgbench -N -c %d -j 2: %s", pg.Release, durabilityClients, load),
		initialise: pgbenchInit, loadPod: pgbenchPod, parse: parsePgbench, check: checkPostgreSQLDurability,
	}, {
		engine: examplev1.EngineMySQL, version: my.Line,
		load:       fmt.Sprintf("MySQL %s, pgbench's -N transaction and tables at scale 1 through the mysql client: %s", my.Release, load),
		initialise: mysqlBenchInit, loadPod: mysqlBenchPod, parse: parseMySQLBench, check: checkMySQLDurability,
	}}
	var report strings.Builder
	fmt.Fprintf(&report, "load average at the start: %s\n", loadAverage())
	for _, e := range engines {
		t.Run(string(e.engine), func(t *testing.T) {
			results := measureDurability(t, e, seconds, rounds)
			fmt.Fprintf(&report, "\n%s\n", e.load)
			writeDurabilityTable(&report, results, seconds)
		})
	}
	fmt.Fprintf(&report, "\nload average at the end: %s\n", loadAverage())
	t.Logf("measured: what durability costs\n%s", report.String())
}

// durabilityResult is one setting's transactions over every round.
type durabilityResult struct {
	setting durabilitySetting
	// perRound is each round's transactions per second.
	perRound []float64
	// count is the transactions counted over every round, latencies theirs (ms).
	count     int
	latencies []float64
}

func measureDurability(t *testing.T, e durabilityEngine, seconds, rounds int) []*durabilityResult {
	ns := restrictedNamespace(t, "bench-durability-"+string(e.engine))
	var manifest strings.Builder
	for _, s := range durabilitySettings {
		fmt.Fprintf(&manifest, `---
apiVersion: example.com/v1
kind: Database
metadata:
  name: %s
  namespace: %s
spec:
  engine: %s
  version: "%s"
  replicas: %d
  storage: 1Gi
`, s.name, ns, e.engine, e.version, s.replicas)
		if s.durability != "" {
			fmt.Fprintf(&manifest, "  durability: %s\n", s.durability)
		}
	}
	kubectlIn(t, manifest.String(), "apply", "-f", "-")
	results := make([]*durabilityResult, len(durabilitySettings))
	primaries := make([]string, len(durabilitySettings))
	for i, s := range durabilitySettings {
		if s.replicas == 1 {
			waitPrimaryAnswers(t, ns, s.name)
		} else {
			waitReplicating(t, ns, s.name, s.name+"-0", s.replicas)
		}
		primaries[i] = s.name + "-0"
		e.initialise(t, ns, s.name, serviceHost(ns, s.name))
		// The controller sets the durability once the replica streams.
		eventually(t, time.Minute, func() error { return e.check(t, ns, primaries[i], s, false, 0) })
		results[i] = &durabilityResult{setting: s}
	}

	for r := range rounds {
		order := []int{0, 1, 2}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			s := durabilitySettings[i]
			name := fmt.Sprintf("load-%s-%d", s.name, r)
			phase, log := runPod(t, ns, name, e.loadPod(ns, name, s.name, serviceHost(ns, s.name), durabilityWarmup+seconds+durabilityTail))
			require.Equal(t, corev1.PodSucceeded, phase, "%s: %s", name, lastLines(log, 20))
			txs, failed := e.parse(t, log)
			require.Zero(t, failed, "%s: failed transactions", name)
			counted, latencies := durabilityWindow(t, txs, seconds)
			res := results[i]
			res.perRound = append(res.perRound, float64(counted)/float64(seconds))
			res.count += counted
			res.latencies = append(res.latencies, latencies...)
			t.Logf("%s, round %d: %d transactions in %d s (%.0f/s)%s", s.label, r+1, counted, seconds, float64(counted)/float64(seconds), pgbenchTPS(log))
		}
	}
	for i, s := range durabilitySettings {
		d, err := getDatabase(t, ns, s.name)
		require.NoError(t, err)
		require.Equal(t, primaries[i], d.Status.Primary, "%s: the primary changed during the loads: %+v", s.label, d.Status.Failover)
		require.NoError(t, e.check(t, ns, primaries[i], s, true, results[i].count))
	}
	// The next engine runs on a machine without these servers.
	kubectl(t, "delete", "namespace", ns, "--wait=false")
	eventually(t, 5*time.Minute, func() error {
		_, err := kube(t).CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("namespace %s still there: %v", ns, err)
	})
	return results
}

// durabilityWindow keeps the transactions that ended in the measured window, the seconds
// after the warm-up from the first transaction's end, and returns how many and their
// latencies; it fails the test when the load ended before the window did.
func durabilityWindow(t *testing.T, txs []transaction, seconds int) (int, []float64) {
	t.Helper()
	require.NotEmpty(t, txs, "no transaction")
	first, last := txs[0].end, txs[0].end
	for _, tx := range txs {
		first, last = min(first, tx.end), max(last, tx.end)
	}
	from := first + durabilityWarmup
	to := from + float64(seconds)
	require.GreaterOrEqual(t, last, to, "the load ended %.1f s after its first transaction, before its window did", last-first)
	var counted int
	var latencies []float64
	for _, tx := range txs {
		if tx.end >= from && tx.end < to {
			counted++
			if !math.IsNaN(tx.latency) {
				latencies = append(latencies, tx.latency)
			}
		}
	}
	return counted, latencies
}

// writeDurabilityTable writes the table of one engine's results (in durabilitySettings'
// order) and the ratios Synchronous/Asynchronous and Asynchronous/single.
func writeDurabilityTable(b *strings.Builder, results []*durabilityResult, seconds int) {
	type figures struct{ tps, avg, p95 float64 }
	fig := make([]figures, len(results))
	w := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "setting\tTPS\tavg ms\tp95 ms\tTPS by round\t")
	for i, r := range results {
		fig[i] = figures{
			tps: float64(r.count) / float64(seconds*len(r.perRound)),
			avg: mean(r.latencies),
			p95: percentile(r.latencies, 0.95),
		}
		var rounds []string
		for _, v := range r.perRound {
			rounds = append(rounds, strconv.FormatFloat(v, 'f', 0, 64))
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.2f\t%.2f\t%s\t\n", r.setting.label, fig[i].tps, fig[i].avg, fig[i].p95, strings.Join(rounds, ", "))
	}
	for _, q := range [][2]int{{2, 1}, {1, 0}} {
		a, b := fig[q[0]], fig[q[1]]
		fmt.Fprintf(w, "%s / %s\t%.2f\t%.2f\t%.2f\t\t\n", results[q[0]].setting.name, results[q[1]].setting.name, a.tps/b.tps, a.avg/b.avg, a.p95/b.p95)
	}
	w.Flush()
}

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// percentile is the nearest-rank p-th percentile of xs (0 < p <= 1).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)]
}

// envPositive is the environment variable name as a positive number of seconds or rounds,
// def when unset.
func envPositive(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s", name)
	require.Positive(t, n, "%s", name)
	return n
}

// loadAverage is this machine's load averages over 1, 5 and 15 minutes (/proc/loadavg).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown: " + err.Error()
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// serviceHost is the client Service's DNS name of the Database db: its primary.
func serviceHost(ns, db string) string {
	return db + "." + ns + ".svc.cluster.local"
}

// --- PostgreSQL: pgbench -------------------------------------------------------------------

// pgbenchInit creates pgbench's tables at scale 1 (pgbench -i, as the Secret's user, who
// owns the database).
func pgbenchInit(t *testing.T, ns, db, host string) {
	t.Helper()
	name := "init-" + db
	phase, log := runPod(t, ns, name, pod(ns, name, db, `exec pgbench -h `+host+` -p "$PGPORT" -i -s 1 -q`, "", ""))
	require.Equal(t, corev1.PodSucceeded, phase, log)
}

// pgbenchPod runs pgbench's simple-update transaction (-N: the accounts row updated and
// read, a history row inserted, in one transaction; the branches' and tellers' rows, which
// every client of the default TPC-B-like transaction updates at scale 1, are left alone, so
// that what is measured is the commit and not the queue on those rows that a longer commit
// makes longer), durabilityClients connections on two threads for seconds, logging every
// transaction (--log: "client_id transaction_no time script_no time_epoch time_us", time in
// microseconds, https://www.postgresql.org/docs/15/pgbench.html#PGBENCH-LOGGING). It prints
// pgbench's summary, then the log.
func pgbenchPod(ns, name, db, host string, seconds int) string {
	return pod(ns, name, db, fmt.Sprintf(`cd /tmp && pgbench -h %s -p "$PGPORT" -N -c %d -j 2 -T %d --log --log-prefix=/tmp/tx; rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
cat /tmp/tx.*`, host, durabilityClients, seconds), "", "")
}

// parsePgbench returns the transactions of pgbench's per-transaction log, and how many
// failed (time "failed", PostgreSQL 15's pgbench).
func parsePgbench(t *testing.T, log string) ([]transaction, int) {
	t.Helper()
	var txs []transaction
	failed := 0
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !allDigits(f[0]) || !allDigits(f[1]) || !allDigits(f[4]) || !allDigits(f[5]) {
			continue
		}
		if f[2] == "failed" {
			failed++
			continue
		}
		us, err := strconv.ParseFloat(f[2], 64)
		require.NoError(t, err, line)
		sec, err := strconv.ParseFloat(f[4], 64)
		require.NoError(t, err, line)
		frac, err := strconv.ParseFloat(f[5], 64)
		require.NoError(t, err, line)
		txs = append(txs, transaction{end: sec + frac/1e6, latency: us / 1000})
	}
	return txs, failed
}

// pgbenchTPS is pgbench's own figure from its summary, ", pgbench: tps = ...", for the
// reader to compare (empty in a log without one).
func pgbenchTPS(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "tps = ") {
			return ", pgbench: " + strings.TrimSpace(line)
		}
	}
	return ""
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// checkPostgreSQLDurability returns an error unless the primary's synchronous_standby_names
// and its standby's sync_state (pg_stat_replication) are those of the setting: ANY 1 and
// quorum for Synchronous, none and async for Asynchronous, none and no standby for one server.
func checkPostgreSQLDurability(t *testing.T, ns, primary string, s durabilitySetting, _ bool, _ int) error {
	t.Helper()
	out := strings.TrimSpace(psqlAsSuperuserIn(t, ns, primary,
		`SELECT current_setting('synchronous_standby_names') || '|' || coalesce((SELECT string_agg(sync_state, ',') FROM pg_stat_replication), '')`))
	names, states, _ := strings.Cut(out, "|")
	switch {
	case s.replicas == 1 && out == "|":
	case s.durability == examplev1.DurabilitySynchronous && strings.HasPrefix(names, "ANY 1 (") && states == "quorum":
	case s.replicas > 1 && s.durability != examplev1.DurabilitySynchronous && out == "|async":
	default:
		return fmt.Errorf("%s: synchronous_standby_names %q, the standbys' sync_state %q", s.label, names, states)
	}
	return nil
}

// --- MySQL: pgbench's transaction through the mysql client ---------------------------------

// mysqlBenchInit creates pgbench's accounts (at scale 1) and history tables, as the Secret's
// user (who has every privilege on the database). History has an auto-increment key: InnoDB
// would otherwise cluster it on a hidden row ID of its own.
func mysqlBenchInit(t *testing.T, ns, db, host string) {
	t.Helper()
	phase, log := mysqlAt(t, ns, "init-"+db, db, host, fmt.Sprintf(`
CREATE TABLE pgbench_accounts (aid INT NOT NULL PRIMARY KEY, bid INT, abalance INT, filler CHAR(84));
SET SESSION cte_max_recursion_depth = %[1]d;
INSERT INTO pgbench_accounts (aid, bid, abalance, filler)
  WITH RECURSIVE n (aid) AS (SELECT 1 UNION ALL SELECT aid + 1 FROM n WHERE aid < %[1]d) SELECT aid, 1, 0, '' FROM n;
CREATE TABLE pgbench_history (id BIGINT AUTO_INCREMENT PRIMARY KEY, tid INT, bid INT, aid INT, delta INT, mtime DATETIME, filler CHAR(22));
SELECT count(*) FROM pgbench_accounts;`, durabilityAccounts))
	require.Equal(t, corev1.PodSucceeded, phase, log)
	require.Equal(t, strconv.Itoa(durabilityAccounts), lastLines(log, 1), log)
}

// mysqlBenchPod runs pgbench's simple-update transaction (pgbenchPod) on the same tables
// with the mysql client: durabilityClients clients, each one mysql session fed by awk one
// transaction after the other (BEGIN, the UPDATE, the SELECT, the INSERT, COMMIT: the
// statements pgbench sends, one round trip each), for seconds, after emptying the history as
// pgbench does. mysqlslap, which the image holds, reports only the average time of a whole
// run, no transaction's latency, hence no percentile. Each transaction's SELECT also returns
// the server's clock (UNIX_TIMESTAMP(NOW(6))): the time between two consecutive ones of a
// session is one transaction's latency, for a client that never pauses. The Pod prints
// "client<TAB>time<TAB>abalance" for every transaction, then any client's errors (and fails).
func mysqlBenchPod(ns, name, db, host string, seconds int) string {
	script := fmt.Sprintf(`$MYSQL -e "TRUNCATE TABLE pgbench_history" || exit 1
for c in $(seq %[1]d); do
  (timeout %[2]d awk -v c="$c" 'BEGIN {
    srand(c)
    while (1) {
      aid = int(rand() * %[3]d) + 1; tid = int(rand() * 10) + 1; delta = int(rand() * 10001) - 5000
      printf "BEGIN;\nUPDATE pgbench_accounts SET abalance = abalance + %%d WHERE aid = %%d;\nSELECT %%d, UNIX_TIMESTAMP(NOW(6)), abalance FROM pgbench_accounts WHERE aid = %%d;\nINSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%%d, 1, %%d, %%d, CURRENT_TIMESTAMP);\nCOMMIT;\n", delta, aid, c, aid, tid, aid, delta
      fflush()
    }
  }' | $MYSQL >/tmp/out.$c 2>/tmp/err.$c) &
done
wait
failed=0
for c in $(seq %[1]d); do
  if [ -s /tmp/err.$c ]; then sed "s/^/client $c: /" /tmp/err.$c; failed=1; fi
done
cat /tmp/out.*
exit $failed`, durabilityClients, seconds, durabilityAccounts)
	return mysqlPod(ns, name, db, host, script, "", false)
}

// parseMySQLBench returns the transactions mysqlBenchPod printed, each with the time since
// the same client's previous one as its latency (NaN for a client's first). A client's
// error fails the Pod, so none is counted here.
func parseMySQLBench(t *testing.T, log string) ([]transaction, int) {
	t.Helper()
	type row struct {
		client string
		at     float64
	}
	var rows []row
	for _, line := range strings.Split(log, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || !allDigits(f[0]) {
			continue
		}
		at, err := strconv.ParseFloat(f[1], 64)
		require.NoError(t, err, line)
		rows = append(rows, row{f[0], at})
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.client, b.client), cmp.Compare(a.at, b.at))
	})
	txs := make([]transaction, len(rows))
	for i, r := range rows {
		txs[i] = transaction{end: r.at, latency: math.NaN()}
		if i > 0 && rows[i-1].client == r.client {
			txs[i].latency = (r.at - rows[i-1].at) * 1000
		}
	}
	return txs, 0
}

// semiSyncStatus is the primary's Rpl_semi_sync_source_* status variables
// (https://dev.mysql.com/doc/refman/9.7/en/replication-options-source.html), empty when the
// plugin is not loaded.
func semiSyncStatus(t *testing.T, ns, primary string) map[string]string {
	t.Helper()
	status := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(mysqlAsSuperuserIn(t, ns, primary, `SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_source_%'`)), "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok {
			status[k] = v
		}
	}
	return status
}

// semiSync remembers each Synchronous primary's acknowledged and unacknowledged commits
// before the loads.
var semiSync = map[string][2]int{}

// checkMySQLDurability returns an error unless semi-synchronous replication is on at a
// Synchronous primary and off elsewhere; after the loads, also unless the Synchronous primary
// committed nothing without a replica's acknowledgement (Rpl_semi_sync_source_no_tx) and had
// the counted transactions acknowledged (Rpl_semi_sync_source_yes_tx). With AFTER_SYNC the
// source waits once for each binary log group commit, which holds at most one transaction of
// each client, and counts that wait once: yes_tx grows by at least the counted transactions
// divided by the clients.
func checkMySQLDurability(t *testing.T, ns, primary string, s durabilitySetting, after bool, counted int) error {
	t.Helper()
	st := semiSyncStatus(t, ns, primary)
	on := st["Rpl_semi_sync_source_status"] == "ON"
	if s.durability != examplev1.DurabilitySynchronous {
		if on {
			return fmt.Errorf("%s: semi-synchronous replication on: %v", s.label, st)
		}
		return nil
	}
	if !on {
		return fmt.Errorf("%s: semi-synchronous replication off: %v", s.label, st)
	}
	yes, err := strconv.Atoi(st["Rpl_semi_sync_source_yes_tx"])
	if err != nil {
		return fmt.Errorf("%s: %w: %v", s.label, err, st)
	}
	no, err := strconv.Atoi(st["Rpl_semi_sync_source_no_tx"])
	if err != nil {
		return fmt.Errorf("%s: %w: %v", s.label, err, st)
	}
	key := ns + "/" + primary
	if !after {
		semiSync[key] = [2]int{yes, no}
		return nil
	}
	before := semiSync[key]
	if (yes-before[0])*durabilityClients < counted || no != before[1] {
		return fmt.Errorf("%s: during the loads, %d commits acknowledged by a replica (%d counted), %d without", s.label, yes-before[0], counted, no-before[1])
	}
	return nil
}
