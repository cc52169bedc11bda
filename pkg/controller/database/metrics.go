package database

import (
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/engine"
)

// The per-Database metrics. Their labels are bounded: the Database's namespace and name, a
// member's Pod name, and values the API enumerates (engine, catalog version, phase, condition
// type and status, role); no label carries free text such as a condition's message.
// Following kube-state-metrics, a state is a gauge of 1 for the current value (and 0 for the
// others where the values are a closed set), and a time is seconds since the Unix epoch.
var (
	databaseLabels = []string{"namespace", "database"}
	memberLabels   = []string{"namespace", "database", "member"}

	infoDesc = metrics.NewDesc("database_info",
		"Information about a Database: its engine and spec.version; always 1.",
		append(databaseLabels, "engine", "version"), nil, metrics.ALPHA, "")
	phaseDesc = metrics.NewDesc("database_status_phase",
		"The Database's status.phase: 1 for the current phase, 0 for the others.",
		append(databaseLabels, "phase"), nil, metrics.ALPHA, "")
	conditionDesc = metrics.NewDesc("database_status_condition",
		"The Database's conditions: 1 for each condition type's current status (True, False or Unknown), 0 for the others.",
		append(databaseLabels, "condition", "status"), nil, metrics.ALPHA, "")
	replicasDesc = metrics.NewDesc("database_spec_replicas",
		"The Database's spec.replicas: how many servers it asks for.",
		databaseLabels, nil, metrics.ALPHA, "")
	readyReplicasDesc = metrics.NewDesc("database_status_ready_replicas",
		"The Database's status.readyReplicas: how many of its servers are ready.",
		databaseLabels, nil, metrics.ALPHA, "")
	primaryWritableDesc = metrics.NewDesc("database_primary_writable",
		"1 while the Database's primary takes writes as far as the controller saw at its last check (its server answered as the primary), 0 before its server first answered so and from the check that found it not taking writes (status.primaryLastWritableTime set).",
		databaseLabels, nil, metrics.ALPHA, "")
	primaryLastWritableDesc = metrics.NewDesc("database_primary_last_writable_timestamp_seconds",
		"While the primary takes no writes, the last time the controller saw it take them (status.primaryLastWritableTime), in seconds since the Unix epoch; absent while it does.",
		databaseLabels, nil, metrics.ALPHA, "")
	lastFailoverDesc = metrics.NewDesc("database_last_failover_timestamp_seconds",
		"When an automatic failover last promoted a replica of the Database (status.lastFailoverTime), in seconds since the Unix epoch; absent when none did.",
		databaseLabels, nil, metrics.ALPHA, "")
	backupLastSuccessDesc = metrics.NewDesc("database_backup_last_success_timestamp_seconds",
		"When the Database's last backup that succeeded completed (status.backup.lastSuccessfulTime), in seconds since the Unix epoch; absent before the first.",
		databaseLabels, nil, metrics.ALPHA, "")
	backupLastFailureDesc = metrics.NewDesc("database_backup_last_failure_timestamp_seconds",
		"When the Database's last backup that failed gave up (status.backup.lastFailureTime), in seconds since the Unix epoch; absent when none failed.",
		databaseLabels, nil, metrics.ALPHA, "")
	backupFirstRecoverableDesc = metrics.NewDesc("database_backup_first_recoverable_timestamp_seconds",
		"The first time a restore of the Database can reach, just after the end of the oldest backup its store keeps (status.backup.firstRecoverableTime), in seconds since the Unix epoch; absent before the first backup's report.",
		databaseLabels, nil, metrics.ALPHA, "")
	backupLastArchivedDesc = metrics.NewDesc("database_backup_last_archived_timestamp_seconds",
		"When the Database's primary last archived its changes to the store (status.backup.lastArchivedTime), in seconds since the Unix epoch: the end of the recoverability window; absent before the first.",
		databaseLabels, nil, metrics.ALPHA, "")
	backupRunningDesc = metrics.NewDesc("database_backup_running",
		"For a Database with spec.backup, 1 while a backup Job runs (status.backup.activeJob), else 0; absent without spec.backup.",
		databaseLabels, nil, metrics.ALPHA, "")
	backupIntervalDesc = metrics.NewDesc("database_backup_schedule_interval_seconds",
		"For a Database with spec.backup.schedule, the time between the schedule's next two times, in seconds (86400 for a daily one); absent without a schedule.",
		databaseLabels, nil, metrics.ALPHA, "")
	memberRoleDesc = metrics.NewDesc("database_member_role",
		"Each member's role as its server answered (status.members): 1 for the current role (primary, replica, or unknown while it does not answer), 0 for the others.",
		append(memberLabels, "role"), nil, metrics.ALPHA, "")
	memberReadyDesc = metrics.NewDesc("database_member_ready",
		"1 when the member's Pod is ready, else 0.",
		memberLabels, nil, metrics.ALPHA, "")
	memberStreamingDesc = metrics.NewDesc("database_member_streaming",
		"For each member but the primary (status.primary), 1 while it streams changes from the primary, else 0 (a replica behind, or a server not answering, not running, or of another timeline); absent for the primary.",
		memberLabels, nil, metrics.ALPHA, "")
	memberLagBytesDesc = metrics.NewDesc("database_member_replication_lag_bytes",
		"For a replica, how far its replayed changes trail the primary's, in bytes (PostgreSQL's WAL positions); absent where the engine does not count in bytes.",
		memberLabels, nil, metrics.ALPHA, "")
	memberLagSecondsDesc = metrics.NewDesc("database_member_replication_lag_seconds",
		"For a replica, how far its replayed changes trail the primary's, in seconds, as its engine reports it.",
		memberLabels, nil, metrics.ALPHA, "")

	memberConnectionsDesc = metrics.NewDesc("database_member_connections",
		"Sessions open on the member's server, the controller's own check among them, as the server last reported them (PostgreSQL: client backends in pg_stat_activity; MySQL: Threads_connected, replicas' connections too; MongoDB: connections.current).",
		memberLabels, nil, metrics.ALPHA, "")
	memberMaxConnectionsDesc = metrics.NewDesc("database_member_max_connections",
		"The most sessions the member's server accepts (max_connections; MongoDB: connections current plus available).",
		memberLabels, nil, metrics.ALPHA, "")
	memberCommitsDesc = metrics.NewDesc("database_member_transactions_committed_total",
		"Transactions the member's server committed since it started, read-only ones and the controller's checks among them (PostgreSQL: pg_stat_database's xact_commit over every database; MySQL: Handler_commit; MongoDB: multi-document transactions only); begins again at 0 when the server restarts.",
		memberLabels, nil, metrics.ALPHA, "")
	memberRollbacksDesc = metrics.NewDesc("database_member_transactions_rolled_back_total",
		"Transactions the member's server rolled back since it started (PostgreSQL: xact_rollback; MySQL: Handler_rollback; MongoDB: multi-document transactions aborted); begins again at 0 when the server restarts.",
		memberLabels, nil, metrics.ALPHA, "")
	memberDataBytesDesc = metrics.NewDesc("database_member_data_bytes",
		"Size on disk of the data of the member's databases, in bytes (PostgreSQL: pg_database_size of each; MySQL: the file-per-table tablespaces of every table outside the system schemas; MongoDB: every database but local).",
		memberLabels, nil, metrics.ALPHA, "")
	memberLogBytesDesc = metrics.NewDesc("database_member_log_bytes",
		"Size on disk of the log of changes the member's server keeps, in bytes: PostgreSQL's WAL segments in pg_wal, MySQL's binary logs, MongoDB's local database (the oplog); grows when a checkpoint, the archiving or a replica holds it back.",
		memberLabels, nil, metrics.ALPHA, "")
	memberVolumeCapacityDesc = metrics.NewDesc("database_member_volume_capacity_bytes",
		"Capacity of the member's data volume, in bytes: its data claim's status.capacity; absent while the claim is not bound.",
		memberLabels, nil, metrics.ALPHA, "")
	memberLockWaitsDesc = metrics.NewDesc("database_member_lock_waits",
		"Sessions of the member's server waiting for a lock another holds (PostgreSQL: pg_locks not granted; MySQL: Innodb_row_lock_current_waits; MongoDB: globalLock.currentQueue.total).",
		memberLabels, nil, metrics.ALPHA, "")

	// The controller's own counts of what it did, since it started.
	failoversTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "database_failovers_total",
		Help:           "Automatic failovers the controller completed for the Database (a replica promoted in place of a primary that took no writes), since the controller started.",
		StabilityLevel: metrics.ALPHA,
	}, databaseLabels)
	switchoversTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "database_switchovers_total",
		Help:           "Switchovers the controller completed for the Database (the replica asked for promoted, the former primary following it), since the controller started.",
		StabilityLevel: metrics.ALPHA,
	}, databaseLabels)
)

