//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/controllerpolicy"
	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbcontroller "example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
	"example.com/database-apiserver/pkg/engine"
	"example.com/database-apiserver/pkg/names"
)

// These tests pin the admission policies of artifacts/policy, which the local control plane
// applies: whatever the controller's ClusterRole allows, kube-apiserver refuses a write by its
// ServiceAccount of anything not shaped like the children the controller builds.

// kubeAsController is a clientset that impersonates the controller's ServiceAccount user, the
// user the local cluster's controller authenticates as (localcluster.ControllerUser).
func kubeAsController(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.AdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: localcluster.ControllerUser}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// policyDatabase is a Database the tests build children for with the controller's own
// builders (specs.NewChildren). It is never created: admission checks the owner reference's
// shape, not that the owner exists.
func policyDatabase(ns string) *examplev1.Database {
	return &examplev1.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-shape", Namespace: ns, UID: types.UID("00000000-0000-4000-8000-000000000001")},
		Spec: examplev1.DatabaseSpec{
			Engine:   examplev1.EnginePostgreSQL,
			Version:  "16",
			Replicas: ptr.To[int32](3),
			Storage:  "1Gi",
		},
	}
}

// requireRefused requires err to be the 403 of the policy named policy, with want in its
// message.
func requireRefused(t *testing.T, err error, policy, want string) {
	t.Helper()
	require.Error(t, err, "admitted")
	require.True(t, apierrors.IsForbidden(err), "want 403 Forbidden, got %v", err)
	require.Contains(t, err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
	require.Contains(t, err.Error(), want)
}

func TestControllerPolicyRefusesWhatTheControllerDoesNotBuild(t *testing.T) {
	ns := testNamespace(t, "e2e-policy")
	ctx := context.Background()
	k := kubeAsController(t)
	db := policyDatabase(ns)
	built, err := specs.NewChildren(db, "e2e-password", "database-system")
	require.NoError(t, err)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	// The policy's informers may need a moment after the cluster started.
	t.Run("the controller's own children are admitted", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			_, err := k.AppsV1().StatefulSets(ns).Create(ctx, built.StatefulSet, dryRun)
			return err
		})
		_, err := k.CoreV1().Secrets(ns).Create(ctx, built.Secret, dryRun)
		require.NoError(t, err)
		for _, svc := range []*corev1.Service{built.HeadlessService, built.ClientService, built.ReadService} {
			_, err := k.CoreV1().Services(ns).Create(ctx, svc, dryRun)
			require.NoError(t, err, svc.Name)
		}
		_, err = k.CoreV1().ConfigMaps(ns).Create(ctx, built.ReplicationConfigMap, dryRun)
		require.NoError(t, err)
		_, err = k.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, built.PodDisruptionBudget, dryRun)
		require.NoError(t, err)
		_, err = k.CoreV1().PersistentVolumeClaims(ns).Create(ctx, specs.DataClaim(built.StatefulSet, 0), dryRun)
		require.NoError(t, err)
	})

	// Where it may be and who owns it (database-controller-children).
	for _, tc := range []struct {
		name   string
		change func(sts *appsv1.StatefulSet)
		want   string
	}{
		{"in kube-system", func(sts *appsv1.StatefulSet) { sts.Namespace = "kube-system" }, "kube-system is a system namespace"},
		{"in the system namespace", func(sts *appsv1.StatefulSet) { sts.Namespace = localcluster.APIServerNamespace },
			"database-system is a system namespace"},
		{"without a Database owner", func(sts *appsv1.StatefulSet) { sts.OwnerReferences = nil },
			"its controller ownerReference must be an example.com/v1 Database"},
		{"owned by a Deployment", func(sts *appsv1.StatefulSet) {
			sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "other",
				UID: "00000000-0000-4000-8000-000000000002", Controller: ptr.To(true)}}
		}, "its controller ownerReference must be an example.com/v1 Database"},
	} {
		t.Run("a StatefulSet "+tc.name+" is refused", func(t *testing.T) {
			sts := built.StatefulSet.DeepCopy()
			tc.change(sts)
			_, err := k.AppsV1().StatefulSets(sts.Namespace).Create(ctx, sts, dryRun)
			requireRefused(t, err, "database-controller-children", tc.want)
		})
	}
	// Its shape (database-controller-workloads): the Pod template the recipe builds, and the
	// Database's own selector, labels, Service and claims.
	for _, tc := range controllerpolicy.StatefulSetChanges() {
		t.Run("a StatefulSet "+tc.Name+" is refused", func(t *testing.T) {
			sts := built.StatefulSet.DeepCopy()
			tc.Change(sts)
			_, err := k.AppsV1().StatefulSets(sts.Namespace).Create(ctx, sts, dryRun)
			requireRefused(t, err, tc.Policy, tc.Want)
		})
	}

	// A PostgreSQL Database with spec.backup (its store's Secret holding a CA): its StatefulSet
	// (archiving, the backup server), the Secret of its backup certificates, its backup Job and
	// its NetworkPolicy are admitted; other shapes of its StatefulSet and Job are refused.
	backupDB := db.DeepCopy()
	backupDB.Spec.Backup = &examplev1.DatabaseBackupPolicy{S3: examplev1.DatabaseBackupS3{
		Endpoint: "https://store.example.test", Bucket: "backups", SecretName: "e2e-store"}}
	backupDB.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}}}
	backupDesired, err := specs.Resolve(backupDB)
	require.NoError(t, err)
	backupDesired.Backup, _ = engine.ResolveBackupStore(backupDB, true)
	backupSTS := specs.StatefulSet(backupDB, backupDesired)
	backupJob, err := specs.BackupJob(backupDB, backupDesired, specs.BackupJobName(backupDB, time.Now()))
	require.NoError(t, err)
	t.Run("the controller's backup children are admitted", func(t *testing.T) {
		_, err := k.AppsV1().StatefulSets(ns).Create(ctx, backupSTS, dryRun)
		require.NoError(t, err)
		_, err = k.BatchV1().Jobs(ns).Create(ctx, backupJob, dryRun)
		require.NoError(t, err)
		secret, err := specs.BackupTLSSecret(backupDB, backupDesired, time.Now())
		require.NoError(t, err)
		_, err = k.CoreV1().Secrets(ns).Create(ctx, secret, dryRun)
		require.NoError(t, err)
		_, err = k.NetworkingV1().NetworkPolicies(ns).Create(ctx, specs.NetworkPolicy(backupDB, backupDesired, localcluster.APIServerNamespace), dryRun)
		require.NoError(t, err)
	})
	for _, tc := range controllerpolicy.BackupStatefulSetChanges() {
		t.Run("a backed up StatefulSet "+tc.Name+" is refused", func(t *testing.T) {
			sts := backupSTS.DeepCopy()
			tc.Change(sts)
			_, err := k.AppsV1().StatefulSets(sts.Namespace).Create(ctx, sts, dryRun)
			requireRefused(t, err, tc.Policy, tc.Want)
		})
	}
	// kube-apiserver generates the Job's selector and its Pods' job labels before admission.
	for _, tc := range controllerpolicy.JobChanges() {
		t.Run("a Job "+tc.Name+" is refused", func(t *testing.T) {
			job := backupJob.DeepCopy()
			tc.Change(job)
			_, err := k.BatchV1().Jobs(job.Namespace).Create(ctx, job, dryRun)
			requireRefused(t, err, tc.Policy, tc.Want)
		})
	}

	// A PodDisruptionBudget selects exactly its Database's Pods and lets one go at a time.
	for _, tc := range []struct {
		name   string
		change func(b *policyv1.PodDisruptionBudget)
		want   string
	}{
		{"selecting every Pod of the namespace, none to go", func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector, b.Spec.MaxUnavailable = &metav1.LabelSelector{}, ptr.To(intstr.FromInt32(0))
		}, "its selector must be exactly the matchLabels app.kubernetes.io/name=<postgresql, mysql or mongodb>, app.kubernetes.io/instance=<the name of its controller Database>"},
		{"selecting another Database's Pods", func(b *policyv1.PodDisruptionBudget) {
			b.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] = "someone-else"
		}, "its selector must be exactly the matchLabels"},
		{"letting none go", func(b *policyv1.PodDisruptionBudget) { b.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			"it must set maxUnavailable 1 and no minAvailable"},
	} {
		t.Run("a PodDisruptionBudget "+tc.name+" is refused", func(t *testing.T) {
			b := built.PodDisruptionBudget.DeepCopy()
			tc.change(b)
			_, err := k.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, b, dryRun)
			requireRefused(t, err, "database-controller-poddisruptionbudgets", "PodDisruptionBudget "+ns+"/e2e-shape: "+tc.want)
		})
	}

	// Events: about a Database in its namespace, or the controller's Lease, as database-controller.
	onDatabase := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-shape.e2e", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "Database", Namespace: ns, Name: db.Name,
			UID: db.UID},
		Reason: "Created", Message: "Created Secret e2e-shape-credentials", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: dbcontroller.ControllerName}, ReportingController: dbcontroller.ControllerName,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}
	onLease := onDatabase.DeepCopy()
	onLease.Namespace, onLease.Name = localcluster.APIServerNamespace, "database-controller.e2e"
	onLease.InvolvedObject = corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
		Namespace: localcluster.APIServerNamespace, Name: "database-controller"}
	t.Run("the controller's own Events are admitted", func(t *testing.T) {
		for _, e := range []*corev1.Event{onDatabase, onLease} {
			_, err := k.CoreV1().Events(e.Namespace).Create(ctx, e, dryRun)
			require.NoError(t, err, e.Name)
		}
	})
	const notAbout = "not an example.com/v1 Database of its namespace outside the system namespaces, nor its Lease in database-system"
	for _, tc := range []struct {
		name   string
		change func(e *corev1.Event)
		want   string
	}{
		{"about a Pod", func(e *corev1.Event) { e.InvolvedObject.APIVersion, e.InvolvedObject.Kind = "v1", "Pod" }, notAbout},
		{"in kube-system", func(e *corev1.Event) { e.Namespace, e.InvolvedObject.Namespace = "kube-system", "kube-system" }, notAbout},
		{"about the kube-system Lease of the scheduler", func(e *corev1.Event) {
			e.Namespace = "kube-system"
			e.InvolvedObject = corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
				Namespace: "kube-system", Name: "kube-scheduler"}
		}, notAbout},
		{"as the kubelet", func(e *corev1.Event) { e.Source.Component = "kubelet" },
			"its source.component and reportingComponent must be database-controller"},
	} {
		t.Run("an Event "+tc.name+" is refused", func(t *testing.T) {
			e := onDatabase.DeepCopy()
			tc.change(e)
			_, err := k.CoreV1().Events(e.Namespace).Create(ctx, e, dryRun)
			requireRefused(t, err, "database-controller-events", tc.want)
		})
	}

	t.Run("kubectl as the controller is refused, as docs/security.md shows", func(t *testing.T) {
		as := "--as=" + localcluster.ControllerUser
		errOut := kubectlFails(t, cluster.KubeconfigPath, "", as, "create", "secret", "generic", "stolen", "-n", "kube-system", "--from-literal=k=v")
		require.Contains(t, errOut, "database-controller may not write Secret kube-system/stolen: kube-system is a system namespace")
		errOut = kubectlFails(t, cluster.KubeconfigPath, "", as, "create", "secret", "generic", "planted", "-n", ns, "--from-literal=password=known")
		require.Contains(t, errOut, "database-controller may not write Secret "+ns+"/planted: its controller ownerReference must be an example.com/v1 Database")
	})

	t.Run("a Secret without the managed-by label is refused", func(t *testing.T) {
		secret := built.Secret.DeepCopy()
		delete(secret.Labels, names.ManagedByLabel)
		_, err := k.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-children",
			"Secret "+ns+"/e2e-shape-credentials: it must carry the label app.kubernetes.io/managed-by=database-controller")
	})

	t.Run("a Secret without a Database owner is refused", func(t *testing.T) {
		secret := built.Secret.DeepCopy()
		secret.OwnerReferences = nil
		_, err := k.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-children", "its controller ownerReference must be an example.com/v1 Database")
	})

	t.Run("a Secret in kube-system is refused", func(t *testing.T) {
		secret := built.Secret.DeepCopy()
		secret.Namespace = "kube-system"
		_, err := k.CoreV1().Secrets("kube-system").Create(ctx, secret, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-children", "kube-system is a system namespace")
	})

	t.Run("a ServiceAccount token Secret is refused", func(t *testing.T) {
		secret := built.Secret.DeepCopy()
		secret.Type = corev1.SecretTypeServiceAccountToken
		secret.Annotations = map[string]string{corev1.ServiceAccountNameKey: "default"}
		_, err := k.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-secrets",
			"Secret "+ns+"/e2e-shape-credentials: type kubernetes.io/service-account-token is not Opaque")
	})

	t.Run("a claim of an existing volume is refused", func(t *testing.T) {
		claim := specs.DataClaim(built.StatefulSet, 0)
		claim.Spec.VolumeName = "someone-elses"
		_, err := k.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-claims", "it names the volume someone-elses")
	})

	t.Run("a claim from a data source is refused", func(t *testing.T) {
		claim := specs.DataClaim(built.StatefulSet, 0)
		claim.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "theirs"}
		_, err := k.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-claims", "it has a dataSource or dataSourceRef")
	})

	// A Database's NetworkPolicy as the controller builds it, with clients, is admitted; one
	// that selects other Pods, limits egress, admits an ipBlock or every source is not.
	npDB := db.DeepCopy()
	npDB.Spec.NetworkPolicy = &examplev1.DatabaseNetworkPolicy{From: []examplev1.DatabaseNetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}}}
	desired, err := specs.Resolve(npDB)
	require.NoError(t, err)
	builtPolicy := specs.NetworkPolicy(npDB, desired, localcluster.APIServerNamespace)
	t.Run("the controller's own NetworkPolicy is admitted", func(t *testing.T) {
		_, err := k.NetworkingV1().NetworkPolicies(ns).Create(ctx, builtPolicy, dryRun)
		require.NoError(t, err)
	})
	for _, tc := range []struct {
		name   string
		change func(np *networkingv1.NetworkPolicy)
		policy string
		want   string
	}{
		{"selecting every Pod of the namespace", func(np *networkingv1.NetworkPolicy) { np.Spec.PodSelector = metav1.LabelSelector{} },
			"database-controller-networkpolicies", "its podSelector must match the labels app.kubernetes.io/managed-by=database-controller"},
		{"with egress rules", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		}, "database-controller-networkpolicies", "its policyTypes must be [Ingress]"},
		{"admitting every source", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].From = nil },
			"database-controller-networkpolicies", "an ingress rule without from or ports admits every source or port"},
		{"selecting another Database's Pods", func(np *networkingv1.NetworkPolicy) {
			np.Spec.PodSelector.MatchLabels["app.kubernetes.io/instance"] = "someone-else"
		}, "database-controller-networkpolicies", "app.kubernetes.io/instance=<the name of its controller Database>"},
		{"without rules", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress = nil },
			"database-controller-networkpolicies", "it has no ingress rule, which admits nothing"},
		{"admitting every TCP port", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].Port = nil },
			"database-controller-networkpolicies", "a port without port, or with endPort, admits a range of ports"},
		{"admitting a port range", func(np *networkingv1.NetworkPolicy) { np.Spec.Ingress[0].Ports[0].EndPort = ptr.To[int32](65535) },
			"database-controller-networkpolicies", "a port without port, or with endPort, admits a range of ports"},
		{"admitting an ipBlock", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})
		}, "database-controller-networkpolicies", "a peer is an ipBlock"},
		{"without the managed-by label", func(np *networkingv1.NetworkPolicy) { delete(np.Labels, names.ManagedByLabel) },
			"database-controller-children", "NetworkPolicy " + ns + "/e2e-shape: it must carry the label app.kubernetes.io/managed-by=database-controller"},
		{"in kube-system", func(np *networkingv1.NetworkPolicy) { np.Namespace = "kube-system" },
			"database-controller-children", "kube-system is a system namespace"},
	} {
		t.Run("a NetworkPolicy "+tc.name+" is refused", func(t *testing.T) {
			np := builtPolicy.DeepCopy()
			tc.change(np)
			_, err := k.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
			requireRefused(t, err, tc.policy, tc.want)
		})
	}

	t.Run("a foreign Secret is not taken over", func(t *testing.T) {
		foreign, err := kube(t).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-foreign"},
			StringData: map[string]string{"token": "theirs"},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		foreign.OwnerReferences = []metav1.OwnerReference{specs.OwnerReference(db)}
		foreign.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue}
		foreign.Data = map[string][]byte{"token": []byte("ours")}
		_, err = k.CoreV1().Secrets(ns).Update(ctx, foreign, metav1.UpdateOptions{})
		requireRefused(t, err, "database-controller-children", "may not take over Secret "+ns+"/e2e-foreign")
	})

	t.Run("a Secret marked retained-from another Database is not taken over", func(t *testing.T) {
		marked, err := kube(t).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-marked",
				Annotations: map[string]string{"database.example.com/retained-from": ns + "/someone-else"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		marked.OwnerReferences = []metav1.OwnerReference{specs.OwnerReference(db)}
		marked.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue}
		_, err = k.CoreV1().Secrets(ns).Update(ctx, marked, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		requireRefused(t, err, "database-controller-children", "may not take over Secret "+ns+"/e2e-marked")

		// Marked for the Database it is given to (retained-from its name, or restore-for its
		// uid), the same update is admitted: whether to adopt is the controller's decision.
		for _, annotations := range []map[string]string{
			{"database.example.com/retained-from": ns + "/" + db.Name},
			{"database.example.com/restore-for": string(db.UID)},
		} {
			fresh, err := kube(t).CoreV1().Secrets(ns).Get(ctx, marked.Name, metav1.GetOptions{})
			require.NoError(t, err)
			fresh.Annotations = annotations
			fresh, err = kube(t).CoreV1().Secrets(ns).Update(ctx, fresh, metav1.UpdateOptions{})
			require.NoError(t, err)
			fresh.OwnerReferences = []metav1.OwnerReference{specs.OwnerReference(db)}
			fresh.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue}
			_, err = k.CoreV1().Secrets(ns).Update(ctx, fresh, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			require.NoError(t, err, "%v", annotations)
		}
	})

	t.Run("in the system namespace only release records are written", func(t *testing.T) {
		sys := localcluster.APIServerNamespace
		record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: dbcontroller.ReleasedRecordName(ns, db.Name), Namespace: sys,
			Labels:      map[string]string{names.ManagedByLabel: names.ManagedByValue},
			Annotations: map[string]string{dbcontroller.RetainedFromAnnotation: ns + "/" + db.Name}},
			Data: map[string]string{"00000000-0000-4000-8000-000000000004": "Secret e2e-shape-credentials"}}
		created, err := k.CoreV1().ConfigMaps(sys).Create(ctx, record, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Data["00000000-0000-4000-8000-000000000003"] = "PersistentVolumeClaim data-e2e-shape-0"
		updated, err := k.CoreV1().ConfigMaps(sys).Update(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)

		// A record holds the Database's own Secret and data claims, by UID, under its name and
		// annotation: an update of it, or a record of that shape for another Database, is
		// refused.
		for _, tc := range []struct {
			name   string
			change func(cm *corev1.ConfigMap)
			want   string
		}{
			{"an entry that is no UID", func(cm *corev1.ConfigMap) { cm.Data["anything"] = "Secret e2e-shape-credentials" },
				"the entries anything are not a UID mapped to Secret e2e-shape-credentials or PersistentVolumeClaim data-e2e-shape-<ordinal>"},
			{"another Database's Secret", func(cm *corev1.ConfigMap) {
				cm.Data["00000000-0000-4000-8000-000000000005"] = "Secret someone-elses-credentials"
			}, "the entries 00000000-0000-4000-8000-000000000005 are not"},
			{"another label", func(cm *corev1.ConfigMap) { cm.Labels["app"] = "frontend" },
				"its only label must be app.kubernetes.io/managed-by=database-controller, its only annotation database.example.com/retained-from=" + ns + "/e2e-shape"},
			{"another Database's annotation", func(cm *corev1.ConfigMap) {
				cm.Annotations[dbcontroller.RetainedFromAnnotation] = ns + "/someone-else"
			}, "its only annotation database.example.com/retained-from=" + ns + "/e2e-shape"},
		} {
			cm := updated.DeepCopy()
			tc.change(cm)
			_, err := k.CoreV1().ConfigMaps(sys).Update(ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			requireRefused(t, err, "database-controller-releases", "ConfigMap "+sys+"/"+updated.Name+": ")
			require.Contains(t, err.Error(), tc.want)
			cm.Name, cm.ResourceVersion = dbcontroller.ReleasedRecordName(ns, "e2e-next"), ""
			if cm.Annotations[dbcontroller.RetainedFromAnnotation] == ns+"/e2e-shape" {
				cm.Annotations[dbcontroller.RetainedFromAnnotation] = ns + "/e2e-next"
			}
			for uid, entry := range cm.Data {
				cm.Data[uid] = strings.ReplaceAll(entry, "e2e-shape", "e2e-next")
			}
			_, err = k.CoreV1().ConfigMaps(sys).Create(ctx, cm, dryRun)
			requireRefused(t, err, "database-controller-releases", "ConfigMap "+sys+"/"+cm.Name+": ")
			require.Contains(t, err.Error(), strings.ReplaceAll(tc.want, "e2e-shape", "e2e-next"))
			t.Logf("%s: refused", tc.name)
		}
		require.NoError(t, k.CoreV1().ConfigMaps(sys).Delete(ctx, created.Name, metav1.DeleteOptions{}))

		misnamed := record.DeepCopy()
		misnamed.Name = "released." + ns + ".e2e.shape"
		_, err = k.CoreV1().ConfigMaps(sys).Create(ctx, misnamed, dryRun)
		requireRefused(t, err, "database-controller-releases", "a release record is named released.<namespace>.<database>")
		for name, cm := range map[string]*corev1.ConfigMap{
			"another name": {ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-a-record", Namespace: sys,
				Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue}}},
			"unlabelled": {ObjectMeta: metav1.ObjectMeta{Name: dbcontroller.ReleasedRecordName(ns, "unlabelled"), Namespace: sys}},
		} {
			_, err := k.CoreV1().ConfigMaps(sys).Create(ctx, cm, dryRun)
			requireRefused(t, err, "database-controller-children", "database-system is a system namespace")
			t.Logf("%s: refused", name)
		}
		requireRefused(t, k.CoreV1().ConfigMaps(sys).Delete(ctx, "kube-root-ca.crt", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}),
			"database-controller-deletes", "database-system is a system namespace")
	})

	t.Run("a NodePort Service is refused", func(t *testing.T) {
		svc := built.ClientService.DeepCopy()
		svc.Spec.Type = corev1.ServiceTypeNodePort
		_, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-services", "type NodePort is not ClusterIP")
	})

	// The local cluster's kube-apiserver refuses every Service's external IPs first
	// (DenyServiceExternalIPs, TestServicesTakeNoExternalIP); the policy's own refusal, for
	// clusters without that plugin, is held offline by internal/controllerpolicy.
	t.Run("a Service with externalIPs is refused", func(t *testing.T) {
		svc := built.ClientService.DeepCopy()
		svc.Spec.ExternalIPs = []string{"192.0.2.10"}
		_, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "want 403 Forbidden, got %v", err)
		require.ErrorContains(t, err, "Use of external IPs is denied by admission control")
	})

	t.Run("only what it manages is deleted", func(t *testing.T) {
		// Dry runs: admission decides as for a real delete, and nothing goes if the policy
		// fails to refuse.
		dryRun := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		for name, labels := range map[string]map[string]string{
			"e2e-managed":   {names.ManagedByLabel: names.ManagedByValue},
			"e2e-unmanaged": nil,
		} {
			_, err := kube(t).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, k.CoreV1().Secrets(ns).Delete(ctx, "e2e-managed", dryRun))
		requireRefused(t, k.CoreV1().Secrets(ns).Delete(ctx, "e2e-unmanaged", dryRun), "database-controller-deletes",
			"database-controller may not delete Secret "+ns+"/e2e-unmanaged: it is neither labelled app.kubernetes.io/managed-by=database-controller nor controlled by a Database")
		requireRefused(t, k.CoreV1().ConfigMaps("kube-system").Delete(ctx, "extension-apiserver-authentication", dryRun),
			"database-controller-deletes", "database-controller may not delete ConfigMap kube-system/extension-apiserver-authentication: kube-system is a system namespace")
	})

	t.Run("a Pod's label may change, its image may not", func(t *testing.T) {
		labelled, unlabelled := policyPod(ns, "e2e-ours", true), policyPod(ns, "e2e-theirs", false)
		for _, pod := range []*corev1.Pod{labelled, unlabelled} {
			// A new namespace's default ServiceAccount, which a Pod needs, may still be coming.
			eventually(t, 30*time.Second, func() error {
				_, err := kube(t).CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
				return err
			})
		}
		role := []byte(`{"metadata":{"labels":{"database.example.com/role":"primary"}}}`)
		_, err := k.CoreV1().Pods(ns).Patch(ctx, labelled.Name, types.StrategicMergePatchType, role, metav1.PatchOptions{})
		require.NoError(t, err)
		_, err = k.CoreV1().Pods(ns).Patch(ctx, unlabelled.Name, types.StrategicMergePatchType, role, metav1.PatchOptions{})
		requireRefused(t, err, "database-controller-pods",
			"Pod "+ns+"/e2e-theirs: it is not labelled app.kubernetes.io/managed-by=database-controller")
		frontend := []byte(`{"metadata":{"labels":{"app":"frontend"}}}`)
		_, err = k.CoreV1().Pods(ns).Patch(ctx, labelled.Name, types.StrategicMergePatchType, frontend, metav1.PatchOptions{})
		requireRefused(t, err, "database-controller-pods",
			"Pod "+ns+"/e2e-ours: it may change only the label database.example.com/role, not app")
		image := []byte(`{"spec":{"containers":[{"name":"database","image":"busybox:1.36"}]}}`)
		_, err = k.CoreV1().Pods(ns).Patch(ctx, labelled.Name, types.StrategicMergePatchType, image, metav1.PatchOptions{})
		requireRefused(t, err, "database-controller-pods", "Pod "+ns+"/e2e-ours: it may change only its metadata, never its spec")
	})
}

