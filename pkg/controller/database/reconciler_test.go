package database_test

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

var requeue = database.Result{RequeueAfter: 10 * time.Second}

// requeueExternal is the Result of a Database stopped by an object the informers do not see.
var requeueExternal = database.Result{RequeueAfter: time.Minute}

// getClaims are the reads of the example Database's data claims (three replicas) by name: those
// the StatefulSet is about to mount, read from the API server whatever the claim cache holds,
// before the StatefulSet is created; or, in a deletion, those the cache misses. A Database
// whose StatefulSet exists and is not scaled up reads its claims from the cache alone.
var getClaims = []string{
	"get persistentvolumeclaims data-my-database-0",
	"get persistentvolumeclaims data-my-database-1",
	"get persistentvolumeclaims data-my-database-2",
}

// createClaims are the creates of the example Database's data claims that do not exist, by the
// Reconciler before the StatefulSet that mounts them, so the StatefulSet controller never
// creates one; the cache holding no StatefulSet, its name is first checked on the API server
// (a foreign StatefulSet of that name would mount the claims).
var createClaims = []string{
	"get statefulsets my-database",
	"create persistentvolumeclaims data-my-database-0",
	"create persistentvolumeclaims data-my-database-1",
	"create persistentvolumeclaims data-my-database-2",
}

// growAndReplaceActions are the calls of one storage increase of the example Database (three
// replicas): grow each data claim, orphan-delete and recreate the StatefulSet, report.
var growAndReplaceActions = []string{
	"patch persistentvolumeclaims data-my-database-0",
	"patch persistentvolumeclaims data-my-database-1",
	"patch persistentvolumeclaims data-my-database-2",
	"delete statefulsets my-database",
	"create statefulsets my-database",
	"update databases/status my-database",
}

// createServices are the creates of the example Database's Services and, its engine
// replicating, its replication ConfigMap, which follow the Secret: the headless and the client
// Service, the read Service (replicas > 1), then the ConfigMap the Pods mount.
var createServices = []string{
	"create services my-database-headless",
	"create services my-database",
	"create services my-database-read",
	"create configmaps my-database-replication",
}

// firstReconcile is what a first Reconcile of the example Database does, in order.
var firstReconcile = slices.Concat([]string{
	"update databases my-database",
	"create secrets my-database-credentials",
}, createServices, getClaims, createClaims, []string{
	"create statefulsets my-database",
	"create poddisruptionbudgets my-database",
	"update databases/status my-database",
})

func TestReconcileOfAMissingDatabaseDoesNothing(t *testing.T) {
	f := newFixture(t, nil)
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Empty(t, f.actions)
}

func TestFirstReconcileAddsTheFinalizerBeforeCreatingChildrenThenWritesStatus(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Equal(t, firstReconcile, f.actions)
	require.Equal(t, []string{
		"Normal SecretGenerated Generated credentials in Secret my-database-credentials",
		"Normal Created Created Service my-database-headless, Service my-database, Service my-database-read, ConfigMap my-database-replication, StatefulSet my-database, PodDisruptionBudget my-database",
	}, f.events())

	db := f.database()
	require.Equal(t, []string{database.FinalizerName}, db.Finalizers)
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, int64(1), db.Status.ObservedGeneration)
	require.Equal(t, int32(0), db.Status.ReadyReplicas)
	require.Equal(t, "app.kubernetes.io/instance=my-database,app.kubernetes.io/managed-by=database-controller,app.kubernetes.io/name=postgresql", db.Status.Selector)
	at := metav1.NewTime(start)
	require.Equal(t, []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Provisioning", Message: "0/3 replicas ready", ObservedGeneration: 1, LastTransitionTime: at},
		{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "Updating", Message: "waiting for the StatefulSet controller to observe generation 1", ObservedGeneration: 1, LastTransitionTime: at},
		{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", ObservedGeneration: 1, LastTransitionTime: at},
		{Type: "Replicating", Status: metav1.ConditionUnknown, Reason: "NotObserved", Message: "the controller does not reach the servers", ObservedGeneration: 1, LastTransitionTime: at},
	}, db.Status.Conditions, "the fixture's Reconciler has no Instances")
	require.Equal(t, "my-database-0", db.Status.Primary, "the first Pod initialises the data")
}

