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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbcontroller "example.com/database-apiserver/pkg/controller/database"
	"example.com/database-apiserver/pkg/controller/specs"
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
	built, err := specs.NewChildren(db, "e2e-password")
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

	for _, tc := range []struct {
		name   string
		change func(sts *appsv1.StatefulSet)
		policy string
		want   string
	}{
		{"in kube-system", func(sts *appsv1.StatefulSet) { sts.Namespace = "kube-system" },
			"database-controller-children", "kube-system is a system namespace"},
		{"in the system namespace", func(sts *appsv1.StatefulSet) { sts.Namespace = localcluster.APIServerNamespace },
			"database-controller-children", "database-system is a system namespace"},
		{"without a Database owner", func(sts *appsv1.StatefulSet) { sts.OwnerReferences = nil },
			"database-controller-children", "its controller ownerReference must be an example.com/v1 Database"},
		{"owned by a Deployment", func(sts *appsv1.StatefulSet) {
			sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "other",
				UID: "00000000-0000-4000-8000-000000000002", Controller: ptr.To(true)}}
		}, "database-controller-children", "its controller ownerReference must be an example.com/v1 Database"},
		{"privileged", func(sts *appsv1.StatefulSet) {
			sc := securityContext(&sts.Spec.Template.Spec.Containers[0])
			sc.Privileged = ptr.To(true)
			sc.AllowPrivilegeEscalation = nil // false with privileged is invalid
		}, "database-controller-workloads", "container database is privileged"},
		{"allowing privilege escalation", func(sts *appsv1.StatefulSet) {
			securityContext(&sts.Spec.Template.Spec.Containers[0]).AllowPrivilegeEscalation = ptr.To(true)
		}, "database-controller-workloads", "container database sets allowPrivilegeEscalation true"},
		{"adding capabilities", func(sts *appsv1.StatefulSet) {
			sc := securityContext(&sts.Spec.Template.Spec.Containers[0])
			if sc.Capabilities == nil {
				sc.Capabilities = &corev1.Capabilities{}
			}
			sc.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "database-controller-workloads", "container database adds capabilities"},
		{"with a hostPath volume", func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes, corev1.Volume{Name: "host",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "database-controller-workloads", "volume host is a hostPath"},
		{"on the host network", func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.HostNetwork = true },
			"database-controller-workloads", "the Pod template sets hostNetwork"},
		{"in the host PID namespace", func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.HostPID = true },
			"database-controller-workloads", "the Pod template sets hostPID"},
		{"with a hostPort", func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 5432 },
			"database-controller-workloads", "container database uses a hostPort"},
		{"with an image not in the catalog", func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.Containers[0].Image = "busybox:1.36" },
			"database-controller-workloads", "image busybox:1.36 is not from the catalog repositories"},
		{"with a catalog name on another registry", func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.Containers[0].Image = "postgres:5000/evil:16"
		}, "database-controller-workloads", "image postgres:5000/evil:16 is not from the catalog repositories"},
		{"with a foreign init container", func(sts *appsv1.StatefulSet) {
			sts.Spec.Template.Spec.InitContainers = append(sts.Spec.Template.Spec.InitContainers,
				corev1.Container{Name: "fetch", Image: "quay.io/evil/tool:1"})
		}, "database-controller-workloads", "image quay.io/evil/tool:1 is not from the catalog repositories"},
		{"as another ServiceAccount", func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.ServiceAccountName = "admin" },
			"database-controller-workloads", "runs as ServiceAccount admin, not the namespace default"},
		{"mounting an API token", func(sts *appsv1.StatefulSet) { sts.Spec.Template.Spec.AutomountServiceAccountToken = nil },
			"database-controller-workloads", "must set automountServiceAccountToken false"},
	} {
		t.Run("a StatefulSet "+tc.name+" is refused", func(t *testing.T) {
			sts := built.StatefulSet.DeepCopy()
			tc.change(sts)
			_, err := k.AppsV1().StatefulSets(sts.Namespace).Create(ctx, sts, metav1.CreateOptions{})
			requireRefused(t, err, tc.policy, tc.want)
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
		delete(secret.Labels, specs.ManagedByLabel)
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
		{"without the managed-by label", func(np *networkingv1.NetworkPolicy) { delete(np.Labels, specs.ManagedByLabel) },
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
		foreign.Labels = map[string]string{specs.ManagedByLabel: specs.ManagedByValue}
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
		marked.Labels = map[string]string{specs.ManagedByLabel: specs.ManagedByValue}
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
			fresh.Labels = map[string]string{specs.ManagedByLabel: specs.ManagedByValue}
			_, err = k.CoreV1().Secrets(ns).Update(ctx, fresh, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			require.NoError(t, err, "%v", annotations)
		}
	})

	t.Run("in the system namespace only release records are written", func(t *testing.T) {
		sys := localcluster.APIServerNamespace
		record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: dbcontroller.ReleasedRecordName(ns, db.Name), Namespace: sys,
			Labels: map[string]string{specs.ManagedByLabel: specs.ManagedByValue}}, Data: map[string]string{string(db.UID): "Secret e2e-shape-credentials"}}
		created, err := k.CoreV1().ConfigMaps(sys).Create(ctx, record, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Data["00000000-0000-4000-8000-000000000003"] = "PersistentVolumeClaim data-e2e-shape-0"
		_, err = k.CoreV1().ConfigMaps(sys).Update(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, k.CoreV1().ConfigMaps(sys).Delete(ctx, created.Name, metav1.DeleteOptions{}))

		for name, cm := range map[string]*corev1.ConfigMap{
			"another name": {ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-a-record", Namespace: sys,
				Labels: map[string]string{specs.ManagedByLabel: specs.ManagedByValue}}},
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

	t.Run("a Service with externalIPs is refused", func(t *testing.T) {
		svc := built.ClientService.DeepCopy()
		svc.Spec.ExternalIPs = []string{"192.0.2.10"}
		_, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		requireRefused(t, err, "database-controller-services", "it sets externalIPs")
	})

	t.Run("only what it manages is deleted", func(t *testing.T) {
		// Dry runs: admission decides as for a real delete, and nothing goes if the policy
		// fails to refuse.
		dryRun := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		for name, labels := range map[string]map[string]string{
			"e2e-managed":   {specs.ManagedByLabel: specs.ManagedByValue},
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
		pod.Labels = map[string]string{specs.ManagedByLabel: specs.ManagedByValue}
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
