package specs_test

import (
	"bufio"
	"net/netip"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/engine/mysql"
	"example.com/database-apiserver/pkg/engine/postgresql"
	"example.com/database-apiserver/pkg/names"
)

func resolve(t *testing.T, db *examplev1.Database) specs.Desired {
	t.Helper()
	d, err := specs.Resolve(db)
	require.NoError(t, err)
	return d
}

func secretRef(key string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "my-database-credentials"}, Key: key}}
}

func TestPostgreSQLPodsRunTheSetupScriptBeforeTheServer(t *testing.T) {
	db := database(3)
	d := resolve(t, db)
	require.True(t, d.Recipe.Replicates())
	pod := specs.StatefulSet(db, d).Spec.Template.Spec
	server := pod.Containers[0]

	require.Len(t, pod.InitContainers, 1)
	setup := pod.InitContainers[0]
	require.Equal(t, specs.SetupContainerName, setup.Name)
	require.Equal(t, server.Image, setup.Image, "pg_basebackup of the server's major version")
	require.Equal(t, []string{"bash", "/etc/database/postgresql-setup.sh"}, setup.Command)
	require.Equal(t, server.Resources, setup.Resources)
	require.Equal(t, []corev1.VolumeMount{
		{Name: engine.DataVolumeName, MountPath: "/var/lib/postgresql/data"},
		{Name: "credentials", MountPath: "/etc/database-credentials", ReadOnly: true},
		{Name: "replication", MountPath: "/etc/database", ReadOnly: true},
	}, setup.VolumeMounts)
	env := map[string]corev1.EnvVar{}
	for _, e := range setup.Env {
		env[e.Name] = e
	}
	require.Equal(t, secretRef(names.SecretKeyReplicationUsername), env["REPLICATION_USER"].ValueFrom)
	require.Equal(t, "/etc/database-credentials/replication-password", env["REPLICATION_PASSWORD_FILE"].Value)
	require.Equal(t, "my-database.production.svc.cluster.local", env["PRIMARY_HOST"].Value, "the client Service, which routes to the primary")
	require.Equal(t, "5432", env["PGPORT"].Value)
	for _, e := range server.Env {
		require.Equal(t, e, env[e.Name], "the server's %s: the same PGDATA", e.Name)
	}

	require.Equal(t, []corev1.Volume{
		{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "my-database-credentials", DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{{Key: "superuser-password", Path: "superuser-password"}, {Key: "replication-password", Path: "replication-password"}}}}},
		{Name: "replication", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "my-database-replication"}, DefaultMode: ptr.To[int32](0o444)}}},
	}, pod.Volumes)
	require.Contains(t, server.VolumeMounts, corev1.VolumeMount{Name: "replication", MountPath: "/etc/database", ReadOnly: true})
	require.Equal(t, "postgres", server.Args[0], "the image's entrypoint runs the server")
	require.Subset(t, server.Args, []string{"hba_file=/etc/database/pg_hba.conf", "hot_standby_feedback=on", "wal_log_hints=on", "wal_keep_size=512MB"})
	var settings []string
	for i, a := range server.Args[1:] {
		if i%2 == 0 {
			require.Equal(t, "-c", a, "settings as -c pairs: %v", server.Args)
		} else if !strings.HasPrefix(a, "hba_file=") {
			settings = append(settings, a)
		}
	}
	require.Equal(t, strings.Join(settings, " "), env["SERVER_SETTINGS"].Value,
		"the setup script's pg_rewind recovers a server with the settings it runs with, hba_file aside")
	require.Equal(t, &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "kill -INT 1"}}}},
		server.Lifecycle, "a fast shutdown, which sends the standbys every WAL record")
}

// apiServerDefaults sets on sts what kube-apiserver's defaulting adds to a StatefulSet's Pod
// template (SetDefaults_PodSpec, SetDefaults_Container), none of which the controller owns.
func apiServerDefaults(sts *appsv1.StatefulSet) {
	sts.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}
	pod := &sts.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	pod.DNSPolicy = corev1.DNSClusterFirst
	pod.SchedulerName = corev1.DefaultSchedulerName
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	for _, containers := range [][]corev1.Container{pod.Containers, pod.InitContainers} {
		for i := range containers {
			c := &containers[i]
			c.ImagePullPolicy = corev1.PullIfNotPresent
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
	}
	metav1.SetMetaDataAnnotation(&sts.Spec.Template.ObjectMeta, "kubectl.kubernetes.io/restartedAt", "2026-03-01T12:00:00Z")
}

