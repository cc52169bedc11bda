package database

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
)

// The per-Database gauges say what each Database's status says: a replicated PostgreSQL
// Database that is Ready, with a replica streaming and one not, and a MySQL Database whose
// primary takes no writes after a failover, with a member whose server does not answer.
func TestTheDatabaseMetricsReportEachDatabasesStatus(t *testing.T) {
	since := metav1.NewTime(time.Unix(1_800_000_000, 0))
	failedOver := metav1.NewTime(time.Unix(1_799_999_000, 0))
	ready := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "15", Replicas: ptr.To[int32](3)},
		Status: examplev1.DatabaseStatus{
			Phase: examplev1.DatabasePhaseReady, ReadyReplicas: 3, Primary: "orders-0",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllReplicasReady", Message: "free text never a label"}},
			Members: []examplev1.DatabaseMember{
				{Name: "orders-0", Role: examplev1.MemberRolePrimary, Ready: true},
				{Name: "orders-1", Role: examplev1.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](4096), LagSeconds: ptr.To[int64](2)},
				{Name: "orders-2", Role: examplev1.MemberRoleReplica, Ready: true},
				// Its server does not answer: no role, not streaming.
				{Name: "orders-3"},
			},
		},
	}
	writeless := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "carts"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EngineMySQL, Version: "9.7"},
		Status: examplev1.DatabaseStatus{
			Phase: examplev1.DatabasePhaseDegraded, Primary: "carts-1", PrimaryLastWritableTime: &since, LastFailoverTime: &failedOver,
			Members: []examplev1.DatabaseMember{{Name: "carts-1"}},
		},
	}
	collector := newDatabaseCollector(func() []*examplev1.Database { return []*examplev1.Database{ready, writeless} })
	want := `
# HELP database_info [ALPHA] Information about a Database: its engine and spec.version; always 1.
# TYPE database_info gauge
database_info{database="carts",engine="mysql",namespace="shop",version="9.7"} 1
database_info{database="orders",engine="postgresql",namespace="shop",version="15"} 1
# HELP database_status_condition [ALPHA] The Database's conditions: 1 for each condition type's current status (True, False or Unknown), 0 for the others.
# TYPE database_status_condition gauge
database_status_condition{condition="Ready",database="orders",namespace="shop",status="False"} 0
database_status_condition{condition="Ready",database="orders",namespace="shop",status="True"} 1
database_status_condition{condition="Ready",database="orders",namespace="shop",status="Unknown"} 0
# HELP database_spec_replicas [ALPHA] The Database's spec.replicas: how many servers it asks for.
# TYPE database_spec_replicas gauge
database_spec_replicas{database="carts",namespace="shop"} 1
database_spec_replicas{database="orders",namespace="shop"} 3
# HELP database_status_ready_replicas [ALPHA] The Database's status.readyReplicas: how many of its servers are ready.
# TYPE database_status_ready_replicas gauge
database_status_ready_replicas{database="carts",namespace="shop"} 0
database_status_ready_replicas{database="orders",namespace="shop"} 3
# HELP database_primary_writable [ALPHA] 1 while the Database's primary takes writes as far as the controller saw at its last check (its server answered as the primary), 0 before its server first answered so and from the check that found it not taking writes (status.primaryLastWritableTime set).
# TYPE database_primary_writable gauge
database_primary_writable{database="carts",namespace="shop"} 0
database_primary_writable{database="orders",namespace="shop"} 1
# HELP database_primary_last_writable_timestamp_seconds [ALPHA] While the primary takes no writes, the last time the controller saw it take them (status.primaryLastWritableTime), in seconds since the Unix epoch; absent while it does.
# TYPE database_primary_last_writable_timestamp_seconds gauge
database_primary_last_writable_timestamp_seconds{database="carts",namespace="shop"} 1.8e+09
# HELP database_last_failover_timestamp_seconds [ALPHA] When an automatic failover last promoted a replica of the Database (status.lastFailoverTime), in seconds since the Unix epoch; absent when none did.
# TYPE database_last_failover_timestamp_seconds gauge
database_last_failover_timestamp_seconds{database="carts",namespace="shop"} 1.799999e+09
# HELP database_member_role [ALPHA] Each member's role as its server answered (status.members): 1 for the current role (primary, replica, or unknown while it does not answer), 0 for the others.
# TYPE database_member_role gauge
database_member_role{database="carts",member="carts-1",namespace="shop",role="primary"} 0
database_member_role{database="carts",member="carts-1",namespace="shop",role="replica"} 0
database_member_role{database="carts",member="carts-1",namespace="shop",role="unknown"} 1
database_member_role{database="orders",member="orders-0",namespace="shop",role="primary"} 1
database_member_role{database="orders",member="orders-0",namespace="shop",role="replica"} 0
database_member_role{database="orders",member="orders-0",namespace="shop",role="unknown"} 0
database_member_role{database="orders",member="orders-1",namespace="shop",role="primary"} 0
database_member_role{database="orders",member="orders-1",namespace="shop",role="replica"} 1
database_member_role{database="orders",member="orders-1",namespace="shop",role="unknown"} 0
database_member_role{database="orders",member="orders-2",namespace="shop",role="primary"} 0
database_member_role{database="orders",member="orders-2",namespace="shop",role="replica"} 1
database_member_role{database="orders",member="orders-2",namespace="shop",role="unknown"} 0
database_member_role{database="orders",member="orders-3",namespace="shop",role="primary"} 0
database_member_role{database="orders",member="orders-3",namespace="shop",role="replica"} 0
database_member_role{database="orders",member="orders-3",namespace="shop",role="unknown"} 1
# HELP database_member_streaming [ALPHA] For each member but the primary (status.primary), 1 while it streams changes from the primary, else 0 (a replica behind, or a server not answering, not running, or of another timeline); absent for the primary.
# TYPE database_member_streaming gauge
database_member_streaming{database="orders",member="orders-1",namespace="shop"} 1
database_member_streaming{database="orders",member="orders-2",namespace="shop"} 0
database_member_streaming{database="orders",member="orders-3",namespace="shop"} 0
# HELP database_member_replication_lag_bytes [ALPHA] For a replica, how far its replayed changes trail the primary's, in bytes (PostgreSQL's WAL positions); absent where the engine does not count in bytes.
# TYPE database_member_replication_lag_bytes gauge
database_member_replication_lag_bytes{database="orders",member="orders-1",namespace="shop"} 4096
# HELP database_member_replication_lag_seconds [ALPHA] For a replica, how far its replayed changes trail the primary's, in seconds, as its engine reports it.
# TYPE database_member_replication_lag_seconds gauge
database_member_replication_lag_seconds{database="orders",member="orders-1",namespace="shop"} 2
`
	require.NoError(t, testutil.CustomCollectAndCompare(collector, strings.NewReader(want),
		"database_info", "database_status_condition", "database_spec_replicas", "database_status_ready_replicas",
		"database_primary_writable", "database_primary_last_writable_timestamp_seconds", "database_last_failover_timestamp_seconds",
		"database_member_role", "database_member_streaming", "database_member_replication_lag_bytes", "database_member_replication_lag_seconds"))

	// One series per phase, 1 for the current one.
	require.NoError(t, testutil.CustomCollectAndCompare(newDatabaseCollector(func() []*examplev1.Database { return []*examplev1.Database{writeless} }), strings.NewReader(`
# HELP database_status_phase [ALPHA] The Database's status.phase: 1 for the current phase, 0 for the others.
# TYPE database_status_phase gauge
database_status_phase{database="carts",namespace="shop",phase="Degraded"} 1
database_status_phase{database="carts",namespace="shop",phase="Deleting"} 0
database_status_phase{database="carts",namespace="shop",phase="Failed"} 0
database_status_phase{database="carts",namespace="shop",phase="Pending"} 0
database_status_phase{database="carts",namespace="shop",phase="Provisioning"} 0
database_status_phase{database="carts",namespace="shop",phase="Ready"} 0
`), "database_status_phase"))

	// No cache yet: nothing.
	require.NoError(t, testutil.CustomCollectAndCompare(newDatabaseCollector(nil), strings.NewReader(""), "database_info"))
}

