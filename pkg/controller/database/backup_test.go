package database_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
)

// storeSecretName is the Secret of the example store's keys.
const storeSecretName = "store-keys"

// firstJob is the backup Job the Reconciler starts at start: "<name>-backup-<Unix seconds
// in base 36>".
const firstJob = "my-database-backup-tb7yo0"

// backupPolicy is a spec.backup of the example store, taking backups on schedule.
func backupPolicy(schedule string) *examplev1.DatabaseBackupPolicy {
	return &examplev1.DatabaseBackupPolicy{
		Schedule: schedule,
		S3:       examplev1.DatabaseBackupS3{Endpoint: "https://s3.example.com", Bucket: "backups", SecretName: storeSecretName},
	}
}

// backedUpDatabase is the example Database with spec.backup of schedule.
func backedUpDatabase(schedule string) *examplev1.Database {
	db := exampleDatabase()
	db.Spec.Backup = backupPolicy(schedule)
	return db
}

// storeSecret is the user's Secret of the store's keys, with a CA when ca (any PEM
// certificate will do).
func storeSecret(t *testing.T, ca bool) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: storeSecretName},
		Data:       map[string][]byte{"accessKeyId": []byte("AKIA"), "secretAccessKey": []byte("s3cr3t")},
	}
	if ca {
		db := exampleDatabase()
		d, err := specs.Resolve(db)
		require.NoError(t, err)
		tlsSecret, err := specs.BackupTLSSecret(db, d, start)
		require.NoError(t, err)
		s.Data["ca.crt"] = tlsSecret.Data["ca.crt"]
	}
	return s
}

// backupJobs are the names of the Jobs of the namespace.
func (f *fixture) backupJobs() []string {
	f.t.Helper()
	objs, err := f.kube.Tracker().List(jobs, batchv1.SchemeGroupVersion.WithKind("Job"), namespace)
	require.NoError(f.t, err)
	var out []string
	for _, job := range objs.(*batchv1.JobList).Items {
		out = append(out, job.Name)
	}
	slices.Sort(out)
	return out
}

func (f *fixture) job(n string) *batchv1.Job {
	f.t.Helper()
	obj, err := f.kube.Tracker().Get(jobs, namespace, n)
	require.NoError(f.t, err)
	return obj.(*batchv1.Job)
}

// finishJob plays the Job controller: the Job named n ends at the fake clock's time, Complete
// or Failed.
func (f *fixture) finishJob(n string, typ batchv1.JobConditionType) {
	f.t.Helper()
	job := f.job(n).DeepCopy()
	at := metav1.NewTime(f.clock.Now().Truncate(time.Second))
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: at})
	require.NoError(f.t, f.kube.Tracker().Update(jobs, job, namespace))
}

func containerNames(pod corev1.PodSpec) []string {
	var out []string
	for _, c := range pod.Containers {
		out = append(out, c.Name)
	}
	return out
}

func volumeNames(pod corev1.PodSpec) []string {
	var out []string
	for _, v := range pod.Volumes {
		out = append(out, v.Name)
	}
	return out
}

// archives says whether the StatefulSet's database container archives its WAL.
func archives(f *fixture) bool {
	f.t.Helper()
	pod := f.statefulSet().Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "database" })
	require.GreaterOrEqual(f.t, i, 0)
	return slices.Contains(pod.Containers[i].Args, "archive_mode=on")
}

