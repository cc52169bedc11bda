package database

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// Reasons of the controller's Events about backups.
const (
	ReasonBackupStarted = "BackupStarted"
)

// backups is what the backup step found of a Database with spec.backup: status.backup, the
// BackedUp condition, and when the schedule's next backup is due.
type backups struct {
	status    examplev1.DatabaseBackupStatus
	condition metav1.ConditionStatus
	reason    string
	message   string
	// next, when positive, is how long until the next scheduled backup.
	next time.Duration
	// archiving is true once the primary answered of its archiving this pass (archived).
	archiving bool
}

// resolveBackupStore sets p.desired.Backup from spec.backup, reading the store's Secret
// (spec.backup.s3.secretName, from the API server: the controller caches only Secrets it
// manages). A Secret that is missing or lacks its keys leaves the Database without
// archiving, and the BackedUp condition says why (p.backupStore); an engine without
// backups has none (the API server refuses spec.backup for it).
func (p *pass) resolveBackupStore(ctx context.Context) error {
	db := p.db
	if db.Spec.Backup == nil {
		return nil
	}
	if _, ok := p.desired.Engine().(engine.Backups); !ok {
		return nil
	}
	name := db.Spec.Backup.S3.SecretName
	secret, err := p.r.kube.CoreV1().Secrets(db.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		p.backupStore = fmt.Sprintf("Secret %s (spec.backup.s3.secretName) does not exist; nothing is archived nor backed up until it does (checked again every minute)", name)
		return nil
	case err != nil:
		return fmt.Errorf("get Secret %q of spec.backup.s3: %w", name, err)
	}
	ca, err := specs.BackupStoreSecret(secret)
	if err != nil {
		p.backupStore = err.Error() + "; nothing is archived nor backed up until it has (checked again every minute)"
		return nil
	}
	p.desired.Backup, _ = engine.ResolveBackupStore(db, ca)
	return nil
}

// ensureBackupTLSSecret keeps the Secret names.BackupTLSSecretName of a Database whose
// changes are archived (specs.BackupTLSSecret), made anew when it cannot serve any longer
// (specs.BackupTLSSecretCurrent: a key missing, a certificate expiring).
func (p *pass) ensureBackupTLSSecret(ctx context.Context) (*halt, error) {
	db, r := p.db, p.r
	var buildErr error
	_, h, err := ensureChild(ctx, p, childOps[*corev1.Secret]{
		kind:   "Secret",
		name:   names.BackupTLSSecretName(db),
		client: r.kube.CoreV1().Secrets(db.Namespace),
		cached: r.listers.Secrets.Secrets(db.Namespace).Get,
		build: func() *corev1.Secret {
			s, err := specs.BackupTLSSecret(db, p.desired, r.clock.Now())
			if err != nil {
				buildErr = err
				return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.BackupTLSSecretName(db)}}
			}
			return s
		},
		sync: func(have *corev1.Secret) *halt {
			if why := specs.BackupTLSSecretCurrent(have.Data, r.clock.Now()); why != "" {
				want, err := specs.BackupTLSSecret(db, p.desired, r.clock.Now())
				if err != nil {
					buildErr = err
					return nil
				}
				have.Data = want.Data
				r.event(ctx, db, corev1.EventTypeNormal, ReasonUpdated, "Secret %s: new backup certificates (%s)", have.Name, why)
			}
			have.Labels = specs.MergeLabels(have.Labels, specs.ChildLabels(db))
			return nil
		},
	})
	if buildErr != nil {
		return nil, fmt.Errorf("make the backup certificates: %w", buildErr)
	}
	return h, err
}

