//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// memberStatistics are the controller's database_member_* series of one member of the
// Database ns/db, by metric name, from a scrape of its /metrics.
func memberStatistics(t *testing.T, ns, db, member string) map[string]float64 {
	t.Helper()
	labels := `{database="` + db + `",member="` + member + `",namespace="` + ns + `"} `
	out := map[string]float64{}
	for _, line := range strings.Split(controllerMetrics(t), "\n") {
		name, value, ok := strings.Cut(line, labels)
		if !ok || !strings.HasPrefix(name, "database_member_") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, line)
		out[name] = v
	}
	return out
}

// statisticsProbe is how a test asks one engine's server what the controller's statistics
// of it say: each query's answer is one number.
type statisticsProbe struct {
	at func(t *testing.T, ns, pod, sql string) string
	// commits, maxConnections, dataBytes, logBytes read the server's own figures.
	commits, maxConnections, dataBytes, logBytes string
	// logBytesOf sums logBytes' answer when it is a listing (MySQL's SHOW BINARY LOGS).
	logBytesOf func(string) float64
	// lockSetup makes the table the data check counts and the lock wait takes place on;
	// lockWait is a shell command, run in the database container, in which one session
	// holds a lock for 15 s while another waits for it.
	lockSetup, lockWait string
}

var statisticsProbes = map[examplev1.Engine]statisticsProbe{
	examplev1.EnginePostgreSQL: {
		at:             psqlAsSuperuserIn,
		commits:        "SELECT sum(xact_commit) FROM pg_stat_database",
		maxConnections: "SHOW max_connections",
		dataBytes:      "SELECT sum(pg_database_size(oid)) FROM pg_database WHERE datallowconn",
		logBytes:       "SELECT sum(size) FROM pg_ls_waldir()",
		lockSetup:      "CREATE TABLE IF NOT EXISTS e2e_locks (id int)",
		lockWait: `q() { psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 --no-psqlrc --quiet -c "$1"; }
q "BEGIN; LOCK TABLE e2e_locks; SELECT pg_sleep(15); COMMIT;" & sleep 1; q "SELECT count(*) FROM e2e_locks"; wait`,
	},
	examplev1.EngineMySQL: {
		at:             mysqlAsSuperuserIn,
		commits:        "SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Handler_commit'",
		maxConnections: "SELECT @@global.max_connections",
		dataBytes: `SELECT COALESCE(SUM(FILE_SIZE), 0) FROM information_schema.INNODB_TABLESPACES
			WHERE SPACE_TYPE = 'Single' AND NAME NOT LIKE 'mysql/%' AND NAME NOT LIKE 'sys/%'`,
		logBytes: "SHOW BINARY LOGS",
		logBytesOf: func(out string) float64 {
			var sum float64
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) >= 2 {
					n, _ := strconv.ParseFloat(f[1], 64)
					sum += n
				}
			}
			return sum
		},
		lockSetup: "CREATE DATABASE IF NOT EXISTS e2e_locks; CREATE TABLE IF NOT EXISTS e2e_locks.t (id int PRIMARY KEY); INSERT IGNORE INTO e2e_locks.t VALUES (1)",
		lockWait: `q() { MYSQL_PWD=$(cat ` + credentialsPath + `/superuser-password) mysql --user=root --batch -e "$1"; }
q "BEGIN; SELECT id FROM e2e_locks.t WHERE id = 1 FOR UPDATE; DO SLEEP(15); COMMIT;" & sleep 1; q "UPDATE e2e_locks.t SET id = 1 WHERE id = 1"; wait`,
	},
}

// testMemberStatistics checks the statistics the controller reports of the primary of the
// Database ns/db against what its server says: the commits counter between the server's
// figure before and after the scrape, max_connections equal, the sessions open at least the
// controller's own, the data and the log kept on disk within 10% (or a WAL segment) of the
// server's, the volume's capacity its data claim's, and a session waiting for a lock counted
// while it waits, then no more.
func testMemberStatistics(t *testing.T, engine examplev1.Engine, ns, db string) {
	p := statisticsProbes[engine]
	d, err := getDatabase(t, ns, db)
	require.NoError(t, err)
	primary := d.Status.Primary
	number := func(sql string) float64 {
		out := strings.TrimSpace(p.at(t, ns, primary, sql))
		v, err := strconv.ParseFloat(lastLines(out, 1), 64)
		require.NoError(t, err, "%s: %s", sql, out)
		return v
	}
	// A table of its own: the data is not all the system's.
	p.at(t, ns, primary, p.lockSetup)
	before := number(p.commits)
	var got map[string]float64
	// The controller checks a replicated primary every 5 s.
	eventually(t, 30*time.Second, func() error {
		got = memberStatistics(t, ns, db, primary)
		if c, ok := got["database_member_transactions_committed_total"]; !ok || c < before {
			return fmt.Errorf("no check of %s since its commits were %v: %v", primary, before, got)
		}
		return nil
	})
	after := number(p.commits)
	require.LessOrEqual(t, got["database_member_transactions_committed_total"], after)
	require.Equal(t, number(p.maxConnections), got["database_member_max_connections"])
	require.GreaterOrEqual(t, got["database_member_connections"], 1.0, "the controller's own session at least")
	require.Less(t, got["database_member_connections"], got["database_member_max_connections"])
	require.Contains(t, got, "database_member_transactions_rolled_back_total")
	data := number(p.dataBytes)
	require.Positive(t, data)
	require.InDelta(t, data, got["database_member_data_bytes"], 0.1*data)
	var logBytes float64
	if p.logBytesOf != nil {
		logBytes = p.logBytesOf(p.at(t, ns, primary, p.logBytes))
	} else {
		logBytes = number(p.logBytes)
	}
	require.Positive(t, logBytes)
	require.InDelta(t, logBytes, got["database_member_log_bytes"], math.Max(0.1*logBytes, 16<<20))
	require.Zero(t, got["database_member_lock_waits"])
	capacity, err := resource.ParseQuantity(kubectl(t, "get", "pvc", "-n", ns, "data-"+primary, "-o", "jsonpath={.status.capacity.storage}"))
	require.NoError(t, err)
	require.Equal(t, float64(capacity.Value()), got["database_member_volume_capacity_bytes"], "the data claim's capacity")

	done := make(chan error, 1)
	go func() {
		out, errOut, err := kubectlAs(cluster.KubeconfigPath, "", "exec", "-n", ns, primary, "-c", "database", "--", "sh", "-c", p.lockWait)
		if err != nil {
			err = fmt.Errorf("%v: %s%s", err, out, errOut)
		}
		done <- err
	}()
	eventually(t, 15*time.Second, func() error {
		if n := memberStatistics(t, ns, db, primary)["database_member_lock_waits"]; n != 1 {
			return fmt.Errorf("%v sessions of %s wait for a lock", n, primary)
		}
		return nil
	})
	require.NoError(t, <-done)
	eventually(t, 15*time.Second, func() error {
		if n := memberStatistics(t, ns, db, primary)["database_member_lock_waits"]; n != 0 {
			return fmt.Errorf("%v sessions of %s wait for a lock once it was released", n, primary)
		}
		return nil
	})
	t.Logf("measured: %s's statistics as the controller reports them: %v", primary, got)
}