func time0(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// A store's Secret that does not exist leaves the Database without archiving nor backups,
// which BackedUp says; the controller, which does not watch that Secret, looks again every
// minute, and takes the first backup once the Secret is there.
func TestBackupWithoutTheStoresSecretArchivesNothingAndLooksAgainEveryMinute(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""))
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result, "not Ready yet: the shorter wait")
	require.Contains(t, f.actions, "get secrets store-keys", "the user's Secret is read from the API server")
	f.createClaims(3)
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
	require.Equal(t, requeueExternal, result)

	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	db := f.database()
	c := condition(db, examplev1.ConditionBackedUp)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, examplev1.ReasonBackupStoreInvalid, c.Reason)
	require.Contains(t, c.Message, "Secret store-keys (spec.backup.s3.secretName) does not exist")
	require.Equal(t, &examplev1.DatabaseBackupStatus{}, db.Status.Backup)
	require.False(t, archives(f))
	require.Equal(t, []string{"database"}, containerNames(f.statefulSet().Spec.Template.Spec))
	require.False(t, f.exists(secrets, "my-database-backup-tls"))
	require.Empty(t, f.backupJobs())

	// A Secret without its keys is no better.
	partial := storeSecret(t, false)
	delete(partial.Data, "secretAccessKey")
	require.NoError(t, f.kube.Tracker().Add(partial))
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	c = condition(f.database(), examplev1.ConditionBackedUp)
	require.Equal(t, examplev1.ReasonBackupStoreInvalid, c.Reason)
	require.Contains(t, c.Message, `Secret store-keys has no "secretAccessKey"`)
	require.False(t, archives(f))
	require.Empty(t, f.backupJobs())

	// Fixed: the Pods archive, and the first backup is taken once they all run the backup
	// server.
	require.NoError(t, f.kube.Tracker().Update(secrets, storeSecret(t, false), namespace))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.True(t, archives(f))
	require.True(t, f.exists(secrets, "my-database-backup-tls"))
	require.Empty(t, f.backupJobs(), "no Pod runs the backup server yet")
	f.setStatefulSetStatus(3, "rev-2", "rev-2")
	_, err = f.reconcile()
	require.NoError(t, err)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs())
}

// With the store's Secret, the first pass makes the backup certificates and Pods that
// archive and run the backup server; the first backup starts once the Database is Ready, and
// BackedUp follows its Job.
func TestFirstBackupStartsOnceTheDatabaseIsReady(t *testing.T) {
	for _, ca := range []bool{false, true} {
		t.Run(map[bool]string{false: "system CAs", true: "store CA"}[ca], func(t *testing.T) {
			f := newFixture(t, backedUpDatabase(""), storeSecret(t, ca))
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Contains(t, f.actions, "create secrets my-database-backup-tls")
			tlsSecret, err := f.kube.Tracker().Get(secrets, namespace, "my-database-backup-tls")
			require.NoError(t, err)
			require.Empty(t, specs.BackupTLSSecretCurrent(tlsSecret.(*corev1.Secret).Data, start))
			require.Equal(t, specs.OwnerReference(f.database()), tlsSecret.(*corev1.Secret).OwnerReferences[0])
			pod := f.statefulSet().Spec.Template.Spec
			require.Equal(t, []string{"database", "backup"}, containerNames(pod))
			require.True(t, archives(f))
			require.Subset(t, volumeNames(pod), []string{"run", "backup-tls"})
			require.Equal(t, ca, slices.Contains(volumeNames(pod), "backup-store-ca"), "the store's CA only when its Secret has one")
			require.Empty(t, f.backupJobs(), "not Ready: no backup")
			c := condition(f.database(), examplev1.ConditionBackedUp)
			require.Equal(t, metav1.ConditionUnknown, c.Status)
			require.Equal(t, examplev1.ReasonBackupPending, c.Reason)

			f.createClaims(3)
			f.setStatefulSetStatus(3, "rev-1", "rev-1")
			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, database.Result{}, result)
			require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
			require.Empty(t, f.backupJobs(), "the pass saw the Database as it was before: not Ready")

			result, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, database.Result{}, result, "no schedule: nothing to wait for")
			require.Contains(t, f.actions, "create jobs "+firstJob)
			require.Contains(t, f.events(), "Normal BackupStarted Started backup Job "+firstJob)
			require.Equal(t, []string{firstJob}, f.backupJobs())
			job := f.job(firstJob)
			require.Equal(t, specs.OwnerReference(f.database()), job.OwnerReferences[0])
			require.Equal(t, "1", job.Annotations[specs.BackupGenerationAnnotation])
			db := f.database()
			require.Equal(t, &examplev1.DatabaseBackupStatus{ActiveJob: firstJob, LastScheduleTime: time0(start)}, db.Status.Backup)
			c = condition(db, examplev1.ConditionBackedUp)
			require.Equal(t, metav1.ConditionUnknown, c.Status)
			require.Equal(t, examplev1.ReasonBackupPending, c.Reason)
			require.Equal(t, "the first backup, Job "+firstJob+", is running", c.Message)

			// While it runs, no other starts.
			f.clock.SetTime(start.Add(time.Hour))
			_, err = f.reconcile()
			require.NoError(t, err)
			require.False(t, slices.ContainsFunc(f.actions, func(a string) bool { return strings.HasPrefix(a, "create jobs") }), "%v", f.actions)
			require.Equal(t, []string{firstJob}, f.backupJobs())
			require.Equal(t, firstJob, f.database().Status.Backup.ActiveJob, "still running")

			f.clock.SetTime(start.Add(90 * time.Minute))
			f.finishJob(firstJob, batchv1.JobComplete)
			_, err = f.reconcile()
			require.NoError(t, err)
			db = f.database()
			require.Equal(t, &examplev1.DatabaseBackupStatus{LastScheduleTime: time0(start),
				LastSuccessfulTime: time0(start.Add(90 * time.Minute)), LastSuccessfulJob: firstJob}, db.Status.Backup)
			c = condition(db, examplev1.ConditionBackedUp)
			require.Equal(t, metav1.ConditionTrue, c.Status)
			require.Equal(t, examplev1.ReasonBackupSucceeded, c.Reason)
			require.Equal(t, "backup Job "+firstJob+" succeeded at 2026-03-01T13:30:00Z", c.Message)
			require.Equal(t, []string{firstJob}, f.backupJobs(), "no schedule: no other backup")
		})
	}
}