// reconcileBackups reports the backup Jobs of a Database with spec.backup (status.backup and
// the BackedUp condition) and starts one when due: at once when none was ever started
// (status.backup.lastScheduleTime unset: the first full backup, which also makes the
// stanza archiving needs), at once for a request of databases/backup newer than the last
// start, at each time of spec.backup.schedule after the last start, and
// at once again when the last one failed and the spec changed since it started. No Job
// starts while one runs, nor while the Database is not Ready or Degraded (a backup needs its
// primary), nor while sts, the StatefulSet as this pass left it, is not rolled out (its Pods
// would not all run the backup server a Job reads through: spec.backup just set, or its
// store's Secret just fixed). Every Job is the Database's child (specs.BackupJob).
func (p *pass) reconcileBackups(ctx context.Context, sts *appsv1.StatefulSet) (*backups, error) {
	db, r := p.db, p.r
	if db.Spec.Backup == nil {
		return nil, nil
	}
	b := &backups{}
	if db.Status.Backup != nil {
		b.status = *db.Status.Backup.DeepCopy()
	}
	if p.backupStore != "" {
		b.condition, b.reason, b.message = metav1.ConditionFalse, examplev1.ReasonBackupStoreInvalid, p.backupStore
		return b, nil
	}
	if p.desired.Backup == nil {
		return nil, nil
	}
	jobs, err := r.listers.Jobs.Jobs(db.Namespace).List(labels.SelectorFromSet(specs.BackupJobLabels(db)))
	if err != nil {
		return nil, err
	}
	var lastFailed *batchv1.Job
	b.status.ActiveJob = ""
	for _, job := range jobs {
		if !isControlledBy(job, db) {
			continue
		}
		done, failed, at := jobFinished(job)
		switch {
		case !done:
			b.status.ActiveJob = job.Name
		case failed && (b.status.LastFailureTime == nil || b.status.LastFailureTime.Before(&at)):
			b.status.LastFailureTime, b.status.LastFailedJob = &at, job.Name
		case !failed && (b.status.LastSuccessfulTime == nil || b.status.LastSuccessfulTime.Before(&at)):
			b.status.LastSuccessfulTime, b.status.LastSuccessfulJob = &at, job.Name
		}
		if failed && b.status.LastFailedJob == job.Name {
			lastFailed = job
		}
	}
	if report, err := p.backupReport(jobs, b.status.LastSuccessfulJob); err != nil {
		return nil, err
	} else if t := report.FirstRecoverableTime; !t.IsZero() && !t.After(b.status.LastSuccessfulTime.Add(ReportClockSkew)) {
		b.status.FirstRecoverableTime = &metav1.Time{Time: t}
	}

	now := r.clock.Now()
	due, next := backupDue(db, b.status, lastFailed, now)
	ready := (db.Status.Phase == examplev1.DatabasePhaseReady || db.Status.Phase == examplev1.DatabasePhaseDegraded) && rolledOut(sts)
	if due && b.status.ActiveJob == "" && ready {
		name := specs.BackupJobName(db, now)
		job, err := specs.BackupJob(db, p.desired, name)
		if err != nil {
			return nil, err
		}
		if _, err := r.kube.BatchV1().Jobs(db.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create backup Job %q: %w", name, err)
		}
		r.event(ctx, db, corev1.EventTypeNormal, ReasonBackupStarted, "Started backup Job %s", name)
		b.status.ActiveJob, b.status.LastScheduleTime = name, &metav1.Time{Time: now.Truncate(time.Second)}
		_, next = backupDue(db, b.status, nil, now)
	}
	b.next = next
	b.judge()
	return b, nil
}

// ReportClockSkew is how much later than its Job's end, by the controller's clock, a backup
// report's time may be: a node's clock may run a little ahead. A report later than that
// (a clock far ahead, a store's records written by someone else) is not taken: the window
// it would state cannot start after the backup that found it ended.
const ReportClockSkew = time.Minute