// policyPod is a Pod named name in ns running a catalog image, labelled as the controller's
// Pods are when managed.
func policyPod(ns, name string, managed bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "database", Image: "postgres:16"}}},
	}
	if managed {
		pod.Labels = map[string]string{names.ManagedByLabel: names.ManagedByValue}
	}
	return pod
}

// securityContext is c's security context, created when c has none.
func securityContext(c *corev1.Container) *corev1.SecurityContext {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	return c.SecurityContext
}

// TestControllerPolicyBindsTheRunningController shows that the policy binds the identity the
// controller really runs as: a Database becomes Ready (its real children pass), and once an
// admin gives its StatefulSet a host network, the controller's next update of it is refused,
// so a scale is not applied and the controller's log has the policy's reason.
func TestControllerPolicyBindsTheRunningController(t *testing.T) {
	ns := testNamespace(t, "e2e-policy-controller")
	kubectlIn(t, databaseIn(ns, "bound", 1, ""), "apply", "-f", "-")
	waitReady(t, ns, "bound", 1)

	ctx := context.Background()
	_, err := kube(t).AppsV1().StatefulSets(ns).Patch(ctx, "bound", types.MergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"hostNetwork":true}}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	kubectl(t, "scale", "db/bound", "-n", ns, "--replicas=2")

	logPath := filepath.Join(cluster.LogDir(), localcluster.ControllerName+".log")
	want := "denied request: database-controller may not write StatefulSet " + ns + "/bound: the Pod template sets hostNetwork"
	eventually(t, readyTimeout, func() error {
		log, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(log), want) {
			return fmt.Errorf("%s does not say %q yet", logPath, want)
		}
		return nil
	})
	sts, err := kube(t).AppsV1().StatefulSets(ns).Get(ctx, "bound", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(1), ptr.Deref(sts.Spec.Replicas, 0), "the refused update did not scale the StatefulSet")

	// Back to the shape the controller builds, it converges.
	_, err = kube(t).AppsV1().StatefulSets(ns).Patch(ctx, "bound", types.MergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"hostNetwork":false}}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitReady(t, ns, "bound", 2)
}

