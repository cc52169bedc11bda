package controllerpolicy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/controllerpolicy"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/catalog"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
)

var (
	jobs            = batchv1.SchemeGroupVersion.WithResource("jobs")
	jobKind         = batchv1.SchemeGroupVersion.WithKind("Job")
	secrets         = corev1.SchemeGroupVersion.WithResource("secrets")
	secretKind      = corev1.SchemeGroupVersion.WithKind("Secret")
	networkPolicies = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	networkPolicyK  = networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")
)

// backedUp is db with spec.backup (its store's Secret "store"), and what the controller
// resolves for it: Desired.Backup, the store's Secret holding a CA when ca.
func backedUp(t *testing.T, db *examplev1.Database, ca bool) (*examplev1.Database, specs.Desired) {
	t.Helper()
	db = db.DeepCopy()
	db.Spec.Backup = &examplev1.DatabaseBackupPolicy{
		Schedule: "0 3 * * *",
		S3:       examplev1.DatabaseBackupS3{Endpoint: "https://minio.storage.svc:9000", Bucket: "backups", Prefix: "databases", SecretName: "store"},
	}
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	var ok bool
	d.Backup, ok = engine.ResolveBackupStore(db, ca)
	require.True(t, ok)
	return db, d
}

// backupJobAt is db's backup Job started at a fixed time.
func backupJob(t *testing.T, db *examplev1.Database, d specs.Desired) *batchv1.Job {
	t.Helper()
	job, err := specs.BackupJob(db, d, specs.BackupJobName(db, time.Date(2030, 6, 1, 3, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	return job
}

// asCreated is job as kube-apiserver's admission sees it on create: with a uid, Job defaults
// (batch/v1 SetDefaults_Job) and the selector and Pod template labels the Job strategy
// generates, and a few Pod defaults.
func asCreated(job *batchv1.Job) *batchv1.Job {
	j := job.DeepCopy()
	j.UID = types.UID("3f1d5c2e-8b7a-4e6f-9c0d-1a2b3c4d5e6f")
	if j.Spec.Completions == nil && j.Spec.Parallelism == nil {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](1), ptr.To[int32](1)
	}
	j.Spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	j.Spec.Suspend = ptr.To(false)
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
	j.Spec.ManualSelector = ptr.To(false)
	for _, k := range []string{"job-name", batchv1.JobNameLabel} {
		j.Spec.Template.Labels[k] = j.Name
	}
	for _, k := range []string{"controller-uid", batchv1.ControllerUidLabel} {
		j.Spec.Template.Labels[k] = string(j.UID)
	}
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}}
	pod := &j.Spec.Template.Spec
	pod.DNSPolicy, pod.SchedulerName, pod.TerminationGracePeriodSeconds = corev1.DNSClusterFirst, corev1.DefaultSchedulerName, ptr.To[int64](30)
	return j
}