func TestAFailedBackupIsBackedUpFalseNamingItsLogs(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs())

	f.clock.SetTime(start.Add(time.Minute))
	f.finishJob(firstJob, batchv1.JobFailed)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	db := f.database()
	require.Equal(t, &examplev1.DatabaseBackupStatus{LastScheduleTime: time0(start),
		LastFailureTime: time0(start.Add(time.Minute)), LastFailedJob: firstJob}, db.Status.Backup)
	c := condition(db, examplev1.ConditionBackedUp)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, examplev1.ReasonBackupFailed, c.Reason)
	require.Contains(t, c.Message, "backup Job "+firstJob+" failed at 2026-03-01T12:01:00Z")
	require.Contains(t, c.Message, "kubectl logs job/"+firstJob+" --all-containers")
	require.Equal(t, []string{firstJob}, f.backupJobs(), "the same spec: not tried again at once")
}

// A Job of another owner with the backup labels is not the Database's.
func TestBackupJobsOfOthersAreIgnored(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	job := f.job(firstJob).DeepCopy()
	job.Name, job.OwnerReferences = "my-database-backup-forged", nil
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(start)}}
	require.NoError(t, f.kube.Tracker().Add(job))
	f.clock.SetTime(start.Add(time.Minute))
	f.finishJob(firstJob, batchv1.JobComplete)
	_, err = f.reconcile()
	require.NoError(t, err)
	db := f.database()
	require.Empty(t, db.Status.Backup.LastFailedJob)
	require.Equal(t, examplev1.ReasonBackupSucceeded, condition(db, examplev1.ConditionBackedUp).Reason)
}

// With a schedule, the Reconciler comes back at its next time after the last start, and
// starts a Job then, not before.
func TestScheduledBackupsStartAtTheScheduleTimes(t *testing.T) {
	f := newFixture(t, backedUpDatabase("0 3 * * *"), storeSecret(t, false))
	f.ready()
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs(), "the first backup at once")
	threeAM := time.Date(2026, time.March, 2, 3, 0, 0, 0, time.UTC)
	require.Equal(t, database.Result{RequeueAfter: threeAM.Sub(start)}, result)

	f.clock.SetTime(start.Add(10 * time.Minute))
	f.finishJob(firstJob, batchv1.JobComplete)
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: threeAM.Sub(start.Add(10 * time.Minute))}, result)

	f.clock.SetTime(threeAM.Add(-time.Second))
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{RequeueAfter: time.Second}, result)
	require.Equal(t, []string{firstJob}, f.backupJobs())

	f.clock.SetTime(threeAM)
	result, err = f.reconcile()
	require.NoError(t, err)
	second := specs.BackupJobName(f.database(), threeAM)
	require.Equal(t, []string{firstJob, second}, f.backupJobs())
	require.Equal(t, database.Result{RequeueAfter: 24 * time.Hour}, result)
	db := f.database()
	require.Equal(t, time0(threeAM), db.Status.Backup.LastScheduleTime)
	require.Equal(t, second, db.Status.Backup.ActiveJob)
	require.Equal(t, firstJob, db.Status.Backup.LastSuccessfulJob)
	require.Equal(t, examplev1.ReasonBackupSucceeded, condition(db, examplev1.ConditionBackedUp).Reason, "the last backup that ended")

	// The next time comes while that one still runs: no second Job at once; it starts when
	// the running one ends.
	nextDay := threeAM.Add(24 * time.Hour)
	f.clock.SetTime(nextDay.Add(time.Minute))
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob, second}, f.backupJobs())
	require.Equal(t, database.Result{}, result, "the Job's end is an event")
	f.finishJob(second, batchv1.JobComplete)
	_, err = f.reconcile()
	require.NoError(t, err)
	third := specs.BackupJobName(f.database(), nextDay.Add(time.Minute))
	require.Equal(t, []string{firstJob, second, third}, f.backupJobs())
	db = f.database()
	require.Equal(t, second, db.Status.Backup.LastSuccessfulJob, "the latest that succeeded")
	require.Equal(t, time0(nextDay.Add(time.Minute)), db.Status.Backup.LastSuccessfulTime)
	require.Equal(t, third, db.Status.Backup.ActiveJob)
}