func TestChildrenFollowTheEngineRecipes(t *testing.T) {
	for _, tc := range []struct {
		engine  examplev1.Engine
		version string
		image   string
		port    int32
		mount   string
		uri     *regexp.Regexp
		// replicates: every engine's replicas follow the primary.
		replicates bool
		// superuser is the engine's superuser; volume the password keys the server reads.
		superuser string
		volume    []string
	}{
		{examplev1.EnginePostgreSQL, "14.5", "postgres:14.5", 5432, "/var/lib/postgresql/data",
			regexp.MustCompile(`^postgresql://app:([A-Za-z0-9_-]+)@my-database\.production\.svc\.cluster\.local:5432/my_database$`), true, "postgres", nil},
		{examplev1.EnginePostgreSQL, "18", "postgres:18", 5432, "/var/lib/postgresql/data",
			regexp.MustCompile(`^postgresql://app:([A-Za-z0-9_-]+)@my-database\.production\.svc\.cluster\.local:5432/my_database$`), true, "postgres", nil},
		{examplev1.EngineMySQL, "8.4", "mysql:8.4", 3306, "/var/lib/mysql",
			regexp.MustCompile(`^mysql://admin:([A-Za-z0-9_-]+)@my-database\.production\.svc\.cluster\.local:3306/my_database$`), true, "root", []string{"superuser-password", "password"}},
		{examplev1.EngineMongoDB, "7.0", "mongo:7.0", 27017, "/data/db",
			regexp.MustCompile(`^mongodb://app:([A-Za-z0-9_-]+)@my-database\.production\.svc\.cluster\.local:27017/my_database\?authSource=my_database$`), true, "admin", []string{"superuser-password", "password"}},
	} {
		t.Run(tc.image, func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.Engine, db.Spec.Version = tc.engine, tc.version
			f := newFixture(t, db)
			_, err := f.reconcile()
			require.NoError(t, err)

			owner := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Database", Name: name, UID: dbUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
			selector := map[string]string{"app.kubernetes.io/name": string(tc.engine), "app.kubernetes.io/instance": name,
				"app.kubernetes.io/managed-by": "database-controller"}
			labels := map[string]string{
				"app.kubernetes.io/name": string(tc.engine), "app.kubernetes.io/instance": name,
				"app.kubernetes.io/component": "database", "app.kubernetes.io/part-of": "database-apiserver",
				"app.kubernetes.io/managed-by": "database-controller",
			}
			workload := map[string]string{"app.kubernetes.io/version": tc.version}
			for k, v := range labels {
				workload[k] = v
			}

			sts := f.statefulSet()
			require.Equal(t, []metav1.OwnerReference{owner}, sts.OwnerReferences)
			require.Equal(t, workload, sts.Labels)
			require.Equal(t, workload, sts.Spec.Template.Labels)
			require.Equal(t, &metav1.LabelSelector{MatchLabels: selector}, sts.Spec.Selector)
			require.Equal(t, int32(3), *sts.Spec.Replicas)
			require.Equal(t, "my-database-headless", sts.Spec.ServiceName)
			require.Equal(t, appsv1.OrderedReadyPodManagement, sts.Spec.PodManagementPolicy)
			pod := sts.Spec.Template.Spec
			require.Equal(t, int64(999), *pod.SecurityContext.FSGroup)
			require.Len(t, pod.Containers, 1)
			c := pod.Containers[0]
			require.Equal(t, tc.image, c.Image)
			require.Equal(t, tc.port, c.Ports[0].ContainerPort)
			mounts := []corev1.VolumeMount{{Name: "data", MountPath: tc.mount}, {Name: "credentials", MountPath: "/etc/database-credentials", ReadOnly: true}}
			require.True(t, tc.replicates)
			require.Len(t, pod.InitContainers, 1)
			require.Equal(t, "setup", pod.InitContainers[0].Name)
			switch tc.engine {
			case examplev1.EngineMySQL:
				// The settings the setup script writes; the script itself is the init container's.
				mounts = append(mounts, corev1.VolumeMount{Name: "mysql-config", MountPath: "/etc/mysql/conf.d", ReadOnly: true})
			case examplev1.EnginePostgreSQL:
				mounts = append(mounts, corev1.VolumeMount{Name: "replication", MountPath: "/etc/database", ReadOnly: true})
			case examplev1.EngineMongoDB:
				// The entrypoint runs the initialisation ConfigMap's scripts, which create the
				// application user; the server reads the keyfile the setup copied.
				mounts = append(mounts, corev1.VolumeMount{Name: "initdb", MountPath: "/docker-entrypoint-initdb.d", ReadOnly: true},
					corev1.VolumeMount{Name: "mongodb-key", MountPath: "/etc/mongodb-key", ReadOnly: true})
				require.Equal(t, engine.CredentialsVolume("my-database-credentials", append(tc.volume, "keyfile")...), pod.Volumes[0])
				require.Equal(t, corev1.Volume{Name: "initdb", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "my-database-initdb"}, DefaultMode: ptr.To[int32](0o444)}}}, pod.Volumes[1])
				obj, err := f.kube.Tracker().Get(configMaps, namespace, "my-database-initdb")
				require.NoError(t, err)
				cm := obj.(*corev1.ConfigMap)
				require.Equal(t, []metav1.OwnerReference{owner}, cm.OwnerReferences)
				require.Equal(t, labels, cm.Labels)
				require.Contains(t, cm.Data["application-user.js"], "db.createUser(")
			}
			require.Equal(t, tc.engine == examplev1.EngineMongoDB, f.exists(configMaps, "my-database-initdb"), "only MongoDB runs initialisation scripts of the controller")
			for _, e := range c.Env {
				require.False(t, e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Key == names.SecretKeyPassword,
					"%s: no password in the environment", e.Name)
			}
			require.Equal(t, mounts, c.VolumeMounts)
			require.NotNil(t, c.StartupProbe)
			require.NotNil(t, c.ReadinessProbe)
			require.NotNil(t, c.LivenessProbe)
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					require.Equal(t, "my-database-credentials", e.ValueFrom.SecretKeyRef.Name, e.Name)
				}
			}
			require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
			claim := sts.Spec.VolumeClaimTemplates[0]
			require.Equal(t, "data", claim.Name)
			require.Equal(t, labels, claim.Labels)
			require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, claim.Spec.AccessModes)
			require.Equal(t, "100Gi", ptr.To(claim.Spec.Resources.Requests[corev1.ResourceStorage]).String())
			claimOwner := owner
			claimOwner.BlockOwnerDeletion = ptr.To(false)
			require.Equal(t, []metav1.OwnerReference{claimOwner}, claim.OwnerReferences)

			ports := []corev1.ServicePort{{Name: c.Ports[0].Name, Protocol: corev1.ProtocolTCP, Port: tc.port, TargetPort: intstr.FromString(c.Ports[0].Name)}}
			headless := f.service("my-database-headless")
			require.Equal(t, []metav1.OwnerReference{owner}, headless.OwnerReferences)
			require.Equal(t, labels, headless.Labels)
			require.Equal(t, corev1.ClusterIPNone, headless.Spec.ClusterIP)
			require.True(t, headless.Spec.PublishNotReadyAddresses)
			require.Equal(t, selector, headless.Spec.Selector)
			require.Equal(t, ports, headless.Spec.Ports)
			client := f.service("my-database")
			require.Equal(t, []metav1.OwnerReference{owner}, client.OwnerReferences)
			require.Equal(t, corev1.ServiceTypeClusterIP, client.Spec.Type)
			require.Empty(t, client.Spec.ClusterIP)
			require.False(t, client.Spec.PublishNotReadyAddresses)
			if tc.replicates {
				// The primary, whichever Pod the controller labels so; the read Service the
				// replicas.
				require.Equal(t, map[string]string{
					"app.kubernetes.io/name":       selector["app.kubernetes.io/name"],
					"app.kubernetes.io/instance":   "my-database",
					"app.kubernetes.io/managed-by": "database-controller",
					"database.example.com/role":    "primary",
				}, client.Spec.Selector)
				read := f.service("my-database-read")
				require.Equal(t, []metav1.OwnerReference{owner}, read.OwnerReferences)
				require.Equal(t, corev1.ServiceTypeClusterIP, read.Spec.Type)
				require.Equal(t, map[string]string{
					"app.kubernetes.io/name":       selector["app.kubernetes.io/name"],
					"app.kubernetes.io/instance":   "my-database",
					"app.kubernetes.io/managed-by": "database-controller",
					"database.example.com/role":    "replica",
				}, read.Spec.Selector)
				require.Equal(t, ports, read.Spec.Ports)
			} else {
				// Only the first Pod: these replicas do not replicate data.
				require.Equal(t, map[string]string{
					"app.kubernetes.io/name":             selector["app.kubernetes.io/name"],
					"app.kubernetes.io/instance":         "my-database",
					"app.kubernetes.io/managed-by":       "database-controller",
					"statefulset.kubernetes.io/pod-name": "my-database-0",
				}, client.Spec.Selector)
				require.False(t, f.exists(services, "my-database-read"))
				require.False(t, f.exists(configMaps, "my-database-replication"))
			}
			require.Equal(t, ports, client.Spec.Ports)

			secret := f.secret()
			require.Equal(t, []metav1.OwnerReference{owner}, secret.OwnerReferences)
			require.Equal(t, labels, secret.Labels)
			password := string(secret.Data["password"])
			require.GreaterOrEqual(t, len(password), 24)
			m := tc.uri.FindStringSubmatch(string(secret.Data["uri"]))
			require.NotNil(t, m, string(secret.Data["uri"]))
			require.Equal(t, password, m[1])
			require.Equal(t, tc.superuser, string(secret.Data["superuser-username"]))
			require.NotEqual(t, tc.superuser, string(secret.Data["username"]), "the application user is not the superuser")
			require.GreaterOrEqual(t, len(secret.Data["superuser-password"]), 24)
			require.NotEqual(t, password, string(secret.Data["superuser-password"]), "the superuser has a password of its own")
			require.NotContains(t, string(secret.Data["uri"]), string(secret.Data["superuser-password"]), "no URI is the superuser's")
			require.Equal(t, "my_database", string(secret.Data["database"]))
			require.Equal(t, "my-database.production.svc.cluster.local", string(secret.Data["host"]))
			require.Equal(t, strconv.Itoa(int(tc.port)), string(secret.Data["port"]))

			pdb, err := f.kube.Tracker().Get(pdbs, namespace, name)
			require.NoError(t, err)
			require.Equal(t, []metav1.OwnerReference{owner}, pdb.(*policyv1.PodDisruptionBudget).OwnerReferences)
			require.Equal(t, ptr.To(intstr.FromInt32(1)), pdb.(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable)
			require.Equal(t, &metav1.LabelSelector{MatchLabels: selector}, pdb.(*policyv1.PodDisruptionBudget).Spec.Selector)
		})
	}
}