func TestSyncStatefulSetOfOneReadBackChangesNothing(t *testing.T) {
	for _, e := range []examplev1.Engine{examplev1.EnginePostgreSQL, examplev1.EngineMySQL, examplev1.EngineMongoDB} {
		t.Run(string(e), func(t *testing.T) {
			db := database(3)
			db.Spec.Engine, db.Spec.Version = e, map[examplev1.Engine]string{
				examplev1.EnginePostgreSQL: "14.5", examplev1.EngineMySQL: "8.4", examplev1.EngineMongoDB: "7.0"}[e]
			d := resolve(t, db)
			have := specs.StatefulSet(db, d)
			apiServerDefaults(have)
			before := have.DeepCopy()
			specs.SyncStatefulSet(have, specs.StatefulSet(db, d))
			require.True(t, equality.Semantic.DeepEqual(before, have), "no update every pass:\n%v\n%v", before.Spec.Template.Spec, have.Spec.Template.Spec)
		})
	}
}

func TestSyncStatefulSetAddsReplicationToAnEarlierPostgreSQLStatefulSet(t *testing.T) {
	db := database(3)
	d := resolve(t, db)
	want := specs.StatefulSet(db, d)
	have := want.DeepCopy()
	// As the controller made it before replication: one container, no volumes, no args.
	pod := &have.Spec.Template.Spec
	pod.InitContainers, pod.Volumes = nil, nil
	pod.Containers[0].Args, pod.Containers[0].Lifecycle = nil, nil
	pod.Containers[0].VolumeMounts = pod.Containers[0].VolumeMounts[:1]
	apiServerDefaults(have)

	specs.SyncStatefulSet(have, want)
	require.Equal(t, want.Spec.Template.Spec.InitContainers, have.Spec.Template.Spec.InitContainers)
	require.Equal(t, want.Spec.Template.Spec.Volumes, have.Spec.Template.Spec.Volumes)
	c := have.Spec.Template.Spec.Containers[0]
	require.Equal(t, want.Spec.Template.Spec.Containers[0].Args, c.Args)
	require.Equal(t, want.Spec.Template.Spec.Containers[0].Lifecycle, c.Lifecycle)
	require.Equal(t, want.Spec.Template.Spec.Containers[0].VolumeMounts, c.VolumeMounts)
	require.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, "the server's defaults are kept")
}