// jobPod plays the Job controller and the kubelet: the Pod of the backup Job named n, which
// ended with exitCode and the termination message of its container "backup".
func (f *fixture) jobPod(n string, exitCode int32, message string) {
	f.t.Helper()
	job := f.job(n).DeepCopy()
	job.UID = types.UID("uid-" + n)
	require.NoError(f.t, f.kube.Tracker().Update(jobs, job, namespace))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: n + "-x7k2p", Labels: job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: n, UID: job.UID, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "backup", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Message: message}}}}},
	}
	require.NoError(f.t, f.kube.Tracker().Add(pod))
}

// firstBackupRunning is the fixture of a Database backed up daily at 3:00 whose first backup
// Job has started, at start, once the Database was Ready; the clock then reads start+10m.
func firstBackupRunning(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, backedUpDatabase("0 3 * * *"), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs())
	f.clock.SetTime(start.Add(10 * time.Minute))
	return f
}

// firstBackupEnds ends the first backup's Job well, its Pod's termination message message,
// and reconciles.
func (f *fixture) firstBackupEnds(message string) {
	f.t.Helper()
	f.jobPod(firstJob, 0, message)
	f.finishJob(firstJob, batchv1.JobComplete)
	_, err := f.reconcile()
	require.NoError(f.t, err)
}

// report is a backup Job's termination message reporting firstRecoverableTime at t.
func report(t time.Time) string { return fmt.Sprintf("firstRecoverableTime=%d\n", t.Unix()) }

// status.backup.firstRecoverableTime is what the last backup that succeeded reported of the
// store (engine.BackupReport, its Pod's termination message); a report that says nothing, a
// failed Job's and a Job's whose Pods are gone change nothing.
func TestFirstRecoverableTimeIsWhatTheLastBackupReported(t *testing.T) {
	f := firstBackupRunning(t)
	oldest := start.Add(-48 * time.Hour)
	f.firstBackupEnds(report(oldest))
	require.Equal(t, time0(oldest), f.database().Status.Backup.FirstRecoverableTime)

	// The next, whose report does not parse: the window's start stays.
	threeAM := time.Date(2026, time.March, 2, 3, 0, 0, 0, time.UTC)
	f.clock.SetTime(threeAM)
	_, err := f.reconcile()
	require.NoError(t, err)
	second := specs.BackupJobName(f.database(), threeAM)
	f.jobPod(second, 0, "ERROR: [082]: unable to read backup.info")
	f.clock.SetTime(threeAM.Add(time.Minute))
	f.finishJob(second, batchv1.JobComplete)
	_, err = f.reconcile()
	require.NoError(t, err)
	db := f.database()
	require.Equal(t, second, db.Status.Backup.LastSuccessfulJob)
	require.Equal(t, time0(oldest), db.Status.Backup.FirstRecoverableTime)

	// A failed backup's message is not a report.
	fourAM := threeAM.Add(24 * time.Hour)
	f.clock.SetTime(fourAM)
	_, err = f.reconcile()
	require.NoError(t, err)
	third := specs.BackupJobName(f.database(), fourAM)
	f.jobPod(third, 1, report(fourAM))
	f.finishJob(third, batchv1.JobFailed)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, time0(oldest), f.database().Status.Backup.FirstRecoverableTime)

	// Retention expired the oldest: the next report moves the start.
	fiveAM := fourAM.Add(24 * time.Hour)
	f.clock.SetTime(fiveAM)
	_, err = f.reconcile()
	require.NoError(t, err)
	fourth := specs.BackupJobName(f.database(), fiveAM)
	f.jobPod(fourth, 0, report(threeAM.Add(30*time.Second)))
	f.finishJob(fourth, batchv1.JobComplete)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, time0(threeAM.Add(30*time.Second)), f.database().Status.Backup.FirstRecoverableTime)
}