func TestPasswordsAreRandom(t *testing.T) {
	a, b := newFixture(t, exampleDatabase()), newFixture(t, exampleDatabase())
	for _, f := range []*fixture{a, b} {
		_, err := f.reconcile()
		require.NoError(t, err)
	}
	require.NotEqual(t, a.secret().Data["password"], b.secret().Data["password"])
}

// serverDefaults sets what kube-apiserver's defaulting and allocation add to the children,
// none of which the Reconciler owns.
func serverDefaults(f *fixture) {
	sts := f.statefulSet().DeepCopy()
	sts.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}
	sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType}
	sts.Spec.VolumeClaimTemplates[0].Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	pod := &sts.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	pod.DNSPolicy = corev1.DNSClusterFirst
	pod.SchedulerName = corev1.DefaultSchedulerName
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	for _, c := range []*corev1.Container{&pod.Containers[0], &pod.InitContainers[0]} {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	metav1.SetMetaDataAnnotation(&sts.Spec.Template.ObjectMeta, "kubectl.kubernetes.io/restartedAt", "2026-03-01T12:00:00Z")
	require.NoError(f.t, f.kube.Tracker().Update(statefulSets, sts, namespace))

	for _, n := range []string{"my-database", "my-database-headless", "my-database-read"} {
		svc := f.service(n).DeepCopy()
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = "10.96.0.10"
		}
		svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
		svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		svc.Labels["team"] = "payments"
		require.NoError(f.t, f.kube.Tracker().Update(services, svc, namespace))
	}
}

func TestSecondReconcileWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*fixture)
	}{
		{"as created", func(*fixture) {}},
		{"after the API server's defaults and other labels", serverDefaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			_, err := f.reconcile()
			require.NoError(t, err)
			tc.change(f)

			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, requeue, result, "replicas are not ready yet")
			require.Empty(t, f.actions)
			require.Empty(t, f.events())
		})
	}
}

func TestReadyDatabaseIsLeftAlone(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	for range 3 {
		result, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, database.Result{}, result)
		require.Empty(t, f.actions, "a Ready Database costs no API call, not even for its PersistentVolumeClaims")
	}
	db := f.database()
	require.Equal(t, int32(3), db.Status.ReadyReplicas)
	require.Equal(t, metav1.ConditionTrue, condition(db, "Ready").Status)
	require.Equal(t, "AllReplicasReady", condition(db, "Ready").Reason)
	require.Equal(t, metav1.ConditionFalse, condition(db, "Progressing").Status)
	require.Equal(t, metav1.ConditionFalse, condition(db, "Degraded").Status)
}

func TestScaleUpdatesTheStatefulSetAndRemovesThePodDisruptionBudgetAtOne(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()

	for _, step := range []struct {
		replicas int32
		actions  []string
		events   []string
	}{{
		replicas: 5,
		// The claims of the two new ordinals are read before they are mounted, and created by
		// the Reconciler: none exists.
		actions: []string{"get persistentvolumeclaims data-my-database-3", "get persistentvolumeclaims data-my-database-4",
			"create persistentvolumeclaims data-my-database-3", "create persistentvolumeclaims data-my-database-4",
			"update statefulsets my-database", "update databases/status my-database"},
		events: []string{"Normal Updated Updated StatefulSet my-database: replicas 3 → 5"},
	}, {
		replicas: 1,
		// At one replica there are no replicas to read from: the Secret loses read-host and
		// read-uri, and the read Service goes.
		actions: []string{"update secrets my-database-credentials", "delete services my-database-read",
			"update statefulsets my-database", "delete poddisruptionbudgets my-database",
			"update databases/status my-database"},
		events: []string{"Normal Deleted Deleted Service my-database-read: replicas is 1",
			"Normal Updated Updated StatefulSet my-database: replicas 5 → 1",
			"Normal Deleted Deleted PodDisruptionBudget my-database: replicas is 1"},
	}} {
		f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas = ptr.To(step.replicas) })
		result, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, requeue, result)
		require.Equal(t, step.actions, f.actions)
		// The Secret's Event (read-host and read-uri set or removed) is not this test's.
		require.Equal(t, step.events, slices.DeleteFunc(f.events(), func(e string) bool {
			return strings.HasPrefix(e, "Normal Updated Updated Secret my-database-credentials")
		}))
		require.Equal(t, step.replicas, *f.statefulSet().Spec.Replicas)
		require.Equal(t, examplev1.DatabasePhaseProvisioning, f.database().Status.Phase)
		require.Equal(t, "Updating", condition(f.database(), "Progressing").Reason)

		f.setStatefulSetStatus(step.replicas, "rev-1", "rev-1")
		result, err = f.reconcile()
		require.NoError(t, err)
		require.Equal(t, database.Result{}, result)
		require.Equal(t, []string{"update databases/status my-database"}, f.actions)
		db := f.database()
		require.Equal(t, examplev1.DatabasePhaseReady, db.Status.Phase)
		require.Equal(t, step.replicas, db.Status.ReadyReplicas)
		require.Equal(t, db.Generation, db.Status.ObservedGeneration)
	}
	require.False(t, f.exists(pdbs, name))
}

func TestVersionChangeRollsTheImage(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	password := f.secret().Data["password"]

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Version = "14.6" })
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Equal(t, []string{"update statefulsets my-database", "update databases/status my-database"}, f.actions)
	require.Equal(t, []string{"Normal Updated Updated StatefulSet my-database: image postgres:14.5 → postgres:14.6"}, f.events())
	sts := f.statefulSet()
	require.Equal(t, "postgres:14.6", sts.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, "14.6", sts.Labels["app.kubernetes.io/version"])
	require.Equal(t, "14.6", sts.Spec.Template.Labels["app.kubernetes.io/version"])
	require.NotContains(t, sts.Spec.Selector.MatchLabels, "app.kubernetes.io/version")

	// The StatefulSet controller rolls one Pod: only Pods at the new revision count.
	sts = sts.DeepCopy()
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 3, ReadyReplicas: 3,
		UpdatedReplicas: 1, CurrentRevision: "rev-1", UpdateRevision: "rev-2"}
	require.NoError(t, f.kube.Tracker().Update(statefulSets, sts, namespace))
	_, err = f.reconcile()
	require.NoError(t, err)
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, int32(1), db.Status.ReadyReplicas)
	require.Equal(t, "RollingUpdate", condition(db, "Progressing").Reason)
	require.Equal(t, "rolling out revision rev-2: 1/3 replicas updated", condition(db, "Progressing").Message)
	require.Equal(t, metav1.ConditionFalse, condition(db, "Degraded").Status, "a rollout is not degradation")

	f.setStatefulSetStatus(3, "rev-2", "rev-2")
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
	require.Equal(t, password, f.secret().Data["password"], "the Secret is never regenerated")
}

