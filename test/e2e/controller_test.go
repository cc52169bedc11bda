//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"example.com/database-apiserver/internal/localcluster"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	dbcontroller "example.com/database-apiserver/pkg/controller/database"
)

// These tests run the controller the local control plane starts (bin/database-controller, as
// the ServiceAccount database-system/database-controller with the RBAC of artifacts/rbac):
// kwok runs the Pods and binds the PVCs, so a Database really turns Ready.

// readyTimeout bounds a Database's way to Ready: Pods start one after another, each Ready
// within a second or two under kwok.
const readyTimeout = 2 * time.Minute

// kube is the client-go clientset as admin.
func kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.AdminConfig)
	require.NoError(t, err)
	return cs
}

// testNamespace creates a namespace for one test, deleted (without waiting) when it ends.
func testNamespace(t *testing.T, name string) string {
	t.Helper()
	kubectl(t, "create", "namespace", name)
	t.Cleanup(func() {
		kubectlAs(cluster.KubeconfigPath, "", "delete", "namespace", name, "--wait=false")
	})
	return name
}

// restrictedNamespace is testNamespace labelled to enforce the latest "restricted" Pod
// Security Standard (https://kubernetes.io/docs/concepts/security/pod-security-admission/):
// kube-apiserver's PodSecurity admission refuses every Pod there that does not pass it.
func restrictedNamespace(t *testing.T, name string) string {
	t.Helper()
	testNamespace(t, name)
	kubectl(t, "label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
	return name
}

// databaseIn is a Database manifest in namespace ns; policy may be empty (the default).
func databaseIn(ns, name string, replicas int, policy examplev1.DeletionPolicy) string {
	m := `apiVersion: example.com/v1
kind: Database
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  engine: postgresql
  version: "16"
  replicas: ` + strconv.Itoa(replicas) + `
  storage: 1Gi
`
	if policy != "" {
		m += "  deletionPolicy: " + string(policy) + "\n"
	}
	return m
}

func getDatabase(t *testing.T, ns, name string) (*examplev1.Database, error) {
	return clientset(t).ExampleV1().Databases(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// waitReady waits until the Database's status describes its current generation with phase
// Ready, readyReplicas == replicas and the Ready condition True, and its StatefulSet asks for
// replicas. It returns the Database.
func waitReady(t *testing.T, ns, name string, replicas int32) *examplev1.Database {
	t.Helper()
	var db *examplev1.Database
	eventually(t, readyTimeout, func() error {
		var err error
		if db, err = getDatabase(t, ns, name); err != nil {
			return err
		}
		s := db.Status
		if s.ObservedGeneration != db.Generation || s.Phase != examplev1.DatabasePhaseReady ||
			s.ReadyReplicas != replicas || !meta.IsStatusConditionTrue(s.Conditions, "Ready") {
			return fmt.Errorf("%s/%s at generation %d: status %+v", ns, name, db.Generation, s)
		}
		sts, err := kube(t).AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas != replicas {
			return fmt.Errorf("StatefulSet %s/%s: spec.replicas %v, want %d", ns, name, sts.Spec.Replicas, replicas)
		}
		return nil
	})
	return db
}

// children are the objects a Database controls, by kind.
type children struct {
	StatefulSets []appsv1.StatefulSet
	Services     []corev1.Service
	Secrets      []corev1.Secret
	PDBs         []string
	PVCs         []corev1.PersistentVolumeClaim // every PVC of the namespace: the StatefulSet owns them
}

// childrenOf lists what the Database with uid controls in ns.
func childrenOf(t *testing.T, ns string, uid types.UID) children {
	t.Helper()
	ctx := context.Background()
	k := kube(t)
	controlled := func(o metav1.Object) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.UID == uid
	}
	var c children
	stss, err := k.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range stss.Items {
		if controlled(&o) {
			c.StatefulSets = append(c.StatefulSets, o)
		}
	}
	svcs, err := k.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range svcs.Items {
		if controlled(&o) {
			c.Services = append(c.Services, o)
		}
	}
	secrets, err := k.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range secrets.Items {
		if controlled(&o) {
			c.Secrets = append(c.Secrets, o)
		}
	}
	pdbs, err := k.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range pdbs.Items {
		if controlled(&o) {
			c.PDBs = append(c.PDBs, o.Name)
		}
	}
	pvcs, err := k.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	c.PVCs = pvcs.Items
	return c
}

// controllerClient is an HTTPS client for the controller's secure port that presents a client
// certificate for user in groups, or none when user is empty.
func controllerClient(t *testing.T, user string, groups ...string) *http.Client {
	t.Helper()
	c, err := cluster.ControllerClient(user, groups...)
	require.NoError(t, err)
	return c
}

// controllerMetrics returns the controller's /metrics text, read as a member of
// system:masters (authorized without a SubjectAccessReview, as kube-apiserver would anyway).
func controllerMetrics(t *testing.T) string {
	t.Helper()
	resp, err := controllerClient(t, "e2e-metrics-admin", "system:masters").Get(cluster.ControllerURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

// controllerLogMark is the length of the controller's log (<LogDir>/database-controller.log,
// which every run of the controller appends to): controllerLogSince reads what comes after it.
func controllerLogMark(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(cluster.LogDir(), localcluster.ControllerName+".log"))
	require.NoError(t, err)
	return fi.Size()
}

// controllerLogSince returns the controller's log written after mark.
func controllerLogSince(t *testing.T, mark int64) string {
	t.Helper()
	f, err := os.Open(filepath.Join(cluster.LogDir(), localcluster.ControllerName+".log"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(mark, io.SeekStart)
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}

// reconcileLineRE matches the line the controller logs at the end of each reconcile that
// succeeded (with a requeue or not), at verbosity 4 (TestMain's --vmodule): the Database is
// its "database" value, namespace/name.
var reconcileLineRE = regexp.MustCompile(`(?m)"Reconciled(, requeued)?".* database="([^"]+)"`)

// reconcilesOf counts the reconciles of the Database ns/name the controller logged after mark.
func reconcilesOf(t *testing.T, ns, name string, mark int64) int {
	t.Helper()
	n := 0
	for _, m := range reconcileLineRE.FindAllStringSubmatch(controllerLogSince(t, mark), -1) {
		if m[2] == ns+"/"+name {
			n++
		}
	}
	return n
}

// waitReconciles waits until the controller has logged at least n reconciles of the Database
// ns/name after mark (a resync reconciles every Database every 5s here), and returns how many.
func waitReconciles(t *testing.T, ns, name string, mark int64, n int) int {
	t.Helper()
	var got int
	eventually(t, time.Minute, func() error {
		if got = reconcilesOf(t, ns, name, mark); got < n {
			return fmt.Errorf("%d reconciles of %s/%s logged, want %d", got, ns, name, n)
		}
		return nil
	})
	return got
}

// waitLeading waits until the running controller holds the Lease.
func waitLeading(t *testing.T) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		if strings.Contains(controllerMetrics(t), `leader_election_master_status{name="database-controller"} 1`) {
			return nil
		}
		return fmt.Errorf("the controller does not lead yet")
	})
}

func TestControllerServesProbesAndMetricsAndHoldsTheLease(t *testing.T) {
	// The probes need no credentials (--authorization-always-allow-paths).
	anonymous := controllerClient(t, "")
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := anonymous.Get(cluster.ControllerURL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	waitLeading(t)
	metrics := controllerMetrics(t)
	require.Contains(t, metrics, `workqueue_adds_total{name="database-controller"}`)
	require.Contains(t, metrics, `rest_client_requests_total`)
	lease, err := kube(t).CoordinationV1().Leases("database-system").Get(context.Background(), "database-controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	require.NotEmpty(t, *lease.Spec.HolderIdentity)
}

// TestControllerRBACIsLeastPrivilege checks the controller's identity against the real RBAC:
// what it needs is allowed, what it does not need is not.
func TestControllerRBACIsLeastPrivilege(t *testing.T) {
	as := "--as=" + localcluster.ControllerUser
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "databases.example.com", "-A"}, "yes"},
		{[]string{"patch", "databases.example.com/status", "-n", "production"}, "yes"},
		{[]string{"update", "databases.example.com/finalizers", "-n", "production"}, "yes"},
		{[]string{"create", "statefulsets.apps", "-n", "production"}, "yes"},
		{[]string{"create", "persistentvolumeclaims", "-n", "production"}, "yes"},
		{[]string{"delete", "persistentvolumeclaims", "-n", "production"}, "yes"},
		{[]string{"watch", "persistentvolumeclaims", "-A"}, "yes"},
		{[]string{"create", "poddisruptionbudgets.policy", "-n", "production"}, "yes"},
		{[]string{"create", "networkpolicies.networking.k8s.io", "-n", "production"}, "yes"},
		{[]string{"watch", "networkpolicies.networking.k8s.io", "-A"}, "yes"},
		// Backup Jobs: created and read, never changed or deleted (the Job controller, their
		// TTL and the garbage collector see to them).
		{[]string{"create", "jobs.batch", "-n", "production"}, "yes"},
		{[]string{"watch", "jobs.batch", "-A"}, "yes"},
		{[]string{"update", "jobs.batch", "-n", "production"}, "no"},
		{[]string{"patch", "jobs.batch", "-n", "production"}, "no"},
		{[]string{"delete", "jobs.batch", "-n", "production"}, "no"},
		{[]string{"create", "cronjobs.batch", "-n", "production"}, "no"},
		{[]string{"create", "events", "-n", "production"}, "yes"},
		// The StatefulSet controller's Events say which Pods it is refused.
		{[]string{"watch", "events", "-A"}, "yes"},
		{[]string{"list", "events", "-A"}, "yes"},
		{[]string{"get", "events", "-n", "production"}, "no"},
		{[]string{"update", "events", "-n", "production"}, "no"},
		{[]string{"delete", "events", "-n", "production"}, "no"},
		{[]string{"update", "leases.coordination.k8s.io/database-controller", "-n", "database-system"}, "yes"},
		{[]string{"delete", "databases.example.com", "-n", "production"}, "no"},
		{[]string{"create", "databases.example.com", "-n", "production"}, "no"},
		{[]string{"create", "pods", "-n", "production"}, "no"},
		// Replication: role labels and the switchover's stop of the old primary, never a
		// shell in the database's Pods.
		{[]string{"patch", "pods", "-n", "production"}, "yes"},
		{[]string{"delete", "pods", "-n", "production"}, "yes"},
		{[]string{"update", "pods", "-n", "production"}, "no"},
		{[]string{"create", "pods/exec", "-n", "production"}, "no"},
		{[]string{"create", "configmaps", "-n", "production"}, "yes"},
		{[]string{"update", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"}, "no"},
		{[]string{"update", "leases.coordination.k8s.io/other", "-n", "database-system"}, "no"},
		{[]string{"create", "clusterroles.rbac.authorization.k8s.io"}, "no"},
	} {
		out, _, _ := kubectlAs(cluster.KubeconfigPath, "", append([]string{"auth", "can-i", as}, tc.args...)...)
		require.Equal(t, tc.want, strings.TrimSpace(out), "can-i %s", strings.Join(tc.args, " "))
	}
}

func TestExampleBecomesReadyWithItsChildren(t *testing.T) {
	applyExamples(t)
	// On the real node (the example's postgres:14.5 is one of its images) its first start
	// pulls the image and clones two standbys: up to realPodTimeout, in kubectl's bounded
	// waits.
	eventually(t, realPodTimeout, func() error {
		_, errOut, err := kubectlAs(cluster.KubeconfigPath, "", "wait", "--for=condition=Ready", "db/my-database", "-n", "production", "--timeout=1m")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	})
	db := waitReady(t, "production", "my-database", 3)
	require.Contains(t, db.Finalizers, "database.example.com/finalizer")

	c := childrenOf(t, "production", db.UID)
	require.Len(t, c.StatefulSets, 1)
	sts := c.StatefulSets[0]
	require.Equal(t, "my-database", sts.Name)
	require.Equal(t, "postgres:14.5", sts.Spec.Template.Spec.Containers[0].Image)
	require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
	require.Equal(t, "100Gi", sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String())

	require.Len(t, c.Services, 3, "a headless, a client and a read Service")
	var headless, client, read *corev1.Service
	for i, s := range c.Services {
		switch {
		case s.Spec.ClusterIP == corev1.ClusterIPNone:
			headless = &c.Services[i]
		case s.Name == "my-database-read":
			read = &c.Services[i]
		default:
			client = &c.Services[i]
		}
	}
	require.NotNil(t, headless, "no headless Service")
	require.True(t, headless.Spec.PublishNotReadyAddresses)
	require.Equal(t, headless.Name, sts.Spec.ServiceName)
	require.NotNil(t, client, "no client Service")
	// The client Service routes to the primary, the read Service to the replicas, by the role
	// label the controller keeps on the Pods.
	require.NotNil(t, read, "no read Service")
	require.Equal(t, "primary", client.Spec.Selector["database.example.com/role"])
	require.Equal(t, "replica", read.Spec.Selector["database.example.com/role"])
	eventually(t, 30*time.Second, func() error {
		for pod, role := range map[string]string{"my-database-0": "primary", "my-database-1": "replica", "my-database-2": "replica"} {
			p, err := kube(t).CoreV1().Pods("production").Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Labels["database.example.com/role"] != role {
				return fmt.Errorf("pod %s has role %q, want %q", pod, p.Labels["database.example.com/role"], role)
			}
		}
		return nil
	})
	require.Equal(t, "my-database-0", waitReady(t, "production", "my-database", 3).Status.Primary)
	require.Equal(t, "my-database", client.Name)
	require.Equal(t, int32(5432), client.Spec.Ports[0].Port)
	// A chart with the same recommended labels never shares our Pods.
	require.Equal(t, "database-controller", client.Spec.Selector["app.kubernetes.io/managed-by"])
	require.Equal(t, "database-controller", sts.Spec.Selector.MatchLabels["app.kubernetes.io/managed-by"])

	require.Len(t, c.Secrets, 1)
	require.Equal(t, "my-database-credentials", c.Secrets[0].Name)
	for _, key := range []string{"username", "password", "host", "port", "uri"} {
		require.NotEmpty(t, c.Secrets[0].Data[key], "credentials key %s", key)
	}
	require.Len(t, c.PDBs, 1, "replicas > 1 has a PodDisruptionBudget")

	var bound int
	for _, pvc := range c.PVCs {
		if strings.HasSuffix(pvc.Name, "-my-database-0") || strings.HasSuffix(pvc.Name, "-my-database-1") ||
			strings.HasSuffix(pvc.Name, "-my-database-2") {
			require.Equal(t, corev1.ClaimBound, pvc.Status.Phase, pvc.Name)
			bound++
		}
	}
	require.Equal(t, 3, bound, "one Bound PVC per replica")
}

func TestDescribeShowsConditionsAndEvents(t *testing.T) {
	applyExamples(t)
	waitReady(t, "production", "my-database", 3)
	var out string
	eventually(t, 30*time.Second, func() error {
		out = kubectl(t, "describe", "db", "my-database", "-n", "production")
		if !regexp.MustCompile(`(?m)^Events:\s*\n\s+Type\s+Reason\s+Age\s+From\s+Message`).MatchString(out) {
			return fmt.Errorf("no events in kubectl describe:\n%s", out)
		}
		return nil
	})
	require.Contains(t, out, "Conditions:")
	require.Regexp(t, `Type:\s+Ready`, out)
	require.Regexp(t, `Reason:\s+\S+`, out)
	require.Regexp(t, `Phase:\s+Ready`, out)
	require.Regexp(t, `(?m)^\s+Normal\s+\S+\s+.*database-controller`, out, "an Event from the controller")
}

func TestScaleIsReflectedInStatefulSetAndStatus(t *testing.T) {
	ns := testNamespace(t, "e2e-scale")
	kubectlIn(t, databaseIn(ns, "scaled", 3, ""), "apply", "-f", "-")
	waitReady(t, ns, "scaled", 3)
	for _, replicas := range []int32{5, 1} {
		kubectl(t, "scale", "db/scaled", "-n", ns, fmt.Sprintf("--replicas=%d", replicas))
		db := waitReady(t, ns, "scaled", replicas)
		eventually(t, 30*time.Second, func() error {
			sts, err := kube(t).AppsV1().StatefulSets(ns).Get(context.Background(), "scaled", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if sts.Status.ReadyReplicas != replicas {
				return fmt.Errorf("StatefulSet readyReplicas %d, want %d", sts.Status.ReadyReplicas, replicas)
			}
			if pdbs := childrenOf(t, ns, db.UID).PDBs; (replicas > 1) != (len(pdbs) == 1) {
				return fmt.Errorf("%d replicas with PodDisruptionBudgets %v", replicas, pdbs)
			}
			return nil
		})
	}
}

func TestDeletionPolicyDecidesWhatStays(t *testing.T) {
	ctx := context.Background()
	// deleteAndWait deletes the Database, waits until it is gone (the finalizer removed
	// after cleanup) and until the garbage collector removed its workload.
	deleteAndWait := func(t *testing.T, ns, name string) {
		t.Helper()
		kubectl(t, "delete", "db", name, "-n", ns, "--timeout=2m")
		eventually(t, time.Minute, func() error {
			_, err := kube(t).AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("StatefulSet %s/%s still there (%v)", ns, name, err)
			}
			svcs, err := kube(t).CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(svcs.Items) != 0 {
				return fmt.Errorf("%d Services still there", len(svcs.Items))
			}
			pdbs, err := kube(t).PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pdbs.Items) != 0 {
				return fmt.Errorf("%d PodDisruptionBudgets still there", len(pdbs.Items))
			}
			return nil
		})
	}

	t.Run("Delete removes the volumes and the credentials", func(t *testing.T) {
		ns := testNamespace(t, "e2e-policy-delete")
		kubectlIn(t, databaseIn(ns, "doomed", 2, examplev1.DeletionPolicyDelete), "apply", "-f", "-")
		waitReady(t, ns, "doomed", 2)
		require.Len(t, childrenOf(t, ns, "").PVCs, 2)

		deleteAndWait(t, ns, "doomed")
		eventually(t, time.Minute, func() error {
			pvcs := childrenOf(t, ns, "").PVCs
			if len(pvcs) != 0 {
				return fmt.Errorf("%d PVCs still there", len(pvcs))
			}
			_, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "doomed-credentials", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("the credentials Secret is still there (%v)", err)
			}
			return nil
		})
	})

	t.Run("Retain keeps the volumes and the credentials, released", func(t *testing.T) {
		ns := testNamespace(t, "e2e-policy-retain")
		kubectlIn(t, databaseIn(ns, "kept", 2, examplev1.DeletionPolicyRetain), "apply", "-f", "-")
		db := waitReady(t, ns, "kept", 2)
		secret, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "kept-credentials", metav1.GetOptions{})
		require.NoError(t, err)
		password := secret.Data["password"]

		deleteAndWait(t, ns, "kept")
		ownedByDB := func(refs []metav1.OwnerReference) bool {
			for _, r := range refs {
				if r.UID == db.UID {
					return true
				}
			}
			return false
		}
		// The garbage collector has acted on the Database's disappearance (deleteAndWait saw
		// it remove the StatefulSet, the Services and the PDB) and on the StatefulSet's: its
		// Pods are gone too.
		eventually(t, time.Minute, func() error {
			pods, err := kube(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(pods.Items) != 0 {
				return fmt.Errorf("%d Pods still there", len(pods.Items))
			}
			return nil
		})
		// The volumes and the Secret are there, and stay: without an owner, no later pass of
		// the garbage collector deletes them.
		pvcs := childrenOf(t, ns, "").PVCs
		require.Len(t, pvcs, 2)
		for _, pvc := range pvcs {
			require.Nil(t, pvc.DeletionTimestamp, pvc.Name)
			require.False(t, ownedByDB(pvc.OwnerReferences), "PVC %s still owned by the Database", pvc.Name)
			require.Empty(t, pvc.OwnerReferences, "PVC %s has an owner the garbage collector may act on", pvc.Name)
		}
		secret, err = kube(t).CoreV1().Secrets(ns).Get(ctx, "kept-credentials", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, secret.DeletionTimestamp)
		require.False(t, ownedByDB(secret.OwnerReferences), "the Secret is still owned by the Database")
		require.Empty(t, secret.OwnerReferences, "the Secret has an owner the garbage collector may act on")
		require.Equal(t, password, secret.Data["password"])
	})

	t.Run("DoNotTerminate refuses the delete until the policy changes", func(t *testing.T) {
		ns := testNamespace(t, "e2e-policy-dnt")
		kubectlIn(t, databaseIn(ns, "precious", 1, examplev1.DeletionPolicyDoNotTerminate), "apply", "-f", "-")
		waitReady(t, ns, "precious", 1)

		errOut := kubectlFails(t, cluster.KubeconfigPath, "", "delete", "db", "precious", "-n", ns)
		require.Contains(t, errOut, "DoNotTerminate")
		require.Contains(t, errOut, "deletionPolicy")
		db, err := getDatabase(t, ns, "precious")
		require.NoError(t, err)
		require.Nil(t, db.DeletionTimestamp)
		require.Len(t, childrenOf(t, ns, db.UID).StatefulSets, 1)

		kubectl(t, "patch", "db", "precious", "-n", ns, "--type=merge", "-p", `{"spec":{"deletionPolicy":"Delete"}}`)
		deleteAndWait(t, ns, "precious")
	})
}

// TestReadyDatabaseLeftAloneCausesNoWrites: reconciles keep happening (resyncs every few
// seconds in the e2e configuration), and none of them writes the Database or a child. The
// window is 20 s, or E2E_IDLE_WINDOW (a Go duration: `make test-faults` watches 5m), and
// counts only with at least two reconciles of the Database in it.
func TestReadyDatabaseLeftAloneCausesNoWrites(t *testing.T) {
	window := 20 * time.Second
	if v := os.Getenv("E2E_IDLE_WINDOW"); v != "" {
		var err error
		window, err = time.ParseDuration(v)
		require.NoError(t, err, "E2E_IDLE_WINDOW")
	}
	ns := testNamespace(t, "e2e-quiet")
	kubectlIn(t, databaseIn(ns, "quiet", 2, ""), "apply", "-f", "-")
	db := waitReady(t, ns, "quiet", 2)

	versions := func() map[string]string {
		db, err := getDatabase(t, ns, "quiet")
		require.NoError(t, err)
		v := map[string]string{"Database": db.ResourceVersion}
		c := childrenOf(t, ns, db.UID)
		for _, o := range c.StatefulSets {
			v["StatefulSet "+o.Name] = o.ResourceVersion
		}
		for _, o := range c.Services {
			v["Service "+o.Name] = o.ResourceVersion
		}
		for _, o := range c.Secrets {
			v["Secret "+o.Name] = o.ResourceVersion
		}
		for _, o := range c.PVCs {
			v["PVC "+o.Name] = o.ResourceVersion
		}
		pdbs, err := kube(t).PolicyV1().PodDisruptionBudgets(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, o := range pdbs.Items {
			v["PodDisruptionBudget "+o.Name] = o.ResourceVersion
		}
		cms, err := kube(t).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=database-controller"})
		require.NoError(t, err)
		for _, o := range cms.Items {
			v["ConfigMap "+o.Name] = o.ResourceVersion
		}
		return v
	}
	// Settled: the PVCs' and the Database's last status writes come right after Ready. The
	// window starts once a reconcile ran between two equal readings.
	var before map[string]string
	settled := time.Now()
	for attempt := 1; ; attempt++ {
		mark, first := controllerLogMark(t), versions()
		waitReconciles(t, ns, "quiet", mark, 1)
		if before = versions(); maps.Equal(first, before) {
			break
		}
		require.Less(t, attempt, 10, "%s/quiet still written after %d reconciles: %v, then %v", ns, attempt, first, before)
	}
	t.Logf("measured: settled %v after Ready", time.Since(settled).Round(100*time.Millisecond))
	require.Len(t, before, 1+1+3+1+2+1+1, "Database, StatefulSet, 3 Services, Secret, 2 PVCs, PDB, replication ConfigMap: %v", before)

	mark := controllerLogMark(t)
	time.Sleep(window) // the window observed, not a wait for an event
	passes := waitReconciles(t, ns, "quiet", mark, 2)
	after := versions()
	written := 0
	for name, version := range before {
		if after[name] != version {
			written++
		}
	}
	t.Logf("measured: idle Ready Database: %d of %d objects (it and its children) written in %v, over %d reconciles of it",
		written, len(before), window, passes)
	require.Equal(t, before, after, "something wrote to %s/%s or its children while it was left alone", ns, db.Name)
}

func TestForeignServiceWithTheDatabasesNameIsNotTouched(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-foreign")
	foreign, err := kube(t).CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Labels: map[string]string{"team": "someone-else"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "someone-else"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	kubectlIn(t, databaseIn(ns, "taken", 1, ""), "apply", "-f", "-")
	var reported string
	eventually(t, time.Minute, func() error {
		db, err := getDatabase(t, ns, "taken")
		if err != nil {
			return err
		}
		for _, c := range db.Status.Conditions {
			if c.Type == "Ready" && c.Status != metav1.ConditionTrue && strings.Contains(c.Message, "taken") {
				reported = c.Reason + ": " + c.Message
				return nil
			}
		}
		return fmt.Errorf("the Ready condition does not report the Service: %+v", db.Status.Conditions)
	})
	t.Logf("Ready condition: %s", reported)
	eventually(t, 30*time.Second, func() error {
		events, err := kube(t).CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Database,involvedObject.name=taken"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "taken") {
				require.Equal(t, "example.com/v1", e.InvolvedObject.APIVersion)
				return nil
			}
		}
		return fmt.Errorf("no Warning Event on the Database about the Service: %+v", events.Items)
	})

	svc, err := kube(t).CoreV1().Services(ns).Get(ctx, "taken", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, foreign.ResourceVersion, svc.ResourceVersion, "the foreign Service was written")
	require.Empty(t, svc.OwnerReferences)
	require.Equal(t, map[string]string{"app": "someone-else"}, svc.Spec.Selector)
}

func TestDeletingNamespaceRemovesDatabasesAndChildren(t *testing.T) {
	const ns = "e2e-ns-cascade"
	kubectl(t, "create", "namespace", ns)
	for _, name := range []string{"first", "second"} {
		kubectlIn(t, databaseIn(ns, name, 2, ""), "apply", "-f", "-")
	}
	waitReady(t, ns, "first", 2)
	waitReady(t, ns, "second", 2)

	kubectl(t, "delete", "namespace", ns, "--timeout=2m")
	_, err := kube(t).CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "namespace %s still there: %v", ns, err)
	list, err := clientset(t).ExampleV1().Databases(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "Databases survive in our server's etcd")
}