// A report whose time is later than its Job's end (and ReportClockSkew) is not taken: a node
// clock far ahead, or a store's records written by someone else, would otherwise refuse
// every restore of the Database until then; past year 9999 it is no report at all.
func TestABackupReportLaterThanItsJobIsNotTaken(t *testing.T) {
	for name, at := range map[string]time.Time{
		"a day ahead":                start.Add(24*time.Hour + 10*time.Minute),
		"just past the allowed skew": start.Add(10*time.Minute + database.ReportClockSkew + time.Second),
		"year 10000":                 time.Unix(253402300800, 0),
	} {
		t.Run(name, func(t *testing.T) {
			f := firstBackupRunning(t)
			f.firstBackupEnds(report(at))
			require.Nil(t, f.database().Status.Backup.FirstRecoverableTime)
		})
	}
	t.Run("within the skew", func(t *testing.T) {
		f := firstBackupRunning(t)
		ahead := start.Add(10*time.Minute + database.ReportClockSkew)
		f.firstBackupEnds(report(ahead))
		require.Equal(t, time0(ahead), f.database().Status.Backup.FirstRecoverableTime)
	})
}

// A Job tried twice (backoffLimit 1) has two Pods: the report is the one of the Pod that
// finished last.
func TestABackupReportIsTheLastPodsOfItsJob(t *testing.T) {
	f := firstBackupRunning(t)
	older, newer := start.Add(-72*time.Hour), start.Add(-48*time.Hour)
	f.jobPod(firstJob, 0, report(newer))
	jobPod := func() *corev1.Pod {
		obj, err := f.kube.Tracker().Get(pods, namespace, firstJob+"-x7k2p")
		require.NoError(t, err)
		return obj.(*corev1.Pod).DeepCopy()
	}
	second := jobPod()
	second.Name, second.ResourceVersion = firstJob+"-a1b2c", ""
	second.Status.ContainerStatuses[0].State.Terminated.Message = report(older)
	second.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(start.Add(5 * time.Minute))
	require.NoError(t, f.kube.Tracker().Add(second))
	last := jobPod()
	last.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(start.Add(9 * time.Minute))
	require.NoError(t, f.kube.Tracker().Update(pods, last, namespace))
	f.finishJob(firstJob, batchv1.JobComplete)
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, time0(newer), f.database().Status.Backup.FirstRecoverableTime)
}

// The report is read only from a Job the Database controls: once its Job is gone (ttl), a
// Job of the same name and labels made by someone else does not speak for the store.
func TestABackupReportOfAJobTheDatabaseDoesNotControlIsNotTaken(t *testing.T) {
	f := firstBackupRunning(t)
	oldest := start.Add(-48 * time.Hour)
	f.firstBackupEnds(report(oldest))
	require.Equal(t, time0(oldest), f.database().Status.Backup.FirstRecoverableTime)

	ours := f.job(firstJob).DeepCopy()
	require.NoError(t, f.kube.Tracker().Delete(jobs, namespace, firstJob))
	require.NoError(t, f.kube.Tracker().Delete(pods, namespace, firstJob+"-x7k2p"))
	foreign := &batchv1.Job{ObjectMeta: ours.ObjectMeta, Spec: ours.Spec, Status: ours.Status}
	foreign.OwnerReferences, foreign.ResourceVersion = nil, ""
	require.NoError(t, f.kube.Tracker().Add(foreign))
	f.clock.SetTime(start.Add(11 * time.Minute))
	f.jobPod(firstJob, 0, report(start.Add(11*time.Minute)))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, time0(oldest), f.database().Status.Backup.FirstRecoverableTime)
}