func TestStorageIncreaseExpandsClaimsAndReplacesTheStatefulSetKeepingPods(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	oldUID := f.statefulSet().UID

	// Claims the Reconciler must not patch: not bound yet, and not ours.
	unbound := f.claim("data-my-database-0").DeepCopy()
	unbound.Name, unbound.UID, unbound.Status.Phase = "data-my-database-3", "unbound-uid", corev1.ClaimPending
	foreign := f.claim("data-my-database-0").DeepCopy()
	foreign.Name, foreign.UID, foreign.OwnerReferences = "data-my-database-4", "foreign-uid", nil
	require.NoError(t, f.kube.Tracker().Add(unbound))
	require.NoError(t, f.kube.Tracker().Add(foreign))

	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Storage = "200Gi" })
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Equal(t, growAndReplaceActions, f.actions)
	for _, a := range f.raw {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			opts := d.GetDeleteOptions()
			require.Equal(t, ptr.To(metav1.DeletePropagationOrphan), opts.PropagationPolicy, "Pods must be kept")
			require.Equal(t, oldUID, *opts.Preconditions.UID)
		}
	}
	require.Equal(t, []string{
		"Normal Resizing Requested 200Gi for PersistentVolumeClaim data-my-database-0 (was 100Gi)",
		"Normal Resizing Requested 200Gi for PersistentVolumeClaim data-my-database-1 (was 100Gi)",
		"Normal Resizing Requested 200Gi for PersistentVolumeClaim data-my-database-2 (was 100Gi)",
		"Normal Replacing Deleted StatefulSet my-database, keeping its Pods, to grow its volumeClaimTemplates from 100Gi to 200Gi",
		"Normal Created Created StatefulSet my-database",
	}, f.events())

	size := func(c *corev1.PersistentVolumeClaim) string {
		return ptr.To(c.Spec.Resources.Requests[corev1.ResourceStorage]).String()
	}
	for _, n := range []string{"data-my-database-0", "data-my-database-1", "data-my-database-2"} {
		require.Equal(t, "200Gi", size(f.claim(n)), n)
	}
	require.Equal(t, "100Gi", size(f.claim("data-my-database-3")))
	require.Equal(t, "100Gi", size(f.claim("data-my-database-4")))
	tmpl := f.statefulSet().Spec.VolumeClaimTemplates[0]
	require.Equal(t, "200Gi", ptr.To(tmpl.Spec.Resources.Requests[corev1.ResourceStorage]).String())

	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Empty(t, f.actions, "the replacement happens once")
}

func TestStorageIncreaseIsReportedUntilTheCapacityFollows(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Storage = "200Gi" })
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, growAndReplaceActions, f.actions)

	// The new StatefulSet adopts the Pods, all ready; the volumes still have 100Gi.
	f.setStatefulSetStatus(3, "rev-1", "rev-1")
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result, "the claims' informer also wakes it")
	require.Equal(t, []string{"update databases/status my-database"}, f.actions)
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	const msg = "expanding volumes: data-my-database-0 100Gi of 200Gi, data-my-database-1 100Gi of 200Gi, data-my-database-2 100Gi of 200Gi"
	for typ, status := range map[string]metav1.ConditionStatus{"Ready": metav1.ConditionFalse, "Progressing": metav1.ConditionTrue} {
		require.Equal(t, status, condition(db, typ).Status, typ)
		require.Equal(t, "StorageExpanding", condition(db, typ).Reason, typ)
		require.Equal(t, msg, condition(db, typ).Message, typ)
	}
	require.Equal(t, metav1.ConditionFalse, condition(db, "Degraded").Status)

	// One volume has grown: the others are still reported.
	claim := f.claim("data-my-database-0").DeepCopy()
	claim.Status.Capacity = claim.Spec.Resources.Requests.DeepCopy()
	require.NoError(t, f.kube.Tracker().Update(claims, claim, namespace))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"update databases/status my-database"}, f.actions)
	require.Equal(t, "expanding volumes: data-my-database-1 100Gi of 200Gi, data-my-database-2 100Gi of 200Gi",
		condition(f.database(), "Progressing").Message)

	f.growClaims()
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, database.Result{}, result)
	require.Equal(t, []string{"update databases/status my-database"}, f.actions)
	db = f.database()
	require.Equal(t, examplev1.DatabasePhaseReady, db.Status.Phase)
	require.Equal(t, "AllReplicasReady", condition(db, "Ready").Reason)
	require.Equal(t, "Complete", condition(db, "Progressing").Reason)
}

func TestStorageIncreaseWaitsWhileTheOldStatefulSetIsStillBeingDeleted(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Storage = "200Gi" })
	// The garbage collector has not orphaned the Pods yet: the name is still taken.
	f.inject("create", "statefulsets", 1, apierrors.NewAlreadyExists(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name))

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Equal(t, growAndReplaceActions, f.actions)
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseProvisioning, db.Status.Phase)
	require.Equal(t, "WaitingForDeletion", condition(db, "Progressing").Reason)

	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Equal(t, slices.Concat(getClaims, []string{"create statefulsets my-database", "update databases/status my-database"}), f.actions,
		"the old StatefulSet is gone: create it, no second delete nor patch; the claims it mounts are read again, all there")
}

func TestChildNameTakenByAnObjectWeDoNotOwnIsNeverWritten(t *testing.T) {
	theirs := func(labels map[string]string, owners []metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: "theirs", Labels: labels, OwnerReferences: owners},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.99", Selector: map[string]string{"app": "legacy"},
				Ports: []corev1.ServicePort{{Port: 80}}},
		}
	}
	for _, tc := range []struct {
		name    string
		service *corev1.Service
		first   []string
		second  []string
		message string
	}{{
		name:    "unlabelled, so not in the cache",
		service: theirs(nil, nil),
		first: []string{"update databases my-database", "create secrets my-database-credentials",
			"create services my-database-headless", "create services my-database", "get services my-database",
			"update databases/status my-database"},
		second:  []string{"create services my-database", "get services my-database"},
		message: "Service my-database already exists and is not controlled by this Database (it has no controller); it is left untouched: delete or rename it, or give the Database another name (checked again every minute)",
	}, {
		name: "labelled as ours but controlled by another Database",
		service: theirs(map[string]string{names.ManagedByLabel: names.ManagedByValue}, []metav1.OwnerReference{{
			APIVersion: "example.com/v1", Kind: "Database", Name: name, UID: "old-uid", Controller: ptr.To(true)}}),
		first: []string{"update databases my-database", "create secrets my-database-credentials",
			"create services my-database-headless", "update databases/status my-database"},
		second:  nil,
		message: "Service my-database already exists and is not controlled by this Database (it is controlled by Database my-database (uid old-uid)); it is left untouched: delete or rename it, or give the Database another name (checked again every minute)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exampleDatabase(), tc.service)
			before := f.service(name)
			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, requeueExternal, result, "no event tells when the Service goes: look again in a minute")
			require.Equal(t, tc.first, f.actions)
			events := f.events()
			require.Contains(t, events, "Warning ChildConflict "+tc.message)
			require.Equal(t, before, f.service(name), "the Service is untouched")
			require.False(t, f.exists(statefulSets, name), "nothing is created after the conflict")

			db := f.database()
			require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
			for typ, status := range map[string]metav1.ConditionStatus{"Ready": metav1.ConditionFalse, "Progressing": metav1.ConditionFalse, "Degraded": metav1.ConditionTrue} {
				c := condition(db, typ)
				require.Equal(t, status, c.Status, typ)
				require.Equal(t, "ChildConflict", c.Reason, typ)
				require.Equal(t, tc.message, c.Message, typ)
			}

			result, err = f.reconcile()
			require.NoError(t, err)
			require.Equal(t, requeueExternal, result)
			require.Equal(t, tc.second, f.actions, "no status write and no write to the Service")
			require.Empty(t, f.events(), "the Warning is emitted once per transition")
			require.Equal(t, before, f.service(name))
		})
	}
}

func TestStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	f.createClaims(3)
	at := metav1.NewTime(start)

	for _, step := range []struct {
		ready   int32
		write   bool
		phase   examplev1.DatabasePhase
		result  database.Result
		message string
		// lastTransitionTime of Ready, Progressing, Degraded.
		times [3]metav1.Time
	}{
		{ready: 1, write: true, phase: examplev1.DatabasePhaseProvisioning, result: requeue, message: "1/3 replicas ready",
			times: [3]metav1.Time{at, at, at}},
		{ready: 1, write: false, phase: examplev1.DatabasePhaseProvisioning, result: requeue, message: "1/3 replicas ready",
			times: [3]metav1.Time{at, at, at}},
		{ready: 3, write: true, phase: examplev1.DatabasePhaseReady, result: database.Result{}, message: "3/3 replicas ready",
			times: [3]metav1.Time{metav1.NewTime(start.Add(3 * time.Minute)), metav1.NewTime(start.Add(3 * time.Minute)), at}},
		{ready: 3, write: false, phase: examplev1.DatabasePhaseReady, result: database.Result{}, message: "3/3 replicas ready",
			times: [3]metav1.Time{metav1.NewTime(start.Add(3 * time.Minute)), metav1.NewTime(start.Add(3 * time.Minute)), at}},
		{ready: 2, write: true, phase: examplev1.DatabasePhaseDegraded, result: requeue, message: "2/3 replicas ready",
			times: [3]metav1.Time{metav1.NewTime(start.Add(5 * time.Minute)), metav1.NewTime(start.Add(3 * time.Minute)), metav1.NewTime(start.Add(5 * time.Minute))}},
		{ready: 3, write: true, phase: examplev1.DatabasePhaseReady, result: database.Result{}, message: "3/3 replicas ready",
			times: [3]metav1.Time{metav1.NewTime(start.Add(6 * time.Minute)), metav1.NewTime(start.Add(3 * time.Minute)), metav1.NewTime(start.Add(6 * time.Minute))}},
	} {
		f.clock.SetTime(f.clock.Now().Add(time.Minute))
		f.setStatefulSetStatus(step.ready, "rev-1", "rev-1")
		result, err := f.reconcile()
		require.NoError(t, err)
		require.Equal(t, step.result, result)
		if step.write {
			require.Equal(t, []string{"update databases/status my-database"}, f.actions)
		} else {
			require.Empty(t, f.actions)
		}
		db := f.database()
		require.Equal(t, step.phase, db.Status.Phase)
		require.Equal(t, step.ready, db.Status.ReadyReplicas)
		require.Equal(t, step.message, condition(db, "Ready").Message)
		for i, typ := range []string{"Ready", "Progressing", "Degraded"} {
			require.Equal(t, step.times[i], condition(db, typ).LastTransitionTime, "%s at %v", typ, f.clock.Now())
		}
	}
	db := f.database()
	require.Equal(t, metav1.ConditionTrue, condition(db, "Ready").Status)
	require.Equal(t, metav1.ConditionFalse, condition(db, "Degraded").Status)
}

func TestExistingSecretIsNeverRegenerated(t *testing.T) {
	ours := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials", Labels: map[string]string{
				names.ManagedByLabel: names.ManagedByValue, "app.kubernetes.io/name": "postgresql",
				"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "database",
				"app.kubernetes.io/part-of": "database-apiserver"}, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "example.com/v1", Kind: "Database", Name: name, UID: dbUID, Controller: ptr.To(true)}},
				Finalizers: []string{database.CredentialsFinalizer}},
			Data: map[string][]byte{},
		}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	rest := slices.Concat(createServices, getClaims, createClaims,
		[]string{"create statefulsets my-database", "create poddisruptionbudgets my-database", "update databases/status my-database"})
	// current is the Secret of the example Database (PostgreSQL, three replicas) as the
	// Reconciler keeps it, with the application user's password "kept", the superuser's
	// "su-kept" and the replication password "repl-kept".
	current := map[string]string{"username": "app", "password": "kept", "host": "my-database.production.svc.cluster.local", "port": "5432",
		"superuser-username": "postgres", "superuser-password": "su-kept",
		"database": "my_database", "uri": "postgresql://app:kept@my-database.production.svc.cluster.local:5432/my_database",
		"replication-username": "replicator", "replication-password": "repl-kept", "read-host": "my-database-read.production.svc.cluster.local",
		"read-uri": "postgresql://app:kept@my-database-read.production.svc.cluster.local:5432/my_database"}
	with := func(change map[string]string, remove ...string) map[string]string {
		m := maps.Clone(current)
		maps.Copy(m, change)
		for _, k := range remove {
			delete(m, k)
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		secret  *corev1.Secret
		actions []string
		data    map[string]string
		// generated are the keys of data whose value is a new random password.
		generated []string
		phase     examplev1.DatabasePhase
	}{{
		name:    "complete and current: untouched",
		secret:  ours(current),
		actions: append([]string{"update databases my-database"}, rest...),
		data:    current,
		phase:   examplev1.DatabasePhaseProvisioning,
	}, {
		name: "without the credentials finalizer: added",
		secret: func() *corev1.Secret {
			s := ours(current)
			s.Finalizers = nil
			return s
		}(),
		actions: append([]string{"update databases my-database", "update secrets my-database-credentials"}, rest...),
		data:    current,
		phase:   examplev1.DatabasePhaseProvisioning,
	}, {
		name: "password edited by hand: the uri and the other derived keys follow, the password stays",
		secret: ours(with(map[string]string{"password": "edited", "host": "h", "port": "1", "database": "d", "uri": "postgresql://app:old@h:1/d",
			"read-host": "r", "read-uri": "postgresql://app:old@r:1/d"})),
		actions: append([]string{"update databases my-database", "update secrets my-database-credentials"}, rest...),
		data: with(map[string]string{"password": "edited", "uri": "postgresql://app:edited@my-database.production.svc.cluster.local:5432/my_database",
			"read-uri": "postgresql://app:edited@my-database-read.production.svc.cluster.local:5432/my_database"}),
		phase: examplev1.DatabasePhaseProvisioning,
	}, {
		// A Secret written when the hosts were partial names, which a resolver tries through
		// its search list first: the hosts and URIs become the fully qualified names.
		name: "hosts of partial names: fully qualified",
		secret: ours(with(map[string]string{"host": "my-database.production.svc", "uri": "postgresql://app:kept@my-database.production.svc:5432/my_database",
			"read-host": "my-database-read.production.svc", "read-uri": "postgresql://app:kept@my-database-read.production.svc:5432/my_database"})),
		actions: append([]string{"update databases my-database", "update secrets my-database-credentials"}, rest...),
		data:    current,
		phase:   examplev1.DatabasePhaseProvisioning,
	}, {
		name: "missing keys that follow from the credentials: filled",
		secret: ours(map[string]string{"username": "someone", "password": "kept", "replication-password": "repl-kept",
			"superuser-username": "postgres", "superuser-password": "su-kept"}),
		actions: append([]string{"update databases my-database", "update secrets my-database-credentials"}, rest...),
		data: with(map[string]string{"username": "someone", "uri": "postgresql://someone:kept@my-database.production.svc.cluster.local:5432/my_database",
			"read-uri": "postgresql://someone:kept@my-database-read.production.svc.cluster.local:5432/my_database"}),
		phase: examplev1.DatabasePhaseProvisioning,
	}, {
		// A Secret from before replication was set up: the primary's role is created with
		// the password added now.
		name:      "without a replication password: one generated, the password kept",
		secret:    ours(with(nil, "replication-username", "replication-password")),
		actions:   append([]string{"update databases my-database", "update secrets my-database-credentials"}, rest...),
		data:      current,
		generated: []string{"replication-password"},
		phase:     examplev1.DatabasePhaseProvisioning,
	}, {
		name:    "without a password: failed, untouched",
		secret:  ours(map[string]string{"username": "postgres"}),
		actions: []string{"update databases my-database", "update databases/status my-database"},
		data:    map[string]string{"username": "postgres"},
		phase:   examplev1.DatabasePhaseFailed,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exampleDatabase(), tc.secret)
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, tc.actions, f.actions)
			got := map[string]string{}
			for k, v := range f.secret().Data {
				got[k] = string(v)
			}
			for _, k := range tc.generated {
				require.GreaterOrEqual(t, len(got[k]), 24, k)
				require.NotEqual(t, got["password"], got[k], k)
				got[k] = tc.data[k]
			}
			require.Equal(t, tc.data, got)
			require.Equal(t, tc.phase, f.database().Status.Phase)
			if tc.phase != examplev1.DatabasePhaseFailed {
				require.Equal(t, []string{database.CredentialsFinalizer}, f.secret().Finalizers)
			}
		})
	}
}