// The children the controller builds for a PostgreSQL Database with spec.backup, for every
// catalog line, one replica or three, a store with a CA or without, a short name or the
// longest (whose Job name is cut to 63 characters), by the cluster-wide or a namespaced
// controller, are admitted: the StatefulSet (created, and updated from and back to the one
// without spec.backup), the backup Job (as built, and as kube-apiserver defaults it), the
// Secret of its certificates (created, and updated with new ones) and the NetworkPolicy.
func TestTheControllersBackupChildrenAreAdmitted(t *testing.T) {
	policies := loadPolicies(t)
	e := examplev1.EnginePostgreSQL
	for _, line := range catalog.Lines(e) {
		for _, replicas := range []int32{1, 3} {
			for _, ca := range []bool{false, true} {
				for _, dbName := range []string{"my-database", strings.Repeat("d", 52)} {
					name := fmt.Sprintf("%s %s, %d replicas, CA %t, name of %d", e, line, replicas, ca, len(dbName))
					plain := database(e, line, replicas)
					plain.Name = dbName
					db, d := backedUp(t, plain, ca)
					without, err := specs.NewChildren(plain, "password", "database-system")
					require.NoError(t, err, name)

					sts := specs.StatefulSet(db, d)
					require.Len(t, sts.Spec.Template.Spec.Containers, 2, name)
					job := backupJob(t, db, d)
					require.LessOrEqual(t, len(job.Name), 63, name)
					secret, err := specs.BackupTLSSecret(db, d, time.Now())
					require.NoError(t, err, name)
					for _, user := range []string{controllerUser, namespacedUser} {
						require.Empty(t, denials(t, policies, write(user, statefulSet, statefulSets, sts, nil)), name)
						require.Empty(t, denials(t, policies, write(user, jobKind, jobs, job, nil)), name)
						require.Empty(t, denials(t, policies, write(user, jobKind, jobs, asCreated(job), nil)), name+", defaulted")
						require.Empty(t, denials(t, policies, write(user, secretKind, secrets, secret, nil)), name)
					}

					have := without.StatefulSet.DeepCopy()
					specs.SyncStatefulSet(have, sts)
					require.Len(t, have.Spec.Template.Spec.Containers, 2, name)
					require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, have, without.StatefulSet)), name+", spec.backup set")
					back := have.DeepCopy()
					specs.SyncStatefulSet(back, without.StatefulSet)
					require.Len(t, back.Spec.Template.Spec.Containers, 1, name)
					require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, back, have)), name+", spec.backup unset")

					renewed, err := specs.BackupTLSSecret(db, d, time.Now().Add(5*365*24*time.Hour))
					require.NoError(t, err, name)
					require.Empty(t, denials(t, policies, write(controllerUser, secretKind, secrets, renewed, secret)), name+", renewed")

					db.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{
						{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}}}
					np := specs.NetworkPolicy(db, d, "database-system")
					require.Len(t, np.Spec.Ingress, 3, name)
					require.Empty(t, denials(t, policies, write(controllerUser, networkPolicyK, networkPolicies, np, nil)), name)
				}
			}
		}
	}
}

// Every change of controllerpolicy.BackupStatefulSetChanges is refused, created or updated,
// with its reason.
func TestBackupStatefulSetsOfOtherShapesAreRefused(t *testing.T) {
	policies := loadPolicies(t)
	db, d := backedUp(t, database(examplev1.EnginePostgreSQL, catalog.Lines(examplev1.EnginePostgreSQL)[0], 3), true)
	built := specs.StatefulSet(db, d)
	require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, built, nil)))
	for _, tc := range controllerpolicy.BackupStatefulSetChanges() {
		t.Run(tc.Name, func(t *testing.T) {
			sts := built.DeepCopy()
			tc.Change(sts)
			requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil), tc.Policy, tc.Want)
			requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, built), tc.Policy, tc.Want)
		})
	}
}

// An engine without backups gets none of their shapes: no backup container, no backup
// volume, no reference to a store's keys.
func TestStatefulSetsOfEnginesWithoutBackupsGetNone(t *testing.T) {
	policies := loadPolicies(t)
	pgDB, d := backedUp(t, database(examplev1.EnginePostgreSQL, catalog.Lines(examplev1.EnginePostgreSQL)[0], 3), true)
	pg := specs.StatefulSet(pgDB, d)
	var backup corev1.Container
	for _, c := range pg.Spec.Template.Spec.Containers {
		if c.Name == "backup" {
			backup = c
		}
	}
	for _, e := range []examplev1.Engine{examplev1.EngineMySQL, examplev1.EngineMongoDB} {
		built, err := specs.NewChildren(database(e, catalog.Lines(e)[0], 3), "password", "database-system")
		require.NoError(t, err)
		for _, tc := range []struct {
			name   string
			change func(*appsv1.StatefulSet)
			want   string
		}{
			{"a backup container", func(sts *appsv1.StatefulSet) {
				c := *backup.DeepCopy()
				c.Image = sts.Spec.Template.Spec.Containers[0].Image
				sts.Spec.Template.Spec.Containers = append(sts.Spec.Template.Spec.Containers, c)
			}, "container backup is not one the recipe builds (database, and the init container setup)"},
			{"the store's keys", func(sts *appsv1.StatefulSet) {
				c := &sts.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, engine.SecretEnv("PGBACKREST_REPO1_S3_KEY", "store", examplev1.BackupSecretKeyAccessKeyID))
			}, "container database reads its environment from a Secret other than my-database-credentials or a ConfigMap other than my-database-replication, my-database-initdb"},
			{"a pgBackRest option", func(sts *appsv1.StatefulSet) {
				c := &sts.Spec.Template.Spec.Containers[0]
				c.Env = append(c.Env, corev1.EnvVar{Name: "PGBACKREST_STANZA", Value: "my-database"})
			}, "container database gives pgBackRest an option (a PGBACKREST_ variable), and the " + string(e) + " engine has no backups"},
			{"a run volume", func(sts *appsv1.StatefulSet) {
				sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes,
					corev1.Volume{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}, "volume run is not one the recipe mounts"},
			{"the backup certificates", func(sts *appsv1.StatefulSet) {
				sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes, engine.BackupTLSVolume(pgDB, engine.BackupTLSKeyCA))
			}, "volume backup-tls is not one the recipe mounts"},
		} {
			t.Run(string(e)+" with "+tc.name, func(t *testing.T) {
				sts := built.StatefulSet.DeepCopy()
				tc.change(sts)
				requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil), "database-controller-workloads", tc.want)
			})
		}
	}
}