// phases are the values database_status_phase reports, in the API's order.
var phases = []examplev1.DatabasePhase{
	examplev1.DatabasePhasePending, examplev1.DatabasePhaseProvisioning, examplev1.DatabasePhaseReady,
	examplev1.DatabasePhaseDegraded, examplev1.DatabasePhaseFailed, examplev1.DatabasePhaseDeleting,
}

// conditionStatuses are the values of database_status_condition's status label.
var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// memberRoles are the values of database_member_role's role label: the API's roles,
// lowercased, and "unknown" for a member whose server did not answer.
var memberRoles = []string{"primary", "replica", "unknown"}

// databaseCollector reports the per-Database gauges at each scrape, from the Databases the
// controller's cache holds (databases), so it keeps no state of its own and a deleted
// Database's series end with it.
type databaseCollector struct {
	metrics.BaseStableCollector
	databases func() []*examplev1.Database
}

// newDatabaseCollector returns the collector of the Databases databases lists; databases may
// be nil or return nil (no cache yet): nothing is reported.
func newDatabaseCollector(databases func() []*examplev1.Database) metrics.StableCollector {
	return &databaseCollector{databases: databases}
}

func (c *databaseCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range []*metrics.Desc{infoDesc, phaseDesc, conditionDesc, replicasDesc, readyReplicasDesc,
		primaryWritableDesc, primaryLastWritableDesc, lastFailoverDesc, backupLastSuccessDesc, backupLastFailureDesc,
		backupFirstRecoverableDesc, backupLastArchivedDesc, backupRunningDesc, backupIntervalDesc, memberRoleDesc, memberReadyDesc,
		memberStreamingDesc, memberLagBytesDesc, memberLagSecondsDesc, memberConnectionsDesc, memberMaxConnectionsDesc,
		memberCommitsDesc, memberRollbacksDesc, memberDataBytesDesc, memberLogBytesDesc, memberLockWaitsDesc, memberVolumeCapacityDesc} {
		ch <- d
	}
}