func TestTheCredentialsSecretIsKeptWhileItsDatabaseExists(t *testing.T) {
	for _, policy := range []examplev1.DeletionPolicy{examplev1.DeletionPolicyDelete, examplev1.DeletionPolicyRetain} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			f.ready()
			require.Equal(t, []string{database.CredentialsFinalizer}, f.secret().Finalizers)
			password := f.secret().Data["password"]

			// kubectl delete secret: the finalizer keeps it, Terminating, with its data.
			secret := f.secret().DeepCopy()
			secret.DeletionTimestamp = ptr.To(metav1.NewTime(start))
			require.NoError(t, f.kube.Tracker().Update(secrets, secret, namespace))
			_, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, []string{"update databases/status my-database"}, f.actions, "no Secret written or created")
			const msg = "Secret my-database-credentials is being deleted; it is kept (finalizer database.example.com/credentials) while the Database exists, since its password is the one the data directory holds; deleting the Database releases it"
			require.Equal(t, []string{"Warning CredentialsDeleting " + msg}, f.events())
			db := f.database()
			require.Equal(t, examplev1.DatabasePhaseDegraded, db.Status.Phase)
			require.Equal(t, metav1.ConditionTrue, condition(db, "Degraded").Status)
			require.Equal(t, "CredentialsDeleting", condition(db, "Degraded").Reason)
			require.Equal(t, msg, condition(db, "Degraded").Message)
			require.Equal(t, metav1.ConditionTrue, condition(db, "Ready").Status, "the database still serves")
			require.Equal(t, password, f.secret().Data["password"])

			_, err = f.reconcile()
			require.NoError(t, err)
			require.Empty(t, f.actions)
			require.Empty(t, f.events(), "reported once")

			// The Database goes: its cleanup releases the finalizer.
			f.updateDatabase(func(db *examplev1.Database) {
				db.Spec.DeletionPolicy = policy
				db.DeletionTimestamp = ptr.To(metav1.NewTime(start))
			})
			_, err = f.reconcile()
			require.NoError(t, err)
			require.Contains(t, f.actions, "patch secrets my-database-credentials")
			require.NotContains(t, f.actions, "delete secrets my-database-credentials", "already being deleted")
			require.Empty(t, f.secret().Finalizers)
			require.Empty(t, f.database().Finalizers)
		})
	}
}

func TestLostCredentialsAreReportedNeverRegenerated(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	old := f.secret().DeepCopy()
	// The finalizer forced off: the Secret is gone, the data directory keeps its password.
	require.NoError(t, f.kube.Tracker().Delete(secrets, namespace, name+"-credentials"))
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result, "a restored Secret may be unlabelled: looked for every minute")
	require.Equal(t, []string{"get secrets my-database-credentials", "update databases/status my-database"}, f.actions)
	require.False(t, f.exists(secrets, name+"-credentials"), "no new password")
	const msg = "Secret my-database-credentials is gone while the data directory keeps its credentials: no new password is generated, the database would not accept it. Restore it: create Secret my-database-credentials with the old username, password, superuser-username, superuser-password and replication-password and the annotation database.example.com/restore-for=db-uid, this Database's uid (checked again every minute)"
	require.Equal(t, []string{"Warning CredentialsLost " + msg}, f.events())
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
	require.Equal(t, "CredentialsLost", condition(db, "Degraded").Reason)
	require.Equal(t, msg, condition(db, "Degraded").Message)

	// The user restores it as the message says (with the replication password too, which the
	// primary's replication role and the standbys hold): adopted, the passwords kept. The
	// annotation names this Database's uid, which no Secret planted before it existed can.
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-credentials",
		Annotations: map[string]string{database.RestoreForAnnotation: string(dbUID)}},
		Data: map[string][]byte{"username": old.Data["username"], "password": old.Data["password"],
			"superuser-username": old.Data["superuser-username"], "superuser-password": old.Data["superuser-password"],
			"replication-password": old.Data["replication-password"]}}
	require.NoError(t, f.kube.Tracker().Add(restored))
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"get secrets my-database-credentials", "update secrets my-database-credentials",
		"update databases/status my-database"}, f.actions)
	require.Equal(t, old.Data, f.secret().Data)
	require.Equal(t, []string{database.CredentialsFinalizer}, f.secret().Finalizers)
	require.True(t, metav1.IsControlledBy(f.secret(), f.database()))
	require.Equal(t, examplev1.DatabasePhaseReady, f.database().Status.Phase)
}