// A failed backup is tried again at once when the spec changed since its Job started, not
// for the same spec.
func TestAFailedBackupIsRetriedAtOnceForANewerSpec(t *testing.T) {
	f := newFixture(t, backedUpDatabase("0 3 * * *"), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, "1", f.job(firstJob).Annotations[specs.BackupGenerationAnnotation])
	f.clock.SetTime(start.Add(time.Minute))
	f.finishJob(firstJob, batchv1.JobFailed)

	f.clock.SetTime(start.Add(2 * time.Minute))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, int64(1), f.database().Generation)
	require.Equal(t, []string{firstJob}, f.backupJobs(), "generation 1, as the failed Job's")
	require.Equal(t, examplev1.ReasonBackupFailed, condition(f.database(), examplev1.ConditionBackedUp).Reason)

	f.updateDatabase(func(db *examplev1.Database) {
		db.Spec.Backup = backupPolicy("0 3 * * *")
		db.Spec.Backup.RetentionFullBackups = ptr.To[int32](3)
	})
	require.Equal(t, int64(2), f.database().Generation)
	retry := specs.BackupJobName(f.database(), start.Add(3*time.Minute))
	f.clock.SetTime(start.Add(3 * time.Minute))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob, retry}, f.backupJobs())
	require.Equal(t, "2", f.job(retry).Annotations[specs.BackupGenerationAnnotation])
	db := f.database()
	require.Equal(t, retry, db.Status.Backup.ActiveJob)
	require.Equal(t, time0(start.Add(3*time.Minute)), db.Status.Backup.LastScheduleTime)
	require.Equal(t, examplev1.ReasonBackupFailed, condition(db, examplev1.ConditionBackedUp).Reason, "until the retry ends")

	// It fails too, at the same generation: no third at once.
	f.clock.SetTime(start.Add(4 * time.Minute))
	f.finishJob(retry, batchv1.JobFailed)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob, retry}, f.backupJobs())
	require.Equal(t, retry, f.database().Status.Backup.LastFailedJob)
}

// spec.backup set on a Ready Database: the Pods must run the backup server before a backup
// Job can read through it, so the first backup waits for the rollout.
func TestBackupSetOnAReadyDatabaseWaitsForTheRollout(t *testing.T) {
	f := newFixture(t, exampleDatabase(), storeSecret(t, false))
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Backup = backupPolicy("") })
	_, err := f.reconcile()
	require.NoError(t, err)
	require.True(t, archives(f))
	require.Empty(t, f.backupJobs(), "no Pod runs the backup server yet")
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, f.backupJobs(), "the StatefulSet is not rolled out")

	f.setStatefulSetStatus(3, "rev-2", "rev-2")
	_, err = f.reconcile()
	require.NoError(t, err)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs())
}

// spec.backup removed: the BackedUp condition goes, status.backup stays (the store may still
// hold those backups), the Pods stop archiving, and the store's Secret is no longer read.
func TestRemovingBackupRemovesTheConditionAndKeepsTheRecord(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.clock.SetTime(start.Add(time.Minute))
	f.finishJob(firstJob, batchv1.JobComplete)
	_, err = f.reconcile()
	require.NoError(t, err)
	record := f.database().Status.Backup.DeepCopy()
	require.Equal(t, firstJob, record.LastSuccessfulJob)
	require.Equal(t, metav1.ConditionTrue, condition(f.database(), examplev1.ConditionBackedUp).Status)

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Backup = nil })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, f.actions, "get secrets store-keys")
	db := f.database()
	require.Equal(t, metav1.Condition{}, condition(db, examplev1.ConditionBackedUp), "no BackedUp condition")
	require.Equal(t, record, db.Status.Backup)
	require.False(t, archives(f))
	require.Equal(t, []string{"database"}, containerNames(f.statefulSet().Spec.Template.Spec))
	require.NotContains(t, volumeNames(f.statefulSet().Spec.Template.Spec), "backup-tls")
	require.Equal(t, []string{firstJob}, f.backupJobs())
}