// A MongoDB Database's Pods form a replica set named after it: the setup init container copies
// the Secret's keyfile to an in-memory volume with the mode mongod requires, and the server runs
// with --replSet and --keyFile; the initialisation scripts are still mounted.
func TestMongoDBPodsRunAReplicaSet(t *testing.T) {
	db := database(3)
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMongoDB, "7.0"
	d := resolve(t, db)
	require.True(t, d.Recipe.Replicates())
	sts := specs.StatefulSet(db, d)
	require.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, sts.Spec.UpdateStrategy.Type)
	pod := sts.Spec.Template.Spec
	server := pod.Containers[0]
	require.Equal(t, []string{"mongod", "--replSet", "my-database", "--keyFile", "/etc/mongodb-key/keyfile"}, server.Args)
	require.Nil(t, server.Lifecycle, "SIGTERM is mongod's clean shutdown")
	require.Equal(t, []corev1.VolumeMount{
		{Name: engine.DataVolumeName, MountPath: "/data/db"},
		{Name: "credentials", MountPath: "/etc/database-credentials", ReadOnly: true},
		{Name: "initdb", MountPath: "/docker-entrypoint-initdb.d", ReadOnly: true},
		{Name: "mongodb-key", MountPath: "/etc/mongodb-key", ReadOnly: true},
	}, server.VolumeMounts)
	require.Contains(t, server.ReadinessProbe.Exec.Command[2], "h.isWritablePrimary && !h.secondary", "Ready as PRIMARY or SECONDARY only")

	require.Len(t, pod.InitContainers, 1)
	setup := pod.InitContainers[0]
	require.Equal(t, specs.SetupContainerName, setup.Name)
	require.Equal(t, server.Image, setup.Image)
	require.Equal(t, []string{"bash", "/etc/database/mongodb-setup.sh"}, setup.Command)
	require.Equal(t, []corev1.EnvVar{
		{Name: "KEYFILE_SOURCE", Value: "/etc/database-credentials/keyfile"},
		{Name: "KEYFILE", Value: "/etc/mongodb-key/keyfile"},
	}, setup.Env)
	require.Equal(t, []corev1.VolumeMount{
		{Name: "credentials", MountPath: "/etc/database-credentials", ReadOnly: true},
		{Name: "replication", MountPath: "/etc/database", ReadOnly: true},
		{Name: "mongodb-key", MountPath: "/etc/mongodb-key"},
	}, setup.VolumeMounts)
	require.Equal(t, engine.ContainerSecurityContext(), setup.SecurityContext)

	require.Equal(t, []string{engine.CredentialsVolumeName, "initdb", "replication", "mongodb-key"}, volumeNames(pod.Volumes))
	require.Equal(t, []corev1.KeyToPath{{Key: "superuser-password", Path: "superuser-password"}, {Key: "password", Path: "password"},
		{Key: "keyfile", Path: "keyfile"}}, pod.Volumes[0].Secret.Items)
	require.Equal(t, corev1.StorageMediumMemory, pod.Volumes[3].EmptyDir.Medium, "the key never reaches a disk")

	cm := specs.ReplicationConfigMap(db, resolve(t, db), "my-database-0")
	require.Equal(t, "my-database-0", cm.Data[specs.ConfigMapKeyPrimary])
	require.Contains(t, cm.Data, "mongodb-setup.sh")
	require.NotContains(t, cm.Data, "mysql-setup.sh")
	require.NotContains(t, cm.Data, "postgresql-setup.sh")

	c, err := specs.NewChildren(db, "secret", "database-system")
	require.NoError(t, err)
	require.NotNil(t, c.ReadService)
	require.Equal(t, "secret", string(c.Secret.Data[names.SecretKeyKeyFile]))
	require.NotContains(t, c.Secret.Data, names.SecretKeyReplicationUsername, "members authenticate with the keyfile")
	require.NotContains(t, c.Secret.Data, names.SecretKeyReplicationPassword)
	require.Equal(t, "my-database-read.production.svc.cluster.local", string(c.Secret.Data[names.SecretKeyReadHost]))
	require.Equal(t, "mongodb://app:secret@my-database-read.production.svc.cluster.local:27017/my_database?authSource=my_database&readPreference=secondaryPreferred",
		string(c.Secret.Data[names.SecretKeyReadURI]))
	require.Equal(t, "mongodb://app:secret@my-database.production.svc.cluster.local:27017/my_database?authSource=my_database",
		string(c.Secret.Data[names.SecretKeyURI]))
	require.Equal(t, specs.RolePrimary, specs.ClientService(db, d).Spec.Selector[specs.RoleLabel])
}