// backupReport is the report (engine.BackupReport) of the backup Job named name among jobs,
// when the Database controls that Job: the termination message of a container that ended
// well, of the Job's Pod that finished last (a retried Job has two). It is empty when the
// Job or its Pods are gone (the Job's ttl: status keeps what the last report said) or said
// nothing.
func (p *pass) backupReport(jobs []*batchv1.Job, name string) (engine.BackupReport, error) {
	i := slices.IndexFunc(jobs, func(j *batchv1.Job) bool { return j.Name == name && isControlledBy(j, p.db) })
	if name == "" || i < 0 {
		return engine.BackupReport{}, nil
	}
	pods, err := p.r.listers.Pods.Pods(p.db.Namespace).List(labels.SelectorFromSet(specs.BackupJobLabels(p.db)))
	if err != nil {
		return engine.BackupReport{}, err
	}
	var report engine.BackupReport
	var last time.Time
	for _, pod := range pods {
		if !metav1.IsControlledBy(pod, jobs[i]) {
			continue
		}
		for _, c := range pod.Status.ContainerStatuses {
			t := c.State.Terminated
			if t == nil || t.ExitCode != 0 || (!report.FirstRecoverableTime.IsZero() && !t.FinishedAt.After(last)) {
				continue
			}
			if r := engine.ParseBackupReport(t.Message); r != (engine.BackupReport{}) {
				report, last = r, t.FinishedAt.Time
			}
		}
	}
	return report, nil
}

// judge sets BackedUp from status.backup: False while the primary's archiving fails, as it
// last said, once a backup made the stanza (ArchiveFailing, over any backup's outcome: no
// change is archived meanwhile); else False when the last backup that ended failed, True
// when it succeeded, Unknown before the first ended.
func (b *backups) judge() {
	switch {
	case b.status.ArchiveFailureTime != nil && b.status.LastSuccessfulTime != nil:
		b.condition, b.reason = metav1.ConditionFalse, examplev1.ReasonArchiveFailing
		b.message = fmt.Sprintf("the primary failed to archive its WAL at %s, as it last said; its changes pile up on its volume until the store takes them",
			b.status.ArchiveFailureTime.UTC().Format(time.RFC3339))
	case failedLast(b.status):
		b.condition, b.reason = metav1.ConditionFalse, examplev1.ReasonBackupFailed
		b.message = fmt.Sprintf("backup Job %s failed at %s; its Pods' logs say why (kubectl logs job/%s --all-containers)",
			b.status.LastFailedJob, b.status.LastFailureTime.UTC().Format(time.RFC3339), b.status.LastFailedJob)
	case b.status.LastSuccessfulTime != nil:
		b.condition, b.reason = metav1.ConditionTrue, examplev1.ReasonBackupSucceeded
		b.message = fmt.Sprintf("backup Job %s succeeded at %s", b.status.LastSuccessfulJob, b.status.LastSuccessfulTime.UTC().Format(time.RFC3339))
	default:
		b.condition, b.reason, b.message = metav1.ConditionUnknown, examplev1.ReasonBackupPending, "the first backup has not ended yet"
		if b.status.ActiveJob != "" {
			b.message = "the first backup, Job " + b.status.ActiveJob + ", is running"
		}
	}
}

// archived records what the primary said of its continuous archiving: status.backup's
// lastArchivedTime and archiveFailureTime, and, while its last attempt failed, BackedUp
// False (ReasonArchiveFailing) naming the WAL segment; once it archives again, BackedUp as
// judge says. Before the first backup succeeded archiving is not judged: it starts with the
// stanza that backup makes.
func (b *backups) archived(primary string, a engine.Archiving) {
	if b.reason == examplev1.ReasonBackupStoreInvalid {
		// Nothing is archived: the Pods have no store.
		return
	}
	b.archiving = true
	if !a.Last.IsZero() {
		b.status.LastArchivedTime = &metav1.Time{Time: a.Last.Truncate(time.Second)}
	}
	b.status.ArchiveFailureTime = nil
	if !a.Failing() || b.status.LastSuccessfulTime == nil {
		b.judge()
		return
	}
	b.status.ArchiveFailureTime = &metav1.Time{Time: a.Failed.Truncate(time.Second)}
	last := "never"
	if !a.Last.IsZero() {
		last = a.Last.UTC().Format(time.RFC3339)
	}
	b.condition, b.reason = metav1.ConditionFalse, examplev1.ReasonArchiveFailing
	b.message = fmt.Sprintf("%s, the primary, failed to archive %s at %s (it last archived at %s): its changes pile up on its volume until the store takes them; its log says why",
		primary, a.FailedWhat, a.Failed.UTC().Format(time.RFC3339), last)
}