// The backup gauges say what status.backup and spec.backup say: a Database backed up daily
// whose last backup succeeded while another runs, one whose last backup failed without a
// schedule, and one without spec.backup, which has none.
func TestTheDatabaseMetricsReportBackups(t *testing.T) {
	succeeded, failed := metav1.NewTime(time.Unix(1_800_000_000, 0)), metav1.NewTime(time.Unix(1_800_000_600, 0))
	first, archived := metav1.NewTime(time.Unix(1_799_000_000, 0)), metav1.NewTime(time.Unix(1_800_000_060, 0))
	backup := func(name, schedule string, status *examplev1.DatabaseBackupStatus) *examplev1.Database {
		db := &examplev1.Database{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "15"},
			Status:     examplev1.DatabaseStatus{Backup: status},
		}
		if schedule != "-" {
			db.Spec.Backup = &examplev1.DatabaseBackupPolicy{Schedule: schedule}
		}
		return db
	}
	dbs := []*examplev1.Database{
		backup("orders", "0 3 * * *", &examplev1.DatabaseBackupStatus{LastSuccessfulTime: &succeeded, ActiveJob: "orders-backup-1",
			FirstRecoverableTime: &first, LastArchivedTime: &archived}),
		backup("carts", "", &examplev1.DatabaseBackupStatus{LastFailureTime: &failed}),
		backup("stock", "-", nil),
	}
	require.NoError(t, testutil.CustomCollectAndCompare(newDatabaseCollector(func() []*examplev1.Database { return dbs }), strings.NewReader(`
# HELP database_backup_first_recoverable_timestamp_seconds [ALPHA] The first time a restore of the Database can reach, just after the end of the oldest backup its store keeps (status.backup.firstRecoverableTime), in seconds since the Unix epoch; absent before the first backup's report.
# TYPE database_backup_first_recoverable_timestamp_seconds gauge
database_backup_first_recoverable_timestamp_seconds{database="orders",namespace="shop"} 1.799e+09
# HELP database_backup_last_archived_timestamp_seconds [ALPHA] When the Database's primary last archived its changes to the store (status.backup.lastArchivedTime), in seconds since the Unix epoch: the end of the recoverability window; absent before the first.
# TYPE database_backup_last_archived_timestamp_seconds gauge
database_backup_last_archived_timestamp_seconds{database="orders",namespace="shop"} 1.80000006e+09
# HELP database_backup_last_failure_timestamp_seconds [ALPHA] When the Database's last backup that failed gave up (status.backup.lastFailureTime), in seconds since the Unix epoch; absent when none failed.
# TYPE database_backup_last_failure_timestamp_seconds gauge
database_backup_last_failure_timestamp_seconds{database="carts",namespace="shop"} 1.8000006e+09
# HELP database_backup_last_success_timestamp_seconds [ALPHA] When the Database's last backup that succeeded completed (status.backup.lastSuccessfulTime), in seconds since the Unix epoch; absent before the first.
# TYPE database_backup_last_success_timestamp_seconds gauge
database_backup_last_success_timestamp_seconds{database="orders",namespace="shop"} 1.8e+09
# HELP database_backup_running [ALPHA] For a Database with spec.backup, 1 while a backup Job runs (status.backup.activeJob), else 0; absent without spec.backup.
# TYPE database_backup_running gauge
database_backup_running{database="carts",namespace="shop"} 0
database_backup_running{database="orders",namespace="shop"} 1
# HELP database_backup_schedule_interval_seconds [ALPHA] For a Database with spec.backup.schedule, the time between the schedule's next two times, in seconds (86400 for a daily one); absent without a schedule.
# TYPE database_backup_schedule_interval_seconds gauge
database_backup_schedule_interval_seconds{database="orders",namespace="shop"} 86400
`), "database_backup_last_success_timestamp_seconds", "database_backup_last_failure_timestamp_seconds",
		"database_backup_first_recoverable_timestamp_seconds", "database_backup_last_archived_timestamp_seconds",
		"database_backup_running", "database_backup_schedule_interval_seconds"))
}