func TestNewChildrenOfAReplicatingDatabase(t *testing.T) {
	db := database(3)
	c, err := specs.NewChildren(db, "secret", "database-system")
	require.NoError(t, err)
	require.NotNil(t, c.ReplicationConfigMap)
	require.Equal(t, "my-database-replication", c.ReplicationConfigMap.Name)
	require.Equal(t, "my-database-0", specs.ReplicationPrimary(c.ReplicationConfigMap), "the first Pod initialises the data")
	require.NotNil(t, c.ReadService)
	require.Equal(t, "my-database-read", c.ReadService.Name)
	require.Equal(t, specs.RoleReplica, c.ReadService.Spec.Selector[specs.RoleLabel])
	require.Equal(t, specs.RolePrimary, c.ClientService.Spec.Selector[specs.RoleLabel])
	require.NotContains(t, c.ClientService.Spec.Selector, appsv1.StatefulSetPodNameLabel)
	for _, obj := range []metav1.Object{c.ReplicationConfigMap, c.ReadService} {
		require.Equal(t, []metav1.OwnerReference{specs.OwnerReference(db)}, obj.GetOwnerReferences(), obj.GetName())
		require.Equal(t, specs.ChildLabels(db), obj.GetLabels(), obj.GetName())
	}
	require.Equal(t, "replicator", string(c.Secret.Data[names.SecretKeyReplicationUsername]))
	require.Equal(t, "my-database-read.production.svc.cluster.local", string(c.Secret.Data[names.SecretKeyReadHost]))
	require.Equal(t, "postgresql://app:secret@my-database-read.production.svc.cluster.local:5432/my_database", string(c.Secret.Data[names.SecretKeyReadURI]))

	one, err := specs.NewChildren(database(1), "secret", "database-system")
	require.NoError(t, err)
	require.NotNil(t, one.ReplicationConfigMap, "the Pods mount it whatever the replicas")
	require.Nil(t, one.ReadService, "no replicas to read from")
	require.NotContains(t, one.Secret.Data, names.SecretKeyReadHost)
	require.NotContains(t, one.Secret.Data, names.SecretKeyReadURI)
	require.Equal(t, "replicator", string(one.Secret.Data[names.SecretKeyReplicationUsername]), "ready for a scale-up")
}

func TestSyncReplicationConfigMapKeepsThePrimaryAndRestoresTheScripts(t *testing.T) {
	db := database(3)
	want := specs.ReplicationConfigMap(db, resolve(t, db), "my-database-0")
	have := want.DeepCopy()
	have.Data["primary"] = "my-database-2"
	have.Data["pg_hba.conf"] = "host all all all trust\n"
	have.Data["extra"] = "edited"
	have.Labels = map[string]string{"team": "payments"}
	specs.SyncReplicationConfigMap(have, want)
	require.Equal(t, "my-database-2", specs.ReplicationPrimary(have), "moved only by a switchover")
	require.Equal(t, want.Data["pg_hba.conf"], have.Data["pg_hba.conf"])
	require.Equal(t, want.Data["postgresql-setup.sh"], have.Data["postgresql-setup.sh"])
	require.NotContains(t, have.Data, "extra")
	require.Equal(t, "payments", have.Labels["team"])
	require.Equal(t, names.ManagedByValue, have.Labels[names.ManagedByLabel])

	have.Data["primary"] = ""
	specs.SyncReplicationConfigMap(have, want)
	require.Equal(t, "my-database-0", specs.ReplicationPrimary(have), "a ConfigMap naming none names the desired one")
}

// hbaLines is the lines of a pg_hba.conf that are not comments, split into fields.
func hbaLines(hba string) [][]string {
	var lines [][]string
	s := bufio.NewScanner(strings.NewReader(hba))
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 0 && !strings.HasPrefix(fields[0], "#") {
			lines = append(lines, fields)
		}
	}
	return lines
}

// The replication ConfigMap of a PostgreSQL Database carries the engine's pg_hba.conf for
// the Database and its resolved spec (its lines: pkg/engine/postgresql's tests).
func TestPgHBAIsTheEnginesInTheReplicationConfigMap(t *testing.T) {
	db := database(3)
	d := resolve(t, db)
	d.SuperuserSources = []netip.Prefix{netip.MustParsePrefix("10.245.0.1/32")}
	hba := specs.ReplicationConfigMap(db, d, "my-database-0").Data["pg_hba.conf"]
	require.Equal(t, postgresql.HBA(db, d), hba)
	require.Contains(t, hbaLines(hba), []string{"host", "all", "postgres", "10.245.0.1/32", "scram-sha-256"})
}

// The Pod template carries the digest of the rules, so other rules make a new revision.
func TestPgHBARulesAreThePodTemplatesRevision(t *testing.T) {
	db := database(3)
	d := resolve(t, db)
	before := specs.StatefulSet(db, d).Spec.Template.Annotations[postgresql.HBAAnnotation]
	require.Len(t, before, 64)
	d.SuperuserSources = []netip.Prefix{netip.MustParsePrefix("10.245.0.1/32")}
	after := specs.StatefulSet(db, d)
	require.NotEqual(t, before, after.Spec.Template.Annotations[postgresql.HBAAnnotation])

	have := specs.StatefulSet(db, resolve(t, db))
	specs.SyncStatefulSet(have, after)
	require.Equal(t, after.Spec.Template.Annotations[postgresql.HBAAnnotation], have.Spec.Template.Annotations[postgresql.HBAAnnotation])

	db.Spec.Engine, db.Spec.Version = examplev1.EngineMySQL, "8.4"
	require.NotContains(t, specs.StatefulSet(db, resolve(t, db)).Spec.Template.Annotations, postgresql.HBAAnnotation)
}