// backupDue says whether a backup of db is due at now, and, when one is scheduled later, how
// long until then: due when none was ever started, when one was asked for through
// databases/backup since the last start, when the schedule's first time after the last
// start has come, or when lastFailed (the last Job, which failed) started at an older
// generation of the Database than its current one.
func backupDue(db *examplev1.Database, status examplev1.DatabaseBackupStatus, lastFailed *batchv1.Job, now time.Time) (bool, time.Duration) {
	if status.LastScheduleTime == nil {
		return true, 0
	}
	if r := status.Request; r != nil && status.LastScheduleTime.Before(&r.RequestedAt) {
		// Asked for through databases/backup since the last start.
		return true, 0
	}
	if lastFailed != nil && failedLast(status) {
		if gen, err := strconv.ParseInt(lastFailed.Annotations[specs.BackupGenerationAnnotation], 10, 64); err == nil && gen < db.Generation &&
			!lastFailed.CreationTimestamp.Before(status.LastScheduleTime) {
			return true, 0
		}
	}
	if db.Spec.Backup.Schedule == "" {
		return false, 0
	}
	schedule, err := cron.ParseStandard(db.Spec.Backup.Schedule)
	if err != nil {
		// The API server validated it with the same parser.
		return false, 0
	}
	at := schedule.Next(status.LastScheduleTime.UTC())
	if !at.After(now) {
		return true, 0
	}
	return false, at.Sub(now)
}

// failedLast says whether the last backup that ended failed.
func failedLast(status examplev1.DatabaseBackupStatus) bool {
	return status.LastFailureTime != nil && (status.LastSuccessfulTime == nil || status.LastSuccessfulTime.Before(status.LastFailureTime))
}

// jobFinished says whether job has finished (its Complete or Failed condition True), whether
// it failed, and when.
func jobFinished(job *batchv1.Job) (done, failed bool, at metav1.Time) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, false, c.LastTransitionTime
		case batchv1.JobFailed:
			return true, true, c.LastTransitionTime
		}
	}
	return false, false, metav1.Time{}
}

// restored is the Restored condition of a Database with spec.restore.
type restored struct {
	condition metav1.ConditionStatus
	reason    string
	message   string
}

// observeRestore reads the Restored condition of a Database with spec.restore from its first
// Pod, which restores the data (the primary at creation): True once its restore container
// ended well (and from then on), False while it fails, with the end of its log (its
// termination message), Unknown before and while it runs.
func (p *pass) observeRestore() *restored {
	db := p.db
	if db.Spec.Restore == nil {
		return nil
	}
	if c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionRestored); c != nil && c.Status == metav1.ConditionTrue {
		return &restored{c.Status, c.Reason, c.Message}
	}
	source := "the backups of " + db.Spec.Restore.Database
	if t := db.Spec.Restore.PointInTime; t != "" {
		source += " as of " + t
	}
	podName := engine.PodName(db, 0)
	pod, err := p.r.listers.Pods.Pods(db.Namespace).Get(podName)
	if err != nil {
		return &restored{metav1.ConditionUnknown, examplev1.ReasonRestoring, "waiting for Pod " + podName + " to restore " + source}
	}
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != engine.RestoreContainerName {
			continue
		}
		failedWith := func(t *corev1.ContainerStateTerminated) *restored {
			msg := strings.TrimSpace(t.Message)
			if msg == "" {
				msg = fmt.Sprintf("exit code %d", t.ExitCode)
			}
			return &restored{metav1.ConditionFalse, examplev1.ReasonRestoreFailed,
				fmt.Sprintf("Pod %s could not restore %s (it tries again): %s", podName, source, msg)}
		}
		switch t := s.State.Terminated; {
		case t != nil && t.ExitCode == 0:
			return &restored{metav1.ConditionTrue, examplev1.ReasonRestored, fmt.Sprintf("Pod %s restored %s", podName, source)}
		case t != nil:
			return failedWith(t)
		case s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0:
			return failedWith(s.LastTerminationState.Terminated)
		}
	}
	return &restored{metav1.ConditionUnknown, examplev1.ReasonRestoring, "Pod " + podName + " is restoring " + source}
}