// Every change of controllerpolicy.JobChanges is refused with its reason, as the controller
// builds the Job and as kube-apiserver's admission sees it, by the cluster-wide and a
// namespaced controller; an update is bounded as a create.
func TestBackupJobsOfOtherShapesAreRefused(t *testing.T) {
	policies := loadPolicies(t)
	db, d := backedUp(t, database(examplev1.EnginePostgreSQL, catalog.Lines(examplev1.EnginePostgreSQL)[0], 3), true)
	built := backupJob(t, db, d)
	for _, tc := range controllerpolicy.JobChanges() {
		t.Run(tc.Name, func(t *testing.T) {
			for _, defaulted := range []bool{false, true} {
				job := built.DeepCopy()
				if defaulted {
					job = asCreated(job)
				}
				tc.Change(job)
				requireDenied(t, policies, write(controllerUser, jobKind, jobs, job, nil), tc.Policy, tc.Want)
				requireDenied(t, policies, write(namespacedUser, jobKind, jobs, job, nil), tc.Policy, tc.Want)
			}
			job := asCreated(built)
			old := job.DeepCopy()
			tc.Change(job)
			requireDenied(t, policies, write(controllerUser, jobKind, jobs, job, old), tc.Policy, tc.Want)
		})
	}
}

// A backup Job's name is its Database's followed by "-backup-" and a base 36 number, the
// Database's name cut only as far as 63 characters need.
func TestBackupJobNamesAreTheirDatabases(t *testing.T) {
	policies := loadPolicies(t)
	long := database(examplev1.EnginePostgreSQL, "16", 1)
	long.Name = strings.Repeat("d", 52)
	db, d := backedUp(t, long, false)
	built := backupJob(t, db, d)
	require.Len(t, built.Name, 63)
	for name, jobName := range map[string]string{
		"cut short":         strings.Repeat("d", 40) + "-backup-t0abcd",
		"not cut":           strings.Repeat("d", 52) + "-backup-t0abcd",
		"upper case":        built.Name[:len(built.Name)-1] + "Z",
		"of another suffix": strings.Repeat("d", 49) + "-restore-0abcd",
		"nested":            strings.Repeat("d", 40) + "-backup-x-backup-1",
	} {
		job := built.DeepCopy()
		job.Name = jobName
		requireDenied(t, policies, write(controllerUser, jobKind, jobs, job, nil), "database-controller-jobs",
			"its name be <that name>-backup-<lowercase base 36>")
		t.Logf("%s: refused", name)
	}
}

// The backup Secret is refused as any other Secret of the controller's when it is not
// Opaque or not its Database's.
func TestBackupTLSSecretsAreBoundedAsSecrets(t *testing.T) {
	policies := loadPolicies(t)
	db, d := backedUp(t, database(examplev1.EnginePostgreSQL, "16", 3), false)
	built, err := specs.BackupTLSSecret(db, d, time.Now())
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		change func(*corev1.Secret)
		policy string
		want   string
	}{
		{"of type service-account-token", func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeServiceAccountToken
			s.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
		}, "database-controller-secrets", "type kubernetes.io/service-account-token is not Opaque"},
		{"without a Database owner", func(s *corev1.Secret) { s.OwnerReferences = nil },
			"database-controller-children", "its controller ownerReference must be an example.com/v1 Database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := built.DeepCopy()
			tc.change(s)
			for _, old := range []k8sruntime.Object{nil, built} {
				requireDenied(t, policies, write(controllerUser, secretKind, secrets, s, old), tc.policy, tc.want)
			}
		})
	}
}