// The metric names, types and help texts follow Prometheus's naming rules (promlint), the
// counters' included.
func TestTheDatabaseMetricsPassPromlint(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	db := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "15"},
		Status: examplev1.DatabaseStatus{Phase: examplev1.DatabasePhaseReady, Primary: "orders-0",
			PrimaryLastWritableTime: &metav1.Time{}, LastFailoverTime: &metav1.Time{},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
			Members: []examplev1.DatabaseMember{{Name: "orders-1", Role: examplev1.MemberRoleReplica,
				LagBytes: ptr.To[int64](1), LagSeconds: ptr.To[int64](1)}}},
	}
	reg.CustomMustRegister(newDatabaseCollector(func() []*examplev1.Database { return []*examplev1.Database{db} }))
	reg.MustRegister(failoversTotal, switchoversTotal)
	failoversTotal.WithLabelValues("shop", "orders").Inc()
	switchoversTotal.WithLabelValues("shop", "orders").Inc()
	memberReports.set(db, time.Now(), map[string]memberReport{"orders-1": {
		statistics:     &engine.Statistics{Connections: 1, MaxConnections: 100, Commits: 1, DataBytes: 1, LogBytes: 1},
		volumeCapacity: 1 << 30}})
	t.Cleanup(func() { forgetMetrics("shop", "orders") })
	families, err := reg.Gather()
	require.NoError(t, err)
	var text strings.Builder
	for _, mf := range families {
		_, err := expfmt.MetricFamilyToText(&text, mf)
		require.NoError(t, err)
	}
	require.Contains(t, text.String(), "database_failovers_total")
	require.Contains(t, text.String(), "database_member_replication_lag_seconds")
	require.Contains(t, text.String(), "database_member_transactions_committed_total")
	require.Contains(t, text.String(), "database_member_volume_capacity_bytes")
	problems, err := testutil.NewPromLinter(strings.NewReader(text.String())).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
}