func (c *databaseCollector) CollectWithStability(ch chan<- metrics.Metric) {
	if c.databases == nil {
		return
	}
	now := time.Now()
	for _, db := range c.databases() {
		collectDatabase(ch, db, now)
	}
}

// collectDatabase sends db's gauges at now.
func collectDatabase(ch chan<- metrics.Metric, db *examplev1.Database, now time.Time) {
	gauge := func(d *metrics.Desc, v float64, labels ...string) {
		ch <- metrics.NewLazyConstMetric(d, metrics.GaugeValue, v, append([]string{db.Namespace, db.Name}, labels...)...)
	}
	bool01 := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauge(infoDesc, 1, string(db.Spec.Engine), db.Spec.Version)
	for _, phase := range phases {
		gauge(phaseDesc, bool01(db.Status.Phase == phase), string(phase))
	}
	for _, c := range db.Status.Conditions {
		for _, s := range conditionStatuses {
			gauge(conditionDesc, bool01(c.Status == s), c.Type, string(s))
		}
	}
	replicas := int32(1)
	if db.Spec.Replicas != nil {
		replicas = *db.Spec.Replicas
	}
	gauge(replicasDesc, float64(replicas))
	gauge(readyReplicasDesc, float64(db.Status.ReadyReplicas))
	if db.Status.Primary != "" {
		gauge(primaryWritableDesc, bool01(examplev1.PrimaryTakesWrites(db)))
	}
	if t := db.Status.PrimaryLastWritableTime; t != nil {
		gauge(primaryLastWritableDesc, float64(t.Unix()))
	}
	if t := db.Status.LastFailoverTime; t != nil {
		gauge(lastFailoverDesc, float64(t.Unix()))
	}
	if b := db.Status.Backup; b != nil {
		if t := b.LastSuccessfulTime; t != nil {
			gauge(backupLastSuccessDesc, float64(t.Unix()))
		}
		if t := b.LastFailureTime; t != nil {
			gauge(backupLastFailureDesc, float64(t.Unix()))
		}
		if t := b.FirstRecoverableTime; t != nil {
			gauge(backupFirstRecoverableDesc, float64(t.Unix()))
		}
		if t := b.LastArchivedTime; t != nil {
			gauge(backupLastArchivedDesc, float64(t.Unix()))
		}
	}
	if db.Spec.Backup != nil {
		gauge(backupRunningDesc, bool01(db.Status.Backup != nil && db.Status.Backup.ActiveJob != ""))
		if schedule, err := cron.ParseStandard(db.Spec.Backup.Schedule); err == nil && db.Spec.Backup.Schedule != "" {
			next := schedule.Next(now)
			gauge(backupIntervalDesc, schedule.Next(next).Sub(next).Seconds())
		}
	}
	reports := memberReports.get(db, now)
	for _, m := range db.Status.Members {
		r := reports[m.Name]
		if r.volumeCapacity > 0 {
			gauge(memberVolumeCapacityDesc, float64(r.volumeCapacity), m.Name)
		}
		if st := r.statistics; st != nil {
			gauge(memberConnectionsDesc, float64(st.Connections), m.Name)
			gauge(memberMaxConnectionsDesc, float64(st.MaxConnections), m.Name)
			ch <- metrics.NewLazyConstMetric(memberCommitsDesc, metrics.CounterValue, float64(st.Commits), db.Namespace, db.Name, m.Name)
			ch <- metrics.NewLazyConstMetric(memberRollbacksDesc, metrics.CounterValue, float64(st.Rollbacks), db.Namespace, db.Name, m.Name)
			gauge(memberDataBytesDesc, float64(st.DataBytes), m.Name)
			gauge(memberLogBytesDesc, float64(st.LogBytes), m.Name)
			gauge(memberLockWaitsDesc, float64(st.LockWaits), m.Name)
		}
		role := strings.ToLower(string(m.Role))
		if role == "" {
			role = "unknown"
		}
		for _, r := range memberRoles {
			gauge(memberRoleDesc, bool01(role == r), m.Name, r)
		}
		gauge(memberReadyDesc, bool01(m.Ready), m.Name)
		// Every member but the primary is to stream from it, answering or not.
		if m.Name == db.Status.Primary {
			continue
		}
		gauge(memberStreamingDesc, bool01(m.Streaming), m.Name)
		if m.LagBytes != nil {
			gauge(memberLagBytesDesc, float64(*m.LagBytes), m.Name)
		}
		if m.LagSeconds != nil {
			gauge(memberLagSecondsDesc, float64(*m.LagSeconds), m.Name)
		}
	}
}