// The backup certificates are made anew once one is within 30 days of expiring.
func TestBackupCertificatesAreRenewedBeforeTheyExpire(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""), storeSecret(t, false))
	_, err := f.reconcile()
	require.NoError(t, err)
	old, err := f.kube.Tracker().Get(secrets, namespace, "my-database-backup-tls")
	require.NoError(t, err)
	oldData := old.(*corev1.Secret).Data

	f.clock.SetTime(start.Add(specs.BackupCertificateValidity - 31*24*time.Hour))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.NotContains(t, f.actions, "update secrets my-database-backup-tls")

	renewal := start.Add(specs.BackupCertificateValidity - 29*24*time.Hour)
	f.clock.SetTime(renewal)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Contains(t, f.actions, "update secrets my-database-backup-tls")
	renewed, err := f.kube.Tracker().Get(secrets, namespace, "my-database-backup-tls")
	require.NoError(t, err)
	data := renewed.(*corev1.Secret).Data
	require.NotEqual(t, oldData["ca.crt"], data["ca.crt"])
	require.Empty(t, specs.BackupTLSSecretCurrent(data, renewal))
}

// restoringDatabase is the example Database restored from "ledger" as of at.
func restoringDatabase(at time.Time) *examplev1.Database {
	db := backedUpDatabase("")
	db.Spec.Restore = &examplev1.DatabaseRestore{Database: "ledger", PointInTime: at.Format(time.RFC3339)}
	return db
}

// setRestoreStatus plays the kubelet: the first Pod's restore init container in state.
func (f *fixture) setRestoreStatus(state, last corev1.ContainerState) {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "my-database-0", Labels: map[string]string{
			"app.kubernetes.io/name": "postgresql", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "database-controller"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "restore", State: state, LastTerminationState: last}}},
	}
	if _, err := f.kube.Tracker().Get(pods, namespace, pod.Name); err == nil {
		require.NoError(f.t, f.kube.Tracker().Update(pods, pod, namespace))
	} else {
		require.NoError(f.t, f.kube.Tracker().Add(pod))
	}
}

// A Database created with spec.restore: its first Pod restores the source's backups before
// its server starts; Restored says so while it runs, with the end of its log and a Warning
// Event while it fails (the Database never Ready), and True once it ended well, for good.
func TestRestoreIsReportedFromTheFirstPod(t *testing.T) {
	at := time.Date(2026, time.February, 28, 23, 59, 30, 0, time.UTC)
	f := newFixture(t, restoringDatabase(at), storeSecret(t, false))
	_, err := f.reconcile()
	require.NoError(t, err)
	obj, err := f.kube.Tracker().Get(configMaps, namespace, "my-database-replication")
	require.NoError(t, err)
	require.NotContains(t, obj.(*corev1.ConfigMap).Data, "restored")
	init := f.statefulSet().Spec.Template.Spec.InitContainers
	require.Equal(t, []string{"restore", "setup"}, []string{init[0].Name, init[1].Name}, "the restore before the setup")
	c := condition(f.database(), examplev1.ConditionRestored)
	require.Equal(t, metav1.ConditionUnknown, c.Status)
	require.Equal(t, examplev1.ReasonRestoring, c.Reason)
	require.Equal(t, "waiting for Pod my-database-0 to restore the backups of ledger as of 2026-02-28T23:59:30Z", c.Message)

	f.setRestoreStatus(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, corev1.ContainerState{})
	_, err = f.reconcile()
	require.NoError(t, err)
	c = condition(f.database(), examplev1.ConditionRestored)
	require.Equal(t, examplev1.ReasonRestoring, c.Reason)
	require.Equal(t, "Pod my-database-0 is restoring the backups of ledger as of 2026-02-28T23:59:30Z", c.Message)

	// It failed, and waits to try again.
	failed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
		Message: "ERROR: [075]: no backup set found to restore\n"}}
	f.setRestoreStatus(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, failed)
	_, err = f.reconcile()
	require.NoError(t, err)
	db := f.database()
	c = condition(db, examplev1.ConditionRestored)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, examplev1.ReasonRestoreFailed, c.Reason)
	require.Equal(t, "Pod my-database-0 could not restore the backups of ledger as of 2026-02-28T23:59:30Z (it tries again): ERROR: [075]: no backup set found to restore", c.Message)
	require.Equal(t, examplev1.ReasonRestoreFailed, condition(db, examplev1.ConditionReady).Reason)
	require.Contains(t, f.events(), "Warning RestoreFailed "+c.Message)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Empty(t, slices.DeleteFunc(f.events(), func(e string) bool { return !strings.Contains(e, "RestoreFailed") }), "one Event per failure")

	// Done: True from then on, whatever the Pod's container says later.
	f.setRestoreStatus(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}, failed)
	_, err = f.reconcile()
	require.NoError(t, err)
	c = condition(f.database(), examplev1.ConditionRestored)
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, examplev1.ReasonRestored, c.Reason)
	require.Equal(t, "Pod my-database-0 restored the backups of ledger as of 2026-02-28T23:59:30Z", c.Message)
	require.NoError(t, f.kube.Tracker().Delete(pods, namespace, "my-database-0"))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, metav1.ConditionTrue, condition(f.database(), examplev1.ConditionRestored).Status)
	// The restore scripts learn it from the replication ConfigMap: an empty volume later
	// is not filled from the source's old backups again.
	obj, err = f.kube.Tracker().Get(configMaps, namespace, "my-database-replication")
	require.NoError(t, err)
	require.Equal(t, "true", obj.(*corev1.ConfigMap).Data["restored"])
}