// TestControllerKilledWhileCreatingDatabasesConverges SIGKILLs the controller three times
// while 21 Databases are created, seven in each of its terms, restarts it each time (the new
// process waits for the dead one's Lease to expire), and checks that every Database ends
// Ready with exactly one of each child: no duplicate, no orphan, no second Secret.
//
// Each kill comes right after a create picked at random among the term's first six, so that
// at least one more comes while the controller is dead; and each must land mid-creation: a
// Database created before it is not Ready, read once the process is gone (nothing else
// writes a Database's status). The seed of the random choices is logged; E2E_SEED=<seed>
// replays them.
func TestControllerKilledWhileCreatingDatabasesConverges(t *testing.T) {
	const (
		kills = 3
		batch = 7 // Databases created in each term of the controller
		count = kills * batch
	)
	ctx := context.Background()
	ns := testNamespace(t, "e2e-crash")
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("E2E_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "E2E_SEED")
	}
	t.Logf("random seed %d (E2E_SEED=%d replays the create pauses and the kill points)", seed, seed)
	// One source each: the creates and the kills run in two goroutines.
	createRNG, killRNG := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 2))

	// The creates: batch after batch, each once the test says the controller leads; the index
	// of each Database goes to applied once kubectl apply returned.
	terms := make([]chan struct{}, kills)
	for i := range terms {
		terms[i] = make(chan struct{})
	}
	applied := make(chan int, count)
	abandon := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(abandon)
	created := make(chan error, 1)
	wg.Go(func() {
		var errs []string
		for b := range kills {
			select {
			case <-terms[b]:
			case <-abandon:
				return
			}
			for i := b * batch; i < (b+1)*batch; i++ {
				manifest := databaseIn(ns, fmt.Sprintf("db-%02d", i), 1, "")
				if _, errOut, err := kubectlAs(cluster.KubeconfigPath, manifest, "apply", "-f", "-"); err != nil {
					errs = append(errs, errOut)
				}
				applied <- i
				time.Sleep(time.Duration(100+createRNG.IntN(400)) * time.Millisecond) // the pace of the creates
			}
		}
		if len(errs) > 0 {
			created <- fmt.Errorf("creating Databases: %s", strings.Join(errs, "\n"))
			return
		}
		created <- nil
	})

	started := time.Now()
	for k := range kills {
		waitLeading(t)
		close(terms[k])
		// Right after the create picked (one of the batch's first six, so at least one more
		// comes while the controller is dead).
		after := k*batch + killRNG.IntN(batch-1)
		for i := range applied {
			if i == after {
				break
			}
		}
		existing, err := clientset(t).ExampleV1().Databases(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NoError(t, cluster.Kill(localcluster.ControllerName))
		at := time.Since(started).Round(100 * time.Millisecond)
		// Read with the controller gone: what was not Ready when it died is not Ready now.
		var notReady, incomplete []string
		for _, d := range existing.Items {
			now, err := getDatabase(t, ns, d.Name)
			require.NoError(t, err)
			if !meta.IsStatusConditionTrue(now.Status.Conditions, "Ready") {
				notReady = append(notReady, d.Name)
			}
			if c := childrenOf(t, ns, now.UID); len(c.StatefulSets) != 1 || len(c.Services) != 2 || len(c.Secrets) != 1 {
				incomplete = append(incomplete, d.Name)
			}
		}
		t.Logf("measured: controller SIGKILLed (kill %d) %v into the creates, right after db-%02d: of %d Databases created, %d not Ready %v, %d without all their children %v",
			k+1, at, after, len(existing.Items), len(notReady), notReady, len(incomplete), incomplete)
		require.NotEmpty(t, notReady, "kill %d came after every Database created so far was Ready, not mid-creation", k+1)
		require.NoError(t, cluster.StartController(ctx))
	}
	require.NoError(t, <-created)
	waitLeading(t)

	for i := range count {
		name := fmt.Sprintf("db-%02d", i)
		db := waitReady(t, ns, name, 1)
		c := childrenOf(t, ns, db.UID)
		require.Len(t, c.StatefulSets, 1, name)
		require.Len(t, c.Services, 2, name)
		require.Len(t, c.Secrets, 1, name)
		require.Empty(t, c.PDBs, name)
		require.Equal(t, []string{"database.example.com/finalizer"}, db.Finalizers, name)
	}
	// Nothing the controller made is left without its Database.
	k := kube(t)
	stss, err := k.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, stss.Items, count)
	svcs, err := k.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, svcs.Items, 2*count)
	secrets, err := k.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=database-controller"})
	require.NoError(t, err)
	require.Len(t, secrets.Items, count)
	pvcs, err := k.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pvcs.Items, count)
	t.Logf("measured: controller SIGKILLed %d times: %d Databases Ready, %d StatefulSets, %d Services, %d Secrets, %d PVCs (exactly one set each)",
		kills, count, len(stss.Items), len(svcs.Items), len(secrets.Items), len(pvcs.Items))
}