// restoreContainer is the restore init container of sts.
func restoreContainer(t *testing.T, sts *appsv1.StatefulSet) *corev1.Container {
	t.Helper()
	for i, c := range sts.Spec.Template.Spec.InitContainers {
		if c.Name == "restore" {
			return &sts.Spec.Template.Spec.InitContainers[i]
		}
	}
	require.FailNow(t, "no restore init container")
	return nil
}

// The StatefulSet of a PostgreSQL Database created with spec.restore, to the end of the
// archive or a point in time, one replica or three, a store with a CA or without, is
// admitted, created and updated; its restore init container running another command, reading
// other keys or giving pgBackRest another stanza or option, or a restore container of an
// engine without backups, is refused.
func TestTheControllersRestoreStatefulSetsAreAdmitted(t *testing.T) {
	policies := loadPolicies(t)
	e := examplev1.EnginePostgreSQL
	for _, replicas := range []int32{1, 3} {
		for _, ca := range []bool{false, true} {
			for _, at := range []string{"", "2030-06-01T03:00:00.5Z"} {
				name := fmt.Sprintf("%d replicas, CA %t, point in time %q", replicas, ca, at)
				db, d := backedUp(t, database(e, catalog.Lines(e)[0], replicas), ca)
				db.Spec.Restore = &examplev1.DatabaseRestore{Database: "source", PointInTime: at}
				sts := specs.StatefulSet(db, d)
				restoreContainer(t, sts)
				require.Empty(t, denials(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil)), name)
				have := sts.DeepCopy()
				specs.SyncStatefulSet(have, sts)
				require.Empty(t, denials(t, policies, write(namespacedUser, statefulSet, statefulSets, have, sts)), name+", updated")
			}
		}
	}

	db, d := backedUp(t, database(e, catalog.Lines(e)[0], 3), true)
	db.Spec.Restore = &examplev1.DatabaseRestore{Database: "source"}
	built := specs.StatefulSet(db, d)
	for _, tc := range []struct {
		name   string
		change func(*appsv1.StatefulSet)
		want   string
	}{
		{"running another command", func(sts *appsv1.StatefulSet) {
			restoreContainer(t, sts).Command = []string{"bash", "-c", "cat /etc/database-credentials/*"}
		}, "container restore has a command or args other than the postgresql recipe's"},
		{"reading another key of the store's Secret", func(sts *appsv1.StatefulSet) {
			c := restoreContainer(t, sts)
			for i := range c.Env {
				if c.Env[i].Name == "PGBACKREST_REPO1_S3_KEY" {
					c.Env[i].ValueFrom.SecretKeyRef.Key = "password"
				}
			}
		}, "container restore reads its environment from a Secret other than"},
		{"giving pgBackRest another option", func(sts *appsv1.StatefulSet) {
			c := restoreContainer(t, sts)
			c.Env = append(c.Env, corev1.EnvVar{Name: "PGBACKREST_CMD", Value: "/bin/sh"})
		}, "container restore gives pgBackRest an option (a PGBACKREST_ variable) the engine's backups do not give it"},
		{"as a container", func(sts *appsv1.StatefulSet) {
			c := *restoreContainer(t, sts).DeepCopy()
			sts.Spec.Template.Spec.Containers = append(sts.Spec.Template.Spec.Containers, c)
		}, "container restore is not one the recipe builds (database, backup, and the init containers restore and setup)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts := built.DeepCopy()
			tc.change(sts)
			requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil), "database-controller-workloads", tc.want)
		})
	}

	mysql, err := specs.NewChildren(database(examplev1.EngineMySQL, catalog.Lines(examplev1.EngineMySQL)[0], 3), "password", "database-system")
	require.NoError(t, err)
	sts := mysql.StatefulSet.DeepCopy()
	c := *restoreContainer(t, built).DeepCopy()
	c.Image, c.Env = sts.Spec.Template.Spec.Containers[0].Image, nil
	sts.Spec.Template.Spec.InitContainers = append([]corev1.Container{c}, sts.Spec.Template.Spec.InitContainers...)
	requireDenied(t, policies, write(controllerUser, statefulSet, statefulSets, sts, nil), "database-controller-workloads",
		"container restore is not one the recipe builds (database, and the init container setup)")
}