// A Database to restore whose store's Secret is missing gets no StatefulSet: its first Pod
// would initialise an empty database in place of the restored one.
func TestRestoreWithoutTheStoreMakesNoServer(t *testing.T) {
	f := newFixture(t, restoringDatabase(start))
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.False(t, f.exists(statefulSets, name))
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
	c := condition(db, examplev1.ConditionReady)
	require.Equal(t, examplev1.ReasonRestoreFailed, c.Reason)
	require.Contains(t, c.Message, "cannot restore: Secret store-keys (spec.backup.s3.secretName) does not exist")

	require.NoError(t, f.kube.Tracker().Add(storeSecret(t, false)))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.True(t, f.exists(statefulSets, name))
	require.Equal(t, "restore", f.statefulSet().Spec.Template.Spec.InitContainers[0].Name)
}

// A backup asked for through databases/backup (status.backup.request) newer than the last
// start starts a Job at once, whatever the schedule; one older than the last start does not.
func TestARequestedBackupStartsAtOnce(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.clock.SetTime(start.Add(time.Minute))
	f.finishJob(firstJob, batchv1.JobComplete)
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs(), "no schedule: nothing more")

	// A request recorded before the first start is served by it.
	f.updateDatabase(func(db *examplev1.Database) {
		db.Status.Backup.Request = &examplev1.DatabaseBackupRequestStatus{RequestedBy: "alice", RequestedAt: metav1.NewTime(start.Add(-time.Second))}
	})
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{firstJob}, f.backupJobs())

	f.clock.SetTime(start.Add(2 * time.Hour))
	f.updateDatabase(func(db *examplev1.Database) {
		db.Status.Backup.Request = &examplev1.DatabaseBackupRequestStatus{RequestedBy: "alice", RequestedAt: metav1.NewTime(start.Add(time.Hour))}
	})
	_, err = f.reconcile()
	require.NoError(t, err)
	second := specs.BackupJobName(f.database(), start.Add(2*time.Hour))
	require.Equal(t, []string{firstJob, second}, f.backupJobs())
	db := f.database()
	require.Equal(t, second, db.Status.Backup.ActiveJob)
	require.Equal(t, time0(start.Add(2*time.Hour)), db.Status.Backup.LastScheduleTime)
	require.Equal(t, "alice", db.Status.Backup.Request.RequestedBy, "the request stays recorded")
}

// A pass in which the primary does not say how its archiving goes (here: no server asked)
// keeps what it last said, and so does BackedUp: a recorded failure stays reported.
func TestArchiveFailureLastSeenStaysReported(t *testing.T) {
	f := newFixture(t, backedUpDatabase(""), storeSecret(t, false))
	f.ready()
	_, err := f.reconcile()
	require.NoError(t, err)
	f.clock.SetTime(start.Add(time.Minute))
	f.finishJob(firstJob, batchv1.JobComplete)
	f.updateDatabase(func(db *examplev1.Database) {
		db.Status.Backup.ArchiveFailureTime = time0(start.Add(30 * time.Second))
	})
	_, err = f.reconcile()
	require.NoError(t, err)
	db := f.database()
	require.Equal(t, time0(start.Add(30*time.Second)), db.Status.Backup.ArchiveFailureTime)
	c := condition(db, examplev1.ConditionBackedUp)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, examplev1.ReasonArchiveFailing, c.Reason)
	require.Equal(t, "the primary failed to archive its WAL at 2026-03-01T12:00:30Z, as it last said; its changes pile up on its volume until the store takes them", c.Message)
}