// waitCondition waits until the Database's condition typ has reason, and returns the Database.
func waitCondition(t *testing.T, ns, name, typ, reason string) *examplev1.Database {
	t.Helper()
	var db *examplev1.Database
	eventually(t, time.Minute, func() error {
		var err error
		if db, err = getDatabase(t, ns, name); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(db.Status.Conditions, typ); c == nil || c.Reason != reason {
			return fmt.Errorf("%s/%s: condition %s is %+v, want reason %s", ns, name, typ, c, reason)
		}
		return nil
	})
	return db
}

func TestRetainedDataIsAdoptedByADatabaseOfTheSameName(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-readopt")
	kubectlIn(t, databaseIn(ns, "again", 1, examplev1.DeletionPolicyRetain), "apply", "-f", "-")
	waitReady(t, ns, "again", 1)
	secret, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "again-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	kubectl(t, "delete", "db", "again", "-n", ns, "--timeout=2m")
	kept, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "again-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, ns+"/again", kept.Annotations["database.example.com/retained-from"])
	// The release is recorded where tenants cannot write: the controller's namespace.
	records := kube(t).CoreV1().ConfigMaps(localcluster.APIServerNamespace)
	record, err := records.Get(ctx, dbcontroller.ReleasedRecordName(ns, "again"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Secret again-credentials", record.Data[string(kept.UID)])
	require.Len(t, record.Data, 2, "the Secret and the claim: %v", record.Data)

	kubectlIn(t, databaseIn(ns, "again", 1, examplev1.DeletionPolicyDelete), "apply", "-f", "-")
	db := waitReady(t, ns, "again", 1)
	c := childrenOf(t, ns, db.UID)
	require.Len(t, c.Secrets, 1, "the kept Secret is adopted")
	require.Equal(t, secret.Data["password"], c.Secrets[0].Data["password"], "the old data keeps its password")
	require.Len(t, c.PVCs, 1)
	require.Equal(t, db.UID, metav1.GetControllerOf(&c.PVCs[0]).UID, "the kept claim is adopted")
	_, err = records.Get(ctx, dbcontroller.ReleasedRecordName(ns, "again"), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "everything recorded is adopted: the record is deleted (%v)", err)
}

// TestLookAlikeOfARetainedSecretIsNotAdopted plants, as a tenant may, a Secret named as a
// Database's credentials and marked retained-from it, with a password the planter knows,
// before the Database exists: the Database does not adopt it (no Retain of the controller
// released it), says so, and runs nothing on it.
func TestLookAlikeOfARetainedSecretIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-planted")
	planted, err := kube(t).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "planted-credentials",
			Annotations: map[string]string{"database.example.com/retained-from": ns + "/planted"}},
		StringData: map[string]string{"username": "postgres", "password": "known-to-the-planter"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubectlIn(t, databaseIn(ns, "planted", 1, ""), "apply", "-f", "-")
	db := waitCondition(t, ns, "planted", "Ready", "ChildConflict")
	require.Contains(t, meta.FindStatusCondition(db.Status.Conditions, "Ready").Message,
		"Secret planted-credentials carries database.example.com/retained-from="+ns+"/planted but is not adopted: this controller did not release it")
	require.Empty(t, childrenOf(t, ns, db.UID).StatefulSets, "nothing runs with the planted password")
	after, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "planted-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, after.OwnerReferences, "not adopted")
	require.Equal(t, planted.ResourceVersion, after.ResourceVersion, "left untouched")
	events, err := kube(t).CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=planted,reason=ChildConflict"})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items, "a Warning Event names the planted Secret")
}

// TestDeletingTheCredentialsSecretKeepsThePassword: kubectl delete on a live Database's
// Secret leaves it Terminating with its data (the controller's finalizer), the Database
// reports it, and deleting the Database lets the Secret go.
func TestDeletingTheCredentialsSecretKeepsThePassword(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-credentials")
	kubectlIn(t, databaseIn(ns, "keyed", 1, examplev1.DeletionPolicyDelete), "apply", "-f", "-")
	waitReady(t, ns, "keyed", 1)
	before, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "keyed-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, before.Finalizers, "database.example.com/credentials")

	kubectl(t, "delete", "secret", "keyed-credentials", "-n", ns, "--wait=false")
	db := waitCondition(t, ns, "keyed", "Degraded", "CredentialsDeleting")
	require.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(db.Status.Conditions, "Degraded").Status)
	after, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "keyed-credentials", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, after.DeletionTimestamp)
	require.Equal(t, before.UID, after.UID, "the same Secret, never a new one")
	require.Equal(t, before.Data["password"], after.Data["password"], "the password the data directory holds")

	kubectl(t, "delete", "db", "keyed", "-n", ns, "--wait=false")
	eventually(t, time.Minute, func() error {
		if _, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "keyed-credentials", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Secret still there: %v", err)
		}
		return nil
	})
}