// statisticsObserver is an Observer whose members' states are their engine.Statistics.
type statisticsObserver struct{ engine.Observer }

func (statisticsObserver) Statistics(m *engine.Member) (engine.Statistics, bool) {
	st, ok := m.State.(engine.Statistics)
	return st, ok && m.Answered
}

// The statistics each member's server reported at the last check are reported for the
// members in status, none for a member that did not answer, and none once the Database is
// forgotten; an engine without statistics records none. The capacity of each member's
// bound data claim is reported whether its server answers or not. A check older than
// ReportMaxAge, or of another Database of the same name, is not reported.
func TestTheDatabaseMetricsReportEachServersStatistics(t *testing.T) {
	db := &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "stats", UID: "stats-uid"},
		Spec:       examplev1.DatabaseSpec{Engine: examplev1.EngineMySQL, Version: "9.7", Replicas: ptr.To[int32](2)},
		Status: examplev1.DatabaseStatus{Primary: "stats-0", Members: []examplev1.DatabaseMember{
			{Name: "stats-0", Role: examplev1.MemberRolePrimary}, {Name: "stats-1"}}},
	}
	t.Cleanup(func() { forgetMetrics("shop", "stats") })
	capacity := func(m *member) int64 { return map[string]int64{"stats-0": 10 << 30, "stats-1": 10 << 30}[m.Name] }
	answered := []*member{
		{Name: "stats-0", Answered: true, Writable: true, State: engine.Statistics{
			Connections: 3, MaxConnections: 151, Commits: 1200, Rollbacks: 4, DataBytes: 1 << 20, LogBytes: 16 << 20, LockWaits: 1}},
		{Name: "stats-1", Err: io.EOF},
	}
	require.True(t, recordMembers(db, statisticsObserver{}, answered, capacity, time.Now()), "a server gave its statistics")
	// A collector registers once: each comparison makes its own.
	collector := func() metrics.StableCollector {
		return newDatabaseCollector(func() []*examplev1.Database { return []*examplev1.Database{db} })
	}
	stats := []string{"database_member_connections", "database_member_max_connections", "database_member_transactions_committed_total",
		"database_member_transactions_rolled_back_total", "database_member_data_bytes", "database_member_log_bytes", "database_member_lock_waits"}
	volumes := `
# HELP database_member_volume_capacity_bytes [ALPHA] Capacity of the member's data volume, in bytes: its data claim's status.capacity; absent while the claim is not bound.
# TYPE database_member_volume_capacity_bytes gauge
database_member_volume_capacity_bytes{database="stats",member="stats-0",namespace="shop"} 1.073741824e+10
database_member_volume_capacity_bytes{database="stats",member="stats-1",namespace="shop"} 1.073741824e+10
`
	require.NoError(t, testutil.CustomCollectAndCompare(collector(), strings.NewReader(volumes), "database_member_volume_capacity_bytes"))
	require.NoError(t, testutil.CustomCollectAndCompare(collector(), strings.NewReader(`
# HELP database_member_connections [ALPHA] Sessions open on the member's server, the controller's own check among them, as the server last reported them (PostgreSQL: client backends in pg_stat_activity; MySQL: Threads_connected, replicas' connections too; MongoDB: connections.current).
# TYPE database_member_connections gauge
database_member_connections{database="stats",member="stats-0",namespace="shop"} 3
# HELP database_member_max_connections [ALPHA] The most sessions the member's server accepts (max_connections; MongoDB: connections current plus available).
# TYPE database_member_max_connections gauge
database_member_max_connections{database="stats",member="stats-0",namespace="shop"} 151
# HELP database_member_transactions_committed_total [ALPHA] Transactions the member's server committed since it started, read-only ones and the controller's checks among them (PostgreSQL: pg_stat_database's xact_commit over every database; MySQL: Handler_commit; MongoDB: multi-document transactions only); begins again at 0 when the server restarts.
# TYPE database_member_transactions_committed_total counter
database_member_transactions_committed_total{database="stats",member="stats-0",namespace="shop"} 1200
# HELP database_member_transactions_rolled_back_total [ALPHA] Transactions the member's server rolled back since it started (PostgreSQL: xact_rollback; MySQL: Handler_rollback; MongoDB: multi-document transactions aborted); begins again at 0 when the server restarts.
# TYPE database_member_transactions_rolled_back_total counter
database_member_transactions_rolled_back_total{database="stats",member="stats-0",namespace="shop"} 4
# HELP database_member_data_bytes [ALPHA] Size on disk of the data of the member's databases, in bytes (PostgreSQL: pg_database_size of each; MySQL: the file-per-table tablespaces of every table outside the system schemas; MongoDB: every database but local).
# TYPE database_member_data_bytes gauge
database_member_data_bytes{database="stats",member="stats-0",namespace="shop"} 1.048576e+06
# HELP database_member_log_bytes [ALPHA] Size on disk of the log of changes the member's server keeps, in bytes: PostgreSQL's WAL segments in pg_wal, MySQL's binary logs, MongoDB's local database (the oplog); grows when a checkpoint, the archiving or a replica holds it back.
# TYPE database_member_log_bytes gauge
database_member_log_bytes{database="stats",member="stats-0",namespace="shop"} 1.6777216e+07
# HELP database_member_lock_waits [ALPHA] Sessions of the member's server waiting for a lock another holds (PostgreSQL: pg_locks not granted; MySQL: Innodb_row_lock_current_waits; MongoDB: globalLock.currentQueue.total).
# TYPE database_member_lock_waits gauge
database_member_lock_waits{database="stats",member="stats-0",namespace="shop"} 1
`), stats...))

	all := append(slices.Clone(stats), "database_member_volume_capacity_bytes")

	// A check where no server answers leaves no statistics, the volumes' capacity still.
	require.False(t, recordMembers(db, statisticsObserver{}, []*member{{Name: "stats-0", Err: io.EOF}, {Name: "stats-1", Err: io.EOF}}, capacity, time.Now()))
	require.NoError(t, testutil.CustomCollectAndCompare(collector(), strings.NewReader(""), stats...))
	require.NoError(t, testutil.CustomCollectAndCompare(collector(), strings.NewReader(volumes), "database_member_volume_capacity_bytes"))
	// An engine without statistics reports none; claims not bound, no capacity.
	require.False(t, recordMembers(db, nil, answered, func(*member) int64 { return 0 }, time.Now()))
	require.Empty(t, memberReports.get(db, time.Now()))
	// A check older than ReportMaxAge is not reported (this process no longer checks).
	recordMembers(db, statisticsObserver{}, answered, capacity, time.Now().Add(-ReportMaxAge-time.Second))
	require.NoError(t, testutil.CustomCollectAndCompare(collector(), strings.NewReader(""), all...))
	// Nor one of a Database of the same name deleted since.
	recordMembers(db, statisticsObserver{}, answered, capacity, time.Now())
	again := db.DeepCopy()
	again.UID = "stats-uid-2"
	require.Empty(t, memberReports.get(again, time.Now()))
	require.NotEmpty(t, memberReports.get(db, time.Now()))
	forgetMetrics("shop", "stats")
	require.NoError(t, testutil.CustomCollectAndCompare(collector(), strings.NewReader(""), all...))
}