// TestControllerPolicyExpressionsTypeCheck requires kube-apiserver's type checking of every
// policy of artifacts/policy against the schemas of the kinds it matches to find no
// warning: a misspelt field would otherwise be a runtime error, which failurePolicy Fail
// turns into a refusal of every write. kube-apiserver type-checks the validations, not the
// variables: those are evaluated on real objects by the admitted writes of
// TestControllerPolicyRefusesWhatTheControllerDoesNotBuild.
func TestControllerPolicyExpressionsTypeCheck(t *testing.T) {
	objs, err := os.ReadDir(filepath.Join(root, "artifacts", "policy"))
	require.NoError(t, err)
	var names []string
	for _, f := range objs {
		if name, ok := strings.CutSuffix(f.Name(), ".yaml"); ok && name != "kustomization" {
			names = append(names, "database-"+name)
		}
	}
	require.NotEmpty(t, names)
	client := kube(t).AdmissionregistrationV1().ValidatingAdmissionPolicies()
	for _, name := range names {
		eventually(t, 30*time.Second, func() error {
			p, err := client.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return fmt.Errorf("policy %s not type-checked yet", name)
			}
			return nil
		})
		p, err := client.Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, p.Status.TypeChecking.ExpressionWarnings, "policy %s", name)
	}
}