func TestDoNotTerminateProtectsTheDataWithAFinalizer(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-protect")
	kubectlIn(t, databaseIn(ns, "guarded", 1, examplev1.DeletionPolicyDoNotTerminate), "apply", "-f", "-")
	waitReady(t, ns, "guarded", 1)
	finalizers := func() (secret, claim []string) {
		s, err := kube(t).CoreV1().Secrets(ns).Get(ctx, "guarded-credentials", metav1.GetOptions{})
		require.NoError(t, err)
		pvc, err := kube(t).CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-guarded-0", metav1.GetOptions{})
		require.NoError(t, err)
		return s.Finalizers, pvc.Finalizers
	}
	eventually(t, 30*time.Second, func() error {
		if s, c := finalizers(); !slices.Contains(s, "database.example.com/protect") || !slices.Contains(c, "database.example.com/protect") {
			return fmt.Errorf("finalizers: Secret %v, PVC %v", s, c)
		}
		return nil
	})
	kubectl(t, "patch", "db", "guarded", "-n", ns, "--type=merge", "-p", `{"spec":{"deletionPolicy":"Delete"}}`)
	eventually(t, 30*time.Second, func() error {
		if s, c := finalizers(); slices.Contains(s, "database.example.com/protect") || slices.Contains(c, "database.example.com/protect") {
			return fmt.Errorf("finalizers: Secret %v, PVC %v", s, c)
		}
		return nil
	})
}