// forgetMetrics ends the controller's counters of the Database namespace/name, and what it
// last found of its members.
func forgetMetrics(namespace, name string) {
	failoversTotal.DeleteLabelValues(namespace, name)
	switchoversTotal.DeleteLabelValues(namespace, name)
	memberReports.forget(namespace, name)
}

// memberReport is what the metrics say of one member besides its status: its server's
// statistics at the last check (nil when it did not give them) and the capacity of its data
// claim in bytes (0 while the claim is not bound).
type memberReport struct {
	statistics     *engine.Statistics
	volumeCapacity int64
}

// ReportMaxAge is how old the last check of a Database's members may be for the metrics to
// report it: three times RequeueAfterReplication, the longest a Database whose servers
// answer goes unchecked. An older one (a process that no longer leads, whose passes have
// stopped; a pass that could not ask the servers) is not reported: no figure rather than a
// stale one.
const ReportMaxAge = 3 * RequeueAfterReplication

// checkedMembers are the memberReports of a Database's members, by name, the Database's
// UID, and when they were found.
type checkedMembers struct {
	uid     types.UID
	at      time.Time
	members map[string]memberReport
}

// reportStore is, for each Database (by namespace and name), the memberReport of each of its
// members as the last check found them.
type reportStore struct {
	mu sync.Mutex
	m  map[cache.ObjectName]checkedMembers
}

// memberReports holds this process's last check of each Database, as the counters of
// failovers and switchovers do, for the collector that reads Databases.
var memberReports reportStore

func (s *reportStore) set(db *examplev1.Database, at time.Time, reports map[string]memberReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[cache.ObjectName]checkedMembers{}
	}
	s.m[cache.ObjectName{Namespace: db.Namespace, Name: db.Name}] = checkedMembers{uid: db.UID, at: at, members: reports}
}

// get is the memberReports of db's last check; none when it is older than ReportMaxAge at
// now, or was of another Database of db's name (deleted, and made again).
func (s *reportStore) get(db *examplev1.Database, now time.Time) map[string]memberReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.m[cache.ObjectName{Namespace: db.Namespace, Name: db.Name}]
	if !ok || c.uid != db.UID || now.Sub(c.at) > ReportMaxAge {
		return nil
	}
	return c.members
}

func (s *reportStore) forget(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, cache.ObjectName{Namespace: namespace, Name: name})
}

// recordMembers keeps, for the metrics, what each of members reported of itself to o at
// now, when o's engine reports statistics (engine.Statistician), and the capacity of its
// data claim (capacity: bytes, 0 when unknown). It reports whether a server gave its
// statistics.
func recordMembers(db *examplev1.Database, o engine.Observer, members []*member, capacity func(*member) int64, now time.Time) bool {
	s, _ := o.(engine.Statistician)
	reported := false
	reports := map[string]memberReport{}
	for _, m := range members {
		var r memberReport
		if s != nil {
			if st, ok := s.Statistics(m); ok {
				r.statistics, reported = &st, true
			}
		}
		r.volumeCapacity = capacity(m)
		if r.statistics != nil || r.volumeCapacity > 0 {
			reports[m.Name] = r
		}
	}
	memberReports.set(db, now, reports)
	return reported
}