func TestRetainedClaimsWithoutTheirSecretAreLostCredentials(t *testing.T) {
	old := newFixture(t, exampleDatabase())
	old.ready()
	claim := old.claim("data-my-database-0").DeepCopy()
	retained(claim)
	db := exampleDatabase()
	db.UID = "new-uid"
	f := newFixture(t, db, claim, releasedRecord(claim))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, []string{"update databases my-database", "get configmaps released.production.my-database",
		"get secrets my-database-credentials", "update databases/status my-database"}, f.actions)
	require.False(t, f.exists(secrets, name+"-credentials"))
	require.Equal(t, "CredentialsLost", condition(f.database(), "Ready").Reason)
}

func TestPermanentErrorsFailWithoutRetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*examplev1.Database)
		inject  func(*fixture)
		actions []string
		reason  string
	}{{
		name:    "a version outside the catalog",
		change:  func(db *examplev1.Database) { db.Spec.Version = "12" },
		actions: []string{"update databases my-database", "update databases/status my-database"},
		reason:  "UnsupportedVersion",
	}, {
		name:    "an invalid storage",
		change:  func(db *examplev1.Database) { db.Spec.Storage = "0Gi" },
		actions: []string{"update databases my-database", "update databases/status my-database"},
		reason:  "InvalidSpec",
	}, {
		// The API server's DatabaseDefaults plugin is the one source of defaults: the
		// controller never runs a Database on replicas or storage of its own choosing.
		name:    "replicas not set",
		change:  func(db *examplev1.Database) { db.Spec.Replicas = nil },
		actions: []string{"update databases my-database", "update databases/status my-database"},
		reason:  "InvalidSpec",
	}, {
		name:    "storage not set",
		change:  func(db *examplev1.Database) { db.Spec.Storage = "" },
		actions: []string{"update databases my-database", "update databases/status my-database"},
		reason:  "InvalidSpec",
	}, {
		name: "a child the API server refuses",
		inject: func(f *fixture) {
			f.inject("create", "statefulsets", 1, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, name,
				field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, "too long")}))
		},
		actions: slices.Concat([]string{"update databases my-database", "create secrets my-database-credentials"},
			createServices, getClaims, createClaims,
			[]string{"create statefulsets my-database", "update databases/status my-database"}),
		reason: "InvalidChild",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			db := exampleDatabase()
			if tc.change != nil {
				tc.change(db)
			}
			f := newFixture(t, db)
			if tc.inject != nil {
				tc.inject(f)
			}
			result, err := f.reconcile()
			require.NoError(t, err)
			require.Equal(t, database.Result{}, result)
			require.Equal(t, tc.actions, f.actions)
			events := f.events()
			require.NotEmpty(t, events)
			require.Regexp(t, "^Warning "+tc.reason+" ", events[len(events)-1])
			got := f.database()
			require.Equal(t, examplev1.DatabasePhaseFailed, got.Status.Phase)
			require.Equal(t, tc.reason, condition(got, "Ready").Reason)
			require.Equal(t, metav1.ConditionTrue, condition(got, "Degraded").Status)
		})
	}
}

func TestTerminatingNamespaceIsReported(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: "namespace production is being terminated", Field: "metadata.namespace"})
	f.inject("create", "statefulsets", 1, terminating)

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result, "not a hot loop of creates")
	db := f.database()
	require.Equal(t, metav1.ConditionFalse, condition(db, "Ready").Status)
	require.Equal(t, "NamespaceTerminating", condition(db, "Ready").Reason)
	require.Equal(t, `cannot create StatefulSet "my-database": the namespace is being deleted`, condition(db, "Ready").Message)
}

func TestTransientErrorsAreReportedAndReturned(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.inject("create", "statefulsets", 2, apierrors.NewInternalError(errors.New("etcd timeout")))
	_, err := f.reconcile()
	require.ErrorContains(t, err, "etcd timeout")
	require.Equal(t, append(slices.Clone(firstReconcile[:slices.Index(firstReconcile, "create statefulsets my-database")+1]),
		"update databases/status my-database"), f.actions)
	const msg = `create StatefulSet "my-database": Internal error occurred: etcd timeout`
	require.Contains(t, f.events(), "Warning ReconcileError "+msg)
	db := f.database()
	require.Equal(t, examplev1.DatabasePhasePending, db.Status.Phase)
	progressing := condition(db, "Progressing")
	require.Equal(t, metav1.ConditionFalse, progressing.Status)
	require.Equal(t, "ReconcileError", progressing.Reason)
	require.Equal(t, msg, progressing.Message)

	_, err = f.reconcile()
	require.ErrorContains(t, err, "etcd timeout")
	require.Equal(t, append(slices.Clone(getClaims), "create statefulsets my-database"), f.actions,
		"the same error writes no status again; without a StatefulSet, the claims are read again")
	require.Equal(t, []string{"Warning ReconcileError " + msg}, f.events(), "the recorder aggregates repeats")

	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeue, result)
	require.Equal(t, append(slices.Clone(getClaims), "create statefulsets my-database", "create poddisruptionbudgets my-database",
		"update databases/status my-database"), f.actions, "the retry resumes where it stopped")
	require.Equal(t, "Updating", condition(f.database(), "Progressing").Reason)
}

func TestStatusConflictIsReturnedForRequeue(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.inject("update", "databases/status", 1, apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "databases"}, name, errors.New("modified")))
	_, err := f.reconcile()
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.Equal(t, firstReconcile, f.actions)
}

func TestStorageExpansionRefusedDegradesWithoutBlockingOtherChanges(t *testing.T) {
	f := newFixture(t, exampleDatabase())
	f.ready()
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Storage = "200Gi" })
	f.inject("patch", "persistentvolumeclaims", 100, apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"},
		"data-my-database-0", errors.New("only dynamically provisioned pvc can be resized")))
	patches := []string{"patch persistentvolumeclaims data-my-database-0",
		"patch persistentvolumeclaims data-my-database-1", "patch persistentvolumeclaims data-my-database-2"}
	result, err := f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result, "retried every minute")
	require.Equal(t, append(slices.Clone(patches), "update databases/status my-database"), f.actions, "no StatefulSet replacement")
	events := f.events()
	require.Len(t, events, 1)
	require.Regexp(t, "^Warning StorageExpansionFailed cannot grow PersistentVolumeClaim data-my-database-0 from 100Gi to 200Gi", events[0])
	db := f.database()
	require.Equal(t, examplev1.DatabasePhaseDegraded, db.Status.Phase)
	require.Equal(t, metav1.ConditionTrue, condition(db, "Ready").Status, "the database still serves")
	require.Equal(t, int32(3), db.Status.ReadyReplicas)
	for typ, status := range map[string]metav1.ConditionStatus{"Progressing": metav1.ConditionFalse, "Degraded": metav1.ConditionTrue} {
		require.Equal(t, status, condition(db, typ).Status, typ)
		require.Equal(t, "StorageExpansionFailed", condition(db, typ).Reason, typ)
	}
	require.Equal(t, "100Gi", ptr.To(f.statefulSet().Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]).String())

	// Other changes still flow to the StatefulSet.
	f.updateDatabase(func(db *examplev1.Database) { db.Spec.Replicas, db.Spec.Version = ptr.To[int32](5), "14.6" })
	_, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, slices.Concat([]string{"get persistentvolumeclaims data-my-database-3", "get persistentvolumeclaims data-my-database-4",
		"create persistentvolumeclaims data-my-database-3", "create persistentvolumeclaims data-my-database-4"},
		patches, []string{"update statefulsets my-database", "update databases/status my-database"}), f.actions)
	require.Equal(t, []string{"Normal Updated Updated StatefulSet my-database: replicas 3 → 5, image postgres:14.5 → postgres:14.6"}, f.events())
	sts := f.statefulSet()
	require.Equal(t, int32(5), *sts.Spec.Replicas)
	require.Equal(t, "postgres:14.6", sts.Spec.Template.Spec.Containers[0].Image)

	// Unchanged: the expansion is tried again, nothing else is written.
	f.setStatefulSetStatus(5, "rev-2", "rev-2")
	_, err = f.reconcile()
	require.NoError(t, err)
	f.actions = nil
	result, err = f.reconcile()
	require.NoError(t, err)
	require.Equal(t, requeueExternal, result)
	require.Equal(t, patches, f.actions)
	require.Empty(t, f.events())
}