func TestForeignClaimWithADataClaimNameIsNotMounted(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-foreign-pvc")
	foreign, err := kube(t).CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-squatted-0"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubectlIn(t, databaseIn(ns, "squatted", 1, ""), "apply", "-f", "-")
	db := waitCondition(t, ns, "squatted", "Ready", "ChildConflict")
	require.Empty(t, childrenOf(t, ns, db.UID).StatefulSets, "no StatefulSet mounts the foreign claim")
	pvc, err := kube(t).CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-squatted-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, pvc.OwnerReferences)
	require.Equal(t, foreign.Labels, pvc.Labels)

	// Its deletion is an event for the Database of its name: no waiting for the conflict's
	// one-minute requeue (RequeueAfterExternal), well inside of which the Database is Ready.
	require.NoError(t, kube(t).CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-squatted-0", metav1.DeleteOptions{}))
	eventually(t, 40*time.Second, func() error {
		db, err := getDatabase(t, ns, "squatted")
		if err != nil {
			return err
		}
		if db.Status.Phase != examplev1.DatabasePhaseReady {
			return fmt.Errorf("phase %s", db.Status.Phase)
		}
		return nil
	})
}

// TestRefusedExpansionDoesNotBlockOtherChanges: kwok's StorageClass does not allow volume
// expansion.
func TestRefusedExpansionDoesNotBlockOtherChanges(t *testing.T) {
	ns := testNamespace(t, "e2e-no-expand")
	kubectlIn(t, databaseIn(ns, "fixed", 1, ""), "apply", "-f", "-")
	waitReady(t, ns, "fixed", 1)
	kubectl(t, "patch", "db", "fixed", "-n", ns, "--type=merge", "-p", `{"spec":{"storage":"2Gi","replicas":2}}`)
	db := waitCondition(t, ns, "fixed", "Degraded", "StorageExpansionFailed")
	eventually(t, readyTimeout, func() error {
		sts, err := kube(t).AppsV1().StatefulSets(ns).Get(context.Background(), "fixed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *sts.Spec.Replicas != 2 || sts.Status.ReadyReplicas != 2 {
			return fmt.Errorf("StatefulSet replicas %d, ready %d", *sts.Spec.Replicas, sts.Status.ReadyReplicas)
		}
		return nil
	})
	require.NotEqual(t, examplev1.DatabasePhaseFailed, db.Status.Phase)
}