// /metrics (legacyregistry) reports the Databases of the latest cache RegisterMetrics was
// given: a controller's new leadership term has new informers.
func TestRegisterMetricsReportsTheLatestCache(t *testing.T) {
	t.Cleanup(func() { metricsDatabases.Store(nil) })
	cache := func(name string) func() []*examplev1.Database {
		return func() []*examplev1.Database {
			return []*examplev1.Database{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
				Spec: examplev1.DatabaseSpec{Engine: examplev1.EngineMySQL, Version: "9.7"}}}
		}
	}
	info := func(name string) string {
		return `database_info{database="` + name + `",engine="mysql",namespace="shop",version="9.7"} 1`
	}
	scrape := func() string {
		families, err := legacyregistry.DefaultGatherer.Gather()
		require.NoError(t, err)
		var text strings.Builder
		for _, mf := range families {
			_, err := expfmt.MetricFamilyToText(&text, mf)
			require.NoError(t, err)
		}
		return text.String()
	}
	RegisterMetrics(cache("first-term"))
	require.Contains(t, scrape(), info("first-term"))
	RegisterMetrics(cache("second-term"))
	RegisterMetrics(nil)
	body := scrape()
	require.Contains(t, body, info("second-term"))
	require.NotContains(t, body, info("first-term"))
}