// MySQL's replication account is of any host under the namespace's Service domain; root's
// are one per source, IPv4 ranges with a netmask, or of any host without sources, the first
// one the entrypoint's MYSQL_ROOT_HOST.
func TestMySQLAccountHosts(t *testing.T) {
	db := database(3)
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMySQL, "8.4"
	d := resolve(t, db)
	require.Equal(t, "%.production.svc.cluster.local", mysql.ReplicationHost(db, d))
	require.Equal(t, []string{"%"}, mysql.SuperuserHosts(d))
	for _, c := range specs.StatefulSet(db, d).Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			require.NotEqual(t, "MYSQL_ROOT_HOST", e.Name, "the entrypoint's default, %%")
		}
	}

	d.ClusterDomain = "corp.example.test"
	d.SuperuserSources = []netip.Prefix{
		netip.MustParsePrefix("10.245.0.1/32"), netip.MustParsePrefix("10.244.0.0/16"),
		netip.MustParsePrefix("192.168.7.128/25"), netip.MustParsePrefix("fd00::7/128"),
	}
	require.Equal(t, "%.production.svc.corp.example.test", mysql.ReplicationHost(db, d))
	require.Equal(t, []string{"10.245.0.1", "10.244.0.0/255.255.0.0", "192.168.7.128/255.255.255.128", "fd00::7"}, mysql.SuperuserHosts(d))
	env := map[string]string{}
	for _, e := range specs.StatefulSet(db, d).Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, "10.245.0.1", env["MYSQL_ROOT_HOST"])
}

func TestPodOrdinalSlotNameAndDatabaseOfPod(t *testing.T) {
	db := database(3)
	for _, tc := range []struct {
		pod     string
		ordinal int32
		ok      bool
	}{
		{"my-database-0", 0, true},
		{"my-database-2", 2, true},
		{"my-database-10", 10, true},
		{"my-database-01", 0, false},
		{"my-database-", 0, false},
		{"my-database--1", 0, false},
		{"my-database-x", 0, false},
		{"other-0", 0, false},
		{"my-database-a-0", 0, false},
		{"", 0, false},
	} {
		ordinal, ok := specs.PodOrdinal(db, tc.pod)
		require.Equal(t, tc.ok, ok, tc.pod)
		require.Equal(t, tc.ordinal, ordinal, tc.pod)
	}
	require.Equal(t, "my-database-4", specs.PodName(db, 4))
	require.Equal(t, "my_database_4", postgresql.SlotName("my-database-4"))
	require.Equal(t, "a_b_c_0", postgresql.SlotName("a-b-c-0"))

	labels := specs.StatefulSet(db, resolve(t, db)).Spec.Template.Labels
	got, ok := names.DatabaseOfPod(&metav1.ObjectMeta{Labels: labels})
	require.True(t, ok)
	require.Equal(t, "my-database", got)
	for _, l := range []map[string]string{
		nil,
		{"app.kubernetes.io/instance": "my-database"},
		{"app.kubernetes.io/instance": "my-database", names.ManagedByLabel: "helm"},
		{"app.kubernetes.io/instance": "", names.ManagedByLabel: names.ManagedByValue},
	} {
		_, ok := names.DatabaseOfPod(&metav1.ObjectMeta{Labels: l})
		require.False(t, ok, "%v", l)
	}
}

func volumeNames(volumes []corev1.Volume) []string {
	var out []string
	for _, v := range volumes {
		out = append(out, v.Name)
	}
	return out
}