// TestDeletionDuringAStatefulSetReplacementLeavesNothing plays a storage increase caught
// half-way: the StatefulSet deleted with propagationPolicy Orphan (its Pods keep running,
// without a controller) and the Database deleted before the controller created it again.
// The controller is stopped meanwhile, so the state is exactly that. No Pod nor claim may
// survive the Database.
func TestDeletionDuringAStatefulSetReplacementLeavesNothing(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-replace-delete")
	kubectlIn(t, databaseIn(ns, "grown", 1, ""), "apply", "-f", "-")
	waitReady(t, ns, "grown", 1)

	require.NoError(t, cluster.Kill(localcluster.ControllerName))
	kubectl(t, "delete", "statefulset", "grown", "-n", ns, "--cascade=orphan", "--timeout=1m")
	kubectl(t, "delete", "db", "grown", "-n", ns, "--wait=false")
	require.NoError(t, cluster.StartController(ctx))

	eventually(t, 2*time.Minute, func() error {
		if _, err := getDatabase(t, ns, "grown"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Database is still there (%v)", err)
		}
		pods, err := kube(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pvcs, err := kube(t).CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items)+len(pvcs.Items) != 0 {
			return fmt.Errorf("%d Pods and %d PVCs left", len(pods.Items), len(pvcs.Items))
		}
		return nil
	})
}