// BenchmarkScrapeDatabaseMetrics is one scrape of the per-Database metrics of 1,000 Ready
// Databases of one member each, as the controller's /metrics serves it (the registry's
// Gather, then the text format); it reports the samples of a scrape and the time per
// sample. Profile it with -cpuprofile to see where a scrape's CPU goes; hack/bench measures
// what scrapes cost the running controller.
func BenchmarkScrapeDatabaseMetrics(b *testing.B) {
	databases := make([]*examplev1.Database, 1000)
	for i := range databases {
		name := fmt.Sprintf("db-%04d", i)
		databases[i] = &examplev1.Database{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec:       examplev1.DatabaseSpec{Engine: examplev1.EnginePostgreSQL, Version: "15", Replicas: ptr.To[int32](1)},
			Status: examplev1.DatabaseStatus{
				Phase: examplev1.DatabasePhaseReady, ReadyReplicas: 1, Primary: name + "-0",
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}, {Type: "Replicating", Status: metav1.ConditionTrue},
					{Type: "Degraded", Status: metav1.ConditionFalse}},
				Members: []examplev1.DatabaseMember{{Name: name + "-0", Role: examplev1.MemberRolePrimary, Ready: true}},
			},
		}
	}
	reg := metrics.NewKubeRegistry()
	reg.CustomMustRegister(newDatabaseCollector(func() []*examplev1.Database { return databases }))
	samples := 0
	b.ReportAllocs()
	for b.Loop() {
		families, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		samples = 0
		for _, mf := range families {
			samples += len(mf.GetMetric())
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(samples), "samples/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
}

// A Ready Database is looked at again only when something changes, but one whose servers
// give their statistics is checked every RequeueAfterReplication, one server or more, so
// that what the metrics report of it stays within ReportMaxAge.
func TestADatabaseWhoseServersGiveStatisticsIsCheckedAgain(t *testing.T) {
	ready := examplev1.DatabaseStatus{Phase: examplev1.DatabasePhaseReady}
	rep := &replication{observed: true}
	require.Equal(t, Result{}, requeue(observation{replicas: 1, replication: rep}, ready))
	require.Equal(t, Result{RequeueAfter: RequeueAfterReplication}, requeue(observation{replicas: 1, replication: rep, statistics: true}, ready))
	require.Less(t, RequeueAfterReplication, ReportMaxAge)
	// A shorter wait is not made longer.
	provisioning := examplev1.DatabaseStatus{Phase: examplev1.DatabasePhaseProvisioning}
	require.Equal(t, Result{RequeueAfter: RequeueAfterNotReady}, requeue(observation{replicas: 1, replication: rep, statistics: true}, provisioning))
}