func TestDatabaseDeletedWhileReconciledIsRoutine(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "databases"}, name)
	for _, tc := range []struct {
		name    string
		inject  func(*fixture)
		actions []string
	}{{
		name:    "adding the finalizer",
		inject:  func(f *fixture) { f.inject("update", "databases", 1, gone) },
		actions: []string{"update databases my-database"},
	}, {
		name:    "writing status",
		inject:  func(f *fixture) { f.inject("update", "databases/status", 1, gone) },
		actions: firstReconcile,
	}, {
		name: "writing the status of a transient error",
		inject: func(f *fixture) {
			f.inject("create", "statefulsets", 1, apierrors.NewInternalError(errors.New("etcd timeout")))
			f.inject("update", "databases/status", 1, gone)
		},
		actions: append(slices.Clone(firstReconcile[:slices.Index(firstReconcile, "create statefulsets my-database")+1]),
			"update databases/status my-database"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, exampleDatabase())
			tc.inject(f)
			result, err := f.reconcile()
			require.NoError(t, err, "no error to log, no backoff")
			require.Equal(t, database.Result{}, result, "no requeue")
			require.Equal(t, tc.actions, f.actions)
		})
	}

	// A child's 404 is still an error.
	f := newFixture(t, exampleDatabase())
	f.inject("create", "statefulsets", 1, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name))
	_, err := f.reconcile()
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// With an image registry, the Pods pull the catalog's image from it, the setup container too.
// The hosts the Secret gives clients and the primary the standbys follow are fully qualified
// names under the Reconciler's cluster domain, names.DefaultClusterDomain without one.
func TestHostsAreFullyQualifiedInTheClusterDomain(t *testing.T) {
	for domain, want := range map[string]string{"": "cluster.local", "corp.example.test": "corp.example.test"} {
		f := newFixtureWithOptions(t, database.Options{ClusterDomain: domain}, exampleDatabase())
		_, err := f.reconcile()
		require.NoError(t, err)
		secret := f.secret()
		require.Equal(t, "my-database.production.svc."+want, string(secret.Data["host"]), domain)
		require.Equal(t, "my-database-read.production.svc."+want, string(secret.Data["read-host"]), domain)
		require.Contains(t, string(secret.Data["uri"]), "@my-database.production.svc."+want+":5432/", domain)
		env := map[string]string{}
		for _, e := range f.statefulSet().Spec.Template.Spec.InitContainers[0].Env {
			env[e.Name] = e.Value
		}
		require.Equal(t, "my-database.production.svc."+want, env["PRIMARY_HOST"], domain)
	}
}

func TestImageRegistryPrefixesTheCatalogsImage(t *testing.T) {
	f := newFixtureWithOptions(t, database.Options{ImageRegistry: "registry.example:5000/mirror"}, exampleDatabase())
	_, err := f.reconcile()
	require.NoError(t, err)
	pod := f.statefulSet().Spec.Template.Spec
	require.Equal(t, "registry.example:5000/mirror/postgres:14.5", pod.Containers[0].Image)
	require.Equal(t, "registry.example:5000/mirror/postgres:14.5", pod.InitContainers[0].Image)
}

// specs.NewChildren builds what the controller creates: after the first passes over a new
// Database, every child the controller created is, but for the Secret's random passwords
// and what the API server sets (uid, resourceVersion, generation, status), what NewChildren
// returns for the Database and the controller's namespace; and it created no other.
func TestNewChildrenIsWhatTheControllerCreates(t *testing.T) {
	withPolicy := exampleDatabase()
	withPolicy.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}}}}}
	for _, db := range []*examplev1.Database{exampleDatabase(), withPolicy} {
		requireNewChildrenCreated(t, db)
	}
}

func requireNewChildrenCreated(t *testing.T, db *examplev1.Database) {
	f := newFixture(t, db)
	for range 2 {
		_, err := f.reconcile()
		require.NoError(t, err)
	}
	db = f.database()
	want, err := specs.NewChildren(db, "password", database.DefaultControllerNamespace)
	require.NoError(t, err)
	built := []metav1.Object{want.Secret, want.HeadlessService, want.ClientService, want.ReadService, want.StatefulSet,
		want.ReplicationConfigMap, want.PodDisruptionBudget}
	if want.NetworkPolicy != nil {
		built = append(built, want.NetworkPolicy)
	}
	require.Nil(t, want.InitConfigMap, "PostgreSQL initialises without scripts of ours")
	gvrs := map[string]schema.GroupVersionResource{"Secret": secrets, "Service": services, "StatefulSet": statefulSets,
		"ConfigMap": configMaps, "PodDisruptionBudget": pdbs, "NetworkPolicy": networkPolicies}
	created := 0
	for kind, gvr := range gvrs {
		list, err := f.kube.Tracker().List(gvr, gvr.GroupVersion().WithKind(kind), namespace)
		require.NoError(t, err)
		items, err := meta.ExtractList(list)
		require.NoError(t, err)
		created += len(items)
	}
	require.Equal(t, len(built), created, "the controller created exactly NewChildren's objects")
	for _, w := range built {
		gvr := gvrs[strings.TrimPrefix(fmt.Sprintf("%T", w), "*v1.")]
		stored, err := f.kube.Tracker().Get(gvr, namespace, w.GetName())
		require.NoError(t, err, "%T %s", w, w.GetName())
		have := stored.(metav1.Object)
		// What the API server sets, and the Secret's passwords and finalizer (the
		// controller's own, of its ownership rules) are not the builder's.
		have.SetUID("")
		have.SetResourceVersion("")
		have.SetGeneration(0)
		have.SetManagedFields(nil)
		stored.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		switch h := have.(type) {
		case *corev1.Secret:
			require.ElementsMatch(t, slices.Collect(maps.Keys(w.(*corev1.Secret).Data)), slices.Collect(maps.Keys(h.Data)))
			h.Data = w.(*corev1.Secret).Data
			require.Equal(t, []string{database.CredentialsFinalizer}, h.Finalizers)
			h.Finalizers = nil
		case *appsv1.StatefulSet:
			h.Status = appsv1.StatefulSetStatus{}
		case *policyv1.PodDisruptionBudget:
			h.Status = policyv1.PodDisruptionBudgetStatus{}
		}
		require.Equal(t, w, have, "%T %s", w, w.GetName())
	}
}