// TestQuotaErrorsReachStatusAndEvents: a ResourceQuota refusing the Services is a transient
// error, retried with backoff, and the Database says so.
func TestQuotaErrorsReachStatusAndEvents(t *testing.T) {
	ctx := context.Background()
	ns := testNamespace(t, "e2e-quota")
	zeroQuota(t, ns, "no-services", corev1.ResourceServices)
	kubectlIn(t, databaseIn(ns, "limited", 1, ""), "apply", "-f", "-")
	db := waitCondition(t, ns, "limited", "Progressing", "ReconcileError")
	require.Contains(t, meta.FindStatusCondition(db.Status.Conditions, "Progressing").Message, "Service")
	eventually(t, 30*time.Second, func() error {
		events, err := kube(t).CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Database,involvedObject.name=limited,reason=ReconcileError"})
		if err != nil {
			return err
		}
		if len(events.Items) == 0 {
			return fmt.Errorf("no ReconcileError Event")
		}
		return nil
	})
}

// TestEveryEngineRunsInARestrictedNamespace creates a Database of each engine in a namespace
// that enforces the "restricted" Pod Security Standard, where a Pod without the restricted
// settings is refused: each becomes Ready, so its Pods were admitted. (The real-node tests
// run PostgreSQL's server itself under those settings.)
func TestEveryEngineRunsInARestrictedNamespace(t *testing.T) {
	ns := restrictedNamespace(t, "e2e-restricted")
	out := kubectlFails(t, cluster.KubeconfigPath, `apiVersion: v1
kind: Pod
metadata:
  name: unrestricted
  namespace: `+ns+`
spec:
  containers:
  - {name: c, image: postgres:16}
`, "apply", "-f", "-")
	require.Contains(t, out, `violates PodSecurity "restricted:latest"`)

	for _, db := range []struct{ name, engine, version string }{
		{"pg", "postgresql", "16"}, {"mysql", "mysql", "8.4"}, {"mongo", "mongodb", "7.0"},
	} {
		kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: `+db.name+`
  namespace: `+ns+`
spec:
  engine: `+db.engine+`
  version: "`+db.version+`"
  replicas: 2
  storage: 1Gi
`, "apply", "-f", "-")
	}
	for _, db := range []string{"pg", "mysql", "mongo"} {
		waitReady(t, ns, db, 2)
	}
}

// zeroQuota creates the ResourceQuota name in ns with a hard limit of 0 on res, and waits
// until the quota controller has computed its status: only then does admission enforce it.
func zeroQuota(t *testing.T, ns, name string, res corev1.ResourceName) {
	t.Helper()
	ctx := context.Background()
	_, err := kube(t).CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{res: resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, time.Minute, func() error {
		q, err := kube(t).CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(q.Status.Hard) == 0 {
			err = fmt.Errorf("quota %s status not computed yet", name)
		}
		return err
	})
}

// A new MongoDB Database becomes Ready with an application user of its own: the Secret's
// username is app, in the Database's database, its URI authenticates there, the root user is
// in superuser-*, and the Pods mount the initialisation ConfigMap that creates the user.
func TestMongoDBHasAnApplicationUser(t *testing.T) {
	ns := testNamespace(t, "e2e-mongo-app")
	kubectlIn(t, `apiVersion: example.com/v1
kind: Database
metadata:
  name: orders
  namespace: `+ns+`
spec:
  engine: mongodb
  version: "7.0"
  replicas: 1
  storage: 1Gi
`, "apply", "-f", "-")
	db := waitReady(t, ns, "orders", 1)

	c := childrenOf(t, ns, db.UID)
	require.Len(t, c.Secrets, 1)
	data := c.Secrets[0].Data
	require.Equal(t, "app", string(data["username"]))
	require.Equal(t, "orders", string(data["database"]))
	require.Equal(t, "admin", string(data["superuser-username"]))
	require.NotEqual(t, string(data["password"]), string(data["superuser-password"]))
	require.Equal(t, "mongodb://app:"+string(data["password"])+"@orders."+ns+".svc.cluster.local:27017/orders?authSource=orders", string(data["uri"]))

	cm, err := kube(t).CoreV1().ConfigMaps(ns).Get(context.Background(), "orders-initdb", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, db.UID, metav1.GetControllerOf(cm).UID)
	require.Contains(t, cm.Data["application-user.js"], "db.createUser(")
	require.Len(t, c.StatefulSets, 1)
	require.Contains(t, c.StatefulSets[0].Spec.Template.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "initdb", MountPath: "/docker-entrypoint-initdb.d", ReadOnly: true})

	conn := kubectl(t, "get", "--raw", "/apis/example.com/v1/namespaces/"+ns+"/databases/orders/connection")
	require.Contains(t, conn, `"username":"app"`)
	require.Contains(t, conn, `"database":"orders"`)
}