// TestControllerPolicyBoundsUpdatesAsCreates holds the controller's updates of a real
// Database's children (its StatefulSet, PodDisruptionBudget and Pods) and of the Database itself
// to the bounds of its creates. Every update is a server-side dry run as the controller's
// ServiceAccount: what the controller writes is admitted (the objects as they are, a Pod's
// role label, the Database's finalizer and status), every other shape refused. The Database's
// policy is enforced by database-apiserver, which runs the ValidatingAdmissionPolicy plugin
// with the policies it reads from kube-apiserver (kube-apiserver runs no admission on the
// requests it proxies to it).
func TestControllerPolicyBoundsUpdatesAsCreates(t *testing.T) {
	ns := testNamespace(t, "e2e-policy-updates")
	kubectlIn(t, databaseIn(ns, "updated", 2, ""), "apply", "-f", "-")
	waitReady(t, ns, "updated", 2)
	ctx := context.Background()
	k := kubeAsController(t)
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}

	// updateStatefulSet sends the StatefulSet as stored, changed by change, as the controller,
	// again on a conflict (the controller may write it meanwhile).
	updateStatefulSet := func(change func(*appsv1.StatefulSet)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sts, err := kube(t).AppsV1().StatefulSets(ns).Get(ctx, "updated", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(sts)
			_, err = k.AppsV1().StatefulSets(ns).Update(ctx, sts, dryRun)
			return err
		})
	}
	t.Run("the StatefulSet as it is is admitted", func(t *testing.T) {
		require.NoError(t, updateStatefulSet(func(*appsv1.StatefulSet) {}))
	})
	for _, tc := range controllerpolicy.StatefulSetChanges() {
		if tc.CreateOnly {
			continue // API validation refuses the change of an immutable field first
		}
		t.Run("a StatefulSet "+tc.Name+" is refused", func(t *testing.T) {
			err := updateStatefulSet(tc.Change)
			requireRefused(t, err, tc.Policy, tc.Want)
			require.Contains(t, err.Error(), "may not write StatefulSet "+ns+"/updated: ")
		})
	}

	t.Run("the PodDisruptionBudget selects only the Database's Pods", func(t *testing.T) {
		b, err := kube(t).PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "updated", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = k.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, b, dryRun)
		require.NoError(t, err)
		b.Spec.Selector, b.Spec.MaxUnavailable = &metav1.LabelSelector{}, ptr.To(intstr.FromInt32(0))
		_, err = k.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, b, dryRun)
		requireRefused(t, err, "database-controller-poddisruptionbudgets",
			"PodDisruptionBudget "+ns+"/updated: its selector must be exactly the matchLabels")
	})

	t.Run("a Pod's role label changes, nothing else of it", func(t *testing.T) {
		patch := func(body string) error {
			_, err := k.CoreV1().Pods(ns).Patch(ctx, "updated-0", types.MergePatchType, []byte(body),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
		for _, role := range []string{`"primary"`, `"replica"`, "null"} {
			require.NoError(t, patch(`{"metadata":{"labels":{"database.example.com/role":`+role+`}}}`), role)
		}
		for body, want := range map[string]string{
			`{"metadata":{"labels":{"app":"frontend"}}}`:                     "it may change only the label database.example.com/role, not app",
			`{"metadata":{"labels":{"app.kubernetes.io/instance":null}}}`:    "not app.kubernetes.io/instance",
			`{"metadata":{"labels":{"database.example.com/role":"leader"}}}`: "the label database.example.com/role may be only primary or replica",
			`{"metadata":{"ownerReferences":null}}`:                          "it may not change its ownerReferences, annotations or finalizers",
		} {
			err := patch(body)
			requireRefused(t, err, "database-controller-pods", want)
			require.Contains(t, err.Error(), "may not write Pod "+ns+"/updated-0: ")
		}
	})

	t.Run("database-apiserver bounds the controller's updates of the Database", func(t *testing.T) {
		cfg := rest.CopyConfig(cluster.AdminConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: localcluster.ControllerUser}
		dbs := clientsetFor(t, cfg).ExampleV1().Databases(ns)
		// update sends the Database as stored, changed by change, as the controller (through
		// databases/status when status), again on a conflict.
		update := func(status bool, change func(*examplev1.Database)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				db, err := getDatabase(t, ns, "updated")
				if err != nil {
					return err
				}
				require.Contains(t, db.Finalizers, dbcontroller.FinalizerName)
				change(db)
				if status {
					_, err = dbs.UpdateStatus(ctx, db, dryRun)
				} else {
					_, err = dbs.Update(ctx, db, dryRun)
				}
				return err
			})
		}

		// What the controller writes: its finalizer removed (as its cleanup does), status.
		require.NoError(t, update(false, func(db *examplev1.Database) { db.Finalizers = nil }))
		require.NoError(t, update(true, func(db *examplev1.Database) { db.Status.ReadyReplicas = 1 }))

		const policy = "database-controller-databases"
		requireRefused(t, update(false, func(db *examplev1.Database) { db.Spec.Replicas = ptr.To[int32](5) }), policy,
			"Database "+ns+"/updated: it may not change its spec, labels, annotations or ownerReferences")
		requireRefused(t, update(false, func(db *examplev1.Database) { db.Finalizers = append(db.Finalizers, "example.com/keep") }), policy,
			"Database "+ns+"/updated: it may add or remove only the finalizer database.example.com/finalizer")
		requireRefused(t, update(true, func(db *examplev1.Database) { db.Annotations = map[string]string{"e2e": "through status"} }), policy,
			"Database "+ns+"/updated/status: it may not change its spec, labels, annotations or ownerReferences")
		requireRefused(t, update(true, func(db *examplev1.Database) { db.Finalizers = nil }), policy,
			"Database "+ns+"/updated/status: it may add or remove only the finalizer database.example.com/finalizer, and that not through status")
	})
}