func TestMySQLPodsRunTheSetupScriptBeforeTheServer(t *testing.T) {
	db := database(3)
	db.Spec.Engine, db.Spec.Version = examplev1.EngineMySQL, "8.4"
	d := resolve(t, db)
	require.True(t, d.Recipe.Replicates())
	sts := specs.StatefulSet(db, d)
	require.Equal(t, appsv1.OnDeleteStatefulSetStrategyType, sts.Spec.UpdateStrategy.Type)
	pod := sts.Spec.Template.Spec
	server := pod.Containers[0]
	require.Nil(t, server.Args, "the image's default command")
	require.Nil(t, server.Lifecycle, "SIGTERM is mysqld's normal shutdown")
	require.Equal(t, corev1.VolumeMount{Name: "mysql-config", MountPath: "/etc/mysql/conf.d", ReadOnly: true}, server.VolumeMounts[2],
		"the settings the setup script writes, which the image's my.cnf includes")

	require.Len(t, pod.InitContainers, 1)
	setup := pod.InitContainers[0]
	require.Equal(t, specs.SetupContainerName, setup.Name)
	require.Equal(t, server.Image, setup.Image, "mysqld of the server's version, for the clone")
	require.Equal(t, []string{"bash", "/etc/database/mysql-setup.sh"}, setup.Command)
	require.Equal(t, []corev1.VolumeMount{
		{Name: engine.DataVolumeName, MountPath: "/var/lib/mysql"},
		{Name: "credentials", MountPath: "/etc/database-credentials", ReadOnly: true},
		{Name: "replication", MountPath: "/etc/database", ReadOnly: true},
		{Name: "mysql-config", MountPath: "/etc/mysql/conf.d"},
	}, setup.VolumeMounts)
	env := map[string]corev1.EnvVar{}
	for _, e := range setup.Env {
		env[e.Name] = e
	}
	require.Equal(t, "/var/lib/mysql", env["DATADIR"].Value)
	require.Equal(t, "100", env["SERVER_ID_BASE"].Value, "server-id 100 + ordinal")
	require.Equal(t, "my-database-headless.production.svc.cluster.local", env["PODS_DOMAIN"].Value)
	require.Equal(t, "3306", env["MYSQL_PORT"].Value)
	require.Equal(t, secretRef(names.SecretKeyReplicationUsername), env["REPLICATION_USER"].ValueFrom)
	require.Equal(t, "/etc/database-credentials/replication-password", env["REPLICATION_PASSWORD_FILE"].Value)
	require.Equal(t, engine.ContainerSecurityContext(), setup.SecurityContext)

	require.Equal(t, []string{engine.CredentialsVolumeName, "replication", "mysql-config"}, volumeNames(pod.Volumes))
	require.NotNil(t, pod.Volumes[2].EmptyDir)
	require.Equal(t, []corev1.KeyToPath{{Key: "superuser-password", Path: "superuser-password"}, {Key: "password", Path: "password"},
		{Key: "replication-password", Path: "replication-password"}}, pod.Volumes[0].Secret.Items)
	// Every password file the server's entrypoint reads is there: without root's, it cannot
	// initialise the primary.
	for _, e := range pod.Containers[0].Env {
		if strings.HasSuffix(e.Name, "_FILE") {
			require.Contains(t, pod.Volumes[0].Secret.Items, corev1.KeyToPath{Key: path.Base(e.Value), Path: path.Base(e.Value)}, e.Name)
		}
	}

	cm := specs.ReplicationConfigMap(db, resolve(t, db), "my-database-0")
	require.Equal(t, "my-database-0", cm.Data[specs.ConfigMapKeyPrimary])
	require.Contains(t, cm.Data, "mysql-setup.sh")
	require.NotContains(t, cm.Data, "postgresql-setup.sh")
	require.NotContains(t, cm.Data, "pg_hba.conf")

	c, err := specs.NewChildren(db, "secret", "database-system")
	require.NoError(t, err)
	require.NotNil(t, c.ReadService)
	require.Equal(t, "replicator", string(c.Secret.Data[names.SecretKeyReplicationUsername]))
	require.Equal(t, "my-database-read.production.svc.cluster.local", string(c.Secret.Data[names.SecretKeyReadHost]))
	require.Equal(t, specs.RolePrimary, specs.ClientService(db, d).Spec.Selector[specs.RoleLabel])
	require.Equal(t, "my-database-1.my-database-headless.production.svc.cluster.local", names.PodHost(db, names.DefaultClusterDomain, "my-database-1"))
}
